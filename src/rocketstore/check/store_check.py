"""``check``'s engine: read every file of a store with the format codecs and list what is
wrong, one ``Problem`` per finding, instead of raising.

Layer: check. Never opens a MessageStore, never takes the writer lock, never prints (the
CLI renders the result). What it verifies:

* CommitLog: every record's size, magic, field lengths, PHYSICALOFFSET and body CRC; file
  names, sizes and END_OF_FILE blanks; no garbage after the end of data (:mod:`.scan`).
* queue -> CommitLog: every live unit points at a record that starts there, with that size,
  topic, queue id, QUEUEOFFSET and tagsCode; units end cleanly (zeros after the last one).
* CommitLog -> queue: every record that takes a queue entry has its unit.
* index -> CommitLog: every live entry points at a record start, and its hash is the hash of
  one of that record's ``topic#key`` strings; slots and chains stay inside the file.
* CommitLog -> index: every key of every record is in the index.

Records past the furthest point the queues (or the index) reached are not problems but
*dispatch lag* when the ``abort`` file shows a writer running (or crashed): it, or the next
writer's recovery, dispatches them. After a clean shutdown they are problems.
"""

from __future__ import annotations

import contextlib
import logging
import os
from array import array
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Protocol

import numpy as np

from rocketstore.check.common import RecordTable
from rocketstore.check.dledger_check import DLedgerCheck
from rocketstore.check.index_check import IndexCheck
from rocketstore.check.queue_check import QueueCheck
from rocketstore.check.result import CheckResult, Problem
from rocketstore.check.scan import CommitLogScan, ScanIssue
from rocketstore.config import StoreConfig
from rocketstore.errors import CorruptDataError, IncompleteDataError
from rocketstore.files.mapped_file_queue import offset_file_paths
from rocketstore.files.regular_file import read_store_file
from rocketstore.files.store_dir import with_dledger
from rocketstore.format import properties as props
from rocketstore.format import record as rec
from rocketstore.format import sysflag
from rocketstore.format.checkpoint import CHECKPOINT_FILE_SIZE, decode_checkpoint
from rocketstore.format.javahash import index_key_hash_many, tags_code
from rocketstore.format.multi_dispatch import INNER_MULTI_QUEUE_OFFSET, dispatch_targets
from rocketstore.paths import (
    ABORT_FILE,
    CHECKPOINT_FILE,
    CONSUME_QUEUE_DIR,
    CONSUME_QUEUE_EXT_DIR,
    INDEX_DIR,
    SCHEDULE_TOPIC,
    dledger_home,
)

log = logging.getLogger(__name__)


class ByteCounter(Protocol):
    """Counts the bytes a check has read (the CLI's progress bar)."""

    def advance(self, amount: int) -> None: ...


# ``progress(total_bytes, label)``: a context that counts one check's bytes as it reads
# them (labels: "check", and "re-check" after a repair), as rocketstore.cli.progress does.
ProgressFactory = Callable[[int, str], AbstractContextManager[ByteCounter]]


def store_bytes(root: str, config: StoreConfig) -> int:
    """Bytes of the CommitLog, queue and index files (the progress total of a check)."""
    # The CommitLog files the check reads (its directories may hold other things).
    paths = list(offset_file_paths(config.commit_log_dirs(root).all).values())
    for part in (CONSUME_QUEUE_DIR, INDEX_DIR):
        for directory, _dirs, files in os.walk(os.path.join(root, part)):
            paths += [os.path.join(directory, name) for name in files]
    total = 0
    for path in paths:
        with contextlib.suppress(OSError):  # removed by a running writer meanwhile
            total += os.path.getsize(path)
    return total


def check_with_progress(
    root: str,
    config: StoreConfig,
    label: str,
    progress: ProgressFactory | None,
    *,
    lock_held: bool = False,
) -> CheckResult:
    """``check_files`` counting its bytes with ``progress`` (when given)."""
    if progress is None:
        return check_files(root, config, lock_held=lock_held)
    with progress(store_bytes(root, config), label) as counter:
        return check_files(root, config, on_bytes=counter.advance, lock_held=lock_held)


