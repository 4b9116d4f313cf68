"""A slave's CommitLog: bytes a master sent appended as they are, each record checked once
it is whole.

Layer: store (the facade's package). Writes only the CommitLog (the dispatcher builds
queues and index from it as from any append); the facade checks the arguments and that
the store takes writes first.
"""

from __future__ import annotations

from collections.abc import Callable

from rocketstore.commitlog import CommitLog
from rocketstore.config import StoreConfig
from rocketstore.errors import ConfigError, CorruptDataError
from rocketstore.format import record as rec
from rocketstore.format.replicated import check_replicated
from rocketstore.services.flusher import Flusher


class ReplicaLog:
    """``MessageStore.append_replicated``'s work, with what it remembers between calls.

    The bytes go in with pwrite (``MappedFile.write_through``), not through the mapping: a
    copy into the page cache, where the mapping's first touch of each page zeroes it
    (faulted by the writer or ahead of it by the prefaulter) and then copies: twice the
    CPU per byte (0.22-0.29 against 0.50-0.57 s a GiB, measured). ``on_first_append``
    (once) tells the prefaulter to stop faulting the CommitLog's pages in."""

    def __init__(
        self,
        commitlog: CommitLog,
        flusher: Flusher,
        config: Callable[[], StoreConfig],
        on_first_append: Callable[[], None] | None = None,
    ) -> None:
        self.commitlog = commitlog
        self.flusher = flusher
        self.config = config
        self._on_first_append = on_first_append
        # Where the first record not yet wholly checked starts, when a transfer from the
        # master ended inside it (None: the CommitLog ends at a record boundary).
        self.record_start: int | None = None

    def append(self, offset: int, data: bytes | bytearray | memoryview) -> int:
        """Append ``data`` at ``offset`` (``MessageStore.append_replicated``); the new
        max CommitLog offset."""
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
            if self._on_first_append is not None:
                self._on_first_append()
                self._on_first_append = None
            pending = self.record_start
            record_start = offset if empty or pending is None else pending
            pieces: list[tuple[int, memoryview]] = []
            stamp = 0
            at = offset
            while at < offset + len(view):
                file_start = at - at % file_size
                piece = view[at - offset : min(len(view), file_start + file_size - offset)]
                record_start = max(record_start, file_start)
                checked = self._check(record_start, at, piece, file_start + file_size)
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
                mapped.write_through(position, piece)
                mapped.wrote_position = position + len(piece)
                if stamp:
                    mapped.store_timestamp = stamp
            new_end = offset + len(view)
            # (past new_end after a blank: the rest of its file is filler)
            self.record_start = None if record_start == new_end else record_start
        if self.config().flush_disk_type == "SYNC_FLUSH":
            self.flusher.flush_sync(new_end)
        if commitlog.on_append is not None:
            commitlog.on_append(new_end)
        return new_end

    def is_record_start(self, offset: int) -> bool:
        """A whole valid record starts at ``offset``, or the record a transfer left
        unfinished does (RocketMQ 5's isOffsetAligned, for a cut back to ``offset``)."""
        if offset == self.record_start:
            return True
        return self.commitlog.read_record(offset, check_crc=True) is not None

    def _check(
        self, record_start: int, at: int, piece: memoryview, file_end: int
    ) -> tuple[int, int]:
        """``check_replicated`` of the bytes from ``record_start`` (in the CommitLog up to
        ``at``) and ``piece`` after them: where the first record not wholly there starts,
        and the last whole record's store time. A record that the piece still does not
        complete is not read again. Past a blank the rest of the file is filler."""
        if record_start >= file_end:
            return record_start, 0
        need = 0  # bytes of ``piece`` that complete the record begun before it
        if at - record_start >= 8:
            head = self.commitlog.read(record_start, 8)
            if head is not None:
                total = int.from_bytes(head[:4], "big", signed=True)
                magic = int.from_bytes(head[4:], "big", signed=True)
                whole = record_start + total <= at + len(piece)
                if magic in (rec.MESSAGE_MAGIC_V1, rec.MESSAGE_MAGIC_V2):
                    if not whole:
                        return record_start, 0
                    need = record_start + total - at
        before = self.commitlog.read(record_start, at - record_start) if at > record_start else b""
        if before is None:
            raise CorruptDataError(f"CommitLog bytes from {record_start} to {at} are not readable")
        if before and 0 < need < len(piece):
            # The begun record checked alone, then the rest of the piece in place: not a
            # copy of the whole piece behind the record's first bytes.
            first = check_replicated(
                b"".join((before, piece[:need])), record_start, file_end - record_start
            )
            after = at + need
            rest = check_replicated(piece[need:], after, file_end - after)
            return after + rest.next_record, rest.store_timestamp or first.store_timestamp
        checked = check_replicated(
            b"".join((before, piece)) if before else piece, record_start, file_end - record_start
        )
        next_record = record_start + checked.next_record
        return next_record, checked.store_timestamp
