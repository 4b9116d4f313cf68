"""The record table the parts of ``check`` share, and two helpers over it.

Layer: check. Plain data and numpy; no I/O, no printing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from rocketstore.check.scan import CommitLogScan

I64 = npt.NDArray[np.int64]


@dataclass
class RecordTable:
    """What the queue and index checks need of every readable record, as numpy arrays in
    CommitLog order (about 40 bytes a record)."""

    offset: I64
    size: I64
    queue: I64  # id into ``queue_names``; -1: the record takes no queue entry
    queue_offset: I64
    tags_code: I64
    check_tags: npt.NDArray[np.bool_]
    queue_names: list[tuple[str, int]]
    key_offset: I64  # one row per index key: the record's offset ...
    key_hash: I64  # ... and abs(hashCode(topic#key))
    # Units multi-dispatch records give other queues: (row, queue id) -> queue offset.
    extra: dict[tuple[int, int], int] = field(default_factory=dict)


def no_record_reason(offset: int, data_end: int, scan: CommitLogScan | None) -> str:
    """Why a unit or index entry pointing at ``offset`` finds no record. Past damage that
    readable records follow, the rest of the damaged file is not read: the record may be
    whole, and "past the end of the CommitLog" would be wrong."""
    stretch = scan.damaged_stretch(offset) if scan is not None else None
    if stretch is not None:
        return (
            f"points to offset {offset}, inside the damaged data from {stretch[0]} to {stretch[1]}"
        )
    damage = scan.first_structure_issue if scan is not None else None
    if damage is not None and scan is not None and scan.records_after_structure_issue:
        file_end = damage.offset - damage.position + scan.file_size
        if damage.offset <= offset < file_end:
            return (
                f"points to offset {offset}, at or after the damaged data at {damage.offset} "
                "(readable records follow it; the check does not read the rest of its file)"
            )
    if offset >= data_end:
        return f"points to offset {offset}, past the end of the CommitLog ({data_end})"
    return f"points to offset {offset}, where no record starts"


def lookup(sorted_offsets: I64, wanted: I64) -> tuple[I64, npt.NDArray[np.bool_]]:
    """Index of each ``wanted`` offset in ``sorted_offsets`` and whether it is there."""
    if len(sorted_offsets) == 0:
        return np.zeros(len(wanted), dtype=np.int64), np.zeros(len(wanted), dtype=bool)
    position = np.searchsorted(sorted_offsets, wanted)
    clipped = np.minimum(position, len(sorted_offsets) - 1)
    return clipped.astype(np.int64), sorted_offsets[clipped] == wanted
