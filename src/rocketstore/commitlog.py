"""The CommitLog (``commitlog/<20-digit offset>``): every message, appended in order.

Layer: structures. Owns the write path under one writer lock (queue offsets per
``topic-queueId``, store timestamp at append time, END_OF_FILE blanks) and raw reads.
Validation of what a caller may put happens in :mod:`rocketstore.put_checks`.
"""

from __future__ import annotations

import contextlib
import logging
import struct
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from rocketstore.commitlog_appends import (
    Appended,
    AppendedBatch,
    EncodedBatch,
    InPlaceBatch,
    InPlaceEncoder,
    InPlaceTarget,
    PreparedMessage,
    RowOutputs,
)
from rocketstore.crashpoints import MID_BATCH_WRITE, armed, crash_point
from rocketstore.errors import (
    CorruptDataError,
    FileRemovedError,
    IncompleteDataError,
    StoreError,
)
from rocketstore.files.mapped_file import MappedFile
from rocketstore.files.mapped_file_queue import MappedFileQueue
from rocketstore.format import native, sysflag
from rocketstore.format import record as rec
from rocketstore.format.message import MessageExt
from rocketstore.format.message_id import offset_msg_id_from_bytes
from rocketstore.paths import CommitLogDirs
from rocketstore.status import AppendStatus

# Defined here, and the append types callers have always taken from here (now
# commitlog_appends').
__all__ = [
    "ZERO_CHUNK_BYTES",
    "Appended",
    "AppendedBatch",
    "CommitLog",
    "EncodedBatch",
    "InPlaceBatch",
    "InPlaceEncoder",
    "InPlaceTarget",
    "PreparedMessage",
    "RowOutputs",
    "now_ms",
]

Refused = TypeVar("Refused")  # what append_wrapped's encoder returns instead of a record

log = logging.getLogger(__name__)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def _int64s(values: npt.NDArray[np.int64], row: int, count: int) -> bytes:
    """``count`` native int64s of ``values`` from index ``row``, as bytes."""
    return values[row : row + count].tobytes()


_OFFSETS = struct.Struct(">qq")  # QUEUEOFFSET, PHYSICALOFFSET at record position 20
_STAMP = struct.Struct(">q")
_FLAG = struct.Struct(">i")
_NO_SIZE = bytes(4)
# zero_ahead writes this much per turn of the put lock (a writer waits at most that long).
ZERO_CHUNK_BYTES = 256 * 1024
_ZEROS = memoryview(bytes(ZERO_CHUNK_BYTES))


