"""Consume queues deleted on purpose (a deleted topic's, cleanUnusedTopic's), so that
recovery does not build them again from the CommitLog records they had.

Layer: files. Recovery rebuilds a queue whose directory is gone (a lost directory must not
hide its messages); a queue an operator deleted is recorded here instead, with the
CommitLog end at its deletion: records of that queue below it are none of any queue's.
The file is rocketstore's own (``config/rocketstoreDeletedQueues.json``, written
atomically; RocketMQ ignores it). An entry is dropped once retention has deleted every
record below its offset.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable

from rocketstore.errors import ConfigError
from rocketstore.files.atomic import read_json_with_backup, write_atomic
from rocketstore.paths import CONFIG_DIR

DELETED_QUEUES_FILE = "rocketstoreDeletedQueues.json"


def deleted_queues_path(root: str) -> str:
    return os.path.join(root, CONFIG_DIR, DELETED_QUEUES_FILE)


def queue_key(topic: str, queue_id: int) -> str:
    """The key RocketMQ's topic-queue table uses: ``topic-queueId``."""
    return f"{topic}-{queue_id}"


def load_deleted_queues(root: str) -> dict[str, int]:
    """``topic-queueId`` -> the CommitLog offset below which its records are ignored."""
    document = read_json_with_backup(deleted_queues_path(root), deleted_queues_path(root))
    if document is None:
        return {}
    table = document.get("deletedQueues") if isinstance(document, dict) else None
    if not isinstance(table, dict) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in table.values()
    ):
        raise ConfigError(f"{deleted_queues_path(root)} has no deletedQueues table of offsets")
    return {str(k): int(v) for k, v in table.items()}


def dispatched_through_deletions(root: str) -> int:
    """The furthest CommitLog end any recorded deletion was made at (-1 without one): a
    queue is deleted with everything before that end dispatched."""
    return max(load_deleted_queues(root).values(), default=-1)


def save_deleted_queues(root: str, table: dict[str, int]) -> None:
    path = deleted_queues_path(root)
    if not table and not os.path.exists(path):
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    body = json.dumps({"deletedQueues": dict(sorted(table.items()))}, indent="\t")
    write_atomic(path, body.encode("utf-8"))


def record_deleted(
    root: str, keys: Iterable[tuple[str, int]], commit_log_end: int
) -> dict[str, int]:
    """Add the queues, deleted with the CommitLog ending at ``commit_log_end``; returns
    the whole table as saved."""
    table = load_deleted_queues(root)
    for topic, queue_id in keys:
        table[queue_key(topic, queue_id)] = commit_log_end
    save_deleted_queues(root, table)
    return table


def prune_deleted(root: str, table: dict[str, int], commit_log_min: int) -> dict[str, int]:
    """The table without the entries whose records retention has all deleted (saved when
    it changed)."""
    kept = {key: end for key, end in table.items() if end > commit_log_min}
    if kept != table:
        save_deleted_queues(root, kept)
    return kept
