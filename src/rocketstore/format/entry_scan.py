"""The records of a DLedger log file in bulk: the entries' walk (format.dledger_entry),
then the records in their bodies decoded and validated as a plain file's are
(format.record_scan), each required to fill its body exactly.

Pure (buffers in, arrays out). The CommitLog walker's framed mode
(format.commitlog_walk), whose stops must be entry boundaries so that a later walk can go
on from them; Spark's commitlog mode lists a DLedger file's records through it too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rocketstore.format.dledger_entry import (
    BODY_OFFSET,
    EntryHeader,
    walk_entries,
)
from rocketstore.format.record_scan import Records, TopicTable, check_record, decode_run


@dataclass
class EntryRun:
    """The valid records of a walk and their entries (as many of each), and where and why
    it ended: ``stop_reason`` None when the file is finished (a blank, or an entry ending
    at the file's end), END_OF_DATA at zeros, else why the entry there is not valid."""

    records: Records
    entries: list[EntryHeader]
    stop_position: int
    stop_reason: str | None


def entry_records(
    buf: memoryview,
    base: int,
    position: int,
    file_size: int,
    topics: TopicTable,
    previous: EntryHeader | None = None,
) -> EntryRun:
    """The entries of the file at log offset ``base`` from ``position`` (an entry
    boundary; ``previous`` the entry before it, if known) and the records in them, up to
    the first entry or record that is not valid."""
    walk = walk_entries(buf, base, position, file_size, previous)
    entries = walk.entries
    if not entries:
        return EntryRun(Records.concat([]), [], walk.stop_position, walk.stop_reason)
    starts = np.fromiter((e.pos + BODY_OFFSET - base for e in entries), np.int64, len(entries))
    raw = np.frombuffer(buf, dtype=np.uint8)
    records, valid = decode_run(buf, raw, base, starts, file_size, topics)
    reason = ""
    if valid < len(entries):
        reason = check_record(buf, base, int(starts[valid]), file_size) or "invalid record"
    sizes = np.fromiter((e.body_size for e in entries[:valid]), np.int64, valid)
    misfit = np.flatnonzero(records.size != sizes)
    if len(misfit):
        valid = int(misfit[0])
        reason = f"a record of {int(records.size[valid])} bytes in a body of {int(sizes[valid])}"
    run = EntryRun(records, entries, walk.stop_position, walk.stop_reason)
    return cut_run(run, base, valid, reason)


def cut_run(run: EntryRun, base: int, valid: int, reason: str) -> EntryRun:
    """``run`` up to its ``valid``-th record, which is not valid for ``reason`` (the run
    as it is when ``valid`` covers it); the stop is that record's entry."""
    if valid >= len(run.entries):
        return run
    bad = run.entries[valid]
    return EntryRun(
        run.records.take(valid),
        run.entries[:valid],
        bad.pos - base,
        f"DLedger entry {bad.index}: {reason}",
    )
