"""The store's consume queues: the table of open queues, found on disk and made on demand,
and the queues deleted on purpose.

Layer: store (the facade's package). Owns the ``(topic, queue_id) -> ConsumeQueue`` table
the dispatcher's queue sink writes through and every read looks up; it does not decide
when to dispatch, refresh or delete (the facade does, holding off puts first).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass

from rocketstore.commitlog import CommitLog
from rocketstore.consume_queue import ConsumeQueue
from rocketstore.consume_queue_ext import ConsumeQueueExtReader
from rocketstore.errors import CorruptDataError
from rocketstore.files.deleted_queues import dispatched_through_deletions, queue_key, record_deleted
from rocketstore.format.cq_ext import ExtUnit
from rocketstore.format.sysflag import gets_queue_entry
from rocketstore.paths import CONSUME_QUEUE_DIR

log = logging.getLogger(__name__)

QueueKey = tuple[str, int]
# Why a queue goes (a reason to log), or None to keep it: (topic, queue, CommitLog min).
DeleteReason = Callable[[str, ConsumeQueue, int], str | None]


@dataclass(frozen=True)
class UndispatchedRecord:
    """A CommitLog record no consume queue has a unit for (``undispatched_record``)."""

    offset: int
    commitlog_end: int
    topic: str
    queue_id: int


class QueueTable:
    def __init__(self, root: str, file_size: int) -> None:
        self.root = root
        self.file_size = file_size
        self.queues: dict[QueueKey, ConsumeQueue] = {}
        # Read-only: queues whose files could not be mapped (a file of the wrong size,
        # unreadable), with why. A reader leaves them out rather than fail every read of
        # the store over one queue; a writer must not (it would write beside them).
        self.unreadable: dict[QueueKey, str] = {}
        self.ext_readers: dict[QueueKey, ConsumeQueueExtReader] = {}
        self.lock = threading.Lock()
        # Queues deleted on purpose (files.deleted_queues), read at open.
        self.deleted: dict[str, int] = {}

    def load_all(self, writable: bool) -> None:
        """Map every queue directory not mapped yet (read-only openers call it again to
        pick up queues a writer created)."""
        base = os.path.join(self.root, CONSUME_QUEUE_DIR)
        if not os.path.isdir(base):
            return
        unreadable: dict[QueueKey, str] = {}
        for topic in sorted(os.listdir(base)):
            topic_dir = os.path.join(base, topic)
            if not os.path.isdir(topic_dir):
                continue
            for qid in sorted(os.listdir(topic_dir)):
                key = (topic, int(qid)) if qid.isdigit() else None
                if key is None or key in self.queues:
                    continue
                queue = self.new_queue(topic, key[1], writable=writable)
                try:
                    queue.load()
                except (CorruptDataError, OSError) as e:
                    if writable:
                        raise
                    # Tried again at each listing: a writer may be making the file.
                    if key not in self.unreadable:
                        log.warning("%s: consume queue %s-%d left out: %s", self.root, *key, e)
                    unreadable[key] = str(e)
                    continue
                self.queues[key] = queue
        self.unreadable = unreadable

    def load_one(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        """Map one queue a writer may have made since the last listing (read-only), if its
        directory is there: a read of one queue looks for it alone instead of listing
        every topic's directory (load_all)."""
        key = (topic, queue_id)
        if key in self.queues:
            return self.queues[key]
        if not os.path.isdir(os.path.join(self.root, CONSUME_QUEUE_DIR, topic, str(queue_id))):
            return None
        queue = self.new_queue(topic, queue_id, writable=False)
        try:
            queue.load()
        except (CorruptDataError, OSError) as e:
            if key not in self.unreadable:
                log.warning("%s: consume queue %s-%d left out: %s", self.root, *key, e)
            self.unreadable[key] = str(e)
            return None
        self.unreadable.pop(key, None)
        self.queues[key] = queue
        return queue

    def new_queue(self, topic: str, queue_id: int, *, writable: bool) -> ConsumeQueue:
        return ConsumeQueue(self.root, topic, queue_id, self.file_size, writable=writable)

    def get(self, topic: str, queue_id: int, *, create: bool = False) -> ConsumeQueue | None:
        key = (topic, queue_id)
        queue = self.queues.get(key)
        if queue is None and create:
            with self.lock:
                queue = self.queues.get(key)
                if queue is None:
                    queue = self.new_queue(topic, queue_id, writable=True)
                    self.queues[key] = queue
        return queue

    def deleted_cutoff(self, topic: str, queue_id: int) -> int | None:
        """For a queue deleted on purpose, the CommitLog offset below which its records
        get no unit; None for any other queue."""
        if not self.deleted:
            return None
        return self.deleted.get(queue_key(topic, queue_id))

    def ext_unit(self, topic: str, queue_id: int, address: int) -> ExtUnit | None:
        """The ConsumeQueueExt unit at extension ``address`` of a queue, or None when it
        cannot be found or read (logged)."""
        reader = self.ext_readers.get((topic, queue_id))
        if reader is None:
            reader = ConsumeQueueExtReader(self.root, topic, queue_id)
            self.ext_readers[(topic, queue_id)] = reader
        try:
            return reader.get(address)
        except CorruptDataError as e:
            # As RocketMQ, whose reads of a bad unit fail quietly: callers fall back.
            log.warning("%s-%d: unreadable ConsumeQueueExt unit: %s", topic, queue_id, e)
            return None

    def flush(self, least_pages: int) -> None:
        for queue in list(self.queues.values()):
            queue.flush(least_pages)

    def destroy(
        self,
        why: DeleteReason,
        *,
        remember: bool,
        min_offset: int,
        end_offset: int,
        queue_table: dict[str, int],
    ) -> list[QueueKey]:
        """Delete the queues ``why`` gives a reason for (files, directory, and their next
        offset in ``queue_table``, the CommitLog's). ``remember``: their records are still
        in the CommitLog, so the deletion is recorded first (files.deleted_queues, with
        ``end_offset``), or the next recovery would rebuild them. The caller holds off
        puts and the dispatcher."""
        with self.lock:
            chosen = []
            for key in sorted(self.queues):
                reason = why(key[0], self.queues[key], min_offset)
                if reason is not None:
                    chosen.append((key, reason))
            if remember and chosen:
                self.deleted = record_deleted(self.root, [k for k, _ in chosen], end_offset)
            for key, reason in chosen:
                topic, queue_id = key
                queue = self.queues[key]
                log.info("%s: consume queue %s-%d deleted: %s", self.root, topic, queue_id, reason)
                del self.queues[key]
                self.ext_readers.pop(key, None)
                queue_table.pop(queue_key(topic, queue_id), None)
                queue.destroy()
        return [key for key, _ in chosen]

    def close(self) -> None:
        for queue in self.queues.values():
            queue.close()


def first_undispatched(
    commitlog: CommitLog, table: QueueTable, probe: int
) -> UndispatchedRecord | None:
    """``MessageStore.undispatched_record``: the first of ``probe`` records past every
    queue's last unit (and past what deleted queues had) that should have a unit."""
    covered = max((q.max_physic_offset for q in table.queues.values()), default=-1)
    covered = max(covered, dispatched_through_deletions(table.root))
    offset = max(covered, commitlog.min_offset())
    end = commitlog.max_offset()
    size = commitlog.file_size
    for _ in range(probe):
        if offset >= end:
            return None
        found = commitlog.read_record(offset)
        if found is None:  # the blank end of a file (or damage): the next file
            offset = (offset // size + 1) * size
            continue
        view = found[1]
        if gets_queue_entry(view.sys_flag):
            return UndispatchedRecord(offset, end, view.topic, view.queue_id)
        offset += view.size
    return None
