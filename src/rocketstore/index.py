"""IndexFiles (``index/<yyyyMMddHHmmssSSS>``) and the index service over them.

Layer: structures. An index file maps ``topic#key`` hashes to CommitLog offsets through
hash slots and chained entries (layout in :mod:`rocketstore.format.index_layout`). The
index holds hashes only: callers must read the record and compare topic and key.
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from rocketstore.crashpoints import DURING_INDEX_ROLLOVER, crash_point
from rocketstore.errors import ConfigError, CorruptDataError, FileRemovedError, StoreError
from rocketstore.files import native_io
from rocketstore.files.mapped_file import TMP_SUFFIX, MappedFile, remove_leftovers
from rocketstore.files.regular_file import open_store_file, read_store_file, require_regular
from rocketstore.format import index_layout as layout
from rocketstore.format import native, sysflag
from rocketstore.format.index_geometry import infer_geometry
from rocketstore.format.javahash import index_key_hash, index_key_hash_many
from rocketstore.format.properties import split_keys
from rocketstore.java_ints import JAVA_INT_MAX
from rocketstore.paths import index_dir, index_file_ms, index_file_name, is_index_file_name

log = logging.getLogger(__name__)

# The next index file, made ahead of need (IndexService.prefault_ahead). Its name ends like a
# half-created file's, so every writer deletes it as a leftover after a crash; it sorts before
# every time-stamp name, so a RocketMQ broker, which loads every file of the directory and
# writes into the last, never writes into it. A roll gives it its real name as it takes it.
SPARE_NAME = ".next" + TMP_SUFFIX
# The spare is made once the last file has fewer free entries than this share of its entries.
SPARE_MARGIN = 0.1
# How far past the entries written the pages are faulted in ahead of the dispatcher (and, in
# a spare, from the first entry).
ENTRIES_AHEAD_BYTES = 8 * 1024 * 1024
# A new index file gets the blocks of its header and slot table (slots are written anywhere)
# and of its first entries; the entries, written in order, get theirs this far ahead of the
# writer (IndexFile.reserve_blocks). A whole default file is 420 MB: reserving it all at its
# creation, and the spare's too, held about 840 MB of a disk per store for a few entries.
ENTRIES_RESERVE_BYTES = ENTRIES_AHEAD_BYTES
PREFAULT_STEP_BYTES = 4 * 1024 * 1024  # per call: short enough to notice a stop or a roll

_INT_MAX = 0x7FFFFFFF
_ENTRY_DTYPE = np.dtype(
    [("key_hash", ">i4"), ("phy_offset", ">i8"), ("time_diff", ">i4"), ("prev_index", ">i4")]
)


def _order_by_slot(slots: npt.NDArray[np.int64], count: int) -> npt.NDArray[np.int64]:
    """Positions of a batch grouped by slot, in batch order within each slot."""
    if count < (1 << 31) and int(slots.max(initial=0)) < (1 << 32):
        keys = (slots << 31) | np.arange(count, dtype=np.int64)
        return np.argsort(keys).astype(np.int64, copy=False)
    return np.argsort(slots, kind="stable").astype(np.int64, copy=False)


class EntryPoint(NamedTuple):
    """An entry's CommitLog offset and store time (header begin and end values)."""

    phy_offset: int
    store_timestamp: int


class SlotRuns(NamedTuple):
    """For each slot a block of entries touches (ascending): the numbers of the block's
    oldest and newest entry in that slot."""

    slots: npt.NDArray[np.int64]
    firsts: npt.NDArray[np.int64]
    lasts: npt.NDArray[np.int64]


class ChainedBlock(NamedTuple):
    """Consecutive entries, each linked to the previous entry of its slot within the block;
    a slot's oldest entry in the block links to 0 until it is joined to what came before."""

    entries: npt.NDArray[np.void]  # _ENTRY_DTYPE, big-endian: the file's bytes
    runs: SlotRuns


def _join_runs(
    newest: npt.NDArray[np.integer], runs: SlotRuns
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.integer]]:
    """Move ``newest`` (per slot: the newest entry so far, 0 for none) past a block's
    runs; return which of the runs follow an earlier entry of their slot, and that entry
    (the prev_index of the run's oldest entry, where it follows one)."""
    heads = newest[runs.slots]
    newest[runs.slots] = runs.lasts
    return heads != 0, heads


