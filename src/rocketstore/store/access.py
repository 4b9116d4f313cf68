"""The MessageStore facade's calls for the layers above (broker, cli, spark, check,
rebuild): the CommitLog, queues, index and dispatch without reaching into the parts
(tests/unit/test_store_contract.py keeps them out).

Layer: store (the facade's package; see base.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from rocketstore.commitlog_appends import PreparedMessage
from rocketstore.format.message import Message
from rocketstore.format.record import RecordView
from rocketstore.index import IndexFile
from rocketstore.java_ints import int_argument
from rocketstore.paths import CommitLogDirs
from rocketstore.put_columns import Columns, RowsCheck, check_rows
from rocketstore.put_path import Refusal
from rocketstore.recovery.later_records import first_record_after
from rocketstore.status import PutStatus
from rocketstore.store.base import StoreBase
from rocketstore.store.sinks import DispatchListener
from rocketstore.store.stats import StoreStats
from rocketstore.store.views import QueueView


class StoreAccess(StoreBase):
    """MessageStore's CommitLog, queue, index and dispatch access for upper layers.

    Read as loaded, without a read-only opener's refresh (callers that read a lot, such
    as a queue scan, refresh once with ``refresh`` or a counting call first)."""

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
