"""The CommitLog walker: one file's valid records, in runs, and the verdict on where its
valid data ends and why.

Layer: format. Pure over a buffer holding one CommitLog file (an mmap, or the readable
head of one); no files are opened here. Every reader that decides where valid data ends
walks through :class:`FileWalk`: recovery (and a read-only store's refresh, which is
recovery's scan), the rebuild's scan passes and the dispatcher, so each stops at the
same position for the same reason (tests/property/test_commitlog_walk.py). The bulk
decoding is :mod:`rocketstore.format.record_scan`'s (and its C twin's); a DLedger log's
entries are :mod:`rocketstore.format.entry_scan`'s.

The rules, RocketMQ's ``checkMessageAndReturnSize`` plus rocketstore's fixes:

- a record is valid when its magic, sizes and field lengths agree, its PHYSICALOFFSET is
  its own offset (RocketMQ #10017) and it leaves 0 or at least 8 bytes before the file's
  end; with ``check_crc`` its body CRC matches too (a stored 0 passes, #9121);
- an END_OF_FILE blank whose length is the rest of the file finishes the file, as do
  records that fill it exactly; a blank of another length is damage;
- eight zero bytes where a record would start end the data (the unwritten rest of a
  preallocated file, or a hole);
- a header whose record runs past the bytes the caller can read, but not past its file,
  is a write in progress (only when the caller's buffer stops short of the file's end);
- anything else is damage, with the reason :func:`record_scan.check_record` gives; an
  illegal magic ends the walk instead of looping (#289);
- in a DLedger log each entry must follow the one before (index + 1, term no lower) and
  hold exactly one record; a stop there names the entry, and stops fall on entry
  boundaries so a later walk can go on from them.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Generator
from dataclasses import dataclass

import numpy as np

from rocketstore.format import native
from rocketstore.format import record as rec
from rocketstore.format.crc import CRC_MASK
from rocketstore.format.dledger_entry import END_OF_DATA, EntryHeader
from rocketstore.format.entry_scan import cut_run, entry_records
from rocketstore.format.record_scan import (
    CorruptRegion,
    NextData,
    RangeCorruptError,
    RangeScan,
    Records,
    Stop,
    TopicTable,
    check_record,
    decode_run,
    find_record_start,
    walk_start_array,
)

_HEAD8 = struct.Struct(">ii")  # TOTALSIZE, MAGICCODE

# Bytes of records walked per step: bounds the array of record starts (a 1 GiB file of
# small records would otherwise make one of millions).
WALK_WINDOW_BYTES = 32 * 1024 * 1024

# The reason of an END_OF_DATA verdict (the words recovery has always reported).
END_OF_DATA_REASON = END_OF_DATA


@dataclass(frozen=True, slots=True)
class Verdict:
    """Where a walk ended (a position in the file) and why.

    ``stop`` is a :class:`~rocketstore.format.record_scan.Stop`: BOUNDARY (the next record
    starts at or past the walk's limit, or the file's end), BLANK (a correct END_OF_FILE
    blank there: the file is finished), END_OF_DATA (zeros), INCOMPLETE (a record the
    buffer holds only the start of) or CORRUPT (damage; ``reason`` says what)."""

    position: int
    stop: str
    reason: str = ""

    @property
    def file_finished(self) -> bool:
        """The file's data goes on in the next file (a blank, or the walk reached the
        limit, which recovery sets at the file's end)."""
        return self.stop in (Stop.BLANK, Stop.BOUNDARY)

    @property
    def damaged(self) -> bool:
        return self.stop == Stop.CORRUPT


