"""The MessageStore facade: opens a store directory and wires the parts together.

Layer: top of the engine (only cli/spark/broker sit above). ``MessageStore`` is put
together from one mixin per responsibility (base.py says how): writes, reads,
maintenance, access (the calls for the layers above), replication and lifetime, each in
its module; this one opens the store and wires the parts. Logic lives in the parts and in
this package's other modules: opening (checks, geometry), follower (a read-only opener
beside a writer), sinks (what dispatch writes), write_path (puts), replica (a slave's
CommitLog), truncation, queue_table (the consume queues); put_path, commitlog, services,
read_path, queries and recovery below.
"""

from __future__ import annotations

import dataclasses
import os
import time

from rocketstore.commitlog import CommitLog
from rocketstore.config import LIVE_FIELDS, StoreConfig, delay_levels_ms
from rocketstore.crashpoints import MID_REDISPATCH, armed, crash_point
from rocketstore.errors import ConfigError
from rocketstore.files.lock import DirectoryLock
from rocketstore.index import IndexService
from rocketstore.paths import CHECKPOINT_FILE
from rocketstore.put_path import MessagePreparer
from rocketstore.queries import KeyQuery
from rocketstore.read_path import MessageReader
from rocketstore.recovery.checkpoint_file import CheckpointFile
from rocketstore.recovery.recover import RecoveryReport
from rocketstore.services.dispatcher import Dispatcher, DispatchRun
from rocketstore.services.flusher import Flusher
from rocketstore.services.group_commit import GroupCommit
from rocketstore.services.prefaulter import Prefaulter
from rocketstore.services.retention import RetentionService
from rocketstore.status import RunningFlags
from rocketstore.store.access import StoreAccess
from rocketstore.store.follower import ReadOnlyFollower
from rocketstore.store.lifetime import StoreLifetime
from rocketstore.store.maintenance import StoreMaintenance
from rocketstore.store.opening import open_arguments, recover_writer
from rocketstore.store.queue_table import QueueTable
from rocketstore.store.reads import StoreReads
from rocketstore.store.replica import ReplicaLog
from rocketstore.store.replication import StoreReplication
from rocketstore.store.sinks import IndexSink, QueueSink, StoreDispatch
from rocketstore.store.write_path import WritePath
from rocketstore.store.writes import StoreWrites


