"""Consumer groups' settings: ``config/subscriptionGroup.json`` (RocketMQ 4.9.8's
``SubscriptionGroupManager``).

Layer: broker, plain synchronous state. A group's config says whether it may consume
(``consumeEnable``: a pull of a disabled group gets NO_PERMISSION), how many times a
message is retried before its dead-letter queue (``retryMaxTimes``, for clients older
than 3.4.9 that send no maxReconsumeTimes), how many queues its ``%RETRY%`` topic gets
(``retryQueueNums``) and whether its clients are told about membership changes
(``notifyConsumerIdsChangedEnable``). A group nobody configured is created with the
defaults on first use when ``autoCreateSubscriptionGroup`` is on (RocketMQ's default),
and always for RocketMQ's system groups (``CID_RMQ_SYS_`` prefix); otherwise pulls and
send-backs of such a group get SUBSCRIPTION_GROUP_NOT_EXIST.

The file: ``{"dataVersion":{...},"subscriptionGroupTable":{"<group>":{...}}}``, each
entry with RocketMQ's field names; written as the other config files are (atomic, .bak).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from rocketstore.broker.broker_config import (
    config_file_path,
    load_config_file,
    persist_config_file,
)
from rocketstore.broker.topic_config import DataVersion
from rocketstore.errors import ConfigError

SUBSCRIPTION_GROUP_FILE = "subscriptionGroup.json"
SYSTEM_GROUP_PREFIX = "CID_RMQ_SYS_"
# MixAll's groups the manager's constructor puts in its table (all with the defaults:
# RocketMQ sets consumeBroadcastEnable on four of them, which it is by default anyway).
BUILTIN_GROUPS = (
    "TOOLS_CONSUMER",
    "FILTERSRV_CONSUMER",
    "SELF_TEST_C_GROUP",
    "CID_ONS-HTTP-PROXY",
    "CID_ONSAPI_PULL",
    "CID_ONSAPI_PERMISSION",
    "CID_ONSAPI_OWNER",
)

# JSON name -> field name.
_FIELDS = {
    "groupName": "group_name",
    "consumeEnable": "consume_enable",
    "consumeFromMinEnable": "consume_from_min_enable",
    "consumeBroadcastEnable": "consume_broadcast_enable",
    "retryQueueNums": "retry_queue_nums",
    "retryMaxTimes": "retry_max_times",
    "brokerId": "broker_id",
    "whichBrokerWhenConsumeSlowly": "which_broker_when_consume_slowly",
    "notifyConsumerIdsChangedEnable": "notify_consumer_ids_changed_enable",
    # RocketMQ 5's: a FIFO group of 5.x (gRPC) consumers (mqadmin updateSubGroup -o true).
    "consumeMessageOrderly": "consume_message_orderly",
}
# Written only when set, so that a 4.9.8 group's entry stays as 4.9.8 writes it.
_ONLY_WHEN_SET = frozenset({"consumeMessageOrderly"})


@dataclass(frozen=True)
class SubscriptionGroupConfig:
    """RocketMQ's SubscriptionGroupConfig, its defaults included."""

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    consume_message_orderly: bool = False

    def to_json(self) -> dict[str, Any]:
        values = asdict(self)
        return {
            json_name: values[name]
            for json_name, name in sorted(_FIELDS.items())
            if json_name not in _ONLY_WHEN_SET or values[name]
        }

    @classmethod
    def from_json(cls, obj: Any, name: str | None = None) -> SubscriptionGroupConfig:
        """One entry (a file's or an UPDATE_AND_CREATE_SUBSCRIPTIONGROUP body); missing
        fields take the defaults, as fastjson leaves a bean's; ValueError names the field."""
        if not isinstance(obj, Mapping):
            raise ValueError(f"group {name}: expected an object, got {type(obj).__name__}")
        group = obj.get("groupName", name)
        if not isinstance(group, str) or not group.strip():
            raise ValueError(f"group {name}: groupName must be a non-empty string")
        values: dict[str, Any] = {}
        defaults = cls(group)
        for json_name, field_name in _FIELDS.items():
            if json_name == "groupName" or json_name not in obj or obj[json_name] is None:
                continue
            value = obj[json_name]
            expected = type(getattr(defaults, field_name))
            if expected is bool:
                if isinstance(value, str) and value.lower() in ("true", "false"):
                    value = value.lower() == "true"
                if not isinstance(value, bool):
                    raise ValueError(f"group {group}: {json_name} must be a boolean, got {value!r}")
            else:
                if isinstance(value, bool) or not isinstance(value, int | str):
                    raise ValueError(
                        f"group {group}: {json_name} must be an integer, got {value!r}"
                    )
                try:
                    value = int(value)
                except ValueError as e:
                    raise ValueError(
                        f"group {group}: {json_name} must be an integer, got {value!r}"
                    ) from e
            values[field_name] = value
        return cls(group, **values)


