"""Response bodies as RocketMQ's broker writes them with fastjson (pure).

fastjson writes a bean's properties sorted by name, leaves out nulls, writes enums by name
and writes a map key that is not a string as its own JSON, unquoted: a
``HashMap<MessageQueue, ...>`` comes out as
``{{"brokerName":"broker-a","queueId":0,"topic":"T"}:...}``. The Java clients read that
form back (and nothing else gives them their MessageQueue keys), so the admin bodies that
carry such maps (ConsumeStats, TopicStatsTable, ResetOffsetBody) are written by
:func:`dumps`, not by the json module.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, order=True)
class MessageQueueKey:
    """A ``MessageQueue`` as a map key."""

    topic: str
    broker_name: str
    queue_id: int

    def as_bean(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}


def _java_double(value: float) -> str:
    """Java's Double.toString for the values these bodies hold (finite; ``1.0``, not
    ``1``); fastjson writes NaN and infinities as null."""
    if not math.isfinite(value):
        return "null"
    text = repr(float(value))
    return text if "e" not in text else text.replace("e", "E").replace("E+", "E")


def dumps(value: Any) -> str:
    """fastjson's JSON for ``value``: mappings with their keys sorted (bean properties and
    maps alike; RocketMQ's bodies hold HashMaps whose order no client relies on), None
    values left out, MessageQueueKey keys written as unquoted objects."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _java_double(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, MessageQueueKey):
        return dumps(value.as_bean())
    if isinstance(value, Mapping):
        parts = []
        for key in sorted(value, key=_sort_key):
            item = value[key]
            if item is None:
                continue
            parts.append(f"{_key(key)}:{dumps(item)}")
        return "{" + ",".join(parts) + "}"
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=_sort_key) if isinstance(value, (set, frozenset)) else value
        return "[" + ",".join(dumps(item) for item in items) + "]"
    raise TypeError(f"no fastjson form for {type(value).__name__}")


def _sort_key(key: Any) -> tuple[int, Any]:
    if isinstance(key, str):
        return (0, key)
    if isinstance(key, MessageQueueKey):
        return (1, (key.topic, key.broker_name, key.queue_id))
    if isinstance(key, int):
        return (2, key)
    return (3, dumps(key))


def _key(key: Any) -> str:
    if isinstance(key, str):
        return json.dumps(key, ensure_ascii=False)
    if isinstance(key, (int, MessageQueueKey)) and not isinstance(key, bool):
        return dumps(key)
    raise TypeError(f"no fastjson map key form for {type(key).__name__}")
