"""The machine's own limit at the same call sizes: each call writes the records' bytes
(sized as rocketstore's CommitLog records) to one file with ``os.write``.

Layer: benchmark adapters. Not a store: no keys, no reads. It answers "what would the
same calls cost if Python did nothing but write the bytes?".
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from benchmarks.common import TOPIC, Item
from benchmarks.systems.base import Adapter

NAME = "raw-file"
DURABILITY = {
    "ASYNC_FLUSH": "os.write per call; one fdatasync at the end of each run",
    "SYNC_FLUSH": "os.write + fdatasync per call",
}


def record_bytes(body_size: int, key_length: int = 14, uniq_key_length: int = 32) -> int:
    """Size of rocketstore's CommitLog record for a bench message (KEYS and UNIQ_KEY set)."""
    from rocketstore.format.record import record_length

    # "KEYS\x01<key>\x02UNIQ_KEY\x01<uniq>" (no trailing separator)
    properties = len("KEYS") + 1 + key_length + 1 + len("UNIQ_KEY") + 1 + uniq_key_length
    return record_length(body_size, len(TOPIC), properties)


class RawFileAdapter(Adapter):
    name = NAME
    has_keys = False

    def __init__(self, directory: str, durability: str):
        self.path = os.path.join(directory, "raw.log")
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.sync_each = durability == "SYNC_FLUSH"

    def prepare(self, items: Sequence[Item]) -> list[Any]:
        if not items:
            return []
        size = record_bytes(len(items[0].body))
        return [item.body.ljust(size, b"\0") for item in items]

    def put_one(self, item: Any) -> None:
        os.write(self.fd, item)
        if self.sync_each:
            os.fdatasync(self.fd)

    def put_batch(self, items: Sequence[Any]) -> None:
        os.write(self.fd, b"".join(items))
        if self.sync_each:
            os.fdatasync(self.fd)

    def sync(self) -> None:
        os.fdatasync(self.fd)

    def close(self) -> None:
        os.close(self.fd)


def open(directory: str, durability: str) -> RawFileAdapter:
    return RawFileAdapter(directory, durability)
