"""One ConsumeQueue (``consumequeue/<topic>/<queueId>/``): 20-byte units pointing into the
CommitLog, in queue-offset order.

Layer: structures (above files and format). Does not read the CommitLog itself; callers
pass a function when a store time is needed.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from rocketstore.files.mapped_file import MappedFile
from rocketstore.files.mapped_file_queue import MappedFileQueue
from rocketstore.format import native
from rocketstore.format.queue_unit import (
    BLANK_UNIT,
    CQ_UNIT_SIZE,
    UNIT_LAYOUT,
    QueueUnit,
    decode_unit,
    decode_units,
    encode_unit,
    encode_units,
    max_queue_offset,
)
from rocketstore.format.record_scan import QueueRun
from rocketstore.java_ints import fits_java_long
from rocketstore.paths import consume_queue_dir
from rocketstore.status import Boundary

log = logging.getLogger(__name__)


class PutOutcome:
    """Why a unit was or was not written (RocketMQ accepts duplicates silently)."""

    WRITTEN = "written"
    DUPLICATE = "duplicate"
    OUT_OF_ORDER = "out_of_order"
    # A QUEUEOFFSET no queue can reach (format.queue_unit.max_queue_offset).
    IMPOSSIBLE = "impossible"


# Blocks a queue file allocates ahead of its units (MappedFile.reserve_ahead): a full disk
# then fails a dispatch with WRITE_LOGICS_QUEUE_ERROR instead of a SIGBUS on a sparse page,
# and an idle queue holds 32 KiB, not its whole file (5.7 MiB by default).
RESERVE_AHEAD_BYTES = 32 * 1024


class ConsumeQueue:
    def __init__(self, root: str, topic: str, queue_id: int, file_size: int, *, writable: bool):
        self.topic = topic
        self.queue_id = queue_id
        self.file_size = file_size
        # No read-around for new files: their first unit would otherwise zero the whole
        # file's page cache (see MappedFile.advise_no_read_around).
        self.files = MappedFileQueue(
            consume_queue_dir(root, topic, queue_id),
            file_size,
            writable=writable,
            read_around=False,
            reserve_ahead=RESERVE_AHEAD_BYTES,
        )
        # Highest CommitLog end (offset + size) already in this queue; -1 when empty.
        self.max_physic_offset = -1
        # Byte offset of the first live unit (RocketMQ's minLogicOffset).
        self.min_logic_offset = 0

    # --- offsets ------------------------------------------------------------------------

    def min_offset(self) -> int:
        return self.min_logic_offset // CQ_UNIT_SIZE

    def max_offset(self) -> int:
        """The next queue offset to be written."""
        return self.files.max_offset() // CQ_UNIT_SIZE

    # --- writing ------------------------------------------------------------------------

    def put(self, commit_log_offset: int, size: int, tags_code: int, queue_offset: int) -> str:
        """Append one unit following RocketMQ's rules (spec 3.4)."""
        if commit_log_offset + size <= self.max_physic_offset:
            return PutOutcome.DUPLICATE
        if not 0 <= queue_offset <= max_queue_offset(self.file_size):
            log.warning(
                "%s-%d: record at CommitLog offset %d has QUEUEOFFSET %d, which no queue can "
                "reach: left out of the queue (run `rocketstore check`)",
                self.topic,
                self.queue_id,
                commit_log_offset,
                queue_offset,
            )
            return PutOutcome.IMPOSSIBLE
        expect = queue_offset * CQ_UNIT_SIZE
        first_ever = not self.files.files
        mapped = self.files.last_file_for_write(expect)
        if first_ever and queue_offset != 0 and mapped.wrote_position == 0:
            # A queue whose first entry is not offset 0: blank-fill its first file up to it.
            fill_to = expect % self.file_size
            self.min_logic_offset = expect
            self.files.flushed_where = expect
            if fill_to:
                mapped.append(BLANK_UNIT * (fill_to // CQ_UNIT_SIZE))
        if queue_offset != 0:
            current = mapped.file_from_offset + mapped.wrote_position
            if expect < current:
                return PutOutcome.DUPLICATE
            if expect > current:
                # RocketMQ logs "[BUG]logic queue order maybe wrong" and appends anyway.
                log.warning(
                    "%s-%d: logic queue order maybe wrong, expect %d current %d",
                    self.topic,
                    self.queue_id,
                    expect,
                    current,
                )
        mapped.append(encode_unit(commit_log_offset, size, tags_code))
        self.max_physic_offset = commit_log_offset + size
        return PutOutcome.WRITTEN

    def put_many(
        self,
        commit_log_offsets: npt.NDArray[np.int64],
        sizes: npt.NDArray[np.int64],
        tags_codes: npt.NDArray[np.int64],
        queue_offsets: npt.NDArray[np.int64],
    ) -> int:
        """``put`` for a run of units in CommitLog order; the same bytes, in one write per
        file for the usual run (queue offsets that continue the queue one by one). Units
        that need a rule (the first unit of a queue, duplicates, a gap) go through ``put``.
        Returns how many units were written."""
        count = len(commit_log_offsets)
        written = i = 0
        while i < count:
            run = self._continuing_run(commit_log_offsets, sizes, queue_offsets, i)
            if run == 0:
                outcome = self.put(
                    int(commit_log_offsets[i]),
                    int(sizes[i]),
                    int(tags_codes[i]),
                    int(queue_offsets[i]),
                )
                written += outcome == PutOutcome.WRITTEN
                i += 1
                continue
            end = i + run
            mapped = self.files.last_file_for_write()
            mapped.append(encode_units(commit_log_offsets[i:end], sizes[i:end], tags_codes[i:end]))
            self.max_physic_offset = int(commit_log_offsets[end - 1] + sizes[end - 1])
            written += run
            i = end
        return written

    def append_run(self, run: QueueRun) -> bool:
        """``put_many`` for a run whose units are encoded (``queue_runs``), in one write,
        when ``put`` would append them as they come: the queue has a file with room for
        them all, the first is past ``max_physic_offset`` and the queue offsets are the
        write position's, one by one. False (nothing written) otherwise: ``put_many``
        then applies the rules."""
        mapped = self._continuation(run.first_end) if run.consecutive else None
        if mapped is None:
            return False
        current = mapped.file_from_offset + mapped.wrote_position
        if current != run.first_queue_offset * CQ_UNIT_SIZE or len(run.units) > mapped.free_bytes:
            return False
        mapped.append(run.units)
        self.max_physic_offset = run.last_end
        return True

    def _continuation(self, first_end: int) -> MappedFile | None:
        """The file a run appends to as it comes, its first record ending at CommitLog
        offset ``first_end``; None when ``put``'s rules must decide: the queue has no file
        yet (the first unit's rules), or the record is not past ``max_physic_offset``."""
        if not self.files.files or first_end <= self.max_physic_offset:
            return None
        return self.files.last_file_for_write()

    def _continuing_run(
        self,
        commit_log_offsets: npt.NDArray[np.int64],
        sizes: npt.NDArray[np.int64],
        queue_offsets: npt.NDArray[np.int64],
        i: int,
    ) -> int:
        """How many units from ``i`` ``put`` would append as they come: the queue has a
        file, the first unit is past ``max_physic_offset`` (so are the later ones, being in
        CommitLog order), and the queue offsets are the write position's, one by one, within
        the file that has room."""
        mapped = self._continuation(int(commit_log_offsets[i] + sizes[i]))
        if mapped is None:
            return 0
        current = mapped.file_from_offset + mapped.wrote_position
        room = (self.file_size - mapped.wrote_position) // CQ_UNIT_SIZE
        wanted = queue_offsets[i : i + room]
        expected = current // CQ_UNIT_SIZE + np.arange(len(wanted), dtype=np.int64)
        differs = np.flatnonzero(wanted != expected)
        return int(differs[0]) if len(differs) else len(wanted)

    def flush(self, least_pages: int = 0) -> bool:
        return self.files.flush(least_pages)

    # --- reading ------------------------------------------------------------------------

    def unit(self, queue_offset: int) -> QueueUnit | None:
        """The unit at ``queue_offset``, or None outside [min, max)."""
        if queue_offset < self.min_offset() or queue_offset >= self.max_offset():
            return None
        position = queue_offset * CQ_UNIT_SIZE
        mapped = self.files.find(position)
        if mapped is None:
            return None
        local = position - mapped.file_from_offset
        if local + CQ_UNIT_SIZE > mapped.wrote_position:
            return None
        fields = mapped.unpack_at(UNIT_LAYOUT, local)  # no copy: offset by time probes many
        return QueueUnit(*fields) if fields is not None else None

    def units_from(self, queue_offset: int, max_bytes: int | None = None) -> bytes | None:
        """Raw units from ``queue_offset`` to the readable end of the file holding it
        (RocketMQ's getIndexBuffer): None if the offset has no file (or retention is
        deleting it)."""
        position = queue_offset * CQ_UNIT_SIZE
        mapped = self.files.find(position)
        if mapped is None:
            return None
        local = position - mapped.file_from_offset
        end = mapped.wrote_position
        if local >= end:
            return None
        if max_bytes is not None:
            end = min(end, local + max_bytes)
        return mapped.copy_out(local, end - local)

    def next_file_offset(self, queue_offset: int) -> int:
        """First queue offset of the file after the one holding ``queue_offset``."""
        position = queue_offset * CQ_UNIT_SIZE
        return (position - position % self.file_size + self.file_size) // CQ_UNIT_SIZE

    def last_unit(self) -> QueueUnit | None:
        return self.unit(self.max_offset() - 1) if self.max_offset() > 0 else None

    def unit_on_disk(self, queue_offset: int) -> QueueUnit | None:
        """The unit at ``queue_offset`` as its mapped file holds it, past ``max_offset``
        too (a read-only opener's view ends where it last looked; a writer may have put
        more since), or None when no mapped file has its bytes."""
        position = queue_offset * CQ_UNIT_SIZE
        mapped = self.files.find(position)
        if mapped is None:
            return None
        raw = mapped.read(position - mapped.file_from_offset, CQ_UNIT_SIZE)
        return decode_unit(raw) if len(raw) == CQ_UNIT_SIZE else None

    # --- time search ----------------------------------------------------------------------

    def offset_by_time(
        self,
        timestamp_ms: int,
        boundary: Boundary,
        store_time_of: Callable[[int, int], int],
        min_commit_log_offset: int,
        log_files: MappedFileQueue | None = None,
    ) -> int:
        """Queue offset for a time. LOWER: first entry with time >= ts, else the max offset.
        UPPER: last entry with time <= ts, else the min offset.

        ``store_time_of(commit_log_offset, size)`` returns the record's store time or -1.
        Entries whose record lies below the CommitLog minimum are skipped. Times are read
        from the records (never from file mtimes); the search is a binary search over the
        whole queue, which assumes store times grow with queue offset as they do when
        written. With the CommitLog's ``log_files`` the C extension runs the same search
        (the same probes) without a Python call per probe.
        """
        low = self._first_live_offset(min_commit_log_offset)
        high = self.max_offset()
        if low >= high:
            return high if boundary is Boundary.LOWER else self.min_offset()
        if boundary is Boundary.LOWER:  # the first offset with time >= ts
            return self._first_past(low, high, timestamp_ms, False, store_time_of, log_files)
        # The first offset with time > ts, minus one.
        lo = self._first_past(low, high, timestamp_ms, True, store_time_of, log_files)
        return lo - 1 if lo > low else self.min_offset()

    def _first_past(
        self,
        lo: int,
        hi: int,
        timestamp_ms: int,
        strict: bool,
        store_time_of: Callable[[int, int], int],
        log_files: MappedFileQueue | None,
    ) -> int:
        """The first offset in [lo, hi) whose entry's time is >= ``timestamp_ms`` (> when
        ``strict``), or hi, by binary search."""
        if (
            native.time_search is not None
            and log_files is not None
            and fits_java_long(timestamp_ms)
        ):
            found: int | None = native.time_search(
                self.files.files,
                self.file_size,
                lo,
                hi,
                log_files.files,
                log_files.file_size,
                timestamp_ms,
                strict,
            )
            if found is not None:  # (None: a closed file or a hole; Python decides)
                return found

        def time_at(offset: int) -> int:
            unit = self.unit(offset)
            if unit is None or not unit.is_valid:
                return -1
            return store_time_of(unit.commit_log_offset, unit.size)

        while lo < hi:
            mid = (lo + hi) // 2
            stamp = time_at(mid)
            if stamp > timestamp_ms if strict else stamp >= timestamp_ms:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def _first_live_offset(self, min_commit_log_offset: int) -> int:
        lo, hi = self.min_offset(), self.max_offset()

        def live(offset: int) -> bool:
            unit = self.unit(offset)
            return (
                unit is not None
                and unit.is_valid
                and unit.commit_log_offset >= min_commit_log_offset
            )

        if lo < hi and live(lo):
            return lo  # the usual case (nothing below the CommitLog minimum): one read
        while lo < hi:
            mid = (lo + hi) // 2
            if live(mid):
                hi = mid
            else:
                lo = mid + 1
        return lo

    # --- recovery and cleanup -----------------------------------------------------------

    def load(self) -> None:
        self.files.load()

    def recover(self) -> None:
        """Find the end of valid units, starting at the third-last file (spec 3.8)."""
        files = self.files.files
        if not files:
            return
        index = max(0, len(files) - 3)
        process_offset = files[index].file_from_offset
        max_physic = -1
        while index < len(files):
            mapped = files[index]
            units = decode_units(mapped.read(0, self.file_size))
            valid = (units["offset"] >= 0) & (units["size"] > 0)
            bad = (~valid).nonzero()[0]
            count = int(bad[0]) if len(bad) else len(units)
            if count:
                last = units[count - 1]
                max_physic = int(last["offset"]) + int(last["size"])
            process_offset = mapped.file_from_offset + count * CQ_UNIT_SIZE
            if count < len(units) or index == len(files) - 1:
                if count < len(units) and mapped.writable:
                    # Units after the first invalid one are stale: zero them, or a later
                    # append would make them look valid again.
                    mapped.zero_tail(count * CQ_UNIT_SIZE)
                break
            index += 1
        self.files.truncate_dirty_files(process_offset)
        self.files.flushed_where = process_offset
        self.max_physic_offset = max_physic
        first = self.files.first
        if first is not None and self.min_logic_offset < first.file_from_offset:
            self.min_logic_offset = first.file_from_offset

    def truncate_dirty(self, commit_log_end: int) -> None:
        """Drop units whose record starts at or after ``commit_log_end`` (spec 3.9)."""
        while self.files.files:
            mapped = self.files.files[-1]
            units = decode_units(mapped.read(0, mapped.wrote_position))
            if len(units) and int(units[0]["offset"]) >= commit_log_end and units[0]["size"] > 0:
                self.files.delete_last()
                continue
            ok = (units["offset"] >= 0) & (units["size"] > 0) & (units["offset"] < commit_log_end)
            bad = (~ok).nonzero()[0]
            count = int(bad[0]) if len(bad) else len(units)
            if count == 0 and len(self.files.files) > 1:
                # Nothing kept here (a file made just before a crash, its first unit never
                # written): the full file before it may hold units past the end too.
                self.files.delete_last()
                continue
            mapped.wrote_position = count * CQ_UNIT_SIZE
            mapped.flushed_position = min(mapped.flushed_position, mapped.wrote_position)
            if mapped.writable:
                mapped.zero_tail(mapped.wrote_position)  # dropped units must stay dropped
            if count:
                last = units[count - 1]
                self.max_physic_offset = int(last["offset"]) + int(last["size"])
            else:
                self.max_physic_offset = -1
            break
        else:
            self.max_physic_offset = -1

    def refresh_read_only(
        self, commit_log_end: int, record_exists: Callable[[int], bool], *, full: bool
    ) -> int:
        """Read-only openers: extend the readable end over units a writer has added.

        A unit counts once it is valid, its record lies below ``commit_log_end`` and the
        record really sits there (the newest unit may be mid-write). ``full`` rescans from
        the third-last file (on open). Returns the number of new units, or -1 when the
        queue's first file is new (its min offset must be corrected).
        """
        files = self.files.files
        if not files:
            return 0
        first_start = files[0].file_from_offset
        new_first = first_start != self._ro_first_start
        full = full or self._ro_first_start == -1
        self._ro_first_start = first_start
        if full:
            index = max(0, len(files) - 3)
            for mapped in files[:index]:
                mapped.wrote_position = self.file_size
            for mapped in files[index:]:
                mapped.wrote_position = 0
        else:
            index = next(
                (i for i, mapped in enumerate(files) if mapped.wrote_position < self.file_size),
                len(files),
            )
        added = 0
        window = 4096 * CQ_UNIT_SIZE
        while index < len(files):
            mapped = files[index]
            while mapped.wrote_position < self.file_size:
                start = mapped.wrote_position
                probe = decode_unit(mapped.read(start, CQ_UNIT_SIZE))
                if not probe.is_valid or probe.commit_log_offset + probe.size > commit_log_end:
                    return -1 if new_first else added  # nothing new: the common case
                units = decode_units(mapped.read(start, min(window, self.file_size - start)))
                ok = (units["offset"] >= 0) & (units["size"] > 0)
                ok &= (units["offset"] + units["size"]) <= commit_log_end
                bad = (~ok).nonzero()[0]
                count = int(bad[0]) if len(bad) else len(units)
                while count > 0:  # the newest unit may be torn: check its record
                    last = units[count - 1]
                    if last["size"] == 0x7FFFFFFF or record_exists(int(last["offset"])):
                        break
                    count -= 1
                if count:
                    last = units[count - 1]
                    if last["size"] != 0x7FFFFFFF:
                        self.max_physic_offset = int(last["offset"]) + int(last["size"])
                mapped.wrote_position = start + count * CQ_UNIT_SIZE
                added += count
                if count < len(units):
                    return -1 if new_first else added
            index += 1
        return -1 if new_first else added

    _ro_first_start = -1

    def correct_min_offset(self, min_commit_log_offset: int) -> None:
        """Move the min offset to the first unit whose record is still in the CommitLog."""
        first = self.files.first
        if first is None:
            return
        if self.min_logic_offset >= self.files.max_offset():
            return
        last = self.last_unit()
        if last is not None and last.commit_log_offset < min_commit_log_offset:
            self.min_logic_offset = self.files.max_offset()
            return
        units = decode_units(first.read(0, first.wrote_position))
        live = ((units["offset"] >= min_commit_log_offset) & (units["size"] > 0)).nonzero()[0]
        # Blank fill units (0, MAX, 0) at the head of a first file are never live.
        blank = (units["offset"] == 0) & (units["size"] == 0x7FFFFFFF)
        live_units = [int(i) for i in live if not blank[i]]
        if live_units:
            candidate = first.file_from_offset + live_units[0] * CQ_UNIT_SIZE
            self.min_logic_offset = max(self.min_logic_offset, candidate)

    def expired_files(self, min_commit_log_offset: int) -> list[str]:
        """Paths of the leading files (never the last) whose last unit points below the
        CommitLog min (spec 3.10): what ``delete_expired_files`` would delete."""
        paths: list[str] = []
        for mapped in list(self.files.files)[:-1]:
            data = mapped.read_held(self.file_size - CQ_UNIT_SIZE, CQ_UNIT_SIZE)
            if data is None or decode_unit(data).commit_log_offset >= min_commit_log_offset:
                break
            paths.append(mapped.path)
        return paths

    def delete_expired_files(self, min_commit_log_offset: int) -> int:
        """Delete files (never the last) whose last unit points below the CommitLog min,
        then move the min offset to the first unit still in the CommitLog (spec 3.10)."""
        deleted = 0
        for path in self.expired_files(min_commit_log_offset):
            first = self.files.first
            if first is None or first.path != path:
                break
            self.files.delete_first()
            deleted += 1
        self.correct_min_offset(min_commit_log_offset)
        return deleted

    def last_unit_end(self) -> int:
        """RocketMQ's ``getLastOffset``: where the record of the last unit of the newest
        file ends in the CommitLog (offset + size); -1 when that file holds no unit."""
        mapped = self.files.last
        if mapped is None:
            return -1
        fields = mapped.unpack_at(UNIT_LAYOUT, max(mapped.wrote_position - CQ_UNIT_SIZE, 0))
        if fields is None:
            return -1
        offset, size = int(fields[0]), int(fields[1])
        return offset + size if offset >= 0 and size > 0 else -1

    def destroy(self) -> None:
        self.files.destroy()
        self.max_physic_offset = -1
        self.min_logic_offset = 0
        parent = os.path.dirname(self.files.directory)
        with contextlib.suppress(OSError):
            os.rmdir(parent)

    def close(self) -> None:
        self.files.close()