class CommitLog:
    def __init__(
        self, root: str, file_size: int, *, writable: bool, dirs: CommitLogDirs | None = None
    ):
        """``dirs``: where the files are (default ``<root>/commitlog``)."""
        self.file_size = file_size
        self.dirs = dirs or CommitLogDirs.of(root)
        # Paths whose disk is above disk_space_clean_forcibly_ratio, kept up to date by
        # the retention service: a multi-path CommitLog puts no new file there.
        self.full_paths: frozenset[str] = frozenset()
        self.files = MappedFileQueue(
            self.dirs.writable[0],
            file_size,
            writable=writable,
            reserve=True,
            also_read=self.dirs.all,
            place=self._directory_for if self.dirs.multi_path else None,
        )
        self.put_lock = threading.Lock()
        # "topic-queueId" -> next queue offset (RocketMQ's topicQueueTable).
        self.topic_queue_table: dict[str, int] = {}
        # Called after each successful append with the new max offset (wakes the dispatcher).
        self.on_append: Callable[[int], None] | None = None
        # Write records with pwrite, not through the mapping (set for SYNC_FLUSH, where
        # every append is synced at once: see MappedFile.write_through).
        self.write_through = False

    # --- offsets ------------------------------------------------------------------------

    def min_offset(self) -> int:
        """First file's start offset, -1 when the CommitLog is empty; the next file's start
        while the first is being deleted (RocketMQ's getMinOffset)."""
        first = self.files.first
        if first is None:
            return -1
        if not first.available:
            return first.file_from_offset + self.file_size
        return first.file_from_offset

    def max_offset(self) -> int:
        return self.files.max_offset()

    def last_store_timestamp(self) -> int:
        """Store time of the newest record appended in this process (0 if none)."""
        last = self.files.last
        return last.store_timestamp if last is not None else 0

    def _directory_for(self, start_offset: int) -> str:
        return self.dirs.directory_for(start_offset, self.file_size, self.full_paths)

    def roll_next_file(self, offset: int) -> int:
        return offset + self.file_size - offset % self.file_size

    # --- writing ------------------------------------------------------------------------

    def append(
        self, messages: Sequence[PreparedMessage], store_timestamp: int | None
    ) -> list[Appended]:
        """Append messages contiguously in one file (a batch never straddles files).

        If they do not fit with 8 bytes to spare, the file is closed with an END_OF_FILE
        blank and they go to the start of the next file with the same queue offsets.
        """
        with self.put_lock:
            results = self._append_locked(messages, store_timestamp)
            new_max = self.max_offset()
        if self.on_append is not None:
            self.on_append(new_max)
        return results

    def append_wrapped(
        self,
        make: Callable[[list[int]], PreparedMessage | Refused],
        keys: list[str],
        store_timestamp: int | None,
    ) -> Appended | Refused:
        """Append one multi-dispatch message (format.multi_dispatch): under the put lock,
        ``make`` encodes it with the next offsets of the queues ``keys`` names, and once it
        is in (a NOT or COMMIT record) each of those queues moves one past its offset.
        Whatever else ``make`` returns (its refusal) is returned as it is."""
        with self.put_lock:
            offsets = [self.topic_queue_table.get(key, 0) for key in keys]
            prepared = make(offsets)
            if not isinstance(prepared, PreparedMessage):
                return prepared
            (appended,) = self._append_locked([prepared], store_timestamp)
            if appended.status is AppendStatus.PUT_OK and sysflag.gets_queue_entry(
                prepared.sys_flag
            ):
                for key, offset in zip(keys, offsets, strict=True):
                    self.topic_queue_table[key] = offset + 1
            new_max = self.max_offset()
        if self.on_append is not None:
            self.on_append(new_max)
        return appended

    def _append_locked(
        self, messages: Sequence[PreparedMessage], store_timestamp: int | None
    ) -> list[Appended]:
        """``append``'s work; the caller holds the put lock."""
        total = sum(m.length for m in messages)
        timestamp = now_ms() if store_timestamp is None else store_timestamp
        mapped = self._file_with_room(total)
        if mapped is None:
            return [Appended(AppendStatus.UNKNOWN_ERROR) for _ in messages]
        pending_offsets: dict[str, int] = {}
        results: list[Appended] = []
        blob = bytearray(b"".join(m.template for m in messages))
        start = mapped.file_from_offset + mapped.wrote_position
        position = 0
        record_starts: list[int] = []
        for message in messages:
            record_starts.append(position)
            key = message.queue_key
            if sysflag.gets_queue_entry(message.sys_flag):
                queue_offset = pending_offsets.get(key, self.topic_queue_table.get(key, 0))
                pending_offsets[key] = queue_offset + 1
            else:
                queue_offset = 0  # PREPARED / ROLLBACK records
            physical = start + position
            _OFFSETS.pack_into(blob, position + rec.POS_QUEUEOFFSET, queue_offset, physical)
            stamp_at = position + rec.store_timestamp_position(message.sys_flag)
            _STAMP.pack_into(blob, stamp_at, timestamp)
            size = len(message.template)
            results.append(
                Appended(
                    AppendStatus.PUT_OK,
                    commit_log_offset=physical,
                    queue_offset=queue_offset,
                    size=size,
                    store_timestamp=timestamp,
                    msg_id=offset_msg_id_from_bytes(message.store_host, physical),
                )
            )
            position += size
        self._write_sizes_last(mapped, blob, record_starts)
        mapped.store_timestamp = timestamp
        self.topic_queue_table.update(pending_offsets)
        return results

    def append_encoded(
        self,
        batch: EncodedBatch,
        store_timestamp: int | None,
        outputs: RowOutputs | None = None,
    ) -> AppendedBatch | None:
        """``append`` for a batch the C extension encoded: the same queue offsets, stamps,
        file roll and sizes-last copy, done by ``_native.append_encoded``; with
        ``outputs``, each record's offset, queue offset, size and store timestamp go there.
        None if the batch cannot fit in a file (callers reject such batches first)."""
        assert native.append_encoded is not None
        outs = None
        if outputs is not None:
            outs = (outputs.offsets, outputs.queue_offsets, outputs.sizes, outputs.stamps)
        total = len(batch.blob)
        with self.put_lock:
            timestamp = now_ms() if store_timestamp is None else store_timestamp
            mapped = self._file_with_room(total)
            if mapped is None:
                return None
            position = mapped.wrote_position
            start = mapped.file_from_offset + position
            through = self._writes_through()
            queue_offsets = native.append_encoded(
                None if through else mapped.mm,
                position,
                batch.blob,
                batch.meta,
                batch.keys,
                self.topic_queue_table,
                start,
                timestamp,
                outs,
                0 if outputs is None else outputs.row,
            )
            if queue_offsets is None:  # (they went into outputs)
                assert outputs is not None
                queue_offsets = _int64s(outputs.queue_offsets, outputs.row, len(batch))
            if through:
                try:
                    self._write_first_size_last(mapped, position, batch.blob)
                except BaseException:
                    self._give_back_queue_offsets(batch, queue_offsets)
                    raise
            # In-process readers go by the write position: move it only once all is in.
            mapped.wrote_position = position + total
            mapped.store_timestamp = timestamp
        if self.on_append is not None:
            self.on_append(start + total)
        return AppendedBatch(start, queue_offsets, timestamp, start + total)

    def append_in_place(
        self, encode: InPlaceEncoder, store_timestamp: int | None
    ) -> AppendedBatch | None:
        """``append_encoded`` without a blob: under the put lock, ``encode`` writes and
        stamps the batch straight into the last file at its write position (the file is
        closed with an END_OF_FILE blank and ``encode`` called again for the next when the
        batch does not fit), every TOTALSIZE last; then the write position moves. Readers
        (in this process by the position, others and recovery by the sizes) see the whole
        batch or none of it. None: ``encode`` left the batch to another path.

        Holds the lock while encoding (a few ms for a batch of 4 MiB of bodies). Not for
        a written-through CommitLog (``write_through``), whose file is not written
        through the mapping."""
        assert not self.write_through
        with self.put_lock:
            timestamp = now_ms() if store_timestamp is None else store_timestamp
            mapped = self.files.last_file_for_write(0)
            batch = encode(self._target(mapped, timestamp))
            if batch is False and mapped.wrote_position > 0:
                self._close_with_blank(mapped)
                mapped = self.files.last_file_for_write(0)
                batch = encode(self._target(mapped, timestamp))
            if batch is None:
                return None
            if isinstance(batch, bool):  # (cannot be: callers cut batches to half a file)
                raise StoreError("a batch does not fit in an empty CommitLog file")
            start = mapped.file_from_offset + mapped.wrote_position
            # In-process readers go by the write position: move it only once all is in.
            mapped.wrote_position += batch.length
            mapped.store_timestamp = timestamp
        end = start + batch.length
        if self.on_append is not None:
            self.on_append(end)
        return AppendedBatch(start, b"", timestamp, end)

    def _target(self, mapped: MappedFile, timestamp: int) -> InPlaceTarget:
        position = mapped.wrote_position
        return InPlaceTarget(
            mapped.mm,
            position,
            mapped.free_bytes,
            mapped.file_from_offset + position,
            timestamp,
            self.topic_queue_table,
        )

    def _file_with_room(self, total: int) -> MappedFile | None:
        """The file to append ``total`` bytes to (under the put lock): the last one, or a
        new one after closing the last with an END_OF_FILE blank when the bytes do not fit
        with 8 to spare. None if they would not fit even in an empty file."""
        mapped = self.files.last_file_for_write(0)
        if total + rec.END_FILE_MIN_BLANK_LENGTH > mapped.free_bytes:
            self._close_with_blank(mapped)
            mapped = self.files.last_file_for_write(0)
            if total + rec.END_FILE_MIN_BLANK_LENGTH > mapped.free_bytes:
                return None  # cannot happen: callers reject messages larger than a file
        return mapped

    def _close_with_blank(self, mapped: MappedFile) -> None:
        """Fill the rest of ``mapped`` with an END_OF_FILE blank: the next append goes to
        the next file."""
        mapped.write_at(mapped.wrote_position, rec.encode_blank(mapped.free_bytes))
        mapped.wrote_position = self.file_size

    def _write_sizes_last(self, mapped: MappedFile, blob: bytearray, starts: list[int]) -> None:
        """Append ``blob`` so that a process killed mid-copy never leaves a record that looks
        whole: every TOTALSIZE goes in only after all of the batch's other bytes.

        The body CRC does not cover the properties that follow the body, so a record torn
        between them would pass recovery's checks with its properties cut to zeros. With
        the sizes written last, a torn copy leaves a zero TOTALSIZE where the first
        unfinished record starts, which recovery reads as the end of the data (and zeroes
        what lies past it). Readers in other processes see the same: a record is there
        once its size is.
        """
        if self._writes_through():
            self._write_first_size_last(mapped, mapped.wrote_position, blob)
            mapped.wrote_position += len(blob)
            return
        sizes = [bytes(blob[at : at + 4]) for at in starts]
        for at in starts:
            blob[at : at + 4] = _NO_SIZE
        base = mapped.wrote_position
        if armed(MID_BATCH_WRITE) and len(starts) > 1:
            half = len(blob) // 2  # a torn batch: only its first half reaches the file
            mapped.write_at(base, bytes(blob[:half]))
            crash_point(MID_BATCH_WRITE)
        mapped.write_at(base, bytes(blob))
        for at, size in zip(starts, sizes, strict=True):
            mapped.write_at(base + at, size)
        # In-process readers go by the write position: move it only once all is in.
        mapped.wrote_position = base + len(blob)

    def _writes_through(self) -> bool:
        """Whether an append goes in with pwrite (``write_through``): not while a crash
        test tears a batch, which it does in the copy through the mapping."""
        return self.write_through and not armed(MID_BATCH_WRITE)

    @staticmethod
    def _write_first_size_last(
        mapped: MappedFile, position: int, blob: bytearray | memoryview
    ) -> None:
        """``_write_sizes_last`` for write-through (``MappedFile.write_batch``: the first
        TOTALSIZE goes in last, and a write cut short reads as the end of the data).

        A write that fails (EIO) is undone as far as the disk lets us: left in place, its
        records past the first could be taken for valid ones once a shorter batch has
        overwritten the start of it."""
        try:
            # (write_batch takes bytes-likes; a view of put_columns' buffer is copied)
            mapped.write_batch(position, blob if isinstance(blob, bytearray) else bytes(blob))
        except BaseException:
            with contextlib.suppress(OSError, StoreError):
                mapped.write_through(position, bytes(len(blob)))
            raise

    def _give_back_queue_offsets(self, batch: EncodedBatch, queue_offsets: bytes) -> None:
        """Undo an encoded batch's queue offsets after its write failed: each queue's
        next offset goes back to its first queue-entry record's in the batch."""
        flags = memoryview(batch.meta).cast("i")[1::2]
        offsets = memoryview(queue_offsets).cast("q")
        firsts: dict[str, int] = {}
        for key, flag, offset in zip(batch.keys, flags, offsets, strict=True):
            if sysflag.gets_queue_entry(flag):
                firsts.setdefault(key, offset)
        self.topic_queue_table.update(firsts)

    def zero_ahead(self, mapped: MappedFile, start: int, end: int) -> int:
        """Write real zeros into [start, end) (file positions) of ``mapped`` past its
        written part and sync them; return where the zeros end (``start`` if ``mapped``
        is full or gone).

        ext4 and XFS keep a preallocated block "unwritten" until data first reaches it,
        and the first sync of such a block commits a journal transaction to mark it
        written: about 0.1 ms on every small SYNC_FLUSH append. Blocks written ahead of
        the writer (RocketMQ's warmMappedFile) turn those syncs into plain data writes.
        The bytes read the same before and after. Each chunk goes in under the put lock,
        above the write position, so no append can land in a range being zeroed."""
        position = start
        while position < end:
            with self.put_lock:
                if mapped.is_full or not mapped.available:
                    break
                begin = max(position, mapped.wrote_position)
                stop = min(end, begin + ZERO_CHUNK_BYTES)
                if begin < stop:
                    mapped.write_through(begin, _ZEROS[: stop - begin])
            position = stop
        if position > start:
            mapped.sync_range(start, position)
        return position

    # --- reading ------------------------------------------------------------------------

    def read(self, offset: int, size: int) -> bytes | None:
        """``size`` bytes at ``offset`` if they lie within one file's written part."""
        mapped = self.files.find(offset)
        if mapped is None:
            return None
        position = offset - mapped.file_from_offset
        if position + size > mapped.wrote_position:
            return None
        return mapped.read_held(position, size)  # None while retention deletes the file

    @contextlib.contextmanager
    def view_to_file_end(self, offset: int, limit: int) -> Iterator[memoryview | None]:
        """The written bytes from ``offset`` to the end of its file (at most ``limit``), as
        a view of the mapping valid inside the block: the file is held, so retention cannot
        unmap it meanwhile. None when nothing is written there or the file is gone."""
        mapped = self.files.find(offset)
        if mapped is None or not mapped.hold():
            yield None
            return
        view: memoryview | None = None
        try:
            position = offset - mapped.file_from_offset
            end = min(mapped.wrote_position, position + limit)
            if position < end:
                view = memoryview(mapped.mm)[position:end]
            yield view
        except FileRemovedError:
            yield None
        finally:
            if view is not None:
                with contextlib.suppress(BufferError):  # an array outlived it: GC frees it
                    view.release()
            mapped.release()

    def read_record(
        self, offset: int, *, check_crc: bool = False, size: int | None = None
    ) -> tuple[bytes, rec.RecordView] | None:
        """The validated record at ``offset`` (buffer, view), or None if none is there
        (including a file that retention is deleting). ``size``, when the caller knows it
        (a queue unit), saves reading the record's size first; a record of another size
        is not the one asked for and gives None."""
        mapped = self.files.find(offset)
        if mapped is None or not mapped.hold():
            return None
        try:  # one reference for both reads: the file cannot go in between
            position = offset - mapped.file_from_offset
            wrote = mapped.wrote_position
            if size is None:
                if position + 4 > wrote:
                    return None
                size = int.from_bytes(mapped.read(position, 4), "big", signed=True)
            if size <= 0 or position + size > wrote:
                return None
            data = mapped.read(position, size)
        except FileRemovedError:
            return None
        finally:
            mapped.release()
        try:
            view = rec.read_record(data, 0, check_crc=check_crc)
        except (CorruptDataError, IncompleteDataError):
            return None
        if isinstance(view, rec.Blank) or view.physical_offset != offset or view.size != size:
            return None
        return data, view

    def read_message(
        self, offset: int, *, size: int | None = None, read_body: bool = True
    ) -> MessageExt | None:
        """The message whose record is at ``offset`` (of ``size`` bytes when given), or
        None as ``read_record`` gives None. Decoded in place from the mapping by the C
        extension when it can, else through ``read_record``."""
        found = None
        mapped = self.files.find(offset) if native.decode_messages is not None else None
        if mapped is not None:  # one record: the file found directly, no loop over files
            sizes = [-1 if size is None else size]
            found = self._decode_in(mapped, [offset], sizes, read_body)[0]
        return found if found is not None else self._decode_copied(offset, size, read_body)

    def read_messages(self, offsets: list[int], sizes: list[int]) -> list[MessageExt | None]:
        """``read_message`` of each (offset, size), decoding the records of each file in
        one C call when the extension is built."""
        found = self._decode_in_place(offsets, sizes, read_body=True)
        if all(found):  # (a MessageExt is always true: no per-item comparison with None)
            return found
        # What C left (uncommon or missing records) goes through the Python decoder.
        return [
            m if m is not None else self._decode_copied(o, s, True)
            for m, o, s in zip(found, offsets, sizes, strict=True)
        ]

    def _decode_in_place(
        self, offsets: list[int], sizes: list[int], *, read_body: bool
    ) -> list[MessageExt | None]:
        """The records at ``offsets`` (of ``sizes``, -1 for any) decoded by the C extension
        straight from the mappings, one call per file; None for each record it leaves to
        Python (all of them when it is not built)."""
        if native.decode_messages is None:
            return [None] * len(offsets)
        found: list[MessageExt | None] = []
        at = 0
        while at < len(offsets):
            mapped = self.files.find(offsets[at])
            if mapped is None:
                found.append(None)
                at += 1
                continue
            end = mapped.file_from_offset + self.file_size
            if at == 0:
                # The usual case, all in the first one's file, in one call: the decoder
                # leaves records of other files as None (they lie outside its buffer),
                # and then the loop below groups them by file.
                whole = self._decode_in(mapped, offsets, sizes, read_body)
                if all(whole):  # (a MessageExt is always true)
                    return whole
            stop = at + 1
            while stop < len(offsets) and mapped.file_from_offset <= offsets[stop] < end:
                stop += 1
            if at == 0:  # the first file's records: decoded above already
                found += whole[:stop]
            else:
                found += self._decode_in(mapped, offsets[at:stop], sizes[at:stop], read_body)
            at = stop
        return found

    @staticmethod
    def _decode_in(
        mapped: MappedFile, offsets: list[int], sizes: list[int], read_body: bool
    ) -> list[MessageExt | None]:
        """``fast_message_exts`` of records of ``mapped``, read straight from its mapping
        in one C call, so without a reference (``MappedFile.mapping_for_buffer_call``);
        all None if the file is gone, retired or unmapped meanwhile."""
        mm = mapped.mapping_for_buffer_call()
        if mm is not None:
            try:  # (not contextlib.suppress: its context manager was a third of a lookup)
                return rec.fast_message_exts(
                    mm, mapped.file_from_offset, mapped.wrote_position, offsets, sizes, read_body
                )
            except ValueError:  # unmapped after the mapping was taken
                pass
        return [None] * len(offsets)

    def _decode_copied(self, offset: int, size: int | None, read_body: bool) -> MessageExt | None:
        located = self.read_record(offset, size=size)
        if located is None:
            return None
        return rec.to_message_ext(located[0], located[1], read_body=read_body)

    def store_time_at(self, offset: int, size: int) -> int:
        """STORETIMESTAMP of the record at ``offset`` without decoding it; -1 if absent.
        Read in place, no copy: offset-by-time's binary search calls this per probe."""
        mapped = self.files.find(offset)
        if mapped is None:
            return -1
        at = offset - mapped.file_from_offset
        if at + 76 > mapped.wrote_position:  # STORETIMESTAMP ends at 76 (IPv6 born host)
            return -1
        flag = mapped.unpack_at(_FLAG, at + 36)  # SYSFLAG
        if flag is None:
            return -1
        stamp = mapped.unpack_at(_STAMP, at + rec.store_timestamp_position(flag[0]))
        return int(stamp[0]) if stamp is not None else -1

    def flush(self, least_pages: int = 0) -> bool:
        return self.files.flush(least_pages)

    def close(self) -> None:
        self.files.close()
