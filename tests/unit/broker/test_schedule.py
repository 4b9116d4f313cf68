"""Delayed delivery (ScheduleMessageService, DeliverDelayedMessageTimerTask) with an
injected clock: due / not due, queue order, restart resume, REAL_TOPIC restored, the
delivered record's bytes, retries, failures, delayOffset.json."""

from __future__ import annotations

import dataclasses
import json
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.broker.schedule import (
    ScheduleService,
    decode_delay_offset_file,
    delivered_message,
    encode_delay_offset_file,
    level_to_queue_id,
    queue_id_to_level,
)
from rocketstore.errors import ConfigError, CorruptDataError
from rocketstore.format import record as rec
from rocketstore.format.javahash import java_hashmap_order
from rocketstore.format.message import MessageExt
from rocketstore.paths import SCHEDULE_TOPIC
from rocketstore.put_path import PutResult
from rocketstore.status import PutStatus

BASE_MS = 1_700_000_000_000
TOPIC = "Orders"
CONFIG = StoreConfig(
    mapped_file_size_commit_log=256 * 1024,
    mapped_file_size_consume_queue=100 * 20,
    max_hash_slot_num=64,
    max_index_num=256,
)
LEVEL_2_MS = 5000  # "1s 5s 10s ...": level 2 is 5 s


class Clock:
    def __init__(self, now: int = BASE_MS) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MessageStore]:
    opened = MessageStore.open(tmp_path / "store", CONFIG)
    yield opened
    opened.close()


def delayed(i: int = 0, level: int = 2, **changes: object) -> Message:
    values: dict[str, object] = {
        "topic": TOPIC,
        "body": f"order {i}".encode(),
        "queue_id": 2,
        "flag": 7,
        "properties": {
            "TAGS": "paid",
            "KEYS": f"order-{i}",
            "UNIQ_KEY": f"0A010203000078D4{i:016X}",
            "DELAY": str(level),
            "WAIT": "true",
        },
        "born_timestamp": BASE_MS - 500,
        "born_host": "10.1.2.3:40000",
    }
    values.update(changes)
    return Message(**values)  # type: ignore[arg-type]


def put_delayed(store: MessageStore, message: Message, store_ms: int = BASE_MS) -> PutResult:
    result = store.put(message, store_timestamp=store_ms)
    assert result.ok, result
    store.wait_dispatched()
    return result


def real_messages(store: MessageStore, topic: str = TOPIC, queue_id: int = 2) -> list[MessageExt]:
    store.wait_dispatched()
    return store.get_messages("g", topic, queue_id, 0, 32).messages


def test_queue_ids_and_levels() -> None:
    assert level_to_queue_id(3) == 2
    assert queue_id_to_level(2) == 3


def test_scheduled_record_carries_its_deliver_time(store: MessageStore) -> None:
    put_delayed(store, delayed(level=2))
    unit = store.queues[(SCHEDULE_TOPIC, 1)].unit(0)
    assert unit is not None
    assert unit.tags_code == BASE_MS + LEVEL_2_MS  # computeDeliverTimestamp


def test_level_above_the_max_is_the_max(store: MessageStore) -> None:
    # CommitLog.checkMessageAndReturnSize clamps the level to maxDelayLevel (18 = 2 h).
    put_delayed(store, delayed(level=99))
    unit = store.queues[(SCHEDULE_TOPIC, 17)].unit(0)
    assert unit is not None and unit.tags_code == BASE_MS + 7_200_000
    service = ScheduleService(store, clock=Clock(BASE_MS + 7_199_999))
    assert service.run_once() == 0
    service.clock = Clock(BASE_MS + 7_200_000)
    assert service.run_once() == 1
    assert service.offsets() == {18: 1}


def test_not_due_then_due(store: MessageStore) -> None:
    put_delayed(store, delayed())
    clock = Clock(BASE_MS + LEVEL_2_MS - 1)
    service = ScheduleService(store, clock=clock)
    assert service.run_once() == 0
    assert real_messages(store) == []
    assert service.offset(2) == 0
    clock.now += 1
    assert service.run_once() == 1
    assert service.offset(2) == 1
    assert service.run_once() == 0  # nothing twice
    (message,) = real_messages(store)
    assert message.topic == TOPIC and message.queue_id == 2
    assert message.body == b"order 0"
    # RocketMQ's delivered record keeps DELAY: it writes the properties string first.
    assert message.properties["DELAY"] == "2"
    assert message.properties["REAL_TOPIC"] == TOPIC
    assert message.properties["REAL_QID"] == "2"


