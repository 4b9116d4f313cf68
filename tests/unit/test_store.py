"""MessageStore, after RocketMQ's DefaultMessageStoreTest and BatchPutMessageTest (spec
section 11) and the read/put rules of sections 1.6, 1.7, 3 and 10."""

from __future__ import annotations

import os
import struct
import zlib
from typing import Any

import pytest

from rocketstore import (
    GetStatus,
    Message,
    MessageStore,
    NotAStoreError,
    PutStatus,
    ReadOnlyStoreError,
    StoreConfig,
    StoreLockedError,
)
from rocketstore.errors import ConfigError, SelectorError
from rocketstore.format.properties import VerbatimProperties
from rocketstore.format.queue_unit import BLANK_UNIT, QueueUnit, decode_unit
from rocketstore.paths import is_queue_dir_name

TOPIC = "FooBar"
GROUP = "GROUP_A"
BASE_MS = 1_700_000_000_123
BODY = "Once, there was a chance for me!"


def _config(**changes) -> StoreConfig:
    values: dict[str, Any] = {
        "mapped_file_size_commit_log": 1024 * 1024,
        "mapped_file_size_consume_queue": 1000 * 20,
        "max_hash_slot_num": 10_000,
        "max_index_num": 10_000,
    }
    values.update(changes)
    return StoreConfig(**values)


@pytest.fixture
def store(tmp_path):
    opened = MessageStore.open(tmp_path / "store", _config())
    yield opened
    opened.close()


def _message(i: int = 0, **changes) -> Message:
    values: dict[str, Any] = {
        "topic": TOPIC,
        "body": f"{BODY} offset {i}".encode(),
        "properties": {"TAGS": "TAG1", "KEYS": f"Hello{i}"},
        "born_timestamp": BASE_MS - 1000,
        "born_host": "127.0.0.1:50000",
    }
    values.update(changes)
    return Message(**values)


def _put_many(store: MessageStore, count: int, **changes):
    results = [store.put(_message(i, **changes), BASE_MS + 10 * i) for i in range(count)]
    assert all(r.ok for r in results), results
    store.wait_dispatched()
    return results


def _record_length(topic: str, body: bytes, properties: str, v6_hosts: int = 0) -> int:
    return 91 + 12 * v6_hosts + len(body) + len(topic.encode()) + len(properties.encode())


# --- write and read ---------------------------------------------------------------------------


def test_write_and_read_ipv4_and_ipv6_born_hosts(store):
    for i in range(10):
        assert store.put(_message(i), BASE_MS + i).ok
    for i in range(10, 20):
        assert store.put(_message(i, born_host="[::1]:50000"), BASE_MS + i).ok
    store.wait_dispatched()

    assert store.max_offset(TOPIC, 0) == 20
    for i in range(20):
        result = store.get_messages(GROUP, TOPIC, 0, i, 1)
        assert result.status is GetStatus.FOUND
        assert len(result.messages) == 1
        message = result.messages[0]
        assert message.body == f"{BODY} offset {i}".encode()
        assert message.queue_offset == i
        assert message.born_host == ("127.0.0.1:50000" if i < 10 else "[::1]:50000")
        assert message.store_timestamp == BASE_MS + i
        assert result.next_begin_offset == i + 1


def test_put_result_fields(store):
    first = store.put(_message(0), BASE_MS)
    second = store.put(_message(1), BASE_MS + 5)
    props = "TAGS\x01TAG1\x02KEYS\x01Hello0"
    size = _record_length(TOPIC, f"{BODY} offset 0".encode(), props)
    assert first.status is PutStatus.PUT_OK
    assert (first.commit_log_offset, first.queue_offset, first.size) == (0, 0, size)
    assert first.store_timestamp == BASE_MS
    assert len(first.msg_id) == 32
    assert (second.commit_log_offset, second.queue_offset) == (size, 1)
    assert store.max_commit_log_offset() == size + second.size
    assert store.min_commit_log_offset() == 0


def test_look_message_by_offset(store):
    results = _put_many(store, 10)

    first = store.look_message(results[0].commit_log_offset)
    assert first is not None
    assert first.body == f"{BODY} offset 0".encode()
    last = store.look_message(results[-1].commit_log_offset)
    assert last is not None
    assert last.body == f"{BODY} offset 9".encode()
    assert last.queue_offset == 9
    assert store.look_message(store.max_commit_log_offset()) is None
    assert store.look_message(results[0].commit_log_offset + 1) is None


def test_view_message_by_msg_id(store):
    results = _put_many(store, 3)
    message = store.view_message(results[1].msg_id)
    assert message is not None
    assert message.commit_log_offset == results[1].commit_log_offset
    assert message.msg_id == results[1].msg_id
    assert message.body == f"{BODY} offset 1".encode()


