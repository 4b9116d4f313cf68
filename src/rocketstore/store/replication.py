"""The MessageStore facade's replication calls: a slave appending what its master sent,
cutting its CommitLog back, and the bytes a master sends.

Layer: store (the facade's package; see base.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Iterator, Sequence

from rocketstore.errors import ConfigError
from rocketstore.java_ints import int_argument
from rocketstore.store.base import StoreBase
from rocketstore.store.replica import ReplicaWindow
from rocketstore.store.truncation import TruncateReport, TruncateStatus, cut_back, keep_cut_bytes

log = logging.getLogger(__name__)


class StoreReplication(StoreBase):
    """MessageStore's calls for a master and a slave."""

    def append_replicated(
        self, offset: int, data: bytes | bytearray | memoryview, *, check_crc: bool = False
    ) -> int:
        """Append CommitLog bytes a master sent, at exactly ``offset``, as they are
        (RocketMQ's appendToCommitLog on a slave: its files stay byte-identical to the
        master's); return the new max CommitLog offset. The dispatcher builds the queues
        and the index from them as from any append.

        ``offset`` must be the max offset, or a file boundary when the CommitLog is empty
        (a new slave starts at one of the master's files): ConfigError otherwise. The
        bytes may end inside a record (the master cuts its transfers anywhere); each
        record is checked once it is whole, by recovery's rules
        (:func:`~rocketstore.format.replicated.check_replicated`: sizes, magic, fields,
        PHYSICALOFFSET, the file's end), and its body CRC too with ``check_crc`` (off by
        default, as a Java 4.9.8 slave, which appends without looking and dispatches with
        checkCRC=false; recovery still checks it with check_crc_on_recover). A
        CorruptDataError leaves the CommitLog as it was, but for the whole files before
        the bad bytes' when they cross a file's end (valid, and appended). With SYNC_FLUSH
        the bytes are durable when this returns."""
        return self.append_replicated_parts(offset, [data], check_crc=check_crc)

    def append_replicated_parts(
        self,
        offset: int,
        parts: Sequence[bytes | bytearray | memoryview],
        *,
        check_crc: bool = False,
    ) -> int:
        """``append_replicated`` of ``parts`` one after another (a slave's transfers, as
        its receive buffer holds them): written with one pwritev, never joined first."""
        offset = int_argument("offset", offset)
        for part in parts:
            if not isinstance(part, (bytes, bytearray, memoryview)):
                raise ConfigError(f"data must be bytes-like, got {type(part).__name__}")
        self._check_writable()
        views = [memoryview(part).cast("B") for part in parts]
        return self._replica.append(offset, views, check_crc=check_crc)

    def replica_window(self) -> ReplicaWindow | None:
        """Where a slave may write its master's next bytes itself, before
        :meth:`take_replicated` checks and appends them: the CommitLog's end, the
        descriptor of the file it lies in (the next file, created, at a file's end), the
        end's position in that file and the room left there (a transfer never crosses a
        file). The bytes go past the file's data, where no reader looks. None while the
        CommitLog is empty (its first file comes with the first bytes:
        :meth:`append_replicated`). A slave's receive writes from its socket buffer with
        no Python between (``_native.receive_round``)."""
        self._check_writable()
        return self._replica.window()

    def take_replicated(self, offset: int, size: int, *, check_crc: bool = False) -> int:
        """``append_replicated`` of the ``size`` bytes the caller wrote at ``offset``
        through :meth:`replica_window` (its file, from its position, within its room):
        checked as ``append_replicated`` checks them, then the CommitLog's; the new max
        CommitLog offset. A CorruptDataError zeroes them again and appends none."""
        offset = int_argument("offset", offset)
        size = int_argument("size", size)
        if size < 0:
            raise ConfigError(f"size must not be negative, got {size}")
        self._check_writable()
        return self._replica.take_written(offset, size, check_crc=check_crc)

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
            self.dispatcher.forget_handed()
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

    @contextlib.contextmanager
    def commitlog_data_view(self, offset: int, max_bytes: int) -> Iterator[memoryview | None]:
        """``commitlog_data`` without its copy: the bytes as a view of the mapping, valid
        inside the block only (the file is held: retention cannot unmap it meanwhile); an
        empty view when nothing is written there yet, None when ``offset`` is below the
        first file. A master sends from it straight to its slaves' sockets."""
        offset = int_argument("offset", offset)
        max_bytes = int_argument("max_bytes", max_bytes)
        self._check_open(queues=False)
        if offset < max(self.commitlog.min_offset(), 0):
            yield None
            return
        with self.commitlog.view_to_file_end(offset, max_bytes) as view:
            yield memoryview(b"") if view is None else view

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
