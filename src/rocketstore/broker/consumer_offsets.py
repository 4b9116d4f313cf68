"""Committed consumer offsets: ``config/consumerOffset.json`` (RocketMQ's
``ConsumerOffsetManager``).

Layer: broker. Commits land in memory (a consumer commits every few seconds per queue);
:meth:`ConsumerOffsets.persist` writes the whole table atomically with a ``.bak`` of the
previous file, and the broker calls it every 5 s and on shutdown, as RocketMQ does. So
a crash loses at most the last interval of commits, never the file.

File layout: ``{"offsetTable": {"TOPIC@GROUP": {"0": 12, "1": 40}}}``. RocketMQ writes the
queue ids unquoted (``{0:12}``); both forms are read, standard JSON is written.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from typing import Any

from rocketstore.broker.broker_config import (
    CONSUMER_OFFSET_FILE,
    config_file_path,
    load_config_file,
    offset_table_of,
    persist_config_file,
)
from rocketstore.errors import ConfigError

log = logging.getLogger(__name__)

TOPIC_GROUP_SEPARATOR = "@"

OffsetTable = dict[tuple[str, str], dict[int, int]]


def table_key(topic: str, group: str) -> str:
    return f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"


def split_key(key: str) -> tuple[str, str]:
    """``TOPIC@GROUP`` -> (topic, group). Topic names cannot hold ``@``, so the first one
    separates them."""
    topic, sep, group = key.partition(TOPIC_GROUP_SEPARATOR)
    if not sep or not topic or not group:
        raise ValueError(f"offset table key {key!r} is not TOPIC@GROUP")
    return topic, group


def decode_offset_file(obj: Any) -> OffsetTable:
    """Validate and convert a parsed consumerOffset.json; ValueError says what is wrong."""
    raw = offset_table_of(obj, "")
    table: OffsetTable = {}
    for key, queues in raw.items():
        topic, group = split_key(str(key))
        if not isinstance(queues, Mapping):
            raise ValueError(f"offsets of {key} must be an object of queue id -> offset")
        offsets: dict[int, int] = {}
        for queue_id, offset in queues.items():
            try:
                qid = int(queue_id)
            except ValueError as e:
                raise ValueError(f"{key}: queue id {queue_id!r} is not an integer") from e
            if isinstance(offset, bool) or not isinstance(offset, int):
                raise ValueError(f"{key} queue {qid}: offset {offset!r} is not an integer")
            offsets[qid] = offset
        table[(topic, group)] = offsets
    return table


def encode_offset_file(table: OffsetTable) -> dict[str, Any]:
    return {
        "offsetTable": {
            table_key(topic, group): {str(qid): offset for qid, offset in sorted(queues.items())}
            for (topic, group), queues in table.items()
        }
    }


class ConsumerOffsets:
    """The broker's table of committed offsets, keyed (topic, group) -> queue id -> offset.

    Thread-safe; every call is a dictionary operation except :meth:`persist`.
    """

    def __init__(self, store_root: str | os.PathLike[str]) -> None:
        self.path = config_file_path(store_root, CONSUMER_OFFSET_FILE)
        self._lock = threading.Lock()
        self._persist_lock = threading.Lock()
        loaded = load_config_file(self.path, "consumer offset", decode_offset_file)
        self._table: OffsetTable = loaded if loaded is not None else {}
        # Bumped on every change; persist() skips the write when nothing changed since
        # the last one (an idle broker does not fsync every 5 s).
        self._version = 0
        self._persisted_version = 0

    # --- reading ------------------------------------------------------------------------

    def query(self, group: str, topic: str, queue_id: int) -> int | None:
        """The committed offset, None if the group never committed one for the queue."""
        with self._lock:
            queues = self._table.get((topic, group))
            return queues.get(queue_id) if queues is not None else None

    def query_queues(self, group: str, topic: str) -> dict[int, int]:
        """Every committed offset of ``group`` on ``topic`` (queue id -> offset)."""
        with self._lock:
            return dict(self._table.get((topic, group), {}))

    def groups(self) -> set[str]:
        with self._lock:
            return {group for _, group in self._table}

    def topics_of_group(self, group: str) -> set[str]:
        """whichTopicByConsumer."""
        with self._lock:
            return {topic for topic, g in self._table if g == group}

    def groups_of_topic(self, topic: str) -> set[str]:
        """whichGroupByTopic."""
        with self._lock:
            return {group for t, group in self._table if t == topic}

    def table(self) -> OffsetTable:
        """A copy of the whole table."""
        with self._lock:
            return {key: dict(queues) for key, queues in self._table.items()}

    # --- changing -----------------------------------------------------------------------

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Record a consumer's offset in memory. A lower offset than the stored one is
        taken as it is (a consumer resetting its position), with a log line, as RocketMQ
        does."""
        if isinstance(queue_id, bool) or not isinstance(queue_id, int) or queue_id < 0:
            raise ConfigError(f"queue id must be a non-negative integer, got {queue_id!r}")
        if isinstance(offset, bool) or not isinstance(offset, int):
            raise ConfigError(f"offset must be an integer, got {offset!r}")
        if not topic or not group or TOPIC_GROUP_SEPARATOR in topic:
            raise ConfigError(f"bad topic/group for an offset: {topic!r} / {group!r}")
        with self._lock:
            queues = self._table.setdefault((topic, group), {})
            previous = queues.get(queue_id)
            if previous == offset:
                return
            queues[queue_id] = offset
            self._version += 1
        if previous is not None and offset < previous:
            log.warning(
                "update consumer offset less than store: %s@%s queue %d: %d < %d",
                topic,
                group,
                queue_id,
                offset,
                previous,
            )

    def clean(self, group: str, topic: str) -> bool:
        """Forget ``group``'s offsets on ``topic``; False when there were none."""
        with self._lock:
            if self._table.pop((topic, group), None) is None:
                return False
            self._version += 1
            return True

    def remove_group(self, group: str) -> int:
        """removeOffset: forget every offset of ``group``; how many topics it had."""
        with self._lock:
            keys = [key for key in self._table if key[1] == group]
            for key in keys:
                del self._table[key]
            if keys:
                self._version += 1
            return len(keys)

    def remove_topic(self, topic: str) -> int:
        """Forget every group's offsets on ``topic`` (after the topic was deleted)."""
        with self._lock:
            keys = [key for key in self._table if key[0] == topic]
            for key in keys:
                del self._table[key]
            if keys:
                self._version += 1
            return len(keys)

    def clone_offset(self, src_group: str, dest_group: str, topic: str) -> bool:
        """cloneOffset: give ``dest_group`` the offsets ``src_group`` has on ``topic``."""
        with self._lock:
            source = self._table.get((topic, src_group))
            if source is None:
                return False
            self._table[(topic, dest_group)] = dict(source)
            self._version += 1
            return True

    def put_all(self, table: OffsetTable) -> None:
        """A slave's copy of its master's offsets (SlaveSynchronize.syncConsumerOffset,
        ``putAll``): each TOPIC@GROUP of ``table`` replaces the slave's entry whole; the
        slave's other entries stay."""
        with self._lock:
            changed = False
            for key, queues in table.items():
                if self._table.get(key) != queues:
                    self._table[key] = dict(queues)
                    changed = True
            if changed:
                self._version += 1

    # --- persisting ---------------------------------------------------------------------

    @property
    def dirty(self) -> bool:
        with self._lock:
            return self._version != self._persisted_version

    def persist(self, *, force: bool = False) -> bool:
        """Write the table if it changed since the last write (or ``force``); True when
        a file was written."""
        with self._persist_lock:
            with self._lock:
                version = self._version
                if not force and version == self._persisted_version:
                    return False
                document = encode_offset_file(self._table)
            # The file is written outside the table lock so commits never wait for an
            # fsync; the persist lock keeps an older snapshot from overwriting a newer one.
            persist_config_file(self.path, document)
            with self._lock:
                self._persisted_version = version
            return True
