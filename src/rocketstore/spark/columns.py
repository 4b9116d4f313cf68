"""The columns of a ``rocketstore`` read (docs/spark.md) and the Arrow batches that carry them.

Layer: spark (top). pyspark and pyarrow are imported inside the functions that need them.
The Arrow schema here must equal what Spark derives from the Spark schema
(``to_arrow_schema(schema, timezone="UTC")``) field for field, or Spark rejects the batch;
a test holds the two together.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from rocketstore.errors import ConfigError
from rocketstore.format import properties as props
from rocketstore.format.message import MessageExt

TIMESTAMP_TYPE_LOG_APPEND_TIME = 1  # Kafka's timestampType for broker-assigned times

# (name, type) in the order of the contract; types in Spark's DDL words.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("key", "string"),
    ("value", "binary"),
    ("topic", "string"),
    ("partition", "int"),
    ("offset", "bigint"),
    ("timestamp", "timestamp"),
    ("timestampType", "int"),
    ("keys", "array<string>"),
    ("tags", "string"),
    ("msgId", "string"),
    ("uniqKey", "string"),
    ("commitLogOffset", "bigint"),
    ("size", "int"),
    ("bornTimestamp", "timestamp"),
    ("bornHost", "string"),
    ("storeHost", "string"),
    ("sysFlag", "int"),
    ("flag", "int"),
    ("reconsumeTimes", "int"),
    ("bodyCRC", "int"),
    ("properties", "map<string,string>"),
    # The properties a producer set itself (Kafka's headers): properties less RocketMQ's
    # own names (format.properties.SYSTEM_PROPERTY_NAMES).
    ("headers", "map<string,string>"),
)
COLUMN_NAMES = tuple(name for name, _ in COLUMNS)
# A read through name servers (option namesrv) adds the brokerName each row came from.
BROKER_COLUMN = "broker"
NETWORK_COLUMN_NAMES = (*COLUMN_NAMES, BROKER_COLUMN)
COLUMN_TYPES = {**dict(COLUMNS), BROKER_COLUMN: "string"}
DDL = ", ".join(f"`{name}` {kind}" for name, kind in COLUMNS)
# Columns the column-wise decoder always fills: fixed header fields, nearly free, and what
# the scans filter on. The costly ones (value, the property-derived columns, msgId, hosts)
# are decoded only for a read that selects them.
ALWAYS_DECODED = frozenset(("topic", "partition", "offset", "timestamp", "sysFlag"))
# Columns made from the properties text, which costs the most to split.
FROM_PROPERTIES = frozenset(("key", "keys", "tags", "uniqKey", "properties", "headers"))

# Rows per Arrow batch, and a body-bytes cap so one batch of large bodies stays small.
BATCH_ROWS = 4096
BATCH_BODY_BYTES = 16 * 1024 * 1024


def default_columns(network: bool) -> tuple[str, ...]:
    """Every column of a read of store files, or through name servers (``network``)."""
    return NETWORK_COLUMN_NAMES if network else COLUMN_NAMES


def check_columns(names: Iterable[str], where: str, network: bool = False) -> tuple[str, ...]:
    """A read's column selection (the ``columns`` option or a schema given to ``load``):
    known names, each once, in the order given. ConfigError names what is wrong."""
    chosen = tuple(names)
    known = default_columns(network)
    unknown = [name for name in chosen if name not in known]
    if unknown:
        hint = " (broker only through name servers, option namesrv)" if not network else ""
        raise ConfigError(
            f"{where} names unknown column(s) {unknown}; the source has {list(known)}{hint}"
        )
    repeated = sorted({name for name in chosen if chosen.count(name) > 1})
    if repeated:
        raise ConfigError(f"{where} names column(s) {repeated} more than once")
    if not chosen:
        raise ConfigError(f"{where} names no column")
    return chosen


def spark_schema(columns: Sequence[str] = COLUMN_NAMES) -> Any:
    """The Spark ``StructType`` of ``columns`` (built without a session: DDL parsing
    would need one)."""
    from pyspark.sql import types as spark_types  # noqa: PLC0415

    simple = {
        "string": spark_types.StringType(),
        "binary": spark_types.BinaryType(),
        "int": spark_types.IntegerType(),
        "bigint": spark_types.LongType(),
        "timestamp": spark_types.TimestampType(),
        "array<string>": spark_types.ArrayType(spark_types.StringType()),
        "map<string,string>": spark_types.MapType(
            spark_types.StringType(), spark_types.StringType()
        ),
    }
    return spark_types.StructType(
        [spark_types.StructField(name, simple[COLUMN_TYPES[name]]) for name in columns]
    )


def arrow_schema(columns: Iterable[str] = COLUMN_NAMES) -> Any:
    """The Arrow schema of ``columns`` (the full read's by default)."""
    import pyarrow as pa  # noqa: PLC0415

    timestamp = pa.timestamp("us", tz="UTC")
    simple = {
        "string": pa.string(),
        "binary": pa.binary(),
        "int": pa.int32(),
        "bigint": pa.int64(),
        "timestamp": timestamp,
        "array<string>": pa.list_(pa.field("element", pa.string())),
        "map<string,string>": pa.map_(
            pa.field("key", pa.string(), nullable=False), pa.field("value", pa.string())
        ),
    }
    return pa.schema([pa.field(name, simple[COLUMN_TYPES[name]]) for name in columns])


def project(batches: Iterator[Any], columns: tuple[str, ...] | None) -> Iterator[Any]:
    """The batches with only ``columns``, in that order (all of them for None)."""
    if columns is None:
        yield from batches
        return
    for batch in batches:
        yield batch.select(list(columns))


class RowBuffer:
    """Collects messages column by column and hands out Arrow record batches."""

    def __init__(self, include_body: bool = True) -> None:
        self.include_body = include_body
        self._schema = arrow_schema()
        self._columns: list[list[Any]] = [[] for _ in COLUMNS]
        self._body_bytes = 0

    def __len__(self) -> int:
        return len(self._columns[0])

    @property
    def full(self) -> bool:
        return len(self) >= BATCH_ROWS or self._body_bytes >= BATCH_BODY_BYTES

    def append(
        self, message: MessageExt, queue_offset: int, queue: tuple[str, int] | None = None
    ) -> None:
        """One row; ``queue_offset`` is the offset in the queue read, ``queue`` that queue's
        (topic, queue id) when the row was read through one: a light queue's (LMQ) units
        point at records of other topics, and its rows are the queue's."""
        keys = message.keys
        body = message.body if self.include_body else None
        topic, partition = queue if queue is not None else (message.topic, message.queue_id)
        values = (
            keys,  # key: KEYS as stored
            body,  # value
            topic,  # topic
            partition,  # partition
            queue_offset,  # offset
            message.store_timestamp * 1000,  # timestamp (µs)
            TIMESTAMP_TYPE_LOG_APPEND_TIME,  # timestampType
            props.split_keys(keys),  # keys
            message.tags,  # tags
            message.msg_id,  # msgId (offsetMsgId)
            message.uniq_key,  # uniqKey
            message.commit_log_offset,  # commitLogOffset
            message.size,  # size
            message.born_timestamp * 1000,  # bornTimestamp (µs)
            message.born_host,  # bornHost
            message.store_host,  # storeHost
            message.sys_flag,  # sysFlag
            message.flag,  # flag
            message.reconsume_times,  # reconsumeTimes
            message.body_crc,  # bodyCRC
            list(message.properties.items()),  # properties
            list(props.user_properties(message.properties).items()),  # headers
        )
        for column, value in zip(self._columns, values, strict=True):
            column.append(value)
        if body is not None:
            self._body_bytes += len(body)

    def take(self) -> Any:
        """The rows collected so far as a ``pyarrow.RecordBatch``; the buffer is emptied."""
        import pyarrow as pa  # noqa: PLC0415

        arrays = [
            pa.array(column, type=self._schema.field(i).type)
            for i, column in enumerate(self._columns)
        ]
        batch = pa.RecordBatch.from_arrays(arrays, schema=self._schema)
        self._columns = [[] for _ in COLUMNS]
        self._body_bytes = 0
        return batch
