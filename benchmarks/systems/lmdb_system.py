"""lmdb (py-lmdb): one database, key -> (queue id, store time, body).

Layer: benchmark adapters. Keys are zero-padded sequence numbers, so lmdb's key order is
the log order and a cursor walk is the sequential read. One write transaction per call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmarks.common import Item
from benchmarks.systems.base import Adapter, NotInstalledError, encode_value, now_ms, value_body

NAME = "lmdb"
DURABILITY = {
    "ASYNC_FLUSH": "sync=False, metasync=False (commits not fsynced); env.sync(True) at "
    "the end of each run",
    "SYNC_FLUSH": "sync=True: every put/put_batch call is one write transaction, fsynced at commit",
}
MAP_SIZE = 1 << 36  # 64 GiB of address space; the file grows only as used


class LmdbAdapter(Adapter):
    name = NAME

    def __init__(self, directory: str, durability: str):
        try:
            import lmdb
        except ImportError as e:
            raise NotInstalledError("lmdb") from e
        sync = durability == "SYNC_FLUSH"
        self.env = lmdb.open(directory, map_size=MAP_SIZE, sync=sync, metasync=sync)

    def prepare(self, items: Sequence[Item]) -> list[Any]:
        return [(item.key.encode(), item.queue_id, item.body) for item in items]

    def put_one(self, item: Any) -> None:
        key, queue_id, body = item
        with self.env.begin(write=True) as txn:
            txn.put(key, encode_value(queue_id, now_ms(), body))

    def put_batch(self, items: Sequence[Any]) -> None:
        ts = now_ms()
        with self.env.begin(write=True) as txn:
            txn.cursor().putmulti([(k, encode_value(q, ts, b)) for k, q, b in items])

    def sync(self) -> None:
        self.env.sync(True)

    def get_by_key(self, key: str) -> bytes | None:
        with self.env.begin() as txn:
            value = txn.get(key.encode())
        return None if value is None else value_body(value)

    def scan(self) -> tuple[int, int]:
        count = size = 0
        with self.env.begin() as txn:
            for _key, value in txn.cursor():
                count += 1
                size += len(value_body(value))
        return count, size

    def close(self) -> None:
        self.env.close()


def open(directory: str, durability: str) -> LmdbAdapter:
    return LmdbAdapter(directory, durability)
