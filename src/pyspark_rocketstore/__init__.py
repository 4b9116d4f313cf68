"""Auto-registration shim: makes ``format("rocketstore")`` work with no ``register`` call.

Spark imports every installed top-level module whose name starts with ``pyspark_`` and
registers its ``DefaultSource`` under ``DefaultSource.name()``. This module sits outside
the ``rocketstore`` package (and its layers) and only re-exports the data source.

Filter pushdown: Spark refuses every query of a source that pushes filters while
``spark.sql.python.filterPushdown.enabled`` is off, and a source cannot read that setting.
So this entry point pushes filters only with ``.option("pushdown", "true")`` (set the
Spark setting too); :func:`rocketstore.spark.register` sets both for you.
"""

from __future__ import annotations

from rocketstore.spark.source import RocketStoreDataSource

__all__ = ["DefaultSource"]


class DefaultSource(RocketStoreDataSource):
    """The ``rocketstore`` data source as Spark finds it by itself."""

    pushdown_by_default = False