class FileWalk:
    """Walk one file from ``position`` (a record start, or in a DLedger log an entry
    boundary): iterate for the runs of valid records (:class:`Records`, positions within
    the file), then read ``verdict``.

    ``buf`` holds the file from position 0 up to ``readable`` bytes (default: the whole
    ``file_size``); ``base`` is the file's CommitLog offset. Records starting at or past
    ``limit`` (default ``readable``) are not walked. ``framed``: the file is a DLedger
    log's (``previous_entry`` the entry before ``position``, if known; ``last_entry``
    is the last one accepted afterwards). ``check_crc`` also checks each body's CRC.
    Topics are interned into ``topics``."""

    def __init__(
        self,
        buf: memoryview,
        base: int,
        position: int,
        file_size: int,
        *,
        topics: TopicTable,
        framed: bool = False,
        previous_entry: EntryHeader | None = None,
        limit: int | None = None,
        readable: int | None = None,
        check_crc: bool = False,
        window_bytes: int = WALK_WINDOW_BYTES,
    ) -> None:
        self.buf = buf
        self.base = base
        self.start = position
        self.file_size = file_size
        self.readable = file_size if readable is None else min(readable, file_size)
        self.limit = self.readable if limit is None else min(limit, self.readable)
        self.topics = topics
        self.framed = framed
        self.last_entry = previous_entry
        self.check_crc = check_crc
        self.window_bytes = max(1, window_bytes)
        self._verdict: Verdict | None = None

    @property
    def verdict(self) -> Verdict:
        """Where and why the walk ended; only once the iteration is over."""
        if self._verdict is None:
            raise RuntimeError("the walk's verdict is known once its records are read")
        return self._verdict

    def __iter__(self) -> Generator[Records, None, None]:
        return self._framed() if self.framed else self._plain()

    def run(self) -> tuple[Records, Verdict]:
        """Every valid record of the walk in one run, and the verdict."""
        records = Records.concat(list(self))
        return records, self.verdict

    def _plain(self) -> Generator[Records, None, None]:
        buf, base, size, readable = self.buf, self.base, self.file_size, self.readable
        position = self.start
        if (
            position < self.limit
            and position + 8 <= readable
            and not any(buf[position : position + 8])
        ):
            # Nothing written here: the usual answer when a read-only store looks for what
            # a writer appended, which it does before every call; no bulk machinery.
            self._verdict = Verdict(position, Stop.END_OF_DATA, END_OF_DATA_REASON)
            return
        raw = np.frombuffer(buf, dtype=np.uint8)
        while position < self.limit:
            window_end = min(self.limit, position + self.window_bytes)
            starts, stop_at, why = walk_start_array(buf, position, window_end, readable)
            records, valid = decode_run(buf, raw, base, starts, size, self.topics)
            reason = ""
            if self.check_crc and len(records):
                bad = first_crc_mismatch(buf, records)
                if bad is not None:
                    valid, reason = bad
                    records = records.take(valid)
            if len(records):
                yield records
            if valid < len(starts):
                bad_at = int(starts[valid])
                reason = reason or check_record(buf, base, bad_at, size) or "invalid record"
                self._verdict = Verdict(bad_at, Stop.CORRUPT, reason)
                return
            if why == Stop.BOUNDARY:
                position = stop_at
                continue
            self._verdict = self._stopped(stop_at, why)
            return
        self._verdict = Verdict(position, Stop.BOUNDARY)

    def _stopped(self, at: int, why: str) -> Verdict:
        """The verdict where the header walk stopped short of the limit (``why``)."""
        buf, size = self.buf, self.file_size
        if why == Stop.BLANK:
            remaining = _HEAD8.unpack_from(buf, at)[0]
            if remaining != size - at:
                return Verdict(at, Stop.CORRUPT, f"blank record with wrong length {remaining}")
            return Verdict(at, Stop.BLANK)
        if why != Stop.END_OF_DATA and self._write_in_progress(at):
            return Verdict(at, Stop.INCOMPLETE, "record continues past the readable bytes")
        if why == Stop.END_OF_DATA or not any(buf[at : at + 8]):
            return Verdict(at, Stop.END_OF_DATA, END_OF_DATA_REASON)
        reason = check_record(buf, self.base, at, size) or "invalid record header"
        return Verdict(at, Stop.CORRUPT, reason)

    def _write_in_progress(self, at: int) -> bool:
        """A header (or the start of one) whose record continues past the readable bytes,
        within the file: the rest is still being written, or in the caller's next chunk."""
        if self.readable >= self.file_size:
            return False
        if at + 8 > self.readable:
            return at + 8 <= self.file_size
        total, magic = _HEAD8.unpack_from(self.buf, at)
        return (
            magic in (rec.MESSAGE_MAGIC_V1, rec.MESSAGE_MAGIC_V2)
            and total >= rec.FIXED_OVERHEAD_V4
            and at + total <= self.file_size
        )

    def _framed(self) -> Generator[Records, None, None]:
        buf, base, size = self.buf, self.base, self.file_size
        run = entry_records(buf, base, self.start, size, self.topics, self.last_entry)
        if self.check_crc and len(run.records):
            bad = first_crc_mismatch(buf, run.records)
            if bad is not None:
                run = cut_run(run, base, *bad)
        if run.entries:
            self.last_entry = run.entries[-1]
        if len(run.records):
            yield run.records
        if run.stop_reason is None:
            finished = Stop.BLANK if run.stop_position < size else Stop.BOUNDARY
            self._verdict = Verdict(run.stop_position, finished)
        elif run.stop_reason == END_OF_DATA:
            self._verdict = Verdict(run.stop_position, Stop.END_OF_DATA, END_OF_DATA_REASON)
        else:
            self._verdict = Verdict(run.stop_position, Stop.CORRUPT, run.stop_reason)


