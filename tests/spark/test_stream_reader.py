"""The streaming reader without Spark: initialOffset / latestOffset / partitions / read
called as Spark's micro-batch engine calls them, against a store a writer keeps growing."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

from rocketstore import ConfigError, Message, MessageStore
from rocketstore.errors import DataLossError
from rocketstore.spark.options import parse_stream_options
from rocketstore.spark.plan import QueueGroupPartition, QueuePartition, queue_members
from rocketstore.spark.progress import offsets_behind_latest
from rocketstore.spark.source import RocketStoreDataSource
from rocketstore.spark.stream import RefusedStreamReader, RocketStoreStreamReader
from tests.spark.spark_helpers import (
    BASE_MS,
    DEFAULT_QUEUES,
    ROUNDS,
    STEP_MS,
    ident,
    message,
    store_rows,
)


def _reader(path, **options) -> RocketStoreStreamReader:
    reader = RocketStoreDataSource({"path": str(path), **options}).streamReader(None)
    assert isinstance(reader, RocketStoreStreamReader)
    return reader


def _json(offset):
    """What Spark does to every offset: JSON text in the checkpoint and back."""
    return json.loads(json.dumps(offset))


def _batch(reader, start, limit=None):
    """One micro-batch: (end offset, rows)."""
    if limit is None:
        limit = reader.getDefaultReadLimit()
    end = _json(reader.latestOffset(start, limit))
    rows = []
    for partition in reader.partitions(start, end):
        for batch in reader.read(partition):
            rows.extend(batch.to_pylist())
    return end, rows


def _drain(reader, start, limit=None, max_batches=100):
    batches: list[list[Any]] = []
    for _ in range(max_batches):
        end, rows = _batch(reader, start, limit)
        if end == start:
            return start, batches
        batches.append(rows)
        start = end
    raise AssertionError("the stream never caught up")


def test_initial_offset_default_latest_earliest_and_timestamp(store_path):
    with MessageStore.open(store_path, read_only=True) as store:
        latest = {
            t: {str(q): store.max_offset(t, q) for q in qs} for t, qs in store.topics().items()
        }
        at = store.offset_by_time("Orders", 2, BASE_MS + STEP_MS * 100, "lower")
    start = _reader(store_path).initialOffset()
    assert start == {t: latest[t] for t in ("Orders", "Payments", "%RETRY%groupA")}
    earliest = _reader(store_path, startingOffsets="earliest").initialOffset()
    assert earliest["Orders"] == {"0": 0, "1": 0, "2": 0, "3": 0}
    by_time = _reader(store_path, startingTimestamp=str(BASE_MS + STEP_MS * 100)).initialOffset()
    assert by_time["Orders"]["2"] == at
    per_queue = _reader(
        store_path, topics="Orders", startingOffsets='{"Orders":{"1":7,"3":-2}}'
    ).initialOffset()
    assert per_queue == {"Orders": {"0": ROUNDS, "1": 7, "2": ROUNDS, "3": 0}}


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        ({"endingOffsets": "latest"}, "endingOffsets='latest' is for batch reads"),
        ({"endingTimestamp": "5"}, "endingTimestamp='5' is for batch reads"),
        ({"mode": "commitlog"}, "mode='commitlog': streaming reads go through the consume"),
    ],
)
def test_options_a_stream_cannot_take_fail_its_first_call(options, needle):
    """streamReader() itself must not raise (pyspark's runner would bury the error under
    an UnboundLocalError): the reader it returns raises from whatever Spark calls first."""
    reader = RocketStoreDataSource({"path": "/x", **options}).streamReader(None)
    assert isinstance(reader, RefusedStreamReader)
    for call in (
        reader.initialOffset,
        reader.getDefaultReadLimit,
        reader.prepareForTriggerAvailableNow,
        lambda: reader.latestOffset({}, ReadAllAvailable()),
        lambda: reader.partitions({}, {}),
    ):
        with pytest.raises(ConfigError, match=re.escape(needle)):
            call()


def test_streaming_option_values_fail_at_load():
    """schema() is what load() runs (for a stream as for a batch read)."""
    for options, needle in (
        ({"maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger='0'"),
        ({"failOnDataLoss": "maybe"}, "failOnDataLoss='maybe'"),
        ({"maxOffsetsPerTrigger": "5", "endingOffsets": "latest"}, "endingOffsets='latest'"),
    ):
        with pytest.raises(ConfigError, match=re.escape(needle)):
            RocketStoreDataSource({"path": "/x", **options}).schema()


class _Clock:
    """A clock the test moves by hand (no sleeping)."""

    def __init__(self) -> None:
        self.ms = 1_000_000.0

    def __call__(self) -> float:
        return self.ms


def _gated(path, clock, **options) -> RocketStoreStreamReader:
    source = RocketStoreDataSource({"path": str(path), **options})
    return RocketStoreStreamReader(parse_stream_options(source.options), clock_ms=clock)


def _put(path, topic, queue_id, first, count):
    with MessageStore.open(path) as store:
        for i in range(first, first + count):
            assert store.put(message(topic, queue_id, i)).ok


def test_min_offsets_per_trigger_waits_for_enough_or_for_the_delay(store_copy):
    clock = _Clock()
    reader = _gated(
        store_copy, clock, topics="Orders", minOffsetsPerTrigger="10", maxTriggerDelay="1m"
    )
    assert reader.getDefaultReadLimit() == ReadMinRows(10)
    start = _json(reader.initialOffset())  # latest: nothing to read
    assert _batch(reader, start)[0] == start
    _put(store_copy, "Orders", 0, ROUNDS, 3)
    # The first batch of a run has no previous batch to wait from (as Kafka's source).
    end, rows = _batch(reader, start)
    assert len(rows) == 3
    _put(store_copy, "Orders", 1, ROUNDS, 4)
    clock.ms += 59_999
    assert _batch(reader, end)[0] == end  # 4 < 10 and the delay has not passed
    _put(store_copy, "Orders", 2, ROUNDS, 6)
    later, rows = _batch(reader, end)  # 10 new entries: no need to wait
    assert sorted(ident(r) for r in rows) == sorted(
        [("Orders", 1, ROUNDS + i) for i in range(4)]
        + [("Orders", 2, ROUNDS + i) for i in range(6)]
    )
    _put(store_copy, "Orders", 3, ROUNDS, 2)
    clock.ms += 59_999  # timed from the last batch, not from the first
    assert _batch(reader, later)[0] == later
    clock.ms += 1
    final, rows = _batch(reader, later)  # the delay passed: 2 < 10 are read
    assert len(rows) == 2
    # A trigger with nothing new is not a batch: the next wait is still from the last one.
    clock.ms += 120_000
    assert _batch(reader, final)[0] == final
    _put(store_copy, "Orders", 0, ROUNDS + 3, 1)
    assert len(_batch(reader, final)[1]) == 1  # the delay passed long ago


def test_min_and_max_offsets_per_trigger_together(store_copy):
    clock = _Clock()
    reader = _gated(
        store_copy,
        clock,
        topics="Orders",
        startingOffsets="earliest",
        minOffsetsPerTrigger="5",
        maxOffsetsPerTrigger="50",
    )
    assert reader.getDefaultReadLimit() == ReadMaxRows(50)  # one limit only: the max
    start = _json(reader.initialOffset())
    end, batches = _drain(reader, start)
    assert [len(b) for b in batches] == [50, 50, 20]  # 4 queues x ROUNDS, at most 50 each
    _put(store_copy, "Orders", 0, ROUNDS, 4)
    assert _batch(reader, end)[0] == end  # 4 < 5, within the 15 minutes of default delay
    clock.ms += 15 * 60_000
    assert len(_batch(reader, end)[1]) == 4
    # Spark's ReadAllAvailable (Trigger.Once) ignores both options.
    _put(store_copy, "Orders", 1, ROUNDS, 1)
    assert len(_batch(reader, end, ReadAllAvailable())[1]) == 5


def test_available_now_ignores_min_offsets_per_trigger(store_copy):
    """Holding a batch back would end an AvailableNow run with messages unread."""
    reader = _gated(
        store_copy, _Clock(), topics="Orders", startingOffsets="earliest",
        minOffsetsPerTrigger="1000", maxOffsetsPerTrigger="1000",
    )  # fmt: skip
    start = _json(reader.initialOffset())
    _put(store_copy, "Orders", 0, ROUNDS, 1)  # the first batch would not wait anyway
    assert len(_batch(reader, start)[1]) == 4 * ROUNDS + 1
    reader = _gated(
        store_copy, _Clock(), topics="Orders", startingOffsets="earliest",
        minOffsetsPerTrigger="1000", maxOffsetsPerTrigger="1000",
    )  # fmt: skip
    start = _json(reader.initialOffset())
    reader.prepareForTriggerAvailableNow()
    _put(store_copy, "Orders", 1, ROUNDS, 1)  # after the run began: not read
    _end, batches = _drain(reader, start)
    assert [len(b) for b in batches] == [4 * ROUNDS + 1]


def test_reported_latest_offset_is_what_latest_offset_saw(store_copy):
    reader = _reader(
        store_copy, topics="Orders", startingOffsets="earliest", maxOffsetsPerTrigger="8"
    )
    start = _json(reader.initialOffset())
    end = _json(reader.latestOffset(start, reader.getDefaultReadLimit()))
    _put(store_copy, "Orders", 0, ROUNDS, 5)  # after Spark asked: not in this progress
    latest = reader.reportLatestOffset()
    assert latest == {"Orders": {str(q): ROUNDS for q in range(4)}}
    behind = offsets_behind_latest({"endOffset": end, "latestOffset": latest})
    assert behind == {
        "minOffsetsBehindLatest": str(ROUNDS - 2),
        "maxOffsetsBehindLatest": str(ROUNDS - 2),
        "avgOffsetsBehindLatest": str(float(ROUNDS - 2)),
    }


def test_micro_batches_read_every_message_once_under_admission_control(store_path):
    reader = _reader(store_path, startingOffsets="earliest", maxOffsetsPerTrigger="25")
    assert reader.getDefaultReadLimit() == ReadMaxRows(25)
    start = _json(reader.initialOffset())
    end, batches = _drain(reader, start)
    assert all(len(rows) <= 25 for rows in batches)
    assert len(batches) == -(-DEFAULT_QUEUES * ROUNDS // 25)
    rows = [ident(r) for b in batches for r in b]
    assert len(rows) == len(set(rows))
    assert sorted(rows) == sorted(ident(r) for r in store_rows(store_path))
    # ReadAllAvailable (what Spark passes for Trigger.Once-like runs) ignores the option.
    assert _json(reader.latestOffset(start, ReadAllAvailable())) == end


def test_appends_new_queues_and_new_topics_are_picked_up(store_copy):
    reader = _reader(store_copy, topicPattern="Orders|Fresh.*")
    start = _json(reader.initialOffset())
    assert set(start) == {"Orders"}
    assert _batch(reader, start)[0] == start  # nothing new yet
    with MessageStore.open(store_copy) as store:
        for i in range(3):
            assert store.put(message("Orders", 1, 100 + i)).ok
            assert store.put(message("Orders", 9, i)).ok  # a queue the topic did not have
            assert store.put(message("FreshTopic", 0, i)).ok
            assert store.put(message("Payments", 0, i)).ok  # not selected
    end, rows = _batch(reader, start)
    assert end["Orders"]["9"] == 3 and end["FreshTopic"] == {"0": 3}
    got = sorted(ident(r) for r in rows)
    assert got == sorted(
        [("Orders", 1, ROUNDS + i) for i in range(3)]
        + [("Orders", 9, i) for i in range(3)]
        + [("FreshTopic", 0, i) for i in range(3)]
    )


def test_available_now_stops_at_the_target(store_copy):
    reader = _reader(store_copy, startingOffsets="earliest", maxOffsetsPerTrigger="40")
    start = _json(reader.initialOffset())
    reader.prepareForTriggerAvailableNow()
    with MessageStore.open(store_copy) as store:
        assert store.put(message("Orders", 0, 500)).ok  # after the run began: not read
        assert store.put(message("NewTopic", 0, 1)).ok
    end, batches = _drain(reader, start)
    rows = [ident(r) for b in batches for r in b]
    assert len(rows) == DEFAULT_QUEUES * ROUNDS and len(batches) == -(
        -DEFAULT_QUEUES * ROUNDS // 40
    )
    assert end["Orders"]["0"] == ROUNDS and "NewTopic" not in end
    latest = reader.reportLatestOffset()
    assert latest is not None and latest["Orders"]["0"] == ROUNDS + 1


def test_retention_fails_the_query_naming_the_lost_offsets(store_copy, caplog):
    reader = _reader(store_copy, startingOffsets="earliest", topics="Orders")
    start = _json(reader.initialOffset())
    with MessageStore.open(store_copy) as store:
        store.delete_expired_files(force=True)
        low = store.min_offset("Orders", 0)
    assert low > 0
    end = _json(reader.latestOffset(start, ReadAllAvailable()))
    with pytest.raises(DataLossError, match=rf"topic 'Orders' queue 0: offsets \[0, {low}\)"):
        reader.partitions(start, end)
    skipping = _reader(store_copy, startingOffsets="earliest", topics="Orders",
                       failOnDataLoss="false")  # fmt: skip
    parts = queue_members(skipping.partitions(start, end))
    assert [p.start for p in parts if p.queue_id == 0] == [low]
    assert "skipping lost messages" in caplog.text


def test_records_removed_while_a_batch_reads_fail_or_skip(store_copy):
    """Planned before retention ran, read after: the executor notices the gap."""
    reader = _reader(store_copy, startingOffsets="earliest", topics="Orders")
    with MessageStore.open(store_copy) as store:
        store.delete_expired_files(force=True)
        low = store.min_offset("Orders", 0)
    strict = QueuePartition("Orders", 0, 0, ROUNDS, fail_on_data_loss=True)
    with pytest.raises(DataLossError, match="topic 'Orders' queue 0: offsets"):
        list(reader.read(strict))
    lenient = QueuePartition("Orders", 0, 0, ROUNDS)
    offsets = [r["offset"] for b in reader.read(lenient) for r in b.to_pylist()]
    assert offsets == list(range(low, ROUNDS))


def test_store_swapped_for_an_older_one_is_data_loss(store_copy):
    reader = _reader(store_copy, topics="Payments")
    ahead = {"Payments": {"0": ROUNDS + 50, "1": ROUNDS}}
    with pytest.raises(DataLossError, match=r"queue 0: offsets \[30, 80\)"):
        reader.latestOffset(ahead, ReadAllAvailable())
    lenient = _reader(store_copy, topics="Payments", failOnDataLoss="false")
    assert lenient.latestOffset(ahead, ReadAllAvailable()) == ahead


def test_tags_filter_rows_but_offsets_cover_every_entry(store_copy):
    reader = _reader(store_copy, topics="Payments", startingOffsets="earliest", tags="TagB")
    start = _json(reader.initialOffset())
    end, rows = _batch(reader, start)
    assert end == {"Payments": {"0": ROUNDS, "1": ROUNDS}}
    assert rows and {r["tags"] for r in rows} == {"TagB"}
    with MessageStore.open(store_copy) as store:
        store.put(Message(topic="Payments", body=b"x", properties={"TAGS": "TagB"}))
    assert len(_batch(reader, end)[1]) == 1


def test_a_sql92_selector_filters_rows_but_offsets_cover_every_entry(store_copy):
    reader = _reader(
        store_copy, topics="Payments", startingOffsets="earliest", sql92="color = 'red'"
    )
    start = _json(reader.initialOffset())
    end, rows = _batch(reader, start)
    assert end == {"Payments": {"0": ROUNDS, "1": ROUNDS}}
    assert rows and all(dict(r["properties"])["color"] == "red" for r in rows)
    with MessageStore.open(store_copy) as store:
        store.put(Message(topic="Payments", body=b"x", properties={"color": "blue"}))
        store.put(Message(topic="Payments", body=b"y", properties={"color": "red"}))
    assert [r["value"] for r in _batch(reader, end)[1]] == [b"y"]


def test_a_micro_batch_packs_small_queues_with_the_same_rows(store_path):
    reader = _reader(store_path, startingOffsets="earliest")
    start = _json(reader.initialOffset())
    end = _json(reader.latestOffset(start, ReadAllAvailable()))
    parts = reader.partitions(start, end)
    assert len(parts) == 1 and isinstance(parts[0], QueueGroupPartition)
    apart = _reader(store_path, startingOffsets="earliest", maxPartitionBytes="1")
    unpacked = apart.partitions(start, end)
    assert len(unpacked) == len(parts[0].members) and queue_members(parts) == list(unpacked)

    def rows(partitions):
        return [row for p in partitions for b in reader.read(p) for row in b.to_pylist()]

    assert rows(parts) == rows(unpacked)
    # The offsets the batch ends at are per queue, as before.
    assert {(t, int(q)) for t, qs in end.items() for q in qs} == {
        (m.topic, m.queue_id) for m in parts[0].members
    }
