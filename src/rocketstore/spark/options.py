"""Read options of the ``rocketstore`` Spark data source, parsed and checked (pure Python).

Layer: spark (top). Imports no pyspark and does no I/O: every function here works on the
option strings Spark hands over and on topic names, so it is tested without Spark. Every
error is a :class:`~rocketstore.errors.ConfigError` naming the option and its value.

Option names follow Spark's Kafka connector (case-insensitive, as Spark passes them).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from rocketstore.errors import ConfigError
from rocketstore.format.selector import SQL92
from rocketstore.format.subscription import Subscription, build_subscription, parse_subscription
from rocketstore.paths import TOPIC_PATTERN, is_system_topic
from rocketstore.remoting.acl_signing import SessionCredentials
from rocketstore.spark.option_values import (
    bool_option,
    column_list,
    credentials_option,
    duration_ms_option,
    int_option,
    json_option,
    key_list,
    namesrv_option,
)

# Defined here, and the two value parsers write_options and users have taken from here.
__all__ = [
    "ADMISSION_OPTIONS",
    "BATCH_ONLY_OPTIONS",
    "DEFAULT_MAX_TRIGGER_DELAY",
    "EARLIEST",
    "KNOWN_OPTIONS",
    "LATEST",
    "MAX_PARTITION_BYTES",
    "MODE_COMMITLOG",
    "MODE_QUEUE",
    "OPEN_COST_BYTES",
    "SPARK_ADDED_OPTIONS",
    "STREAMING_OPTIONS",
    "Bound",
    "BrokerQueue",
    "PerQueue",
    "ReadOptions",
    "StreamOptions",
    "TopicSelection",
    "credentials_option",
    "is_default_topic",
    "namesrv_option",
    "parse_options",
    "parse_stream_options",
]


MODE_QUEUE = "queue"
MODE_COMMITLOG = "commitlog"

# Kafka's special offsets inside the JSON options.
EARLIEST = -2
LATEST = -1

KNOWN_OPTIONS = frozenset(
    name.lower()
    for name in (
        "path",
        "namesrv",
        "mode",
        "topics",
        "topicPattern",
        "assign",
        "startingOffsets",
        "endingOffsets",
        "startingTimestamp",
        "endingTimestamp",
        "startingOffsetsByTimestamp",
        "endingOffsetsByTimestamp",
        "tags",
        "sql92",
        "maxRecordsPerPartition",
        "minPartitions",
        "maxPartitionBytes",
        "openCostInBytes",
        "includeBody",
        "pushdown",
        "keys",
        "uniqKeys",
        "columns",
        "storePathCommitLog",
        "readOnlyCommitLogStorePaths",
        "storePathDLedgerCommitLog",
        "accessKey",
        "secretKey",
        "brokerDownWaitMs",
    )
)
# Streaming options: accepted (so one option map serves both) but unused by batch reads.
# Their values are checked by every load() all the same (see parse_options).
STREAMING_OPTIONS = frozenset(
    ("maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay", "failondataloss", "group")
)
# Of those, the ones that mean nothing but to a stream (failOnDataLoss is Kafka's batch
# option too), and the batch-only options that contradict them.
ADMISSION_OPTIONS = ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay")
BATCH_ONLY_OPTIONS = ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp")
DEFAULT_MAX_TRIGGER_DELAY = "15m"  # Kafka's default
# Queue ranges packed into one task: Spark's spark.sql.files.maxPartitionBytes and
# openCostInBytes defaults (plan.group_partitions).
MAX_PARTITION_BYTES = 128 * 1024 * 1024
OPEN_COST_BYTES = 4 * 1024 * 1024
# Options Spark itself adds to a streaming query's source and sink option maps.
SPARK_ADDED_OPTIONS = frozenset(("checkpointlocation",))


def is_default_topic(topic: str) -> bool:
    """Topics read when none are named, and those a ``topicPattern`` can match: all but
    RocketMQ's system topics (TopicValidator.isSystemTopic), as Kafka's connector leaves
    out internal topics. The per-group copies (%RETRY%, %DLQ%) and light queues (%LMQ%)
    are topics like any other there. Name a system topic in ``topics`` or ``assign`` to
    read it."""
    return not is_system_topic(topic)


@dataclass(frozen=True)
class TopicSelection:
    """What to read: ``topics``, ``topicPattern``, ``assign`` or (none given) the default."""

    topics: frozenset[str] | None = None
    pattern: str | None = None
    assign: Mapping[str, frozenset[int]] | None = None

    def accepts_topic(self, topic: str) -> bool:
        if self.topics is not None:
            return topic in self.topics
        if self.assign is not None:
            return topic in self.assign
        if not is_default_topic(topic):
            return False
        return self.pattern is None or re.fullmatch(self.pattern, topic) is not None

    def accepts(self, topic: str, queue_id: int) -> bool:
        if not self.accepts_topic(topic):
            return False
        return self.assign is None or queue_id in self.assign[topic]

    def select(self, store_topics: Mapping[str, list[int]]) -> list[tuple[str, int]]:
        """The (topic, queue id) pairs to read among a store's queues, sorted."""
        return sorted(
            (topic, qid) for topic, qids in store_topics.items() for qid in qids
            if self.accepts(topic, qid)
        )  # fmt: skip


