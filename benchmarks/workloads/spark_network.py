"""Spark's network mode (option ``namesrv``, issue #35): write and read rates through brokers.

Layer: benchmark workload. One local[2] session. Against ``rocketstore serve`` (a name
server and broker in a process of its own, ASYNC_FLUSH, so its CPU time is read from
/proc) and, side by
side in the same run, against a Java RocketMQ broker when ``ROCKETSTORE_BENCH_JAVA_NAMESRV``
names its name server (``host:port``; e.g. one started with
``tests/conformance/java/real_broker/run_namesrv.sh`` and ``run_broker.sh``, where the
topics are auto-created): ``df.write`` of COUNT rows of 100 B with a key each to a new topic
(SEND_BATCH_MESSAGE from the executors), then a batch read of that topic with every column
materialised (the ``noop`` sink; PULL_MESSAGE from the executors). A warm-up write and read
of a small topic first, so JVM start and the Python workers are not timed. Each repetition
uses a new topic of 4 queues. Beside them, in the same session: the file mode's read of the
same topic from ``rocketstore serve``'s store directory (the issue's yardstick: the network
read should reach half of it), and a key lookup through the brokers (option ``keys``,
QUERY_MESSAGE on every broker) against the full read's time. Reported beside the rates:
rows/s per executor core (the session's cores) and ``rocketstore serve``'s CPU during the
network read (per message, and in cores busy), and the network read's ratio to the file
mode's in each repetition (the reads alternate, so load drift hits both alike).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import Any

from benchmarks.common import Row, Scratch, Sizes, local_spark, row, skipped
from benchmarks.workloads import broker_procs

log = logging.getLogger(__name__)

NAME = "spark_network"
BODY = 100
FULL_COUNT = 1_000_000
QUICK_COUNT = 5_000
EXECUTOR_CORES = 2  # local[2]
JAVA_ENV = "ROCKETSTORE_BENCH_JAVA_NAMESRV"
OURS = "rocketstore serve"
JAVA = "Java RocketMQ broker"
FILE_MODE = "file mode, the broker's store"
READ_METRIC = "read rate (batch read, PULL_MESSAGE)"
PER_CORE_METRIC = "read rate per executor core"
LOOKUP_METRIC = "key lookup (option keys, QUERY_MESSAGE)"
SCAN_METRIC = "full read (the scan a lookup avoids)"
RATIO_METRIC = "network read / file-mode read (rows/s, same repetition)"
BROKER_CPU_METRIC = "broker CPU per message during the network read"
BROKER_CORES_METRIC = "broker CPU during the network read (cores busy)"


def case_name(count: int) -> str:
    return f"network mode, {BODY} B, {count:,} messages, 4 queues"


def _session() -> Any:
    return local_spark("rocketstore-benchmark-network", "2g")


def _rows(spark: Any, count: int) -> Any:
    body = "x" * (BODY - 12)
    return spark.range(count, numPartitions=2).selectExpr(
        "concat('key-', lpad(cast(id as string), 10, '0')) AS key",
        f"cast(concat(lpad(cast(id as string), 12, '0'), '{body}') AS binary) AS value",
    )


def _write_seconds(spark: Any, namesrv: str, topic: str, count: int) -> float:
    df = _rows(spark, count).cache()
    df.count()  # the rows are made before the timing
    start = time.perf_counter()
    writer = df.write.format("rocketstore").option("namesrv", namesrv).option("topic", topic)
    writer.mode("append").save()
    seconds = time.perf_counter() - start
    df.unpersist()
    return seconds


def _read_seconds(
    spark: Any,
    namesrv: str,
    topic: str,
    count: int,
    store_dir: str | None = None,
    broker_cpu_s: Callable[[], float] | None = None,
) -> tuple[float, float]:
    """Seconds to read every row of ``topic`` through the brokers (or, with ``store_dir``,
    from that store's files), and the broker's CPU seconds meanwhile (0 without
    ``broker_cpu_s``)."""
    reader = spark.read.format("rocketstore").option("topics", topic)
    df = reader.load(store_dir) if store_dir else reader.option("namesrv", namesrv).load()
    cpu_before = broker_cpu_s() if broker_cpu_s else 0.0
    start = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    seconds = time.perf_counter() - start
    cpu_s = broker_cpu_s() - cpu_before if broker_cpu_s else 0.0
    got = df.count()
    if got != count:
        raise RuntimeError(f"read {got} of the {count} rows written to {topic}")
    return seconds, cpu_s


def _lookup_seconds(spark: Any, namesrv: str, topic: str, key: str) -> float:
    """Seconds to find the one row with ``key`` through the brokers' indexes."""
    reader = spark.read.format("rocketstore").option("namesrv", namesrv).option("topics", topic)
    start = time.perf_counter()
    got = reader.option("keys", key).load().count()
    seconds = time.perf_counter() - start
    if got != 1:
        raise RuntimeError(f"key {key} found {got} times in {topic}")
    return seconds


def _measure(
    spark: Any,
    namesrv: str,
    system: str,
    sizes: Sizes,
    count: int,
    store_dir: str | None = None,
    broker_cpu_s: Callable[[], float] | None = None,
) -> list[Row]:
    stamp = int(time.time())
    _write_seconds(spark, namesrv, f"BenchNetWarm{stamp}", 500)
    _read_seconds(spark, namesrv, f"BenchNetWarm{stamp}", 500)
    if store_dir:
        _read_seconds(spark, namesrv, f"BenchNetWarm{stamp}", 500, store_dir)
    writes, reads, file_reads, lookups, scans = [], [], [], [], []
    cpu_per_message, cpu_cores = [], []
    for repetition in range(sizes.repeat):
        topic = f"BenchNet{stamp}r{repetition}"
        writes.append(count / _write_seconds(spark, namesrv, topic, count))
        seconds, cpu_s = _read_seconds(spark, namesrv, topic, count, None, broker_cpu_s)
        if broker_cpu_s:
            cpu_per_message.append(cpu_s / count * 1e6)
            cpu_cores.append(cpu_s / seconds)
        scans.append(seconds)
        reads.append(count / seconds)
        if store_dir:
            file_seconds, _ = _read_seconds(spark, namesrv, topic, count, store_dir)
            file_reads.append(count / file_seconds)
        key = f"key-{count // 2:010d}"
        lookups.append(_lookup_seconds(spark, namesrv, topic, key))
        log.info("%s run %d: write %.0f msg/s, read %.0f msg/s%s, lookup %.2f s", system,
                 repetition, writes[-1], reads[-1],
                 f" (file mode {file_reads[-1]:.0f})" if file_reads else "",
                 lookups[-1])  # fmt: skip
    case = case_name(count)
    per_core = [r / EXECUTOR_CORES for r in reads]
    rows = [
        row(NAME, case, system, "write rate (df.write, SEND_BATCH_MESSAGE)", "msg/s", writes),
        row(NAME, case, system, READ_METRIC, "msg/s", reads),
        row(NAME, case, system, PER_CORE_METRIC, "msg/s per core", per_core),
        row(NAME, case, system, SCAN_METRIC, "s", scans, higher_is_better=False),
        row(NAME, case, system, LOOKUP_METRIC, "s", lookups, higher_is_better=False),
    ]
    if cpu_per_message:
        rows += [
            row(NAME, case, system, BROKER_CPU_METRIC, "us", cpu_per_message,
                higher_is_better=False),
            row(NAME, case, system, BROKER_CORES_METRIC, "cores", cpu_cores,
                higher_is_better=False),
        ]  # fmt: skip
    if file_reads:
        ratios = [n / f for n, f in zip(reads, file_reads, strict=True)]
        file_per_core = [r / EXECUTOR_CORES for r in file_reads]
        rows += [
            row(NAME, case, FILE_MODE, READ_METRIC, "msg/s", file_reads),
            row(NAME, case, FILE_MODE, PER_CORE_METRIC, "msg/s per core", file_per_core),
            row(NAME, case, system, RATIO_METRIC, "ratio", ratios),
        ]
    return rows


def run(sizes: Sizes, scratch: Scratch) -> list[Row]:
    count = QUICK_COUNT if sizes.quick else FULL_COUNT
    case = case_name(count)
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return [skipped(NAME, case, OURS, "skipped: pyspark not installed ([spark] extra)")]
    spark = _session()
    rows: list[Row] = []
    try:
        with scratch.directory("spark_network") as directory:
            store_dir = os.path.join(directory, "store")
            log_path = os.path.join(directory, "serve.log")
            broker = broker_procs.start_rocketstore(store_dir, "ASYNC_FLUSH", log_path)
            try:
                rows += _measure(
                    spark, broker.namesrv, OURS, sizes, count, store_dir, broker.cpu_seconds
                )
            finally:
                broker.stop()
        java = os.environ.get(JAVA_ENV)
        if java:
            rows += _measure(spark, java, JAVA, sizes, count)
        else:
            rows.append(skipped(NAME, case, JAVA, f"skipped: {JAVA_ENV} not set"))
    finally:
        spark.stop()
    return rows
