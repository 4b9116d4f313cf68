"""Recovery on open: find the end of valid CommitLog data and make the queues agree.

Layer: recovery. Keeps RocketMQ's byte format while fixing its known flaws: a record whose
PHYSICALOFFSET field is not its real position is stale (RocketMQ #10017), a CRC of 0 is
accepted (#9121), an illegal magic ends the scan instead of looping (#289).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from rocketstore.commitlog import CommitLog
from rocketstore.config import StoreConfig, delay_levels_ms
from rocketstore.consume_queue import ConsumeQueue
from rocketstore.errors import CorruptDataError, FileRemovedError
from rocketstore.format import record as rec
from rocketstore.format import sysflag
from rocketstore.format.checkpoint import Checkpoint
from rocketstore.format.commitlog_walk import FileWalk, Verdict
from rocketstore.format.dispatch_facts import dispatch_facts, record_facts
from rocketstore.format.dledger_entry import EntryHeader
from rocketstore.format.multi_dispatch import extra_units
from rocketstore.format.record_scan import Records, TopicTable, queue_groups
from rocketstore.index import IndexService
from rocketstore.recovery.later_records import first_record_after

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
    # Wall time of the open's recovery (set by MessageStore.open).
    seconds: float = 0.0

    def summary(self) -> str:
        kind = "abnormal" if self.abnormal else "normal"
        return (
            f"{kind} recovery: CommitLog ends at {self.commit_log_end}, "
            f"{self.records_scanned} records checked, {self.truncated_bytes} bytes dropped, "
            f"{len(self.queues_truncated)} queues truncated, "
            f"{self.redispatched_records} records re-dispatched"
            + (f"; stopped at {self.stop_offset}: {self.stop_reason}" if self.stop_reason else "")
        )


# Bytes of records walked per step of a scan: bounds the list of record starts (a 1 GiB
# file of small records would otherwise make a list of millions of ints).
SCAN_WINDOW_BYTES = 32 * 1024 * 1024

# Receives each run of valid records: the file's buffer (valid only during the call), the
# file's CommitLog offset, the records (file positions) and the scan's topic table.
RecordsHandler = Callable[[memoryview, int, Records, TopicTable], None]


def scan_valid_end(
    commitlog: CommitLog,
    start_index: int,
    *,
    check_crc: bool,
    report: RecoveryReport,
    on_records: RecordsHandler | None = None,
    start_offset: int | None = None,
    entries: EntryChain | None = None,
) -> int:
    """Walk records from file ``start_index`` (or from ``start_offset``, a record
    boundary); return the offset after the last valid one.

    Each file is read in place through its mapping (no copies) by the CommitLog walker
    (:mod:`rocketstore.format.commitlog_walk`: magic, sizes, PHYSICALOFFSET == position,
    the 8-byte tail rule and, with ``check_crc``, the body CRC, a run at a time). A blank
    moves to the next file; anything else that ends a file's valid data stops the scan,
    with the walker's reason in ``report``.

    In a DLedger log each entry must follow the one before (``entries``: the last one a
    previous scan accepted, when this one goes on from where it ended).
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
    topics = TopicTable()
    entries = entries or EntryChain()
    while index < len(files):
        mapped = files[index]
        if not mapped.hold():
            raise FileRemovedError(f"{mapped.path} is closed")
        try:
            buf = memoryview(mapped.mm)
            try:
                verdict = _walk_file(
                    buf,
                    mapped.file_from_offset,
                    offset - mapped.file_from_offset,
                    size,
                    framed=commitlog.dirs.holds_entries(mapped.path),
                    check_crc=check_crc,
                    report=report,
                    topics=topics,
                    on_records=on_records,
                    entries=entries,
                )
            finally:
                with contextlib.suppress(BufferError):  # a view outlived the scan: GC frees it
                    buf.release()
        finally:
            mapped.release()
        if not verdict.file_finished:
            report.stop_offset = mapped.file_from_offset + verdict.position
            report.stop_reason = verdict.reason
            return mapped.file_from_offset + verdict.position
        # File finished (blank or exactly full): continue with the next file, if any.
        if index + 1 >= len(files):
            return mapped.file_from_offset + size
        index += 1
        offset = files[index].file_from_offset
    return offset


