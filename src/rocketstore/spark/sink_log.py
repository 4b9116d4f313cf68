"""The batches a streaming sink committed: ``<store>/config/rocketstoreSparkSinks.json``.

Layer: spark (top); file handling only, written by the commit while it holds the store's
writer lock (so no two writers race on it). Written atomically (temporary file, fsync,
rename; the previous version kept as ``.bak``), as RocketMQ writes its own config files.

Per sink id (the query's checkpoint location, or option ``sinkId``)::

    {"sinks": {"/ckpt/q1": {"queryId": "0b5b4454-...", "lastBatchId": 7,
                            "pending": {"batchId": 8, "fromOffset": 123456,
                                        "count": 1000, "skipped": 0}}}}

``queryId`` is the id Spark keeps in the checkpoint's ``metadata`` file: a checkpoint
deleted and made anew at the same location belongs to a new query, whose batch ids start
again at 0, so its record starts afresh (``bind_query``).

A commit records ``pending`` (where the CommitLog ended and how many messages the batch
has) before its first append and replaces it with ``lastBatchId`` after the flush. So:

- a batch id <= ``lastBatchId`` was committed: Spark replays it after a restart and the
  commit appends nothing;
- a ``pending`` batch id means the commit died part-way: its messages start at
  ``fromOffset`` (the store's writer lock kept other writers out until the crash), so
  walking the records from there and matching them, in order, against the replayed batch
  finds how many made it; only the rest is appended.
"""

from __future__ import annotations

import enum
import json
import os
from collections.abc import Iterator
from typing import Any

from rocketstore.errors import CorruptDataError
from rocketstore.files.atomic import read_with_backup, write_atomic
from rocketstore.format import properties as props
from rocketstore.format.message import Message, MessageExt
from rocketstore.paths import CONFIG_DIR
from rocketstore.store import MessageStore

FILE_NAME = "rocketstoreSparkSinks.json"


class BatchState(enum.Enum):
    NEW = "new"
    COMMITTED = "committed"
    INTERRUPTED = "interrupted"  # a commit of this batch began and did not finish


def _same(stored: MessageExt, message: Message) -> bool:
    return (
        stored.topic == message.topic
        and stored.body == message.body
        and stored.properties.get(props.KEYS) == message.properties.get(props.KEYS)
        and stored.properties.get(props.TAGS) == message.properties.get(props.TAGS)
    )


def checkpoint_query_id(location: str) -> str | None:
    """The id of the streaming query whose checkpoint is at ``location`` (its
    ``metadata`` file, which Spark writes when the query first starts), or None when the
    location is not a local directory or holds no readable id."""
    path = location.removeprefix("file://") if location.startswith("file://") else location
    path = path.removeprefix("file:")
    if "://" in path:
        return None  # hdfs://, s3a://...: not readable from here
    try:
        with open(os.path.join(path, "metadata"), encoding="utf-8") as f:
            data = json.loads(f.readline())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    query_id = data.get("id") if isinstance(data, dict) else None
    return query_id if isinstance(query_id, str) and query_id else None


class SinkLog:
    def __init__(self, store_root: str) -> None:
        self.path = os.path.join(store_root, CONFIG_DIR, FILE_NAME)
        self._data = self._load()

    def _load(self) -> dict[str, Any]:
        raw = read_with_backup(self.path)
        if raw is None:
            return {"sinks": {}}
        try:
            data = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
            raise CorruptDataError(f"sink log is not JSON: {e}", path=self.path) from e
        if not isinstance(data, dict) or not isinstance(data.get("sinks"), dict):
            raise CorruptDataError("sink log has no 'sinks' object", path=self.path)
        return data

    def _save(self) -> None:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        text = json.dumps(self._data, indent=1, sort_keys=True)
        write_atomic(self.path, text.encode("utf-8"))

    def _entry(self, sink_id: str) -> dict[str, Any]:
        entry: dict[str, Any] = self._data["sinks"].setdefault(sink_id, {})
        return entry

    def bind_query(self, sink_id: str, query_id: str | None) -> bool:
        """Tie the sink's record to the streaming query that owns the checkpoint: a
        checkpoint deleted and made anew by another query (its batch ids start again at
        0) must not find the old query's batches committed. True when the record was
        started afresh for a new query."""
        if query_id is None:
            return False
        entry = self._data["sinks"].get(sink_id)
        if isinstance(entry, dict) and entry.get("queryId") == query_id:
            return False
        fresh = isinstance(entry, dict) and "queryId" in entry
        if fresh:
            self._data["sinks"][sink_id] = {}
        self._entry(sink_id)["queryId"] = query_id
        self._save()
        return fresh

    def last_batch_id(self, sink_id: str) -> int | None:
        value = self._data["sinks"].get(sink_id, {}).get("lastBatchId")
        return value if isinstance(value, int) else None

    def state(self, sink_id: str, batch_id: int) -> BatchState:
        last = self.last_batch_id(sink_id)
        if last is not None and batch_id <= last:
            return BatchState.COMMITTED
        pending = self._data["sinks"].get(sink_id, {}).get("pending")
        if isinstance(pending, dict) and pending.get("batchId") == batch_id:
            return BatchState.INTERRUPTED
        return BatchState.NEW

    def begin(
        self, sink_id: str, batch_id: int, from_offset: int, count: int, skipped: int
    ) -> None:
        self._entry(sink_id)["pending"] = {
            "batchId": batch_id,
            "fromOffset": from_offset,
            "count": count,
            "skipped": skipped,
        }
        self._save()

    def finish(self, sink_id: str, batch_id: int) -> None:
        entry = self._entry(sink_id)
        entry.pop("pending", None)
        entry["lastBatchId"] = batch_id
        self._save()

    def already_appended(
        self, store: MessageStore, sink_id: str, messages: Iterator[Message]
    ) -> int:
        """How many leading messages of the interrupted batch are in the store."""
        pending = self._data["sinks"][sink_id]["pending"]
        found = int(pending.get("skipped", 0))
        for _ in range(found):
            if next(messages, None) is None:
                return found
        offset = int(pending["fromOffset"])
        file_size = store.config.mapped_file_size_commit_log
        end = store.max_commit_log_offset()
        for message in messages:
            stored = store.look_message(offset) if offset < end else None
            if stored is None and offset < end:
                # An END_OF_FILE blank: the batch went on at the start of the next file.
                offset = (offset // file_size + 1) * file_size
                stored = store.look_message(offset) if offset < end else None
            if stored is None or not _same(stored, message):
                break
            found += 1
            offset += stored.size
        return found
