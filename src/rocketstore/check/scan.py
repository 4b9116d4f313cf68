"""Lock-free, record-by-record reading of a store's CommitLog with the format codecs.

Layer: check (used by check, check --repair, and the CLI's rebuild, dump and export). Reads
the files directly, never through a MessageStore, so it sees exactly what is on disk: it
takes no lock, validates every record (size, magic, field lengths, PHYSICALOFFSET, body
CRC, and the whole-record property CRC of RocketMQ 5.x's enabledAppendPropCRC where a
record has one) and reports what it cannot read as ``ScanIssue`` values instead of raising.
File sizes come from the files, so it works on a copy of any broker's store.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

from rocketstore.files.mapped_file_queue import offset_file_paths
from rocketstore.format import record as rec
from rocketstore.format.commitlog_walk import FileWalk, Verdict
from rocketstore.format.crc import (
    PROPERTY_CRC_LENGTH,
    masked_crc32,
    record_property_crc,
    stored_property_crc,
)
from rocketstore.format.dledger_entry import BODY_OFFSET, EntryHeader, decode_entry_header
from rocketstore.format.record_scan import Stop, TopicTable
from rocketstore.format.record_search import readable_record_after
from rocketstore.paths import CommitLogDirs

_ZEROS = bytes(1 << 20)


@dataclass(frozen=True)
class DataFile:
    """One file named by its 20-digit start offset."""

    path: str
    start: int
    size: int

    @property
    def name(self) -> str:
        return os.path.basename(self.path)

    @property
    def end(self) -> int:
        return self.start + self.size


def offset_files(directory: str | Sequence[str]) -> list[DataFile]:
    """The 20-digit-named files of ``directory`` (or of several, a multi-path CommitLog)
    in offset order (empty if none)."""
    directories = (directory,) if isinstance(directory, str) else directory
    return [
        DataFile(path, start, os.path.getsize(path))
        for start, path in offset_file_paths(directories).items()
    ]


@dataclass(frozen=True)
class ScanIssue:
    """Something wrong in the CommitLog. ``kind``: ``crc`` (a record whose body does not
    match its CRC: readable, but recovery with CRC checks stops there), ``structure``
    (nothing after it in that file can be read) or ``layout`` (file names and sizes)."""

    path: str
    offset: int
    position: int
    reason: str
    kind: str
    # Where ``check --repair`` would cut the CommitLog to drop this issue (None: layout).
    cut_at: int | None = None


@dataclass
class ScannedRecord:
    """A record found by the scan. ``buf`` is the file's mapping: valid only until the
    iteration moves on (copy what you keep: ``rec.to_message_ext`` does)."""

    offset: int
    buf: bytes
    view: rec.RecordView
    crc_ok: bool


def is_zero(buf: bytes, start: int, end: int) -> bool:
    """True when ``buf[start:end]`` holds only zero bytes (compared a megabyte at a time)."""
    position = start
    while position < end:
        step = min(len(_ZEROS), end - position)
        if buf[position : position + step] != _ZEROS[:step]:
            return False
        position += step
    return True


def first_nonzero(buf: bytes, start: int, end: int) -> int | None:
    position = start
    while position < end:
        step = min(len(_ZEROS), end - position)
        chunk = buf[position : position + step]
        if chunk != _ZEROS[:step]:
            return position + (len(chunk) - len(chunk.lstrip(b"\0")))
        position += step
    return None


class CommitLogScan:
    """Walk the CommitLog from its first file (or the file holding ``start``) to the end of
    data or ``end``; ``records()`` yields every readable record, ``issues`` collects the rest.

    After the walk: ``data_end`` is the offset after the last readable record, and
    ``records_after_structure_issue`` tells whether readable data follows the first
    structural issue (if not, that issue is a corrupt *tail*).
    """

    def __init__(
        self,
        root: str,
        *,
        check_crc: bool = True,
        start: int | None = None,
        end: int | None = None,
        on_bytes: Callable[[int], None] | None = None,
        dirs: CommitLogDirs | None = None,
        resume_after_damage: bool = False,
    ):
        """``dirs``: where the CommitLog files are (default ``<root>/commitlog``).
        ``resume_after_damage``: after a structure issue, read on from the next whole,
        valid record of the file (format.record_search) instead of from the next file,
        as a pull reads the records after a damaged one (``check``); ``damaged`` then
        lists each stretch passed over."""
        self.root = root
        self.dirs = dirs or CommitLogDirs.of(root)
        self.files = offset_files(self.dirs.all)
        self.check_crc = check_crc
        self.start = start
        self.end = end
        self.on_bytes = on_bytes
        self.issues: list[ScanIssue] = []
        self.records_seen = 0
        self.data_end = self.files[0].start if self.files else 0
        self.first_structure_issue: ScanIssue | None = None
        self.records_after_structure_issue = False
        self.last_record_offset: int | None = None
        self.newest_stamp = 0  # store time of the last record read
        self._open_end: tuple[DataFile, int] | None = None
        self._last_entry: EntryHeader | None = None  # of a DLedger log, for the chain
        self.last_entry: EntryHeader | None = None  # the last valid entry read
        self.resume_after_damage = resume_after_damage
        # (start, end) CommitLog offsets of the stretches a resumed scan passed over.
        self.damaged: list[tuple[int, int]] = []

    @property
    def file_size(self) -> int:
        return self.files[0].size if self.files else 0

    @property
    def min_offset(self) -> int:
        return self.files[0].start if self.files else 0

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)

    def _issue(
        self, f: DataFile, position: int, reason: str, kind: str, cut_at: int | None = None
    ) -> None:
        if cut_at is None and kind != "layout":
            cut_at = f.start + position
        issue = ScanIssue(f.path, f.start + position, position, reason, kind, cut_at)
        self.issues.append(issue)
        if kind == "structure" and self.first_structure_issue is None:
            self.first_structure_issue = issue

    def _check_layout(self) -> None:
        if not self.files:
            return
        # The file size: the first file's, unless it is empty (a creation cut short).
        size = next((f.size for f in self.files if f.size), 0)
        for previous, current in zip(self.files, self.files[1:], strict=False):
            if current.start != previous.end:
                self._issue(
                    previous,
                    previous.size,
                    f"gap: the next file is {current.name}, expected {previous.end:020d}",
                    "layout",
                )
        for f in self.files:
            if f.size != size:
                self._issue(f, 0, f"file is {f.size} bytes, the others {size}", "layout")
            elif size and f.start % size:
                self._issue(
                    f, 0, f"start offset is not a multiple of the file size {size}", "layout"
                )

    def records(self) -> Iterator[ScannedRecord]:
        self._check_layout()
        for f in self.files:
            if self.end is not None and f.start >= self.end:
                break
            if self.start is not None and f.end <= self.start:
                self._progress(f.size)
                continue
            if f.size == 0:
                self._issue(f, 0, "empty file", "layout")
                continue
            yield from self._scan_file(f)

    def _progress(self, amount: int) -> None:
        if self.on_bytes is not None and amount > 0:
            self.on_bytes(amount)

    def _scan_file(self, f: DataFile) -> Iterator[ScannedRecord]:
        with open(f.path, "rb") as handle:
            mapping = mmap.mmap(handle.fileno(), f.size, access=mmap.ACCESS_READ)
        try:
            # mmap reads like bytes (slicing copies), so no buffer export outlives the map.
            if self.dirs.holds_entries(f.path):
                yield from self._scan_entries(f, cast(bytes, mapping))
            else:
                yield from self._scan_buffer(f, cast(bytes, mapping))
        finally:
            mapping.close()

    def _scan_buffer(self, f: DataFile, buf: bytes) -> Iterator[ScannedRecord]:
        """The records of a plain file, walked by the CommitLog walker (format.commitlog_walk,
        whose verdicts recovery and the rebuild share): where it finds damage is a
        structure issue with its reason; zeros end the data (``_end_of_data``)."""
        size = f.size
        limit = size if self.end is None else max(0, min(size, self.end - f.start))
        position = reported = 0
        again = -1  # where the walk last stopped and was walked again
        settled = -1  # ... and again after bytes past it were seen
        view = memoryview(cast(Any, buf))  # the mapping, for the walker's bulk decode
        try:
            while True:
                walk = FileWalk(view, f.start, position, size, topics=TopicTable(), limit=limit)
                runs = iter(walk)
                try:
                    for run in runs:
                        for at, total in zip(run.position.tolist(), run.size.tolist(), strict=True):
                            yield from self._record(f, buf, at)
                            if at + total - reported >= 1 << 20:
                                self._progress(at + total - reported)
                                reported = at + total
                finally:
                    runs.close()  # its arrays over the mapping go before the view does
                verdict = walk.verdict
                if verdict.stop not in (Stop.END_OF_DATA, Stop.CORRUPT):
                    break
                if verdict.position != again:
                    # Walked once more from there before it is judged: a writer may have
                    # appended (or finished a record) while the records before were read.
                    position = again = verdict.position
                    continue
                zeros_end = min(verdict.position + 8, size)
                garbage = (
                    first_nonzero(buf, zeros_end, size)
                    if verdict.stop == Stop.END_OF_DATA
                    else None
                )
                if verdict.position != settled and (
                    garbage is not None or self._whole_record_after(f, buf, verdict)
                ):
                    # Bytes past the stop: a writer appends in order, so the bytes at the
                    # stop were done before those, and one more walk reads them whole (a
                    # record still being copied at both walks is no damage).
                    position = again = settled = verdict.position
                    continue
                issues = len(self.issues)
                if verdict.stop == Stop.END_OF_DATA:
                    self._end_of_data(f, verdict.position, garbage)
                else:
                    self._issue(f, verdict.position, verdict.reason, "structure")
                self._note_records_after(f, buf, verdict.position)
                # Zeros end the data unless bytes follow them (then an issue, as damage).
                resumed = (
                    self._resume(f, buf, verdict.position) if len(self.issues) > issues else None
                )
                if resumed is None:
                    break
                position = resumed
        finally:
            with contextlib.suppress(BufferError):  # a view outlived the scan: GC frees it
                view.release()
        self._progress(size - reported)

    def _record(self, f: DataFile, buf: bytes, position: int) -> Iterator[ScannedRecord]:
        """The record the walker found valid at ``position``: counted, its CRCs checked,
        yielded when it is at or past ``start``."""
        offset = f.start + position
        found = rec.read_record(buf, position)
        assert isinstance(found, rec.RecordView)
        wanted = self.start is None or offset >= self.start
        crc_ok = self._crcs_ok(f, buf, position, found) if wanted else True
        self._saw_record(offset)
        self.newest_stamp = found.store_timestamp
        if wanted:
            yield ScannedRecord(offset, buf, found, crc_ok)
        self.data_end = offset + found.size  # in a DLedger log, its entry's end too

    def _resume(self, f: DataFile, buf: bytes, position: int) -> int | None:
        """Where a resumed scan reads on after the damage at ``position`` of ``f`` (the
        next whole, valid record of the file, recorded in ``damaged``), or None."""
        if not self.resume_after_damage:
            return None
        following = readable_record_after(buf, position, f.size, f.start, self.newest_stamp)
        if following is None:
            return None
        self.damaged.append((f.start + position, f.start + following))
        return following

    def damaged_stretch(self, offset: int) -> tuple[int, int] | None:
        """The stretch a resumed scan passed over that holds ``offset``, or None."""
        for start, end in self.damaged:
            if start <= offset < end:
                return start, end
        return None

    def _crcs_ok(self, f: DataFile, buf: bytes, position: int, found: rec.RecordView) -> bool:
        """Whether the record's body CRC and property CRC (if it has one) match (an issue
        for each that does not); True when CRCs are not checked."""
        if not self.check_crc:
            return True
        if found.body_length > 0 and found.body_crc != 0:
            body = buf[found.body_position : found.body_position + found.body_length]
            actual = masked_crc32(body)
            if actual != found.body_crc:
                self._issue(
                    f,
                    position,
                    f"body CRC mismatch: stored {found.body_crc}, computed {actual}",
                    "crc",
                )
                return False
        return self._check_property_crc(f, buf, position, position + found.size)

    def _scan_entries(self, f: DataFile, buf: bytes) -> Iterator[ScannedRecord]:
        """``_scan_buffer`` for a file of a DLedger log: the records are the bodies of the
        entries (the walker's framed mode), each filling its body. An entry that is not
        valid, or whose body is no such record, is a structure issue at the entry (nothing
        after it in the file is read); data_end is an entry boundary."""
        view = memoryview(cast(Any, buf))
        walk = FileWalk(
            view, f.start, 0, f.size, topics=TopicTable(), framed=True,
            previous_entry=self._last_entry,
        )  # fmt: skip
        runs = iter(walk)
        try:
            for run in runs:
                for at in run.position.tolist():
                    if self.end is not None and f.start + at >= self.end:
                        return
                    yield from self._record(f, buf, at)
                    self._last_entry = self.last_entry = decode_entry_header(buf, at - BODY_OFFSET)
        finally:
            runs.close()
            with contextlib.suppress(BufferError):
                view.release()
            self._progress(f.size)
        verdict = walk.verdict
        if verdict.stop == Stop.END_OF_DATA:
            self._end_of_data(f, verdict.position, first_nonzero(buf, verdict.position, f.size))
        elif verdict.stop == Stop.CORRUPT:
            self._issue(f, verdict.position, verdict.reason, "structure")
            # Later files are read on, as in a plain log: their entries follow what is lost.
            self._last_entry = None
            # A record whose PHYSICALOFFSET is its place: a body of a later entry will do.
            self._note_records_after(f, buf, verdict.position)

    def _check_property_crc(self, f: DataFile, buf: bytes, position: int, after: int) -> bool:
        """False (and an issue) when the record ends with a property CRC that its bytes do
        not match: a flipped byte in a header or the properties, which the body CRC
        misses. RocketMQ 5.x checks it on recovery only with forceVerifyPropCRC."""
        # The 20-byte tail first: most stores have none, and the record is not copied.
        stored = stored_property_crc(buf[max(position, after - PROPERTY_CRC_LENGTH) : after])
        if stored is None:
            return True
        actual = record_property_crc(buf[position:after])
        if actual == stored:
            return True
        self._issue(
            f, position, f"property CRC mismatch: stored {stored}, computed {actual}", "crc"
        )
        return False

    def _saw_record(self, offset: int) -> None:
        self.records_seen += 1
        self.last_record_offset = offset
        if self.first_structure_issue is not None:
            self.records_after_structure_issue = True
        if self._open_end is not None:
            f, position = self._open_end
            self._open_end = None
            self._issue(
                f,
                position,
                "data stops here without an END_OF_FILE blank, but later files hold records",
                "structure",
            )

    def _note_records_after(self, f: DataFile, buf: bytes, position: int) -> None:
        """After a structure issue at ``position``: whether a whole, valid record follows
        in the rest of the file (format.record_search), so that repair does not cut it
        without --force. Later files are read on anyway."""
        if self.records_after_structure_issue or self.first_structure_issue is None:
            return
        if readable_record_after(buf, position, f.size, f.start, self.newest_stamp) is not None:
            self.records_after_structure_issue = True

    def _whole_record_after(self, f: DataFile, buf: bytes, verdict: Verdict) -> bool:
        """Whether a whole, valid record follows the damage the walk stopped at."""
        if verdict.stop != Stop.CORRUPT:
            return False
        found = readable_record_after(buf, verdict.position, f.size, f.start, self.newest_stamp)
        return found is not None

    def _end_of_data(self, f: DataFile, position: int, garbage: int | None) -> None:
        """The data of ``f`` ends at ``position``: fine if the rest of the file is zeros
        (``garbage``, the first byte that is not, is None) and no later file holds records;
        bytes after it are a structure issue, cut at ``position``."""
        if garbage is None:
            self._open_end = (f, position)  # fine if no later file holds records
            return
        self._issue(
            f,
            garbage,
            f"non-zero bytes after the end of data (which is at offset {f.start + position})",
            "structure",
            cut_at=f.start + position,
        )
