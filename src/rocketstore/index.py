"""The index service over the IndexFiles (``index/<yyyyMMddHHmmssSSS>``): which file takes
the next keys, the spare made ahead, queries across files, truncation and expiry.

Layer: structures. An index file maps ``topic#key`` hashes to CommitLog offsets through
hash slots and chained entries (layout in :mod:`rocketstore.format.index_layout`). The
index holds hashes only: callers must read the record and compare topic and key.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rocketstore.crashpoints import DURING_INDEX_ROLLOVER, crash_point
from rocketstore.errors import ConfigError, CorruptDataError, FileRemovedError, StoreError
from rocketstore.files import native_io
from rocketstore.files.mapped_file import TMP_SUFFIX, remove_leftovers
from rocketstore.format import index_layout as layout
from rocketstore.format import sysflag
from rocketstore.format.javahash import index_key_hash, index_key_hash_many
from rocketstore.format.properties import split_keys
from rocketstore.index_catalog import (
    file_geometry,
    index_files,
    newest_geometry,
    settled_geometries,
    unfinished,
)
from rocketstore.index_file import (
    ENTRIES_AHEAD_BYTES,
    IndexFile,
    IndexMapping,
)
from rocketstore.paths import index_dir, index_file_ms, index_file_name, is_index_file_name

# Defined here, and the names readers have always taken from here (now index_catalog's,
# and IndexFile, index_file's).
__all__ = [
    "PREFAULT_STEP_BYTES",
    "SPARE_MARGIN",
    "SPARE_NAME",
    "DispatchedKeys",
    "IndexFile",
    "IndexService",
    "file_geometry",
    "index_files",
    "newest_geometry",
    "settled_geometries",
    "unfinished",
]

log = logging.getLogger(__name__)

# The next index file, made ahead of need (IndexService.prefault_ahead). Its name ends like a
# half-created file's, so every writer deletes it as a leftover after a crash; it sorts before
# every time-stamp name, so a RocketMQ broker, which loads every file of the directory and
# writes into the last, never writes into it. A roll gives it its real name as it takes it.
SPARE_NAME = ".next" + TMP_SUFFIX
# The spare is made once the last file has fewer free entries than this share of its entries.
SPARE_MARGIN = 0.1
PREFAULT_STEP_BYTES = 4 * 1024 * 1024  # per call: short enough to notice a stop or a roll


@dataclass
class DispatchedKeys:
    """What the index needs from one dispatched record."""

    topic: str
    commit_log_offset: int
    store_timestamp: int
    sys_flag: int
    uniq_key: str | None
    keys: str | None


class IndexService:
    def __init__(self, root: str, hash_slot_num: int, index_num: int, *, writable: bool):
        self.directory = index_dir(root)
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.writable = writable
        self.files: list[IndexFile] = []
        self._lock = threading.RLock()
        self._last_name_ms = 0
        # Told the end time of each full file once it is flushed (checkpoint indexMsgTimestamp).
        self.on_full_file_flushed: Callable[[int], None] | None = None
        # Made ahead of need by prefault_ahead (the prefaulter's thread), taken by a roll.
        self._spare: IndexMapping | None = None
        self._made_directory = False  # by a spare, removed again if nothing else came
        self._closed = False
        self._unreserved = False  # the newest file may be sparse still (_reserve_last)
        # (file name, position) up to which the last file's pages are faulted in.
        self._ready: tuple[str, int] = ("", 0)
        self._can_prefault = True  # False once the kernel showed it cannot
        self._spare_lock = threading.Lock()

    def load(self) -> None:
        if not os.path.isdir(self.directory):
            return
        if self.writable:
            remove_leftovers(self.directory)
        paths, cut_short = index_files(self.directory)
        if self.writable:
            for path in cut_short:
                log.warning("removing index file %s: shorter than its header", path)
                os.remove(path)
        configured = (self.hash_slot_num, self.index_num)
        siblings = settled_geometries(paths, configured)
        for path in paths:
            try:
                slots, number = file_geometry(path, configured, siblings=siblings)
                if (slots, number) != configured:
                    log.info("index file %s has geometry %d x %d", path, slots, number)
                self.files.append(IndexFile(path, slots, number, writable=self.writable))
            except ValueError as e:
                if self.writable:  # it would write into it, or repair it
                    raise ConfigError(str(e)) from e
                log.warning("%s; a reader passes over it", e)
            except FileNotFoundError:
                if self.writable:
                    raise
                # A writer's retention deleted it since the listing: nothing to read.
        if self.writable and self.files:
            self._reserve_last()

    def _reserve_last(self) -> None:
        """Give the newest file the blocks of what it holds and of the entries to come
        (RocketMQ makes it sparse; nothing is known of a loaded file's blocks), so that no
        index write meets a full disk as a SIGBUS. On a full disk the store still opens;
        the first index write tries again and fails cleanly instead."""
        last = self.files[-1]
        try:
            last.reserve_blocks()
            self._unreserved = False
        except StoreError as e:
            log.warning("%s; index writes fail until there is room", e)
            self._unreserved = True

    def refresh(self) -> None:
        """Read-only openers: map files the writer added, drop those its retention
        deleted, and re-read every header."""
        if not os.path.isdir(self.directory):
            return
        names = {n for n in os.listdir(self.directory) if is_index_file_name(n)}
        files = []
        for f in self.files:
            if f.name in names:
                files.append(f)
            else:
                f.close()  # a query holding it keeps its mapping until it releases
        known = {f.name for f in files}
        siblings = {layout.file_size(f.hash_slot_num, f.index_num): f.geometry for f in files}
        configured = (self.hash_slot_num, self.index_num)
        for name in sorted(names - known):
            path = os.path.join(self.directory, name)
            try:
                slots, number = file_geometry(path, configured, siblings=siblings)
                files.append(IndexFile(path, slots, number, writable=False))
            except (OSError, ValueError, CorruptDataError):
                continue
        files.sort(key=lambda f: f.name)
        self.files = files
        for f in files:
            f.refresh_header()

    # --- writing ----------------------------------------------------------------------

    def _new_file_name(self) -> str:
        now = int(time.time() * 1000)
        if now <= self._last_name_ms:
            now = self._last_name_ms + 1
        existing = self.files[-1].name if self.files else ""
        name = index_file_name(now)
        if name <= existing:  # keep names strictly increasing (spec 15.6)
            # Right after the last name, however far ahead of the clock that is (a store
            # from a machine whose clock ran fast): counting up to it took forever.
            after = index_file_ms(existing)
            if after is not None:
                with contextlib.suppress(ValueError, OverflowError, OSError):
                    name = index_file_name(max(now, after + 1))
                    now = max(now, after + 1)
        for _ in range(3_600):  # a repeated local hour, at most, in one-second steps
            if name > existing:
                break
            now += 1000
            try:
                name = index_file_name(now)
            except (ValueError, OverflowError, OSError):  # past the year 9999
                break
        if name <= existing:
            raise StoreError(
                f"index file {existing} in {self.directory} is named for no time a new file "
                "can follow; move it away (rocketstore rebuild makes the index again)"
            )
        self._last_name_ms = now
        return name

    def current_file(self) -> IndexFile:
        """The last file if it is not full, else a new file inheriting its end values."""
        with self._lock:
            last = self.files[-1] if self.files else None
            if last is not None and not last.is_write_full:
                if self._unreserved:
                    last.reserve_blocks()  # StoreError: WRITE_INDEX_FILE_ERROR, no SIGBUS
                    self._unreserved = False
                return last
            os.makedirs(self.directory, exist_ok=True)
            if last is not None:
                crash_point(DURING_INDEX_ROLLOVER)
            path = os.path.join(self.directory, self._new_file_name())
            new = IndexFile(
                path,
                self.hash_slot_num,
                self.index_num,
                writable=True,
                create=True,
                end_phy_offset=last.end_phy_offset if last else 0,
                end_timestamp=last.end_timestamp if last else 0,
                mapping=self._take_spare(path),
            )
            self._made_directory = False  # it holds a real file now
            self.files.append(new)
            if last is not None:
                last.flush()
                if self.on_full_file_flushed is not None:
                    self.on_full_file_flushed(last.end_timestamp)
            return new

    def build_index(self, record: DispatchedKeys) -> None:
        """Index one dispatched record (spec 4.4); the file is got or created first, for
        every record, as RocketMQ's IndexService does."""
        current = self.current_file()
        if self._already_indexed(record.commit_log_offset, current):
            return
        if not sysflag.gets_index_entry(record.sys_flag):
            return
        if record.uniq_key:
            current = self._put(current, f"{record.topic}#{record.uniq_key}", record)
        for key in split_keys(record.keys):
            current = self._put(current, f"{record.topic}#{key}", record)

    def _already_indexed(self, offset: int, current: IndexFile) -> bool:
        """RocketMQ skips records below the index's end offset. A record *at* the end was
        indexed whole by the call that set it (or completed by recovery), so it is skipped
        too: re-dispatch after a crash must not add its keys a second time."""
        end = current.end_phy_offset
        if offset < end:
            return True
        return offset == end and any(f.entry_count for f in reversed(self.files))

    def _put(
        self, current: IndexFile, key: str, record: DispatchedKeys, key_hash: int | None = None
    ) -> IndexFile:
        while not current.put_key(key, record.commit_log_offset, record.store_timestamp, key_hash):
            current = self.current_file()
        return current

    def build_index_batch(self, records: list[DispatchedKeys]) -> None:
        """``build_index`` for a run of records (CommitLog order), through
        :meth:`build_index_hashed`."""
        if not records:
            self.current_file()
            return
        keys: list[str] = []
        offsets: list[int] = []
        stamps: list[int] = []
        for record in records:
            if not sysflag.gets_index_entry(record.sys_flag):
                continue
            texts = [f"{record.topic}#{record.uniq_key}"] if record.uniq_key else []
            texts.extend(f"{record.topic}#{key}" for key in split_keys(record.keys))
            keys.extend(texts)
            offsets.extend([record.commit_log_offset] * len(texts))
            stamps.extend([record.store_timestamp] * len(texts))
        self.build_index_hashed(
            index_key_hash_many(keys) if keys else np.zeros(0, dtype=np.int64),
            np.asarray(offsets, dtype=np.int64),
            np.asarray(stamps, dtype=np.int64),
            last_offset=records[-1].commit_log_offset,
        )

    def build_index_hashed(
        self,
        key_hashes: npt.NDArray[np.int64],
        phy_offsets: npt.NDArray[np.int64],
        store_timestamps: npt.NDArray[np.int64],
        *,
        last_offset: int,
    ) -> int:
        """Index a run of records in bulk from their entries (hashes already computed, in
        put order: by record, UNIQ_KEY first); ``last_offset`` is the run's last record,
        with entries or not. Files, entries and rollovers are those of ``build_index`` one
        record at a time, including the rule that a record arriving after a file filled up
        creates the next file even when it has no keys. Returns the entries put."""
        current = self.current_file()
        if not len(key_hashes):
            return 0
        # _already_indexed, for every entry at once (the file's end only moves to offsets
        # of this run, which grow, so testing against the end before the run is the same).
        end = current.end_phy_offset
        keep = phy_offsets > end
        if not any(f.entry_count for f in self.files):
            keep |= phy_offsets == end
        if not keep.all():
            key_hashes, phy_offsets = key_hashes[keep], phy_offsets[keep]
            store_timestamps = store_timestamps[keep]
        if not len(key_hashes):
            return 0
        done = 0
        while done < len(key_hashes):
            current = self.current_file()
            done += current.put_keys_bulk(
                key_hashes[done:], phy_offsets[done:], store_timestamps[done:]
            )
        if current.is_write_full and int(phy_offsets[-1]) < last_offset:
            self.current_file()  # a later record of the run would have created it
        return done

    # --- reading ----------------------------------------------------------------------

    def candidates(self, key: str) -> list[int]:
        """CommitLog offsets whose index hash matches ``key`` (``topic#key``), newest file
        first; within a file newest entry first."""
        key_hash = index_key_hash(key)
        found: list[int] = []
        for index_file in reversed(self.files[:]):  # (a copy: retention may delete meanwhile)
            try:  # one C call on the mapping: no reference needed (see
                hits = index_file.raw_chain(key_hash)  # MappedFile.mapping_for_buffer_call)
            except (FileRemovedError, ValueError):
                continue  # deleted by retention since the list was copied
            found += [offset for offset, _ in hits]
        return found

    def last_update(self) -> tuple[int, int]:
        """(endTimestamp, endPhyOffset) of the newest file."""
        if not self.files:
            return 0, 0
        last = self.files[-1]
        return last.end_timestamp, last.end_phy_offset

    # --- maintenance ------------------------------------------------------------------

    def truncate_from(self, commit_log_offset: int, store_time_of: Callable[[int], int]) -> int:
        """Forget every entry pointing at or past ``commit_log_offset``: whole files that
        start there are deleted, the file that straddles it loses its newest entries.
        Returns the number of entries removed."""
        removed = 0
        with self._lock:
            while self.files:
                last = self.files[-1]
                if (
                    last.entry_count == 0
                    and len(self.files) > 1
                    and self.files[-2].end_phy_offset >= commit_log_offset
                ):
                    # An empty newest file (made just before a crash) hides nothing: the
                    # one before it holds entries past the end.
                    self.files.pop().destroy()
                    continue
                if last.entry_count > 0 and last.begin_phy_offset >= commit_log_offset:
                    removed += last.entry_count
                    self.files.pop().destroy()
                    continue
                removed += last.truncate_from(commit_log_offset, store_time_of)
                break
        return removed

    def expired_files(self, min_commit_log_offset: int) -> list[str]:
        """Paths of the leading files (never the last) whose entries all point below the
        CommitLog min (endPhyOffset < min, spec 4.4): what ``delete_expired`` deletes."""
        files = list(self.files)[:-1]
        paths: list[str] = []
        for index_file in files:
            if index_file.end_phy_offset >= min_commit_log_offset:
                break
            paths.append(index_file.path)
        return paths

    def delete_expired(self, min_commit_log_offset: int) -> int:
        deleted = 0
        with self._lock:
            while len(self.files) > 1 and self.files[0].end_phy_offset < min_commit_log_offset:
                self.files.pop(0).destroy()  # a query holding it keeps its mapping
                deleted += 1
        return deleted

    def destroy_all(self) -> None:
        with self._lock:
            for f in self.files:
                f.destroy()
            self.files = []

    def flush(self) -> None:
        for f in list(self.files):
            f.flush()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._drop_spare()
            if self._made_directory and not self.files:
                with contextlib.suppress(OSError):
                    os.rmdir(self.directory)
        for f in self.files:
            f.close()

    # --- ahead of need (the prefaulter's thread) ---------------------------------------

    def prefault_ahead(self) -> bool:
        """Take page faults the dispatcher would otherwise wait for; True if there is
        more to do. The first write to each page of an index file costs a fault, and the
        first of a new file also the kernel's zeroing of a readahead window around it: a
        new file's first 100,000 keys took twice as long as the next. So the next file is
        made ahead of need (once the last one is nearly full, or there is none) with its
        slots and first entries faulted in, and the last file's entries are faulted in
        ``ENTRIES_AHEAD_BYTES`` ahead of the writer (``MappedFile.prefault``: bytes
        unchanged). False at once where the kernel cannot prefault."""
        if not self.writable or native_io.populate_write is None or not self._can_prefault:
            return False
        if not self._make_spare_if_due():
            log.info("index prefault unavailable here; the dispatcher takes its faults")
            self._can_prefault = False
            return False
        return self._fault_entries_ahead()

    def _make_spare_if_due(self) -> bool:
        """Make the spare if it is due; False if prefaulting is not possible here."""
        # One maker at a time (two would make the same file); a roll does not wait for it.
        with self._spare_lock:
            try:
                return self._make_spare_locked()
            except (OSError, StoreError) as e:  # e.g. no space: the roll makes its own file
                log.warning("could not make the next index file ahead: %s", e)
                return False

    def _spare_due(self, last: IndexFile | None) -> bool:
        """No spare yet, and none or little room left in ``last`` (the last file)."""
        if self._spare is not None:
            return False
        return last is None or self.index_num - last.index_count <= self.index_num * SPARE_MARGIN

    def _make_spare_locked(self) -> bool:
        with self._lock:
            if self._closed or not self._spare_due(self.files[-1] if self.files else None):
                return True
            made_directory = not os.path.isdir(self.directory)
            os.makedirs(self.directory, exist_ok=True)
            self._made_directory |= made_directory
        size = layout.file_size(self.hash_slot_num, self.index_num)
        spare = IndexMapping(
            os.path.join(self.directory, SPARE_NAME),
            size,
            writable=True,
            create=True,
            hash_slot_num=self.hash_slot_num,
        )
        # Only pages with their blocks (see _fault_entries_ahead).
        first_entries = layout.entry_position(self.hash_slot_num, 1)
        ahead = min(first_entries + ENTRIES_AHEAD_BYTES, spare.reserved_end)
        ok = True
        for start in range(0, ahead, PREFAULT_STEP_BYTES):
            end = min(start + PREFAULT_STEP_BYTES, ahead)
            if self._closed:
                break
            if not spare.prefault(start, end):
                ok = False
                break
        with self._lock:
            if ok and not self._closed and self._spare is None:
                self._spare = spare
                return True
        spare.destroy()
        return ok

    def _take_spare(self, path: str) -> IndexMapping | None:
        """The spare, renamed to ``path``, for a new file (None if there is none)."""
        spare, self._spare = self._spare, None
        if spare is None:
            return None
        try:
            spare.rename(path)
        except OSError as e:
            log.warning("could not take the index spare (%s); making the file anew", e)
            spare.destroy()
            return None
        return spare

    def _drop_spare(self) -> None:
        spare, self._spare = self._spare, None
        if spare is not None:
            spare.destroy()

    def _fault_entries_ahead(self) -> bool:
        with self._lock:
            last = self.files[-1] if self.files else None
        if last is None or not last.writable or last.is_write_full:
            return False
        name, ready = self._ready
        position = last.next_entry_position()
        start = max(position, ready) if name == last.name else position
        # Only pages with their blocks: a fault into a hole may need a block the disk lacks.
        target = min(position + ENTRIES_AHEAD_BYTES, last.reserved_end)
        if start >= target:
            return False
        end = min(start + PREFAULT_STEP_BYTES, target)
        if not last.prefault(start, end):
            return False
        self._ready = (last.name, end)
        return end < target

    def wants_prefault(self) -> bool:
        """Whether the dispatcher has used half of the entries faulted in ahead of it."""
        if not self.writable or native_io.populate_write is None or not self._can_prefault:
            return False
        last = self.files[-1] if self.files else None
        if self._spare_due(last):
            return True
        if last is None:
            return False  # the spare waits for the first file
        name, ready = self._ready
        due = min(last.next_entry_position() + ENTRIES_AHEAD_BYTES // 2, last.file_size)
        return name != last.name or due > ready