class MessageStore(
    StoreWrites, StoreReads, StoreMaintenance, StoreAccess, StoreReplication, StoreLifetime
):
    """A RocketMQ-compatible message store over one directory.

    Open with :meth:`open`; use as a context manager or call :meth:`close`.
    """

    def __init__(self, root: str, config: StoreConfig, *, read_only: bool):
        self.root = os.path.abspath(root)
        self.config = config
        self.read_only = read_only
        self._closed = False
        self._lock = DirectoryLock(self.root) if not read_only else None
        self.commitlog = CommitLog(
            self.root,
            config.mapped_file_size_commit_log,
            writable=not read_only,
            dirs=config.commit_log_dirs(self.root),
        )
        self._queue_table = QueueTable(self.root, config.consume_queue_file_size)
        self.queues = self._queue_table.queues
        self.index = IndexService(
            self.root, config.max_hash_slot_num, config.max_index_num, writable=not read_only
        )
        self.checkpoint = CheckpointFile(
            os.path.join(self.root, CHECKPOINT_FILE), writable=not read_only
        )
        self.preparer = MessagePreparer(config)
        self.reader = MessageReader(self.commitlog, config)
        self.queries = KeyQuery(self.commitlog, self.index, config)
        self.recovery_report = RecoveryReport()
        self._delay_levels_ms = delay_levels_ms(config.message_delay_level)
        self.flusher = Flusher(
            self.commitlog,
            self._queue_table.flush,
            config,
            on_commitlog_flushed=self._on_commitlog_flushed,
            on_queues_flushed=self._on_queues_flushed,
            on_error=self._on_flush_error,
            live_logics_timestamp=lambda: self.live_logics_timestamp,
        )
        # SYNC_FLUSH puts that must not block (submit): their syncs run on its thread.
        self.group_commit = GroupCommit(
            lambda offset: self.flusher.flush_sync(offset, background=True)
        )
        sync_flush = config.flush_disk_type == "SYNC_FLUSH" and not read_only
        self.commitlog.write_through = sync_flush
        self.prefaulter = Prefaulter(
            self.commitlog,
            0 if read_only else config.commit_log_prefault_bytes,
            self.index if config.message_index_enable else None,
            zero_fill=self.flusher.small_sync_flushes if sync_flush else None,
        )
        # Dispatch (RocketMQ's reput and its CommitLogDispatchers): queues, then index.
        self._queue_sink = QueueSink(self.root, self._queue_table, lambda: self.config)
        self._dispatch = StoreDispatch(
            self._queue_sink,
            IndexSink(self.index, self.prefaulter.wake_for_index),
            lambda: self.config,
            self._delay_levels_ms,
            self._on_dispatch_failure,
        )
        self.dispatcher = Dispatcher(
            self.commitlog,
            self._dispatch,
            0,
            interval_ms=config.dispatch_interval_ms,
            max_lag_ms=config.max_dispatch_lag_ms,
        )
        self.running_flags = RunningFlags(0)
        self.retention = RetentionService(
            self.root,
            self.commitlog,
            lambda: list(self.queues.values()),
            self.index,
            config,
            on_disk_full=self._on_disk_full,
        )
        self.index.on_full_file_flushed = self._on_index_file_full
        self._writes = WritePath(self, self._delay_levels_ms)
        self._replica = ReplicaLog(
            self.commitlog,
            self.flusher,
            lambda: self.config,
            on_first_append=self.prefaulter.skip_commitlog_faults,
            on_checked=None if read_only else self.dispatcher.hand_over,
        )
        self._follower = ReadOnlyFollower(
            self.commitlog, self._queue_table, self.index, lambda: self.config
        )

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        config: StoreConfig | None = None,
        read_only: bool = False,
    ) -> MessageStore:
        """Open (or, for a writer, create) the store at ``path``.

        CommitLog and ConsumeQueue file sizes are taken from existing files, the index
        geometry from the newest index file (``index.file_geometry``: its entries show it
        whatever the broker that wrote it was configured with), so new files match.
        """
        root, config = open_arguments(path, config, read_only)
        store = cls(root, config, read_only=read_only)
        started = time.monotonic()
        if read_only:
            store._load_read_only()
        else:
            os.makedirs(store.root, exist_ok=True)
            assert store._lock is not None
            store._lock.acquire()
            try:
                store._load_and_recover()
            except BaseException:
                store._lock.release()
                raise
            store._start()
        store.recovery_report.seconds = time.monotonic() - started
        return store

    def _load_and_recover(self) -> None:
        self.recovery_report = recover_writer(
            self.commitlog,
            self._queue_table,
            self.index,
            self.checkpoint,
            self.config,
            self._redispatch_from,
            lambda: self.dispatcher.dispatched_offset,
        )

    def _redispatch_from(self, offset: int) -> int:
        self.dispatcher.dispatched_offset = max(offset, self.commitlog.min_offset(), 0)
        if not armed(MID_REDISPATCH):
            return self.dispatcher.run_once()
        handle = self.dispatcher.handle

        def handle_then_crash(run: DispatchRun) -> None:
            handle(run)
            crash_point(MID_REDISPATCH)

        self.dispatcher.handle = handle_then_crash
        try:
            return self.dispatcher.run_once()
        finally:
            self.dispatcher.handle = handle

    def _start(self) -> None:
        self.commitlog.on_append = self._on_append
        self.dispatcher.start()
        self.prefaulter.start()
        self.flusher.start()
        self.retention.start()

    def _on_append(self, max_offset: int) -> None:
        self.dispatcher.after_append(max_offset)
        self.prefaulter.wakeup(max_offset)

    def _load_read_only(self) -> None:
        self.commitlog.files.load()
        self._queue_table.load_all(writable=False)
        self.index.load()
        report = self._follower.refresh(full=True)
        if report is not None:
            self.recovery_report = report

    def refresh(self) -> None:
        """Read-only store: see now what a writer appended, new queues and files included
        (other calls list directories at most every 50 ms). A writer sees everything."""
        self._follower.list_now()
        self._check_open()

    def _on_dispatch_failure(self, flag: RunningFlags) -> None:
        self.running_flags |= flag

    def update_config(self, **changes: object) -> StoreConfig:
        """Change settings of the open store at once (RocketMQ's updateBrokerConfig for the
        store's part): only those in ``config.LIVE_FIELDS``, read by the flusher, the
        retention service, pulls and queries at each use. Validated as a whole first, so a
        bad value changes nothing (ConfigError naming it); the new settings are returned.
        """
        self._check_open(queues=False)
        unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(StoreConfig)})
        if unknown:
            raise ConfigError(f"not a store setting: {', '.join(unknown)}")
        fixed = sorted(set(changes) - LIVE_FIELDS)
        if fixed:
            raise ConfigError(
                f"{', '.join(fixed)} cannot change while the store is open "
                "(they take effect when it is next opened)"
            )
        updated = self.config.replace(**changes).validate()
        # Each holder reads its ``config`` afresh at each use; one reference swap apiece.
        for holder in (
            self,
            self.preparer,
            self.reader,
            self.queries,
            self.flusher,
            self.retention,
        ):
            holder.config = updated
        return updated

    def __repr__(self) -> str:
        mode = "read-only" if self.read_only else "writer"
        return f"MessageStore({self.root!r}, {mode})"