BrokerQueue = tuple[str, str, int]  # (topic, broker name, queue id)


@dataclass(frozen=True)
class Bound:
    """One end of the range to read in every queue: a default (EARLIEST/LATEST), an epoch-ms
    timestamp for all queues, or per-queue offsets / timestamps (others use the default).

    A store directory is one broker's: its queues are keyed (topic, queue id). A read
    through a name server (option ``namesrv``) keys them (topic, broker name, queue id),
    ``broker_offsets`` / ``broker_timestamps``, so two brokers' queue 0 never mix."""

    default: int
    timestamp_ms: int | None = None
    offsets: Mapping[tuple[str, int], int] = field(default_factory=dict)
    timestamps: Mapping[tuple[str, int], int] = field(default_factory=dict)
    broker_offsets: Mapping[BrokerQueue, int] = field(default_factory=dict)
    broker_timestamps: Mapping[BrokerQueue, int] = field(default_factory=dict)

    def topics(self) -> set[str]:
        plain = {topic for topic, _ in [*self.offsets, *self.timestamps]}
        return plain | {topic for topic, _, _ in [*self.broker_offsets, *self.broker_timestamps]}


@dataclass(frozen=True)
class ReadOptions:
    path: str  # "" when reading through name servers
    mode: str = MODE_QUEUE
    selection: TopicSelection = TopicSelection()
    start: Bound = Bound(EARLIEST)
    end: Bound = Bound(LATEST)
    tags: str | None = None
    # A SQL92 selector on the messages' properties (a MessageSelector.bySql consumer's).
    sql92: str | None = None
    max_records_per_partition: int | None = None
    min_partitions: int | None = None
    # Small queue ranges are packed into one task up to about this many bytes, each counted
    # with open_cost_bytes more (Spark's spark.sql.files.maxPartitionBytes/openCostInBytes).
    max_partition_bytes: int = MAX_PARTITION_BYTES
    open_cost_bytes: int = OPEN_COST_BYTES
    include_body: bool = True
    pushdown: bool = True
    # The rows `key IN (...)` / `uniqKey IN (...)` keep, looked up in the index.
    keys: frozenset[str] | None = None
    uniq_keys: frozenset[str] | None = None
    # The columns to read, in this order (all of them for None): the others are never
    # decoded (``columns`` option, or a schema given to load()).
    columns: tuple[str, ...] | None = None
    # Where the CommitLog files are when not in <path>/commitlog: RocketMQ's
    # storePathCommitLog (several paths separated by ",") and readOnlyCommitLogStorePaths.
    store_path_commit_log: str = ""
    read_only_commit_log_store_paths: str = ""
    # A DLedger log's data directories, when not the one dledger-<id>/data of <path>.
    store_path_dledger_commit_log: str = ""
    # Name servers ("host:port;host:port") of a running cluster to read instead of a path.
    namesrv: str = ""
    # Options accessKey / secretKey: every request of the network mode is signed with them
    # (the brokers' ACL). Never in a repr (SessionCredentials hides the secret).
    credentials: SessionCredentials | None = None
    # Option brokerDownWaitMs: how long a request to a broker that does not answer is
    # retried (with backoff) before the read fails naming it; 0 fails at once.
    broker_down_wait_ms: int = 0

    @property
    def network(self) -> bool:
        return bool(self.namesrv)

    def subscription(self) -> Subscription:
        """What rows the tags or sql92 option keep (``read_options`` checked both)."""
        if self.sql92 is not None:
            return build_subscription(self.sql92, SQL92)
        # Trimmed: an option written " * " means every tag (RocketMQ would read a tag "*").
        return parse_subscription(self.tags.strip() if self.tags else None)