def test_view_message_by_ipv6_msg_id(store):
    result = store.put(_message(0), BASE_MS, store_host="[::1]:10911")
    assert len(result.msg_id) == 56
    message = store.view_message(result.msg_id)
    assert message is not None
    assert message.store_host == "[::1]:10911"
    assert message.body == f"{BODY} offset 0".encode()


# --- offset by time ------------------------------------------------------------------------


def test_offset_by_time(store):
    results = _put_many(store, 10)  # store times BASE_MS + 10*i
    assert [r.store_timestamp for r in results] == [BASE_MS + 10 * i for i in range(10)]

    for i in range(10):
        ts = BASE_MS + 10 * i
        assert store.offset_by_time(TOPIC, 0, ts) == i
        assert store.offset_by_time(TOPIC, 0, ts, "upper") == i
        assert store.offset_by_time(TOPIC, 0, ts - 2, "lower") == i
        assert store.offset_by_time(TOPIC, 0, ts + 2, "upper") == i
        assert store.offset_by_time(TOPIC, 0, ts + 2, "lower") == i + 1
        if i > 0:
            assert store.offset_by_time(TOPIC, 0, ts - 2, "upper") == i - 1


def test_offset_by_time_outside_the_stored_range(store):
    _put_many(store, 10)
    future, past = BASE_MS + 20_000, BASE_MS - 20_000
    assert store.offset_by_time(TOPIC, 0, future, "lower") == store.max_offset(TOPIC, 0) == 10
    assert store.offset_by_time(TOPIC, 0, future, "upper") == 9
    assert store.offset_by_time(TOPIC, 0, past, "lower") == 0
    assert store.offset_by_time(TOPIC, 0, past, "upper") == store.min_offset(TOPIC, 0) == 0
    assert store.offset_by_time(TOPIC, 1, BASE_MS) == 0  # unknown queue
    assert store.offset_by_time("NoSuchTopic", 0, BASE_MS) == 0


def test_message_store_time(store):
    _put_many(store, 3)
    assert store.message_store_time(TOPIC, 0, 2) == BASE_MS + 20
    assert store.message_store_time(TOPIC, 1, 0) == -1
    assert store.message_store_time(TOPIC, 0, -1) == -1
    assert store.message_store_time(TOPIC, 0, 3) == -1


def test_offset_by_time_with_ipv6_born_hosts(store):
    _put_many(store, 10, born_host="[::1]:50000")
    assert store.message_store_time(TOPIC, 0, 4) == BASE_MS + 40
    assert store.offset_by_time(TOPIC, 0, BASE_MS + 40) == 4


# --- pull size ---------------------------------------------------------------------------------


@pytest.mark.parametrize("max_count", [32, 20, 10])
def test_pull_size(store, max_count):
    _put_many(store, 32)
    result = store.get_messages(GROUP, TOPIC, 0, 0, max_count)
    assert result.status is GetStatus.FOUND
    assert len(result.messages) == max_count
    assert result.next_begin_offset == max_count
    assert [m.queue_offset for m in result.messages] == list(range(max_count))


def test_pull_stops_at_the_in_memory_count_limit(store):
    _put_many(store, 40)
    result = store.get_messages(GROUP, TOPIC, 0, 0, 64)
    assert len(result.messages) == 32  # maxTransferCountOnMessageInMemory
    assert result.next_begin_offset == 32


@pytest.mark.parametrize("tags", [None, "TAG1"])
def test_pull_steps_past_more_units_than_it_takes_when_their_records_are_gone(tmp_path, tags):
    """Records of a deleted CommitLog file are stepped over (spec 10): a pull for every
    tag, which first reads only ``max_count`` units, goes on through the whole scan limit
    to the next file's records, as a pull for a tag does."""
    config = _config(mapped_file_size_commit_log=4096)
    with MessageStore.open(tmp_path / "store", config) as store:
        _put_many(store, 120)
        store.wait_dispatched()
        first_file_end = store.commitlog.files.files[1].file_from_offset
        gone = store.get_messages(GROUP, TOPIC, 0, 0, 64).messages
        in_first = sum(1 for m in gone if m.commit_log_offset < first_file_end)
        assert in_first > 8  # more units than the pull below takes point into it
        store.commitlog.files.delete_first(1)

        result = store.get_messages(GROUP, TOPIC, 0, 0, 8, tags)
        assert result.status is GetStatus.FOUND
        assert [m.queue_offset for m in result.messages] == list(range(in_first, in_first + 8))
        assert result.next_begin_offset == in_first + 8


# --- put size limits ----------------------------------------------------------------------


@pytest.fixture
def small_store(tmp_path):
    opened = MessageStore.open(tmp_path / "small", _config(max_message_size=1024))
    yield opened
    opened.close()


def test_body_at_the_limit_is_accepted(small_store):
    result = small_store.put(_message(body=b"x" * 1024))
    assert result.status is PutStatus.PUT_OK