@dataclass
class EntryChain:
    """The last DLedger entry a scan accepted, so that the next one, in this file or the
    next, is checked to follow it (index + 1, term no lower)."""

    last: EntryHeader | None = None


def _walk_file(
    buf: memoryview,
    base: int,
    position: int,
    size: int,
    *,
    framed: bool,
    check_crc: bool,
    report: RecoveryReport,
    topics: TopicTable,
    on_records: RecordsHandler | None,
    entries: EntryChain,
) -> Verdict:
    """Walk one file from ``position`` with the CommitLog walker (format.commitlog_walk),
    counting and handing over its runs of valid records; its verdict."""
    walk = FileWalk(
        buf,
        base,
        position,
        size,
        topics=topics,
        framed=framed,
        previous_entry=entries.last,
        check_crc=check_crc,
        window_bytes=SCAN_WINDOW_BYTES,
    )
    for records in walk:
        report.records_scanned += len(records)
        if on_records is not None:
            on_records(buf, base, records, topics)
    entries.last = walk.last_entry
    return walk.verdict


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
    deleted_queues: Mapping[str, int] | None = None,
) -> RecoveryReport:
    """Bring CommitLog, queues and index back into agreement (docs/recovery.md).

    1. Each queue finds its last valid unit (from its third-last file).
    2. The CommitLog is validated from its third-last file (normal) or from the newest file
       the checkpoint vouches for (abnormal), and cut after the last valid record.
    3. Queue units and index entries pointing past that end are removed.
    4. Every scanned record a queue or the index is missing is dispatched again, but not
       the records of a queue deleted on purpose (``deleted_queues``: ``topic-queueId`` ->
       the CommitLog end at its deletion) that lie below that end.
    """
    deleted = dict(deleted_queues or {})
    report = RecoveryReport(abnormal=abnormal)
    for queue in queues.values():
        queue.recover()
    queue_ends_before = {key: q.max_offset() for key, q in queues.items()}
    files = commitlog.files.files
    if not config.cut_damaged_commitlog:
        if not files:
            _refuse_to_empty_queues(commitlog, queues, index)
        _refuse_missing_files(commitlog, queues, index)
    start = max(0, len(files) - 3)
    if abnormal:
        start = min(start, abnormal_start_index(commitlog, checkpoint))
    if files:
        report.start_file = files[start].path

    queue_next = {f"{t}-{q}": queue.max_offset() for (t, q), queue in queues.items()}
    if index.files:
        report.index_slots_repaired = index.files[-1].repair_uncounted_writes()
    # The newest file's, unless its header never reached the disk (a file made just
    # before a power loss reads as zeros): then the end of the files before it.
    index_end = max((f.end_phy_offset for f in index.files), default=-1)
    index_empty = not any(f.entry_count for f in index.files)
    commitlog_min = max(commitlog.min_offset(), 0)
    scan_start = files[start].file_from_offset if files else 0
    missing_from: list[int] = []
    # Where to re-dispatch from for units missing *before* the scan (gaps_before_scan).
    gap_from: list[int] = []
    seen_queues: set[str] = set()
    newest_stamp = [0]  # store time of the last valid record scanned
    # An index ending before the scan is looked at on its own, until the scan's first
    # record with index entries: a re-dispatch from a queue's miss starts in the scan and
    # would leave the records between untouched (a rebuild killed after a run's queue
    # units but before its index entries ends both right at the scan's start).
    index_before_scan = [config.message_index_enable and not index_empty and index_end < scan_start]

    def resume_point(queue_key: str) -> int:
        """Where a queue with units missing before the scan is rebuilt from: the start of
        the CommitLog file of its last unit. A dispatch run never spans files and runs go
        in order, so a kill mid-run left every record before that file dispatched."""
        queue = queues_by_key.get(queue_key)
        if queue is None or queue.max_physic_offset <= commitlog_min:
            return commitlog_min
        found = commitlog.files.find(queue.max_physic_offset - 1)
        return commitlog_min if found is None else max(found.file_from_offset, commitlog_min)

    queues_by_key = {f"{t}-{q}": queue for (t, q), queue in queues.items()}

    levels_ms = delay_levels_ms(config.message_delay_level)

    def on_records(buf: memoryview, base: int, records: Records, topics: TopicTable) -> None:
        """Note the first record (in CommitLog order) a queue or the index is missing."""
        if len(records):
            newest_stamp[0] = int(records.store_timestamp[-1])
        offsets = records.commit_log_offsets(base)
        count = len(records)
        first_queue, queue_value = count, 0
        groups = [
            (rows, f"{topic}-{queue_id}", records.queue_offset[rows])
            for rows, topic, queue_id in queue_groups(records, topics)
        ]
        if config.enable_multi_dispatch:
            # The units wrapped records give the queues they name (format.multi_dispatch).
            extra, _problems = extra_units(buf, records, enable_lmq=config.enable_lmq)
            groups += [(u.rows, f"{n}-{q}", u.queue_offsets) for (n, q), u in extra.items()]
        for group_rows, queue_key, group_offsets in groups:
            rows, queue_offsets = group_rows, group_offsets
            cutoff = deleted.get(queue_key)
            if cutoff is not None:
                # A deleted queue's records from before its deletion are no queue's.
                kept = offsets[rows] >= cutoff
                rows, queue_offsets = rows[kept], queue_offsets[kept]
            if not len(rows):
                continue
            if queue_key not in seen_queues:
                seen_queues.add(queue_key)
                if int(queue_offsets[0]) > queue_next.get(queue_key, 0):
                    # The queue's first record in the scan is past its end: the records
                    # between lie before the scan (its directory deleted, or a rebuild
                    # killed partway through while the checkpoint vouched for them).
                    gap_from.append(resume_point(queue_key))
            if missing_from:
                continue  # the first miss is known; only gaps of later queues matter
            missing = np.flatnonzero(queue_offsets >= queue_next.get(queue_key, 0))
            if len(missing) and int(rows[missing[0]]) < first_queue:
                first_queue = int(rows[missing[0]])
                queue_value = int(offsets[first_queue])
        if index_before_scan[0]:
            facts = dispatch_facts(buf, records, topics, levels_ms, index=True)
            if len(facts.entries):
                index_before_scan[0] = False
                gap_from.append(max(index_end, commitlog_min))
        if missing_from:
            return
        first_index = count
        if config.message_index_enable:
            # Offsets grow, so the records past the index's end are a suffix; only those
            # before the first queue miss can matter.
            past = 0 if index_empty else int(np.searchsorted(offsets, index_end, side="right"))
            if past < first_queue:
                tail = records.slice(past, first_queue)
                facts = dispatch_facts(buf, tail, topics, levels_ms, index=True)
                if len(facts.entries):
                    first_index = past + int(facts.entries["record"][0])
        if first_queue < count and first_queue < first_index:
            missing_from.append(queue_value)
        elif first_index < count:
            missing_from.append(int(offsets[first_index]))

    end = scan_valid_end(
        commitlog,
        start,
        check_crc=config.check_crc_on_recover,
        report=report,
        on_records=on_records,
    )
    if not config.cut_damaged_commitlog and files:
        _refuse_to_cut_records(commitlog, end, report, newest_stamp[0])
    missing_from += gap_from
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


