"""MessageStore against an in-memory model: put, put_batch, get_messages, query_messages,
offset_by_time and reopen, with small files so rollovers and blanks happen often."""

from __future__ import annotations

import shutil
import tempfile

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from rocketstore import GetStatus, Message, MessageStore, StoreConfig

TOPICS = ("TopicA", "TopicB")
KEYS = ("k1", "k2", "k3", "shared")
CONFIG = StoreConfig(
    mapped_file_size_commit_log=2048,
    mapped_file_size_consume_queue=100,  # 5 units per file
    max_hash_slot_num=8,
    max_index_num=16,  # 15 entries per index file: frequent rollover
)


class StoreModel(RuleBasedStateMachine):
    @initialize()
    def open_store(self) -> None:
        self.root = tempfile.mkdtemp(prefix="rocketstore-model-")
        self.store = MessageStore.open(self.root, CONFIG)
        self.clock = 1_700_000_000_000
        # (topic, queue) -> list of (body, keys, store_ts, commit_log_offset)
        self.model: dict[tuple[str, int], list[tuple[bytes, str, int, int]]] = {}

    def teardown(self) -> None:
        if hasattr(self, "store"):
            self.store.close()
            shutil.rmtree(self.root, ignore_errors=True)

    def _message(self, topic: str, queue_id: int, body: bytes, keys: str) -> Message:
        return Message(topic, body, queue_id=queue_id, properties={"KEYS": keys, "TAGS": "T"})

    def _record(self, msg: Message, store_ts: int, offset: int) -> None:
        self.model.setdefault((msg.topic, msg.queue_id), []).append(
            (msg.body, msg.properties["KEYS"], store_ts, offset)
        )

    @rule(
        topic=st.sampled_from(TOPICS),
        queue_id=st.integers(0, 1),
        body=st.binary(min_size=0, max_size=300),
        keys=st.lists(st.sampled_from(KEYS), min_size=1, max_size=2, unique=True),
        step_ms=st.integers(0, 1500),
    )
    def put(self, topic: str, queue_id: int, body: bytes, keys: list[str], step_ms: int) -> None:
        self.clock += step_ms
        msg = self._message(topic, queue_id, body, " ".join(keys))
        result = self.store.put(msg, store_timestamp=self.clock)
        assert result.ok, result
        assert result.queue_offset == len(self.model.get((topic, queue_id), []))
        self._record(msg, self.clock, result.commit_log_offset)

    @rule(
        topic=st.sampled_from(TOPICS),
        queue_id=st.integers(0, 1),
        bodies=st.lists(st.binary(max_size=120), min_size=1, max_size=6),
    )
    def put_batch(self, topic: str, queue_id: int, bodies: list[bytes]) -> None:
        self.clock += 7
        msgs = [self._message(topic, queue_id, b, "k3") for b in bodies]
        results = self.store.put_batch(msgs, store_timestamp=self.clock)
        assert all(r.ok for r in results)
        base = len(self.model.get((topic, queue_id), []))
        assert [r.queue_offset for r in results] == list(range(base, base + len(msgs)))
        for msg, r in zip(msgs, results, strict=True):
            self._record(msg, self.clock, r.commit_log_offset)

    @rule()
    def reopen(self) -> None:
        self.store.close()
        self.store = MessageStore.open(self.root, CONFIG)

    @rule(topic=st.sampled_from(TOPICS), queue_id=st.integers(0, 1), data=st.data())
    def get_messages(self, topic: str, queue_id: int, data: st.DataObject) -> None:
        self.store.wait_dispatched()
        expected = self.model.get((topic, queue_id), [])
        if not expected:
            got = self.store.get_messages("g", topic, queue_id, 0)
            assert got.status is GetStatus.NO_MESSAGE_IN_QUEUE
            return
        start = data.draw(st.integers(0, len(expected) - 1))
        got = self.store.get_messages("g", topic, queue_id, start, max_count=4)
        assert got.status is GetStatus.FOUND
        assert 1 <= len(got.messages) <= 4
        for i, message in enumerate(got.messages):
            body, keys, ts, offset = expected[start + i]
            assert (message.body, message.keys, message.store_timestamp) == (body, keys, ts)
            assert message.commit_log_offset == offset
            assert message.queue_offset == start + i
        assert got.next_begin_offset == start + len(got.messages)

    @rule(topic=st.sampled_from(TOPICS), key=st.sampled_from(KEYS))
    def query_messages(self, topic: str, key: str) -> None:
        self.store.wait_dispatched()
        expected = sorted(
            offset
            for (t, _q), items in self.model.items()
            if t == topic
            for _b, keys, _ts, offset in items
            if key in keys.split(" ")
        )
        found = self.store.query_messages(topic, key, max_count=10_000)
        assert [m.commit_log_offset for m in found] == expected

    @rule(topic=st.sampled_from(TOPICS), queue_id=st.integers(0, 1), data=st.data())
    def offset_by_time(self, topic: str, queue_id: int, data: st.DataObject) -> None:
        self.store.wait_dispatched()
        items = self.model.get((topic, queue_id), [])
        if not items:
            return
        ts = data.draw(st.integers(items[0][2] - 2000, items[-1][2] + 2000))
        lower = self.store.offset_by_time(topic, queue_id, ts, "lower")
        upper = self.store.offset_by_time(topic, queue_id, ts, "upper")
        times = [t for _b, _k, t, _o in items]
        assert lower == next((i for i, t in enumerate(times) if t >= ts), len(times))
        last_le = [i for i, t in enumerate(times) if t <= ts]
        assert upper == (last_le[-1] if last_le else 0)

    @invariant()
    def offsets_agree(self) -> None:
        if not hasattr(self, "store"):
            return
        for (topic, queue_id), items in self.model.items():
            assert self.store.max_offset(topic, queue_id) <= len(items)


TestStoreModel = StoreModel.TestCase
TestStoreModel.settings = settings(max_examples=25, stateful_step_count=30, deadline=None)
