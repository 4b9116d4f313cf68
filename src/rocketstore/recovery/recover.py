"""Recovery on open: find the end of valid CommitLog data and make the queues agree.

Layer: recovery. Keeps RocketMQ's byte format while fixing its known flaws: a record whose
PHYSICALOFFSET field is not its real position is stale (RocketMQ #10017), a CRC of 0 is
accepted (#9121), an illegal magic ends the scan instead of looping (#289).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from rocketstore.commitlog import CommitLog
from rocketstore.config import StoreConfig
from rocketstore.consume_queue import ConsumeQueue
from rocketstore.errors import CorruptDataError, IncompleteDataError
from rocketstore.format import properties as props
from rocketstore.format import record as rec
from rocketstore.format import sysflag
from rocketstore.format.checkpoint import Checkpoint
from rocketstore.index import IndexService

log = logging.getLogger(__name__)


@dataclass
class RecoveryReport:
    """What recovery found and did (``store.recovery_report``)."""

    abnormal: bool = False
    commit_log_end: int = 0
    records_scanned: int = 0
    truncated_bytes: int = 0
    stop_reason: str = ""
    stop_offset: int | None = None
    start_file: str = ""
    queues_truncated: list[str] = field(default_factory=list)
    queue_units_dropped: int = 0
    index_entries_dropped: int = 0
    index_keys_completed: int = 0
    index_slots_repaired: int = 0
    redispatch_from: int | None = None
    redispatched_records: int = 0

    def summary(self) -> str:
        kind = "abnormal" if self.abnormal else "normal"
        return (
            f"{kind} recovery: CommitLog ends at {self.commit_log_end}, "
            f"{self.records_scanned} records checked, {self.truncated_bytes} bytes dropped, "
            f"{len(self.queues_truncated)} queues truncated, "
            f"{self.redispatched_records} records re-dispatched"
            + (f"; stopped at {self.stop_offset}: {self.stop_reason}" if self.stop_reason else "")
        )


SCAN_CHUNK_BYTES = 8 * 1024 * 1024  # the largest read of a scan
# The first read of a scan. A read-only store scans from its last known end before every
# read, where there is usually nothing new: copying 8 MiB there cost ~0.6 ms a call. Each
# full chunk doubles the next one, so long scans reach SCAN_CHUNK_BYTES after a few reads.
SCAN_FIRST_CHUNK_BYTES = 16 * 1024
_ZERO_HEAD = bytes(8)


def scan_valid_end(
    commitlog: CommitLog,
    start_index: int,
    *,
    check_crc: bool,
    report: RecoveryReport,
    on_record: Callable[[bytes, rec.RecordView], None] | None = None,
    start_offset: int | None = None,
) -> int:
    """Walk records from file ``start_index`` (or from ``start_offset``, a record
    boundary); return the offset after the last valid one.

    Files are read in chunks, never whole. A blank moves to the next file; anything
    invalid stops the walk, with the reason in ``report``.
    """
    files = commitlog.files.files
    if not files:
        return 0
    if start_offset is not None:
        found = commitlog.files.find(start_offset)
        if found is None:
            return start_offset
        index = files.index(found)
        offset = start_offset
    else:
        index = max(0, min(start_index, len(files) - 1))
        offset = files[index].file_from_offset
    size = commitlog.file_size

    def stop(at: int, reason: str) -> int:
        report.stop_offset = at
        report.stop_reason = reason
        return at

    chunk_bytes = SCAN_FIRST_CHUNK_BYTES
    while index < len(files):
        mapped = files[index]
        position = offset - mapped.file_from_offset
        while position < size:
            chunk = mapped.read(position, chunk_bytes)
            chunk_bytes = min(chunk_bytes * 2, SCAN_CHUNK_BYTES)
            cursor = 0
            while cursor < len(chunk):
                at = mapped.file_from_offset + position + cursor
                if chunk[cursor : cursor + 8] == _ZERO_HEAD:
                    # The usual end (a read-only store asks on every call): no exception.
                    return stop(at, "end of data")
                try:
                    view = rec.read_record(chunk, cursor, check_crc=check_crc)
                except IncompleteDataError as e:
                    if position + cursor + e.needed <= size and (
                        cursor > 0 or len(chunk) < min(e.needed, SCAN_CHUNK_BYTES)
                    ):
                        # The record continues past this chunk: read again from its start,
                        # at least as much as it needs.
                        chunk_bytes = max(chunk_bytes, min(e.needed, SCAN_CHUNK_BYTES))
                        break
                    if _all_zero(chunk, cursor):
                        return stop(at, "end of data")
                    return stop(at, str(e))
                except CorruptDataError as e:
                    return stop(at, "end of data" if _all_zero(chunk, cursor) else str(e))
                if isinstance(view, rec.Blank):
                    if view.remaining != size - (position + cursor):
                        return stop(at, f"blank record with wrong length {view.remaining}")
                    position = size
                    break
                if view.physical_offset != at:
                    return stop(at, f"stale record: PHYSICALOFFSET {view.physical_offset} at {at}")
                record_end = position + cursor + view.size
                if size - record_end < rec.END_FILE_MIN_BLANK_LENGTH and record_end != size:
                    return stop(at, "record leaves less than 8 bytes before the file end")
                report.records_scanned += 1
                if on_record is not None:
                    on_record(chunk, view)
                cursor += view.size
            else:
                position += cursor
                continue
            if position < size:
                position += cursor
        # File finished (blank or exactly full): continue with the next file, if any.
        if index + 1 >= len(files):
            return mapped.file_from_offset + size
        index += 1
        offset = files[index].file_from_offset
    return offset


def _all_zero(data: bytes, position: int) -> bool:
    return not any(data[position : position + 8])


def abnormal_start_index(commitlog: CommitLog, checkpoint: Checkpoint) -> int:
    """Newest file whose first record was stored at or before the checkpoint's safe time
    (min(physic, logics) - 3 s): everything before it is known to be on disk."""
    files = commitlog.files.files
    safe = checkpoint.min_timestamp()
    for index in range(len(files) - 1, -1, -1):
        head = files[index].read(0, 80)
        magic = int.from_bytes(head[4:8], "big", signed=True)
        if magic not in (rec.MESSAGE_MAGIC_V1, rec.MESSAGE_MAGIC_V2):
            continue
        flag = int.from_bytes(head[36:40], "big", signed=True)
        position = rec.store_timestamp_position(flag)
        stored = int.from_bytes(head[position : position + 8], "big", signed=True)
        if stored != 0 and stored <= safe:
            return index
    return 0


def _drop_bytes_after(commitlog: CommitLog, end: int) -> int:
    """Zero leftover data past ``end`` in the file holding it (later files are deleted
    by the truncation); return how many non-zero bytes were dropped in all."""
    dropped = 0
    for mapped in commitlog.files.files:
        file_end = mapped.file_from_offset + commitlog.file_size
        if file_end <= end:
            continue
        start = max(0, end - mapped.file_from_offset)
        if mapped.file_from_offset <= end and mapped.writable:
            dropped += mapped.zero_tail(start)
        else:
            dropped += mapped.last_nonzero_end(start) - start
    return dropped


def recover_store(
    *,
    commitlog: CommitLog,
    queues: dict[tuple[str, int], ConsumeQueue],
    index: IndexService,
    checkpoint: Checkpoint,
    config: StoreConfig,
    abnormal: bool,
    redispatch: Callable[[int], int],
) -> RecoveryReport:
    """Bring CommitLog, queues and index back into agreement (docs/recovery.md).

    1. Each queue finds its last valid unit (from its third-last file).
    2. The CommitLog is validated from its third-last file (normal) or from the newest file
       the checkpoint vouches for (abnormal), and cut after the last valid record.
    3. Queue units and index entries pointing past that end are removed.
    4. Every scanned record a queue or the index is missing is dispatched again.
    """
    report = RecoveryReport(abnormal=abnormal)
    for queue in queues.values():
        queue.recover()
    queue_ends_before = {key: q.max_offset() for key, q in queues.items()}
    files = commitlog.files.files
    start = max(0, len(files) - 3)
    if abnormal:
        start = min(start, abnormal_start_index(commitlog, checkpoint))
    if files:
        report.start_file = files[start].path

    queue_next = {f"{t}-{q}": queue.max_offset() for (t, q), queue in queues.items()}
    if index.files:
        report.index_slots_repaired = index.files[-1].repair_uncounted_writes()
    index_end = index.files[-1].end_phy_offset if index.files else -1
    index_empty = not any(f.entry_count for f in index.files)
    commitlog_min = max(commitlog.min_offset(), 0)
    missing_from: list[int] = []

    def on_record(data: bytes, view: rec.RecordView) -> None:
        if missing_from:
            return
        queue_key = f"{view.topic}-{view.queue_id}"
        if sysflag.gets_queue_entry(view.sys_flag) and view.queue_offset >= queue_next.get(
            queue_key, 0
        ):
            if queue_key not in queue_next and view.queue_offset > 0:
                # The whole queue is gone (its directory deleted): its earlier records lie
                # before this scan, so rebuild from the start of the CommitLog.
                missing_from.append(commitlog_min)
            else:
                missing_from.append(view.physical_offset)
            return
        if (
            config.message_index_enable
            and (index_empty or view.physical_offset > index_end)
            and sysflag.gets_index_entry(view.sys_flag)
            and _index_keys(data, view)
        ):
            missing_from.append(view.physical_offset)

    end = scan_valid_end(
        commitlog, start, check_crc=config.check_crc_on_recover, report=report, on_record=on_record
    )
    scan_start = files[start].file_from_offset if files else 0
    if config.message_index_enable and index_empty and scan_start > commitlog_min:
        missing_from.append(commitlog_min)  # no index at all: rebuild it from the start
    if files:
        report.truncated_bytes = _drop_bytes_after(commitlog, end)
        commitlog.files.truncate_dirty_files(end)
        commitlog.files.flushed_where = end
    report.commit_log_end = end
    for key, queue in queues.items():
        before = queue.max_offset()
        queue.truncate_dirty(end)
        after = queue.max_offset()
        if after != before or after != queue_ends_before.get(key, after):
            report.queues_truncated.append(f"{key[0]}-{key[1]}")
            report.queue_units_dropped += max(0, queue_ends_before.get(key, before) - after)

    def store_time_of(offset: int) -> int:
        return commitlog.store_time_at(offset, 0)

    report.index_entries_dropped = index.truncate_from(end, store_time_of)
    report.index_keys_completed = _complete_last_indexed_record(commitlog, index, end)

    min_offset = commitlog.min_offset()
    for queue in queues.values():
        if min_offset >= 0:
            queue.correct_min_offset(min_offset)
    if missing_from:
        report.redispatch_from = min(missing_from)
        report.redispatched_records = redispatch(report.redispatch_from)
    else:
        report.redispatched_records = redispatch(end)
    return report


def _complete_last_indexed_record(commitlog: CommitLog, index: IndexService, end: int) -> int:
    """A crash between two keys of one message leaves it partly indexed; the dispatcher's
    dedup (offset < end offset) would never finish it, so put its missing keys here.

    The message is the one at the newest file's end offset (inherited by a file created
    by a rollover that the crash cut short); its entries may span that rollover.
    """
    if not index.files:
        return 0
    offset = index.files[-1].end_phy_offset
    if offset >= end or not any(f.entry_count for f in index.files):
        return 0
    located = commitlog.read_record(offset)
    if located is None:
        return 0
    data, view = located
    if not sysflag.gets_index_entry(view.sys_flag):
        return 0
    keys = _index_keys(data, view)
    present = 0
    for index_file in reversed(index.files):
        trailing = index_file.trailing_entries_at(offset)
        present += trailing
        if trailing < index_file.entry_count:
            break  # the message's run of entries starts inside this file
    missing = keys[present:]
    for key in missing:
        current = index.current_file()
        while not current.put_key(key, offset, view.store_timestamp):
            current = index.current_file()
    return len(missing)


def _index_keys(data: bytes, view: rec.RecordView) -> list[str]:
    """The ``topic#key`` strings the index holds for a record, in the order they are put."""
    properties = rec.record_properties(data, view)
    keys = []
    if properties.get(props.UNIQ_KEY):
        keys.append(f"{view.topic}#{properties[props.UNIQ_KEY]}")
    keys.extend(f"{view.topic}#{k}" for k in props.split_keys(properties.get(props.KEYS)))
    return keys
