"""``check``'s DLedger part: a DLedger log's own index and checkpoint against its entries.

Layer: check. The entries themselves (and the records in them) are checked by the CommitLog
scan; this reads what DLedger keeps beside them: ``index/`` (32 bytes per entry index:
where entry ``i`` is, its size and term) and ``checkpoint`` (the committed and last
index). DLedger's recovery rewrites index units that disagree with the entries, so a
problem here means damage DLedger would mend by itself, unless the entries are gone: a
checkpoint whose committedIndex is past the last readable entry says committed entries
were lost.
"""

from __future__ import annotations

import bisect
import mmap
import os
from collections.abc import Callable, Iterator

from rocketstore.check.result import CheckResult, Problem
from rocketstore.check.scan import DataFile, offset_files
from rocketstore.errors import CorruptDataError, IncompleteDataError
from rocketstore.files.dledger_log import first_entry, read_checkpoint
from rocketstore.format import dledger_entry as dl

# At most this many lines for the index units' problems (the rest are counted).
MAX_UNIT_LINES = 20


class DLedgerCheck:
    def __init__(
        self,
        home: str,
        data_dirs: tuple[str, ...],
        last_entry: dl.EntryHeader | None,
        result: CheckResult,
        rel: Callable[[str], str],
    ):
        self.home = home
        self.data_dirs = data_dirs
        self.data = offset_files(data_dirs)
        self.starts = [f.start for f in self.data]
        self.last_entry = last_entry
        self.result = result
        self.rel = rel
        self.unit_problems = 0

    def run(self) -> None:
        self._check_units()
        self._check_checkpoint()

    def _problem(self, path: str, where: str, reason: str) -> None:
        self.result.problems.append(Problem("dledger", self.rel(path), where, reason))

    def _check_units(self) -> None:
        index_dir = os.path.join(self.home, dl.INDEX_DIR)
        first = first_entry(self.data_dirs)
        begin = first.index if first is not None else 0
        highest = -1
        self.result.dledger_units = 0
        for path, number, unit in _units(index_dir, begin):
            highest = number
            self.result.dledger_units += 1
            reason = self._unit_reason(number, unit)
            if reason is None:
                continue
            self.unit_problems += 1
            if self.unit_problems <= MAX_UNIT_LINES:
                self._problem(path, f"unit of entry {number}", reason)
        if self.unit_problems > MAX_UNIT_LINES:
            self._problem(
                index_dir,
                "units",
                f"{self.unit_problems - MAX_UNIT_LINES} more units disagree with the entries",
            )
        last = self.last_entry
        if last is not None and highest < last.index:
            missing_from = max(highest + 1, begin)
            self._problem(
                index_dir,
                "units",
                f"no unit for entries {missing_from}..{last.index} (DLedger's recovery "
                "writes them from the entries)",
            )

    def _unit_reason(self, number: int, unit: dl.IndexUnit) -> str | None:
        last = self.last_entry
        if unit.index != number:
            return f"the unit at entry {number}'s place names entry {unit.index}"
        if last is not None and number > last.index:
            return f"a unit for entry {number}, past the last readable entry {last.index}"
        header = self._header_at(unit.pos)
        if header is None:
            return f"says entry {number} is at {unit.pos}, outside the log's files"
        differs = [
            f"{name} {theirs} where the entry has {ours}"
            for name, theirs, ours in (
                ("magic", unit.magic, header.magic),
                ("size", unit.size, header.size),
                ("index", unit.index, header.index),
                ("term", unit.term, header.term),
                ("pos", unit.pos, header.pos),
            )
            if theirs != ours
        ]
        return f"says {', '.join(differs)}" if differs else None

    def _header_at(self, pos: int) -> dl.EntryHeader | None:
        at = bisect.bisect_right(self.starts, pos) - 1
        if at < 0 or pos + dl.BODY_OFFSET > self.data[at].end:
            return None
        f: DataFile = self.data[at]
        with open(f.path, "rb") as handle:
            handle.seek(pos - f.start)
            head = handle.read(dl.BODY_OFFSET)
        try:
            return dl.decode_entry_header(head, 0)
        except IncompleteDataError:
            return None

    def _check_checkpoint(self) -> None:
        path = os.path.join(self.home, dl.CHECKPOINT_FILE)
        try:
            saved = read_checkpoint(self.home)
        except CorruptDataError as e:
            self._problem(path, "file", e.reason)
            return
        if not saved:
            self.result.notes.append(
                f"{self.rel(path)}: no DLedger checkpoint (DLedger writes it every few seconds)"
            )
            return
        last = self.last_entry.index if self.last_entry is not None else -1
        for key in ("committedIndex", "endIndex"):
            value = saved.get(key)
            if value is not None and value > last:
                self._problem(
                    path,
                    key,
                    f"{key} {value} is past the last readable entry ({last}): entries the "
                    "DLedger group had agreed on are missing or unreadable",
                )


def _units(index_dir: str, begin: int) -> Iterator[tuple[str, int, dl.IndexUnit]]:
    """Every written unit from entry ``begin`` on, in order: (file, entry index, unit).
    Units are written one after another, so the first all-zero unit ends them."""
    for start, f in ((f.start, f) for f in offset_files(index_dir)):
        if f.size == 0 or start + f.size <= begin * dl.INDEX_UNIT_SIZE:
            continue
        with open(f.path, "rb") as handle:
            mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            first = max(0, begin * dl.INDEX_UNIT_SIZE - start) // dl.INDEX_UNIT_SIZE
            for slot in range(first, f.size // dl.INDEX_UNIT_SIZE):
                at = slot * dl.INDEX_UNIT_SIZE
                raw = mapped[at : at + dl.INDEX_UNIT_SIZE]
                if not any(raw):
                    return
                yield f.path, (start + at) // dl.INDEX_UNIT_SIZE, dl.decode_index_unit(raw)
        finally:
            mapped.close()