def decode_subscription_group_file(
    obj: Any,
) -> tuple[dict[str, SubscriptionGroupConfig], DataVersion]:
    if not isinstance(obj, Mapping):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    table = obj.get("subscriptionGroupTable") or {}
    if not isinstance(table, Mapping):
        raise ValueError("subscriptionGroupTable must be an object")
    groups = {str(k): SubscriptionGroupConfig.from_json(v, str(k)) for k, v in table.items()}
    version = DataVersion.from_json(obj.get("dataVersion") or {"counter": 0, "timestamp": 0})
    return groups, version


def is_system_group(group: str) -> bool:
    """MixAll.isSysConsumerGroup."""
    return group.startswith(SYSTEM_GROUP_PREFIX)


class SubscriptionGroupManager:
    def __init__(self, store_root: str | os.PathLike[str], *, auto_create: bool = True) -> None:
        self.path = config_file_path(store_root, SUBSCRIPTION_GROUP_FILE)
        self.auto_create = auto_create
        self._lock = threading.Lock()
        self._table: dict[str, SubscriptionGroupConfig] = {}
        for name in BUILTIN_GROUPS:
            self._table[name] = SubscriptionGroupConfig(name)
        self.data_version = DataVersion()
        loaded = load_config_file(self.path, "subscription group", decode_subscription_group_file)
        if loaded is not None:
            self._table.update(loaded[0])
            self.data_version = loaded[1]

    def get(self, group: str) -> SubscriptionGroupConfig | None:
        with self._lock:
            return self._table.get(group)

    def find(self, group: str) -> SubscriptionGroupConfig | None:
        """findSubscriptionGroupConfig: the group's config, created with the defaults when
        auto-creation is on or the group is a system one; None otherwise."""
        with self._lock:
            found = self._table.get(group)
            if found is not None or not (self.auto_create or is_system_group(group)):
                return found
            created = self._table[group] = SubscriptionGroupConfig(group)
            self._changed()
            return created

    def all(self) -> list[SubscriptionGroupConfig]:
        with self._lock:
            return list(self._table.values())

    def update(self, config: SubscriptionGroupConfig) -> None:
        if config.retry_queue_nums < 0 or config.retry_max_times < 0:
            raise ConfigError(
                f"group {config.group_name}: retryQueueNums and retryMaxTimes must not be negative"
            )
        with self._lock:
            self._table[config.group_name] = replace(config)
            self._changed()

    def delete(self, group: str) -> bool:
        with self._lock:
            if self._table.pop(group, None) is None:
                return False
            self._changed()
            return True

    def replace_all(
        self, groups: Mapping[str, SubscriptionGroupConfig], data_version: DataVersion
    ) -> None:
        """A slave's copy of its master's table (SlaveSynchronize.syncSubscriptionGroupConfig):
        every group replaced by ``groups``, the data version taken as it is, the file
        written."""
        with self._lock:
            self._table = dict(groups)
            self.data_version = DataVersion(data_version.counter, data_version.timestamp)
            persist_config_file(self.path, self._document())

    def document(self) -> dict[str, Any]:
        """SubscriptionGroupManager's JSON (also GET_ALL_SUBSCRIPTIONGROUP_CONFIG's body)."""
        with self._lock:
            return self._document()

    def _document(self) -> dict[str, Any]:
        return {
            "dataVersion": self.data_version.to_json(),
            "subscriptionGroupTable": {
                name: config.to_json() for name, config in sorted(self._table.items())
            },
        }

    def _changed(self) -> None:
        self.data_version.next_version()
        persist_config_file(self.path, self._document())
