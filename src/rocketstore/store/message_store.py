"""The MessageStore facade: opens a store directory and wires the parts together.

Layer: top of the engine (only cli/spark/broker sit above). Logic lives in the parts and
in this package's modules: opening (checks, geometry), follower (a read-only opener
beside a writer), sinks (what dispatch writes), write_path (puts), replica (a slave's
CommitLog), queue_table (the consume queues); put_path, commitlog, services, read_path,
queries and recovery below.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import time
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from types import TracebackType

from rocketstore.commitlog import CommitLog, PreparedMessage
from rocketstore.config import LIVE_FIELDS, StoreConfig, delay_levels_ms
from rocketstore.consume_queue import ConsumeQueue
from rocketstore.crashpoints import MID_REDISPATCH, any_armed, armed, crash_point
from rocketstore.errors import (
    ConfigError,
    ReadOnlyStoreError,
    StoreClosedError,
    StoreError,
)
from rocketstore.files.lock import DirectoryLock
from rocketstore.format.cq_ext import ExtUnit, is_ext_address
from rocketstore.format.message import Message, MessageExt
from rocketstore.format.message_id import decode_offset_msg_id
from rocketstore.format.record import RecordView
from rocketstore.format.selector import TAG
from rocketstore.format.subscription import Subscription, build_subscription
from rocketstore.index import IndexFile, IndexService
from rocketstore.java_ints import JAVA_INT_MAX, JAVA_LONG_MAX, int_argument
from rocketstore.paths import (
    ABORT_FILE,
    CHECKPOINT_FILE,
    LMQ_PREFIX,
    SCHEDULE_TOPIC,
    TRANS_OP_HALF_TOPIC,
    CommitLogDirs,
)
from rocketstore.put_columns import (
    DEFAULT_BORN_HOST,
    Columns,
    ColumnsResult,
    IntColumn,
    RowsCheck,
    TextColumn,
    check_rows,
)
from rocketstore.put_path import MessagePreparer, PutResult, Refusal
from rocketstore.queries import KeyQuery
from rocketstore.read_path import GetResult, MessageReader
from rocketstore.recovery.checkpoint_file import CheckpointFile
from rocketstore.recovery.later_records import first_record_after
from rocketstore.recovery.recover import RecoveryReport, missing_files
from rocketstore.services.dispatcher import Dispatcher, DispatchRun
from rocketstore.services.flusher import Flusher
from rocketstore.services.group_commit import GroupCommit
from rocketstore.services.prefaulter import Prefaulter
from rocketstore.services.retention import RetentionReport, RetentionService
from rocketstore.status import Boundary, PutStatus, RunningFlags
from rocketstore.store.follower import ReadOnlyFollower
from rocketstore.store.opening import open_arguments, recover_writer
from rocketstore.store.queue_table import (
    DeleteReason,
    QueueTable,
    UndispatchedRecord,
    first_undispatched,
)
from rocketstore.store.replica import ReplicaLog
from rocketstore.store.sinks import DispatchListener, IndexSink, QueueSink, StoreDispatch
from rocketstore.store.stats import StoreStats
from rocketstore.store.truncation import (
    TruncateReport,
    TruncateStatus,
    cut_back,
    keep_cut_bytes,
)
from rocketstore.store.views import QueueView
from rocketstore.store.write_path import WritePath

log = logging.getLogger(__name__)


class MessageStore:
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
        self._replica = ReplicaLog(self.commitlog, self.flusher, lambda: self.config)
        self._follower = ReadOnlyFollower(
            self.commitlog, self._queue_table, self.index, lambda: self.config
        )

    @property
    def unreadable_queues(self) -> dict[tuple[str, int], str]:
        """Read-only: queues whose files could not be mapped (a file of the wrong size,
        unreadable), with why; a reader leaves them out."""
        return self._queue_table.unreadable

    @property
    def live_logics_timestamp(self) -> int:
        """The store time of the last record the dispatcher gave queue units."""
        return self._queue_sink.live_logics_timestamp

    # --- opening ------------------------------------------------------------------------

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

    # --- dispatch -----------------------------------------------------------------------

    def _on_dispatch_failure(self, flag: RunningFlags) -> None:
        self.running_flags |= flag

    def _queue(self, topic: str, queue_id: int, *, create: bool = False) -> ConsumeQueue | None:
        return self._queue_table.get(topic, queue_id, create=create)

    # --- settings -----------------------------------------------------------------------

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

    # --- guards -------------------------------------------------------------------------

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

    # --- writing ------------------------------------------------------------------------

    def put(
        self,
        msg: Message,
        store_timestamp: int | None = None,
        store_host: str | None = None,
        *,
        delay: bool = True,
    ) -> PutResult:
        """Append one message. Expected failures come back as ``PutResult.status``.

        A message with a DELAY level goes to SCHEDULE_TOPIC_XXXX (spec 1.7) unless
        ``delay`` is False: the schedule service delivers due messages that way, with DELAY
        still in their properties, as RocketMQ's records have it."""
        if self._closed or self.read_only:  # (the common case without a call)
            self._check_writable()
        if store_timestamp is not None or store_host is not None:
            store_timestamp = self._writes.checked_arguments(store_timestamp, store_host)
        if (
            store_host is None
            and self.config.flush_disk_type == "ASYNC_FLUSH"
            and not any_armed()
            and self.running_flags.writeable
            and not self._writes.wraps(msg)
        ):
            # The common single put in one C call: nothing to wait for after the append.
            # (Here rather than in the write path: a call less on the hottest put.)
            done = self.preparer.put_one(self.commitlog, msg, store_timestamp)
            if done is not None:
                return done
        return self._writes.put(msg, store_timestamp, store_host, delay)

    def put_batch(
        self,
        msgs: Sequence[Message],
        store_timestamp: int | None = None,
        store_host: str | None = None,
    ) -> list[PutResult]:
        """Append messages as one batch: one store timestamp, contiguous in one file.

        Any invalid message fails the whole batch (nothing is written).
        """
        self._check_writable()
        return self._writes.put_batch(msgs, store_timestamp, store_host)

    def put_columns(
        self,
        topic: str,
        bodies: Sequence[bytes],
        *,
        queue_ids: IntColumn = 0,
        keys: TextColumn = None,
        tags: TextColumn = None,
        properties: Sequence[Mapping[str, str] | None] | None = None,
        property_columns: Mapping[str, TextColumn] | None = None,
        born_timestamp: int | None = None,
        born_host: str = DEFAULT_BORN_HOST,
        store_timestamp: int | None = None,
        store_host: str | None = None,
        flags: IntColumn = 0,
        sys_flag: int = 0,
        reconsume_times: int = 0,
        property_texts: Sequence[str] | None = None,
    ) -> ColumnsResult:
        """Append many messages of ``topic`` given as columns, without a Message per row
        (docs/api.md). Row i is ``Message(topic, bodies[i], queue_id=queue_ids[i],
        properties=...)`` with ``properties[i]``'s names, then KEYS ``keys[i]``, TAGS
        ``tags[i]`` and each of ``property_columns`` (a str for a column is every row's
        value, an int ``queue_ids`` every row's queue; a None value leaves the name out).

        The rows go in as consecutive batches, each what ``put_batch`` of its rows writes;
        a batch is appended once its rows (and the row after it) pass ``put_batch``'s
        checks, so a refusal (the result's status, its reason naming the row and the
        argument) stops the call with the batches before it stored (``stored`` rows).
        ConfigError for a column that is not one value per body.

        ``flags`` (an int for every row or one per row), ``sys_flag`` and
        ``reconsume_times`` are the rows' Message fields; ``property_texts``, instead of
        the other property arguments, gives each row's properties string to store as it
        is (``VerbatimProperties``: how a broker stores the entries of a batch send)."""
        self._check_writable()
        return self._writes.put_columns(
            topic,
            bodies,
            queue_ids=queue_ids,
            keys=keys,
            tags=tags,
            properties=properties,
            property_columns=property_columns,
            born_timestamp=born_timestamp,
            born_host=born_host,
            store_timestamp=store_timestamp,
            store_host=store_host,
            flags=flags,
            sys_flag=sys_flag,
            reconsume_times=reconsume_times,
            property_texts=property_texts,
        )

    def submit(
        self,
        msg: Message,
        store_timestamp: int | None = None,
        store_host: str | None = None,
        *,
        delay: bool = True,
    ) -> Future[PutResult]:
        """``put`` that appends now and answers through a future, for callers that must
        not block (an event loop): with SYNC_FLUSH the group commit thread completes it
        once the message is durable (its status FLUSH_DISK_TIMEOUT when that failed);
        otherwise it is complete on return. Messages submitted while a sync runs share
        the next one."""
        self._check_submittable()
        return self._writes.submit(msg, store_timestamp, store_host, delay=delay)

    def submit_batch(
        self,
        msgs: Sequence[Message],
        store_timestamp: int | None = None,
        store_host: str | None = None,
    ) -> Future[list[PutResult]]:
        """``put_batch`` answered through a future, as ``submit``."""
        self._check_submittable()
        return self._writes.submit_batch(msgs, store_timestamp, store_host)

    # --- reading ------------------------------------------------------------------------
    # --- reading ------------------------------------------------------------------------

    def get_messages(
        self,
        group: str,
        topic: str,
        queue_id: int,
        queue_offset: int,
        max_count: int = 32,
        tags: str | None = None,
        expression_type: str = TAG,
    ) -> GetResult:
        """RocketMQ's getMessage: statuses, batch limits and next_begin_offset as spec 10.
        ``tags`` is the subscription's expression: tags (``TagA || TagB``) or, with
        ``expression_type`` SQL92, a selector on the messages' properties (SelectorError
        when it does not parse)."""
        if tags is not None and not isinstance(tags, str):
            raise ConfigError(f"tags must be a str or None, got {type(tags).__name__}")
        if not isinstance(expression_type, str):
            raise ConfigError(
                "expression_type must be a str (TAG or SQL92), got "
                f"{type(expression_type).__name__}"
            )
        subscription = build_subscription(tags, expression_type)
        return self.get_matching_messages(
            group, topic, queue_id, queue_offset, max_count, subscription
        )

    def get_matching_messages(
        self,
        group: str,
        topic: str,
        queue_id: int,
        queue_offset: int,
        max_count: int,
        subscription: Subscription,
    ) -> GetResult:
        """``get_messages`` with a subscription already built (``build_subscription``, or
        one whose property filter a broker supplies)."""
        _queue_arguments(topic, queue_id)
        queue_offset = int_argument("queue_offset", queue_offset)
        max_count = int_argument("max_count", max_count)
        self._check_open((topic, queue_id))
        if max_count <= 0:
            raise ConfigError(f"max_count must be positive, got {max_count}")
        # (RocketMQ's maxMsgNums is a Java int; more cannot change the answer)
        max_count = min(max_count, JAVA_INT_MAX)
        return self.reader.get(self._queue(topic, queue_id), queue_offset, max_count, subscription)

    def look_message(self, commit_log_offset: int) -> MessageExt | None:
        commit_log_offset = int_argument("commit_log_offset", commit_log_offset)
        self._check_open(queues=False)
        return self.reader.look(commit_log_offset)

    def missing_commitlog_files(self) -> str | None:
        """What CommitLog files are missing (a gap, or queues and index pointing past the
        last file: a storePathCommitLog directory not there), or None. A writer opened
        with ``cut_damaged_commitlog=False`` refuses such a store; a reader reads what is
        there, and the CLI warns with this."""
        self._check_open(queues=False)
        return missing_files(self.commitlog, self.queues, self.index)

    def undispatched_record(self, probe: int = 64) -> UndispatchedRecord | None:
        """The first record past every consume queue's last unit that should have a unit
        of its own (not a PREPARED or ROLLBACK one), or None when the queues cover the
        CommitLog. Such a record in a store that was shut down cleanly means its queues are
        gone (removed, or never written: a RocketMQ 5 broker keeping its queues in RocksDB)
        or the broker stopped before building them. Looks at ``probe`` records at most
        past the queues' end, so it costs little on a store whose queues are all gone."""
        probe = int_argument("probe", probe)
        # No refresh of every queue: the question is about a stopped store, whose queues
        # the open has just read (a live writer's would move on anyway).
        self._check_open(queues=False)
        if self.config.enable_dledger_commit_log:
            return None  # DLedger entries frame the records; recovery dispatches those
        return first_undispatched(self.commitlog, self._queue_table, probe)

    def ext_unit(self, topic: str, queue_id: int, address: int) -> ExtUnit | None:
        """The ConsumeQueueExt unit a unit's tagsCode points to, when it is an extension
        address (a broker with enableConsumeQueueExt wrote the queue: format.cq_ext);
        None when it is not one or the unit cannot be found or read (logged; `check`
        reports damaged units)."""
        _queue_arguments(topic, queue_id)
        address = int_argument("address", address)
        self._check_open(queues=False)
        if not is_ext_address(address):
            return None
        return self._queue_table.ext_unit(topic, queue_id, address)

    def view_message(self, msg_id: str) -> MessageExt | None:
        """Find a message by offsetMsgId (store host + CommitLog offset)."""
        if not isinstance(msg_id, str):
            raise ConfigError(f"msg_id must be a str, got {type(msg_id).__name__}")
        self._check_open(queues=False)
        _host, offset = decode_offset_msg_id(msg_id)
        return self.reader.look(offset)

    def query_messages(
        self,
        topic: str,
        key: str,
        max_count: int = 32,
        begin_ms: int = 0,
        end_ms: int = JAVA_LONG_MAX,
    ) -> list[MessageExt]:
        """Messages of ``topic`` whose KEYS contain ``key`` and whose store time lies in
        [begin_ms, end_ms], oldest first (at most ``max_count``, the newest ones)."""
        if self._closed or self.read_only:  # (the common case without a call)
            self._check_open(queues=False)
        return self.queries.by_key(topic, key, max_count, begin_ms, end_ms)

    def query_by_unique_key(
        self, topic: str, uniq_key: str, max_count: int | None = None
    ) -> list[MessageExt]:
        """Messages of ``topic`` whose UNIQ_KEY is ``uniq_key``, oldest first: at most
        ``max_count`` (default ``default_query_max_num``, RocketMQ's 32)."""
        self._check_open(queues=False)
        return self.queries.by_unique_key(topic, uniq_key, max_count)

    def offset_by_time(
        self, topic: str, queue_id: int, timestamp_ms: int, boundary: str | Boundary = "lower"
    ) -> int:
        _queue_arguments(topic, queue_id)
        timestamp_ms = int_argument("timestamp_ms", timestamp_ms)
        if not isinstance(boundary, (str, Boundary)):
            raise ConfigError(
                f"boundary must be 'lower', 'upper' or a Boundary, got {type(boundary).__name__}"
            )
        self._check_open((topic, queue_id))
        which = Boundary.parse(boundary)
        queue = self._queue(topic, queue_id)
        if queue is None:
            return 0
        return queue.offset_by_time(
            timestamp_ms,
            which,
            self.commitlog.store_time_at,
            max(self.commitlog.min_offset(), 0),
            self.commitlog.files,
        )

    def min_offset(self, topic: str, queue_id: int) -> int:
        _queue_arguments(topic, queue_id)
        self._check_open((topic, queue_id))
        queue = self._queue(topic, queue_id)
        return queue.min_offset() if queue else 0

    def max_offset(self, topic: str, queue_id: int) -> int:
        _queue_arguments(topic, queue_id)
        self._check_open((topic, queue_id))
        queue = self._queue(topic, queue_id)
        return queue.max_offset() if queue else 0

    def min_commit_log_offset(self) -> int:
        self._check_open(queues=False)
        return self.commitlog.min_offset()

    def max_commit_log_offset(self) -> int:
        self._check_open(queues=False)
        return self.commitlog.max_offset()

    def topics(self) -> dict[str, list[int]]:
        self._check_open()
        result: dict[str, list[int]] = {}
        for topic, qid in sorted(self.queues):
            result.setdefault(topic, []).append(qid)
        return result

    def message_store_time(self, topic: str, queue_id: int, queue_offset: int) -> int:
        """Store time of the message at a queue offset, -1 if there is none."""
        _queue_arguments(topic, queue_id)
        queue_offset = int_argument("queue_offset", queue_offset)
        self._check_open((topic, queue_id))
        queue = self._queue(topic, queue_id)
        unit = queue.unit(queue_offset) if queue else None
        if unit is None or not unit.is_valid:
            return -1
        return self.commitlog.store_time_at(unit.commit_log_offset, unit.size)

    def dispatch_lag_bytes(self) -> int:
        if self.read_only:
            return 0
        return self.dispatcher.lag_bytes()

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

    # --- for the layers above: the CommitLog, queues and dispatch without the parts ----
    # Read as loaded, without a read-only opener's refresh (callers that read a lot, such
    # as a queue scan, refresh once with ``refresh`` or a counting call first).

    @property
    def commitlog_dirs(self) -> CommitLogDirs:
        """The CommitLog's directories (storePathCommitLog, its other paths, DLedger's)."""
        return self.commitlog.dirs

    def commitlog_files(self) -> list[tuple[int, str]]:
        """(first offset, path) of each CommitLog file the store has mapped, oldest first."""
        files = list(self.commitlog.files.files)
        return [(mapped.file_from_offset, mapped.path) for mapped in files]

    def read_commitlog(self, offset: int, size: int) -> bytes | None:
        """``size`` raw CommitLog bytes at ``offset`` (a record as stored, for a pull's or
        a query's answer), or None unless they lie in one file's written part."""
        return self.commitlog.read(offset, size)

    def commitlog_record(
        self, offset: int, *, size: int | None = None
    ) -> tuple[bytes, RecordView] | None:
        """The validated record at ``offset`` (its buffer and view: ``record.to_message_ext``
        decodes it), or None; with ``size`` (a queue unit's), None for a record of another
        size."""
        return self.commitlog.read_record(offset, size=size)

    @contextlib.contextmanager
    def commitlog_view(
        self, offset: int, size: int, *, written: bool = True
    ) -> Iterator[memoryview | None]:
        """The mapped CommitLog bytes [offset, offset + size) as a view valid inside the
        block (the file is held: retention cannot unmap it meanwhile; release anything
        taken from the view before the block ends). None when they do not lie in one
        mapped file (``written``: in its written part) or the file is being deleted."""
        mapped = self.commitlog.files.find(offset)
        position = offset - mapped.file_from_offset if mapped is not None else 0
        limit = self.commitlog.file_size
        if written and mapped is not None:
            limit = mapped.wrote_position
        if mapped is None or size < 0 or position + size > limit or not mapped.hold():
            yield None
            return
        try:
            view = memoryview(mapped.mm)[position : position + size]
            try:
                yield view
            finally:
                view.release()
        finally:
            mapped.release()

    def commitlog_store_time(self, offset: int, size: int = 0) -> int:
        """STORETIMESTAMP of the record at CommitLog ``offset``, -1 if none is there."""
        return self.commitlog.store_time_at(offset, size)

    def readable_record_after(self, offset: int) -> int | None:
        """The CommitLog offset of the first whole, valid record past ``offset`` (past
        damage: recovery.later_records), or None."""
        return first_record_after(self.commitlog, offset, 0)

    def queue_view(self, topic: str, queue_id: int) -> QueueView | None:
        """The consume queue ``topic``-``queue_id`` read-only, or None if there is none."""
        return self.queues.get((topic, queue_id))

    def index_files(self) -> tuple[IndexFile, ...]:
        """The index files the store has loaded, oldest first, to read (their headers,
        entries and paths); the store alone writes them."""
        return tuple(self.index.files)

    def index_last_update(self) -> tuple[int, int]:
        """(end timestamp, end CommitLog offset) of the newest index file, (0, 0) without
        one: a QUERY_MESSAGE answer's indexLastUpdateTimestamp / indexLastUpdatePhyoffset."""
        return self.index.last_update()

    @property
    def damaged_records_skipped(self) -> int:
        """Units pulls skipped because their CommitLog record was unreadable (brokerStatus's
        pullSkippedDamagedMsgs)."""
        return self.reader.damaged_records_skipped

    def stats(self) -> StoreStats:
        """Counters for monitoring (the broker's /metrics): see :class:`StoreStats`."""
        files = self.commitlog.files
        index = self.index.files[-1] if self.index.files else None
        report = self.recovery_report
        return StoreStats(
            commit_log_min_offset=self.commitlog.min_offset(),
            commit_log_max_offset=self.commitlog.max_offset(),
            commit_log_flushed_offset=files.flushed_where,
            dispatch_lag_bytes=self.dispatch_lag_bytes(),
            commit_log_files=len(self.commitlog_files()),
            flushes=self.flusher.flush_count,
            flush_seconds=self.flusher.flush_seconds,
            group_commit_requests=self.group_commit.requests,
            group_commit_syncs=self.group_commit.syncs,
            index_files=len(self.index.files),
            index_entries=index.index_count - 1 if index is not None else 0,
            index_capacity=index.index_num if index is not None else 0,
            recovery_seconds=report.seconds,
            recovery_abnormal=report.abnormal,
            recovery_records_scanned=report.records_scanned,
            damaged_records_skipped=self.reader.damaged_records_skipped,
            writeable=self.running_flags.writeable,
        )

    def queue_views(self) -> dict[tuple[str, int], QueueView]:
        """Every consume queue, read-only, by (topic, queue id)."""
        return dict(self.queues)

    def add_dispatch_listener(self, listener: DispatchListener) -> None:
        """Call ``listener(run)`` on the dispatcher's thread after each run of records is in
        the queues and the index (a broker's long polling wakes pulls with it). It must be
        quick and must not raise: an exception stops dispatch as a failed write does."""
        self._dispatch.listeners.append(listener)

    def remove_dispatch_listener(self, listener: DispatchListener) -> None:
        """Stop calling ``listener`` (no error if it is not there)."""
        with contextlib.suppress(ValueError):
            self._dispatch.listeners.remove(listener)

    def sync_to(self, offset: int) -> PutStatus:
        """Make the CommitLog durable up to ``offset`` now, as a SYNC_FLUSH put waits for
        (whatever the flush policy): PUT_OK, or FLUSH_DISK_TIMEOUT when the sync did not
        finish within ``sync_flush_timeout``."""
        offset = int_argument("offset", offset)
        self._check_writable()
        return self.flusher.flush_sync(offset)

    def prepare_message(
        self, msg: Message, store_host: str | None = None, *, in_batch: bool = False
    ) -> PreparedMessage | Refusal:
        """``msg`` checked and encoded as a put would (its record length), or the refusal
        a put would answer; nothing is appended."""
        return self.preparer.prepare(msg, store_host, in_batch=in_batch)

    def check_columns(self, columns: Columns, store_host: str | None = None) -> RowsCheck:
        """Every row of ``columns`` checked and encoded as ``put_columns`` would
        (put_columns.check_rows), nothing appended."""
        return check_rows(self.preparer, columns, store_host)

    # --- replication: a slave's CommitLog ---------------------------------------------

    def append_replicated(self, offset: int, data: bytes | bytearray | memoryview) -> int:
        """Append CommitLog bytes a master sent, at exactly ``offset``, as they are
        (RocketMQ's appendToCommitLog on a slave: its files stay byte-identical to the
        master's); return the new max CommitLog offset. The dispatcher builds the queues
        and the index from them as from any append.

        ``offset`` must be the max offset, or a file boundary when the CommitLog is empty
        (a new slave starts at one of the master's files): ConfigError otherwise. The
        bytes may end inside a record (the master cuts its transfers anywhere); each
        record is checked once it is whole, by recovery's rules
        (:func:`~rocketstore.format.replicated.check_replicated`), before anything is
        written: a CorruptDataError leaves the CommitLog as it was. With SYNC_FLUSH the
        bytes are durable when this returns."""
        offset = int_argument("offset", offset)
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise ConfigError(f"data must be bytes-like, got {type(data).__name__}")
        self._check_writable()
        return self._replica.append(offset, data)

    def truncate_commitlog(
        self, offset: int, *, allow_empty: bool = False, note: str = ""
    ) -> TruncateReport:
        """Cut the CommitLog back so that it ends at ``offset``, with every queue unit and
        index entry past it (a slave whose disk has more than its master: RocketMQ 5's
        ``truncateFiles``). The cut bytes are first copied into ``truncated-<UTC time>/``
        under the store (one file per CommitLog file, named by CommitLog offset, and
        truncation.json with ``note``), synced; then queues, index and CommitLog are cut
        as recovery cuts them, and dispatch goes on from ``offset``.

        Refused, nothing changed (the report's status): NOTHING_TO_CUT when the CommitLog
        ends at or before ``offset``; BELOW_MIN_OFFSET when ``offset`` is at or below the
        CommitLog's first offset (every file would go) unless ``allow_empty``; NOT_A_RECORD_BOUNDARY
        when no whole valid record starts at ``offset`` (RocketMQ's isOffsetAligned).
        An OSError while keeping the bytes also leaves the store as it was."""
        offset = int_argument("offset", offset)
        self._check_writable()
        with self.commitlog.put_lock, self.dispatcher.caught_up():
            low = max(self.commitlog.min_offset(), 0)
            high = self.commitlog.max_offset()
            report = TruncateReport(
                TruncateStatus.NOTHING_TO_CUT, offset, old_min_offset=low, old_max_offset=high
            )
            if offset >= high:
                return report
            if offset <= low:
                if not allow_empty:
                    return dataclasses.replace(report, status=TruncateStatus.BELOW_MIN_OFFSET)
                offset = report.offset = max(offset, 0)
            elif not self._replica.is_record_start(offset):
                return dataclasses.replace(report, status=TruncateStatus.NOT_A_RECORD_BOUNDARY)
            report.kept_dir = keep_cut_bytes(self.root, self.commitlog, report, note)
            report = cut_back(self.commitlog, self._queue_table, self.index, report)
            self._replica.record_start = None
            self.dispatcher.dispatched_offset = max(offset, self.commitlog.min_offset(), 0)
            # The checkpoint's times vouch that data stored until then is on disk; bytes
            # the master sends next may be older than the cut ones, so the times go back
            # to the first record of the file now holding the last byte kept.
            last = max(offset - 1, 0)
            first = self.commitlog.store_time_at(last - last % self.commitlog.file_size, 0)
            safe = max(0, first - 1)
            current = self.checkpoint.value
            self.checkpoint.update(
                physic_msg_timestamp=min(current.physic_msg_timestamp, safe),
                logics_msg_timestamp=min(current.logics_msg_timestamp, safe),
                index_msg_timestamp=min(current.index_msg_timestamp, safe),
            )
            self.checkpoint.flush()
            self.commitlog.files.flush_all()
        log.warning("%s: %s", self.root, report.summary())
        return report

    def commitlog_data(self, offset: int, max_bytes: int) -> bytes | None:
        """Up to ``max_bytes`` CommitLog bytes from ``offset`` to the written end of its
        file (RocketMQ's getCommitLogData, what a master sends its slaves): ``b""`` when
        nothing is written there yet, None when ``offset`` is below the first file (retention
        deleted it)."""
        offset = int_argument("offset", offset)
        max_bytes = int_argument("max_bytes", max_bytes)
        self._check_open(queues=False)
        if offset < max(self.commitlog.min_offset(), 0):
            return None
        with self.commitlog.view_to_file_end(offset, max_bytes) as view:
            return b"" if view is None else bytes(view)

    # --- durability and lifetime ------------------------------------------------------

    # --- durability and lifetime ------------------------------------------------------

    def flush(self) -> None:
        """Make every appended byte durable (CommitLog, queues, index) and the checkpoint."""
        if self._closed or self.read_only:
            return
        if self.dispatcher.error is None:
            self.dispatcher.run_once()
        physic = self.commitlog.last_store_timestamp()
        logics = self.live_logics_timestamp
        self.commitlog.files.flush_all()
        for queue in list(self.queues.values()):
            queue.files.flush_all()
        self.index.flush()
        index_end = self.index.files[-1].end_timestamp if self.index.files else 0
        self._write_checkpoint(
            physic_msg_timestamp=physic, logics_msg_timestamp=logics, index_msg_timestamp=index_end
        )

    def _write_checkpoint(self, **fields: int) -> None:
        # Values only move forward: each is a promise that data up to it is on disk.
        current = self.checkpoint.value
        update = {k: max(v, getattr(current, k)) for k, v in fields.items() if v > 0}
        self.checkpoint.update(**update)
        self.checkpoint.flush()

    def _on_commitlog_flushed(self, store_timestamp: int) -> None:
        if store_timestamp > self.checkpoint.value.physic_msg_timestamp:
            self.checkpoint.update(physic_msg_timestamp=store_timestamp)

    def _on_queues_flushed(self, logics_timestamp: int) -> None:
        """After a thorough queue flush: persist the checkpoint (RocketMQ does the same)."""
        self._write_checkpoint(logics_msg_timestamp=logics_timestamp)

    def _on_flush_error(self, error: BaseException) -> None:
        log.error("flush failed, store no longer accepts writes: %s", error)
        self.running_flags |= RunningFlags.NOT_WRITEABLE

    def _on_index_file_full(self, end_timestamp: int) -> None:
        self._write_checkpoint(index_msg_timestamp=end_timestamp)

    def close(self) -> None:
        """Stop the services, flush everything, and remove the abort marker if the store
        is consistent (dispatch caught up, no write fault). Files are unmapped and the
        lock released even when a step fails; the failure is logged and re-raised."""
        if self._closed:
            return
        error: BaseException | None = None
        try:
            if not self.read_only:
                self.group_commit.shutdown()  # answers every submitted put first
                self.retention.shutdown()
                self.prefaulter.shutdown()
                self.flusher.shutdown()
                try:
                    self.dispatcher.shutdown(catch_up=self.dispatcher.error is None)
                    self.flush()
                except (OSError, StoreError) as e:
                    log.error("%s: close could not flush everything: %s", self.root, e)
                    self.running_flags |= RunningFlags.NOT_WRITEABLE
                    error = e
                clean = (
                    error is None
                    and self.dispatcher.error is None
                    and self.dispatcher.lag_bytes() == 0
                    # A full disk refuses puts but leaves the files consistent.
                    and (self.running_flags & ~RunningFlags.DISK_FULL).writeable
                )
                if clean:
                    with contextlib.suppress(FileNotFoundError):
                        os.remove(os.path.join(self.root, ABORT_FILE))
        finally:
            self._closed = True
            self.commitlog.close()
            self._queue_table.close()
            self.index.close()
            if self._lock is not None:
                self._lock.release()
        if error is not None:
            raise error

    def __enter__(self) -> MessageStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        mode = "read-only" if self.read_only else "writer"
        return f"MessageStore({self.root!r}, {mode})"


def _queue_arguments(topic: object, queue_id: object) -> None:
    """ConfigError unless ``topic`` is a str and ``queue_id`` an int: ``("T", "0")`` or
    ``(None, 0)`` name no queue and would answer "no message" instead."""
    if not isinstance(topic, str):
        raise ConfigError(f"topic must be a str, got {type(topic).__name__}")
    if type(queue_id) is not int:
        int_argument("queue_id", queue_id)