def first_crc_mismatch(buf: memoryview, records: Records) -> tuple[int, str] | None:
    """The first record whose body does not match its stored CRC (0 means "not set" and
    passes, RocketMQ #9121), with the reason; None if all match."""
    if native.crc_mismatch is not None:
        found = native.crc_mismatch(
            buf,
            np.ascontiguousarray(records.body_position),
            np.ascontiguousarray(records.body_length),
            np.ascontiguousarray(records.body_crc),
        )
        if found is None:
            return None
        row, computed = found
        stored = int(records.body_crc[row])
        return row, f"body CRC mismatch: stored {stored}, computed {computed}"
    checked = (records.body_crc != 0) & (records.body_length > 0)
    rows = np.flatnonzero(checked) if not checked.all() else np.arange(len(records))
    starts = records.body_position[rows]
    ends = starts + records.body_length[rows]
    # One C call per body over a slice of the mapping (no copy), no Python frame between.
    bodies = map(buf.__getitem__, map(slice, starts.tolist(), ends.tolist()))
    actual = np.fromiter(map(zlib.crc32, bodies), dtype=np.int64, count=len(rows)) & CRC_MASK
    bad = np.flatnonzero(actual != records.body_crc[rows])
    if not len(bad):
        return None
    k = int(bad[0])
    stored = int(records.body_crc[rows[k]])
    return int(rows[k]), f"body CRC mismatch: stored {stored}, computed {int(actual[k])}"


def scan_range(
    buf: memoryview,
    base: int,
    start: int,
    end: int,
    file_size: int,
    *,
    skip_corrupt: bool,
    topics: TopicTable,
    next_data: NextData | None = None,
) -> RangeScan:
    """Every valid record starting in [start, end) of one file (``buf`` holds the file,
    ``base`` is its CommitLog offset), walked from the first record start found in the
    range (:func:`record_scan.find_record_start`). Damage raises RangeCorruptError, or with
    ``skip_corrupt`` is stepped over to the next valid record and listed (the rebuild's
    ranges)."""
    if start == 0:
        if file_size >= 8 and not any(buf[0:8]):
            # A file with no data (one created ahead of need): nothing starts here.
            return RangeScan(Records.concat([]), None, Stop.END_OF_DATA, 0)
        first: int | None = 0
    else:
        first = find_record_start(buf, base, start, end, file_size, next_data)
    if first is None:
        return RangeScan(Records.concat([]), None, Stop.BOUNDARY, end)
    parts: list[Records] = []
    corrupt: list[CorruptRegion] = []
    position = first
    while True:
        walk = FileWalk(buf, base, position, file_size, topics=topics, limit=end)
        parts.extend(walk)
        verdict = walk.verdict
        if verdict.stop != Stop.CORRUPT:
            return RangeScan(
                Records.concat(parts), first, verdict.stop, verdict.position, "", corrupt
            )
        bad_at, reason = verdict.position, verdict.reason
        if not skip_corrupt:
            raise RangeCorruptError(reason, position=base + bad_at)
        resume = find_record_start(buf, base, bad_at + 1, end, file_size, next_data)
        if resume is None:
            return RangeScan(Records.concat(parts), first, Stop.CORRUPT, bad_at, reason, corrupt)
        corrupt.append(CorruptRegion(base + bad_at, resume - bad_at, reason))
        position = resume


def scan_entry_file(buf: memoryview, base: int, file_size: int, topics: TopicTable) -> RangeScan:
    """A whole DLedger log file as one rebuild range (:func:`scan_range`'s answer: its
    first and stop positions are entry boundaries, which is what the ranges' join
    compares). An invalid entry or record ends the file's data there (Stop.CORRUPT with
    the reason): entries cannot be found past damage without the chain."""
    if file_size >= 8 and not any(buf[0:8]):
        return RangeScan(Records.concat([]), None, Stop.END_OF_DATA, 0)
    records, verdict = FileWalk(buf, base, 0, file_size, topics=topics, framed=True).run()
    reason = verdict.reason if verdict.stop == Stop.CORRUPT else ""
    return RangeScan(records, 0, verdict.stop, verdict.position, reason)
