"""The MessageStore facade's maintenance: manual retention, consume queue deletion
(RocketMQ's cleanExpiredConsumerQueue, cleanUnusedTopic, a deleted topic's queues), the
dispatcher's state.

Layer: store (the facade's package; see base.py).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from rocketstore.consume_queue import ConsumeQueue
from rocketstore.errors import ConfigError
from rocketstore.paths import LMQ_PREFIX, SCHEDULE_TOPIC, TRANS_OP_HALF_TOPIC
from rocketstore.services.retention import RetentionReport
from rocketstore.status import RunningFlags
from rocketstore.store.base import StoreBase
from rocketstore.store.queue_table import DeleteReason


class StoreMaintenance(StoreBase):
    """MessageStore's retention, queue deletion and dispatch state."""

    def delete_expired_files(self, force: bool = False, dry_run: bool = False) -> RetentionReport:
        """Manual retention (docs/operations.md): delete expired CommitLog files now, then
        the queue and index files below the new minimum; ``force`` also deletes unexpired
        CommitLog files (all but the newest). ``dry_run`` reports what would be deleted
        and why, and works on a read-only store too."""
        for name, value in (("force", force), ("dry_run", dry_run)):
            if not isinstance(value, bool):
                # force="no" would be true: unexpired files deleted
                raise ConfigError(f"{name} must be True or False, got {value!r}")
        if dry_run:
            self._check_open()
        else:
            self._check_writable()
        return self.retention.delete_expired_files(force=force, dry_run=dry_run)

    def _on_disk_full(self, full: bool) -> None:
        if full:
            self.running_flags |= RunningFlags.DISK_FULL
        else:
            self.running_flags &= ~RunningFlags.DISK_FULL

    @property
    def dispatch_error(self) -> BaseException | None:
        """Why the dispatcher stopped, or None while it runs. After a failure the store
        refuses puts (``running_flags``); what was appended stays in the CommitLog and
        the next open re-dispatches it."""
        return self.dispatcher.error

    def clean_expired_queues(self) -> list[tuple[str, int]]:
        """RocketMQ's ``cleanExpiredConsumerQueue`` (mqadmin cleanExpiredCQ): delete the
        consume queues (files and directory) whose every message is gone from the
        CommitLog, the end of their newest unit below its min offset; the schedule
        topic's queues are kept. A deleted queue's next message starts it again at queue
        offset 0, as in RocketMQ. Returns the queues deleted, in name order."""

        def expired(topic: str, queue: ConsumeQueue, min_offset: int) -> str | None:
            if topic == SCHEDULE_TOPIC:
                return None
            end = queue.last_unit_end()
            if end == -1 or end >= min_offset:
                return None  # (-1: a new queue file with no unit yet, as RocketMQ says)
            return f"its last message ended at {end}, the CommitLog now starts at {min_offset}"

        return self._destroy_queues(expired, remember=False)

    def clean_unused_topics(self, keep: Collection[str]) -> list[tuple[str, int]]:
        """RocketMQ's ``cleanUnusedTopic`` (mqadmin cleanUnusedTopic): delete the consume
        queues of every topic not in ``keep`` (the broker's configured topics), but never
        the schedule topic's, the transaction op topic's or a light queue's (%LMQ%). The
        messages stay in the CommitLog until retention. Returns the queues deleted."""
        if isinstance(keep, str) or not isinstance(keep, Iterable):
            # A str is a collection of characters: every topic but "T" would go for "T".
            raise ConfigError(f"keep must be a collection of topic names, got {keep!r}")
        kept = set(keep) | {SCHEDULE_TOPIC, TRANS_OP_HALF_TOPIC}

        def unused(topic: str, _queue: ConsumeQueue, _min_offset: int) -> str | None:
            if topic in kept or topic.startswith(LMQ_PREFIX):
                return None
            return "its topic is not configured"

        return self._destroy_queues(unused, remember=True)

    def delete_topic_queues(self, topic: str) -> list[tuple[str, int]]:
        """Delete every consume queue of ``topic`` (a deleted topic's): its messages stay
        in the CommitLog until retention, reachable by id and key but by no queue."""
        if not isinstance(topic, str):
            raise ConfigError(f"topic must be a str, got {type(topic).__name__}")

        def deleted(name: str, _queue: ConsumeQueue, _min_offset: int) -> str | None:
            return "its topic was deleted" if name == topic else None

        return self._destroy_queues(deleted, remember=True)

    def _destroy_queues(self, why: DeleteReason, *, remember: bool) -> list[tuple[str, int]]:
        """Delete the queues ``why`` gives a reason for (``QueueTable.destroy``).

        Puts are held off, and the dispatcher caught up and held, while the queues go: a
        message arriving for one of them is queued after, never into a file that goes."""
        self._check_writable()
        with self.commitlog.put_lock, self.dispatcher.caught_up():
            return self._queue_table.destroy(
                why,
                remember=remember,
                min_offset=self.commitlog.min_offset(),
                end_offset=self.commitlog.max_offset(),
                queue_table=self.commitlog.topic_queue_table,
            )

    def wait_dispatched(self) -> None:
        """Dispatch everything appended so far in the caller's thread (tests, tools)."""
        self._check_writable()
        self.dispatcher.run_once()
