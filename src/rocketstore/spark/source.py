"""The ``rocketstore`` PySpark data source: batch reads of a store directory.

Layer: spark (top); the only module that subclasses pyspark's data source classes. Option
parsing lives in :mod:`.options`, planning in :mod:`.plan`, row reading in :mod:`.scan`.

Spark fails every query of a reader that defines ``pushFilters`` while
``spark.sql.python.filterPushdown.enabled`` is off, so :meth:`RocketStoreDataSource.reader`
returns the pushdown-capable reader only when the installed pyspark has filter pushdown
(4.1+) and the ``pushdown`` option is not false; :func:`rocketstore.spark.register` turns
the setting on.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from pyspark.sql import datasource as ds
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from rocketstore.spark import columns
from rocketstore.spark.options import MODE_COMMITLOG, ReadOptions, parse_options
from rocketstore.spark.plan import index_usable, plan_commitlog_read, plan_queue_read
from rocketstore.spark.pushdown import Pushed, push_filters
from rocketstore.spark.scan import open_store, read_partition

SOURCE_NAME = "rocketstore"
PUSHDOWN_SUPPORTED = hasattr(ds, "Filter")  # pyspark >= 4.1


class RocketStoreDataSource(DataSource):
    """``spark.read.format("rocketstore").load(path)``; options in docs/spark.md."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> Any:
        parse_options(self.options)  # a bad option fails at load(), before any planning
        return columns.spark_schema()

    def reader(self, schema: Any) -> DataSourceReader:
        options = parse_options(self.options)
        if PUSHDOWN_SUPPORTED and options.pushdown:
            return PushdownReader(options)
        return RocketStoreReader(options)


class RocketStoreReader(DataSourceReader):
    """Plans partitions on the driver side and reads them on the executors. Picklable:
    holds only the parsed options and the pushed filters."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = dataclasses.replace(options, path=os.path.abspath(options.path))
        self.pushed = Pushed()

    def partitions(self) -> Sequence[InputPartition]:
        store = open_store(self.options.path)
        if self.options.mode == MODE_COMMITLOG:
            return plan_commitlog_read(store, self.options)
        return plan_queue_read(store, self.options, self.pushed)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_partition(partition, self.options, self.pushed)


class PushdownReader(RocketStoreReader):
    """The reader with ``pushFilters`` (see the module docstring for why it is separate)."""

    def pushFilters(  # noqa: N802
        self, filters: list[Any]
    ) -> Iterable[Any]:
        if self.options.mode == MODE_COMMITLOG:
            usable = True  # every row is read anyway: key filters are checked per record
        else:
            usable = index_usable(open_store(self.options.path))
        self.pushed, rest = push_filters(filters, self.pushed, index_usable=usable)
        return rest
