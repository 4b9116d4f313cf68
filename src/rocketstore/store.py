"""The MessageStore facade: opens a store directory and wires the parts together.

Layer: top of the engine (only cli/spark/broker sit above). Logic lives in the parts:
put_path (checks), commitlog (append), services.dispatcher (queues and index),
read_path (getMessage), queries (key lookups), recovery.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import numpy as np
import numpy.typing as npt

from rocketstore.commitlog import Appended, CommitLog, EncodedBatch, PreparedMessage
from rocketstore.config import LIVE_FIELDS, StoreConfig, delay_levels_ms
from rocketstore.consume_queue import ConsumeQueue
from rocketstore.consume_queue_ext import ConsumeQueueExtReader
from rocketstore.crashpoints import (
    AFTER_APPEND_BEFORE_FLUSH,
    AFTER_DISPATCH_QUEUE_BEFORE_INDEX,
    MID_BATCH_WRITE,
    MID_REDISPATCH,
    any_armed,
    armed,
    crash_point,
)
from rocketstore.errors import (
    ConfigError,
    CorruptDataError,
    NotAStoreError,
    ReadOnlyStoreError,
    StoreClosedError,
    StoreError,
)
from rocketstore.files.deleted_queues import (
    dispatched_through_deletions,
    load_deleted_queues,
    prune_deleted,
    queue_key,
    record_deleted,
)
from rocketstore.files.lock import DirectoryLock
from rocketstore.files.mapped_file_queue import detect_file_size
from rocketstore.files.store_dir import missing_commitlog, orphaned_files, with_dledger
from rocketstore.format import record as rec
from rocketstore.format.cq_ext import ExtUnit, is_ext_address
from rocketstore.format.dispatch_facts import DispatchFacts, dispatch_facts
from rocketstore.format.message import BODY_TYPES, Message, MessageExt, message_problem
from rocketstore.format.message_id import decode_offset_msg_id
from rocketstore.format.multi_dispatch import (
    INNER_MULTI_DISPATCH,
    ExtraUnits,
    extra_units,
    is_multi_dispatch,
    java_split,
    merge_units,
    queue_keys,
    wrapped_properties,
)
from rocketstore.format.queue_unit import CQ_UNIT_SIZE
from rocketstore.format.record_scan import queue_runs
from rocketstore.format.replicated import check_replicated
from rocketstore.format.selector import TAG
from rocketstore.format.subscription import Subscription, build_subscription
from rocketstore.format.sysflag import gets_queue_entry
from rocketstore.index import IndexService, newest_geometry
from rocketstore.java_ints import JAVA_INT_MAX, JAVA_LONG_MAX, int_argument
from rocketstore.paths import (
    ABORT_FILE,
    CHECKPOINT_FILE,
    CONSUME_QUEUE_DIR,
    LMQ_PREFIX,
    SCHEDULE_TOPIC,
    TRANS_OP_HALF_TOPIC,
    index_dir,
    is_queue_dir_name,
)
from rocketstore.put_columns import (
    DEFAULT_BORN_HOST,
    Columns,
    ColumnsResult,
    IntColumn,
    TextColumn,
    put_rows,
)
from rocketstore.put_path import MessagePreparer, PutResult, Refusal, encoded_results
from rocketstore.queries import KeyQuery
from rocketstore.read_path import GetResult, MessageReader
from rocketstore.recovery.checkpoint_file import CheckpointFile
from rocketstore.recovery.recover import (
    EntryChain,
    RecoveryReport,
    missing_files,
    recover_store,
    scan_valid_end,
)
from rocketstore.services.dispatcher import Dispatcher, DispatchRun
from rocketstore.services.flusher import Flusher
from rocketstore.services.group_commit import GroupCommit
from rocketstore.services.prefaulter import Prefaulter
from rocketstore.services.retention import RetentionReport, RetentionService
from rocketstore.status import AppendStatus, Boundary, PutStatus, RunningFlags

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class UndispatchedRecord:
    """A CommitLog record no consume queue has a unit for (``undispatched_record``)."""

    offset: int
    commitlog_end: int
    topic: str
    queue_id: int


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
        self.queues: dict[tuple[str, int], ConsumeQueue] = {}
        # Read-only: queues whose files could not be mapped (a file of the wrong size,
        # unreadable), with why. A reader leaves them out rather than fail every read of
        # the store over one queue; a writer must not (it would write beside them).
        self.unreadable_queues: dict[tuple[str, int], str] = {}
        self._ext_readers: dict[tuple[str, int], ConsumeQueueExtReader] = {}
        self._queues_lock = threading.Lock()
        # Queues deleted on purpose (files.deleted_queues), read at open.
        self._deleted_queues: dict[str, int] = {}
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
        self.dispatcher = Dispatcher(
            self.commitlog,
            self._dispatch_run,
            0,
            interval_ms=config.dispatch_interval_ms,
            max_lag_ms=config.max_dispatch_lag_ms,
        )
        self.flusher = Flusher(
            self.commitlog,
            self._flush_queues,
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
        self.running_flags = RunningFlags(0)
        self.retention = RetentionService(
            self.root,
            self.commitlog,
            lambda: list(self.queues.values()),
            self.index,
            config,
            on_disk_full=self._on_disk_full,
        )
        self.live_logics_timestamp = 0
        self.index.on_full_file_flushed = self._on_index_file_full

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
        if not isinstance(path, (str, os.PathLike)):
            raise ConfigError(f"path must be a str or os.PathLike, got {type(path).__name__}")
        root = os.fspath(path)
        if not isinstance(root, str) or not root:
            # "" would be the current directory, whatever it happens to be
            raise ConfigError(f"path must be a non-empty str path, got {root!r}")
        if config is not None and not isinstance(config, StoreConfig):
            raise ConfigError(f"config must be a StoreConfig, got {type(config).__name__}")
        if not isinstance(read_only, bool):
            raise ConfigError(f"read_only must be True or False, got {read_only!r}")
        config = with_dledger(root, (config or StoreConfig()).validate())
        if read_only:
            dirs = config.commit_log_dirs(root)
            lacks = missing_commitlog(root, dirs)
            if lacks is not None:
                raise NotAStoreError(f"{root} is not a store directory ({lacks})")
            orphaned = orphaned_files(root, dirs)
            if orphaned is not None:
                raise NotAStoreError(f"{root}: {orphaned}")
        elif os.path.exists(root) and not os.path.isdir(root):
            raise NotAStoreError(f"{root} exists and is not a directory")
        else:
            blocked = _blocked_by_file(root)
            if blocked is not None:
                raise NotAStoreError(f"{root} cannot be a directory: {blocked} is a file")
            dirs = config.commit_log_dirs(root)
            dirs.require_writable()
            for directory in dirs.all:
                if os.path.exists(directory) and not os.path.isdir(directory):
                    raise ConfigError(f"CommitLog path {directory} is not a directory")
                blocked = _blocked_by_file(directory)
                if blocked is not None:
                    # Else every put would fail, CREATE_MAPEDFILE_FAILED.
                    raise ConfigError(
                        f"CommitLog path {directory} cannot be a directory: {blocked} is a file"
                    )
        config = _adopt_file_sizes(root, config, read_only=read_only)
        store = cls(root, config, read_only=read_only)
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
        return store

    def _load_all_queues(self, writable: bool) -> None:
        """Map every queue directory not mapped yet (read-only openers call it again to
        pick up queues a writer created)."""
        base = os.path.join(self.root, CONSUME_QUEUE_DIR)
        if not os.path.isdir(base):
            return
        unreadable: dict[tuple[str, int], str] = {}
        for topic in sorted(os.listdir(base)):
            topic_dir = os.path.join(base, topic)
            if not os.path.isdir(topic_dir):
                continue
            for qid in sorted(os.listdir(topic_dir)):
                key = (topic, int(qid)) if qid.isdigit() else None
                if key is None or key in self.queues:
                    continue
                queue = self._new_queue(topic, key[1], writable=writable)
                try:
                    queue.load()
                except (CorruptDataError, OSError) as e:
                    if writable:
                        raise
                    # Tried again at each listing: a writer may be making the file.
                    if key not in self.unreadable_queues:
                        log.warning("%s: consume queue %s-%d left out: %s", self.root, *key, e)
                    unreadable[key] = str(e)
                    continue
                self.queues[key] = queue
        self.unreadable_queues = unreadable

    def _new_queue(self, topic: str, queue_id: int, *, writable: bool) -> ConsumeQueue:
        return ConsumeQueue(
            self.root, topic, queue_id, self.config.consume_queue_file_size, writable=writable
        )

    def _load_and_recover(self) -> None:
        marker = os.path.join(self.root, ABORT_FILE)
        abnormal = os.path.exists(marker)
        # Recovery writes queue and index files (and re-dispatches, which may rebuild
        # them from the CommitLog start): a kill in it must leave the marker, or the next
        # open takes half-written queues for a clean shutdown (issue #33).
        if not abnormal:
            _create_marker(marker)
        try:
            self._recover(abnormal)
        except BaseException:
            if not abnormal:
                # A refused open leaves the store as it found it; what recovery wrote
                # before refusing were whole repairs, not a half-done re-dispatch.
                with contextlib.suppress(FileNotFoundError):
                    os.remove(marker)
            raise

    def _recover(self, abnormal: bool) -> None:
        self.commitlog.files.load()
        self._load_all_queues(writable=True)
        self.index.load()
        # Queues deleted on purpose stay deleted (files.deleted_queues); entries whose
        # records retention has all deleted are dropped.
        deleted = prune_deleted(
            self.root, load_deleted_queues(self.root), max(self.commitlog.min_offset(), 0)
        )
        self._deleted_queues = deleted
        report = recover_store(
            commitlog=self.commitlog,
            queues=self.queues,
            index=self.index,
            checkpoint=self.checkpoint.value,
            config=self.config,
            abnormal=abnormal,
            redispatch=self._redispatch_from,
            deleted_queues=deleted,
        )
        # Queue offsets continue from the queues' max offsets (recoverTopicQueueTable).
        for (topic, qid), queue in self.queues.items():
            self.commitlog.topic_queue_table[f"{topic}-{qid}"] = queue.max_offset()
        self.recovery_report = report
        self.checkpoint.reserve()
        if not self.checkpoint.was_valid:
            log.warning("%s: checkpoint file was unreadable; rewritten", self.root)
        if abnormal or report.truncated_bytes or report.queues_truncated:
            log.warning("%s: %s", self.root, report.summary())
        else:
            log.info("%s: %s", self.root, report.summary())

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
        self._load_all_queues(writable=False)
        self.index.load()
        self._refresh_read_only(full=True)

    def _refresh_read_only(
        self, full: bool = False, queue_key: tuple[str, int] | None = None, queues: bool = True
    ) -> None:
        """See what a concurrent writer has appended since the last call: a validated
        prefix only. Incremental: the CommitLog is scanned from the last known end, each
        queue from its last known unit; directories are listed at most every 50 ms.

        Between listings a call that reads one queue refreshes just that queue
        (``queue_key``), and a key or id lookup none (``queues=False``): refreshing every
        queue of a big store on each call cost more than the lookup itself. Every queue is
        refreshed at each listing and whenever the CommitLog minimum moved."""
        now = time.monotonic()
        list_dirs = full or now - self._ro_listed_at >= 0.05
        files = self.commitlog.files
        if list_dirs:
            files.refresh()
            self._ro_listed_at = now
        if not files.files:
            return
        report = RecoveryReport()
        if full or self._ro_end < files.min_offset():
            self._ro_entries = EntryChain()
            end = scan_valid_end(
                self.commitlog,
                max(0, len(files.files) - 3),
                check_crc=self.config.check_crc_on_recover,
                report=report,
                entries=self._ro_entries,
            )
        else:
            end = scan_valid_end(
                self.commitlog,
                0,
                check_crc=self.config.check_crc_on_recover,
                report=report,
                start_offset=self._ro_end,
                entries=self._ro_entries,
            )
        for mapped in files.files:
            if mapped.file_from_offset + files.file_size <= end:
                mapped.wrote_position = files.file_size
            elif mapped.file_from_offset <= end:
                mapped.wrote_position = end - mapped.file_from_offset
            else:
                mapped.wrote_position = 0
        self._ro_end = end
        if full:
            self.recovery_report = report
        if list_dirs:
            self._load_all_queues(writable=False)  # queues created since the last look
        min_offset = self.commitlog.min_offset()
        correct_min = full or min_offset != self._ro_min_offset
        self._ro_min_offset = min_offset

        def record_exists(offset: int) -> bool:
            # A unit whose record retention deleted is expired, not torn: it stays, and
            # correct_min_offset moves the queue's minimum past it.
            return offset < min_offset or self.commitlog.read_record(offset) is not None

        if list_dirs or correct_min or (queues and queue_key is None):
            refreshing = list(self.queues.values())
        elif queue_key is not None and queue_key in self.queues:
            refreshing = [self.queues[queue_key]]
        else:
            refreshing = []
        for queue in refreshing:
            if list_dirs:
                queue.files.refresh()
            grew = queue.refresh_read_only(end, record_exists, full=full)
            if min_offset >= 0 and (correct_min or grew == -1):
                queue.min_logic_offset = max(queue.min_logic_offset, queue.files.min_offset())
                queue.correct_min_offset(min_offset)
        if list_dirs:
            self.index.refresh()
        else:
            for index_file in self.index.files[-1:]:
                index_file.refresh_header()

    def refresh(self) -> None:
        """Read-only store: see now what a writer appended, new queues and files included
        (other calls list directories at most every 50 ms). A writer sees everything."""
        self._ro_listed_at = 0.0  # list the directories now, not in up to 50 ms
        self._check_open()

    _ro_listed_at = 0.0
    _ro_min_offset = -2
    _ro_end = 0
    # A DLedger log: the entry at _ro_end must follow the last one seen (recovery.recover).
    _ro_entries: EntryChain | None = None

    # --- dispatch -----------------------------------------------------------------------

    def _dispatch_run(self, run: DispatchRun) -> None:
        """Queue units and index entries for a run of records (CommitLog order), in bulk:
        each queue's units in one write, the index entries through ``put_keys_bulk``.

        A failure marks the store unwriteable (RocketMQ's WRITE_LOGICS_QUEUE_ERROR /
        WRITE_INDEX_FILE_ERROR) and stops the dispatcher; nothing acknowledged is lost,
        since the CommitLog holds it and recovery re-dispatches.
        """
        records = run.records
        index = self.config.message_index_enable
        try:
            facts = dispatch_facts(
                run.data, records, run.topics, self._delay_levels_ms, index=index
            )
            offsets = records.commit_log_offsets(run.base)
            extra: dict[tuple[str, int], ExtraUnits] = {}
            if self.config.enable_multi_dispatch:
                extra = self._extra_units(run)
            for unit_run in queue_runs(records, offsets, facts.tags_codes):
                topic = run.topics.names[unit_run.topic_id]
                key = (topic, unit_run.queue_id)
                if key in extra or self._deleted_cutoff(*key) is not None:
                    # Units of this queue's own records and those other records name, in
                    # CommitLog order (RocketMQ writes both as it goes, record by record);
                    # or a queue deleted on purpose, whose older records _put_units drops.
                    own = unit_run.row_numbers()
                    units = ExtraUnits(own, records.queue_offset[own])
                    more = extra.pop(key, None)
                    if more is not None:
                        units = merge_units(own, records.queue_offset[own], more)
                    self._put_units(topic, unit_run.queue_id, run, offsets, facts, units)
                    continue
                if not is_queue_dir_name(topic):
                    log.warning(
                        "%s: %d record(s) from CommitLog offset %d name topic %r, which can "
                        "be no queue directory: left out of the queues (run `rocketstore "
                        "check`)",
                        self.root,
                        len(unit_run.row_numbers()),
                        int(offsets[unit_run.row_numbers()[0]]),
                        topic,
                    )
                    continue
                queue = self._queue(topic, unit_run.queue_id, create=True)
                assert queue is not None
                if not queue.append_run(unit_run):
                    rows = unit_run.row_numbers()
                    queue.put_many(
                        offsets[rows],
                        records.size[rows],
                        facts.tags_codes[rows],
                        records.queue_offset[rows],
                    )
            for (name, queue_id), units in extra.items():
                self._put_units(name, queue_id, run, offsets, facts, units)
        except Exception:
            # Any failure (a bug's too): the dispatcher stops, so puts must stop being
            # acknowledged rather than pile up where no queue shows them.
            self.running_flags |= RunningFlags.WRITE_LOGICS_QUEUE_ERROR
            raise
        self.live_logics_timestamp = int(records.store_timestamp[-1])
        crash_point(AFTER_DISPATCH_QUEUE_BEFORE_INDEX)
        if index:
            entries = facts.entries
            try:
                self.index.build_index_hashed(
                    entries["key_hash"],
                    entries["offset"] + run.base,
                    entries["store_timestamp"],
                    last_offset=int(offsets[-1]),
                )
            except Exception:
                self.running_flags |= RunningFlags.WRITE_INDEX_FILE_ERROR
                raise
            self.prefaulter.wake_for_index()

    def _deleted_cutoff(self, topic: str, queue_id: int) -> int | None:
        """For a queue deleted on purpose, the CommitLog offset below which its records
        get no unit; None for any other queue."""
        if not self._deleted_queues:
            return None
        return self._deleted_queues.get(queue_key(topic, queue_id))

    def _extra_units(self, run: DispatchRun) -> dict[tuple[str, int], ExtraUnits]:
        """The units a run's multi-dispatch records add to the queues they name."""
        extra, problems = extra_units(run.data, run.records, enable_lmq=self.config.enable_lmq)
        for problem in problems:
            log.warning("%s: CommitLog offset %d + %s", self.root, run.base, problem)
        return extra

    def _put_units(
        self,
        topic: str,
        queue_id: int,
        run: DispatchRun,
        offsets: npt.NDArray[np.int64],
        facts: DispatchFacts,
        units: ExtraUnits,
    ) -> None:
        """Write units for records ``units.rows`` of ``run`` at ``units.queue_offsets``
        into one queue; the queue's rules drop repeats (a record naming its own queue).
        A queue deleted on purpose gets none for records from before its deletion (a
        re-dispatch from an earlier offset passes them)."""
        if not is_queue_dir_name(topic):
            log.warning(
                "%s: multi-dispatch queue %r can be no queue directory: left out", self.root, topic
            )
            return
        cutoff = self._deleted_cutoff(topic, queue_id)
        if cutoff is not None:
            keep = offsets[units.rows] >= cutoff
            units = ExtraUnits(units.rows[keep], units.queue_offsets[keep])
            if not len(units.rows):
                return
        queue = self._queue(topic, queue_id, create=True)
        assert queue is not None
        rows = units.rows
        queue.put_many(
            offsets[rows], run.records.size[rows], facts.tags_codes[rows], units.queue_offsets
        )

    def _queue(self, topic: str, queue_id: int, *, create: bool = False) -> ConsumeQueue | None:
        key = (topic, queue_id)
        queue = self.queues.get(key)
        if queue is None and create:
            with self._queues_lock:
                queue = self.queues.get(key)
                if queue is None:
                    queue = self._new_queue(topic, queue_id, writable=True)
                    self.queues[key] = queue
        return queue

    def _flush_queues(self, least_pages: int) -> None:
        for queue in list(self.queues.values()):
            queue.flush(least_pages)

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
        if self.read_only:
            self._refresh_read_only(queue_key=queue_key, queues=queues)

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
            store_timestamp = self._checked_put_arguments(store_timestamp, store_host)
        if (
            store_host is None
            and self.config.flush_disk_type == "ASYNC_FLUSH"
            and not any_armed()
            and self.running_flags.writeable
            and not self._wraps(msg)
        ):
            # The common single put in one C call: nothing to wait for after the append.
            done = self.preparer.put_one(self.commitlog, msg, store_timestamp)
            if done is not None:
                return done
        results, end_offset = self._append_one(msg, store_timestamp, store_host, delay)
        return self._acknowledged(results, end_offset)[0]

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
        store_timestamp = self._checked_put_arguments(store_timestamp, store_host)
        results, end_offset = self._append_batch(msgs, store_timestamp, store_host)
        return self._acknowledged(results, end_offset)

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
        ConfigError for a column that is not one value per body."""
        self._check_writable()
        store_timestamp = self._checked_put_arguments(store_timestamp, store_host)
        columns = Columns.of(
            topic,
            bodies,
            queue_ids=queue_ids,
            keys=keys,
            tags=tags,
            properties=properties,
            property_columns=property_columns,
            born_timestamp=born_timestamp,
            born_host=born_host,
        )
        if not self.running_flags.writeable:
            reason = self.running_flags.unwriteable_reason()
            return ColumnsResult(PutStatus.SERVICE_NOT_AVAILABLE, reason=reason)
        if not len(columns):
            return ColumnsResult(PutStatus.PUT_OK)
        # (The torn write a crash test arms is the Python append's: no C encoding then.)
        native_ok = not armed(MID_BATCH_WRITE)
        appends = put_rows(
            self.preparer, self.commitlog, columns, store_host, store_timestamp, native_ok=native_ok
        )
        status = PutStatus.PUT_OK
        if appends.end_offset is not None:
            crash_point(AFTER_APPEND_BEFORE_FLUSH)
            if self.config.flush_disk_type == "SYNC_FLUSH":
                status = self.flusher.flush_sync(appends.end_offset)
        # (A store host that encodes: rows were stored with it. Else prepare refused it.)
        stored_by = (
            self.preparer.host_bytes(store_host or self.config.store_host)
            if appends.stored
            else b""
        )
        return appends.result(status, stored_by)

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
        store_timestamp = self._checked_put_arguments(store_timestamp, store_host)
        single: Future[PutResult] = _running_future()
        results, end_offset = self._append_one(msg, store_timestamp, store_host, delay)
        self._on_acknowledged(results, end_offset, lambda done: single.set_result(done[0]))
        return single

    def submit_batch(
        self,
        msgs: Sequence[Message],
        store_timestamp: int | None = None,
        store_host: str | None = None,
    ) -> Future[list[PutResult]]:
        """``put_batch`` answered through a future, as ``submit``."""
        self._check_submittable()
        store_timestamp = self._checked_put_arguments(store_timestamp, store_host)
        batch: Future[list[PutResult]] = _running_future()
        results, end_offset = self._append_batch(msgs, store_timestamp, store_host)
        self._on_acknowledged(results, end_offset, batch.set_result)
        return batch

    def _checked_put_arguments(self, store_timestamp: object, store_host: object) -> int | None:
        """``store_timestamp`` as an int, after ConfigError for a put's arguments that no
        record can take: a store time that is not an int, is negative, or leaves no room
        for the longest delay level in a Java long (the dispatcher adds them for a delayed
        message's delivery time), and a ``store_host`` that is not a str."""
        if store_host is not None and not isinstance(store_host, str):
            raise ConfigError(
                f"store_host must be a str 'ip:port' or None, got {type(store_host).__name__}"
            )
        if store_timestamp is None:
            return None
        stamp = int_argument("store_timestamp", store_timestamp)
        latest = JAVA_LONG_MAX - max(self._delay_levels_ms)
        if not 0 <= stamp <= latest:
            raise ConfigError(
                f"store_timestamp must be in 0..{latest} (epoch ms; a store time plus the "
                f"longest delay level must fit a Java long), got {stamp}"
            )
        return stamp

    def _append_one(
        self, msg: Message, store_timestamp: int | None, store_host: str | None, delay: bool
    ) -> tuple[list[PutResult], int | None]:
        """Append ``msg`` without waiting for a sync: its result (as a list of one) and
        the CommitLog end it needs durable (None: nothing appended)."""
        if not self.running_flags.writeable:
            reason = self.running_flags.unwriteable_reason()
            return [PutResult(PutStatus.SERVICE_NOT_AVAILABLE, reason=reason)], None
        if self._wraps(msg):
            return self._append_wrapped(msg, store_timestamp, store_host, delay)
        encoded = self._encode((msg,), store_host, in_batch=False)
        if encoded is not None:
            return self._append_encoded(encoded, store_timestamp)
        prepared = self.preparer.prepare(msg, store_host, delay=delay)
        if isinstance(prepared, Refusal):
            return [prepared.result()], None
        return self._append([prepared], store_timestamp)

    def _wraps(self, msg: Message) -> bool:
        """A multi-dispatch message (``enable_multi_dispatch`` on and INNER_MULTI_DISPATCH
        not blank): its record depends on offsets known only under the put lock, so it
        takes ``_append_wrapped``, not the C encoder."""
        return (
            self.config.enable_multi_dispatch
            and isinstance(msg, Message)
            and isinstance(msg.properties, dict)
            # (a value that is no str is refused by prepare on the general path)
            and isinstance(msg.properties.get(INNER_MULTI_DISPATCH), str)
            and is_multi_dispatch(msg.properties)
        )

    def _append_wrapped(
        self, msg: Message, store_timestamp: int | None, store_host: str | None, delay: bool
    ) -> tuple[list[PutResult], int | None]:
        """``_append_one`` for a multi-dispatch message (format.multi_dispatch), after the
        delay rewrite, as RocketMQ wraps it in doAppend."""
        # prepare checks the types too, but the rewrite and the queue names below read
        # the properties first.
        problem = message_problem(msg)
        if problem is not None:
            return [PutResult(PutStatus.MESSAGE_ILLEGAL, reason=problem)], None
        message = self.preparer.rewrite_delay(msg, delay=delay)
        names = java_split(message.properties[INNER_MULTI_DISPATCH])
        unusable = next((n for n in names if not is_queue_dir_name(n)), None)
        if unusable is not None:
            # RocketMQ would take it and fail (or stray outside consumequeue/) at dispatch,
            # leaving the store unwritable: refused before anything is appended.
            reason = f"{INNER_MULTI_DISPATCH} names {unusable!r}, which can be no queue directory"
            return [PutResult(PutStatus.MESSAGE_ILLEGAL, reason=reason)], None
        keys = queue_keys(message.properties, message.queue_id, enable_lmq=self.config.enable_lmq)

        def make(offsets: list[int]) -> PreparedMessage | Refusal:
            wrapped = dataclasses.replace(
                message, properties=wrapped_properties(message.properties, offsets)
            )
            return self.preparer.prepare(wrapped, store_host, delay=False)

        try:
            outcome = self.commitlog.append_wrapped(make, keys, store_timestamp)
        except (OSError, StoreError) as e:
            log.error("append failed: %s", e)
            return [PutResult(PutStatus.CREATE_MAPEDFILE_FAILED, reason=str(e))], None
        if isinstance(outcome, Refusal):
            return [outcome.result()], None
        return self._results([outcome])

    def _append_batch(
        self, msgs: Sequence[Message], store_timestamp: int | None, store_host: str | None
    ) -> tuple[list[PutResult], int | None]:
        """``_append_one`` for ``put_batch`` and ``submit_batch`` (which check that the
        store takes writes)."""
        msgs = _batch_messages(msgs)
        if not msgs:
            return [], None
        if not self.running_flags.writeable:
            reason = self.running_flags.unwriteable_reason()
            status = PutStatus.SERVICE_NOT_AVAILABLE
            return [PutResult(status, reason=reason) for _ in msgs], None
        encoded = self._encode(msgs, store_host, in_batch=True)
        if encoded is not None:
            misfit = self._batch_misfit(encoded.body_bytes, len(encoded.blob))
            if misfit is not None:
                return [misfit.result() for _ in msgs], None
            return self._append_encoded(encoded, store_timestamp)
        prepared: list[PreparedMessage] = []
        for i, msg in enumerate(msgs):
            item = self.preparer.prepare(msg, store_host, in_batch=True)
            if isinstance(item, Refusal):
                refused = PutResult(item.status, reason=f"message {i} of the batch: {item.reason}")
                return [refused for _ in msgs], None
            prepared.append(item)
        body_bytes = sum(len(m.body) for m in msgs)
        misfit = self._batch_misfit(body_bytes, sum(p.length for p in prepared))
        if misfit is not None:
            return [misfit.result() for _ in msgs], None
        return self._append(prepared, store_timestamp)

    def _batch_misfit(self, body_bytes: int, record_bytes: int) -> Refusal | None:
        """Why a batch cannot be put whole, or None: its bodies must be within
        max_message_size and its records, with the 8 bytes of an END_OF_FILE blank, within
        one CommitLog file."""
        if body_bytes > self.config.max_message_size:
            return Refusal(
                PutStatus.MESSAGE_ILLEGAL,
                f"the batch's bodies take {body_bytes} bytes, over max_message_size "
                f"({self.config.max_message_size})",
            )
        file_size = self.config.mapped_file_size_commit_log
        if record_bytes + rec.END_FILE_MIN_BLANK_LENGTH > file_size:
            return Refusal(
                PutStatus.MESSAGE_ILLEGAL,
                f"the batch's records take {record_bytes} bytes, more than a CommitLog file "
                f"of {file_size} bytes holds",
            )
        return None

    def _encode(
        self, msgs: Sequence[Message], store_host: str | None, *, in_batch: bool
    ) -> EncodedBatch | None:
        """The C extension's encoding of ``msgs``, or None for the Python path (also
        taken while a crash test tears batches: that tear lives in the Python append)."""
        if armed(MID_BATCH_WRITE):
            return None
        return self.preparer.encode(msgs, store_host, in_batch=in_batch)

    def _append_encoded(
        self, encoded: EncodedBatch, store_timestamp: int | None
    ) -> tuple[list[PutResult], int | None]:
        """``_append`` for a batch the C extension encoded."""
        try:
            appended = self.commitlog.append_encoded(encoded, store_timestamp)
        except (OSError, StoreError) as e:
            log.error("append failed: %s", e)
            failed = PutResult(PutStatus.CREATE_MAPEDFILE_FAILED, reason=str(e))
            return [failed for _ in range(len(encoded))], None
        if appended is None:
            return [PutResult(PutStatus.UNKNOWN_ERROR) for _ in range(len(encoded))], None
        # The results are made before the wait: with SYNC_FLUSH the disk is already
        # writing the batch (MappedFile.write_batch started it), so this costs nothing.
        return encoded_results(encoded, appended, PutStatus.PUT_OK), appended.end_offset

    def _append(
        self, prepared: list[PreparedMessage], store_timestamp: int | None
    ) -> tuple[list[PutResult], int | None]:
        """Append prepared messages; their results, and the CommitLog end to make durable
        before they are acknowledged (None: nothing appended)."""
        try:
            appended = self.commitlog.append(prepared, store_timestamp)
        except (OSError, StoreError) as e:
            # Creating the next file failed (disk full, I/O error): nothing of this put
            # was written; the store stays usable for a retry once space is back.
            log.error("append failed: %s", e)
            return [
                PutResult(PutStatus.CREATE_MAPEDFILE_FAILED, reason=str(e)) for _ in prepared
            ], None
        return self._results(appended)

    @staticmethod
    def _results(appended: list[Appended]) -> tuple[list[PutResult], int | None]:
        """Put results of appended records, and the CommitLog end to make durable."""
        results = []
        end_offset: int | None = None
        for item in appended:
            if item.status is not AppendStatus.PUT_OK:
                results.append(PutResult(PutStatus.UNKNOWN_ERROR))
                continue
            end_offset = item.commit_log_offset + item.size
            results.append(
                PutResult(
                    PutStatus.PUT_OK,
                    commit_log_offset=item.commit_log_offset,
                    queue_offset=item.queue_offset,
                    msg_id=item.msg_id,
                    store_timestamp=item.store_timestamp,
                    size=item.size,
                )
            )
        return results, end_offset

    def _acknowledged(self, results: list[PutResult], end_offset: int | None) -> list[PutResult]:
        """``results`` once the flush policy allows answering: the crash point between
        append and flush, then, with SYNC_FLUSH, the wait until the CommitLog is durable
        up to ``end_offset`` (None: nothing appended, nothing to wait for)."""
        if end_offset is None:
            return results
        crash_point(AFTER_APPEND_BEFORE_FLUSH)
        if self.config.flush_disk_type != "SYNC_FLUSH":
            return results
        return _with_status(results, self.flusher.flush_sync(end_offset))

    def _on_acknowledged(
        self,
        results: list[PutResult],
        end_offset: int | None,
        answer: Callable[[list[PutResult]], None],
    ) -> None:
        """``_acknowledged`` without blocking: ``answer(results)`` now, or from the group
        commit thread once its sync covered ``end_offset``."""
        if end_offset is None:
            answer(results)
            return
        crash_point(AFTER_APPEND_BEFORE_FLUSH)
        if self.config.flush_disk_type != "SYNC_FLUSH":
            answer(results)
            return
        if not self.group_commit.request(
            end_offset, lambda status: answer(_with_status(results, status))
        ):
            # The store began closing after the append: sync here, as put does.
            answer(_with_status(results, self.flusher.flush_sync(end_offset)))

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
        covered = max((q.max_physic_offset for q in self.queues.values()), default=-1)
        covered = max(covered, dispatched_through_deletions(self.root))
        offset = max(covered, self.commitlog.min_offset())
        end = self.commitlog.max_offset()
        size = self.commitlog.file_size
        for _ in range(probe):
            if offset >= end:
                return None
            found = self.commitlog.read_record(offset)
            if found is None:  # the blank end of a file (or damage): the next file
                offset = (offset // size + 1) * size
                continue
            view = found[1]
            if gets_queue_entry(view.sys_flag):
                return UndispatchedRecord(offset, end, view.topic, view.queue_id)
            offset += view.size
        return None

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
        reader = self._ext_readers.get((topic, queue_id))
        if reader is None:
            reader = ConsumeQueueExtReader(self.root, topic, queue_id)
            self._ext_readers[(topic, queue_id)] = reader
        try:
            return reader.get(address)
        except CorruptDataError as e:
            # As RocketMQ, whose reads of a bad unit fail quietly: callers fall back.
            log.warning("%s-%d: unreadable ConsumeQueueExt unit: %s", topic, queue_id, e)
            return None

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

    def _destroy_queues(
        self, why: Callable[[str, ConsumeQueue, int], str | None], *, remember: bool
    ) -> list[tuple[str, int]]:
        """Delete the queues ``why`` gives a reason for (files, directory, next offset).
        ``remember``: their records are still in the CommitLog, so the deletion is
        recorded first (files.deleted_queues), or the next recovery would rebuild them.

        Puts are held off, and the dispatcher caught up and held, while the queues go: a
        message arriving for one of them is queued after, never into a file that goes."""
        self._check_writable()
        with self.commitlog.put_lock, self.dispatcher.caught_up(), self._queues_lock:
            min_offset = self.commitlog.min_offset()
            chosen = []
            for key in sorted(self.queues):
                reason = why(key[0], self.queues[key], min_offset)
                if reason is not None:
                    chosen.append((key, reason))
            if remember and chosen:
                end = self.commitlog.max_offset()
                self._deleted_queues = record_deleted(self.root, [k for k, _ in chosen], end)
            for key, reason in chosen:
                topic, queue_id = key
                queue = self.queues[key]
                log.info("%s: consume queue %s-%d deleted: %s", self.root, topic, queue_id, reason)
                del self.queues[key]
                self._ext_readers.pop(key, None)
                self.commitlog.topic_queue_table.pop(queue_key(topic, queue_id), None)
                queue.destroy()
        return [key for key, _ in chosen]

    def wait_dispatched(self) -> None:
        """Dispatch everything appended so far in the caller's thread (tests, tools)."""
        self._check_writable()
        self.dispatcher.run_once()

    # --- replication: a slave's CommitLog ---------------------------------------------

    # Where the first record not yet wholly checked starts, when a transfer from the
    # master ended inside it (None: the CommitLog ends at a record boundary).
    _replica_record_start: int | None = None

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
        view = memoryview(data).cast("B")
        commitlog = self.commitlog
        file_size = commitlog.file_size
        with commitlog.put_lock:
            empty = commitlog.files.last is None
            end = commitlog.max_offset()
            if empty and offset % file_size:
                raise ConfigError(
                    f"an empty CommitLog takes replicated bytes from a file boundary "
                    f"(a multiple of {file_size}), not from {offset}"
                )
            if not empty and offset != end:
                raise ConfigError(f"replicated bytes at {offset} do not follow the end {end}")
            if not view:
                return end
            pending = self._replica_record_start
            record_start = offset if empty or pending is None else pending
            pieces: list[tuple[int, memoryview]] = []
            stamp = 0
            at = offset
            while at < offset + len(view):
                file_start = at - at % file_size
                piece = view[at - offset : min(len(view), file_start + file_size - offset)]
                record_start = max(record_start, file_start)
                checked = self._check_replicated(record_start, at, piece, file_start + file_size)
                record_start, stamp = checked[0], checked[1] or stamp
                pieces.append((at, piece))
                at += len(piece)
            for start, piece in pieces:
                mapped = commitlog.files.last_file_for_write(start)
                position = start - mapped.file_from_offset
                if position != mapped.wrote_position:
                    raise CorruptDataError(
                        f"replicated bytes at {start} land at position {position}, the file's "
                        f"data ends at {mapped.wrote_position}",
                        path=mapped.path,
                    )
                mapped.write_at(position, bytes(piece))
                mapped.wrote_position = position + len(piece)
                if stamp:
                    mapped.store_timestamp = stamp
            new_end = offset + len(view)
            # (past new_end after a blank: the rest of its file is filler)
            self._replica_record_start = None if record_start == new_end else record_start
        if self.config.flush_disk_type == "SYNC_FLUSH":
            self.flusher.flush_sync(new_end)
        if commitlog.on_append is not None:
            commitlog.on_append(new_end)
        return new_end

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

    def _check_replicated(
        self, record_start: int, at: int, piece: memoryview, file_end: int
    ) -> tuple[int, int]:
        """``check_replicated`` of the bytes from ``record_start`` (in the CommitLog up to
        ``at``) and ``piece`` after them: where the first record not wholly there starts,
        and the last whole record's store time. A record that the piece still does not
        complete is not read again. Past a blank the rest of the file is filler."""
        if record_start >= file_end:
            return record_start, 0
        if at - record_start >= 8:
            head = self.commitlog.read(record_start, 8)
            if head is not None:
                total = int.from_bytes(head[:4], "big", signed=True)
                magic = int.from_bytes(head[4:], "big", signed=True)
                whole = record_start + total <= at + len(piece)
                if magic in (rec.MESSAGE_MAGIC_V1, rec.MESSAGE_MAGIC_V2) and not whole:
                    return record_start, 0
        before = self.commitlog.read(record_start, at - record_start) if at > record_start else b""
        if before is None:
            raise CorruptDataError(f"CommitLog bytes from {record_start} to {at} are not readable")
        checked = check_replicated(
            bytes(before) + bytes(piece), record_start, file_end - record_start
        )
        next_record = record_start + checked.next_record
        return next_record, checked.store_timestamp

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
            for queue in self.queues.values():
                queue.close()
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


def _create_marker(path: str) -> None:
    """Create the empty ``abort`` file and make its directory entry durable, so that no
    queue or index write can reach the disk ahead of it."""
    with open(path, "wb"):
        pass
    dir_fd = os.open(os.path.dirname(path), os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _adopt_file_sizes(root: str, config: StoreConfig, *, read_only: bool) -> StoreConfig:
    """Take CommitLog and ConsumeQueue sizes from existing files (spec: 'sizes come from
    the files themselves'), the index geometry from an existing index file (which only a
    writer needs to know: it makes the next files)."""
    changes: dict[str, object] = {}
    commitlog_size = detect_file_size(config.commit_log_dirs(root).all)
    if commitlog_size is not None and commitlog_size != config.mapped_file_size_commit_log:
        changes["mapped_file_size_commit_log"] = commitlog_size
    cq_size = _detect_queue_file_size(os.path.join(root, CONSUME_QUEUE_DIR))
    if cq_size is not None and cq_size != config.consume_queue_file_size:
        changes["mapped_file_size_consume_queue"] = cq_size
    configured = config.index_geometry
    try:
        found = newest_geometry(index_dir(root), configured)
    except ValueError as e:
        if not read_only:
            raise ConfigError(str(e)) from e
        found = None  # each file's own is settled as the index loads
    if found is not None and found != configured:
        changes["max_hash_slot_num"], changes["max_index_num"] = found
    return config.replace(**changes) if changes else config


def _detect_queue_file_size(base: str) -> int | None:
    if not os.path.isdir(base):
        return None
    for topic in sorted(os.listdir(base)):
        topic_dir = os.path.join(base, topic)
        if not os.path.isdir(topic_dir):
            continue
        for qid in sorted(os.listdir(topic_dir)):
            try:
                size = detect_file_size(os.path.join(topic_dir, qid))
            except CorruptDataError:
                continue  # files that disagree: that queue's load names the odd one
            # (a file cut short is no queue's size: every other queue would be left out)
            if size and size % CQ_UNIT_SIZE == 0:
                return size
    return None


def _blocked_by_file(path: str) -> str | None:
    """The existing file among ``path``'s parents that keeps it from being made a
    directory, or None."""
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(parent):
        above = os.path.dirname(parent)
        if above == parent:
            return None
        parent = above
    return None if os.path.isdir(parent) else parent


def _queue_arguments(topic: object, queue_id: object) -> None:
    """ConfigError unless ``topic`` is a str and ``queue_id`` an int: ``("T", "0")`` or
    ``(None, 0)`` name no queue and would answer "no message" instead."""
    if not isinstance(topic, str):
        raise ConfigError(f"topic must be a str, got {type(topic).__name__}")
    if type(queue_id) is not int:
        int_argument("queue_id", queue_id)


def _batch_messages(msgs: object) -> Sequence[Message]:
    """A batch as a list or tuple: another iterable is read once here (a generator read by
    a first encoding attempt would leave nothing for the next), and a lone Message, a str
    or None is refused (ConfigError)."""
    if isinstance(msgs, (list, tuple)):
        return msgs
    if isinstance(msgs, (Message, str, dict, *BODY_TYPES)) or not isinstance(msgs, Iterable):
        raise ConfigError(f"a batch must be a list of Messages, got {type(msgs).__name__}")
    return list(msgs)


def _with_status(results: list[PutResult], status: PutStatus) -> list[PutResult]:
    """``results`` with every appended message's status ``status`` (a failed sync)."""
    if status is PutStatus.PUT_OK:
        return results
    return [dataclasses.replace(r, status=status) if r.ok else r for r in results]


def _running_future() -> Future[Any]:
    """A future already running, as a submitted put is: the append happens before it is
    returned, so a caller's cancel (an asyncio task's, through ``wrap_future``) must not
    take it back; ``cancel`` returns False and the answer still arrives."""
    future: Future[Any] = Future()
    future.set_running_or_notify_cancel()
    return future
