"""The streaming reader without Spark: initialOffset / latestOffset / partitions / read
called as Spark's micro-batch engine calls them, against a store a writer keeps growing."""

from __future__ import annotations

import json

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows
from spark_helpers import BASE_MS, DEFAULT_QUEUES, ROUNDS, STEP_MS, ident, message, store_rows

from rocketstore import ConfigError, Message, MessageStore
from rocketstore.errors import DataLossError
from rocketstore.spark.plan import QueuePartition
from rocketstore.spark.source import RocketStoreDataSource
from rocketstore.spark.stream import RocketStoreStreamReader


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
    batches = []
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


def test_streaming_options_are_checked():
    with pytest.raises(ConfigError, match="endingOffsets='latest' is for batch reads"):
        _reader("/x", endingOffsets="latest")
    with pytest.raises(ConfigError, match="mode='commitlog'"):
        _reader("/x", mode="commitlog")
    with pytest.raises(ConfigError, match="maxOffsetsPerTrigger='0'"):
        _reader("/x", maxOffsetsPerTrigger="0")
    with pytest.raises(ConfigError, match="failOnDataLoss='maybe'"):
        _reader("/x", failOnDataLoss="maybe")


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
    assert reader.reportLatestOffset()["Orders"]["0"] == ROUNDS + 1


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
    parts = skipping.partitions(start, end)
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
