"""sqlite3 from the standard library: WAL, one table, indexes on key and on store time.

Layer: benchmark adapters. ``put_one`` in ASYNC_FLUSH commits every 1,000 rows (the
issue's "1,000-row transactions"); in SYNC_FLUSH every call is its own transaction.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from typing import Any

from benchmarks.common import Item
from benchmarks.systems.base import Adapter, now_ms

NAME = "sqlite3"
DURABILITY = {
    "ASYNC_FLUSH": "journal_mode=WAL, synchronous=NORMAL (commits not fsynced); "
    "single puts commit every 1,000 rows; wal_checkpoint at the end of each run",
    "SYNC_FLUSH": "journal_mode=WAL, synchronous=FULL: every put/put_batch call is one "
    "transaction, fsynced at commit",
}
ROWS_PER_TRANSACTION = 1000

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS messages ("
    " seq INTEGER PRIMARY KEY, queue_id INTEGER NOT NULL, key TEXT NOT NULL,"
    " ts INTEGER NOT NULL, body BLOB NOT NULL)",
    "CREATE INDEX IF NOT EXISTS messages_key ON messages(key)",
    "CREATE INDEX IF NOT EXISTS messages_ts ON messages(ts)",
)
INSERT = "INSERT INTO messages (queue_id, key, ts, body) VALUES (?, ?, ?, ?)"


class SqliteAdapter(Adapter):
    name = NAME

    def __init__(self, directory: str, durability: str):
        self.path = os.path.join(directory, "messages.db")
        self.sync_each = durability == "SYNC_FLUSH"
        # Autocommit mode; transactions are explicit BEGIN/COMMIT.
        self.conn = sqlite3.connect(self.path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute(f"PRAGMA synchronous={'FULL' if self.sync_each else 'NORMAL'}")
        for statement in SCHEMA:
            self.conn.execute(statement)
        self._pending = 0

    def prepare(self, items: Sequence[Item]) -> list[Any]:
        return [(item.queue_id, item.key, item.body) for item in items]

    def put_one(self, item: Any) -> None:
        queue_id, key, body = item
        if self.sync_each:
            self.conn.execute(INSERT, (queue_id, key, now_ms(), body))
            return
        if self._pending == 0:
            self.conn.execute("BEGIN")
        self.conn.execute(INSERT, (queue_id, key, now_ms(), body))
        self._pending += 1
        if self._pending >= ROWS_PER_TRANSACTION:
            self.conn.execute("COMMIT")
            self._pending = 0

    def put_batch(self, items: Sequence[Any]) -> None:
        self._commit_pending()
        ts = now_ms()
        self.conn.execute("BEGIN")
        self.conn.executemany(INSERT, [(q, k, ts, b) for q, k, b in items])
        self.conn.execute("COMMIT")

    def _commit_pending(self) -> None:
        if self._pending:
            self.conn.execute("COMMIT")
            self._pending = 0

    def sync(self) -> None:
        self._commit_pending()
        if not self.sync_each:
            # NORMAL: the WAL is fsynced before a checkpoint copies it back.
            self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)")

    def get_by_key(self, key: str) -> bytes | None:
        found = self.conn.execute("SELECT body FROM messages WHERE key = ?", (key,)).fetchone()
        return found[0] if found else None

    def offset_by_time(self, queue_id: int, timestamp_ms: int) -> int | None:
        """First row of a queue stored at or after ``timestamp_ms`` (the time index)."""
        found = self.conn.execute(
            "SELECT seq FROM messages WHERE ts >= ? AND queue_id = ? ORDER BY ts LIMIT 1",
            (timestamp_ms, queue_id),
        ).fetchone()
        return found[0] if found else None

    def time_range(self) -> tuple[int, int]:
        low, high = self.conn.execute("SELECT min(ts), max(ts) FROM messages").fetchone()
        return int(low), int(high)

    def scan(self) -> tuple[int, int]:
        count = size = 0
        cursor = self.conn.execute("SELECT key, body FROM messages ORDER BY seq")
        while rows := cursor.fetchmany(32):
            for _key, body in rows:
                count += 1
                size += len(body)
        return count, size

    def close(self) -> None:
        self._commit_pending()
        self.conn.close()


def open(directory: str, durability: str) -> SqliteAdapter:
    return SqliteAdapter(directory, durability)
