"""The records a ``mode=commitlog`` partition reads, found by the CommitLog walker.

Layer: spark (top), pure: works on one mapped CommitLog file's buffer; no pyspark, no
Arrow, no store (tests/property/test_commitlog_walk.py holds it to the walker on fuzzed
files). A partition is the byte range [start, end) of one file; the records it reads
are those starting in it, in the runs :class:`~rocketstore.format.commitlog_walk.FileWalk`
yields, so Spark keeps exactly the records recovery keeps and stops where it stops
(a blank, zeros, the end of the range). At a CORRUPT verdict inside the range the read
fails with :class:`~rocketstore.errors.CorruptDataError` naming the file, the position
in it and the walker's reason: a read must not silently lose records (the rebuild's
``--skip-corrupt`` is the salvage path).
"""

from __future__ import annotations

from collections.abc import Iterator

from rocketstore.errors import CorruptDataError
from rocketstore.format.commitlog_walk import FileWalk
from rocketstore.format.record_scan import NextData, Records, Stop, TopicTable, find_record_start

# CommitLog bytes walked per run (about 18k records of 100 B, 4k of 1 KiB): each run is
# decoded into one column-wise batch.
COMMITLOG_CHUNK_BYTES = 4 * 1024 * 1024
# Records of a DLedger log file per run (its entries are walked in one go).
FRAMED_CHUNK_RECORDS = 16_384


def partition_runs(
    buf: memoryview,
    path: str,
    file_offset: int,
    start: int,
    end: int,
    *,
    framed: bool = False,
    next_data: NextData | None = None,
    chunk_bytes: int | None = None,
) -> Iterator[Records]:
    """Runs of the valid records starting in [start, end) of the CommitLog file ``buf``
    (its first CommitLog offset ``file_offset``; ``buf`` is the whole file), positions
    within the file; raises CorruptDataError at damage before ``end``.

    A plain file's partition starts at its first record (found by the self-located
    PHYSICALOFFSET, :func:`find_record_start`: no walk from the file's start, whose
    unwritten rest ``next_data`` skips unread). A DLedger log's entries can only be
    followed from the file's start, so its partition is the whole file up to ``end``.
    ``chunk_bytes``: the plain walk's run size (COMMITLOG_CHUNK_BYTES)."""
    length = len(buf)
    end = min(end, length)
    topics = TopicTable()
    if framed:
        walk = FileWalk(buf, file_offset, 0, length, topics=topics, framed=True)
        for records in walk:
            kept = records.take(int((records.position < end).sum()))
            for first in range(0, len(kept), FRAMED_CHUNK_RECORDS):
                yield kept.slice(first, first + FRAMED_CHUNK_RECORDS)
        _fail_at_damage(walk, path, end)
        return
    if start == 0:
        first_record: int | None = 0
    else:
        first_record = find_record_start(buf, file_offset, start, end, length, next_data)
    if first_record is None or first_record >= end:
        return
    walk = FileWalk(
        buf,
        file_offset,
        first_record,
        length,
        topics=topics,
        limit=end,
        window_bytes=chunk_bytes or COMMITLOG_CHUNK_BYTES,
    )
    yield from walk
    _fail_at_damage(walk, path, end)


def _fail_at_damage(walk: FileWalk, path: str, end: int) -> None:
    verdict = walk.verdict
    if verdict.stop == Stop.CORRUPT and verdict.position < end:
        raise CorruptDataError(verdict.reason, path=path, position=verdict.position)