def test_body_over_the_limit_is_illegal(small_store):
    refused = small_store.put(_message(body=b"x" * 1025))
    assert refused.status is PutStatus.MESSAGE_ILLEGAL
    assert refused.reason == "body of 1025 bytes is over max_message_size (1024)"
    big = b"x" * (1024 + 64 * 1024)
    assert small_store.put(_message(body=big)).status is PutStatus.MESSAGE_ILLEGAL
    assert small_store.max_commit_log_offset() == 0


def test_topic_length_limit(small_store):
    assert small_store.put(_message(topic="t" * 127)).status is PutStatus.PUT_OK
    refused = small_store.put(_message(topic="t" * 128))
    assert refused.status is PutStatus.MESSAGE_ILLEGAL
    assert refused.reason == "topic of 128 characters is over 127"
    assert small_store.put(_message(topic="t" * 32767)).status is PutStatus.MESSAGE_ILLEGAL


@pytest.mark.parametrize("topic", ["a/b", "a b", "a.b", "", "topic#1"])
def test_invalid_topic_characters_are_illegal(small_store, topic):
    refused = small_store.put(_message(topic=topic))
    assert refused.status is PutStatus.MESSAGE_ILLEGAL
    assert refused.reason == (
        "topic is empty" if not topic else f"topic {topic!r} has characters outside [%|a-zA-Z0-9_-]"
    )
    assert small_store.max_commit_log_offset() == 0


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"queue_id": -1}, "queue_id -1 is outside 0..2147483647"),
        ({"flag": 2**31}, "flag 2147483648 is outside -2147483648..2147483647"),
        ({"reconsume_times": "3"}, "reconsume_times must be an int, got str"),
        ({"properties": {"DELAY": "soon"}}, "DELAY 'soon' is not a number"),
        # Integer.parseInt's numbers only (Python's int() would take these)
        ({"properties": {"DELAY": " 1"}}, "DELAY ' 1' is not a number"),
        ({"properties": {"DELAY": "1_0"}}, "DELAY '1_0' is not a number"),
        ({"properties": {"DELAY": "2147483648"}}, "DELAY '2147483648' is not a number"),
        ({"born_host": "nowhere"}, "born_host: expected 'ip:port', got 'nowhere'"),
    ],
)
def test_a_refused_put_says_why(small_store, fields, reason):
    refused = small_store.put(_message(**fields))
    assert refused.status is PutStatus.MESSAGE_ILLEGAL
    assert refused.reason == reason
    assert small_store.max_commit_log_offset() == 0


def test_properties_size_limit(small_store):
    # "K" + 0x01 + value: 32767 characters is the most a 2-byte length can hold.
    at_limit = {"K": "v" * (32767 - 2)}
    over_limit = {"K": "v" * (32768 - 2)}

    result = small_store.put(_message(properties=over_limit))
    assert result.status is PutStatus.PROPERTIES_SIZE_EXCEEDED
    assert result.reason == "properties take 32768 bytes, over 32767"
    small_store.wait_dispatched()
    assert small_store.max_offset(TOPIC, 0) == 0
    assert small_store.max_commit_log_offset() == 0

    assert small_store.put(_message(properties=at_limit)).status is PutStatus.PUT_OK
    small_store.wait_dispatched()
    assert small_store.max_offset(TOPIC, 0) == 1


def test_properties_limit_counts_utf8_bytes(small_store):
    # 16384 two-byte characters: 16386 characters but 32770 bytes.
    result = small_store.put(_message(properties={"K": "é" * 16384}))
    assert result.status is PutStatus.PROPERTIES_SIZE_EXCEEDED


def test_dynamic_max_message_size(small_store):
    body = b"x" * (1024 + 10)
    assert small_store.put(_message(body=body)).status is PutStatus.MESSAGE_ILLEGAL
    small_store.config.max_message_size = 1024 + 10
    assert small_store.put(_message(body=body)).status is PutStatus.PUT_OK
    small_store.config.max_message_size = 10
    assert small_store.put(_message(body=body)).status is PutStatus.MESSAGE_ILLEGAL
    assert small_store.put(_message(body=b"x" * 10)).status is PutStatus.PUT_OK


# --- batch put -----------------------------------------------------------------------------------


@pytest.mark.parametrize("born_host", ["127.0.0.1:50000", "[::1]:50000"])
def test_put_batch(store, born_host):
    messages = [
        _message(i, properties={"TAGS": "TAG1", "KEYS": f"Hello{i}", "extraKey": "extraValue"})
        for i in range(10)
    ]
    for message in messages:
        message.born_host = born_host

    results = store.put_batch(messages, BASE_MS)
    store.wait_dispatched()

    assert [r.status for r in results] == [PutStatus.PUT_OK] * 10
    v6_hosts = 1 if born_host.startswith("[") else 0
    offset = 0
    for i, result in enumerate(results):
        props = f"TAGS\x01TAG1\x02KEYS\x01Hello{i}\x02extraKey\x01extraValue"
        length = _record_length(TOPIC, messages[i].body, props, v6_hosts)
        assert result.commit_log_offset == offset
        assert result.size == length
        assert result.queue_offset == i
        assert result.store_timestamp == BASE_MS
        looked = store.look_message(offset)
        assert looked is not None
        assert looked.body == messages[i].body
        assert looked.properties["extraKey"] == "extraValue"
        assert looked.born_host == born_host
        found = store.get_messages(GROUP, TOPIC, 0, i, 1)
        assert found.status is GetStatus.FOUND
        assert found.messages[0].commit_log_offset == offset
        offset += length
    assert store.max_commit_log_offset() == offset


