"""PySpark data source ``rocketstore``: read a store directory as a DataFrame or a stream,
and append DataFrames and streams to it (docs/spark.md).

Layer: top (beside the CLI). The only package that imports pyspark, and only when a
function here is called, so ``import rocketstore`` (and this package) never needs it::

    from rocketstore.spark import register
    register(spark)
    df = spark.read.format("rocketstore").option("topics", "Orders").load("/data/store")
"""

from __future__ import annotations

import logging
from typing import Any

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"

__all__ = ["PUSHDOWN_CONF", "register"]

log = logging.getLogger(__name__)


def register(spark: Any) -> None:
    """Register the ``rocketstore`` format with a SparkSession and enable Python filter
    pushdown (without it Spark refuses every query of a source that can push filters).

    Filters are pushed by default only where Spark keeps a pushed filter inside its own
    query (:mod:`rocketstore.spark.probe`); elsewhere every query scans and Spark filters,
    and the ``keys``/``uniqKeys`` options give key lookups through the index."""
    from rocketstore.spark.probe import pushdown_defect  # noqa: PLC0415
    from rocketstore.spark.source import (  # noqa: PLC0415
        PUSHDOWN_SUPPORTED,
        RocketStoreDataSource,
        UnpushedDataSource,
    )

    if not PUSHDOWN_SUPPORTED:
        spark.dataSource.register(RocketStoreDataSource)  # its readers never push
        return
    spark.conf.set(PUSHDOWN_CONF, "true")
    defect = pushdown_defect(spark)
    if defect is None:
        spark.dataSource.register(RocketStoreDataSource)
        return
    log.warning(
        "rocketstore: filters are not pushed into reads by default: %s. Every query is "
        "right; a key lookup scans unless given as the keys/uniqKeys option (docs/spark.md, "
        "'Filter pushdown')",
        defect,
    )
    spark.dataSource.register(UnpushedDataSource)
