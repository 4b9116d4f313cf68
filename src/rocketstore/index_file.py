"""One IndexFile (``index/<yyyyMMddHHmmssSSS>``): its header, hash slots and chained
entries (layout in :mod:`rocketstore.format.index_layout`), put one key or many at a time,
read by key hash, repaired and cut after a crash.

Layer: structures. The index holds hashes only: callers must read the record and compare
topic and key.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable, Iterable

import numpy as np
import numpy.typing as npt

from rocketstore.errors import ConfigError, FileRemovedError
from rocketstore.files.mapped_file import MappedFile
from rocketstore.format import index_layout as layout
from rocketstore.format import native
from rocketstore.format.javahash import index_key_hash
from rocketstore.index_chain import (
    ENTRY_DTYPE,
    EntryPoint,
    SlotRuns,
    chain_block,
    join_runs,
    time_diffs,
)
from rocketstore.java_ints import JAVA_INT_MAX

# How far past the entries written the pages are faulted in ahead of the dispatcher (and, in
# a spare, from the first entry).
ENTRIES_AHEAD_BYTES = 8 * 1024 * 1024
# A new index file gets the blocks of its header and slot table (slots are written anywhere)
# and of its first entries; the entries, written in order, get theirs this far ahead of the
# writer (IndexFile.reserve_blocks). A whole default file is 420 MB: reserving it all at its
# creation, and the spare's too, held about 840 MB of a disk per store for a few entries.
ENTRIES_RESERVE_BYTES = ENTRIES_AHEAD_BYTES


class IndexFile:
    """One index file. Header values are kept in memory and written through as they change,
    the way RocketMQ's IndexHeader does (so the bytes match a 4.9 broker's)."""

    def __init__(
        self,
        path: str,
        hash_slot_num: int,
        index_num: int,
        *,
        writable: bool,
        create: bool = False,
        end_phy_offset: int = 0,
        end_timestamp: int = 0,
        mapping: IndexMapping | None = None,
    ):
        """``mapping``: with ``create``, a fresh file already mapped at ``path`` (a spare)."""
        self.path = path
        self.name = os.path.basename(path)
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        size = layout.file_size(hash_slot_num, index_num)
        if mapping is not None:
            self._file = mapping
        else:
            self._file = IndexMapping(
                path, size, writable=writable, create=create, hash_slot_num=hash_slot_num
            )
        # What the C key lookup reads, as plain attributes: this file's buffer_mapping
        # (None once it is closed), hash_slot_num and index_count.
        self.mapped_file: MappedFile = self._file
        if create:
            header = layout.IndexHeader(0, 0, 0, 0, 0, 0)
            self.header = header
            self.hash_slot_count = 0
            self.index_count = 1
            # A new file starts where the previous one ended (RocketMQ's constructor).
            if end_phy_offset > 0:
                self._set(begin_phy_offset=end_phy_offset, end_phy_offset=end_phy_offset)
            if end_timestamp > 0:
                self._set(begin_timestamp=end_timestamp, end_timestamp=end_timestamp)
        else:
            self.header = layout.decode_header(self._file.read(0, layout.HEADER_SIZE))
            self.hash_slot_count = self.header.hash_slot_count
            self.index_count = max(1, self.header.index_count)

    @property
    def geometry(self) -> tuple[int, int]:
        """(hash_slot_num, index_num)."""
        return self.hash_slot_num, self.index_num

    # --- header -----------------------------------------------------------------------

    # The header bytes ``refresh_header`` last decoded (None: not since the last ``_set``).
    _refreshed_from: bytes | None = None

    def _set(self, **fields: int) -> None:
        self._refreshed_from = None
        self.header = self.header._replace(**fields)
        layout.pack_header_into(self._file.mm, self.header)

    @property
    def begin_timestamp(self) -> int:
        return self.header.begin_timestamp

    @property
    def end_timestamp(self) -> int:
        return self.header.end_timestamp

    @property
    def begin_phy_offset(self) -> int:
        return self.header.begin_phy_offset

    @property
    def end_phy_offset(self) -> int:
        return self.header.end_phy_offset

    def reserve_blocks(self, entries: int = 0) -> None:
        """Allocate the blocks of the header, the slot table and the entries up to
        ``entries`` past the written ones, plus ``ENTRIES_RESERVE_BYTES`` (StoreError on a
        full disk, before anything is written); the bytes stay. Every write into the
        mapping lands in reserved blocks, so a full disk is an error, never a SIGBUS."""
        end = layout.entry_position(
            self.hash_slot_num, min(self.index_count + entries, self.index_num)
        )
        if end > self._file.reserved_end:
            self._file.reserve_to(end)

    @property
    def reserved_end(self) -> int:
        """Bytes from the file's start known to have their blocks."""
        return self._file.reserved_end

    @property
    def is_write_full(self) -> bool:
        return self.index_count >= self.index_num

    @property
    def entry_count(self) -> int:
        return self.index_count - 1

    # --- writing ----------------------------------------------------------------------

    def put_key(
        self, key: str, phy_offset: int, store_timestamp: int, key_hash: int | None = None
    ) -> bool:
        """Add an entry; False when the file is full (spec 4.2). ``key_hash`` may be given
        when the caller hashed a batch of keys at once."""
        if self.is_write_full:
            return False
        if (
            layout.entry_position(self.hash_slot_num, self.index_count + 1)
            > self._file.reserved_end
        ):
            self.reserve_blocks(1)
        if key_hash is None:
            key_hash = index_key_hash(key)
        slot = key_hash % self.hash_slot_num
        slot_pos = layout.slot_position(slot)
        mm = self._file.mm
        slot_value = layout.decode_slot(mm, slot_pos)
        # RocketMQ tests "> indexCount"; valid heads are always below it, and ">=" also
        # ignores the uncounted entry a crash may have left (see repair_uncounted_writes).
        if slot_value <= 0 or slot_value >= self.index_count:
            slot_value = 0
        begin = self.header.begin_timestamp
        if begin <= 0:
            time_diff = 0
        else:
            time_diff = min(JAVA_INT_MAX, max(0, store_timestamp - begin) // 1000)
        number = self.index_count
        entry = layout.IndexEntry(key_hash, phy_offset, time_diff, slot_value)
        layout.pack_entry_into(mm, layout.entry_position(self.hash_slot_num, number), entry)
        layout.pack_slot_into(mm, slot_pos, number)
        changes: dict[str, int] = {}
        if self.index_count <= 1:
            changes["begin_phy_offset"] = phy_offset
            changes["begin_timestamp"] = store_timestamp
        if slot_value == 0:
            self.hash_slot_count += 1
        self.index_count += 1
        changes.update(
            hash_slot_count=self.hash_slot_count,
            index_count=self.index_count,
            end_phy_offset=phy_offset,
            end_timestamp=store_timestamp,
        )
        self._set(**changes)
        return True

    def put_keys_bulk(
        self,
        key_hashes: npt.NDArray[np.int64],
        phy_offsets: npt.NDArray[np.int64],
        store_timestamps: npt.NDArray[np.int64],
    ) -> int:
        """Add as many of the given entries as fit, in order; return how many went in.

        The bytes are exactly those of calling ``put_key`` once per entry: each entry links
        to the previous entry of its slot (earlier in this batch, else the slot's head),
        numbers run on from ``index_count``, and the header ends as the last put leaves it.
        """
        room = self.index_num - self.index_count
        count = min(room, len(key_hashes))
        if count <= 0:
            return 0
        self.reserve_blocks(count)
        offsets = phy_offsets[:count]
        stamps = store_timestamps[:count]
        first_number = self.index_count
        opens_file = first_number <= 1
        diffs = time_diffs(stamps, self.header.begin_timestamp, opens_file=opens_file)
        if native.index_put is not None:
            taken = native.index_put(
                self._file.mm,
                self.hash_slot_num,
                first_number,
                np.ascontiguousarray(key_hashes[:count], dtype=np.int64),
                np.ascontiguousarray(offsets, dtype=np.int64),
                diffs,
            )
            self._after_put(taken, count, offsets, stamps, opens_file=opens_file)
            return count
        block = chain_block(
            key_hashes[:count],
            offsets,
            diffs,
            hash_slot_num=self.hash_slot_num,
            first_number=first_number,
        )
        mm = self._file.mm
        slot_table = np.frombuffer(
            mm, dtype=">i4", count=self.hash_slot_num, offset=layout.HEADER_SIZE
        )
        # Link each slot's oldest entry of the block to the slot's head, when the head is
        # a number below that entry's own (put_key's rule; anything else is an empty slot
        # or leftover garbage).
        runs = block.runs
        heads = slot_table[runs.slots].astype(np.int64)
        valid = (heads > 0) & (heads < runs.firsts)
        block.entries["prev_index"][runs.firsts[valid] - first_number] = heads[valid]
        position = layout.entry_position(self.hash_slot_num, first_number)
        mm[position : position + count * layout.ENTRY_SIZE] = block.entries.tobytes()
        slot_table[runs.slots] = runs.lasts
        del slot_table
        self._after_put(
            len(heads) - int(np.count_nonzero(valid)), count, offsets, stamps, opens_file=opens_file
        )
        return count

    def _after_put(
        self,
        taken_slots: int,
        count: int,
        offsets: npt.NDArray[np.int64],
        stamps: npt.NDArray[np.int64],
        *,
        opens_file: bool,
    ) -> None:
        """The header after ``count`` entries went in, ``taken_slots`` of them into slots
        that had no entry of this file."""
        self.hash_slot_count += taken_slots
        self.index_count += count
        changes: dict[str, int] = {}
        if opens_file:
            changes["begin_phy_offset"] = int(offsets[0])
            changes["begin_timestamp"] = int(stamps[0])
        changes.update(
            hash_slot_count=self.hash_slot_count,
            index_count=self.index_count,
            end_phy_offset=int(offsets[-1]),
            end_timestamp=int(stamps[-1]),
        )
        self._set(**changes)

    def link_blocks(self, blocks: Iterable[SlotRuns], *, first: EntryPoint, last: EntryPoint,
                    entries: int) -> None:  # fmt: skip
        """Finish a fresh file whose entries were written as consecutive blocks by
        :func:`write_blocks` (in parallel, each chained only within itself): link each
        block's oldest entry of a slot to the newest of the earlier blocks, fill the slot
        table and write the header. The bytes are those of putting every entry in order."""
        if self.index_count != 1:
            raise ConfigError(f"{self.path}: link_blocks needs a fresh file")
        if entries <= 0:
            return
        if entries > self.index_num - 1:
            raise ConfigError(f"{self.path}: {entries} entries do not fit {self.index_num - 1}")
        mm = self._file.mm
        newest = np.zeros(self.hash_slot_num, dtype=np.int32)  # entry numbers < 2**31
        table = np.frombuffer(
            mm,
            dtype=ENTRY_DTYPE,
            count=self.index_num,
            offset=layout.entry_position(self.hash_slot_num, 0),
        )
        for runs in blocks:
            linked, heads = join_runs(newest, runs)
            table["prev_index"][runs.firsts[linked]] = heads[linked]
        del table
        slot_table = np.frombuffer(
            mm, dtype=">i4", count=self.hash_slot_num, offset=layout.HEADER_SIZE
        )
        slot_table[:] = newest
        del slot_table
        self.hash_slot_count = int(np.count_nonzero(newest))
        self.index_count = 1 + entries
        self._set(
            begin_phy_offset=first.phy_offset,
            begin_timestamp=first.store_timestamp,
            end_phy_offset=last.phy_offset,
            end_timestamp=last.store_timestamp,
            hash_slot_count=self.hash_slot_count,
            index_count=self.index_count,
        )

    # --- reading ----------------------------------------------------------------------

    def candidates(self, key: str) -> list[tuple[int, int]]:
        """(phy_offset, index_time_ms) of every entry with the key's hash, newest first.

        Index time is only a hint (second precision, rollover quirks): never filter on it.
        """
        begin = self.header.begin_timestamp
        hits = self.raw_chain(index_key_hash(key))
        return [(offset, begin + diff * 1000) for offset, diff in hits]

    def buffer_view(self) -> tuple[mmap.mmap | None, int, int]:
        """(mapped_file.buffer_mapping, hash_slot_num, index_count): what the C key lookup
        reads of the file, as public attributes."""
        return self._file.buffer_mapping, self.hash_slot_num, self.index_count

    def raw_chain(self, key_hash: int) -> list[tuple[int, int]]:
        """(phy_offset, time_diff in seconds) of every entry whose hash is ``key_hash``,
        newest first: the walk ``candidates`` makes."""
        count = self.index_count
        if native.index_chain is not None:
            mm = self._file.mapping_for_buffer_call()
            if mm is None:
                raise FileRemovedError(f"{self.path} is closed")
            hits: list[tuple[int, int]] = native.index_chain(
                mm, self.hash_slot_num, count, key_hash
            )
            return hits
        found: list[tuple[int, int]] = []
        slot = key_hash % self.hash_slot_num
        number = layout.decode_slot(self._file.read(layout.slot_position(slot), 4), 0)
        if number <= 0 or number > count or count <= 1:
            return found
        seen = 0
        while 0 < number <= count and seen <= count:
            seen += 1
            position = layout.entry_position(self.hash_slot_num, number)
            if position + layout.ENTRY_SIZE > self._file.file_size:
                break  # a link past the last entry (a full file's garbage): the chain ends
            entry = layout.decode_entry(self._file.read(position, layout.ENTRY_SIZE), 0)
            if entry.time_diff < 0:
                break
            if entry.key_hash == key_hash:
                found.append((entry.phy_offset, entry.time_diff))
            if entry.prev_index == number:
                break
            number = entry.prev_index
        return found

    def select_phy_offsets(self, key: str, max_num: int, begin: int, end: int) -> list[int]:
        """RocketMQ's ``selectPhyOffset``: hash match and index time within [begin, end]."""
        result: list[int] = []
        for offset, index_time in self.candidates(key):
            if len(result) >= max_num:
                break
            if index_time < begin:
                break
            if index_time <= end:
                result.append(offset)
        return result

    def repair_uncounted_writes(self) -> int:
        """Undo puts cut short by a crash after they wrote entries and slots but before the
        header counted them: such a slot points at an uncounted entry. Its ``prev_index``
        leads, through any other uncounted entries of the same slot (a bulk put links the
        entries of one slot to each other), to the chain head the slot had before; the slot
        gets that head back and the uncounted entries are zeroed. Returns slots restored.
        """
        slots = np.frombuffer(
            self._file.mm, dtype=">i4", count=self.hash_slot_num, offset=layout.HEADER_SIZE
        )
        bad = np.nonzero(slots >= self.index_count)[0]
        mm = self._file.mm
        for slot in bad.tolist():
            number = int(slots[slot])
            steps = 0
            # Entries are written before the slots that point at them, so every uncounted
            # entry a slot reaches was written whole; the walk is bounded all the same.
            while self.index_count <= number < self.index_num and steps < self.index_num:
                position = layout.entry_position(self.hash_slot_num, number)
                entry = layout.decode_entry(mm, position)
                mm[position : position + layout.ENTRY_SIZE] = bytes(layout.ENTRY_SIZE)
                number = entry.prev_index
                steps += 1
            previous = number if 0 < number < self.index_count else 0
            layout.pack_slot_into(mm, layout.slot_position(slot), previous)
        del slots
        return len(bad)

    def last_entry(self) -> layout.IndexEntry | None:
        if self.index_count <= 1:
            return None
        position = layout.entry_position(self.hash_slot_num, self.index_count - 1)
        return layout.decode_entry(self._file.mm, position)

    def trailing_entries_at(self, phy_offset: int) -> int:
        """How many of the newest entries point at ``phy_offset`` (one message's keys)."""
        count = 0
        number = self.index_count - 1
        while number >= 1:
            entry = layout.decode_entry(
                self._file.mm, layout.entry_position(self.hash_slot_num, number)
            )
            if entry.phy_offset != phy_offset:
                break
            count += 1
            number -= 1
        return count

    def truncate_from(self, commit_log_offset: int, store_time_of: Callable[[int], int]) -> int:
        """Remove the newest entries pointing at or past ``commit_log_offset`` (recovery
        after the CommitLog was cut shorter than the index). Returns how many went."""
        mm = self._file.mm
        removed = 0
        while self.index_count > 1:
            number = self.index_count - 1
            position = layout.entry_position(self.hash_slot_num, number)
            entry = layout.decode_entry(mm, position)
            if entry.phy_offset < commit_log_offset:
                break
            slot_pos = layout.slot_position(entry.key_hash % self.hash_slot_num)
            if layout.decode_slot(mm, slot_pos) == number:
                # The newest entry of its chain: its predecessor becomes the head again.
                previous = entry.prev_index if 0 < entry.prev_index < number else 0
                layout.pack_slot_into(mm, slot_pos, previous)
                if previous == 0:
                    self.hash_slot_count = max(0, self.hash_slot_count - 1)
            mm[position : position + layout.ENTRY_SIZE] = bytes(layout.ENTRY_SIZE)
            self.index_count -= 1
            removed += 1
        if removed:
            last = self.last_entry()
            changes = {"hash_slot_count": self.hash_slot_count, "index_count": self.index_count}
            if last is not None:
                stored = store_time_of(last.phy_offset)
                changes["end_phy_offset"] = last.phy_offset
                changes["end_timestamp"] = (
                    stored if stored > 0 else self.header.begin_timestamp + last.time_diff * 1000
                )
            self._set(**changes)
        return removed

    def refresh_header(self) -> None:
        """Read-only openers: pick up the writer's header changes. Decoded only when its
        bytes changed: a key lookup beside a writer calls this each time."""
        mm = self._file.mapping_for_buffer_call()  # (a slice is one C call: no hold)
        try:
            raw = mm[: layout.HEADER_SIZE] if mm is not None else None
        except ValueError:  # unmapped meanwhile
            raw = None
        if raw is None:
            raw = self._file.read(0, layout.HEADER_SIZE)  # (raises FileRemovedError)
        if raw == self._refreshed_from:
            return
        self._refreshed_from = raw
        self.header = layout.decode_header(raw)
        self.index_count = max(1, self.header.index_count)
        self.hash_slot_count = self.header.hash_slot_count

    def flush(self) -> None:
        self._file.flush_all()

    @property
    def writable(self) -> bool:
        return self._file.writable

    @property
    def file_size(self) -> int:
        return self._file.file_size

    def next_entry_position(self) -> int:
        """Where the next entry goes (bytes from the file start)."""
        return layout.entry_position(self.hash_slot_num, self.index_count)

    def prefault(self, position: int, end: int) -> bool:
        """``MappedFile.prefault`` of this file's bytes [position, end)."""
        return self._file.prefault(position, end)

    def hold(self) -> bool:
        """Take a reader reference (False once the file is being deleted); while held, the
        file stays mapped even if retention deletes it."""
        return self._file.hold()

    def release(self) -> None:
        self._file.release()

    def close(self) -> None:
        self._file.close()

    def destroy(self) -> None:
        self._file.destroy()


class IndexMapping(MappedFile):
    """A mapped file whose name is a timestamp, not an offset."""

    def __init__(self, path: str, size: int, *, writable: bool, create: bool, hash_slot_num: int):
        # Index files are named by time, not offset: the offset is never used. A new one
        # gets the blocks of its header, slots (written anywhere) and first entries.
        first = layout.entry_position(hash_slot_num, 1) + ENTRIES_RESERVE_BYTES
        super().__init__(
            path,
            size,
            writable=writable,
            create=create,
            reserve_first=first if create else 0,
            reserve_ahead=ENTRIES_RESERVE_BYTES,
            file_from_offset=0,
        )
        self.wrote_position = size

    def flush_all(self) -> None:
        if self.writable and self.hold():  # a file being deleted needs no flush
            try:
                self.mm.flush()
            finally:
                self.release()