def test_verbatim_properties_are_stored_byte_for_byte(store):
    """A broker batch keeps each message's property bytes as the client sent them: the
    record holds the text (trailing separator, repeated name), the index its keys."""
    text = "KEYS\x01k0\x02TAGS\x01old\x02TAGS\x01new\x02CLUSTER\x01c"
    message = _message(0, properties=VerbatimProperties(text))
    (result,) = store.put_batch([message], BASE_MS)
    assert result.status is PutStatus.PUT_OK
    assert result.size == _record_length(TOPIC, message.body, text, 0)
    store.wait_dispatched()
    raw = store.commitlog.read(result.commit_log_offset, result.size)
    assert raw is not None and raw.endswith(text.encode())
    looked = store.look_message(result.commit_log_offset)
    assert looked is not None
    assert looked.properties == {"KEYS": "k0", "TAGS": "new", "CLUSTER": "c"}
    assert [m.commit_log_offset for m in store.query_messages(TOPIC, "k0")] == [0]


def test_put_batch_with_a_body_over_the_limit_writes_nothing(small_store):
    messages = [_message(i) for i in range(5)]
    messages[3] = _message(3, body=b"x" * 1025)

    results = small_store.put_batch(messages)

    assert [r.status for r in results] == [PutStatus.MESSAGE_ILLEGAL] * 5
    assert results[0].reason == (
        "message 3 of the batch: body of 1025 bytes is over max_message_size (1024)"
    )
    small_store.wait_dispatched()
    assert small_store.max_commit_log_offset() == 0
    assert small_store.max_offset(TOPIC, 0) == 0


def test_put_batch_whose_bodies_together_exceed_the_limit_is_illegal(small_store):
    messages = [_message(i, body=b"x" * 300) for i in range(4)]  # 1200 > 1024
    results = small_store.put_batch(messages)
    assert [r.status for r in results] == [PutStatus.MESSAGE_ILLEGAL] * 4
    assert {r.reason for r in results} == {
        "the batch's bodies take 1200 bytes, over max_message_size (1024)"
    }
    assert small_store.max_commit_log_offset() == 0


def test_put_batch_rejects_delayed_messages(store):
    messages = [_message(0), _message(1, properties={"DELAY": "2"})]
    results = store.put_batch(messages)
    assert [r.status for r in results] == [PutStatus.MESSAGE_ILLEGAL] * 2
    assert results[1].reason == (
        "message 1 of the batch: a batch cannot hold a transactional or a delayed message"
    )
    assert store.max_commit_log_offset() == 0


# --- get_messages statuses ------------------------------------------------------------------


def test_get_from_an_empty_queue(store):
    result = store.get_messages(GROUP, TOPIC, 0, 0)
    assert result.status is GetStatus.NO_MESSAGE_IN_QUEUE
    assert result.next_begin_offset == 0
    result = store.get_messages(GROUP, TOPIC, 0, 5)
    assert result.status is GetStatus.NO_MESSAGE_IN_QUEUE
    assert result.next_begin_offset == 0


def test_get_past_the_end(store):
    _put_many(store, 3)

    one = store.get_messages(GROUP, TOPIC, 0, 3)
    assert one.status is GetStatus.OFFSET_OVERFLOW_ONE
    assert one.next_begin_offset == 3
    badly = store.get_messages(GROUP, TOPIC, 0, 10)
    assert badly.status is GetStatus.OFFSET_OVERFLOW_BADLY
    assert badly.next_begin_offset == 3  # max, even though min is 0
    assert (badly.min_offset, badly.max_offset) == (0, 3)


def test_get_below_the_min_offset(store):
    # The queue's first message gets queue offset 5 (as after a queue was emptied).
    store.commitlog.topic_queue_table[f"{TOPIC}-0"] = 5
    _put_many(store, 2)
    assert (store.min_offset(TOPIC, 0), store.max_offset(TOPIC, 0)) == (5, 7)

    result = store.get_messages(GROUP, TOPIC, 0, 2)
    assert result.status is GetStatus.OFFSET_TOO_SMALL
    assert result.next_begin_offset == 5
    found = store.get_messages(GROUP, TOPIC, 0, 5)
    assert found.status is GetStatus.FOUND
    assert [m.queue_offset for m in found.messages] == [5, 6]


