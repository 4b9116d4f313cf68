"""Building an index file's hash chains in bulk: the entries of many keys sorted by
slot, chained to each other and to what the slots held (``RunChainer``), and written as
whole blocks (``write_blocks``), for a rebuild or a batch of dispatched keys.

Layer: structures. Pure arithmetic over numpy arrays but ``write_blocks``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from rocketstore.files.regular_file import open_store_file
from rocketstore.format import index_layout as layout
from rocketstore.format import native

_INT_MAX = 0x7FFFFFFF
ENTRY_DTYPE = np.dtype(
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

    entries: npt.NDArray[np.void]  # ENTRY_DTYPE, big-endian: the file's bytes
    runs: SlotRuns


def join_runs(
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
    entries = np.empty(count, dtype=ENTRY_DTYPE)
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
                entries = np.empty(high - low, dtype=ENTRY_DTYPE)
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
            linked, heads = join_runs(self._newest, runs)
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