def _refuse_to_empty_queues(
    commitlog: CommitLog, queues: dict[tuple[str, int], ConsumeQueue], index: IndexService
) -> None:
    """CorruptDataError when the CommitLog has no file at all but the queues or the index
    hold entries (``StoreConfig.cut_damaged_commitlog`` off): recovery would delete them
    all (as RocketMQ's does), yet the likelier story is a CommitLog somewhere else, such as
    a broker whose storePathCommitLog names other directories, opened without it."""
    units = sum(max(0, q.max_offset() - max(q.min_offset(), 0)) for q in queues.values())
    entries = sum(f.entry_count for f in index.files)
    if not units and not entries:
        return
    raise CorruptDataError(
        f"no CommitLog file in {', '.join(commitlog.dirs.all)}, but the consume queues hold "
        f"{units} units and the index {entries} entries: recovery would delete them, so the "
        "store was not opened for writing. If the broker keeps its CommitLog elsewhere, give "
        "its storePathCommitLog (rocketstore -c broker.conf); if the CommitLog is really "
        "gone, remove consumequeue/ and index/ first"
    )


def missing_files(
    commitlog: CommitLog, queues: dict[tuple[str, int], ConsumeQueue], index: IndexService
) -> str | None:
    """What CommitLog files are missing, or None: a gap between two files, or queue units
    or index entries pointing past the end of the last file. Retention never leaves
    either; the likelier story is a storePathCommitLog directory that is not there (a
    disk not mounted)."""
    size = commitlog.file_size
    hint = f"; is every storePathCommitLog directory there ({', '.join(commitlog.dirs.all)})?"
    gaps = commitlog.files.gaps()
    if gaps:
        previous, current = gaps[0]
        return (
            f"CommitLog files are missing between {previous.path} and {current.path} "
            f"(offsets {previous.file_from_offset + size} to {current.file_from_offset})" + hint
        )
    files = commitlog.files.files
    if not files:
        return None
    end = files[-1].file_from_offset + size
    pointed = max((q.max_physic_offset for q in queues.values()), default=-1)
    pointed = max(pointed, max((f.end_phy_offset for f in index.files), default=-1))
    if pointed > end:
        return (
            f"consume queues or the index point to CommitLog offset {pointed}, past the "
            f"last CommitLog file ({files[-1].path}, which ends at {end}): a file is missing" + hint
        )
    return None