def test_consume_queue_first_file_blank_fill_through_the_store(store, tmp_path):
    store.commitlog.topic_queue_table[f"{TOPIC}-0"] = 5
    results = _put_many(store, 1)
    assert results[0].queue_offset == 5

    path = tmp_path / "store" / "consumequeue" / TOPIC / "0" / f"{0:020d}"
    data = path.read_bytes()
    assert data[: 5 * 20] == BLANK_UNIT * 5
    assert decode_unit(data, 100) == QueueUnit(0, results[0].size, 2567159)  # "TAG1"
    assert store.min_offset(TOPIC, 0) == 5


def test_get_with_tag_filter(store):
    tags = ["TagA", "TagB", "TagC"] * 2
    for i, tag in enumerate(tags):
        assert store.put(_message(i, properties={"TAGS": tag}), BASE_MS + i).ok
    store.wait_dispatched()

    everything = store.get_messages(GROUP, TOPIC, 0, 0, 32, tags="TagA || TagB")
    assert everything.status is GetStatus.FOUND
    assert [m.queue_offset for m in everything.messages] == [0, 1, 3, 4]
    assert everything.next_begin_offset == 6  # covers the skipped TagC units

    three = store.get_messages(GROUP, TOPIC, 0, 0, 3, tags="TagA || TagB")
    assert [m.queue_offset for m in three.messages] == [0, 1, 3]
    assert three.next_begin_offset == 4

    only_c = store.get_messages(GROUP, TOPIC, 0, 0, 32, tags="TagC")
    assert [m.tags for m in only_c.messages] == ["TagC", "TagC"]
    assert store.get_messages(GROUP, TOPIC, 0, 0, 32, tags="*").next_begin_offset == 6


def test_get_with_no_matching_tag(store):
    _put_many(store, 4)
    result = store.get_messages(GROUP, TOPIC, 0, 1, 32, tags="TagZ")
    assert result.status is GetStatus.NO_MATCHED_MESSAGE
    assert result.messages == []
    assert result.next_begin_offset == 4


def test_get_with_a_sql92_selector(store):
    amounts = ["5", "50", "x", "500", "60"]
    for i, amount in enumerate(amounts):
        assert store.put(_message(i, properties={"TAGS": "T", "amount": amount}), BASE_MS + i).ok
    store.wait_dispatched()
    found = store.get_messages(GROUP, TOPIC, 0, 0, 32, "amount BETWEEN 10 AND 100", "SQL92")
    assert found.status is GetStatus.FOUND
    assert [m.queue_offset for m in found.messages] == [1, 4]  # "x" throws: not selected
    assert found.next_begin_offset == 5
    two = store.get_messages(GROUP, TOPIC, 0, 0, 1, "amount > 10", "sql92")
    assert [m.queue_offset for m in two.messages] == [1] and two.next_begin_offset == 2
    none = store.get_messages(GROUP, TOPIC, 0, 0, 32, "amount IS NULL", "SQL92")
    assert none.status is GetStatus.NO_MATCHED_MESSAGE and none.next_begin_offset == 5
    with pytest.raises(SelectorError, match="expected a literal"):
        store.get_messages(GROUP, TOPIC, 0, 0, 32, "amount >", "SQL92")
    with pytest.raises(ConfigError, match="CLASS"):
        store.get_messages(GROUP, TOPIC, 0, 0, 32, "x", "CLASS")


# --- delay messages ---------------------------------------------------------------------------


def test_delay_message_goes_to_the_schedule_topic(store):
    message = _message(0, properties={"TAGS": "TAG1", "DELAY": "3"}, queue_id=1)
    result = store.put(message, BASE_MS)
    store.wait_dispatched()
    assert result.ok

    stored = store.look_message(result.commit_log_offset)
    assert stored is not None
    assert stored.topic == "SCHEDULE_TOPIC_XXXX"
    assert stored.queue_id == 2  # level 3 -> queue 2
    assert stored.properties["REAL_TOPIC"] == TOPIC
    assert stored.properties["REAL_QID"] == "1"
    assert stored.properties["DELAY"] == "3"

    assert store.max_offset(TOPIC, 1) == 0
    assert store.max_offset("SCHEDULE_TOPIC_XXXX", 2) == 1
    unit = store.queues[("SCHEDULE_TOPIC_XXXX", 2)].unit(0)
    assert unit == QueueUnit(result.commit_log_offset, result.size, BASE_MS + 10_000)
    pulled = store.get_messages(GROUP, "SCHEDULE_TOPIC_XXXX", 2, 0)
    assert pulled.status is GetStatus.FOUND


def test_delay_level_above_the_max_is_clamped(store):
    result = store.put(_message(0, properties={"DELAY": "99"}), BASE_MS)
    store.wait_dispatched()
    stored = store.look_message(result.commit_log_offset)
    assert stored.queue_id == 17  # 18 levels
    unit = store.queues[("SCHEDULE_TOPIC_XXXX", 17)].unit(0)
    assert unit.tags_code == BASE_MS + 2 * 3600 * 1000