def time_diffs(
    stamps: npt.NDArray[np.int64], begin_timestamp: int, *, opens_file: bool
) -> npt.NDArray[np.int64]:
    """Entries' timeDiff: seconds from the header's begin time, clipped to [0, INT_MAX].
    The file's first entry is measured from the inherited begin time, and the begin time
    then becomes that entry's own (RocketMQ's ``putKey``); a begin of 0 gives 0."""
    count = len(stamps)
    diffs = np.empty(count, dtype=np.int64)
    if not count:
        return diffs
    begin = begin_timestamp
    start = 0
    if opens_file:
        diffs[0] = 0 if begin <= 0 else min(_INT_MAX, max(0, int(stamps[0]) - begin) // 1000)
        begin = int(stamps[0])
        start = 1
    if begin <= 0:
        diffs[start:] = 0
    else:
        diffs[start:] = np.clip((stamps[start:] - begin) // 1000, 0, _INT_MAX)
    return diffs


def chain_block(
    key_hashes: npt.NDArray[np.int64],
    phy_offsets: npt.NDArray[np.int64],
    diffs: npt.NDArray[np.int64],
    *,
    hash_slot_num: int,
    first_number: int,
) -> ChainedBlock:
    """Entries numbered from ``first_number``, chained within the block."""
    count = len(key_hashes)
    slots = key_hashes % hash_slot_num
    # Entries grouped by slot, in block order within a slot: one plain sort of unique
    # (slot, position) keys gives a stable sort's order at about a third of its cost.
    order = _order_by_slot(slots, count)
    sorted_slots = slots[order]
    same_as_before = np.zeros(count, dtype=bool)
    same_as_before[1:] = sorted_slots[1:] == sorted_slots[:-1]
    prev_sorted = np.zeros(count, dtype=np.int64)
    following = np.nonzero(same_as_before)[0]
    prev_sorted[following] = order[following - 1] + first_number
    entries = np.empty(count, dtype=_ENTRY_DTYPE)
    entries["key_hash"] = key_hashes
    entries["phy_offset"] = phy_offsets
    entries["time_diff"] = diffs
    entries["prev_index"][order] = prev_sorted
    first_in_group = ~same_as_before
    last_in_group = np.ones(count, dtype=bool)
    last_in_group[:-1] = first_in_group[1:]
    runs = SlotRuns(
        sorted_slots[first_in_group],
        order[first_in_group] + first_number,
        order[last_in_group] + first_number,
    )
    return ChainedBlock(entries, runs)


# Entries chained per chunk of this many: the sort and the scatters of a chunk stay in the
# CPU cache, which makes a long run several times faster than one sort over all of it.
CHAIN_CHUNK = 32_768


_NO_RUNS = SlotRuns(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))


class RunChainer:
    """Chains a long run of entries (a rebuild's share of a file) chunk by chunk against a
    private slot table, so no array of the whole run is ever built: each chunk comes out
    linked to the run's earlier chunks, ready to write; ``runs`` then gives the run's
    slot runs. Together the chunks are :func:`chain_block` of the whole run.
    ``begin_timestamp`` and ``opens_file`` are those of :func:`time_diffs` for the run's
    first entry."""

    def __init__(
        self, *, hash_slot_num: int, first_number: int, begin_timestamp: int, opens_file: bool
    ):
        self.hash_slot_num = hash_slot_num
        self.next_number = first_number
        self._begin = begin_timestamp
        self._opens_file = opens_file
        self._newest = np.zeros(hash_slot_num, dtype=np.int32)  # per slot: newest entry
        self._oldest = np.zeros(hash_slot_num, dtype=np.int32)  # and oldest, of the run
        self.first: EntryPoint | None = None
        self.last: EntryPoint | None = None

    def chunks(
        self,
        key_hashes: npt.NDArray[np.integer],
        phy_offsets: npt.NDArray[np.integer],
        store_timestamps: npt.NDArray[np.integer],
    ) -> Iterator[tuple[int, ChainedBlock]]:
        """The next entries of the run (arrays of any integer type, e.g. views of a mapped
        spill file), as (first entry number, block) per chunk."""
        for low in range(0, len(key_hashes), CHAIN_CHUNK):
            high = min(len(key_hashes), low + CHAIN_CHUNK)
            stamps = store_timestamps[low:high].astype(np.int64)
            offsets = phy_offsets[low:high].astype(np.int64)
            opens = self._opens_file and self.first is None
            diffs = time_diffs(stamps, self._begin, opens_file=opens)
            if opens:
                self._begin = int(stamps[0])  # the file's begin time from now on
            if self.first is None:
                self.first = EntryPoint(int(offsets[0]), int(stamps[0]))
            self.last = EntryPoint(int(offsets[-1]), int(stamps[-1]))
            number = self.next_number
            if native.chain_private is not None:
                entries = np.empty(high - low, dtype=_ENTRY_DTYPE)
                native.chain_private(
                    self._newest,
                    self._oldest,
                    number,
                    np.ascontiguousarray(key_hashes[low:high], dtype=np.int64),
                    offsets,
                    diffs,
                    entries,
                )
                self.next_number += len(entries)
                yield number, ChainedBlock(entries, _NO_RUNS)  # runs: see ``runs``
                continue
            block = chain_block(
                key_hashes[low:high].astype(np.int64),
                offsets,
                diffs,
                hash_slot_num=self.hash_slot_num,
                first_number=number,
            )
            runs = block.runs
            linked, heads = _join_runs(self._newest, runs)
            block.entries["prev_index"][runs.firsts[linked] - number] = heads[linked]
            opened = ~linked  # slots this run had not touched yet
            self._oldest[runs.slots[opened]] = runs.firsts[opened]
            self.next_number += len(block.entries)
            yield number, block

    @property
    def runs(self) -> SlotRuns:
        slots = np.flatnonzero(self._newest).astype(np.int64)
        return SlotRuns(
            slots, self._oldest[slots].astype(np.int64), self._newest[slots].astype(np.int64)
        )


def write_blocks(path: str, hash_slot_num: int, blocks: Iterable[tuple[int, ChainedBlock]]) -> int:
    """Write blocks of entries (first entry number, block) into the index file at ``path``
    (created sparse if missing) without mapping it: parts of one file are written by
    parallel workers. Returns the entries written."""
    written = 0
    fd = open_store_file(path, os.O_WRONLY | os.O_CREAT)  # (a FIFO would block a plain open)
    try:
        for number, block in blocks:
            data = block.entries.view(np.uint8).data
            position = layout.entry_position(hash_slot_num, number)
            done = 0
            while done < len(data):
                done += os.pwrite(fd, data[done:], position + done)
            written += len(block.entries)
    finally:
        os.close(fd)
    return written


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
        mapping: _IndexMapping | None = None,
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
            self._file = _IndexMapping(
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
            time_diff = min(_INT_MAX, max(0, store_timestamp - begin) // 1000)
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
            dtype=_ENTRY_DTYPE,
            count=self.index_num,
            offset=layout.entry_position(self.hash_slot_num, 0),
        )
        for runs in blocks:
            linked, heads = _join_runs(newest, runs)
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


class _IndexMapping(MappedFile):
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


@dataclass
class DispatchedKeys:
    """What the index needs from one dispatched record."""

    topic: str
    commit_log_offset: int
    store_timestamp: int
    sys_flag: int
    uniq_key: str | None
    keys: str | None


def unfinished(path: str) -> bool:
    """An index file its creator died making: shorter than a header. It holds nothing
    (RocketMQ, loading it, maps it to its configured size and finds it empty): a writer
    removes it, a reader passes it over."""
    return os.path.getsize(path) < layout.HEADER_SIZE


def file_geometry(
    path: str, configured: tuple[int, int], *, siblings: dict[int, tuple[int, int]] | None = None
) -> tuple[int, int]:
    """(hash_slot_num, index_num) of the index file at ``path``: that of a file of the
    same size in ``siblings`` (size -> geometry, ``settled_geometries``: one broker makes
    all its files alike, so one file of a size is read for all), else ``configured``
    when its size fits that, else what its entries show (format.index_geometry), else
    four entries per slot (RocketMQ's default ratio) when its size fits that and it
    holds no entries. ValueError, naming the file and what to do, when nothing settles
    it."""
    size = os.path.getsize(path)
    found = siblings.get(size) if siblings else None
    if found is None:
        found = _settled_geometry(path, size, configured)
    if found is not None:
        return found
    if size > JAVA_INT_MAX:
        raise ValueError(
            f"index file {path} is {size} bytes, more than any index file RocketMQ makes "
            f"(its size is a Java int, at most {JAVA_INT_MAX}); it may be damaged or "
            "extended: move it away and rebuild the index (rocketstore rebuild)"
        )
    if not _holds_no_entries(path):
        # Entries that fit no geometry its size allows: a guess would misread them (and
        # a writer's repair would rewrite the wrong bytes).
        raise ValueError(
            f"index file {path} holds entries that read as no index file of its size "
            f"({size} bytes); it may be damaged: set max_hash_slot_num and max_index_num "
            "to those of the broker that wrote it, or rebuild the index (rocketstore rebuild)"
        )
    try:
        return layout.geometry_from_size(size)
    except ValueError:
        raise ValueError(
            f"index file {path} is {size} bytes: not the configured geometry ({configured[0]} "
            f"slots x {configured[1]} entries), and neither it nor another file of its size "
            "holds entries to tell its own; set max_hash_slot_num and max_index_num "
            "(RocketMQ's maxHashSlotNum and maxIndexNum) to those of the broker that wrote it"
        ) from None


def _settled_geometry(path: str, size: int, configured: tuple[int, int]) -> tuple[int, int] | None:
    """The geometry the file's size (the configured one) or its entries settle."""
    if size == layout.file_size(*configured):
        return configured
    if size < layout.HEADER_SIZE:
        raise ValueError(
            f"index file {path} is {size} bytes, shorter than its header: its creation was "
            "cut short (a writer removes it)"
        )
    if size == layout.HEADER_SIZE:
        return None
    with (
        os.fdopen(open_store_file(path), "rb") as f,
        mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm,
    ):
        return infer_geometry(mm)


def settled_geometries(paths: list[str], configured: tuple[int, int]) -> dict[int, tuple[int, int]]:
    """Size -> geometry of the whole index files in ``paths`` whose size or entries settle
    it: the ``siblings`` of ``file_geometry``."""
    settled: dict[int, tuple[int, int]] = {}
    for path in paths:
        try:
            size = os.path.getsize(path)
            if size in settled or size < layout.HEADER_SIZE:
                continue
            found = _settled_geometry(path, size, configured)
        except OSError:  # gone meanwhile (a writer's retention, beside a reader)
            continue
        if found is not None:
            settled[size] = found
    return settled


def _holds_no_entries(path: str) -> bool:
    """The header's indexCount says no entry was counted (or there is no header)."""
    header = read_store_file(path, layout.HEADER_SIZE)
    return len(header) < layout.HEADER_SIZE or layout.decode_header(header).index_count <= 1


def index_files(directory: str) -> tuple[list[str], list[str]]:
    """Paths of the index files in ``directory`` in name (time) order: the whole ones,
    and the ``unfinished`` ones (files gone meanwhile are in neither)."""
    if not os.path.isdir(directory):
        return [], []
    names = sorted(n for n in os.listdir(directory) if is_index_file_name(n))
    whole: list[str] = []
    cut_short: list[str] = []
    for name in names:
        path = os.path.join(directory, name)
        with contextlib.suppress(FileNotFoundError):  # a writer's retention, beside a reader
            # A FIFO (or directory...) so named: refused by its path, as the queues' files
            # are, instead of a later open waiting for a writer that never comes.
            require_regular(path)
            (cut_short if unfinished(path) else whole).append(path)
    return whole, cut_short


def newest_geometry(directory: str, configured: tuple[int, int]) -> tuple[int, int] | None:
    """``file_geometry`` of the newest whole index file in ``directory``, the one a
    writer's new files follow; None when there is none."""
    paths, _ = index_files(directory)
    if not paths:
        return None
    return file_geometry(paths[-1], configured, siblings=settled_geometries(paths, configured))


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
        self._spare: _IndexMapping | None = None
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
        spare = _IndexMapping(
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

    def _take_spare(self, path: str) -> _IndexMapping | None:
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