PerQueue = tuple[dict[tuple[str, int], int], dict[BrokerQueue, int]]


def _per_queue_ints(name: str, raw: str, network: bool = False) -> PerQueue:
    """``{"A":{"0":12,"1":-2}}`` -> {("A", 0): 12, ("A", 1): -2}; a queue may be named
    ``"broker-a:0"`` (broker name, colon, queue id).

    Through name servers (``network``) every queue must name its broker: the second dict,
    keyed (topic, broker, queue id). A store directory is one broker's: there the broker
    name is not checked (any name; the store does not know its own) and the first dict is
    keyed (topic, queue id), a queue named twice under two brokers being refused."""
    parsed = json_option(name, raw)
    if not isinstance(parsed, dict):
        raise ConfigError(f'option {name}={raw!r} must be a JSON object like {{"A":{{"0":12}}}}')
    result: dict[tuple[str, int], int] = {}
    by_broker: dict[BrokerQueue, int] = {}
    for topic, queues in parsed.items():
        if not isinstance(queues, dict):
            raise ConfigError(f"option {name}={raw!r}: topic {topic!r} must map queue ids to ints")
        for qid, value in queues.items():
            broker, _, queue_text = qid.rpartition(":")
            try:
                queue_id = int(queue_text)
            except ValueError as e:
                raise ConfigError(f"option {name}={raw!r}: queue id {qid!r} is not an int") from e
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"option {name}={raw!r}: value {value!r} is not an int")
            if network:
                if not broker:
                    raise ConfigError(
                        f"option {name}={raw!r}: queue {qid!r} of topic {topic!r} names no "
                        f'broker; through name servers write it "broker-a:{queue_id}" (each '
                        "broker has its own queue ids)"
                    )
                by_broker[(topic, broker, queue_id)] = value
                continue
            if result.get((topic, queue_id), value) != value:
                raise ConfigError(
                    f"option {name}={raw!r}: topic {topic!r} queue {queue_id} is given twice; "
                    "a store directory is one broker's queues"
                )
            result[(topic, queue_id)] = value
    return result, by_broker


def _parse_selection(options: Mapping[str, str]) -> TopicSelection:
    given = [n for n in ("topics", "topicPattern", "assign") if n.lower() in options]
    if len(given) > 1:
        raise ConfigError(f"give only one of topics, topicPattern, assign (got {given})")
    if "topics" in options:
        raw = options["topics"]
        names = frozenset(t.strip() for t in raw.split(",") if t.strip())
        if not names:
            raise ConfigError(f"option topics={raw!r} names no topic")
        return TopicSelection(topics=names)
    if "topicpattern" in options:
        raw = options["topicpattern"]
        try:
            re.compile(raw)
        except re.error as e:
            raise ConfigError(f"option topicPattern={raw!r} is not a valid regex: {e}") from e
        return TopicSelection(pattern=raw)
    if "assign" in options:
        raw = options["assign"]
        parsed = json_option("assign", raw)
        if not isinstance(parsed, dict) or not parsed:
            raise ConfigError(f'option assign={raw!r} must be a JSON object like {{"A":[0,1]}}')
        assign: dict[str, frozenset[int]] = {}
        for topic, qids in parsed.items():
            if not isinstance(qids, list) or not all(
                isinstance(q, int) and not isinstance(q, bool) and q >= 0 for q in qids
            ):
                raise ConfigError(f"option assign={raw!r}: {topic!r} needs a list of queue ids")
            assign[topic] = frozenset(qids)
        return TopicSelection(assign=assign)
    return TopicSelection()


