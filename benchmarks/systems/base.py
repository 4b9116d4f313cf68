"""The adapter interface every system implements, and the value layout shared by the
key-value systems.

Layer: benchmark adapters. Only the standard library here.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Sequence
from typing import Any

from benchmarks.common import Item

# Value stored by the key-value systems: queue id (int32), store time ms (int64), body.
VALUE_HEADER = struct.Struct(">iq")


class NotInstalledError(Exception):
    """The system's package is not installed."""


class Adapter:
    """A durable local message log as a Python user would use it.

    ``prepare`` turns items into the system's native inputs outside the timed region;
    ``sync`` makes everything put so far durable (the end of every timed put run).
    """

    name = ""
    has_keys = True

    def prepare(self, items: Sequence[Item]) -> list[Any]:
        return list(items)

    def put_one(self, item: Any) -> None:
        raise NotImplementedError

    def put_batch(self, items: Sequence[Any]) -> None:
        raise NotImplementedError

    def sync(self) -> None:
        raise NotImplementedError

    def get_by_key(self, key: str) -> bytes | None:
        """The body stored under ``key`` (None when absent)."""
        raise NotImplementedError(f"{self.name} has no key lookup")

    def scan(self) -> tuple[int, int]:
        """Read every message in log order; return (messages, body bytes)."""
        raise NotImplementedError

    def wait_queryable(self) -> None:
        """Block until everything put is visible to key lookups (a no-op for most)."""

    def close(self) -> None:
        raise NotImplementedError


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def encode_value(queue_id: int, timestamp_ms: int, body: bytes) -> bytes:
    return VALUE_HEADER.pack(queue_id, timestamp_ms) + body


def value_body(value: bytes) -> bytes:
    return value[VALUE_HEADER.size :]


def encode_keyed_value(key: str, queue_id: int, timestamp_ms: int, body: bytes) -> bytes:
    """For systems without keys (queues): the key travels in the value, NUL-terminated."""
    return key.encode() + b"\0" + VALUE_HEADER.pack(queue_id, timestamp_ms) + body


def keyed_value_body(value: bytes) -> bytes:
    return value[value.index(b"\0") + 1 + VALUE_HEADER.size :]
