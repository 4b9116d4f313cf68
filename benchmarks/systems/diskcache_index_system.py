"""diskcache ``Index`` (an ordered, persistent dict on SQLite): key -> value.

Layer: benchmark adapters. Single puts are one ``index[key] = value`` (its own
transaction); batches run inside ``index.transact()``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmarks.common import Item
from benchmarks.systems.base import Adapter, NotInstalledError, encode_value, now_ms, value_body

NAME = "diskcache.Index"
DURABILITY = {
    "ASYNC_FLUSH": "Cache(sqlite_synchronous=1): WAL, synchronous=NORMAL; wal_checkpoint "
    "at the end of each run",
    "SYNC_FLUSH": "Cache(sqlite_synchronous=2): WAL, synchronous=FULL, every call one transaction",
}
PUT_SHARE = 8  # puts an eighth of the put workload's messages (workloads/put.py)


def open_cache(directory: str, durability: str) -> Any:
    try:
        import diskcache
    except ImportError as e:
        raise NotInstalledError("diskcache") from e
    synchronous = 2 if durability == "SYNC_FLUSH" else 1
    return diskcache.Cache(directory, eviction_policy="none", sqlite_synchronous=synchronous)


def checkpoint(cache: Any) -> None:
    # diskcache has no public flush; its SQLite connection is ``_con`` (WAL, NORMAL).
    cache._con.execute("PRAGMA wal_checkpoint(PASSIVE)")


class DiskcacheIndexAdapter(Adapter):
    name = NAME

    def __init__(self, directory: str, durability: str):
        import diskcache

        self.cache = open_cache(directory, durability)
        self.index = diskcache.Index.fromcache(self.cache)
        self.sync_each = durability == "SYNC_FLUSH"

    def prepare(self, items: Sequence[Item]) -> list[Any]:
        return [(item.key, item.queue_id, item.body) for item in items]

    def put_one(self, item: Any) -> None:
        key, queue_id, body = item
        self.index[key] = encode_value(queue_id, now_ms(), body)

    def put_batch(self, items: Sequence[Any]) -> None:
        ts = now_ms()
        index = self.index
        with index.transact():
            for key, queue_id, body in items:
                index[key] = encode_value(queue_id, ts, body)

    def sync(self) -> None:
        if not self.sync_each:
            checkpoint(self.cache)

    def get_by_key(self, key: str) -> bytes | None:
        value = self.index.get(key)
        return None if value is None else value_body(value)

    def scan(self) -> tuple[int, int]:
        count = size = 0
        for value in self.index.values():
            count += 1
            size += len(value_body(value))
        return count, size

    def close(self) -> None:
        self.cache.close()


def open(directory: str, durability: str) -> DiskcacheIndexAdapter:
    open_cache(directory, durability).close()  # raises NotInstalledError before anything else
    return DiskcacheIndexAdapter(directory, durability)