def _parse_bound(
    options: Mapping[str, str], which: str, default: int, network: bool = False
) -> Bound:
    """``which`` is "starting" or "ending"."""
    names = (f"{which}Offsets", f"{which}Timestamp", f"{which}OffsetsByTimestamp")
    given = [n for n in names if n.lower() in options]
    if len(given) > 1:
        raise ConfigError(f"give only one of {', '.join(names)} (got {given})")
    offsets_name, timestamp_name, by_timestamp_name = names
    if offsets_name.lower() in options:
        raw = options[offsets_name.lower()].strip()
        if raw.lower() == "earliest":
            return Bound(EARLIEST)
        if raw.lower() == "latest":
            return Bound(LATEST)
        offsets, by_broker = _per_queue_ints(offsets_name, raw, network)
        for value in [*offsets.values(), *by_broker.values()]:
            if value < EARLIEST:
                raise ConfigError(
                    f"option {offsets_name}={raw!r}: offset {value} is not >= 0, -2 or -1"
                )
        return Bound(default, offsets=offsets, broker_offsets=by_broker)
    if timestamp_name.lower() in options:
        timestamp = int_option(options, timestamp_name, 0)
        return Bound(default, timestamp_ms=timestamp)
    if by_timestamp_name.lower() in options:
        raw = options[by_timestamp_name.lower()]
        stamps, by_broker = _per_queue_ints(by_timestamp_name, raw, network)
        for value in [*stamps.values(), *by_broker.values()]:
            if value < 0:
                raise ConfigError(f"option {by_timestamp_name}={raw!r}: {value} is negative")
        return Bound(default, timestamps=stamps, broker_timestamps=by_broker)
    return Bound(default)


def parse_options(raw_options: Mapping[str, str], default_start: int = EARLIEST) -> ReadOptions:
    """Check every read option; ConfigError names the first bad one and its value."""
    options = {k.lower(): v for k, v in raw_options.items()}
    unknown = sorted(set(options) - KNOWN_OPTIONS - STREAMING_OPTIONS - SPARK_ADDED_OPTIONS)
    if unknown:
        raise ConfigError(f"unknown option(s) {unknown} for the rocketstore data source")
    path = options.get("path", "")
    namesrv = namesrv_option(options)
    if path and namesrv:
        raise ConfigError(
            f"options path={path!r} and namesrv={options['namesrv']!r} are two sources: a "
            "read goes through store files (path) or through a running cluster's name "
            "servers (namesrv); give one"
        )
    if not path and not namesrv:
        raise ConfigError(
            "option path is required: spark.read.format('rocketstore').load('/path/to/store')"
            " (or option namesrv='host:9876' to read a running cluster)"
        )
    mode = options.get("mode", MODE_QUEUE).strip().lower()
    if mode not in (MODE_QUEUE, MODE_COMMITLOG):
        raise ConfigError(f"option mode={options['mode']!r} must be 'queue' or 'commitlog'")
    if namesrv and mode != MODE_QUEUE:
        raise ConfigError(
            f"option mode={options['mode']!r} reads CommitLog files; through name servers "
            "(option namesrv) the brokers' queues are read (mode=queue)"
        )
    network = bool(namesrv)
    selection = _parse_selection(options)
    start = _parse_bound(options, "starting", default_start, network)
    end = _parse_bound(options, "ending", LATEST, network)
    for bound, name in ((start, "starting"), (end, "ending")):
        for topic in sorted(bound.topics()):
            if not selection.accepts_topic(topic):
                raise ConfigError(
                    f"{name} offsets name topic {topic!r}, which is not among the topics read"
                )
    tags = options.get("tags")
    if tags and _names_no_tag(tags):
        raise ConfigError(f"option tags={tags!r} names no tag (give 'TagA || TagB', or '*')")
    sql92 = options.get("sql92")
    if sql92 is not None:
        if tags is not None:
            raise ConfigError("options tags and sql92 are two kinds of subscription: give one")
        try:
            build_subscription(sql92, SQL92)
        except ConfigError as e:
            raise ConfigError(f"option sql92: {e}") from e
    _check_order(options, start, end)
    if mode == MODE_COMMITLOG:
        _check_commitlog_bounds(start, end)
    _check_stream_only_options(options, mode)
    return ReadOptions(
        path=path,
        mode=mode,
        selection=selection,
        start=start,
        end=end,
        tags=tags,
        sql92=sql92,
        max_records_per_partition=int_option(options, "maxRecordsPerPartition", 1),
        min_partitions=int_option(options, "minPartitions", 1),
        max_partition_bytes=int_option(options, "maxPartitionBytes", 1, MAX_PARTITION_BYTES),
        open_cost_bytes=int_option(options, "openCostInBytes", 0, OPEN_COST_BYTES),
        include_body=bool_option(options, "includeBody", True),
        pushdown=bool_option(options, "pushdown", True),
        keys=key_list(options, "keys"),
        uniq_keys=key_list(options, "uniqKeys"),
        columns=column_list(options, network),
        store_path_commit_log=options.get("storepathcommitlog", ""),
        read_only_commit_log_store_paths=options.get("readonlycommitlogstorepaths", ""),
        store_path_dledger_commit_log=options.get("storepathdledgercommitlog", ""),
        namesrv=namesrv,
        credentials=credentials_option(options, network),
        broker_down_wait_ms=_broker_down_wait_ms(options, network),
    )


