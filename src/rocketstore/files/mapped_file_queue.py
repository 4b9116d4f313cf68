"""A directory of equally sized mapped files forming one contiguous offset space.

Layer: files. Used by the CommitLog and each ConsumeQueue. File names are 20-digit start
offsets; the file holding an offset is found arithmetically (with a linear fallback).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading

from rocketstore.errors import CorruptDataError, StoreError
from rocketstore.files.mapped_file import MappedFile, remove_leftovers
from rocketstore.paths import is_offset_file_name, offset_to_file_name

log = logging.getLogger(__name__)


def detect_file_size(directory: str) -> int | None:
    """Size of the files in ``directory`` (None if there are none); CorruptDataError if they
    differ, except that only the first file decides (RocketMQ requires them all equal)."""
    if not os.path.isdir(directory):
        return None
    sizes = {
        os.path.getsize(os.path.join(directory, name))
        for name in os.listdir(directory)
        if is_offset_file_name(name)
    }
    if not sizes:
        return None
    if len(sizes) > 1:
        raise CorruptDataError(f"files of different sizes {sorted(sizes)}", path=directory)
    return sizes.pop()


class MappedFileQueue:
    def __init__(
        self,
        directory: str,
        file_size: int,
        *,
        writable: bool,
        reserve: bool = False,
        read_around: bool = True,
    ):
        """``reserve``: allocate each new file's blocks up front (the CommitLog does, so a
        full disk fails at file creation rather than as a SIGBUS mid-write).
        ``read_around``: False maps each new file with ``advise_no_read_around`` (the
        consume queues: small units written in order, many files barely used)."""
        self.directory = directory
        self.reserve = reserve
        self.read_around = read_around
        self.file_size = file_size
        self.writable = writable
        self.files: list[MappedFile] = []
        self.flushed_where = 0
        self._lock = threading.RLock()
        # The file that will follow the last one, made ahead of need by a background
        # thread (RocketMQ's AllocateMappedFileService): creating and preallocating a file
        # takes milliseconds the writer would otherwise wait for at each roll. It holds
        # no data; close() deletes it, and after a crash recovery drops it like any file
        # past the end of the data (truncate_dirty_files).
        self._spare: MappedFile | None = None
        self._made_directory = False  # by a spare, removed again if nothing else came

    # --- loading ------------------------------------------------------------------------

    def load(self) -> None:
        """Map every file of the directory, sorted by name; all must have ``file_size``."""
        if not os.path.isdir(self.directory):
            return
        if self.writable:
            remove_leftovers(self.directory)
        names = sorted(n for n in os.listdir(self.directory) if is_offset_file_name(n))
        for name in names:
            path = os.path.join(self.directory, name)
            mapped = MappedFile(path, self.file_size, writable=self.writable)
            # Loaded files count as written to the end; recovery moves the positions back.
            mapped.wrote_position = self.file_size
            mapped.flushed_position = self.file_size
            self.files.append(mapped)
        for previous, current in zip(self.files, self.files[1:], strict=False):
            if current.file_from_offset != previous.file_from_offset + self.file_size:
                log.warning(
                    "gap in %s between %s and %s",
                    self.directory,
                    os.path.basename(previous.path),
                    os.path.basename(current.path),
                )

    def refresh(self) -> None:
        """Read-only openers: map files a writer has added since the last look."""
        if not os.path.isdir(self.directory):
            return
        known = {f.file_from_offset for f in self.files}
        names = sorted(n for n in os.listdir(self.directory) if is_offset_file_name(n))
        with self._lock:
            for name in names:
                start = int(name)
                if start in known:
                    continue
                path = os.path.join(self.directory, name)
                try:
                    if os.path.getsize(path) != self.file_size:
                        continue  # still being created by the writer
                    mapped = MappedFile(path, self.file_size, writable=False)
                except (FileNotFoundError, CorruptDataError):
                    continue
                mapped.wrote_position = 0  # the caller finds how much of it is written
                self.files.append(mapped)
            # Files removed by retention in the writer process.
            kept = []
            for mapped in self.files:
                if os.path.exists(mapped.path):
                    kept.append(mapped)
                else:
                    mapped.close()
            kept.sort(key=lambda f: f.file_from_offset)
            self.files = kept

    # --- lookup -------------------------------------------------------------------------

    @property
    def first(self) -> MappedFile | None:
        return self.files[0] if self.files else None

    @property
    def last(self) -> MappedFile | None:
        return self.files[-1] if self.files else None

    def min_offset(self) -> int:
        """Start offset of the first file, or -1 when there is none."""
        first = self.first
        return first.file_from_offset if first else -1

    def max_offset(self) -> int:
        """End of written data: the start of the last file holding data plus its write
        position (0 when empty).

        Files past the data are not counted: RocketMQ's AllocateMappedFileService makes
        the next file before it is needed, so a copy of a live broker's store (or one it
        left in a crash) ends in an empty file, and the data does not reach its start."""
        files = self.files
        if not files:
            return 0
        last = files[-1]
        if last.wrote_position == 0:
            for mapped in reversed(files):
                if mapped.wrote_position:
                    return mapped.file_from_offset + mapped.wrote_position
            return files[0].file_from_offset
        return last.file_from_offset + last.wrote_position

    def find(self, offset: int, return_first_if_not_found: bool = False) -> MappedFile | None:
        """The file holding ``offset``; None (or the first file, if asked) when out of range."""
        files = self.files
        if not files:
            return None
        first, last = files[0], files[-1]
        if offset < first.file_from_offset or offset >= last.file_from_offset + self.file_size:
            return first if return_first_if_not_found else None
        index = (offset // self.file_size) - (first.file_from_offset // self.file_size)
        if 0 <= index < len(files):
            candidate = files[index]
            if candidate.file_from_offset <= offset < candidate.file_from_offset + self.file_size:
                return candidate
        for candidate in files:  # the list may have holes; fall back to a scan
            if candidate.file_from_offset <= offset < candidate.file_from_offset + self.file_size:
                return candidate
        return first if return_first_if_not_found else None

    # --- writing ------------------------------------------------------------------------

    def last_file_for_write(self, start_offset: int = 0) -> MappedFile:
        """The last file if it has room, else a new one (the first at the file boundary of
        ``start_offset`` when the queue is empty)."""
        files = self.files
        if files and not files[-1].is_full:  # the usual case, without the lock: only the
            return files[-1]  # writer calling this appends files or fills the last one
        with self._lock:
            last = self.last
            if last is not None and not last.is_full:
                return last
            if last is None:
                create_offset = start_offset - (start_offset % self.file_size)
            else:
                create_offset = last.file_from_offset + self.file_size
            return self._create(create_offset)

    def _create(self, start_offset: int) -> MappedFile:
        spare = self._spare
        if spare is not None and spare.file_from_offset == start_offset:
            self._spare = None
            mapped = spare
        else:
            self._drop_spare()
            mapped = self._new_file(start_offset)
        self.files.append(mapped)
        return mapped

    def _new_file(self, start_offset: int) -> MappedFile:
        if not self.writable:
            raise StoreError(f"{self.directory} is read-only")
        if not os.path.isdir(self.directory):
            os.makedirs(self.directory, exist_ok=True)
            self._made_directory = True
        path = os.path.join(self.directory, offset_to_file_name(start_offset))
        mapped = MappedFile(path, self.file_size, writable=True, create=True, reserve=self.reserve)
        if not self.read_around:
            mapped.advise_no_read_around()
        return mapped

    def prepare_next(self, start_offset: int = 0) -> MappedFile:
        """The spare file: the one ``last_file_for_write`` will create next (the first at
        the file boundary of ``start_offset`` when the queue is empty), created now if it
        does not exist yet. Errors (a full disk) are the caller's; nothing is kept then."""
        with self._lock:
            last = self.last
            if last is None:
                offset = start_offset - (start_offset % self.file_size)
            else:
                offset = last.file_from_offset + self.file_size
            spare = self._spare
            if spare is not None and spare.file_from_offset == offset:
                return spare
            self._drop_spare()
            self._spare = self._new_file(offset)
            return self._spare

    @property
    def spare(self) -> MappedFile | None:
        return self._spare

    def _drop_spare(self) -> bool:
        """Delete the spare file, if there is one; True if there was."""
        spare, self._spare = self._spare, None
        if spare is None:
            return False
        spare.destroy()
        return True

    def flush(self, least_pages: int = 0, *, background: bool = False) -> bool:
        """Flush the file holding ``flushed_where``; True when nothing moved (RocketMQ's
        convention). ``background``: see ``MappedFile.flush``."""
        mapped = self.find(self.flushed_where, return_first_if_not_found=self.flushed_where == 0)
        if mapped is None:
            return True
        flushed = mapped.flush(least_pages, background=background)
        where = mapped.file_from_offset + flushed
        moved = where != self.flushed_where
        self.flushed_where = where
        return not moved

    def flush_all(self) -> None:
        """Flush every file with unflushed bytes."""
        for mapped in list(self.files):
            mapped.flush(0)
        self.flushed_where = self.max_offset()

    def truncate_dirty_files(self, offset: int) -> None:
        """Drop files that start after ``offset``; the file holding it ends there."""
        with self._lock:
            kept: list[MappedFile] = []
            for mapped in self.files:
                end = mapped.file_from_offset + self.file_size
                if end > offset:
                    if offset >= mapped.file_from_offset:
                        position = offset % self.file_size
                        mapped.wrote_position = position
                        mapped.flushed_position = position
                        kept.append(mapped)
                    elif self.writable:
                        mapped.destroy()
                    else:
                        mapped.close()
                else:
                    kept.append(mapped)
            self.files = kept
            self.flushed_where = min(self.flushed_where, offset)
            self._drop_spare()

    def delete_last(self) -> None:
        with self._lock:
            if self.files:
                self.files.pop().destroy()

    def delete_first(self, count: int = 1) -> list[MappedFile]:
        """Remove and destroy the ``count`` oldest files (retention); a reader holding one
        keeps its mapping until it releases it."""
        with self._lock:
            removed, self.files = self.files[:count], self.files[count:]
            if self.files and self.flushed_where < self.files[0].file_from_offset:
                # Nothing below the first file is left to flush; a flush position inside a
                # deleted file would never be found again.
                self.flushed_where = self.files[0].file_from_offset
        for mapped in removed:
            mapped.destroy()
        return removed

    def destroy(self) -> None:
        with self._lock:
            for mapped in self.files:
                mapped.destroy()
            self.files = []
            self._drop_spare()
            self.flushed_where = 0
        with contextlib.suppress(OSError):
            os.rmdir(self.directory)

    def close(self) -> None:
        """Unmap every file; the spare, which holds nothing, is deleted."""
        with self._lock:
            for mapped in self.files:
                mapped.close()
            if self._drop_spare() and not self.files and self._made_directory:
                # A store opened and closed without a put leaves no directory behind.
                with contextlib.suppress(OSError):
                    os.rmdir(self.directory)

    def mapped_memory_size(self) -> int:
        return len(self.files) * self.file_size
