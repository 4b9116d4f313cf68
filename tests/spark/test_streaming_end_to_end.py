"""Streaming reads and writes through the shared local SparkSession: a query stopped and
restarted from its checkpoint sees every message exactly once, new queues included; the
streaming sink appends a replayed batch once."""

from __future__ import annotations

import shutil

from rocketstore import MessageStore
from tests.spark.spark_helpers import DEFAULT_QUEUES, ROUNDS, message, store_rows


def _ids(rows):
    return sorted((r["topic"], r["partition"], r["offset"]) for r in rows)


def _to_parquet(spark, store, out, checkpoint, trigger, **options):
    reader = spark.readStream.format("rocketstore")
    for name, value in {"startingOffsets": "earliest", **options}.items():
        reader = reader.option(name, value)
    return (
        reader.load(str(store))
        .select("topic", "partition", "offset", "value")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(**trigger)
        .start()
    )


def test_stopped_and_restarted_query_reads_each_message_once(spark, store_copy, tmp_path):
    out, checkpoint = tmp_path / "out", tmp_path / "ckpt"
    # Run 1: processing-time trigger, stopped mid-stream (about 60 of 180 messages read).
    query = _to_parquet(
        spark, store_copy, out, checkpoint, {"processingTime": "10 milliseconds"},
        maxOffsetsPerTrigger="30",
    )  # fmt: skip
    try:
        while query.lastProgress is None or query.lastProgress["batchId"] < 1:
            query.awaitTermination(0.05)
    finally:
        query.stop()
    first_run = spark.read.parquet(str(out)).count()
    assert 0 < first_run < DEFAULT_QUEUES * ROUNDS
    # More messages arrive while it is down, one in a queue the topic did not have.
    with MessageStore.open(store_copy) as store:
        for i in range(5):
            assert store.put(message("Orders", 2, 100 + i)).ok
        assert store.put(message("Payments", 5, 0)).ok
    # Run 2: restarted from the checkpoint with Trigger.AvailableNow, split by the limit.
    query = _to_parquet(
        spark, store_copy, out, checkpoint, {"availableNow": True}, maxOffsetsPerTrigger="50"
    )
    query.awaitTermination()
    assert query.exception() is None
    rows = [r.asDict() for r in spark.read.parquet(str(out)).collect()]
    expected = store_rows(store_copy)
    assert len(expected) == DEFAULT_QUEUES * ROUNDS + 6
    assert _ids(rows) == _ids(expected)  # each exactly once
    assert ("Payments", 5, 0) in {(r["topic"], r["partition"], r["offset"]) for r in rows}


def test_streaming_sink_copies_a_store_and_never_appends_a_batch_twice(spark, store_path, tmp_path):
    target, checkpoint = tmp_path / "copy", tmp_path / "ckpt"

    def run():
        query = (
            spark.readStream.format("rocketstore")
            .option("startingOffsets", "earliest")
            .option("topics", "Payments")
            .option("maxOffsetsPerTrigger", "40")
            .load(str(store_path))
            .writeStream.format("rocketstore")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start(str(target))
        )
        query.awaitTermination()
        assert query.exception() is None

    run()
    copied = store_rows(target)
    source = store_rows(store_path, [("Payments", 0), ("Payments", 1)])
    assert len(copied) == len(source) == 2 * ROUNDS
    assert sorted((r["key"], r["tags"], r["value"]) for r in copied) == sorted(
        (r["key"], r["tags"], r["value"]) for r in source
    )
    # Forget that the last batch was committed: Spark re-runs it with the same batch id.
    commits = [p for p in (checkpoint / "commits").iterdir() if p.name.isdigit()]
    last = max(commits, key=lambda p: int(p.name))
    last.unlink()
    (last.parent / f".{last.name}.crc").unlink(missing_ok=True)
    run()
    assert len(store_rows(target)) == 2 * ROUNDS  # the replayed batch appended nothing
    assert not (target / ".rocketstore-staging").exists()
    # The checkpoint thrown away: a new query at the same location (batch ids from 0
    # again) is not taken for the old one, and copies everything once more.
    shutil.rmtree(checkpoint)
    run()
    assert len(store_rows(target)) == 4 * ROUNDS
