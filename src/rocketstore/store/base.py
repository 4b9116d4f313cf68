"""What the MessageStore facade's modules share: the parts the store wires (declared
here, made in ``MessageStore.__init__``) and the guards every public method runs first.

Layer: store (the facade's package). ``MessageStore`` is one class put together from one
mixin per responsibility, each in its module and each on this base: writes, reads,
maintenance (retention, queue deletion), access (calls for the layers above), replication
(a slave's CommitLog) and lifetime (flush, close); message_store.py opens and wires.
"""

from __future__ import annotations

from rocketstore.commitlog import CommitLog
from rocketstore.config import StoreConfig
from rocketstore.consume_queue import ConsumeQueue
from rocketstore.errors import ConfigError, ReadOnlyStoreError, StoreClosedError
from rocketstore.files.lock import DirectoryLock
from rocketstore.index import IndexService
from rocketstore.java_ints import int_argument
from rocketstore.put_path import MessagePreparer
from rocketstore.queries import KeyQuery
from rocketstore.read_path import MessageReader
from rocketstore.recovery.checkpoint_file import CheckpointFile
from rocketstore.recovery.recover import RecoveryReport
from rocketstore.services.dispatcher import Dispatcher
from rocketstore.services.flusher import Flusher
from rocketstore.services.group_commit import GroupCommit
from rocketstore.services.prefaulter import Prefaulter
from rocketstore.services.retention import RetentionService
from rocketstore.status import RunningFlags
from rocketstore.store.follower import ReadOnlyFollower
from rocketstore.store.queue_table import QueueTable
from rocketstore.store.replica import ReplicaLog
from rocketstore.store.sinks import QueueSink, StoreDispatch
from rocketstore.store.write_path import WritePath


class StoreBase:
    """The state and guards of a MessageStore (see message_store.MessageStore)."""

    # The parts, made and wired by MessageStore.__init__ (message_store.py).
    root: str
    config: StoreConfig
    read_only: bool
    _closed: bool
    _lock: DirectoryLock | None
    commitlog: CommitLog
    _queue_table: QueueTable
    queues: dict[tuple[str, int], ConsumeQueue]
    index: IndexService
    checkpoint: CheckpointFile
    preparer: MessagePreparer
    reader: MessageReader
    queries: KeyQuery
    recovery_report: RecoveryReport
    _delay_levels_ms: list[int]
    flusher: Flusher
    group_commit: GroupCommit
    prefaulter: Prefaulter
    _queue_sink: QueueSink
    _dispatch: StoreDispatch
    dispatcher: Dispatcher
    running_flags: RunningFlags
    retention: RetentionService
    _writes: WritePath
    _replica: ReplicaLog
    _follower: ReadOnlyFollower

    @property
    def unreadable_queues(self) -> dict[tuple[str, int], str]:
        """Read-only: queues whose files could not be mapped (a file of the wrong size,
        unreadable), with why; a reader leaves them out."""
        return self._queue_table.unreadable

    @property
    def live_logics_timestamp(self) -> int:
        """The store time of the last record the dispatcher gave queue units."""
        return self._queue_sink.live_logics_timestamp

    def dispatch_lag_bytes(self) -> int:
        if self.read_only:
            return 0
        return self.dispatcher.lag_bytes()

    def _queue(self, topic: str, queue_id: int, *, create: bool = False) -> ConsumeQueue | None:
        return self._queue_table.get(topic, queue_id, create=create)

    def _check_open(self, queue_key: tuple[str, int] | None = None, *, queues: bool = True) -> None:
        """Raise if closed; on a read-only store, catch up with the writer first (only
        with ``queue_key``'s queue, or no queue when ``queues`` is False)."""
        if self._closed:
            raise StoreClosedError(f"store {self.root} is closed")
        if not self.read_only:
            return
        if queues or queue_key is not None:
            self._follower.refresh(queue_key=queue_key, queues=queues)
        else:
            self._follower.refresh_for_lookup()

    def _check_writable(self) -> None:
        if self._closed:
            raise StoreClosedError(f"store {self.root} is closed")
        if self.read_only:
            raise ReadOnlyStoreError(f"store {self.root} was opened read-only")

    def _check_submittable(self) -> None:
        """``_check_writable``, and no new submits once ``close`` has begun (it answers
        those already made first)."""
        self._check_writable()
        if self.group_commit.stopping:
            raise StoreClosedError(f"store {self.root} is closing")


def queue_arguments(topic: object, queue_id: object) -> None:
    """ConfigError unless ``topic`` is a str and ``queue_id`` an int: ``("T", "0")`` or
    ``(None, 0)`` name no queue and would answer "no message" instead."""
    if not isinstance(topic, str):
        raise ConfigError(f"topic must be a str, got {type(topic).__name__}")
    if type(queue_id) is not int:
        int_argument("queue_id", queue_id)
