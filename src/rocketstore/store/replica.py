"""A slave's CommitLog: bytes a master sent appended as they are, each record checked once
it is whole.

Layer: store (the facade's package). Writes only the CommitLog (the dispatcher builds
queues and index from it as from any append); the facade checks the arguments and that
the store takes writes first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from rocketstore.commitlog import CommitLog
from rocketstore.config import StoreConfig
from rocketstore.errors import ConfigError, CorruptDataError
from rocketstore.files.mapped_file import MappedFile
from rocketstore.format.record_scan import Records, TopicTable
from rocketstore.format.replicated import check_replicated_records
from rocketstore.services.flusher import Flusher


class ReplicaWindow(NamedTuple):
    """Where a slave writes its master's next bytes itself (``MessageStore.replica_window``):
    the CommitLog's end ``offset``, the descriptor ``fd`` of the file it lies in, its
    ``position`` there and the ``room`` left in the file."""

    offset: int
    fd: int
    position: int
    room: int


class ReplicaLog:
    """``MessageStore.append_replicated``'s work, with what it remembers between calls.

    The bytes go in with pwrite (``MappedFile.write_through_parts``: the master's
    transfers as they lie in the slave's receive buffer, one copy into the page cache),
    past the file's write position, and are checked there (``check_replicated`` over the
    mapping, from the first record not yet wholly checked): only then does the write
    position move. Bytes that fail are zeroed again before the error is raised, so no
    reader in this process ever sees them and recovery after a crash in between meets
    the same damage. Through the mapping, the first touch of a page zeroes it (faulted
    by the writer or ahead of it by the prefaulter) before the copy: twice the CPU per
    byte (0.22-0.29 against 0.50-0.57 s a GiB, measured). ``on_first_append`` (once)
    tells the prefaulter to stop faulting the CommitLog's pages in. ``on_checked`` gets
    each check's whole records (their first CommitLog offset, the records, topic ids of
    a table this log keeps, the CommitLog's end when the check's bytes ended inside a
    record, else -1), once they are appended: the dispatcher's, so it does not decode
    them again."""

    def __init__(
        self,
        commitlog: CommitLog,
        flusher: Flusher,
        config: Callable[[], StoreConfig],
        on_first_append: Callable[[], None] | None = None,
        on_checked: Callable[[int, Records, TopicTable, int], None] | None = None,
    ) -> None:
        self.commitlog = commitlog
        self.flusher = flusher
        self.config = config
        self._on_first_append = on_first_append
        self.on_checked = on_checked
        # The checks' topics (used under the put lock only), for ``on_checked``.
        self.topics = TopicTable()
        # Where the first record not yet wholly checked starts, when a transfer from the
        # master ended inside it (None: the CommitLog ends at a record boundary).
        self.record_start: int | None = None

    def append(self, offset: int, parts: Sequence[memoryview], *, check_crc: bool) -> int:
        """Append ``parts``, one after another, at ``offset``
        (``MessageStore.append_replicated_parts``); the new max CommitLog offset."""
        commitlog = self.commitlog
        file_size = commitlog.file_size
        size = sum(len(part) for part in parts)
        with commitlog.put_lock:
            record_start = self._first_record(offset)
            if not size:
                return commitlog.max_offset()
            left = list(parts)
            at = offset
            refused: CorruptDataError | None = None
            try:
                while left:
                    file_start = at - at % file_size
                    piece, left = _cut(left, file_start + file_size - at)
                    record_start = self._append_piece(
                        at, piece, max(record_start, file_start), check_crc
                    )
                    at += sum(len(p) for p in piece)
                    # (past ``at`` after a blank: the rest of its file is filler)
                    self.record_start = None if record_start == at else record_start
            except CorruptDataError as e:
                refused = e  # the whole files before the bad one stay appended
        return self._appended(offset, at, refused)

    def window(self) -> ReplicaWindow | None:
        """``MessageStore.replica_window``: where the next replicated bytes go; None
        while the CommitLog is empty."""
        commitlog = self.commitlog
        with commitlog.put_lock:
            if commitlog.files.last is None:
                return None
            at = commitlog.max_offset()
            mapped = self._file_at_end(at)
            position = at - mapped.file_from_offset
            room = mapped.file_size - position
            return ReplicaWindow(at, mapped.write_descriptor(position, room), position, room)

    def take_written(self, offset: int, size: int, *, check_crc: bool) -> int:
        """``MessageStore.take_replicated``: the ``size`` bytes a caller wrote at
        ``offset`` into the window's file, checked and appended; the new end."""
        commitlog = self.commitlog
        with commitlog.put_lock:
            record_start = self._first_record(offset)
            if not size:
                return commitlog.max_offset()
            mapped = self._file_at_end(offset)
            base = mapped.file_from_offset
            position = offset - base
            if position + size > mapped.file_size:
                raise ConfigError(
                    f"{size} replicated bytes at {offset} run past their file's end "
                    f"{base + mapped.file_size}"
                )
            at = offset
            refused: CorruptDataError | None = None
            try:
                record_start = self._take_piece(
                    mapped, position, position + size, max(record_start, base), check_crc
                )
                at += size
                self.record_start = None if record_start == at else record_start
            except CorruptDataError as e:
                refused = e
        return self._appended(offset, at, refused)

    def _first_record(self, offset: int) -> int:
        """The checks ``append`` and ``take_written`` make of ``offset`` (under the put
        lock); where the first record not yet wholly checked starts."""
        commitlog = self.commitlog
        file_size = commitlog.file_size
        empty = commitlog.files.last is None
        end = commitlog.max_offset()
        if empty and offset % file_size:
            raise ConfigError(
                f"an empty CommitLog takes replicated bytes from a file boundary "
                f"(a multiple of {file_size}), not from {offset}"
            )
        if not empty and offset != end:
            raise ConfigError(f"replicated bytes at {offset} do not follow the end {end}")
        if self._on_first_append is not None:
            self._on_first_append()
            self._on_first_append = None
        pending = self.record_start
        return offset if empty or pending is None else pending

    def _appended(self, offset: int, at: int, refused: CorruptDataError | None) -> int:
        """After an append up to ``at``: synced with SYNC_FLUSH, the dispatcher told;
        ``refused`` raised."""
        if at > offset:
            if self.config().flush_disk_type == "SYNC_FLUSH":
                self.flusher.flush_sync(at)
            if self.commitlog.on_append is not None:
                self.commitlog.on_append(at)
        if refused is not None:
            raise refused
        return at

    def _file_at_end(self, at: int) -> MappedFile:
        """The file the CommitLog's end ``at`` lies in (the next one, created, at a
        file's end), whose data must end there."""
        mapped = self.commitlog.files.last_file_for_write(at)
        position = at - mapped.file_from_offset
        if position != mapped.wrote_position:
            raise CorruptDataError(
                f"replicated bytes at {at} land at position {position}, the file's data "
                f"ends at {mapped.wrote_position}",
                path=mapped.path,
            )
        return mapped

    def _append_piece(
        self, at: int, piece: list[memoryview], record_start: int, check_crc: bool
    ) -> int:
        """Write ``piece`` (all within one file) at CommitLog offset ``at`` and take it
        (``_take_piece``)."""
        mapped = self._file_at_end(at)
        position = at - mapped.file_from_offset
        end = position + sum(len(p) for p in piece)
        mapped.write_through_parts(position, piece)
        return self._take_piece(mapped, position, end, record_start, check_crc)

    def _take_piece(
        self, mapped: MappedFile, position: int, end: int, record_start: int, check_crc: bool
    ) -> int:
        """Check the records of ``mapped`` from CommitLog offset ``record_start`` through
        file position ``end`` (the bytes from ``position`` written, past the write
        position) and move the write position; where the first record not wholly there
        starts (the file's end after a blank). Bytes that fail are zeroed again."""
        base = mapped.file_from_offset
        try:
            next_record, stamp, records = _check(
                mapped, record_start - base, end, check_crc, self.topics
            )
        except BaseException:
            mapped.write_through(position, bytes(end - position))
            raise
        mapped.wrote_position = end
        if stamp:
            mapped.store_timestamp = stamp
        if records is not None and len(records) and self.on_checked is not None:
            self.on_checked(
                record_start, records, self.topics, base + end if next_record < end else -1
            )
        return base + next_record

    def is_record_start(self, offset: int) -> bool:
        """A whole valid record starts at ``offset``, or the record a transfer left
        unfinished does (RocketMQ 5's isOffsetAligned, for a cut back to ``offset``)."""
        if offset == self.record_start:
            return True
        return self.commitlog.read_record(offset, check_crc=True) is not None


def _cut(parts: list[memoryview], size: int) -> tuple[list[memoryview], list[memoryview]]:
    """The first ``size`` bytes of ``parts`` and the rest, as views."""
    taken = 0
    for i, part in enumerate(parts):
        if taken + len(part) > size:
            head = part[: size - taken]
            return [*parts[:i], head] if head else parts[:i], [
                part[size - taken :],
                *parts[i + 1 :],
            ]
        taken += len(part)
    return parts, []


def _check(
    mapped: MappedFile, start: int, end: int, check_crc: bool, topics: TopicTable
) -> tuple[int, int, Records | None]:
    """``check_replicated`` of [start, end) of ``mapped`` (file positions; ``start`` a
    record start): where the first record not wholly there starts, the last whole
    record's store time and the whole records (positions from ``start``; None when the
    walker did not decide). Past a blank the rest of the file is filler."""
    if start >= mapped.file_size:
        return start, 0, None
    with memoryview(mapped.mm) as whole, whole[start:end] as view:
        checked, records = check_replicated_records(
            view,
            mapped.file_from_offset + start,
            mapped.file_size - start,
            check_crc=check_crc,
            topics=topics,
        )
    return start + checked.next_record, checked.store_timestamp, records