def test_the_first_message_not_due_ends_the_level(store: MessageStore) -> None:
    for i, store_ms in enumerate((BASE_MS, BASE_MS + 3000, BASE_MS + 1000)):
        put_delayed(store, delayed(i), store_ms)
    service = ScheduleService(store, clock=Clock(BASE_MS + LEVEL_2_MS + 1500))
    # Message 2 is due too, but it waits behind message 1, as in RocketMQ.
    assert service.run_once() == 1
    assert service.offset(2) == 1
    service.clock = Clock(BASE_MS + LEVEL_2_MS + 3000)
    assert service.run_once() == 2
    assert [m.body for m in real_messages(store)] == [b"order 0", b"order 1", b"order 2"]


def test_levels_are_independent(store: MessageStore) -> None:
    put_delayed(store, delayed(0, level=3))  # 10 s
    put_delayed(store, delayed(1, level=1))  # 1 s
    service = ScheduleService(store, clock=Clock(BASE_MS + 1000))
    assert service.run_once() == 1
    assert service.offsets() == {1: 1}
    service.clock = Clock(BASE_MS + 10_000)
    assert service.run_once() == 1
    assert service.offsets() == {1: 1, 3: 1}
    assert [m.body for m in real_messages(store)] == [b"order 1", b"order 0"]


def test_clock_gone_back_delivers_now(store: MessageStore) -> None:
    # correctDeliverTimestamp: a deliver time beyond now + the level's delay is "now".
    put_delayed(store, delayed(level=1), store_ms=BASE_MS + 86_400_000)
    assert ScheduleService(store, clock=Clock(BASE_MS)).run_once() == 1


def test_delivered_record_equals_a_direct_put_but_for_store_fields(
    store: MessageStore, tmp_path: Path
) -> None:
    original = delayed()
    scheduled = put_delayed(store, original)
    ScheduleService(store, clock=Clock(BASE_MS + LEVEL_2_MS)).run_once()
    (delivered,) = real_messages(store)
    stored = store.look_message(scheduled.commit_log_offset)
    assert stored is not None
    # RocketMQ re-serialises the scheduled record's properties through a java.util.HashMap.
    # DELAY stays in the string: RocketMQ serialises the map before clearing DELAY from it.
    expected_order = java_hashmap_order(list(stored.properties))
    assert list(delivered.properties) == expected_order
    assert set(expected_order) == set(original.properties) | {"REAL_TOPIC", "REAL_QID"}
    # A direct put (no delay rewrite) of the original message with those properties into a
    # second store gives the same bytes except queue offset, physical offset and store
    # time.
    direct = Message(
        topic=original.topic,
        body=original.body,
        queue_id=original.queue_id,
        flag=original.flag,
        sys_flag=original.sys_flag,
        properties=dict(delivered.properties),
        born_timestamp=original.born_timestamp,
        born_host=original.born_host,
        reconsume_times=original.reconsume_times,
    )
    with MessageStore.open(tmp_path / "other", CONFIG) as other:
        result = other.put(direct, store_timestamp=BASE_MS, delay=False)
        assert result.ok
        direct_bytes = record_bytes(other, result.commit_log_offset)
    delivered_bytes = record_bytes(store, delivered.commit_log_offset)
    assert mask_store_fields(delivered_bytes) == mask_store_fields(direct_bytes)
    assert delivered.store_host == stored.store_host
    assert delivered.born_host == "10.1.2.3:40000"
    assert delivered.born_timestamp == BASE_MS - 500
    assert delivered.flag == 7


def record_bytes(store: MessageStore, offset: int) -> bytes:
    found = store.commitlog.read_record(offset)
    assert found is not None
    data, view = found
    assert isinstance(view, rec.RecordView)
    return bytes(data[: view.size])


