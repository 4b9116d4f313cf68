"""Whether the running Spark keeps a pushed filter inside the query that pushed it.

Layer: spark (top). Spark 4.1 to 4.3 cache the read a Python data source planned during
filter pushdown on the relation, not on the scan: after ``df.where("key = 'x'").count()``,
a later ``df.count()`` (a query with no filter Spark can hand to Python) reuses that read
and counts only the matching rows. A source cannot see which query runs its reader, so
the only safe answer is not to push filters where Spark does this. :func:`pushdown_defect`
knows the versions shown to do it, and on any other finds out by planning (no job, no
task) three scans of a tiny probe source. docs/spark.md "Filter pushdown" has the story.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, EqualTo, InputPartition

log = logging.getLogger(__name__)

PROBE_NAME = "rocketstore_pushdown_probe"
# [from, to) of the pyspark versions the probe found reusing a pushed read (4.1.1, 4.2.1
# and 4.3.0 checked, docs/spark.md): these need no probe (it costs seconds of planning).
KNOWN_AFFECTED = ((4, 1), (4, 4))
_KNOWN_DEFECT = (
    "this Spark reuses the read planned for a pushed filter in later queries of the same "
    "DataFrame (pyspark 4.1 to 4.3 do)"
)
_PLAIN_PARTITIONS = 3  # the unfiltered probe plans 3 partitions, the pushed one 1

# Verdicts per Spark application (the defect is the JVM's: one probe per application).
_verdicts: dict[str, str | None] = {}


class _ProbeReader(DataSourceReader):
    def __init__(self) -> None:
        self.pushed = False

    def pushFilters(self, filters: list[Any]) -> Iterable[Any]:  # noqa: N802
        for f in filters:
            if isinstance(f, EqualTo) and f.attribute == ("id",):
                self.pushed = True
            else:
                yield f

    def partitions(self) -> Sequence[InputPartition]:
        return [InputPartition(i) for i in range(1 if self.pushed else _PLAIN_PARTITIONS)]

    def read(self, partition: InputPartition) -> Iterator[tuple[int]]:
        return iter(())  # never run: the probe only plans


class ProbeSource(DataSource):
    """A source of no rows whose plan shows whether a filter was pushed into it."""

    @classmethod
    def name(cls) -> str:
        return PROBE_NAME

    def schema(self) -> str:
        return "id int"

    def reader(self, schema: Any) -> DataSourceReader:
        return _ProbeReader()


def _planned_partitions(df: Any) -> int:
    # A new DataFrame each time: DataFrame.rdd is cached per DataFrame object.
    return int(df.select("*").rdd.getNumPartitions())


def known_defect() -> str | None:
    """Why pushdown is unsafe on the installed pyspark, when its version is one known to
    reuse a pushed read; None for the others (which the probe must judge)."""
    from pyspark import __version__  # noqa: PLC0415

    try:
        version = tuple(int(part) for part in __version__.split(".")[:2])
    except ValueError:
        return None
    low, high = KNOWN_AFFECTED
    return _KNOWN_DEFECT if low <= version < high else None


def pushdown_defect(spark: Any) -> str | None:
    """None when a filter pushed into one query of a DataFrame cannot change the rows of
    another query of it; else why pushdown is unsafe here. Needs the pushdown setting on
    (the caller's job)."""
    return known_defect() or probe_pushdown(spark)


def probe_pushdown(spark: Any) -> str | None:
    """:func:`pushdown_defect` found by planning the probe source, once per Spark
    application (the defect is the JVM's)."""
    try:
        app = str(spark.sparkContext.applicationId)
    except Exception as e:  # Spark Connect has no SparkContext here
        return f"the pushdown probe could not run ({type(e).__name__}: {e})"
    if app in _verdicts:
        return _verdicts[app]
    try:
        spark.dataSource.register(ProbeSource)
        df = spark.read.format(PROBE_NAME).load()
        plain = _planned_partitions(df)
        filtered = _planned_partitions(df.where("id = 1"))
        again = _planned_partitions(df)
    except Exception as e:  # any failure means "not shown safe"
        verdict: str | None = f"the pushdown probe could not run ({type(e).__name__}: {e})"
    else:
        if (plain, filtered) != (_PLAIN_PARTITIONS, 1):
            verdict = f"the pushdown probe planned {plain} then {filtered} partitions"
        elif again != plain:
            verdict = _KNOWN_DEFECT
        else:
            verdict = None
    _verdicts[app] = verdict
    return verdict
