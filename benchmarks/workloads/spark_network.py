"""Spark's network mode (option ``namesrv``, issue #35): write and read rates through brokers.

Layer: benchmark workload. One local[2] session. Against ``rocketstore serve`` (a name
server and broker in this process, on a background event loop, ASYNC_FLUSH) and, side by
side in the same run, against a Java RocketMQ broker when ``ROCKETSTORE_BENCH_JAVA_NAMESRV``
names its name server (``host:port``; e.g. one started with
``tests/conformance/java/real_broker/run_namesrv.sh`` and ``run_broker.sh``, where the
topics are auto-created): ``df.write`` of COUNT rows of 100 B with a key each to a new topic
(SEND_BATCH_MESSAGE from the executors), then a batch read of that topic with every column
materialised (the ``noop`` sink; PULL_MESSAGE from the executors). A warm-up write and read
of a small topic first, so JVM start and the Python workers are not timed. Each repetition
uses a new topic of 4 queues.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import Any

from benchmarks.common import Row, Scratch, Sizes, row, skipped

log = logging.getLogger(__name__)

NAME = "spark_network"
BODY = 100
FULL_COUNT = 100_000
QUICK_COUNT = 5_000
JAVA_ENV = "ROCKETSTORE_BENCH_JAVA_NAMESRV"
OURS = "rocketstore serve"
JAVA = "Java RocketMQ broker"


def case_name(count: int) -> str:
    return f"network mode, {BODY} B, {count:,} messages, 4 queues"


def _session() -> Any:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from rocketstore.spark import register

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("rocketstore-benchmark-network")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "2g")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


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


def _read_seconds(spark: Any, namesrv: str, topic: str, count: int) -> float:
    df = spark.read.format("rocketstore").option("namesrv", namesrv).option("topics", topic)
    df = df.load()
    start = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    seconds = time.perf_counter() - start
    got = df.count()
    if got != count:
        raise RuntimeError(f"read {got} of the {count} rows written to {topic}")
    return seconds


def _measure(spark: Any, namesrv: str, system: str, sizes: Sizes, count: int) -> list[Row]:
    stamp = int(time.time())
    _write_seconds(spark, namesrv, f"BenchNetWarm{stamp}", 500)
    _read_seconds(spark, namesrv, f"BenchNetWarm{stamp}", 500)
    writes, reads = [], []
    for repetition in range(sizes.repeat):
        topic = f"BenchNet{stamp}r{repetition}"
        writes.append(count / _write_seconds(spark, namesrv, topic, count))
        reads.append(count / _read_seconds(spark, namesrv, topic, count))
        log.info("%s run %d: write %.0f msg/s, read %.0f msg/s", system, repetition,
                 writes[-1], reads[-1])  # fmt: skip
    case = case_name(count)
    return [
        row(NAME, case, system, "write rate (df.write, SEND_BATCH_MESSAGE)", "msg/s", writes),
        row(NAME, case, system, "read rate (batch read, PULL_MESSAGE)", "msg/s", reads),
    ]


def run(sizes: Sizes, scratch: Scratch) -> list[Row]:
    count = QUICK_COUNT if sizes.quick else FULL_COUNT
    case = case_name(count)
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return [skipped(NAME, case, OURS, "skipped: pyspark not installed ([spark] extra)")]
    from rocketstore.broker.app import BackgroundServer, BrokerOptions

    spark = _session()
    rows: list[Row] = []
    try:
        with scratch.directory("spark_network") as directory:
            options = BrokerOptions(directory, listen="127.0.0.1:0")
            with BackgroundServer(options) as server:
                rows += _measure(spark, server.namesrv_address, OURS, sizes, count)
        java = os.environ.get(JAVA_ENV)
        if java:
            rows += _measure(spark, java, JAVA, sizes, count)
        else:
            rows.append(skipped(NAME, case, JAVA, f"skipped: {JAVA_ENV} not set"))
    finally:
        spark.stop()
    return rows
