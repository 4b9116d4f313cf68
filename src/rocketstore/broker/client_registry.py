"""Which clients belong to which producer and consumer groups (ConsumerManager,
ProducerManager), from their heartbeats.

Layer: broker. Plain synchronous state; connections are opaque objects here, so the table
is unit-tested without sockets. A client leaves a group when it unregisters, when its
connection closes, or when it has not sent a heartbeat for ``CLIENT_TIMEOUT_MS``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

CLIENT_TIMEOUT_MS = 120_000

# Enum ordinals the Java clients may send instead of names.
CONSUME_TYPES = ("CONSUME_ACTIVELY", "CONSUME_PASSIVELY")
MESSAGE_MODELS = ("BROADCASTING", "CLUSTERING")
# ConsumeFromWhere by ordinal (4.9.8; the three deprecated ones included).
CONSUME_FROM_WHERE = (
    "CONSUME_FROM_LAST_OFFSET",
    "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
    "CONSUME_FROM_MIN_OFFSET",
    "CONSUME_FROM_MAX_OFFSET",
    "CONSUME_FROM_FIRST_OFFSET",
    "CONSUME_FROM_TIMESTAMP",
)


@dataclass
class ClientChannel:
    client_id: str
    connection: object
    last_update_ms: int
    # What admin requests show of a connection (RocketMQ's ClientChannelInfo): the peer
    # address and the language and version of the client's heartbeat.
    addr: str = ""
    language: str = "JAVA"
    version: int = 0


@dataclass
class ConsumerGroup:
    name: str
    clients: dict[str, ClientChannel] = field(default_factory=dict)
    subscriptions: dict[str, dict[str, Any]] = field(default_factory=dict)  # by topic
    consume_type: str = "CONSUME_PASSIVELY"
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"


def enum_name(value: object, names: tuple[str, ...], default: str) -> str:
    """A Java enum sent as its name or its ordinal."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(names):
        return names[value]
    if isinstance(value, str):
        if value.isdigit() and int(value) < len(names):
            return names[int(value)]
        return value
    return default


class ClientRegistry:
    def __init__(self, client_timeout_ms: int = CLIENT_TIMEOUT_MS):
        self.client_timeout_ms = client_timeout_ms
        self._lock = threading.Lock()
        self.consumers: dict[str, ConsumerGroup] = {}
        self.producers: dict[str, dict[str, ClientChannel]] = {}

    def register_consumer(
        self,
        group: str,
        client_id: str,
        connection: object,
        data: dict[str, Any],
        now_ms: int | None = None,
        *,
        addr: str = "",
        language: str = "JAVA",
        version: int = 0,
    ) -> bool:
        """Add or refresh a consumer; True when the group's membership changed (the
        broker then tells the group's clients to rebalance)."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        with self._lock:
            info = self.consumers.get(group)
            if info is None:
                info = self.consumers[group] = ConsumerGroup(group)
            info.consume_type = enum_name(
                data.get("consumeType"), CONSUME_TYPES, "CONSUME_PASSIVELY"
            )
            info.message_model = enum_name(data.get("messageModel"), MESSAGE_MODELS, "CLUSTERING")
            info.consume_from_where = enum_name(
                data.get("consumeFromWhere"), CONSUME_FROM_WHERE, "CONSUME_FROM_LAST_OFFSET"
            )
            subs = data.get("subscriptionDataSet") or []
            if isinstance(subs, list):
                info.subscriptions = {
                    str(s.get("topic")): s for s in subs if isinstance(s, dict) and s.get("topic")
                }
            old = info.clients.get(client_id)
            changed = old is None or old.connection is not connection
            info.clients[client_id] = ClientChannel(
                client_id, connection, now, addr, language, version
            )
            return changed

    def register_producer(
        self,
        group: str,
        client_id: str,
        connection: object,
        now_ms: int | None = None,
        *,
        addr: str = "",
        language: str = "JAVA",
        version: int = 0,
    ) -> None:
        now = int(time.time() * 1000) if now_ms is None else now_ms
        with self._lock:
            self.producers.setdefault(group, {})[client_id] = ClientChannel(
                client_id, connection, now, addr, language, version
            )

    def unregister(
        self, client_id: str, *, consumer_group: str = "", producer_group: str = ""
    ) -> bool:
        """Remove a client from a group; True when a consumer group's membership changed."""
        with self._lock:
            if producer_group:
                self.producers.get(producer_group, {}).pop(client_id, None)
            if consumer_group and consumer_group in self.consumers:
                info = self.consumers[consumer_group]
                removed = info.clients.pop(client_id, None) is not None
                if not info.clients:
                    del self.consumers[consumer_group]
                return removed
        return False

    def connection_closed(self, connection: object) -> list[str]:
        """Forget every client on ``connection``; the consumer groups that changed."""
        return self._remove(lambda c: c.connection is connection)

    def expire(self, now_ms: int | None = None) -> list[str]:
        now = int(time.time() * 1000) if now_ms is None else now_ms
        return self._remove(lambda c: now - c.last_update_ms > self.client_timeout_ms)

    def _remove(self, gone: Callable[[ClientChannel], bool]) -> list[str]:
        changed = []
        with self._lock:
            for group, info in list(self.consumers.items()):
                before = len(info.clients)
                info.clients = {k: c for k, c in info.clients.items() if not gone(c)}
                if len(info.clients) != before:
                    changed.append(group)
                if not info.clients:
                    del self.consumers[group]
            for group, clients in list(self.producers.items()):
                self.producers[group] = {k: c for k, c in clients.items() if not gone(c)}
                if not self.producers[group]:
                    del self.producers[group]
        return changed

    def consumer_ids(self, group: str) -> list[str]:
        with self._lock:
            info = self.consumers.get(group)
            return sorted(info.clients) if info else []

    def consumer_connections(self, group: str) -> list[object]:
        with self._lock:
            info = self.consumers.get(group)
            return [c.connection for c in info.clients.values()] if info else []

    def consumer_group(self, group: str) -> ConsumerGroup | None:
        """A copy of the group's state (clients and subscriptions), None when no client
        of it is registered."""
        with self._lock:
            info = self.consumers.get(group)
            if info is None or not info.clients:
                return None
            return ConsumerGroup(
                info.name,
                dict(info.clients),
                dict(info.subscriptions),
                info.consume_type,
                info.message_model,
                info.consume_from_where,
            )

    def consumer_groups(self) -> list[str]:
        """Consumer groups with at least one registered client."""
        with self._lock:
            return [group for group, info in self.consumers.items() if info.clients]

    def producer_groups(self) -> list[str]:
        with self._lock:
            return [group for group, channels in self.producers.items() if channels]

    def producer_channels(self, group: str) -> list[ClientChannel]:
        with self._lock:
            return list(self.producers.get(group, {}).values())

    def groups_subscribed_to(self, topic: str) -> set[str]:
        """Consumer groups with a registered client whose subscriptions include ``topic``."""
        with self._lock:
            return {
                name
                for name, info in self.consumers.items()
                if info.clients and topic in info.subscriptions
            }

    def subscription(self, group: str, topic: str) -> dict[str, Any] | None:
        with self._lock:
            info = self.consumers.get(group)
            return info.subscriptions.get(topic) if info else None