class _RecordCollector:
    def __init__(self, *, enable_lmq: bool = True) -> None:
        self.enable_lmq = enable_lmq
        self.extra: dict[tuple[int, int], int] = {}
        self.offset = array("q")
        self.size = array("q")
        self.queue = array("q")
        self.queue_offset = array("q")
        self.tags_code = array("q")
        self.check_tags = array("b")
        self.queue_ids: dict[tuple[str, int], int] = {}
        self.key_offset = array("q")
        self.key_hash = array("q")
        self._pending_keys: list[str] = []

    def add(self, buf: bytes, view: rec.RecordView) -> None:
        properties = rec.record_properties(buf, view)
        self.offset.append(view.physical_offset)
        self.size.append(view.size)
        if sysflag.gets_queue_entry(view.sys_flag):
            name = (view.topic, view.queue_id)
            self.queue.append(self.queue_ids.setdefault(name, len(self.queue_ids)))
            if INNER_MULTI_QUEUE_OFFSET in properties:
                self._add_extra(view, properties)
        else:
            self.queue.append(-1)
        self.queue_offset.append(view.queue_offset)
        # SCHEDULE_TOPIC units carry the delivery time, not a tags hash.
        scheduled = view.topic == SCHEDULE_TOPIC and props.DELAY in properties
        self.check_tags.append(0 if scheduled else 1)
        self.tags_code.append(0 if scheduled else tags_code(properties.get(props.TAGS)))
        if sysflag.gets_index_entry(view.sys_flag):
            keys: list[str] = []
            if properties.get(props.UNIQ_KEY):
                keys.append(f"{view.topic}#{properties[props.UNIQ_KEY]}")
            keys.extend(f"{view.topic}#{k}" for k in props.split_keys(properties.get(props.KEYS)))
            for key in keys:
                self.key_offset.append(view.physical_offset)
                self._pending_keys.append(key)
            if len(self._pending_keys) >= 65536:
                self._hash_pending()

    def _add_extra(self, view: rec.RecordView, properties: dict[str, str]) -> None:
        """The units a multi-dispatch record gives the queues it names, read as dispatch
        reads them (format.multi_dispatch.dispatch_targets)."""
        targets = dispatch_targets(properties, view.queue_id, enable_lmq=self.enable_lmq)
        row = len(self.offset) - 1
        for name, queue_id, offset in targets or []:
            key = self.queue_ids.setdefault((name, queue_id), len(self.queue_ids))
            if key != self.queue[-1]:  # naming its own queue is a repeat: no second unit
                self.extra.setdefault((row, key), offset)

    def _hash_pending(self) -> None:
        if self._pending_keys:
            self.key_hash.extend(int(h) for h in index_key_hash_many(self._pending_keys))
            self._pending_keys = []

    def table(self) -> RecordTable:
        self._hash_pending()
        names = sorted(self.queue_ids, key=self.queue_ids.__getitem__)
        return RecordTable(
            offset=np.frombuffer(self.offset, dtype=np.int64).copy(),
            size=np.frombuffer(self.size, dtype=np.int64).copy(),
            queue=np.frombuffer(self.queue, dtype=np.int64).copy(),
            queue_offset=np.frombuffer(self.queue_offset, dtype=np.int64).copy(),
            tags_code=np.frombuffer(self.tags_code, dtype=np.int64).copy(),
            check_tags=np.frombuffer(self.check_tags, dtype=np.int8).astype(bool),
            queue_names=names,
            key_offset=np.frombuffer(self.key_offset, dtype=np.int64).copy(),
            key_hash=np.frombuffer(self.key_hash, dtype=np.int64).copy(),
            extra=self.extra,
        )


