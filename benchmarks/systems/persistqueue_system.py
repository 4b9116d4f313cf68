"""persist-queue's ``SQLiteQueue`` (WAL): a FIFO, no key lookup; reading consumes.

Layer: benchmark adapters. ``SQLiteQueue.put`` commits every message on its own (it wraps
each insert in ``with connection:``, whatever ``auto_commit`` says) and there is no batch
put, so a batch is a loop of puts and, with synchronous=FULL, one fsync per message.
Reads use ``auto_commit=False``: ``get`` advances a cursor and ``task_done`` deletes what
was read in one transaction. The key travels inside the value. Its file-based ``Queue``
rewrites an info file on every put and has no fsync option, so it is not used.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmarks.common import Item
from benchmarks.systems.base import (
    Adapter,
    NotInstalledError,
    encode_keyed_value,
    keyed_value_body,
    now_ms,
)

NAME = "persist-queue"
DURABILITY = {
    "ASYNC_FLUSH": "SQLiteQueue, WAL, synchronous=NORMAL, one transaction per message "
    "(its only way); wal_checkpoint at the end of each run",
    "SYNC_FLUSH": "SQLiteQueue, WAL, synchronous=FULL, one transaction (and fsync) per "
    "message: it has no batch put",
}
# Every message is its own transaction even in a batch: SYNC_FLUSH runs are capped in
# messages rather than calls (see workloads/put.py).
FLUSHES_PER_MESSAGE = True
PUT_SHARE = 8  # puts an eighth of the put workload's messages (workloads/put.py)


class PersistQueueAdapter(Adapter):
    name = NAME
    has_keys = False
    # scan() removes what it reads: workloads reload before each repetition.
    destructive_scan = True

    def __init__(self, directory: str, durability: str):
        try:
            import persistqueue
        except ImportError as e:
            raise NotInstalledError("persist-queue") from e
        self.sync_each = durability == "SYNC_FLUSH"
        self.queue = persistqueue.SQLiteQueue(directory, auto_commit=False)
        # No public knob for the sync level: set it on its connection (``_putter``).
        level = "FULL" if self.sync_each else "NORMAL"
        self.queue._putter.execute(f"PRAGMA synchronous={level}")

    def prepare(self, items: Sequence[Item]) -> list[Any]:
        return [(item.key, item.queue_id, item.body) for item in items]

    def put_one(self, item: Any) -> None:
        key, queue_id, body = item
        self.queue.put(encode_keyed_value(key, queue_id, now_ms(), body))

    def put_batch(self, items: Sequence[Any]) -> None:
        ts = now_ms()
        for key, queue_id, body in items:
            self.queue.put(encode_keyed_value(key, queue_id, ts, body))

    def sync(self) -> None:
        if not self.sync_each:
            self.queue._putter.execute("PRAGMA wal_checkpoint(PASSIVE)")

    def scan(self) -> tuple[int, int]:
        from persistqueue import Empty

        count = size = 0
        while True:
            try:
                value = self.queue.get(block=False)
            except Empty:
                break
            count += 1
            size += len(keyed_value_body(value))
        self.queue.task_done()
        return count, size

    def close(self) -> None:
        self.queue.close()


def open(directory: str, durability: str) -> PersistQueueAdapter:
    return PersistQueueAdapter(directory, durability)
