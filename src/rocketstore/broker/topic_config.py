"""Topic configuration: ``config/topics.json`` in RocketMQ's ``TopicConfigManager`` layout.

Layer: broker. Synchronous and thread-safe (one lock; every call is short and never touches
the network), so the asyncio server may call it directly.

File layout (RocketMQ 4.9.8 ``TopicConfigSerializeWrapper``)::

    {"dataVersion": {"counter": N, "timestamp": ms},
     "topicConfigTable": {NAME: {"order": false, "perm": 6, "readQueueNums": 4,
                                 "topicFilterType": "SINGLE_TAG", "topicName": NAME,
                                 "topicSysFlag": 0, "writeQueueNums": 4}, ...}}

Fields a newer RocketMQ adds (5.x ``attributes``) are kept as they are on rewrite.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from rocketstore.broker.broker_config import MAX_QUEUE_NUMS as BROKER_MAX_QUEUE_NUMS
from rocketstore.broker.broker_config import (
    TOPICS_FILE,
    BrokerConfig,
    config_file_path,
    load_config_file,
    persist_config_file,
)
from rocketstore.broker.perm_name import (
    PERM_INHERIT,
    PERM_PRIORITY,
    PERM_READ,
    PERM_WRITE,
    is_readable,
    is_writeable,
)
from rocketstore.errors import ConfigError
from rocketstore.format.properties import TIMER_TOPIC
from rocketstore.paths import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    BENCHMARK_TOPIC,
    DLQ_PREFIX,
    OFFSET_MOVED_EVENT_TOPIC,
    RETRY_PREFIX,
    SCHEDULE_TOPIC,
    SELF_TEST_TOPIC,
    SYSTEM_TOPIC_NAMES,
    TRACE_TOPIC,
)

log = logging.getLogger(__name__)

# The most queues the offline tools create or list for one topic; a broker's maxQueueNums
# is at most this too.
MAX_QUEUE_NUMS = BROKER_MAX_QUEUE_NUMS

SINGLE_TAG = "SINGLE_TAG"
MULTI_TAG = "MULTI_TAG"
TOPIC_FILTER_TYPES = (SINGLE_TAG, MULTI_TAG)

# TopicValidator (4.9.8): the limits on a topic name (the system topics' names are in paths).
REPLY_TOPIC_POSTFIX = "REPLY_TOPIC"
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
TOPIC_MAX_LENGTH = 127
SCHEDULE_TOPIC_QUEUE_NUMS = 18

_VALID_TOPIC_CHARS = frozenset("%|-_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def perm_to_string(perm: int) -> str:
    """``PermName.perm2String``: ``RW-`` for 6, ``RWX`` for 7, ``-W-`` for 2."""
    return (
        ("R" if perm & PERM_READ else "-")
        + ("W" if perm & PERM_WRITE else "-")
        + ("X" if perm & PERM_INHERIT else "-")
    )


def topic_name_problem(topic: str) -> str | None:
    """Why ``topic`` is not a valid topic name (TopicValidator.validateTopic), or None."""
    if not isinstance(topic, str) or not topic.strip():
        return "The specified topic is blank."
    if any(ch not in _VALID_TOPIC_CHARS for ch in topic):
        return "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if len(topic) > TOPIC_MAX_LENGTH:
        return "The specified topic is longer than topic max length."
    return None


def topic_manager_for(
    store_root: str | os.PathLike[str], broker: BrokerConfig, *, timer_wheel: bool = False
) -> TopicConfigManager:
    """The topic table of a broker with these settings serving the store (``timer_wheel``:
    the store's timer wheel is on, its topic is in the table)."""
    return TopicConfigManager(
        store_root,
        auto_create_topic_enable=broker.auto_create_topic_enable,
        default_topic_queue_nums=broker.default_topic_queue_nums,
        cluster_name=broker.broker_cluster_name,
        broker_name=broker.broker_name,
        cluster_topic_enable=broker.cluster_topic_enable,
        broker_topic_enable=broker.broker_topic_enable,
        trace_topic_enable=broker.trace_topic_enable,
        trace_topic_name=broker.msg_trace_topic_name,
        timer_topic_enable=timer_wheel,
    )


def retry_topic(group: str) -> str:
    return RETRY_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_PREFIX + group


@dataclass
class TopicConfig:
    """One topic's queue counts and permissions (RocketMQ's ``TopicConfig``)."""

    topic_name: str
    read_queue_nums: int = 4
    write_queue_nums: int = 4
    perm: int = PERM_READ | PERM_WRITE
    topic_sys_flag: int = 0
    order: bool = False
    topic_filter_type: str = SINGLE_TAG
    # Fields of a newer RocketMQ's TopicConfig, written back unchanged.
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def readable(self) -> bool:
        return is_readable(self.perm)

    @property
    def writeable(self) -> bool:
        return is_writeable(self.perm)

    @property
    def inheritable(self) -> bool:
        return bool(self.perm & PERM_INHERIT)

    def validate(self) -> TopicConfig:
        """Raise ConfigError naming the first bad field; return self."""
        problem = topic_name_problem(self.topic_name)
        if problem is not None:
            raise ConfigError(f"topic {self.topic_name!r}: {problem}")
        for name in ("read_queue_nums", "write_queue_nums", "perm", "topic_sys_flag"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError(
                    f"topic {self.topic_name}: {name} must be a non-negative integer, got {value!r}"
                )
        if self.perm > (PERM_PRIORITY | PERM_READ | PERM_WRITE | PERM_INHERIT):
            raise ConfigError(
                f"topic {self.topic_name}: perm must combine 4 (read), 2 (write) and "
                f"1 (inherit), got {self.perm}"
            )
        if self.topic_filter_type not in TOPIC_FILTER_TYPES:
            raise ConfigError(
                f"topic {self.topic_name}: topicFilterType must be one of "
                f"{TOPIC_FILTER_TYPES}, got {self.topic_filter_type!r}"
            )
        return self

    def to_json(self) -> dict[str, Any]:
        """The JSON object RocketMQ writes (fastjson orders bean fields by name)."""
        fields: dict[str, Any] = dict(self.extra)
        fields.update(
            order=self.order,
            perm=self.perm,
            readQueueNums=self.read_queue_nums,
            topicFilterType=self.topic_filter_type,
            topicName=self.topic_name,
            topicSysFlag=self.topic_sys_flag,
            writeQueueNums=self.write_queue_nums,
        )
        return dict(sorted(fields.items()))

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], name: str | None = None) -> TopicConfig:
        """Parse one ``topicConfigTable`` entry; ValueError names the bad field.

        Missing fields take RocketMQ's TopicConfig defaults (16 queues, perm 6), as
        fastjson leaves a bean's defaults in place.
        """
        if not isinstance(obj, Mapping):
            raise ValueError(f"topic {name}: expected an object, got {type(obj).__name__}")
        topic = obj.get("topicName", name)
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"topic {name}: topicName must be a non-empty string")
        known = {
            "topicName",
            "readQueueNums",
            "writeQueueNums",
            "perm",
            "topicSysFlag",
            "order",
            "topicFilterType",
        }
        config = cls(
            topic_name=topic,
            read_queue_nums=_int_field(obj, "readQueueNums", 16, topic),
            write_queue_nums=_int_field(obj, "writeQueueNums", 16, topic),
            perm=_int_field(obj, "perm", PERM_READ | PERM_WRITE, topic),
            topic_sys_flag=_int_field(obj, "topicSysFlag", 0, topic),
            order=_bool_field(obj, "order", topic),
            topic_filter_type=str(obj.get("topicFilterType") or SINGLE_TAG),
            extra={k: v for k, v in obj.items() if k not in known},
        )
        if config.topic_filter_type not in TOPIC_FILTER_TYPES:
            raise ValueError(f"topic {topic}: unknown topicFilterType {config.topic_filter_type!r}")
        return config

    def describe(self) -> str:
        """``TopicConfig.toString()`` as mqadmin prints it."""
        return (
            f"TopicConfig [topicName={self.topic_name}, readQueueNums={self.read_queue_nums}, "
            f"writeQueueNums={self.write_queue_nums}, perm={perm_to_string(self.perm)}, "
            f"topicFilterType={self.topic_filter_type}, topicSysFlag={self.topic_sys_flag}, "
            f"order={'true' if self.order else 'false'}]"
        )