def check_files(
    root: str,
    config: StoreConfig | None = None,
    *,
    on_bytes: Callable[[int], None] | None = None,
    lock_held: bool = False,
) -> CheckResult:
    """Check every file of the store at ``root``; see the module docstring. ``on_bytes``
    is told of the bytes read as the check goes (a progress bar's total: ``store_bytes``).

    With ``lock_held`` (repair) no writer can be running, so nothing counts as in flight.
    """
    abort = os.path.exists(os.path.join(root, ABORT_FILE))
    result = CheckResult(root, unclean=abort and not lock_held)
    rel = _relative(root)
    settings = with_dledger(root, config or StoreConfig())
    # Read on past damage as a pull does, so that check judges what a consumer gets.
    scan = CommitLogScan(
        root,
        check_crc=True,
        on_bytes=on_bytes,
        dirs=settings.commit_log_dirs(root),
        resume_after_damage=True,
    )
    result.scan = scan
    # LMQ queues are queue 0 unless a broker.conf turns multi-dispatch on without LMQ.
    collector = _RecordCollector(
        enable_lmq=settings.enable_lmq or not settings.enable_multi_dispatch
    )
    for record in scan.records():
        collector.add(record.buf, record.view)
    table = collector.table()
    in_flight: set[int] = set()
    for issue in scan.issues:
        if result.unclean and (_maybe_in_flight(scan, issue) or _written_since(issue)):
            in_flight.add(issue.offset)
            result.notes.append(
                f"{rel(issue.path)}: offset {issue.offset}: {issue.reason} - at the very end "
                "of the data while a writer may be appending (the abort file is there); "
                "recovery drops it if it is still there after a crash"
            )
            continue
        result.problems.append(
            Problem(
                "commitlog",
                rel(issue.path),
                f"offset {issue.offset} (position {issue.position})",
                issue.reason,
                issue.offset,
                issue.kind,
            )
        )
    result.records = scan.records_seen
    result.commit_log_end = scan.data_end
    min_offset = scan.min_offset
    queue_check = QueueCheck(
        root, table, min_offset, scan.data_end, result, rel, on_bytes,
        multi_dispatch=settings.enable_multi_dispatch,
    )  # fmt: skip
    queue_check.run()
    if queue_check.newer_units:
        result.notes.append(
            f"{queue_check.newer_units} queue units point at or past {scan.data_end}, where "
            "the CommitLog read ended: records a running writer appended since (not checked)"
        )
    if queue_check.unread_but_whole:
        result.notes.append(
            f"{queue_check.unread_but_whole} queue units name whole records inside damaged "
            "CommitLog data: a consumer reads them"
        )
    if queue_check.ext_units:
        result.notes.append(
            f"{queue_check.ext_units} queue units keep their tagsCode in "
            f"{CONSUME_QUEUE_EXT_DIR}/ (a broker with enableConsumeQueueExt); read there"
        )
    configured = settings.index_geometry
    IndexCheck(
        root, table, min_offset, scan.data_end, result, rel, on_bytes, configured,
        frozenset(in_flight),
    ).run()  # fmt: skip
    dirs = settings.commit_log_dirs(root)
    if dirs.dledger:
        home = dledger_home(root, settings.dledger_self_id)
        DLedgerCheck(home, dirs.dledger, scan.last_entry, result, rel).run()
    _check_checkpoint(root, result, rel)
    log.debug(
        "checked %s: %d records, %d queue units, %d index entries, %d problems",
        root, result.records, result.queue_units, result.index_entries, len(result.problems),
    )  # fmt: skip
    return result


def _maybe_in_flight(scan: CommitLogScan, issue: ScanIssue) -> bool:
    """A torn last record or a tail still being written, as a running writer leaves them."""
    if issue.kind == "structure":
        return issue is scan.first_structure_issue and not scan.records_after_structure_issue
    return issue.kind == "crc" and issue.offset == scan.last_record_offset


def _written_since(issue: ScanIssue) -> bool:
    """Whether what the scan found unreadable beside a running writer reads whole now: a
    record (or a file's END_OF_FILE blank) the writer was writing while the scan passed,
    which the scan's later reading may have shown finished after it (no problem)."""
    if issue.kind == "layout":
        return False
    # Where the data stopped: bytes after a run of zeros are reported where they start.
    offset = issue.offset if issue.cut_at is None else issue.cut_at
    try:
        with open(issue.path, "rb") as f:
            f.seek(issue.position - (issue.offset - offset))
            data = f.read(rec.END_FILE_MIN_BLANK_LENGTH)
            size = int.from_bytes(data[:4], "big", signed=True)
            if 0 < size <= 64 * 1024 * 1024:
                data += f.read(size - len(data))
        found = rec.read_record(data, 0, check_crc=True)
    except (OSError, CorruptDataError, IncompleteDataError):
        return False
    return isinstance(found, rec.Blank) or found.physical_offset == offset


def _relative(root: str) -> Callable[[str], str]:
    def rel(path: str) -> str:
        # Files outside the root (a CommitLog spread over other directories) by full path.
        inside = os.path.abspath(path).startswith(os.path.join(os.path.abspath(root), ""))
        return os.path.relpath(path, root) if inside else os.path.abspath(path)

    return rel


def _check_checkpoint(root: str, result: CheckResult, rel: Callable[[str], str]) -> None:
    path = os.path.join(root, CHECKPOINT_FILE)
    if os.path.exists(os.path.join(root, ABORT_FILE)):
        result.notes.append(
            "abort file present: a writer is running, or the last one did not shut down "
            "cleanly (its recovery re-checks the newest files)"
        )
    if not os.path.exists(path):
        result.notes.append("no checkpoint file (a new store, or one never flushed)")
        return
    try:
        data = read_store_file(path)
    except CorruptDataError as e:  # a FIFO or directory so named
        result.problems.append(Problem("checkpoint", rel(path), "file", e.reason))
        return
    if len(data) != CHECKPOINT_FILE_SIZE:
        result.problems.append(
            Problem(
                "checkpoint",
                rel(path),
                "file",
                f"checkpoint is {len(data)} bytes, expected {CHECKPOINT_FILE_SIZE}",
            )
        )
        return
    value = decode_checkpoint(data)
    if min(value.physic_msg_timestamp, value.logics_msg_timestamp, value.index_msg_timestamp) < 0:
        result.problems.append(
            Problem("checkpoint", rel(path), "file", f"negative timestamp in {value}")
        )
