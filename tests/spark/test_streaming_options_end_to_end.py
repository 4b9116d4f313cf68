"""Streaming options through the shared local SparkSession: option errors at load() (not
at start()), minOffsetsPerTrigger holding batches back, the latest offset in the
progress, and the UNIQ_KEYs of the streaming sink. No sleeps: processAllAvailable() and
Trigger.AvailableNow decide when a run is done; the timing rules themselves are tested on
the reader in test_stream_reader.py."""

from __future__ import annotations

import json
import re

import pytest

from rocketstore import Message, MessageStore
from rocketstore.spark.progress import offsets_behind_latest
from rocketstore.spark.sink_uniq_keys import KeyScope
from tests.spark.spark_helpers import ROUNDS, message, store_rows


def _stream(spark, store, **options):
    reader = spark.readStream.format("rocketstore")
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load(str(store))


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        ({"maxOffsetsPerTrigger": "0"}, "option maxOffsetsPerTrigger='0' must be >= 1"),
        ({"minOffsetsPerTrigger": "x"}, "option minOffsetsPerTrigger='x' must be an integer"),
        ({"maxTriggerDelay": "soon"}, "option maxTriggerDelay='soon' must be a duration"),
        (
            {"minOffsetsPerTrigger": "9", "maxOffsetsPerTrigger": "3"},
            "minOffsetsPerTrigger='9' is higher than maxOffsetsPerTrigger='3'",
        ),
        (
            {"maxOffsetsPerTrigger": "10", "endingOffsets": "latest"},
            "option endingOffsets='latest' is for batch reads and maxOffsetsPerTrigger",
        ),
        (
            {"minOffsetsPerTrigger": "10", "mode": "commitlog"},
            "option mode='commitlog' is for batch reads and minOffsetsPerTrigger",
        ),
    ],
)
def test_bad_streaming_options_fail_at_load(spark, store_path, options, needle):
    with pytest.raises(Exception, match=re.escape(needle)) as failure:
        _stream(spark, store_path, **options)
    assert "UnboundLocalError" not in str(failure.value)


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        ({"endingOffsets": "latest"}, "option endingOffsets='latest' is for batch reads"),
        ({"mode": "commitlog"}, "option mode='commitlog': streaming reads go through"),
    ],
)
def test_batch_only_options_alone_fail_the_stream_once_with_one_error(
    spark, store_path, tmp_path, options, needle
):
    """load() cannot refuse these (Spark gives schema() the same options for spark.read,
    where they are right); start() fails with our error and nothing after it."""
    frame = _stream(spark, store_path, **options)  # no error yet
    query = frame.writeStream.format("noop").option("checkpointLocation", str(tmp_path)).start()
    with pytest.raises(Exception, match=re.escape(needle)) as failure:
        query.awaitTermination()
    assert "UnboundLocalError" not in str(failure.value)


def test_min_offsets_per_trigger_holds_batches_back(spark, store_copy, tmp_path):
    # Started at the store's end as it is now (the query thread resolves "latest" later).
    now = json.dumps({"Orders": {str(q): ROUNDS for q in range(4)}})
    frame = _stream(
        spark, store_copy, topics="Orders", startingOffsets=now, minOffsetsPerTrigger="10",
        maxTriggerDelay="1h",
    )  # fmt: skip
    query = (
        frame.select("partition", "offset")
        .writeStream.format("memory")
        .queryName("held_back")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .start()
    )
    try:

        def put(queue_id, first, count):
            with MessageStore.open(store_copy) as store:
                for i in range(first, first + count):
                    assert store.put(message("Orders", queue_id, i)).ok

        def seen():
            query.processAllAvailable()
            return spark.table("held_back").count()

        put(0, ROUNDS, 3)
        assert seen() == 3  # the first batch of a run does not wait
        put(1, ROUNDS, 4)
        assert seen() == 3  # 4 < 10, and the hour has not passed: held back
        put(2, ROUNDS, 6)
        assert seen() == 13  # 10 new entries
        progress = query.lastProgress["sources"][0]
        assert progress["latestOffset"] == progress["endOffset"]
        assert offsets_behind_latest(progress)["maxOffsetsBehindLatest"] == "0"
    finally:
        query.stop()


def test_progress_reports_the_latest_offset_to_compute_lag(spark, store_path, tmp_path):
    query = (
        _stream(spark, store_path, topics="Orders", startingOffsets="earliest",
                maxOffsetsPerTrigger="40")
        .writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )  # fmt: skip
    query.awaitTermination()
    first = query.recentProgress[0]["sources"][0]
    # pyspark gives the offsets as JSON text; offsets_behind_latest takes text or dicts.
    assert json.loads(first["latestOffset"]) == {"Orders": {str(q): ROUNDS for q in range(4)}}
    behind = offsets_behind_latest(first)  # 40 of 120 read: 10 a queue
    assert behind == {
        "minOffsetsBehindLatest": str(ROUNDS - 10),
        "maxOffsetsBehindLatest": str(ROUNDS - 10),
        "avgOffsetsBehindLatest": str(float(ROUNDS - 10)),
    }
    last = query.lastProgress["sources"][0]
    assert offsets_behind_latest(last)["maxOffsetsBehindLatest"] == "0"


def test_streaming_sink_keys_derive_from_the_query_and_batch_ids(spark, tmp_path):
    source, target, checkpoint = tmp_path / "source", tmp_path / "target", tmp_path / "ckpt"
    with MessageStore.open(source) as store:
        for i in range(20):
            assert store.put(Message(topic="Orders", body=f"m{i}".encode(), queue_id=i % 2)).ok
    query = (
        _stream(spark, source, startingOffsets="earliest", maxOffsetsPerTrigger="8")
        .select("value", "topic")
        .writeStream.format("rocketstore")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start(str(target))
    )
    query.awaitTermination()
    assert query.exception() is None
    keys = [r["uniqKey"] for r in store_rows(target)]
    assert len(keys) == 20 and len(set(keys)) == 20
    assert all(re.fullmatch("[0-9A-F]{32}", k) for k in keys)
    # Each key's first 10 bytes are those of (query id, batch id, partition, block 0): a
    # replayed batch (same ids, Spark keeps them in the checkpoint) derives them again.
    prefixes = {
        KeyScope(f"{query.id}:{batch}", partition, 0).prefix(0).hex().upper()
        for batch in range(3)  # 20 entries, 8 a batch
        for partition in range(4)
    }
    assert {k[:20] for k in keys} <= prefixes
