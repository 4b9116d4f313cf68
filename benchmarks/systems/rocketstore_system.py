"""rocketstore, as an application embeds it: ``MessageStore`` with KEYS and UNIQ_KEY set
on every message (as RocketMQ producers do), one topic with four queues.

Layer: benchmark adapters. Puts return once the CommitLog holds the messages; the
dispatcher builds queues and index in the background (``wait_queryable`` waits for it).
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Sequence
from typing import Any

from benchmarks.common import QUEUES, TOPIC, Item, evict_page_cache
from benchmarks.systems.base import Adapter

NAME = "rocketstore"
DURABILITY = {
    "ASYNC_FLUSH": "flush_disk_type=ASYNC_FLUSH (background msync every 500 ms); "
    "the CommitLog is msync'ed at the end of each run",
    "SYNC_FLUSH": "flush_disk_type=SYNC_FLUSH: every put/put_batch call writes its records "
    "with pwrite and returns after msync(MS_SYNC) of their range (group commit)",
}


class RocketstoreAdapter(Adapter):
    name = NAME

    def __init__(
        self,
        directory: str,
        durability: str,
        *,
        keep_ids: bool = False,
        store_options: dict[str, Any] | None = None,
    ):
        from rocketstore import Message, MessageStore, StoreConfig

        self._message = Message
        self.directory = directory
        self.durability = durability
        config = StoreConfig(flush_disk_type=durability, **(store_options or {}))
        self.store = MessageStore.open(directory, config)
        # offsetMsgIds of every message put, when a workload needs them (view by id).
        self.keep_ids = keep_ids
        self.msg_ids: list[str] = []

    def prepare(self, items: Sequence[Item]) -> list[Any]:
        message = self._message
        return [
            message(
                TOPIC,
                item.body,
                queue_id=item.queue_id,
                properties={"KEYS": item.key, "UNIQ_KEY": item.uniq_key},
            )
            for item in items
        ]

    def put_one(self, item: Any) -> None:
        result = self.store.put(item)
        if not result.ok:
            raise RuntimeError(f"put failed: {result.status}")
        if self.keep_ids:
            self.msg_ids.append(result.msg_id)

    def put_batch(self, items: Sequence[Any]) -> None:
        results = self.store.put_batch(items)
        for result in results:
            if not result.ok:
                raise RuntimeError(f"put_batch failed: {result.status}")
        if self.keep_ids:
            self.msg_ids.extend(r.msg_id for r in results)

    def sync(self) -> None:
        self.store.commitlog.files.flush_all()

    def wait_queryable(self) -> None:
        self.store.wait_dispatched()

    def get_by_key(self, key: str) -> bytes | None:
        found = self.store.query_messages(TOPIC, key, max_count=1)
        return found[0].body if found else None

    def scan(self, sql92: str | None = None) -> tuple[int, int]:
        """Every message, 32 per get_messages call; with ``sql92``, those that SQL92
        selector selects (each record evaluated, as a broker does for such a consumer)."""
        count = size = 0
        for queue_id in range(QUEUES):
            offset = 0
            while True:
                got = (
                    self.store.get_messages("bench", TOPIC, queue_id, offset, 32)
                    if sql92 is None
                    else self.store.get_messages(
                        "bench", TOPIC, queue_id, offset, 32, sql92, "SQL92"
                    )
                )
                if not got.messages:
                    break
                for message in got.messages:
                    count += 1
                    size += len(message.body or b"")
                offset = got.next_begin_offset
        return count, size

    def drop_cache(self) -> None:
        """Unmap the store's pages from this process, then drop them from the page cache
        (a mapped page cannot be evicted)."""
        store = self.store
        mapped = list(store.commitlog.files.files)
        for queue in store.queues.values():
            mapped.extend(queue.files.files)
        mapped.extend(getattr(store.index, "files", []))
        for item in mapped:
            # Private attributes: IndexFile wraps its MappedFile in ``_file``.
            mm = getattr(item, "_mm", None) or getattr(getattr(item, "_file", None), "_mm", None)
            if isinstance(mm, mmap.mmap):
                mm.madvise(mmap.MADV_DONTNEED)
        evict_page_cache(self.directory)

    def close(self) -> None:
        self.store.close()


def open(directory: str, durability: str) -> RocketstoreAdapter:
    os.makedirs(directory, exist_ok=True)
    return RocketstoreAdapter(directory, durability)
