"""Cutting a writer's CommitLog back to an offset, with its queues and index (a slave
whose disk has more than its master: RocketMQ 5's ``DefaultMessageStore.truncateFiles``).

Layer: store (the facade's package). The facade holds puts off and the dispatcher caught
up while this runs; this module copies the bytes that go into a directory beside the
store first (nothing is destroyed that was not kept), then cuts the consume queues, the
index and the CommitLog as recovery does (``recovery.recover``'s steps), resets the
dispatcher and the queue offsets, and lowers the checkpoint's times.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import os
import time
from dataclasses import dataclass, field

from rocketstore.commitlog import CommitLog
from rocketstore.files.atomic import fsync_directory
from rocketstore.index import IndexService
from rocketstore.store.queue_table import QueueTable

# Where the cut bytes go: <store>/truncated-<UTC time>/ (never read by the store).
KEPT_DIR_PREFIX = "truncated-"
KEPT_MANIFEST = "truncation.json"


class TruncateStatus(enum.Enum):
    """What ``MessageStore.truncate_commitlog`` did."""

    TRUNCATED = "TRUNCATED"
    # The CommitLog ends at or before the offset: nothing to cut.
    NOTHING_TO_CUT = "NOTHING_TO_CUT"
    # The offset is at or below the CommitLog's first offset: every file would go
    # (refused unless ``allow_empty``).
    BELOW_MIN_OFFSET = "BELOW_MIN_OFFSET"
    # No record starts at the offset in this CommitLog (RocketMQ 5's isOffsetAligned):
    # the two copies differ before it, and cutting there would leave half a record.
    NOT_A_RECORD_BOUNDARY = "NOT_A_RECORD_BOUNDARY"


@dataclass
class TruncateReport:
    """What was cut, from where, and where the cut bytes were kept."""

    status: TruncateStatus
    offset: int  # the new end asked for
    old_min_offset: int
    old_max_offset: int
    bytes_cut: int = 0
    kept_dir: str = ""  # the cut bytes, one file per CommitLog file, and truncation.json
    file_cut: str = ""  # the CommitLog file now ending at ``offset`` ("" if none)
    files_deleted: list[str] = field(default_factory=list)
    queues_truncated: list[str] = field(default_factory=list)
    queue_units_dropped: int = 0
    index_entries_dropped: int = 0

    def summary(self) -> str:
        if self.status is not TruncateStatus.TRUNCATED:
            return (
                f"{self.status.value}: CommitLog [{self.old_min_offset}, {self.old_max_offset}),"
                f" asked to end at {self.offset}"
            )
        return (
            f"CommitLog cut from {self.old_max_offset} back to {self.offset} "
            f"({self.bytes_cut} bytes; file {self.file_cut or '-'} cut, "
            f"{len(self.files_deleted)} files deleted), {self.queue_units_dropped} queue units "
            f"in {len(self.queues_truncated)} queues and {self.index_entries_dropped} index "
            f"entries dropped; the cut bytes are kept in {self.kept_dir}"
        )


def keep_cut_bytes(root: str, commitlog: CommitLog, report: TruncateReport, note: str) -> str:
    """Copy CommitLog bytes [report.offset, report.old_max_offset) into a new dated
    directory under ``root``: one file per CommitLog file they come from, named by the
    CommitLog offset of its first byte, and truncation.json describing them; all synced.
    An OSError (no room) leaves the store untouched."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    directory = os.path.join(root, f"{KEPT_DIR_PREFIX}{stamp}")
    suffix = 1
    while os.path.exists(directory):
        suffix += 1
        directory = os.path.join(root, f"{KEPT_DIR_PREFIX}{stamp}-{suffix}")
    os.makedirs(directory)
    pieces: list[dict[str, object]] = []
    size = commitlog.file_size
    for mapped in list(commitlog.files.files):
        start = max(report.offset, mapped.file_from_offset)
        end = min(report.old_max_offset, mapped.file_from_offset + mapped.wrote_position)
        if end <= start or start >= mapped.file_from_offset + size:
            continue
        name = f"{start:020d}"
        path = os.path.join(directory, name)
        with open(path, "wb") as out:
            position = start - mapped.file_from_offset
            chunk = 16 * 1024 * 1024
            while position < end - mapped.file_from_offset:
                take = min(chunk, end - mapped.file_from_offset - position)
                out.write(mapped.read(position, take))
                position += take
            out.flush()
            os.fsync(out.fileno())
        pieces.append({"file": name, "from": start, "to": end, "commitLogFile": mapped.path})
    manifest = {
        "time": stamp,
        "reason": note,
        "commitLogMinOffset": report.old_min_offset,
        "commitLogMaxOffset": report.old_max_offset,
        "truncatedTo": report.offset,
        "bytes": report.old_max_offset - report.offset,
        "fileSize": size,
        "pieces": pieces,
    }
    manifest_path = os.path.join(directory, KEPT_MANIFEST)
    with open(manifest_path, "w", encoding="utf-8") as out:
        json.dump(manifest, out, indent=2)
        out.write("\n")
        out.flush()
        os.fsync(out.fileno())
    fsync_directory(directory)
    fsync_directory(root)
    return directory


def cut_back(
    commitlog: CommitLog, table: QueueTable, index: IndexService, report: TruncateReport
) -> TruncateReport:
    """Drop every queue unit, index entry and CommitLog byte at or past ``report.offset``
    (the caller holds puts and dispatch off, and kept the bytes first). A queue left
    without a unit is deleted: the master's records start it again at their own queue
    offsets, as on a new slave."""
    end = report.offset
    queues = table.queues
    emptied: set[tuple[str, int]] = set()
    for key, queue in queues.items():
        before, low = queue.max_offset(), max(queue.min_offset(), 0)
        queue.truncate_dirty(end)
        after = queue.max_offset()
        if after != before:
            report.queues_truncated.append(f"{key[0]}-{key[1]}")
            report.queue_units_dropped += max(0, before - max(after, low))
            if queue.max_physic_offset < 0:
                emptied.add(key)

    def store_time_of(offset: int) -> int:
        return commitlog.store_time_at(offset, 0)

    report.index_entries_dropped = index.truncate_from(end, store_time_of)
    size = commitlog.file_size
    for mapped in list(commitlog.files.files):
        if mapped.file_from_offset + size <= end:
            continue
        if mapped.file_from_offset <= end:
            report.file_cut = mapped.path
            # Stale records past the new end must never look valid to a later recovery.
            mapped.zero_tail(end - mapped.file_from_offset)
        else:
            report.files_deleted.append(mapped.path)
    commitlog.files.truncate_dirty_files(end)
    report.bytes_cut = report.old_max_offset - max(end, report.old_min_offset)
    table.destroy(
        lambda topic, queue, _min: "no unit left" if (topic, queue.queue_id) in emptied else None,
        remember=False,
        min_offset=max(commitlog.min_offset(), 0),
        end_offset=end,
        queue_table=commitlog.topic_queue_table,
    )
    # Queue offsets continue from the queues' max offsets (recoverTopicQueueTable).
    offsets = commitlog.topic_queue_table
    offsets.clear()
    for (topic, qid), queue in queues.items():
        offsets[f"{topic}-{qid}"] = queue.max_offset()
    return dataclasses.replace(report, status=TruncateStatus.TRUNCATED)
