"""Running the parallel rebuild on Spark, and exporting a store as a Parquet dataset.

Layer: spark (top). The rebuild's pass functions (:mod:`rocketstore.rebuild.passes`) run
unchanged as Spark tasks, one task per bundle of CommitLog ranges or of queue groups and
index parts, or per index file:
``sc.parallelize(tasks, len(tasks)).map(pass_fn).collect()``. Results are small (counts and
paths); the bulky intermediate data goes to the rebuild's work directory inside the store,
so executors must see the store at the same path (a local master, or shared storage).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from rocketstore.rebuild.runners import OnDone, RebuildFailedError

T = TypeVar("T")
R = TypeVar("R")

DEFAULT_MASTER = "local[*]"


class SparkRunner:
    """A rebuild task runner over a SparkContext."""

    name = "spark"

    def __init__(self, spark_context: Any):
        self.sc = spark_context
        self.workers = max(1, int(spark_context.defaultParallelism))
        # A local master runs every task here; any other may run them on other machines.
        self.local = str(spark_context.master).startswith("local")

    def map(
        self, fn: Callable[[T], R], tasks: Sequence[T], on_done: OnDone | None = None
    ) -> list[R]:
        if not tasks:
            return []
        name = getattr(fn, "__name__", "task")
        self.sc.setJobDescription(f"rocketstore rebuild: {name} ({len(tasks)} tasks)")
        try:
            results: list[R] = self.sc.parallelize(list(tasks), len(tasks)).map(fn).collect()
        except Exception as e:  # py4j wraps whatever went wrong on the executors
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise RebuildFailedError(f"Spark job {name} failed: {first}") from e
        if on_done is not None:
            for i in range(len(results)):
                on_done(i)
        return results


@contextmanager
def spark_session(
    master: str | None = None,
    app_name: str = "rocketstore",
    conf: Mapping[str, str] | None = None,
) -> Iterator[Any]:
    """A SparkSession for a CLI command (stopped afterwards). Executors run this Python, so
    they import the same rocketstore; dates are computed in UTC. ``conf`` (the CLI's
    ``--conf``) is set on the builder last, so it overrides these defaults; ``master``
    wins over a ``spark.master`` in it."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession  # noqa: PLC0415 - pyspark only when asked for

    from rocketstore.spark import register  # noqa: PLC0415

    settings = dict(conf or {})
    builder = (
        SparkSession.builder.appName(app_name)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "true")
    )
    for key, value in settings.items():
        builder = builder.config(key, value)
    builder = builder.master(master or settings.get("spark.master") or DEFAULT_MASTER)
    session = builder.getOrCreate()
    register(session)
    try:
        yield session
    finally:
        session.stop()


def export_parquet(
    spark: Any,
    store: str,
    out: str,
    topics: Sequence[str] = (),
    mode: str = "commitlog",
    commit_log_options: Mapping[str, str] | None = None,
) -> int:
    """Write the store's messages to ``out`` as a Parquet dataset partitioned by ``topic``
    and ``date`` (the store time's UTC date), through the ``rocketstore`` data source: the
    source's default topics (all but system, retry and DLQ topics), or ``topics``. Returns
    the number of rows written. ``commit_log_options``: ``storePathCommitLog`` and
    ``readOnlyCommitLogStorePaths`` when the CommitLog is not in ``<store>/commitlog``."""
    from pyspark.sql import functions as F  # noqa: N812, PLC0415

    reader = spark.read.format("rocketstore").option("mode", mode)
    if topics:
        reader = reader.option("topics", ",".join(topics))
    for name, value in (commit_log_options or {}).items():
        reader = reader.option(name, value)
    frame = reader.load(os.path.abspath(store)).withColumn("date", F.to_date("timestamp"))
    frame = frame.cache()
    try:
        count = int(frame.count())
        frame.write.mode("errorifexists").partitionBy("topic", "date").parquet(out)
    finally:
        frame.unpersist()
    return count
