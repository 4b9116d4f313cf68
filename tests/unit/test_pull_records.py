"""MessageStore.get_matching_records, the broker's pull answer: the same status, offsets
and body bytes as the messages of get_matching_messages with each one's record read again
by its offset and size (the broker's answer before the records were copied raw), by the
C path (native.pull_records) and by the pure-Python one, over a varied store: tags,
properties (non-ASCII among them), IPv6 hosts, batches, a retry topic, records across
file ends, offsets past the end and below a moved start, and a damaged record."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketstore import GetStatus, Message, MessageStore, StoreConfig, read_path
from rocketstore.format import native
from rocketstore.format.subscription import Subscription, build_subscription
from rocketstore.read_path import PulledRecords

FILE_BYTES = 64 * 1024
CONFIG = StoreConfig(mapped_file_size_commit_log=FILE_BYTES, message_index_enable=False)
RETRY = "%RETRY%G"
# "Aa" and "BB" share a Java hash code: the units pass both, the records' TAGS decide.
EXPRESSIONS = [
    ("*", "TAG"),
    ("A", "TAG"),
    ("A || C", "TAG"),
    ("Aa", "TAG"),
    ("B || ü", "TAG"),
    (" ", "TAG"),
    ("n > 40", "SQL92"),
]
TAGS = ["A", "B", "C", "Aa", "BB", "ü"]


def _fill(store: MessageStore) -> None:
    # Queue 3 of T starts at queue offset 5, as after it was emptied: pulls below move.
    store.commitlog.topic_queue_table["T-3"] = 5
    for number in range(400):
        properties = {"TAGS": TAGS[number % 6], "KEYS": f"k{number}", "n": str(number % 60)}
        if number % 7 == 0:
            properties["note"] = "ünïcode"
        host = "[::1]:7" if number % 11 == 0 else "10.0.0.1:7"
        body = bytes([number % 256]) * (number * 53 % 3000)  # some cross 64 KiB file ends
        store.put(Message("T", body, number % 4, properties=properties, born_host=host))
        if number % 50 == 0:
            batch = [Message("T", b"b%d" % k, 1, properties={"TAGS": "B"}) for k in range(9)]
            store.put_batch(batch)
        if number % 5 == 0:
            retry = {"TAGS": "A", "RETRY_TOPIC": "T", "n": str(number % 60)}
            store.put(Message(RETRY, b"r" * number, 0, properties=retry))
    store.wait_dispatched()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MessageStore]:
    root = tmp_path_factory.mktemp("pull_records") / "store"
    opened = MessageStore.open(str(root), CONFIG)
    try:
        _fill(opened)
        yield opened
    finally:
        opened.close()


def _before(
    store: MessageStore, topic: str, queue_id: int, offset: int, count: int, sub: Subscription
) -> tuple[object, ...]:
    """The broker's answer as it was built before: messages, then their records' bytes."""
    result = store.get_matching_messages("G", topic, queue_id, offset, count, sub)
    raw = [store.read_commitlog(m.commit_log_offset, m.size) for m in result.messages]
    body = b"".join(r for r in raw if r is not None) if result.found else b""
    return (
        result.status,
        body,
        len(result.messages),
        result.next_begin_offset,
        result.min_offset,
        result.max_offset,
        result.suggest_pulling_from_slave,
    )


def _now(got: PulledRecords) -> tuple[object, ...]:
    return (
        got.status,
        got.body if got.found else b"",
        got.count,
        got.next_begin_offset,
        got.min_offset,
        got.max_offset,
        got.suggest_pulling_from_slave,
    )


def _pulls(store: MessageStore) -> Iterator[tuple[str, int, int, int, Subscription]]:
    for topic, queues in (("T", 4), (RETRY, 1), ("absent", 1)):
        for queue_id in range(queues):
            end = store.max_offset(topic, queue_id)
            for offset in [*range(0, end + 2, 13), end - 1, end, end + 1, end + 50]:
                for count in (1, 7, 32, 64):
                    for expression, kind in EXPRESSIONS:
                        yield topic, queue_id, offset, count, build_subscription(expression, kind)


def _compare_all(store: MessageStore) -> int:
    found = 0
    for topic, queue_id, offset, count, sub in _pulls(store):
        want = _before(store, topic, queue_id, offset, count, sub)
        got = store.get_matching_records("G", topic, queue_id, offset, count, sub)
        assert _now(got) == want, (topic, queue_id, offset, count, sub.expression)
        found += got.found
    return found


@pytest.mark.parametrize("python", [False, True])
def test_records_equal_the_messages_records(
    store: MessageStore, python: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not python and native.pull_records is None:
        pytest.skip("the C extension is not built")
    answered: list[str] = []  # the subscriptions whose pulls C answered
    if not python:
        reader_type = read_path.MessageReader
        native_pull = reader_type._records_native

        def counted(reader: read_path.MessageReader, *args: object) -> object:
            pulled = native_pull(reader, *args)  # type: ignore[arg-type]
            if pulled is not None:
                answered.append(args[-1].expression)  # type: ignore[attr-defined]
            return pulled

        monkeypatch.setattr(reader_type, "_records_native", counted)
    with native.python_only() if python else contextlib.nullcontext():
        assert _compare_all(store) > 100
    if not python:
        assert {"*", "A", "A || C", "Aa", "B || ü"} <= set(answered)
    statuses = {
        store.get_matching_records("G", "T", 3, 2, 4, build_subscription("*")).status,
        store.get_matching_records("G", "T", 0, 10**6, 4, build_subscription("*")).status,
    }
    assert statuses == {GetStatus.OFFSET_TOO_SMALL, GetStatus.OFFSET_OVERFLOW_BADLY}


def test_a_damaged_record_is_left_to_the_python_path(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with MessageStore.open(str(root), CONFIG) as store:
        for number in range(40):
            store.put(Message("T", b"m%03d" % number * 10, 0, properties={"TAGS": "A"}))
        store.wait_dispatched()
        victim = store.get_messages("G", "T", 0, 17, 1).messages[0]
        # Damaged under the open store (its mapping shares the file's pages): its magic.
        with open(root / "commitlog" / f"{0:020d}", "r+b") as f:
            f.seek(victim.commit_log_offset + 4)
            f.write(b"\x00\x00\x00\x00")
        sub = build_subscription("*")
        for offset in range(0, 40, 3):
            want = _before(store, "T", 0, offset, 32, sub)
            got = store.get_matching_records("G", "T", 0, offset, 32, sub)
            assert _now(got) == want
        got = store.get_matching_records("G", "T", 0, 0, 32, sub)
    assert (got.count, got.next_begin_offset) == (32, 33)  # the damaged one stepped over
    physical = {int.from_bytes(got.body[at + 28 : at + 36], "big") for at in _starts(got.body)}
    assert victim.commit_log_offset not in physical


def _starts(body: bytes) -> list[int]:
    starts, at = [], 0
    while at < len(body):
        starts.append(at)
        at += int.from_bytes(body[at : at + 4], "big")
    return starts