# --- query by key ---------------------------------------------------------------------------


def test_query_by_key(store):
    _put_many(store, 5)
    found = store.query_messages(TOPIC, "Hello3")
    assert [m.body for m in found] == [f"{BODY} offset 3".encode()]
    assert store.query_messages(TOPIC, "Hello99") == []
    assert store.query_messages("Other", "Hello3") == []


def test_query_filters_hash_collisions(store):
    placed = {}
    for topic in ("AaTopic", "BBTopic"):
        for key in ("Aa", "BB"):
            message = _message(0, topic=topic, properties={"KEYS": key})
            message.body = f"{topic}/{key}".encode()
            placed[(topic, key)] = store.put(message, BASE_MS).commit_log_offset
    store.wait_dispatched()

    for (topic, key), offset in placed.items():
        found = store.query_messages(topic, key)
        assert [m.commit_log_offset for m in found] == [offset]
        assert found[0].body == f"{topic}/{key}".encode()


def test_query_time_window_is_inclusive(store):
    result = store.put(_message(0, properties={"KEYS": "k"}), BASE_MS)
    store.wait_dispatched()
    assert result.store_timestamp == BASE_MS

    assert len(store.query_messages(TOPIC, "k", begin_ms=BASE_MS - 10, end_ms=BASE_MS)) == 1
    assert len(store.query_messages(TOPIC, "k", begin_ms=BASE_MS, end_ms=BASE_MS)) == 1
    assert store.query_messages(TOPIC, "k", begin_ms=BASE_MS + 1, end_ms=BASE_MS + 10) == []
    assert store.query_messages(TOPIC, "k", begin_ms=0, end_ms=BASE_MS - 1) == []


def test_query_returns_the_newest_matches_oldest_first(store):
    for i in range(6):
        assert store.put(_message(i, properties={"KEYS": "same"}), BASE_MS + i).ok
    store.wait_dispatched()
    found = store.query_messages(TOPIC, "same", max_count=3)
    assert [m.queue_offset for m in found] == [3, 4, 5]


def test_query_matches_one_of_several_keys(store):
    store.put(_message(0, properties={"KEYS": "alpha beta"}), BASE_MS)
    store.wait_dispatched()
    assert len(store.query_messages(TOPIC, "beta")) == 1
    assert store.query_messages(TOPIC, "alpha beta") == []


def test_query_by_unique_key(store):
    uniq = "7F0000010D2A18B4AAC2574F6F2B0000"
    first = store.put(_message(0, properties={"UNIQ_KEY": uniq}), BASE_MS)
    store.put(_message(1, properties={"UNIQ_KEY": uniq[:-1] + "1"}), BASE_MS + 1)
    store.wait_dispatched()

    found = store.query_by_unique_key(TOPIC, uniq)
    assert [m.commit_log_offset for m in found] == [first.commit_log_offset]
    assert found[0].uniq_key == uniq
    assert store.query_by_unique_key("Other", uniq) == []


# --- lifetime ---------------------------------------------------------------------------------


def test_reopen_keeps_every_message(tmp_path):
    root = tmp_path / "store"
    with MessageStore.open(root, _config()) as first:
        results = _put_many(first, 10)
        end = first.max_commit_log_offset()

    with MessageStore.open(root, _config()) as again:
        assert again.max_commit_log_offset() == end
        assert again.max_offset(TOPIC, 0) == 10
        assert not again.recovery_report.abnormal
        for i, result in enumerate(results):
            looked = again.look_message(result.commit_log_offset)
            assert looked is not None
            assert looked.body == f"{BODY} offset {i}".encode()
        pulled = again.get_messages(GROUP, TOPIC, 0, 0)
        assert len(pulled.messages) == 10
        assert len(again.query_messages(TOPIC, "Hello7")) == 1

        following = again.put(_message(10), BASE_MS + 1000)
        assert following.queue_offset == 10
        assert following.commit_log_offset == end


def test_close_removes_the_abort_file(tmp_path):
    root = tmp_path / "store"
    store = MessageStore.open(root, _config())
    assert (root / "abort").exists()
    store.close()
    assert not (root / "abort").exists()
    assert (root / "checkpoint").stat().st_size == 4096


def test_second_writer_is_refused(store, tmp_path):
    with pytest.raises(StoreLockedError):
        MessageStore.open(tmp_path / "store", _config())


def test_writer_lock_is_released_on_close(tmp_path):
    root = tmp_path / "store"
    MessageStore.open(root, _config()).close()
    MessageStore.open(root, _config()).close()