def mask_store_fields(record: bytes) -> bytes:
    # TOTALSIZE 4, MAGIC 4, BODYCRC 4, QUEUEID 4, FLAG 4, then QUEUEOFFSET 8 at 20,
    # PHYSICALOFFSET 8 at 28, SYSFLAG 4, BORNTIMESTAMP 8, BORNHOST 8 (IPv4), then
    # STORETIMESTAMP 8 at 56.
    masked = bytearray(record)
    masked[20:36] = bytes(16)
    masked[56:64] = bytes(8)
    return bytes(masked)


def test_compressed_body_and_flags_kept(store: MessageStore) -> None:
    body = zlib.compress(b"x" * 500)
    put_delayed(store, delayed(sys_flag=1, body=body))
    ScheduleService(store, clock=Clock(BASE_MS + LEVEL_2_MS)).run_once()
    (message,) = real_messages(store)
    assert message.sys_flag == 1
    assert message.body == body


def test_retry_topic_through_the_same_path(store: MessageStore) -> None:
    retry = Message(
        topic="%RETRY%g1",
        body=b"again",
        queue_id=0,
        properties={"RETRY_TOPIC": TOPIC, "ORIGIN_MESSAGE_ID": "ABC", "DELAY": "3"},
        born_timestamp=BASE_MS,
        reconsume_times=1,
    )
    put_delayed(store, retry)
    service = ScheduleService(store, clock=Clock(BASE_MS + 10_000))
    assert service.run_once() == 1
    (message,) = real_messages(store, "%RETRY%g1", 0)
    assert message.reconsume_times == 1
    assert message.properties["RETRY_TOPIC"] == TOPIC


