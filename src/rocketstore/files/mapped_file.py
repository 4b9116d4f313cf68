"""One pre-sized, memory-mapped file named by its 20-digit start offset.

Layer: files. Knows positions and bytes, never records. A writer maps read-write; a
read-only opener maps read-only and never changes the file.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import mmap
import os
import struct
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from rocketstore.crashpoints import DURING_FILE_PREALLOCATION, crash_point
from rocketstore.errors import CorruptDataError, FileRemovedError, StoreError
from rocketstore.files import native_io
from rocketstore.files.holes import data_spans
from rocketstore.files.mapping import map_file
from rocketstore.files.regular_file import open_store_file

log = logging.getLogger(__name__)

PAGE_SIZE = 4096
# The most buffers one pwritev takes (Linux's IOV_MAX; POSIX allows as few as 16).
_IOV_MAX = os.sysconf("SC_IOV_MAX") if "SC_IOV_MAX" in os.sysconf_names else 16


def _preallocate(fd: int, size: int, path: str) -> None:
    """Reserve the file's blocks up front so a full disk fails here, cleanly, and never as
    a SIGBUS on a later write into the mapping. Reads as zeros, like RocketMQ's sparse
    files. Falls back to a sparse file where the filesystem cannot reserve."""
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as e:
        if e.errno in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
            os.ftruncate(fd, size)
        else:
            os.ftruncate(fd, 0)
            raise StoreError(f"cannot preallocate {size} bytes for {path}: {e}") from e


def reserve_range(path: str, start: int, end: int) -> None:
    """Allocate the blocks of [start, end) of an existing file: holes become zeros on disk,
    data stays as it is (the bytes read the same). StoreError when the disk is full, so
    that a write into the mapping there can never meet it as a SIGBUS."""
    fd = os.open(path, os.O_RDWR)
    try:
        os.posix_fallocate(fd, start, end - start)
    except OSError as e:
        if e.errno not in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
            raise StoreError(f"cannot reserve bytes {start}-{end} of {path}: {e}") from e
    finally:
        os.close(fd)


TMP_SUFFIX = ".creating"
_NO_SIZE = bytes(4)


def _create_presized(path: str, size: int, *, reserve: bool, reserve_first: int = 0) -> None:
    """Create ``path`` at its full size atomically: sized under a temporary name, then
    renamed, so a crash never leaves a short file under a real name. ``reserve`` also
    allocates its blocks (see ``_preallocate``), ``reserve_first`` those of its first
    bytes only; otherwise it is sparse, as RocketMQ's."""
    tmp = path + TMP_SUFFIX
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        crash_point(DURING_FILE_PREALLOCATION)
        if reserve:
            _preallocate(fd, size, path)
        else:
            if reserve_first:
                _preallocate(fd, min(reserve_first, size), path)
            os.ftruncate(fd, size)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
    os.close(fd)
    os.replace(tmp, path)


def remove_leftovers(directory: str) -> list[str]:
    """Delete files a crash left half-created (``*.creating``); return their names."""
    removed = []
    if os.path.isdir(directory):
        for name in os.listdir(directory):
            if name.endswith(TMP_SUFFIX):
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(directory, name))
                    removed.append(name)
    return removed


