"""PySpark data source ``rocketstore``: read a store directory as a DataFrame or a stream,
and append DataFrames and streams to it (docs/spark.md).

Layer: top (beside the CLI). The only package that imports pyspark, and only when a
function here is called, so ``import rocketstore`` (and this package) never needs it::

    from rocketstore.spark import register
    register(spark)
    df = spark.read.format("rocketstore").option("topics", "Orders").load("/data/store")
"""

from __future__ import annotations

from typing import Any

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"

__all__ = ["PUSHDOWN_CONF", "register"]


def register(spark: Any) -> None:
    """Register the ``rocketstore`` format with a SparkSession and enable Python filter
    pushdown (without it Spark refuses every query of a source that can push filters)."""
    from rocketstore.spark.source import PUSHDOWN_SUPPORTED, RocketStoreDataSource  # noqa: PLC0415

    if PUSHDOWN_SUPPORTED:
        spark.conf.set(PUSHDOWN_CONF, "true")
    spark.dataSource.register(RocketStoreDataSource)