def test_read_only_open_sees_the_data(tmp_path):
    root = tmp_path / "store"
    with MessageStore.open(root, _config()) as writer:
        results = _put_many(writer, 5)

    with MessageStore.open(root, _config(), read_only=True) as reader:
        assert reader.max_offset(TOPIC, 0) == 5
        looked = reader.look_message(results[2].commit_log_offset)
        assert looked is not None and looked.body == (f"{BODY} offset 2".encode())
        assert len(reader.get_messages(GROUP, TOPIC, 0, 0).messages) == 5
        assert len(reader.query_messages(TOPIC, "Hello4")) == 1
        with pytest.raises(ReadOnlyStoreError):
            reader.put(_message(9))
        with pytest.raises(ReadOnlyStoreError):
            reader.put_batch([_message(9)])
    assert not (root / "abort").exists()


def test_read_only_open_next_to_a_writer(store, tmp_path):
    _put_many(store, 3)
    with MessageStore.open(tmp_path / "store", _config(), read_only=True) as reader:
        assert reader.max_offset(TOPIC, 0) == 3
        _put_many(store, 2)
        assert reader.max_offset(TOPIC, 0) == 5


def test_read_only_open_of_a_directory_without_a_commitlog(tmp_path):
    with pytest.raises(NotAStoreError):
        MessageStore.open(tmp_path, _config(), read_only=True)
    with pytest.raises(NotAStoreError):
        MessageStore.open(tmp_path / "missing", _config(), read_only=True)


def test_writer_open_of_a_file_is_refused(tmp_path):
    path = tmp_path / "plain-file"
    path.write_bytes(b"x")
    with pytest.raises(NotAStoreError):
        MessageStore.open(path, _config())


def test_topics_lists_queues(store):
    store.put(_message(0, queue_id=0))
    store.put(_message(1, queue_id=3))
    store.put(_message(2, topic="Other"))
    store.wait_dispatched()
    assert store.topics() == {TOPIC: [0, 3], "Other": [0]}
    assert os.path.isdir(os.path.join(store.root, "consumequeue", TOPIC, "3"))


def test_put_without_delay_keeps_a_delay_property_in_its_own_topic(store):
    """How the schedule service delivers a due message: DELAY stays in the bytes (as in
    RocketMQ's delivered records) and the message lands in its own topic and queue."""
    message = _message(0, properties={"TAGS": "TAG1", "DELAY": "3"}, queue_id=1)
    result = store.put(message, BASE_MS, delay=False)
    store.wait_dispatched()
    assert result.ok
    stored = store.look_message(result.commit_log_offset)
    assert stored is not None
    assert (stored.topic, stored.queue_id) == (TOPIC, 1)
    assert list(stored.properties) == ["TAGS", "DELAY"]
    assert store.max_offset(TOPIC, 1) == 1
    assert store.max_offset("SCHEDULE_TOPIC_XXXX", 2) == 0


@pytest.mark.parametrize("damaged_offset", [2**63 - 1, 2**63 - 100, -1, 2**40])
def test_a_queue_unit_pointing_nowhere_reads_as_no_message(tmp_path, damaged_offset):
    """A damaged unit's CommitLog offset near 2^63 made the C decoder's bounds check
    overflow and read far outside the mapping (a segfault in printMsg); it is a message
    that is not there. (What the pull does next is RocketMQ's rule for a record it cannot
    read: it moves on past the file that offset would be in, so the messages after it may
    or may not come in this pull.)"""
    root = tmp_path / "store"
    with MessageStore.open(root, _config()) as writer:
        for i in range(4):
            assert writer.put(_message(i), BASE_MS).ok
    unit_file = root / "consumequeue" / TOPIC / "0" / f"{0:020d}"
    with open(unit_file, "r+b") as f:
        f.seek(20)  # the second unit's CommitLog offset
        f.write(damaged_offset.to_bytes(8, "big", signed=True))
    with MessageStore.open(root, _config(), read_only=True) as reader:
        got = reader.get_messages(GROUP, TOPIC, 0, 0, 32)
        offsets = [m.queue_offset for m in got.messages]
        assert offsets[:1] == [0] and set(offsets) <= {0, 2, 3}
        assert reader.look_message(damaged_offset) is None
        # (A reader may take the queue to end before a unit past the CommitLog's data.)
        later = reader.get_messages(GROUP, TOPIC, 0, 2, 32)
        assert {m.queue_offset for m in later.messages} <= {2, 3}


def test_a_damaged_topic_that_can_be_no_directory_is_left_out_of_the_queues(tmp_path):
    """A record's topic bytes damaged into 'a/../b' (or a NUL, '..') would have its queue
    made outside consumequeue/<topic> or fail the dispatch; recovery leaves it out."""
    root = tmp_path / "store"
    with MessageStore.open(root, _config()) as writer:
        results = [writer.put(_message(i, topic="abcdef"), BASE_MS) for i in range(3)]
        assert all(r.ok for r in results)
    (root / "consumequeue" / "abcdef").rename(tmp_path / "queues-moved-away")
    victim = results[1]
    body_len = len(_message(1).body)
    with open(root / "commitlog" / f"{0:020d}", "r+b") as f:
        f.seek(victim.commit_log_offset + 88 + body_len + 1)  # the topic (spec 1.2)
        f.write(b"a/../b")
    with MessageStore.open(root, _config()) as store:  # recovery re-dispatches all three
        # Records 0 and 2 (record 2 lands at the write position, RocketMQ's rule).
        assert store.max_offset("abcdef", 0) == 2
        assert not (root / "consumequeue" / "b").exists()
        looked = store.look_message(victim.commit_log_offset)
        assert looked is not None and looked.topic == "a/../b"
    assert is_queue_dir_name("abcdef") and is_queue_dir_name("%RETRY%g")
    assert not any(map(is_queue_dir_name, ["", ".", "..", "a/b", "a\0b"]))


