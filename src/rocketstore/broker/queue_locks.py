"""Locks on message queues for orderly consumers (RebalanceLockManager).

Layer: broker. A client holds a queue of a group until it unlocks it or stops renewing the
lock for ``LOCK_MAX_LIVE_MS`` (RocketMQ's rocketmq.broker.rebalance.lockMaxLiveTime).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

LOCK_MAX_LIVE_MS = 60_000

# (topic, brokerName, queueId): a MessageQueue as the clients send it.
QueueKey = tuple[str, str, int]


@dataclass
class _Lock:
    client_id: str
    last_update_ms: int


class QueueLocks:
    def __init__(self, max_live_ms: int = LOCK_MAX_LIVE_MS):
        self.max_live_ms = max_live_ms
        self._lock = threading.Lock()
        self._table: dict[str, dict[QueueKey, _Lock]] = {}

    def try_lock(
        self, group: str, queues: list[QueueKey], client_id: str, now_ms: int | None = None
    ) -> list[QueueKey]:
        """Lock (or renew) every queue that is free, expired or already ours; those."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        locked = []
        with self._lock:
            table = self._table.setdefault(group, {})
            for queue in queues:
                held = table.get(queue)
                if (
                    held is None
                    or held.client_id == client_id
                    or now - held.last_update_ms > self.max_live_ms
                ):
                    table[queue] = _Lock(client_id, now)
                    locked.append(queue)
        return locked

    def unlock(self, group: str, queues: list[QueueKey], client_id: str) -> None:
        with self._lock:
            table = self._table.get(group, {})
            for queue in queues:
                held = table.get(queue)
                if held is not None and held.client_id == client_id:
                    del table[queue]

    def holder(self, group: str, queue: QueueKey, now_ms: int | None = None) -> str | None:
        now = int(time.time() * 1000) if now_ms is None else now_ms
        with self._lock:
            held = self._table.get(group, {}).get(queue)
            if held is None or now - held.last_update_ms > self.max_live_ms:
                return None
            return held.client_id