def test_restart_resumes_from_persisted_offsets(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with MessageStore.open(root, CONFIG) as store:
        put_delayed(store, delayed(0), BASE_MS)
        # Due at +9 s: later than now, not so far that it counts as a clock gone back.
        put_delayed(store, delayed(1), BASE_MS + 4000)
        service = ScheduleService(store, clock=Clock(BASE_MS + LEVEL_2_MS))
        assert service.run_once() == 1
        service.shutdown()  # persists
    document = json.loads((root / "config" / "delayOffset.json").read_text())
    assert document == {"offsetTable": {"2": 1}}
    with MessageStore.open(root, CONFIG) as store:
        service = ScheduleService(store, clock=Clock(BASE_MS + 9000))
        assert service.offset(2) == 1
        assert service.run_once() == 1
        assert [m.body for m in real_messages(store)] == [b"order 0", b"order 1"]


def test_unpersisted_delivery_is_repeated_after_a_crash(tmp_path: Path) -> None:
    # At-least-once: progress not yet in delayOffset.json is delivered again.
    root = tmp_path / "store"
    with MessageStore.open(root, CONFIG) as store:
        put_delayed(store, delayed(0))
        assert ScheduleService(store, clock=Clock(BASE_MS + LEVEL_2_MS)).run_once() == 1
    with MessageStore.open(root, CONFIG) as store:
        assert ScheduleService(store, clock=Clock(BASE_MS + LEVEL_2_MS)).run_once() == 1
        assert len(real_messages(store)) == 2


def test_rocketmq_written_offset_file_and_correction(store: MessageStore) -> None:
    put_delayed(store, delayed(0))
    path = Path(store.root) / "config" / "delayOffset.json"
    path.parent.mkdir(exist_ok=True)
    # fastjson's layout, queue ids unquoted; level 2's offset is past its queue's end.
    path.write_text('{\n\t"offsetTable":{1:0,2:99,3:0\n\t}\n}')
    service = ScheduleService(store, clock=Clock(BASE_MS))
    assert service.offsets() == {1: 0, 2: 1, 3: 0}  # correctDelayOffset: capped at max


def test_corrupt_offset_file(store: MessageStore) -> None:
    path = Path(store.root) / "config" / "delayOffset.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text('{"offsetTable":{"2":-1}}')
    with pytest.raises(CorruptDataError, match="delay offset file is unusable"):
        ScheduleService(store)


def test_offset_file_codec() -> None:
    assert decode_delay_offset_file({"offsetTable": {"1": 0, "18": 5}}) == {1: 0, 18: 5}
    assert encode_delay_offset_file({18: 5, 1: 0}) == {"offsetTable": {"1": 0, "18": 5}}
    for bad, message in (({"offsetTable": {"0": 1}}, "not positive"), ([], "JSON object")):
        with pytest.raises(ValueError, match=message):
            decode_delay_offset_file(bad)


def test_refused_put_is_retried_and_illegal_one_skipped(
    store: MessageStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    put_delayed(store, delayed(0))
    put_delayed(store, delayed(1))
    real_put = store.put
    outcomes = [PutStatus.SERVICE_NOT_AVAILABLE, PutStatus.MESSAGE_ILLEGAL]

    def flaky_put(message: Message, *args: object, **kwargs: object) -> PutResult:
        if outcomes:
            return PutResult(outcomes.pop(0))
        return real_put(message, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(store, "put", flaky_put)
    service = ScheduleService(store, clock=Clock(BASE_MS + LEVEL_2_MS))
    assert service.run_once() == 0  # disk full: nothing moves
    assert service.offset(2) == 0
    # Message 0 can never be stored: skipped; message 1 goes through.
    assert service.run_once() == 1
    assert service.offset(2) == 2
    assert [m.body for m in real_messages(store)] == [b"order 1"]


def test_undeliverable_records_are_skipped(store: MessageStore) -> None:
    put_delayed(store, delayed(0))
    stored = store.get_messages("g", SCHEDULE_TOPIC, 1, 0, 1).messages[0]
    for properties in (
        {"REAL_QID": "0"},
        {"REAL_TOPIC": "T", "REAL_QID": "x"},
        {"REAL_TOPIC": "RMQ_SYS_TRANS_HALF_TOPIC", "REAL_QID": "0"},
        {"REAL_TOPIC": SCHEDULE_TOPIC, "REAL_QID": "0"},
    ):
        broken = dataclasses.replace(stored, properties=properties)
        assert delivered_message(broken) is None


def test_levels_must_match_the_store(store: MessageStore) -> None:
    service = ScheduleService(store, levels=CONFIG.message_delay_level)
    assert service.max_level == 18
    assert service.delay_ms(1) == 1000 and service.delay_ms(18) == 7_200_000
    assert service.compute_deliver_timestamp(999, 0) == 1000  # unknown level: +1 s
    with pytest.raises(ConfigError, match=r"delay level must be 1\.\.18"):
        service.delay_ms(19)
    with pytest.raises(ConfigError, match="differ from the store"):
        ScheduleService(store, levels="1s 2s")


def test_running_stats(store: MessageStore) -> None:
    put_delayed(store, delayed(0))
    service = ScheduleService(store, clock=Clock(BASE_MS + LEVEL_2_MS))
    service.run_once()
    assert service.running_stats() == {"scheduleMessageOffset_2": "1,1"}


def test_thread_delivers_and_wakes_the_broker(store: MessageStore) -> None:
    put_delayed(store, delayed(0))
    arrived = threading.Event()
    service = ScheduleService(store, clock=Clock(BASE_MS + LEVEL_2_MS), tick_ms=5)
    service.on_delivered = arrived.set
    service.start()
    try:
        assert arrived.wait(10)
    finally:
        service.shutdown()
    assert len(real_messages(store)) == 1
    document = json.loads((Path(store.root) / "config" / "delayOffset.json").read_text())
    assert document == {"offsetTable": {"2": 1}}


def test_needs_a_writable_store(store: MessageStore) -> None:
    put_delayed(store, delayed(0))
    store.flush()
    with (
        MessageStore.open(store.root, CONFIG, read_only=True) as reader,
        pytest.raises(ConfigError, match="writable store"),
    ):
        ScheduleService(reader)


@given(st.dictionaries(st.integers(1, 64), st.integers(0, 2**63 - 1), max_size=18))
def test_offset_file_round_trip(table: dict[int, int]) -> None:
    document = json.loads(json.dumps(encode_delay_offset_file(table)))
    assert decode_delay_offset_file(document) == table
