"""A directory of equally sized mapped files forming one contiguous offset space.

Layer: files. Used by the CommitLog and each ConsumeQueue. File names are 20-digit start
offsets; the file holding an offset is found arithmetically (with a linear fallback). A
CommitLog may spread its files over several directories (RocketMQ's
MultiPathMappedFileQueue): the queue then reads every one and asks where a new file goes.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import threading
from collections.abc import Callable, Sequence

from rocketstore.errors import CorruptDataError, StoreError
from rocketstore.files.mapped_file import MappedFile, remove_leftovers
from rocketstore.files.regular_file import require_regular
from rocketstore.paths import is_offset_file_name, offset_to_file_name

log = logging.getLogger(__name__)


def offset_file_paths(directories: Sequence[str]) -> dict[int, str]:
    """Start offset -> path of every offset-named file in ``directories`` (a CommitLog may
    spread its files over several: RocketMQ's MultiPathMappedFileQueue), ordered by offset.
    CorruptDataError when two directories hold a file of the same name: which one is the
    log cannot be told."""
    found: dict[int, str] = {}
    for directory in directories:
        if not os.path.isdir(directory):
            continue
        for name in os.listdir(directory):
            if not is_offset_file_name(name):
                continue
            path = os.path.join(directory, name)
            # A FIFO (or directory...) so named would hang or fail the reads of the files
            # later without a name, and leaving it out would hide what it should hold.
            require_regular(path)
            start = int(name)
            other = found.get(start)
            if other is not None:
                raise CorruptDataError(
                    f"two files for offset {start}: {other} and {path}", path=directory
                )
            found[start] = path
    return dict(sorted(found.items()))


def offset_file_path(directories: Sequence[str], start_offset: int) -> str:
    """The path of the file starting at ``start_offset``: in whichever of ``directories``
    has it, else (so an error names a path) in the first."""
    name = offset_to_file_name(start_offset)
    for directory in directories:
        path = os.path.join(directory, name)
        if os.path.exists(path):
            return path
    return os.path.join(directories[0], name)


def detect_file_size(directory: str | Sequence[str]) -> int | None:
    """Size of the files in ``directory`` (or in all of several; None if there are none);
    CorruptDataError if they differ (RocketMQ requires them all equal)."""
    directories = (directory,) if isinstance(directory, str) else directory
    by_path = {path: os.path.getsize(path) for path in offset_file_paths(directories).values()}
    sizes = list(by_path.values())
    if not sizes:
        return None
    if len(set(sizes)) > 1:
        # The size most files have (the larger on a tie) is the queue's: name the others.
        usual = max(set(sizes), key=lambda size: (sizes.count(size), size))
        odd = [(path, size) for path, size in by_path.items() if size != usual]
        more = f" (and {len(odd) - 1} more of other sizes)" if len(odd) > 1 else ""
        raise CorruptDataError(
            f"files of different sizes: this one is {odd[0][1]} bytes, the others {usual}{more}",
            path=odd[0][0],
        )
    return sizes[0]


class MappedFileQueue:
    def __init__(
        self,
        directory: str,
        file_size: int,
        *,
        writable: bool,
        reserve: bool = False,
        reserve_ahead: int = 0,
        read_around: bool = True,
        also_read: Sequence[str] = (),
        place: Callable[[int], str] | None = None,
    ):
        """``reserve``: allocate each new file's blocks up front (the CommitLog does, so a
        full disk fails at file creation rather than as a SIGBUS mid-write);
        ``reserve_ahead``: the writable files allocate their blocks as appends near them
        (MappedFile), for the same reason at less disk.
        ``read_around``: False maps each new file with ``advise_no_read_around`` (the
        consume queues: small units written in order, many files barely used).
        ``also_read``: more directories whose files belong to the queue, and ``place``
        the directory a new file starting at an offset goes to (a multi-path CommitLog;
        by default every file is in ``directory``)."""
        self.directory = directory
        self.directories = (directory, *(d for d in also_read if d != directory))
        self._place = place
        self.reserve = reserve
        self.reserve_ahead = reserve_ahead if writable else 0
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
        self._made_directories: set[str] = set()  # by a spare, removed again if unused

    # --- loading ------------------------------------------------------------------------

    def load(self) -> None:
        """Map every file of the directories, by start offset; all must have ``file_size``."""
        if self.writable:
            for directory in self.directories:
                remove_leftovers(directory)
        for path in offset_file_paths(self.directories).values():
            mapped = MappedFile(
                path, self.file_size, writable=self.writable, reserve_ahead=self.reserve_ahead
            )
            # Loaded files count as written to the end; recovery moves the positions back.
            mapped.wrote_position = self.file_size
            mapped.flushed_position = self.file_size
            self.files.append(mapped)
        for previous, current in self.gaps():
            log.warning("gap in the files between %s and %s", previous.path, current.path)

    def refresh(self) -> None:
        """Read-only openers: map files a writer has added since the last look."""
        known = {f.file_from_offset for f in self.files}
        try:
            paths = offset_file_paths(self.directories)
        except CorruptDataError:
            return  # a file being moved between directories: look again next time
        with self._lock:
            for start, path in paths.items():
                if start in known:
                    continue
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

    def gaps(self) -> list[tuple[MappedFile, MappedFile]]:
        """Neighbouring files with offsets missing between them (files lost, or a
        directory of a multi-path CommitLog not there)."""
        files = self.files
        return [
            (previous, current)
            for previous, current in itertools.pairwise(files)
            if current.file_from_offset != previous.file_from_offset + self.file_size
        ]

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
        previous = self.last
        if previous is not None:  # full: the writer is done with it
            previous.close_write_descriptor()
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
        directory = self.directory if self._place is None else self._place(start_offset)
        if not self.writable:
            raise StoreError(f"{directory} is read-only")
        if not os.path.isdir(directory):
            os.makedirs(directory, exist_ok=True)
            self._made_directories.add(directory)
        path = os.path.join(directory, offset_to_file_name(start_offset))
        mapped = MappedFile(
            path,
            self.file_size,
            writable=True,
            create=True,
            reserve=self.reserve,
            reserve_ahead=self.reserve_ahead,
        )
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
        for directory in self.directories:
            with contextlib.suppress(OSError):
                os.rmdir(directory)

    def close(self) -> None:
        """Unmap every file; the spare, which holds nothing, is deleted."""
        with self._lock:
            for mapped in self.files:
                mapped.close()
            if self._drop_spare():
                # A store opened and closed without a put leaves no directory behind, nor
                # does a spare in a directory of its own (rmdir fails on one in use).
                for directory in self._made_directories:
                    with contextlib.suppress(OSError):
                        os.rmdir(directory)

    def mapped_memory_size(self) -> int:
        return len(self.files) * self.file_size
