"""Write options and input columns of the ``rocketstore`` sink, checked (pure Python).

Layer: spark (top). No pyspark, no I/O: columns arrive as (name, Spark type string) pairs,
so every rule here is tested without Spark. Errors are :class:`ConfigError` naming the
option or column and its value.

Columns (names case-insensitive, as Spark's are):

| column | type | meaning |
|---|---|---|
| value | binary or string | the body (required; strings are stored as UTF-8) |
| topic | string | unless option ``topic`` is given (the option wins, as in Kafka's sink) |
| key | string | KEYS as stored (space-separated keys) |
| keys | array<string> | KEYS as a list (used where ``key`` is null) |
| tags | string | TAGS |
| properties | map<string,string> | user properties (``key``/``keys``/``tags`` override theirs) |
| headers | map<string,string> | user properties, where there is no ``properties`` column |
| queueId | int | the queue; else chosen by :mod:`.routing` (:mod:`.network_write` with namesrv) |

Every other column of a ``rocketstore`` read (``partition``, ``offset``, ``timestamp`` ...)
is ignored, so a read DataFrame can be written to another store as it is; any other
column is an error (a typo must not be dropped silently).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rocketstore.errors import ConfigError
from rocketstore.paths import NOT_ALLOWED_SEND_TOPICS, TOPIC_PATTERN
from rocketstore.remoting.acl_signing import SessionCredentials
from rocketstore.spark.option_values import credentials_option, namesrv_option

DEFAULT_QUEUE_NUMS = 4
MAX_QUEUE_NUMS = 1024

KNOWN_WRITE_OPTIONS = frozenset(
    (
        "path",
        "namesrv",
        "topic",
        "queuenums",
        "sinkid",
        "checkpointlocation",
        "accesskey",
        "secretkey",
    )
)

VALUE_TYPES = ("binary", "string")
INT_TYPES = ("int", "bigint", "smallint", "tinyint")
WRITE_COLUMNS: dict[str, tuple[str, ...]] = {
    "value": VALUE_TYPES,
    "topic": ("string",),
    "key": ("string",),
    "keys": ("array<string>",),
    "tags": ("string",),
    "properties": ("map<string,string>",),
    "headers": ("map<string,string>",),
    "queueId": INT_TYPES,
}
# Columns of a rocketstore read that a write ignores (they are decided by the store).
IGNORED_READ_COLUMNS = frozenset(
    name.lower()
    for name in (
        "partition",
        "offset",
        "timestamp",
        "timestampType",
        "msgId",
        "uniqKey",
        "commitLogOffset",
        "size",
        "bornTimestamp",
        "bornHost",
        "storeHost",
        "sysFlag",
        "flag",
        "reconsumeTimes",
        "bodyCRC",
        "broker",  # a read through name servers: the broker it came from
    )
)


@dataclass(frozen=True)
class WriteOptions:
    path: str  # "" when sending through name servers
    topic: str | None = None
    queue_nums: int = DEFAULT_QUEUE_NUMS  # queues of a topic the store does not have yet
    sink_id: str | None = None  # streaming: whose batch ids are recorded
    # streaming: the checkpointLocation the sink id came from (no sinkId option), whose
    # metadata names the query that owns it
    checkpoint: str | None = None
    # Name servers ("host:port;host:port") of a running cluster to send to instead of a
    # path (:mod:`.network_write`); queue_nums is then the queues of an auto-created topic.
    namesrv: str = ""
    # Options accessKey / secretKey: the sends are signed for the brokers' ACL.
    credentials: SessionCredentials | None = None

    @property
    def network(self) -> bool:
        return bool(self.namesrv)


@dataclass(frozen=True)
class WriteColumns:
    """The input column names (as the DataFrame spells them) for each role, or None."""

    value: str
    topic: str | None = None
    key: str | None = None
    keys: str | None = None
    tags: str | None = None
    properties: str | None = None
    queue_id: str | None = None


def check_topic(topic: str, where: str) -> None:
    if not topic or len(topic) > 127 or not TOPIC_PATTERN.match(topic):
        raise ConfigError(
            f"{where}: topic {topic!r} is not a valid topic name "
            "(1-127 characters of letters, digits, %, |, _ and -)"
        )
    if topic in NOT_ALLOWED_SEND_TOPICS:
        raise ConfigError(
            f"{where}: topic {topic!r} is a system topic no producer may send to "
            "(a broker refuses it)"
        )


def parse_write_options(raw_options: Mapping[str, str], *, streaming: bool) -> WriteOptions:
    options = {k.lower(): v for k, v in raw_options.items()}
    unknown = sorted(set(options) - KNOWN_WRITE_OPTIONS)
    if unknown:
        raise ConfigError(f"unknown write option(s) {unknown} for the rocketstore data source")
    path = options.get("path")
    namesrv = namesrv_option(options)
    if path and namesrv:
        raise ConfigError(
            f"options path={path!r} and namesrv={options['namesrv']!r} are two sinks: a "
            "write goes to a store directory (path) or through a running cluster's name "
            "servers (namesrv); give one"
        )
    if not path and not namesrv:
        raise ConfigError(
            "option path is required: df.write.format('rocketstore').mode('append')"
            ".save('/path/to/store') (or option namesrv='host:9876' to send to a running "
            "cluster)"
        )
    topic = options.get("topic")
    if topic is not None:
        check_topic(topic, "option topic")
    raw_nums = options.get("queuenums", str(DEFAULT_QUEUE_NUMS))
    try:
        queue_nums = int(raw_nums)
    except ValueError as e:
        raise ConfigError(f"option queueNums={raw_nums!r} must be an integer") from e
    if not 1 <= queue_nums <= MAX_QUEUE_NUMS:
        raise ConfigError(f"option queueNums={raw_nums!r} must be in 1..{MAX_QUEUE_NUMS}")
    sink_id = options.get("sinkid") or options.get("checkpointlocation")
    if streaming and not sink_id and not namesrv:
        raise ConfigError(
            "the rocketstore streaming sink records the batches it committed under an id: "
            "give option checkpointLocation (or option sinkId)"
        )
    checkpoint = None if options.get("sinkid") else options.get("checkpointlocation")
    return WriteOptions(
        path=path or "",
        topic=topic,
        queue_nums=queue_nums,
        sink_id=sink_id,
        checkpoint=checkpoint,
        namesrv=namesrv,
        credentials=credentials_option(options, bool(namesrv)),
    )


def check_columns(fields: Iterable[tuple[str, str]], options: WriteOptions) -> WriteColumns:
    """Map the input columns ``(name, Spark simple type)`` to their roles."""
    by_role: dict[str, str] = {}
    unknown = []
    roles = {name.lower(): name for name in WRITE_COLUMNS}
    for name, kind in fields:
        role = roles.get(name.lower())
        if role is None:
            if name.lower() not in IGNORED_READ_COLUMNS:
                unknown.append(name)
            continue
        if kind.replace(" ", "") not in WRITE_COLUMNS[role]:
            allowed = " or ".join(WRITE_COLUMNS[role])
            raise ConfigError(f"column {name!r} has type {kind}; the sink needs {allowed}")
        by_role[role] = name
    if unknown:
        raise ConfigError(
            f"unknown column(s) {unknown} for the rocketstore sink; it writes "
            f"{sorted(WRITE_COLUMNS)} (drop or rename the others)"
        )
    if "value" not in by_role:
        raise ConfigError("the rocketstore sink needs a 'value' column (binary or string)")
    if "topic" not in by_role and options.topic is None:
        raise ConfigError("the rocketstore sink needs a 'topic' column or option topic")
    return WriteColumns(
        value=by_role["value"],
        topic=None if options.topic is not None else by_role.get("topic"),
        key=by_role.get("key"),
        keys=by_role.get("keys"),
        tags=by_role.get("tags"),
        # A read's headers are its user properties, which its properties column holds too.
        properties=by_role.get("properties", by_role.get("headers")),
        queue_id=by_role.get("queueId"),
    )