def _refuse_missing_files(
    commitlog: CommitLog, queues: dict[tuple[str, int], ConsumeQueue], index: IndexService
) -> None:
    """CorruptDataError when CommitLog files are missing (``cut_damaged_commitlog`` off):
    recovery would cut the CommitLog and the queues there and write new files where the
    missing ones belong, which would collide with them when they come back."""
    missing = missing_files(commitlog, queues, index)
    if missing is not None:
        raise CorruptDataError(
            "the store was not opened for writing, as recovery would cut the CommitLog "
            f"where files are missing and drop what points past it: {missing}"
        )


def _refuse_to_cut_records(
    commitlog: CommitLog, end: int, report: RecoveryReport, newest_stamp: int
) -> None:
    """CorruptDataError, before the CommitLog is touched, when whole records follow the
    point where the scan stopped (``StoreConfig.cut_damaged_commitlog`` off)."""
    damaged = report.stop_reason not in ("", "end of data")
    later = first_record_after(commitlog, end, newest_stamp)
    if later is None:
        return
    why = report.stop_reason if damaged else "zeros where the data should go on"
    keep = ""
    if "CRC mismatch" in why:  # the record is whole: recovery can keep it
        keep = "; or keep the record as it is with checkCRCOnRecover=false (check_crc_on_recover)"
    raise CorruptDataError(
        f"the CommitLog is damaged at offset {end} ({why}) and a readable record follows "
        f"at offset {later}: recovery would cut the CommitLog at {end} and lose every "
        "record after it, so the store was not opened for writing and the CommitLog was "
        "left as it was (stale consume-queue units and uncounted index entries past the "
        "data may have been cleared, as in any recovery). See `rocketstore check`; save the "
        f"records with `rocketstore dump --from {later}`; cut as RocketMQ does with "
        "`rocketstore check --repair --force`" + keep
    )


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
    start = view.properties_position
    properties = b"\x02" + bytes(data[start : start + view.properties_length])
    # The keys in the order the dispatcher puts them (the tagsCode is not needed here).
    _code, keys = record_facts(properties, view.topic, view.sys_flag, view.store_timestamp, ())
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