def _broker_down_wait_ms(options: Mapping[str, str], network: bool) -> int:
    wait_ms = int_option(options, "brokerDownWaitMs", 0)
    if wait_ms is None:
        return 0
    if not network:
        raise ConfigError(
            f"option brokerDownWaitMs={options['brokerdownwaitms']!r} waits for brokers of a "
            "running cluster: it needs option namesrv"
        )
    return wait_ms


def _names_no_tag(tags: str) -> bool:
    """Whether a tags option, trimmed as ``ReadOptions.subscription`` trims it, names no
    tag: RocketMQ refuses "||" (FilterAPI: "subString split error") and matches nothing
    with a blank expression; as an option, both are mistakes to name."""
    text = tags.strip()
    if not text:
        return True
    try:
        return parse_subscription(text).matches_none
    except ConfigError:
        return True


def _given(options: Mapping[str, str], which: str) -> str:
    """The start or end option given, as ``name='value'`` (for error messages)."""
    for name in (f"{which}Offsets", f"{which}Timestamp", f"{which}OffsetsByTimestamp"):
        if name.lower() in options:
            return f"{name}={options[name.lower()]!r}"
    return f"{which}Offsets (default)"


def _check_order(options: Mapping[str, str], start: Bound, end: Bound) -> None:
    """A start after the end it is given with reads nothing: that is a mistake in the
    options, refused as Kafka's source refuses it, rather than an empty result. Checked
    where both ends are numbers of the same kind: queue offsets, or store times."""
    problems: list[str] = []
    for key in sorted(start.offsets.keys() & end.offsets.keys()):
        first, last = start.offsets[key], end.offsets[key]
        if first >= 0 and last >= 0 and first > last:
            problems.append(f"topic {key[0]!r} queue {key[1]}: offset {first} > {last}")
    for topic, broker, qid in sorted(start.broker_offsets.keys() & end.broker_offsets.keys()):
        first = start.broker_offsets[(topic, broker, qid)]
        last = end.broker_offsets[(topic, broker, qid)]
        if first >= 0 and last >= 0 and first > last:
            problems.append(f"topic {topic!r} queue {broker}:{qid}: offset {first} > {last}")
    if start.timestamp_ms is not None or start.timestamps:
        queues = start.timestamps.keys() | end.timestamps.keys()
        pairs = [
            (f"topic {t!r} queue {q}: ", start.timestamps.get((t, q), start.timestamp_ms),
             end.timestamps.get((t, q), end.timestamp_ms))
            for t, q in sorted(queues)
        ]  # fmt: skip
        pairs.append(("", start.timestamp_ms, end.timestamp_ms))
        for where, first_ms, last_ms in pairs:
            if first_ms is not None and last_ms is not None and first_ms > last_ms:
                problems.append(f"{where}time {first_ms} > {last_ms}")
    if problems:
        raise ConfigError(
            f"{_given(options, 'starting')} starts after {_given(options, 'ending')} ends "
            f"({'; '.join(problems)}): the range read is [start, end)"
        )


def _check_commitlog_bounds(start: Bound, end: Bound) -> None:
    """A CommitLog scan knows no queue's min and max offsets in advance: a start at
    "latest" or an end at "earliest" cannot be resolved there."""
    if start.default == LATEST or LATEST in start.offsets.values():
        raise ConfigError("startingOffsets=latest (-1) is not supported with mode=commitlog")
    if end.default == EARLIEST or EARLIEST in end.offsets.values():
        raise ConfigError("endingOffsets=earliest (-2) is not supported with mode=commitlog")