def _delayed_record(properties: bytes, *, body: bytes, born_ms: int, store_ms: int) -> bytes:
    """A delayed message's CommitLog record (level 3, from queue 1 of TOPIC), built field
    by field as CommitLog.MessageExtEncoder lays it out (spec 1.2); the first record of the
    store, so both offsets are 0."""
    topic = b"SCHEDULE_TOPIC_XXXX"
    size = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4 + len(body)
    size += 1 + len(topic) + 2 + len(properties)
    return b"".join(
        [
            struct.pack(">i", size),  # TOTALSIZE
            bytes.fromhex("DAA320A7"),  # MAGICCODE v1
            struct.pack(">i", zlib.crc32(body) & 0x7FFFFFFF),  # BODYCRC
            struct.pack(">i", 2),  # QUEUEID: delay level 3 - 1
            struct.pack(">i", 0),  # FLAG
            struct.pack(">q", 0),  # QUEUEOFFSET
            struct.pack(">q", 0),  # PHYSICALOFFSET
            struct.pack(">i", 0),  # SYSFLAG
            struct.pack(">q", born_ms),  # BORNTIMESTAMP
            bytes([127, 0, 0, 1]) + struct.pack(">i", 50000),  # BORNHOST
            struct.pack(">q", store_ms),  # STORETIMESTAMP
            bytes([127, 0, 0, 1]) + struct.pack(">i", 10911),  # STOREHOSTADDRESS
            struct.pack(">i", 0),  # RECONSUMETIMES
            struct.pack(">q", 0),  # PREPARED TRANSACTION OFFSET
            struct.pack(">i", len(body)),  # BODYLEN
            body,  # BODY
            bytes([len(topic)]),  # TOPICLEN
            topic,  # TOPIC
            struct.pack(">h", len(properties)),  # PROPLEN
            properties,  # PROPERTIES
        ]
    )


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        # A 4.9.8 client's map (TAGS, KEYS, WAIT, then DELAY and UNIQ_KEY) as its string
        # holds it; WAIT and DELAY share bucket 13 of the 16-slot table, so the one put
        # first comes first. The store keeps the caller's order: WAIT before DELAY.
        (
            ["REAL_TOPIC", "KEYS", "UNIQ_KEY", "WAIT", "DELAY", "TAGS"],
            "REAL_TOPIC\x01FooBar\x02KEYS\x01k1\x02UNIQ_KEY\x01U1\x02WAIT\x01true"
            "\x02DELAY\x013\x02TAGS\x01T\x02REAL_QID\x011",
        ),
        # DELAY put before WAIT: DELAY first, as in RocketMQ's HashMap.
        (
            ["DELAY", "WAIT", "TAGS"],
            "REAL_TOPIC\x01FooBar\x02DELAY\x013\x02WAIT\x01true\x02TAGS\x01T\x02REAL_QID\x011",
        ),
    ],
)
def test_delay_rewrite_keeps_the_callers_order_as_defaultmessagestore(
    store, given: list[str], expected: str
) -> None:
    """CommitLog.asyncPutMessage puts REAL_TOPIC and REAL_QID into the caller's map and
    writes it in HashMap order: by bucket (REAL_TOPIC 1, KEYS 7, UNIQ_KEY 12, WAIT 13,
    DELAY 13, TAGS 14, REAL_QID 15 in a table of 16), ties in insertion order. A
    REAL_TOPIC the caller set keeps its place (and gets the real topic). Moving WAIT last
    is the broker's re-put (test_processors), not the store's."""
    values = {
        "REAL_TOPIC": "elsewhere",
        "KEYS": "k1",
        "UNIQ_KEY": "U1",
        "WAIT": "true",
        "DELAY": "3",
        "TAGS": "T",
    }
    body = b"delayed body"
    message = _message(0, body=body, queue_id=1, properties={k: values[k] for k in given})
    result = store.put(message, BASE_MS)
    assert result.ok, result.reason
    path = os.path.join(store.root, "commitlog", f"{0:020d}")
    with open(path, "rb") as f:
        written = f.read(result.size)
    assert written == _delayed_record(
        expected.encode(), body=body, born_ms=BASE_MS - 1000, store_ms=BASE_MS
    )
