"""The ``rocketstore`` PySpark data source: batch and streaming reads and writes of a store
directory.

Layer: spark (top). Option parsing lives in :mod:`.options` and :mod:`.write_options`,
planning in :mod:`.plan`, row reading in :mod:`.scan`, streaming reads in :mod:`.stream`,
writes in :mod:`.write`.

Spark fails every query of a reader that defines ``pushFilters`` while
``spark.sql.python.filterPushdown.enabled`` is off, so :meth:`RocketStoreDataSource.reader`
returns the pushdown-capable reader only when the installed pyspark has filter pushdown
(4.1+) and the ``pushdown`` option is not false; :func:`rocketstore.spark.register` turns
the setting on. Where Spark lets a pushed filter outlive its query
(:mod:`rocketstore.spark.probe`), register() installs :class:`UnpushedDataSource`, which
pushes only when asked.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from pyspark.sql import datasource as ds
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
)

from rocketstore.errors import ConfigError
from rocketstore.spark import columns
from rocketstore.spark.network_source import NetworkReader
from rocketstore.spark.network_stream import NetworkStreamReader
from rocketstore.spark.network_write import NetworkStreamWriter, NetworkWriter
from rocketstore.spark.options import (
    MODE_COMMITLOG,
    ReadOptions,
    parse_options,
    parse_stream_options,
)
from rocketstore.spark.plan import (
    check_assigned_queues,
    index_usable,
    plan_commitlog_read,
    plan_queue_read,
)
from rocketstore.spark.probe import known_defect
from rocketstore.spark.pushdown import Pushed, push_filters
from rocketstore.spark.scan import open_store, read_partition
from rocketstore.spark.stream import RefusedStreamReader, RocketStoreStreamReader
from rocketstore.spark.write import RocketStoreStreamWriter, RocketStoreWriter
from rocketstore.spark.write_options import WriteColumns, check_columns, parse_write_options

SOURCE_NAME = "rocketstore"
PUSHDOWN_SUPPORTED = hasattr(ds, "Filter")  # pyspark >= 4.1

log = logging.getLogger(__name__)


class RocketStoreDataSource(DataSource):
    """``spark.read.format("rocketstore").load(path)``; options in docs/spark.md."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> Any:
        # A bad option fails at load(), before any planning. Spark calls schema() for
        # spark.read and spark.readStream alike, with the same options: the streaming
        # options' values are checked here too (options._check_stream_only_options).
        options = parse_options(self.options)
        return columns.spark_schema(options.columns or columns.default_columns(options.network))

    # Whether filters are pushed when the ``pushdown`` option is not given. Spark fails
    # every query of a pushing reader while its pushdown setting is off, and a source
    # cannot see that setting: register() turns it on; the auto-registered shim
    # (pyspark_rocketstore) cannot, so it pushes only when asked.
    pushdown_by_default = True

    def reader(self, schema: Any) -> DataSourceReader:
        options = with_schema(parse_options(self.options), schema)
        if options.network:
            return NetworkReader(options)
        given = any(name.lower() == "pushdown" for name in self.options)
        pushdown = options.pushdown if given else self.pushdown_by_default
        if PUSHDOWN_SUPPORTED and pushdown:
            defect = known_defect() if given else None
            if defect is not None:
                log.warning(
                    "rocketstore: pushdown=true on a Spark where %s: run one query per "
                    "DataFrame, or use the keys/uniqKeys options (docs/spark.md)",
                    defect,
                )
            return PushdownReader(options)
        return RocketStoreReader(options)

    def streamReader(self, schema: Any) -> DataSourceStreamReader:  # noqa: N802
        try:
            options = parse_stream_options(self.options)
            options = dataclasses.replace(options, read=with_schema(options.read, schema))
        except ConfigError as e:
            return RefusedStreamReader(e)  # raising here hides the error: see its docstring
        if options.read.network:
            return NetworkStreamReader(options)
        return RocketStoreStreamReader(options)

    def writer(self, schema: Any, overwrite: bool) -> DataSourceArrowWriter:
        options = parse_write_options(self.options, streaming=False)
        columns = _write_columns(schema, options, overwrite)
        if options.network:
            return NetworkWriter(options, columns)
        return RocketStoreWriter(options, columns)

    def streamWriter(self, schema: Any, overwrite: bool) -> DataSourceStreamArrowWriter:  # noqa: N802
        options = parse_write_options(self.options, streaming=True)
        columns = _write_columns(schema, options, overwrite)
        if options.network:
            return NetworkStreamWriter(options, columns)
        return RocketStoreStreamWriter(options, columns)


def with_schema(options: ReadOptions, schema: Any) -> ReadOptions:
    """The read options with the columns of a schema given to ``load()`` (Spark hands
    the reader that schema instead of :meth:`RocketStoreDataSource.schema`'s): known
    columns of the source's types, read in that order."""
    if schema is None:
        return options
    names = tuple(field.name for field in schema.fields)
    if names == (options.columns or columns.default_columns(options.network)):
        return options
    where = "the schema given to load()"
    if options.columns is not None:
        raise ConfigError(
            f"option columns={','.join(options.columns)!r} and {where} name different "
            "columns: give one of them"
        )
    chosen = columns.check_columns(names, where, options.network)
    for field in schema.fields:
        kind = field.dataType.simpleString().replace(" ", "")
        if kind != columns.COLUMN_TYPES[field.name]:
            raise ConfigError(
                f"{where} has column {field.name!r} as {kind}; the source reads it as "
                f"{columns.COLUMN_TYPES[field.name]}"
            )
    return dataclasses.replace(options, columns=chosen)


class UnpushedDataSource(RocketStoreDataSource):
    """The source :func:`rocketstore.spark.register` installs where Spark would let a
    pushed filter change later queries of the same DataFrame: filters are pushed only with
    ``.option("pushdown", "true")``."""

    pushdown_by_default = False


def _write_columns(schema: Any, options: Any, overwrite: bool) -> WriteColumns:
    if overwrite:
        raise ConfigError(
            "the rocketstore sink only appends (a message log cannot be overwritten): "
            "use .mode('append') / outputMode('append')"
        )
    return check_columns(((f.name, f.dataType.simpleString()) for f in schema.fields), options)


class RocketStoreReader(DataSourceReader):
    """Plans partitions on the driver side and reads them on the executors. Picklable:
    holds only the parsed options and the pushed filters."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = dataclasses.replace(options, path=os.path.abspath(options.path))
        # The keys/uniqKeys options are key filters given with the load, not by a query:
        # they are part of every query of the DataFrame.
        self.pushed = Pushed(keys=options.keys, uniq_keys=options.uniq_keys)

    def partitions(self) -> Sequence[InputPartition]:
        store = open_store(self.options)
        if self.options.mode == MODE_COMMITLOG:
            # (the queues of a CommitLog scan are the records': no queue list to check)
            return plan_commitlog_read(store, self.options)
        check_assigned_queues(store, self.options)
        index = not self.pushed.by_index or index_usable(store)
        return plan_queue_read(store, self.options, self.pushed, index=index)

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
            usable = index_usable(open_store(self.options))
        self.pushed, rest = push_filters(filters, self.pushed, index_usable=usable)
        return rest
