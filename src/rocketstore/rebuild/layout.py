"""Driver-side layout: join the ranges' scan results into one CommitLog walk, then lay out
the consume-queue and index-file tasks.

Layer: rebuild. Pure bookkeeping over small results; reads at most one spilled index entry
per index file (the entry whose values the next file inherits).
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from rocketstore.errors import CorruptDataError
from rocketstore.format.record_scan import CorruptRegion, Stop
from rocketstore.paths import is_queue_dir_name
from rocketstore.rebuild.passes import (
    IndexPartResult,
    IndexPartTask,
    IndexTask,
    KeyPiece,
    QueueBuild,
    QueuePiece,
    QueueTask,
    ScanResult,
    deal,
)
from rocketstore.rebuild.plan import CommitLogRange

# An index file is cut into parts written in parallel (one wave over the workers), but
# never into parts so small that a task's fixed cost outweighs its work.
MIN_INDEX_PART_ENTRIES = 262_144


class RangesDoNotJoinError(CorruptDataError):
    """Two ranges disagree about where a record starts (or data is missing between them)."""


@dataclass
class Walk:
    """The ranges whose records are dispatched, in order, and what was skipped."""

    used: list[ScanResult] = field(default_factory=list)
    corrupt: list[CorruptRegion] = field(default_factory=list)
    end_offset: int = 0  # where the CommitLog's data ends
    records: int = 0
    # Unreadable bytes after the last valid record (a write torn by a crash): not
    # dispatched, as recovery would cut them; never an error.
    torn_tail: list[CorruptRegion] = field(default_factory=list)


# Says what is at a CommitLog offset where a record was expected but not found: the
# reason it is not a valid record, or None when the bytes there are zero (end of data).
Inspect = Callable[[int], str | None]


def join_ranges(
    ranges: list[CommitLogRange],
    results: list[ScanResult],
    file_size: int,
    *,
    skip_corrupt: bool,
    inspect: Inspect,
) -> Walk:
    """Check that each range's walk ends where the next range's first record starts, and
    collect the corrupt regions: with ``skip_corrupt`` they are listed, otherwise the
    first one fails the job. Damage after the last valid record is a torn tail (listed
    in ``torn_tail``, never an error: recovery cuts it, and so would the single engine).

    A range only validates the records that start inside it, so a record start predicted
    by one range and not found by the next means the record there is invalid (or the data
    ends there, if its bytes are zero).
    """
    walk = Walk()
    expected: int | None = None  # next record start predicted by the previous range
    pending: tuple[int, str] | None = None  # an open corrupt region: start, reason
    ended: int | None = None  # zeros where a record should start (end of data)
    current_file = -1
    skip_file = False
    # Regions not yet known to be followed by a valid record.
    unconfirmed: list[CorruptRegion] = []

    starts = [r.first_offset for r in ranges]

    def confirm(region: CorruptRegion) -> None:
        if not skip_corrupt:
            where = ranges[max(0, bisect.bisect_right(starts, region.offset) - 1)]
            raise RangesDoNotJoinError(f"{where.describe()}: {region.reason}",
                                       position=region.offset)  # fmt: skip
        walk.corrupt.append(region)

    def gap(start: int, until: int | None, reason: str) -> None:
        length = None if until is None else until - start
        unconfirmed.append(CorruptRegion(start, length, reason))

    def missing(at: int) -> None:
        """No record where one was predicted: end of data or the start of damage."""
        nonlocal ended, pending
        reason = inspect(at)
        if reason is None:
            ended = at if ended is None else ended
        else:
            pending = (at, reason)

    for part, result in zip(ranges, results, strict=True):
        if part.file_offset != current_file:
            # A new file: whatever was open in the previous one ends with it.
            if expected is not None and expected < current_file + file_size:
                missing(expected)
            if pending is not None:
                gap(pending[0], current_file + file_size, pending[1])
                pending = None
            current_file, skip_file = part.file_offset, False
            expected = part.file_offset if ended is None else None
        if skip_file:
            continue  # after a blank: the rest of the file holds nothing
        first = None
        if result.first_position is not None:
            first = part.file_offset + result.first_position
        if first is None:
            if result.stop == Stop.END_OF_DATA:  # a file that starts with zero bytes
                if expected is not None:
                    ended = expected if ended is None else ended
                expected = None
            elif expected is not None and expected < part.end_offset:
                missing(expected)
                expected = None
            continue  # no record starts here (inside a big record, or after the data)
        if expected is not None and first > expected:
            missing(expected)
        elif expected is not None and first < expected:
            raise RangesDoNotJoinError(
                f"{part.describe()} found a record at {first} inside the record that starts "
                f"at {expected}",
                position=first,
            )
        if ended is not None:
            gap(ended, first, f"zero bytes at {ended} where a record should start, but "
                              "records follow")  # fmt: skip
            ended = None
        if pending is not None:
            gap(pending[0], first, pending[1])
            pending = None
        if result.records or result.corrupt:
            for region in unconfirmed:  # a valid record follows them
                confirm(region)
            unconfirmed.clear()
        for region in result.corrupt:
            confirm(region)
        walk.used.append(result)
        walk.records += result.records
        stop_at = part.file_offset + result.stop_position
        expected = None
        if result.records:
            walk.end_offset = stop_at
        if result.stop == Stop.BOUNDARY:
            expected = stop_at
        elif result.stop == Stop.BLANK:
            skip_file = True
            walk.end_offset = part.file_offset + file_size
        elif result.stop == Stop.END_OF_DATA:
            ended = stop_at
        else:
            pending = (stop_at, result.stop_reason)
    if expected is not None and expected < current_file + file_size:
        missing(expected)
    if pending is not None:
        gap(pending[0], None, pending[1])
    walk.torn_tail = unconfirmed
    return walk


# --- consume queues -----------------------------------------------------------------------


def queue_tasks(walk: Walk, directory: str, file_size: int, groups: int) -> list[QueueTask]:
    """Every queue's pieces in CommitLog order, queues dealt into ``groups`` tasks of about
    equal unit counts (largest first)."""
    pieces: dict[tuple[str, int], list[QueuePiece]] = {}
    for result in walk.used:
        if result.units_path is None:
            continue
        for span in result.queues:
            if not is_queue_dir_name(span.topic):
                continue  # a damaged record's topic: left out, as the store's dispatch does
            key = (span.topic, span.queue_id)
            pieces.setdefault(key, []).append(QueuePiece(result.units_path, span.start, span.count))
    builds = [QueueBuild(t, q, tuple(p)) for (t, q), p in sorted(pieces.items())]
    dealt = deal(builds, groups, _units)
    return [QueueTask(directory, file_size, tuple(b)) for b in dealt]


def _units(build: QueueBuild) -> int:
    return sum(piece.count for piece in build.pieces)


# --- index files --------------------------------------------------------------------------


@dataclass
class IndexLayout:
    files: list[IndexTask]  # parts still empty: filled from the part results
    parts: list[IndexPartTask]
    entries: int


def index_file_count(entries: int, records: int, per_file: int, trailing: int) -> int:
    """How many files the live index service would have created (spec 4.4, 15.2): one as
    soon as any record is dispatched; the next when a record (or the rest of one's keys)
    comes after a file filled up."""
    if records == 0:
        return 0
    if entries == 0:
        return 1
    files = math.ceil(entries / per_file)
    if entries % per_file == 0 and trailing > 0:
        files += 1
    return files


def index_tasks(
    walk: Walk,
    directory: str,
    names: list[str],
    hash_slot_num: int,
    index_num: int,
    *,
    parts: int = 1,
    spill_dir: str,
    min_part_entries: int = MIN_INDEX_PART_ENTRIES,
) -> IndexLayout:
    """One task per index file, and the entries cut into about ``parts`` parts of equal
    size (one a worker), parts never crossing a file and never below ``min_part_entries``
    unless a file holds fewer; ``names`` gives at least as many file names as needed."""
    per_file = index_num - 1
    counts = [r.key_count for r in walk.used]
    total = sum(counts)
    trailing = 0
    for result in reversed(walk.used):
        if result.key_count:
            trailing += result.records_after_last_key
            break
        trailing += result.records
    file_count = index_file_count(total, walk.records, per_file, trailing)
    bounds = np.cumsum([0, *counts])  # global entry number where each range's entries start
    part_size = max(1, min_part_entries, math.ceil(total / max(1, parts)))
    files: list[IndexTask] = []
    part_tasks: list[IndexPartTask] = []
    for number in range(file_count):
        first, last = number * per_file, min((number + 1) * per_file, total)
        path = f"{directory}/{names[number]}"
        inherit_offset = inherit_timestamp = 0
        if number > 0:
            inherit_offset, inherit_timestamp = _entry_at(walk, bounds, first - 1)
        files.append(IndexTask(number, path, hash_slot_num, index_num, inherit_offset,
                               inherit_timestamp))  # fmt: skip
        if last <= first:
            continue
        cuts = math.ceil((last - first) / part_size)
        file_begin = _entry_at(walk, bounds, first)[1] if cuts > 1 else 0
        for k in range(cuts):
            low = first + (last - first) * k // cuts
            high = first + (last - first) * (k + 1) // cuts
            part_tasks.append(
                IndexPartTask(
                    file_number=number,
                    part=k,
                    path=path,
                    hash_slot_num=hash_slot_num,
                    first_number=1 + low - first,
                    begin_timestamp=inherit_timestamp if k == 0 else file_begin,
                    pieces=_key_pieces(walk, bounds, low, high),
                    spill_dir=spill_dir,
                )
            )
    return IndexLayout(files, part_tasks, total)


def link_tasks(layout: IndexLayout, written: list[IndexPartResult]) -> list[IndexTask]:
    """The index files' tasks with their parts' results (in entry order) filled in."""
    by_file: dict[int, list[IndexPartResult]] = {}
    for part in written:
        by_file.setdefault(part.file_number, []).append(part)
    return [
        dataclasses.replace(f, parts=tuple(sorted(by_file.get(f.number, []), key=_part_order)))
        for f in layout.files
    ]


def _part_order(part: IndexPartResult) -> int:
    return part.part


def _key_pieces(walk: Walk, bounds: np.ndarray, first: int, last: int) -> tuple[KeyPiece, ...]:
    """The spilled entries with global numbers [first, last), in order."""
    pieces: list[KeyPiece] = []
    for i, result in enumerate(walk.used):
        low, high = int(bounds[i]), int(bounds[i + 1])
        if result.keys_path is None or high <= first or low >= last:
            continue
        begin, end = max(first, low), min(last, high)
        pieces.append(KeyPiece(result.keys_path, begin - low, end - begin))
    return tuple(pieces)


def _entry_at(walk: Walk, bounds: np.ndarray, entry: int) -> tuple[int, int]:
    """(CommitLog offset, store timestamp) of global index entry ``entry``."""
    i = int(np.searchsorted(bounds, entry, side="right")) - 1
    path = walk.used[i].keys_path
    assert path is not None
    row = np.load(path, mmap_mode="r")[entry - int(bounds[i])]
    return int(row["offset"]), int(row["store_timestamp"])
