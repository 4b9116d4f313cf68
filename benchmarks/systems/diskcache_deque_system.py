"""diskcache ``Deque`` (a persistent deque on SQLite): append-only, no key lookup.

Layer: benchmark adapters. The key travels inside the value.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmarks.common import Item
from benchmarks.systems.base import Adapter, encode_keyed_value, keyed_value_body, now_ms
from benchmarks.systems.diskcache_index_system import checkpoint, open_cache

NAME = "diskcache.Deque"
DURABILITY = {
    "ASYNC_FLUSH": "Cache(sqlite_synchronous=1): WAL, synchronous=NORMAL; wal_checkpoint "
    "at the end of each run",
    "SYNC_FLUSH": "Cache(sqlite_synchronous=2): WAL, synchronous=FULL, every call one transaction",
}
PUT_SHARE = 8  # puts an eighth of the put workload's messages (workloads/put.py)


class DiskcacheDequeAdapter(Adapter):
    name = NAME
    has_keys = False

    def __init__(self, directory: str, durability: str):
        import diskcache

        self.cache = open_cache(directory, durability)
        self.deque = diskcache.Deque.fromcache(self.cache)
        self.sync_each = durability == "SYNC_FLUSH"

    def prepare(self, items: Sequence[Item]) -> list[Any]:
        return [(item.key, item.queue_id, item.body) for item in items]

    def put_one(self, item: Any) -> None:
        key, queue_id, body = item
        self.deque.append(encode_keyed_value(key, queue_id, now_ms(), body))

    def put_batch(self, items: Sequence[Any]) -> None:
        ts = now_ms()
        with self.deque.transact():
            self.deque.extend(encode_keyed_value(k, q, ts, b) for k, q, b in items)

    def sync(self) -> None:
        if not self.sync_each:
            checkpoint(self.cache)

    def scan(self) -> tuple[int, int]:
        count = size = 0
        for value in self.deque:
            count += 1
            size += len(keyed_value_body(value))
        return count, size

    def close(self) -> None:
        self.cache.close()


def open(directory: str, durability: str) -> DiskcacheDequeAdapter:
    open_cache(directory, durability).close()  # raises NotInstalledError before anything else
    return DiskcacheDequeAdapter(directory, durability)