def _int_field(obj: Mapping[str, Any], key: str, default: int, topic: str) -> int:
    value = obj.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"topic {topic}: {key} must be an integer, got {value!r}")
    try:
        return int(value)
    except ValueError as e:
        raise ValueError(f"topic {topic}: {key} must be an integer, got {value!r}") from e


def _bool_field(obj: Mapping[str, Any], key: str, topic: str) -> bool:
    value = obj.get(key, False)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ValueError(f"topic {topic}: {key} must be true or false, got {value!r}")


@dataclass
class DataVersion:
    """RocketMQ's ``DataVersion``: bumped on every change so the name server can tell a
    broker's registration carries new topic data."""

    counter: int = 0
    timestamp: int = field(default_factory=lambda: time.time_ns() // 1_000_000)

    def next_version(self) -> None:
        self.timestamp = time.time_ns() // 1_000_000
        self.counter += 1

    def to_json(self) -> dict[str, int]:
        return {"counter": self.counter, "timestamp": self.timestamp}

    @classmethod
    def from_json(cls, obj: Any) -> DataVersion:
        if not isinstance(obj, Mapping):
            raise ValueError(f"dataVersion must be an object, got {obj!r}")
        counter = obj.get("counter", 0)
        timestamp = obj.get("timestamp", 0)
        if not isinstance(counter, int) or not isinstance(timestamp, int):
            raise ValueError(f"dataVersion counter and timestamp must be integers, got {obj!r}")
        return cls(counter=counter, timestamp=timestamp)


@dataclass
class TopicsFile:
    """The parsed content of one topics.json."""

    topics: dict[str, TopicConfig]
    data_version: DataVersion


def decode_topics_file(obj: Any) -> TopicsFile:
    """Validate and convert a parsed topics.json; ValueError says what is wrong."""
    if not isinstance(obj, Mapping):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    table = obj.get("topicConfigTable", {})
    if table is None:
        table = {}
    if not isinstance(table, Mapping):
        raise ValueError("topicConfigTable must be an object")
    topics: dict[str, TopicConfig] = {}
    for name, entry in table.items():
        config = TopicConfig.from_json(entry, name)
        topics[str(name)] = config
    version = obj.get("dataVersion")
    data_version = DataVersion.from_json(version) if version is not None else DataVersion()
    return TopicsFile(topics=topics, data_version=data_version)


def encode_topics_file(topics: Iterable[TopicConfig], data_version: DataVersion) -> dict[str, Any]:
    return {
        "dataVersion": data_version.to_json(),
        "topicConfigTable": {config.topic_name: config.to_json() for config in topics},
    }


def topics_file_path(store_root: str | os.PathLike[str]) -> str:
    return config_file_path(store_root, TOPICS_FILE)


def read_topics_file(store_root: str | os.PathLike[str]) -> TopicsFile | None:
    """The topics.json of a store (or its .bak), None if there is none; read-only."""
    return load_config_file(topics_file_path(store_root), "topic config", decode_topics_file)


class TopicConfigManager:
    """The broker's topic table, persisted to ``config/topics.json`` on every change.

    On construction the table holds RocketMQ's built-in topics (TBW102 with perm 7 when
    ``auto_create_topic_enable``, SCHEDULE_TOPIC_XXXX with 18 queues, the cluster and
    broker name topics, ...); the file's entries then replace or add to them. Nothing is
    written until something changes.
    """

    def __init__(
        self,
        store_root: str | os.PathLike[str],
        *,
        auto_create_topic_enable: bool = True,
        default_topic_queue_nums: int = 4,
        cluster_name: str = "DefaultCluster",
        broker_name: str = "broker-a",
        cluster_topic_enable: bool = True,
        broker_topic_enable: bool = True,
        trace_topic_enable: bool = False,
        trace_topic_name: str = TRACE_TOPIC,
        timer_topic_enable: bool = False,
    ) -> None:
        self.path = topics_file_path(store_root)
        self.auto_create_topic_enable = auto_create_topic_enable
        self.default_topic_queue_nums = default_topic_queue_nums
        self.cluster_name = cluster_name
        self.broker_name = broker_name
        self._lock = threading.RLock()
        self._table: dict[str, TopicConfig] = {}
        self.data_version = DataVersion()
        self._system_topics = set(SYSTEM_TOPIC_NAMES)
        self._add_builtin_topics(
            cluster_topic_enable, broker_topic_enable, trace_topic_enable, trace_topic_name
        )
        if timer_topic_enable:
            # RocketMQ 5's constructor adds TimerMessageStore.TIMER_TOPIC (one queue,
            # a system topic) when timerWheelEnable: the queue the timer store reads.
            self._system_topics.add(TIMER_TOPIC)
            self._table[TIMER_TOPIC] = TopicConfig(TIMER_TOPIC, 1, 1, PERM_READ | PERM_WRITE)
        loaded = read_topics_file(store_root)
        if loaded is not None:
            self._table.update(loaded.topics)
            self.data_version = loaded.data_version

    def _add_builtin_topics(
        self, cluster_topic: bool, broker_topic: bool, trace_topic: bool, trace_name: str
    ) -> None:
        """The topics RocketMQ's TopicConfigManager constructor puts in its table."""
        read_write = PERM_READ | PERM_WRITE

        def builtin(name: str, queues: int, perm: int = read_write) -> None:
            self._system_topics.add(name)
            self._table[name] = TopicConfig(name, queues, queues, perm)

        builtin(SELF_TEST_TOPIC, 1)
        if self.auto_create_topic_enable:
            builtin(
                AUTO_CREATE_TOPIC_KEY_TOPIC,
                self.default_topic_queue_nums,
                PERM_INHERIT | PERM_READ | PERM_WRITE,
            )
        builtin(BENCHMARK_TOPIC, 1024)
        builtin(self.cluster_name, 16, PERM_INHERIT | (read_write if cluster_topic else 0))
        builtin(self.broker_name, 1, PERM_INHERIT | (read_write if broker_topic else 0))
        builtin(OFFSET_MOVED_EVENT_TOPIC, 1)
        builtin(SCHEDULE_TOPIC, SCHEDULE_TOPIC_QUEUE_NUMS)
        if trace_topic:
            builtin(trace_name, 1)
        builtin(f"{self.cluster_name}_{REPLY_TOPIC_POSTFIX}", 1)

    # --- reading ------------------------------------------------------------------------

    def get(self, topic: str) -> TopicConfig | None:
        """A copy of the topic's config (callers may not change the table by accident)."""
        with self._lock:
            config = self._table.get(topic)
            return replace(config, extra=dict(config.extra)) if config is not None else None

    def peek(self, topic: str) -> TopicConfig | None:
        """The topic's config itself, not a copy, for a caller that only reads it (a send,
        a pull: the copy was 5-7 % of a send). The table never changes a config in place,
        it replaces it, so what this returns stays as it was."""
        return self._table.get(topic)

    def all(self) -> list[TopicConfig]:
        with self._lock:
            return [replace(c, extra=dict(c.extra)) for c in self._table.values()]

    def __contains__(self, topic: object) -> bool:
        with self._lock:
            return topic in self._table

    def system_topics(self) -> list[str]:
        """TopicValidator's system topic set as this broker's constructor left it (the
        fixed names, the cluster and broker name, the reply and trace topics...)."""
        with self._lock:
            return sorted(self._system_topics)

    def is_system_topic(self, topic: str) -> bool:
        """TopicValidator.isSystemTopic, including this broker's cluster and broker name."""
        return topic in self._system_topics or topic.startswith(SYSTEM_TOPIC_PREFIX)

    def is_order_topic(self, topic: str) -> bool:
        config = self.get(topic)
        return config is not None and config.order

    # --- changing -----------------------------------------------------------------------

    def update(self, config: TopicConfig) -> None:
        """Create or replace a topic's config (updateTopicConfig); persisted at once."""
        config.validate()
        with self._lock:
            old = self._table.get(config.topic_name)
            self._table[config.topic_name] = replace(config, extra=dict(config.extra))
            log.info("%s topic config %s", "updated" if old else "created", config.describe())
            self._changed()

    def delete(self, topic: str) -> bool:
        """Remove a topic's config; False when there was none (nothing written)."""
        with self._lock:
            if self._table.pop(topic, None) is None:
                log.warning("delete topic config failed, topic: %s not exists", topic)
                return False
            self._changed()
            return True

    def create_on_send(
        self, topic: str, default_topic: str, queue_nums: int, topic_sys_flag: int = 0
    ) -> TopicConfig | None:
        """RocketMQ's createTopicInSendMessageMethod: the existing config, or a new one
        inherited from ``default_topic`` (normally TBW102), or None when that topic is
        unknown or not inheritable (perm bit 1), or when it is TBW102 and auto-creation is
        off. The new topic has min(``queue_nums``, the default's write queues) queues and
        the default's perm without the inherit bit."""
        with self._lock:
            existing = self._table.get(topic)
            if existing is not None:
                return replace(existing, extra=dict(existing.extra))
            default = self._table.get(default_topic)
            if default is None:
                log.warning(
                    "create topic %s failed: default topic %s not exist", topic, default_topic
                )
                return None
            perm = default.perm
            if default_topic == AUTO_CREATE_TOPIC_KEY_TOPIC and not self.auto_create_topic_enable:
                # RocketMQ downgrades TBW102 to read/write here, which blocks inheriting.
                perm = PERM_READ | PERM_WRITE
            if not perm & PERM_INHERIT:
                log.warning(
                    "create topic %s failed: default topic %s has no inherit perm (%d)",
                    topic,
                    default_topic,
                    perm,
                )
                return None
            if topic_name_problem(topic) is not None:
                return None
            nums = max(0, min(queue_nums, default.write_queue_nums))
            config = TopicConfig(
                topic_name=topic,
                read_queue_nums=nums,
                write_queue_nums=nums,
                perm=perm & ~PERM_INHERIT,
                topic_sys_flag=topic_sys_flag,
                topic_filter_type=default.topic_filter_type,
            )
            self._table[topic] = config
            log.info("created topic %s from default topic %s", config.describe(), default_topic)
            self._changed()
            return replace(config)

    def create_on_send_back(
        self, topic: str, queue_nums: int, perm: int, topic_sys_flag: int = 0
    ) -> TopicConfig:
        """createTopicInSendMessageBackMethod: the existing config or a new one as given."""
        with self._lock:
            existing = self._table.get(topic)
            if existing is not None:
                return replace(existing, extra=dict(existing.extra))
            config = TopicConfig(topic, queue_nums, queue_nums, perm, topic_sys_flag).validate()
            self._table[topic] = config
            log.info("created topic %s", config.describe())
            self._changed()
            return replace(config)

    def create_retry_topic(self, group: str, queue_nums: int = 1) -> TopicConfig:
        """``%RETRY%<group>``: the group's retryQueueNums queues (1 by default), read and
        write (as the broker creates it on a consumer's heartbeat or first send-back)."""
        return self.create_on_send_back(
            retry_topic(group), max(queue_nums, 1), PERM_READ | PERM_WRITE
        )

    def create_dlq_topic(self, group: str) -> TopicConfig:
        """``%DLQ%<group>``: one queue, write only, so nobody consumes it by accident."""
        return self.create_on_send_back(dlq_topic(group), 1, PERM_WRITE)

    def persist(self) -> None:
        """Write the whole table (atomic, previous file kept as .bak)."""
        with self._lock:
            document = encode_topics_file(self._table.values(), self.data_version)
            persist_config_file(self.path, document)

    def replace_all(self, topics: Mapping[str, TopicConfig], data_version: DataVersion) -> None:
        """A slave's copy of its master's table (SlaveSynchronize.syncTopicConfig): every
        topic replaced by ``topics``, the data version taken as it is, the file written."""
        with self._lock:
            self._table = dict(topics)
            self.data_version = DataVersion(data_version.counter, data_version.timestamp)
            self.persist()

    def next_data_version(self) -> None:
        """Bump the data version (and persist) though no topic changed: what the name
        servers were told of them did (the broker's permission)."""
        self._changed()

    def _changed(self) -> None:
        self.data_version.next_version()
        self.persist()


def route_data(
    configs: Iterable[TopicConfig],
    broker_addrs: Mapping[str, Mapping[int, str]],
    cluster_name: str = "DefaultCluster",
) -> dict[str, Any]:
    """A ``TopicRouteData`` body for one topic served by the given brokers.

    ``configs`` and ``broker_addrs`` pair up by broker: ``broker_addrs`` maps a broker name
    to ``{broker id: "ip:port"}`` (id 0 = master) and each config is that broker's view of
    the topic, in the order of ``broker_addrs``. Keys are as the clients expect them
    (``brokerAddrs`` keyed by the id as a string).
    """
    queue_datas = []
    broker_datas = []
    for (broker_name, addrs), config in zip(broker_addrs.items(), configs, strict=True):
        queue_datas.append(
            {
                "brokerName": broker_name,
                "perm": config.perm,
                "readQueueNums": config.read_queue_nums,
                "topicSysFlag": config.topic_sys_flag,
                "writeQueueNums": config.write_queue_nums,
            }
        )
        broker_datas.append(
            {
                "brokerAddrs": {str(k): v for k, v in sorted(addrs.items())},
                "brokerName": broker_name,
                "cluster": cluster_name,
            }
        )
    return {
        "brokerDatas": broker_datas,
        "filterServerTable": {},
        "orderTopicConf": None,
        "queueDatas": queue_datas,
    }
