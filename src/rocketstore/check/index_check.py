"""``check``'s index part: IndexFiles against their own layout and against the CommitLog.

Layer: check. Reads ``index/`` with the layout codec (numpy views over the entry table);
never opens a MessageStore.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from rocketstore.check.common import I64, RecordTable, lookup, no_record_reason
from rocketstore.check.result import CheckResult, Problem
from rocketstore.config import StoreConfig
from rocketstore.format import index_layout as layout
from rocketstore.index_catalog import file_geometry
from rocketstore.paths import index_dir, is_index_file_name

ENTRY_DTYPE = np.dtype([("hash", ">i4"), ("offset", ">i8"), ("time_diff", ">i4"), ("prev", ">i4")])
# Per file, at most this many lines for one kind of entry problem (the rest are counted).
MAX_LINES_PER_KIND = 20


def pairs_present(
    sorted_offset: I64, hash_by_offset: I64, offsets: I64, hashes: I64
) -> npt.NDArray[np.bool_]:
    """For each (offset, hash), whether the pair occurs in the table sorted by offset."""
    if len(sorted_offset) == 0 or len(offsets) == 0:
        return np.zeros(len(offsets), dtype=bool)
    low = np.searchsorted(sorted_offset, offsets, side="left")
    high = np.searchsorted(sorted_offset, offsets, side="right")
    present = np.zeros(len(offsets), dtype=bool)
    widest = int((high - low).max())
    for step in range(widest):
        candidate = low + step
        inside = candidate < high
        clipped = np.minimum(candidate, len(sorted_offset) - 1)
        present |= inside & (hash_by_offset[clipped] == hashes)
    return present


class IndexCheck:
    def __init__(
        self,
        root: str,
        table: RecordTable,
        min_offset: int,
        data_end: int,
        result: CheckResult,
        rel: Callable[[str], str],
        on_bytes: Callable[[int], None] | None,
        configured: tuple[int, int] | None = None,
        in_flight: frozenset[int] = frozenset(),
    ):
        self.directory = index_dir(root)
        # Where unreadable CommitLog data starts that a running writer was writing as the
        # scan passed (store_check's verdict): entries into it are lag, as a queue's are.
        self.in_flight = in_flight
        self.written_entries = 0
        # The configured geometry (RocketMQ's default unless a broker.conf says otherwise);
        # files of another are read by file_geometry.
        self.configured = configured or StoreConfig().index_geometry
        self.table = table
        self.min_offset = min_offset
        self.data_end = data_end
        # Entries past the CommitLog the check read, beside a running writer (unclean).
        self.newer_entries = 0
        self.result = result
        self.rel = rel
        self.on_bytes = on_bytes
        order = np.lexsort((table.key_hash, table.key_offset))
        self.expected_offset = table.key_offset[order]
        self.expected_hash = table.key_hash[order]
        self.seen_offset: list[I64] = []
        self.seen_hash: list[I64] = []

    def _problem(self, path: str, where: str, reason: str, offset: int | None = None) -> None:
        self.result.problems.append(Problem("index", self.rel(path), where, reason, offset))

    def run(self) -> None:
        names = []
        if os.path.isdir(self.directory):
            names = sorted(n for n in os.listdir(self.directory) if is_index_file_name(n))
        if not names:
            if len(self.expected_offset):
                self.result.notes.append(
                    "no index files: key queries will find nothing (messageIndexEnable off, "
                    "or run `rocketstore rebuild --index`)"
                )
            return
        begin = None
        index_end = -1
        for name in names:
            # Beside a running writer the newest file is being written while it is read.
            written = self.result.unclean and name == names[-1]
            span = self._check_file(os.path.join(self.directory, name), written)
            if span is not None:
                if begin is None:
                    begin = span[0]
                index_end = max(index_end, span[1])
        self._check_records_indexed(begin if begin is not None else 0, index_end)
        if self.written_entries:
            self.result.notes.append(
                f"{self.written_entries} index entries point into CommitLog data a running "
                "writer was writing as the check read it (not checked)"
            )
        if self.newer_entries:
            self.result.notes.append(
                f"{self.newer_entries} index entries point at or past {self.data_end}, where "
                "the CommitLog read ended: records a running writer appended since (not checked)"
            )

    def _check_file(self, path: str, written: bool = False) -> tuple[int, int] | None:
        """Check one file; (first, last) CommitLog offsets of its entries, if it has any."""
        size = os.path.getsize(path)
        if self.on_bytes is not None:
            self.on_bytes(size)
        try:
            slots, capacity = file_geometry(path, self.configured)
        except ValueError as e:
            self._problem(path, "file", str(e))
            return None
        with open(path, "rb") as f:
            header = layout.decode_header(f.read(layout.HEADER_SIZE))
            count = header.index_count
            if count < 0 or count > capacity:
                self._problem(path, "header", f"indexCount {count} outside 0..{capacity}")
                return None
            # Only the used part: a full default file is 400 MiB, the newest mostly empty.
            f.seek(0)
            data = f.read(layout.entry_position(slots, max(count, 1)))
        entries_start = layout.entry_position(slots, 0)
        table = np.frombuffer(data, dtype=ENTRY_DTYPE, count=max(count, 1), offset=entries_start)
        entries = table[1:count] if count > 1 else table[0:0]
        self.result.index_entries += len(entries)
        slot_values = np.frombuffer(data, dtype=">i4", count=slots, offset=layout.HEADER_SIZE)
        ahead = capacity if written else 0
        self._check_layout(path, header, slots, max(count, 1), entries, slot_values, ahead)
        if not len(entries):
            return None
        offsets = entries["offset"].astype(np.int64)
        hashes = entries["hash"].astype(np.int64)
        self.seen_offset.append(offsets)
        self.seen_hash.append(hashes)
        self._check_entries_point_to_records(path, offsets, hashes)
        return int(offsets[0]), int(offsets[-1])

    def _report(
        self, path: str, numbers: npt.NDArray[np.intp], reason: Callable[[int], str]
    ) -> None:
        for i in numbers[:MAX_LINES_PER_KIND]:
            self._problem(path, f"entry {int(i) + 1}", reason(int(i)))
        if len(numbers) > MAX_LINES_PER_KIND:
            self._problem(
                path, "entries", f"{len(numbers) - MAX_LINES_PER_KIND} more entries like the above"
            )

    def _check_layout(
        self,
        path: str,
        header: layout.IndexHeader,
        slots: int,
        count: int,
        entries: npt.NDArray[np.void],
        slot_values: npt.NDArray[np.int32],
        ahead: int = 0,
    ) -> None:
        """``ahead``: for a file being written, its entry capacity (else 0). It is read
        header first, and a dispatcher putting keys meanwhile (entry, slot, then header)
        leaves slots naming entries past the header's count and the header's counters
        ahead of what was read: in flight, not damage."""
        hashes = entries["hash"].astype(np.int64)
        prev = entries["prev"].astype(np.int64)
        numbers = np.arange(1, len(entries) + 1)
        self._report(path, np.flatnonzero(hashes < 0), lambda i: f"negative key hash {hashes[i]}")
        self._report(
            path,
            np.flatnonzero((prev < 0) | (prev >= numbers)),
            lambda i: f"prevIndex {prev[i]} is not an earlier entry",
        )
        self._report(
            path,
            np.flatnonzero(entries["time_diff"] < 0),
            lambda i: f"negative timeDiff {int(entries['time_diff'][i])}",
        )
        slot_of = np.where(hashes >= 0, hashes % slots, -1)
        chained = np.flatnonzero((prev > 0) & (prev < numbers))
        wrong_chain = chained[slot_of[chained] != slot_of[prev[chained] - 1]]
        self._report(
            path, wrong_chain, lambda i: f"chained to entry {prev[i]}, which is in another slot"
        )
        values = slot_values.astype(np.int64)
        in_flight = (values >= count) & (values <= ahead)
        out_of_range = np.flatnonzero((values < 0) | ((values >= count) & ~in_flight))
        for s in out_of_range[:MAX_LINES_PER_KIND]:
            self._problem(
                path, f"slot {int(s)}", f"points to entry {int(values[s])} of {count - 1}"
            )
        used = np.flatnonzero((values > 0) & (values < count))
        misplaced = used[slot_of[values[used] - 1] != used]
        for s in misplaced[:MAX_LINES_PER_KIND]:
            self._problem(
                path, f"slot {int(s)}", f"head entry {int(values[s])} hashes to another slot"
            )
        slot_counts = range(len(used), len(used) + int(np.count_nonzero(in_flight)) + 1)
        if header.hash_slot_count not in slot_counts:
            self._problem(
                path,
                "header",
                f"hashSlotCount {header.hash_slot_count}, but {len(used)} slots are in use",
            )
        if len(entries):
            first, last = int(entries["offset"][0]), int(entries["offset"][-1])
            if header.end_phy_offset != last and not (ahead and header.end_phy_offset > last):
                self._problem(
                    path, "header", f"endPhyOffset {header.end_phy_offset}, last entry {last}"
                )
            if header.begin_phy_offset not in (first, 0) and header.begin_phy_offset > first:
                self._problem(
                    path, "header", f"beginPhyOffset {header.begin_phy_offset}, first entry {first}"
                )

    def _check_entries_point_to_records(self, path: str, offsets: I64, hashes: I64) -> None:
        live = offsets >= self.min_offset
        if self.result.unclean:
            # The index is read after the CommitLog: beside a running writer it holds the
            # keys of records appended since, which the check judges as of the end it read.
            newer = offsets >= self.data_end
            self.newer_entries += int(np.count_nonzero(newer & live))
            live &= ~newer
        alive = np.flatnonzero(live)
        _, is_record = lookup(self.table.offset, offsets[alive])
        no_record = alive[~is_record]
        scan = self.result.scan
        if self.in_flight and scan is not None:
            written = np.array(
                [(scan.damaged_stretch(int(offsets[i])) or (-1,))[0] in self.in_flight
                 for i in no_record],
                dtype=bool,
            )  # fmt: skip
            self.written_entries += int(np.count_nonzero(written))
            no_record = no_record[~written] if len(no_record) else no_record

        def describe(i: int) -> str:
            return no_record_reason(int(offsets[i]), self.data_end, self.result.scan)

        self._report(path, no_record, describe)
        with_record = alive[is_record]
        present = pairs_present(
            self.expected_offset, self.expected_hash, offsets[with_record], hashes[with_record]
        )
        self._report(
            path,
            with_record[~present],
            lambda i: (
                f"key hash {int(hashes[i])} matches no key of the record at {int(offsets[i])}"
            ),
        )

    def _check_records_indexed(self, begin: int, index_end: int) -> None:
        """CommitLog -> index: every key of every record since the first indexed one."""
        if not self.seen_offset:
            return
        seen_offset = np.concatenate(self.seen_offset)
        seen_hash = np.concatenate(self.seen_hash)
        order = np.lexsort((seen_hash, seen_offset))
        seen_offset, seen_hash = seen_offset[order], seen_hash[order]
        # Beside a running writer the index is judged up to the record it names last, which
        # the dispatcher may have indexed in part (it puts a record's keys one by one):
        # that record's missing keys are lag, as are the keys of every record after it.
        upper = index_end if self.result.unclean else np.iinfo(np.int64).max
        judged = self.expected_offset >= max(begin, self.min_offset)
        candidates = np.flatnonzero(judged & (self.expected_offset <= upper))
        present = pairs_present(
            seen_offset, seen_hash, self.expected_offset[candidates], self.expected_hash[candidates]
        )
        missing = candidates[~present]
        in_flight = missing[self.expected_offset[missing] == upper]
        missing = missing[self.expected_offset[missing] < upper]
        lag = int(np.count_nonzero(self.expected_offset > upper)) + len(in_flight)
        if lag:
            self.result.notes.append(
                f"{lag} key(s) of records after offset {index_end} are not indexed yet "
                "(dispatch lag: a running writer or the next writer's recovery adds them)"
            )
        if not len(missing):
            return
        missing_offsets = np.unique(self.expected_offset[missing])
        for offset in missing_offsets[:MAX_LINES_PER_KIND]:
            keys = int(np.count_nonzero(self.expected_offset[missing] == offset))
            self._problem(
                self.directory,
                f"offset {int(offset)}",
                f"{keys} key(s) of the record at {int(offset)} are not in the index",
                int(offset),
            )
        if len(missing_offsets) > MAX_LINES_PER_KIND:
            self._problem(
                self.directory,
                "records",
                f"{len(missing_offsets) - MAX_LINES_PER_KIND} more records with keys missing "
                "from the index",
            )