def _check_stream_only_options(options: Mapping[str, str], mode: str) -> None:
    """Check the streaming options' values, and refuse them beside a batch-only option.

    Called from ``schema()``, which runs at ``load()`` for ``spark.read`` and
    ``spark.readStream`` alike, and Spark hands the source the same options either way:
    ``load()`` cannot tell a stream from a batch read. So a value no query could use
    (``maxOffsetsPerTrigger=0``) fails there, whichever it is, and so does a streaming
    option given with ``endingOffsets`` or ``mode=commitlog``: one of the two is wrong
    whichever kind of query this is. ``endingOffsets`` alone on a stream can only be
    refused when the query starts (:func:`parse_stream_options`)."""
    max_rows = int_option(options, "maxOffsetsPerTrigger", 1)
    min_rows = int_option(options, "minOffsetsPerTrigger", 1)
    duration_ms_option(options, "maxTriggerDelay", DEFAULT_MAX_TRIGGER_DELAY)
    bool_option(options, "failOnDataLoss", True)
    if max_rows is not None and min_rows is not None and min_rows > max_rows:
        raise ConfigError(
            f"option minOffsetsPerTrigger={options['minoffsetspertrigger']!r} is higher than "
            f"maxOffsetsPerTrigger={options['maxoffsetspertrigger']!r}"
        )
    streaming = [n for n in ADMISSION_OPTIONS if n.lower() in options]
    if not streaming:
        return
    batch_only = [f"{n}={options[n.lower()]!r}" for n in BATCH_ONLY_OPTIONS if n.lower() in options]
    if mode == MODE_COMMITLOG:
        batch_only.append(f"mode={options['mode']!r}")
    if batch_only:
        raise ConfigError(
            f"option {batch_only[0]} is for batch reads and {streaming[0]} for streaming "
            "reads: a stream has no end and reads through the consume queues (mode=queue), "
            "a batch read has no triggers; drop one of them"
        )


@dataclass(frozen=True)
class StreamOptions:
    """A streaming read: the read options plus admission control and data-loss handling."""

    read: ReadOptions
    max_offsets_per_trigger: int | None = None
    # Kafka's minOffsetsPerTrigger / maxTriggerDelay: a micro-batch waits for this many new
    # queue entries, or until this long after the previous batch.
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60_000
    fail_on_data_loss: bool = True
    # Through name servers: the consumer group the committed offsets are also sent to.
    group: str | None = None


def _group_option(options: Mapping[str, str], network: bool) -> str | None:
    group = options.get("group")
    if group is None:
        return None
    if not network:
        raise ConfigError(
            f"option group={group!r} commits a stream's offsets to a running cluster's "
            "consumer group: it needs option namesrv"
        )
    if not group or len(group) > 255 or not TOPIC_PATTERN.match(group):
        raise ConfigError(
            f"option group={group!r} is not a valid consumer group name "
            "(1-255 characters of letters, digits, %, |, _ and -)"
        )
    return group


def parse_stream_options(raw_options: Mapping[str, str]) -> StreamOptions:
    """Streaming reads start at ``latest`` by default (as Kafka's source does), read
    through the consume queues and have no end."""
    options = {k.lower(): v for k, v in raw_options.items()}
    for name in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"):
        if name.lower() in options:
            raise ConfigError(
                f"option {name}={options[name.lower()]!r} is for batch reads; "
                "a streaming query has no end"
            )
    if options.get("mode", MODE_QUEUE).strip().lower() != MODE_QUEUE:
        raise ConfigError(
            f"option mode={options['mode']!r}: streaming reads go through the consume queues "
            "(mode=queue)"
        )
    read = parse_options(raw_options, default_start=LATEST)
    return StreamOptions(
        read=read,
        max_offsets_per_trigger=int_option(options, "maxOffsetsPerTrigger", 1),
        min_offsets_per_trigger=int_option(options, "minOffsetsPerTrigger", 1),
        max_trigger_delay_ms=duration_ms_option(
            options, "maxTriggerDelay", DEFAULT_MAX_TRIGGER_DELAY
        ),
        fail_on_data_loss=bool_option(options, "failOnDataLoss", True),
        group=_group_option(options, read.network),
    )