class MappedFile:
    """A fixed-size file mapped into memory, with write and flush positions.

    ``wrote_position`` is the end of valid data; ``flushed_position`` what has been made
    durable. Readers copy bytes out (``read``) under a reference (``hold``/``release``, or
    ``read_held``): a file that is closed or deleted while held stays mapped until its last
    reader releases it, and refuses new readers from the moment it is retired.
    """

    def __init__(
        self,
        path: str,
        file_size: int,
        *,
        writable: bool,
        create: bool = False,
        reserve: bool = False,
        reserve_ahead: int = 0,
        reserve_first: int = 0,
        file_from_offset: int | None = None,
    ):
        """``file_from_offset`` defaults to the offset the name spells (CommitLog and
        consume-queue files are named by it). ``reserve``: a new file gets all its blocks
        at creation; ``reserve_first``: a new file gets the blocks of its first bytes only
        (index files: header and slot table, the entries ``reserve_to`` ahead of the
        writer); ``reserve_ahead``: ``append`` and ``reserve_to`` allocate blocks that
        many bytes ahead of what is written (consume queues: a file per queue, most of it
        idle for long)."""
        self.path = path
        self.file_size = file_size
        if file_from_offset is None:
            file_from_offset = int(os.path.basename(path))
        self.file_from_offset = file_from_offset
        self.writable = writable
        self.wrote_position = 0
        self.flushed_position = 0
        self.store_timestamp = 0  # newest store time written into this file
        self.reserve_ahead = reserve_ahead
        # Blocks known to be allocated from the file's start: the whole of a reserved new
        # file; nothing known of a loaded one (RocketMQ makes them sparse).
        if create and reserve:
            self.reserved_end = file_size
        elif create and reserve_first:
            self.reserved_end = min(file_size, reserve_first)
        else:
            self.reserved_end = 0
        self._lock = threading.Lock()  # flush and unmap
        self._ref_lock = threading.Lock()  # reader references; never held across I/O
        self._closed = False  # retired or closed: no new readers
        self._refs = 0
        self._fd: int | None = None  # for write_through, opened on its first use
        if create:
            if not writable:
                raise StoreError(f"cannot create {path} read-only")
            if not os.path.exists(path):
                _create_presized(path, file_size, reserve=reserve, reserve_first=reserve_first)
            elif not reserve:
                self.reserved_end = 0  # someone else's file: nothing known of its blocks
        # (a FIFO so named would block the open: refused by its path instead)
        fd = open_store_file(path, os.O_RDWR if writable else os.O_RDONLY)
        try:
            actual = os.fstat(fd).st_size
            if actual == 0:  # (mmap would fail on it without naming the file)
                raise CorruptDataError("empty file (0 bytes)", path=path)
            if actual != file_size:
                raise CorruptDataError(f"file is {actual} bytes, expected {file_size}", path=path)
            access = mmap.ACCESS_WRITE if writable else mmap.ACCESS_READ
            # (a mapping that keeps no descriptor: one per file ran out of them)
            self._mm: mmap.mmap | None = map_file(fd, file_size, access)
        finally:
            os.close(fd)
        # The mapping a reader may take a buffer of for one call (mapping_for_buffer_call),
        # kept as a plain attribute: the C readers read it with file_from_offset and
        # wrote_position, no Python call per file (a key lookup made two, 0.1 us of 1.8).
        # None from retirement on; set only here, in retire, close and _unmap.
        self.buffer_mapping: mmap.mmap | None = self._mm

    # --- writing ------------------------------------------------------------------------

    @property
    def mm(self) -> mmap.mmap:
        mm = self._mm
        if mm is None:
            raise FileRemovedError(f"{self.path} is closed")
        return mm

    def mapping_for_buffer_call(self) -> mmap.mmap | None:
        """The mapping, for one call that reads it through the buffer protocol (C code),
        without a reference (None if unmapped). No reference is needed: while the call
        holds the buffer, ``mmap.close`` refuses (BufferError, and ``_unmap`` leaves the
        mapping to the garbage collector), so the bytes stay mapped; a mapping closed
        before the call takes its buffer makes the call raise ValueError, which callers
        read as the file being gone. hold/release cost a third of a key lookup. None for
        a retired file, as ``hold`` refuses new readers of one."""
        return self.buffer_mapping

    def buffer_view(self) -> tuple[int, mmap.mmap | None, int]:
        """(file_from_offset, buffer_mapping, wrote_position): what the C readers
        (key_lookup, pull_messages, time_search) read of a file, as public attributes."""
        return self.file_from_offset, self.buffer_mapping, self.wrote_position

    def unpack_at(self, layout: struct.Struct, position: int) -> tuple[Any, ...] | None:
        """``layout.unpack_from`` the mapping at ``position``: one C call, so without a
        reference (``mapping_for_buffer_call``); None if the file is gone."""
        mm = self.mapping_for_buffer_call()
        if mm is None:
            return None
        try:
            return layout.unpack_from(mm, position)
        except ValueError:  # unmapped meanwhile
            return None

    @property
    def free_bytes(self) -> int:
        return self.file_size - self.wrote_position

    @property
    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size

    def append(self, data: bytes) -> int:
        """Write ``data`` at the write position; return the position it was written at."""
        position = self.wrote_position
        end = position + len(data)
        if end > self.file_size:
            raise StoreError(f"{self.path}: append of {len(data)} bytes past the file end")
        if end > self.reserved_end and self.reserve_ahead:
            self.reserve_to(end)
        self.mm[position:end] = data
        self.wrote_position = end
        return position

    def reserve_to(self, end: int) -> None:
        """Allocate blocks up to ``end`` plus ``reserve_ahead`` (StoreError on a full
        disk, with nothing written): a write through the mapping into a hole of a sparse
        file on a full disk is a SIGBUS, which no caller can catch."""
        target = min(self.file_size, -(-(end + self.reserve_ahead) // PAGE_SIZE) * PAGE_SIZE)
        reserve_range(self.path, self.reserved_end, target)
        self.reserved_end = target

    def write_at(self, position: int, data: bytes | bytearray | memoryview) -> None:
        """Overwrite bytes at ``position`` (index header and slots)."""
        self.mm[position : position + len(data)] = data

    def write_through(self, position: int, data: bytes | bytearray | memoryview) -> None:
        """Write ``data`` at ``position`` with pwrite(2) instead of through the mapping
        (which sees the bytes at once: one page cache).

        For writers that sync each write (SYNC_FLUSH): a store through the mapping dirties
        the whole page-cache folio it lands in, up to megabytes on recent kernels, and the
        sync then writes all of it, while pwrite dirties only the blocks it covers. Callers
        serialise writes to a file (the CommitLog's put lock). A write the kernel cuts
        short (a fatal signal) leaves a prefix of ``data`` in the file.
        """
        fd = self.write_descriptor(position, len(data))
        view = memoryview(data)
        while view:
            written = os.pwrite(fd, view, position)
            view = view[written:]
            position += written

    def write_through_parts(
        self, position: int, parts: Sequence[bytes | bytearray | memoryview]
    ) -> None:
        """``write_through`` of ``parts`` one after another from ``position``, with
        pwritev (a slave's transfers as its receive buffer holds them: no join first).
        The GIL is let go during the writes, with the C extension as without it (see
        ``_native.write_parts``)."""
        views = [memoryview(part).cast("B") for part in parts]
        fd = self.write_descriptor(position, sum(len(view) for view in views))
        if native_io.write_parts is not None:
            native_io.write_parts(fd, position, views)
            return
        views = [view for view in views if view]
        while views:
            written = os.pwritev(fd, views[:_IOV_MAX], position)
            position += written
            while views and written >= len(views[0]):
                written -= len(views.pop(0))
            if written:
                views[0] = views[0][written:]

    def write_batch(self, position: int, blob: bytes | bytearray) -> None:
        """``write_through`` of a batch of records that never shows a torn one: ``blob``
        with its first 4 bytes (the first record's TOTALSIZE) zero, then those 4 bytes. A
        write the kernel cuts short leaves a prefix (whole folios, in order), so until the
        last write lands the batch reads as the end of the data, in this process or after
        a crash. ``blob`` is left as it was.

        With the C extension the writes keep the GIL (os.pwrite lets it go, and getting it
        back from the busy dispatcher took longer than the copy) and start the range's
        writeback, which the caller's sync then waits for instead of starting it."""
        fd = self.write_descriptor(position, len(blob))
        if native_io.write_batch is not None:
            native_io.write_batch(fd, position, blob)
            return
        if len(blob) <= 4:
            self.write_through(position, blob)
            return
        self.write_through(position, _NO_SIZE)
        self.write_through(position + 4, memoryview(blob)[4:])
        self.write_through(position, memoryview(blob)[:4])

    def write_descriptor(self, position: int, length: int) -> int:
        """The file's descriptor for writes at [position, position + length), opened on
        first use: this class's pwrites, and a writer outside it (a slave's receive
        writes its master's bytes straight from its buffer). StoreError when the range is
        past the file or it is read-only. Valid until ``close_write_descriptor``."""
        if not self.writable:
            raise StoreError(f"{self.path} is read-only")
        if position < 0 or position + length > self.file_size:
            raise StoreError(f"{self.path}: write of {length} bytes at {position} past the end")
        fd = self._fd
        if fd is None:
            if self._mm is None:
                raise FileRemovedError(f"{self.path} is closed")
            fd = self._fd = os.open(self.path, os.O_RDWR)
        return fd

    def close_write_descriptor(self) -> None:
        """Close the descriptor ``write_through`` opened, when the writer has moved on to
        the next file: kept by every full file, SYNC_FLUSH held one descriptor per file
        for the life of the process. A later write opens it again."""
        with self._lock:
            fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def sync_range(self, start: int, end: int) -> None:
        """Make [start, end) durable (msync of just that range: a ranged fdatasync)."""
        with self._lock:
            if self._mm is None or end <= start:
                return
            aligned = (start // PAGE_SIZE) * PAGE_SIZE
            self._mm.flush(aligned, min(end, self.file_size) - aligned)

    def zero_tail(self, position: int) -> int:
        """Zero leftover bytes from ``position`` to the last non-zero byte of the file.

        Recovery uses it after cutting a file short: stale records or queue units past the
        new end must never be mistaken for valid data by a later recovery, once new
        appends have overwritten the bytes in between. Returns the bytes zeroed. The
        search runs backwards over numpy views of the mapping, so a mostly empty 1 GiB
        file is neither copied nor written.
        """
        end = self.last_nonzero_end(position)
        if end <= position:
            return 0
        # Only the parts that may hold data are written (a hole reads as zeros already),
        # and their blocks are allocated first: a write through the mapping into a hole
        # on a full disk is a SIGBUS, which no caller can catch; this way it is a
        # StoreError with nothing written. (A queue file RocketMQ made is sparse.)
        spans = self._data_spans(position)
        for begin, finish in spans:
            if begin < end:
                reserve_range(self.path, begin, min(finish, end))
        mm = self.mm
        for begin, finish in spans:
            if begin < end:
                mm[begin : min(finish, end)] = bytes(min(finish, end) - begin)
        return end - position

    def last_nonzero_end(self, position: int) -> int:
        """One past the last non-zero byte at or after ``position`` (``position`` if none)."""
        view = np.frombuffer(self.mm, dtype=np.uint8)
        chunk = 16 * 1024 * 1024
        try:
            # Holes (the never-written rest of a preallocated file) read as zeros: only
            # the parts that may hold data are looked at, newest first.
            for begin, finish in reversed(self._data_spans(position)):
                stop = finish
                while stop > begin:
                    start = max(begin, stop - chunk)
                    nonzero = np.flatnonzero(view[start:stop])
                    if len(nonzero):
                        return start + int(nonzero[-1]) + 1
                    stop = start
            return position
        finally:
            del view

    def _data_spans(self, position: int) -> list[tuple[int, int]]:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return [(position, self.file_size)]
        try:
            return data_spans(fd, position, self.file_size)
        finally:
            os.close(fd)

    def advise_no_read_around(self) -> None:
        """Tell the kernel not to read around a missing page of this mapping.

        A fault on a page the page cache lacks normally fills the whole readahead window
        around it (``read_ahead_kb``, 8 MiB on some disks): the first write into a new
        consume-queue file zeroed its full 6 MB and took 1.3 ms, with the GIL held,
        before the dispatcher wrote a single unit, and left megabytes of page cache with
        nothing in them for a queue that may hold a few units. With this advice each
        page is faulted as it is first written. Best effort: without it (a platform
        without the advice) the kernel reads around as before."""
        advice = getattr(mmap, "MADV_RANDOM", None)
        if advice is None:
            return
        with contextlib.suppress(OSError, ValueError, FileRemovedError):
            self.mm.madvise(advice)

    def prefault(self, position: int, end: int) -> bool:
        """Have the kernel take the write faults of [position, end) now, bytes unchanged
        (``_native.populate_write``), so a later copy into them does not stop for each
        page: a preallocated file's first write to a page costs several microseconds.
        False when that is not possible here (no C extension, an old kernel, a read-only
        or closed file); the writer then takes the faults itself, as before."""
        populate_write = native_io.populate_write
        if populate_write is None or not self.writable or not self.hold():
            return False
        try:
            end = min(end, self.file_size)
            if end <= position:
                return True
            error = populate_write(self.mm, position, end - position)
            return error == 0
        except FileRemovedError:
            return False
        finally:
            self.release()

    def flush(self, least_pages: int = 0, *, background: bool = False) -> int:
        """msync the dirty range if at least ``least_pages`` pages are dirty (0: any).

        Returns the flushed position. A full file is always flushable. ``background``
        (a flush nobody waits for) lets the other threads run during the msync:
        ``mmap.flush`` keeps the GIL for the whole sync, and the async flusher's flush of
        500 ms of puts stopped the writer for over 100 ms (a 256 MiB flush, 139 ms). A
        caller that waits for the sync keeps the GIL: with the dispatcher and the
        prefaulter working on the same files meanwhile, the sync took 4-5x longer.
        """
        with self._lock:
            wrote = self.wrote_position
            if not self._is_able_to_flush(wrote, least_pages):
                return self.flushed_position
            if self._mm is not None and self.writable and wrote > self.flushed_position:
                start = (self.flushed_position // PAGE_SIZE) * PAGE_SIZE
                msync_range = native_io.msync_range
                if background and msync_range is not None:
                    msync_range(self._mm, start, wrote - start)
                else:
                    self._mm.flush(start, wrote - start)
            self.flushed_position = wrote
            return wrote

    def _is_able_to_flush(self, wrote: int, least_pages: int) -> bool:
        if self.flushed_position >= wrote:
            return False
        if wrote >= self.file_size:
            return True
        if least_pages > 0:
            return (wrote // PAGE_SIZE) - (self.flushed_position // PAGE_SIZE) >= least_pages
        return True

    # --- reading ------------------------------------------------------------------------

    def read(self, position: int, size: int) -> bytes:
        """Copy ``size`` bytes from ``position`` (clipped to the file end).

        FileRemovedError if the file was unmapped; a reader that holds the file never sees
        that (see ``read_held``).
        """
        end = min(position + size, self.file_size)
        try:
            return self.mm[position:end]
        except ValueError as e:  # unmapped between the lookup and the copy
            raise FileRemovedError(f"{self.path} is closed") from e

    def copy_out(self, position: int, size: int) -> bytes | None:
        """``read_held`` as one C call (a slice of the mapping), so without a reference
        (``mapping_for_buffer_call``); None when the file is gone."""
        mm = self.mapping_for_buffer_call()
        if mm is None:
            return None
        try:
            return mm[position : min(position + size, self.file_size)]
        except ValueError:  # unmapped meanwhile
            return None

    def read_held(self, position: int, size: int) -> bytes | None:
        """``read`` under a reader reference; None when the file is being deleted."""
        if not self.hold():
            return None
        try:
            return self.read(position, size)
        except FileRemovedError:
            return None
        finally:
            self.release()

    # --- lifetime -----------------------------------------------------------------------

    # hold/release run around every read: plain acquire/release (nothing in between can
    # raise) costs half of a with-block.

    def hold(self) -> bool:
        """Take a reader reference; False if the file is retired, closed or deleted."""
        lock = self._ref_lock
        lock.acquire()
        if self._closed:
            lock.release()
            return False
        self._refs += 1
        lock.release()
        return True

    def release(self) -> None:
        """Drop a reader reference; the last reader of a closed file unmaps it."""
        lock = self._ref_lock
        lock.acquire()
        refs = self._refs - 1
        self._refs = refs if refs > 0 else 0
        last_out = refs <= 0 and self._closed and self._mm is not None
        lock.release()
        if last_out:
            self._unmap()

    @property
    def in_use(self) -> bool:
        """Some reader holds the file."""
        return self._refs > 0

    @property
    def available(self) -> bool:
        """Not retired, closed or deleted: readers may still take it."""
        return not self._closed

    def retire(self) -> bool:
        """Refuse new readers from now on (``hold`` returns False), the first step of a
        deletion (RocketMQ's ``shutdown``). True when no reader holds the file, so that
        ``destroy`` unmaps it at once."""
        with self._ref_lock:
            self._closed = True
            self.buffer_mapping = None
            return self._refs == 0

    def _unmap(self) -> None:
        with self._lock, self._ref_lock:
            if self._refs > 0 or self._mm is None:
                return
            mm, self._mm = self._mm, None
            self.buffer_mapping = None
            fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)
        try:
            mm.close()
        except BufferError:  # a buffer view is still exported; the GC unmaps it later
            log.debug("%s: unmap deferred to the garbage collector", self.path)

    def close(self) -> None:
        """Unmap the file, or, while readers hold it, let the last one unmap it: a
        mapping never disappears under a reader."""
        with self._ref_lock:
            self._closed = True
            self.buffer_mapping = None
        self._unmap()

    def rename(self, path: str) -> None:
        """Give the file another name (the same directory's), keeping its mapping: the
        pages already faulted in stay faulted in."""
        os.replace(self.path, path)
        self.path = path

    def destroy(self) -> None:
        """Delete the file and unmap it (at once, or on the last reader's release)."""
        self.close()
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.path)
        log.info("deleted %s", self.path)

    def __repr__(self) -> str:
        return f"MappedFile({self.path!r}, wrote={self.wrote_position})"
