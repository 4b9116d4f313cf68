"""Spark batch read: ``format("rocketstore")`` against ``spark.read.parquet`` of the same rows.

Layer: benchmark workload. One store of 1,000,000 messages of 100 B (20,000 with
``--quick``; keys and UNIQ_KEY set, four queues) is read with every column materialised
(the ``noop`` sink, so nothing is collected to the driver) in ``mode=queue`` and
``mode=commitlog``; the same rows, written once to Parquet (snappy) in the same session,
are read the same way. One local[2] session for all of it (4 GiB driver, default JIT:
the test suite's ``TieredStopAtLevel=1`` would cut throughput); a warm-up read first, so
JVM start, the Python workers and their store opens are not timed.

A fourth reader is the ceiling of Spark's Python data source path on this machine: a
source with the same schema and partition count that yields pre-decoded batches, doing no
work per row (``spark_ceiling``). What separates it from Parquet is Spark's; what separates
``rocketstore`` from it is ours.

Two more cases (issue 32): the same reads of a store whose messages go round robin over
64 queues (each queue's records interleaved with 63 others'), queue mode (the small queues
packed into a few tasks, the default) against Parquet written one file a queue;
and an aggregate that needs two columns (``groupBy(topic).agg(sum(hash(value)))``), read
with every column decoded, with ``option("columns", "topic,value")``, from Parquet
(which reads only those two columns), and from the ceiling source yielding pre-decoded
batches of those two columns (what Spark's Python source path allows for them).

The target (issue 6): the queue-mode read rate is at least half of Parquet's.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from benchmarks.common import TOPIC, DataSet, Row, Scratch, Sizes, local_spark, row, skipped
from benchmarks.systems.rocketstore_system import RocketstoreAdapter
from benchmarks.workloads.support import load

log = logging.getLogger(__name__)

NAME = "spark"
BODY = 100
FULL_COUNT = 1_000_000
QUICK_COUNT = 20_000
QUEUE_MODE = "rocketstore (queue mode)"
COMMITLOG_MODE = "rocketstore (commitlog mode)"
PARQUET = "parquet"
CEILING = "python source ceiling (pre-decoded batches)"
SYSTEMS = (QUEUE_MODE, COMMITLOG_MODE, PARQUET, CEILING)
WIDE_QUEUES = 64
ALL_COLUMNS = "rocketstore (every column decoded)"
SELECTED = "rocketstore (columns=topic,value)"
SELECTED_CEILING = "python source ceiling (columns=topic,value, pre-decoded)"
AGGREGATE_SYSTEMS = (ALL_COLUMNS, SELECTED, PARQUET, SELECTED_CEILING)


def case_name(count: int) -> str:
    return f"batch read, {BODY} B, {count:,} messages"


def wide_case_name(count: int) -> str:
    return f"{WIDE_QUEUES} queues: batch read, {BODY} B, {count:,} messages"


def aggregate_case_name(count: int) -> str:
    return f"aggregate of topic and hash(value): {BODY} B, {count:,} messages"


def _session() -> Any:
    spark = local_spark("rocketstore-benchmark", "4g", **{"spark.sql.session.timeZone": "UTC"})
    from pyspark import cloudpickle

    from benchmarks.workloads import spark_ceiling

    # Spark's Python workers cannot import ``benchmarks``: ship the ceiling source by value.
    cloudpickle.register_pickle_by_value(spark_ceiling)
    spark.dataSource.register(spark_ceiling.CeilingSource)
    return spark


def _read_seconds(df: Any) -> float:
    """Every row and column materialised, nothing collected."""
    start = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - start


def _aggregate_seconds(df: Any) -> float:
    from pyspark.sql import functions as f

    start = time.perf_counter()
    df.groupBy("topic").agg(f.sum(f.hash("value"))).collect()
    return time.perf_counter() - start


def _write_wide_store(store_dir: str, count: int) -> None:
    """The data set's messages, queue ``i % 64``, through put_columns."""
    from rocketstore import MessageStore

    dataset = DataSet(BODY)
    with MessageStore.open(store_dir) as store:
        for items in dataset.batches(count, 10_000):
            result = store.put_columns(
                TOPIC,
                [item.body for item in items],
                queue_ids=[item.seq % WIDE_QUEUES for item in items],
                keys=[item.key for item in items],
            )
            if not result.ok:
                raise RuntimeError(f"loading the 64-queue store: {result.reason}")
        store.wait_dispatched()


def _timed(
    reads: dict[str, Any], repeat: int, seconds_of: Any, count: int
) -> dict[str, list[float]]:
    """Each read checked once (a warm-up), then timed ``repeat`` times, interleaved."""
    for system, make in reads.items():
        if make().count() != count:
            raise RuntimeError(f"{system} read the wrong number of rows")
    seconds: dict[str, list[float]] = {system: [] for system in reads}
    for _ in range(repeat):
        for system, make in reads.items():  # interleaved: drift hits all alike
            seconds[system].append(seconds_of(make()))
    return seconds


def run(sizes: Sizes, scratch: Scratch) -> list[Row]:
    count = QUICK_COUNT if sizes.quick else FULL_COUNT
    case = case_name(count)
    try:
        import pyarrow  # noqa: F401
        import pyspark  # noqa: F401
    except ImportError:
        return [
            skipped(NAME, name, system, "skipped: not installed")
            for name, systems in (
                (case, SYSTEMS),
                (wide_case_name(count), (QUEUE_MODE, PARQUET)),
                (aggregate_case_name(count), AGGREGATE_SYSTEMS),
            )
            for system in systems
        ]
    rows: list[Row] = []
    timings: list[tuple[str, dict[str, list[float]]]] = []
    with scratch.directory("spark") as directory:
        store_dir = os.path.join(directory, "store")
        adapter = RocketstoreAdapter(store_dir, "ASYNC_FLUSH")
        try:
            load(adapter, DataSet(BODY), count)
        finally:
            adapter.close()
        spark = _session()
        try:
            reads = {
                QUEUE_MODE: lambda: spark.read.format("rocketstore").load(store_dir),
                COMMITLOG_MODE: lambda: (
                    spark.read.format("rocketstore").option("mode", "commitlog").load(store_dir)
                ),
            }
            parquet_dir = os.path.join(directory, "parquet")
            reads[QUEUE_MODE]().write.parquet(parquet_dir)
            reads[PARQUET] = lambda: spark.read.parquet(parquet_dir)
            partitions = reads[QUEUE_MODE]().rdd.getNumPartitions()
            reads[CEILING] = lambda: (
                spark.read.format("rocketstore-ceiling")
                .option("store", store_dir)
                .option("rows", count)
                .option("partitions", partitions)
                .load()
            )
            timings.append((case, _timed(reads, sizes.repeat, _read_seconds, count)))
            aggregate = {
                ALL_COLUMNS: reads[QUEUE_MODE],
                SELECTED: lambda: (
                    spark.read.format("rocketstore")
                    .option("columns", "topic,value")
                    .load(store_dir)
                ),
                PARQUET: reads[PARQUET],
                SELECTED_CEILING: lambda: (
                    spark.read.format("rocketstore-ceiling")
                    .option("store", store_dir)
                    .option("rows", count)
                    .option("partitions", partitions)
                    .option("columns", "topic,value")
                    .load()
                ),
            }
            timings.append(
                (
                    aggregate_case_name(count),
                    _timed(aggregate, sizes.repeat, _aggregate_seconds, count),
                )
            )
            wide_dir = os.path.join(directory, "wide")
            _write_wide_store(wide_dir, count)
            wide_parquet = os.path.join(directory, "wide-parquet")
            # One Parquet file a queue, as before packing (Spark packs the small files too).
            (
                spark.read.format("rocketstore")
                .option("maxPartitionBytes", "1")
                .load(wide_dir)
                .write.parquet(wide_parquet)
            )
            wide = {
                QUEUE_MODE: lambda: spark.read.format("rocketstore").load(wide_dir),
                PARQUET: lambda: spark.read.parquet(wide_parquet),
            }
            timings.append(
                (wide_case_name(count), _timed(wide, sizes.repeat, _read_seconds, count))
            )
        finally:
            spark.stop()
    for name, seconds in timings:
        for system, values in seconds.items():
            rates = [count / s for s in values]
            result = row(NAME, name, system, "read rate", "rows/s", rates)
            assert result.stat is not None
            log.info("spark %s %s: %.0f rows/s", name, system, result.stat.median)
            rows.append(result)
    return rows
