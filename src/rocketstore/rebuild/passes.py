"""The pass functions: each runs on one task (in a worker process or a Spark executor) and
returns a small picklable result.

Layer: rebuild. Four kinds of task:

1. :func:`scan_pass` (one per CommitLog range, run in bundles of ranges by
   :func:`scan_bundle_pass`): decodes and validates the range's records,
   spills their consume-queue units (grouped by queue) and index entries (hashed) to two
   ``.npy`` files in the work directory, and returns counts. It is the "count" pass of the
   index: the driver lays out the index files from these counts.
2. :func:`queue_pass` (one per group of queues): writes each queue's files from the spilled
   units, following the dispatcher's ``ConsumeQueue.put`` rules.
3. :func:`index_part_pass` (one per part of an index file; a file is cut into parts so one
   big file is built on every worker): writes the part's entries into the file, each
   chained to the previous entry of its slot within the part, and spills the part's slot
   runs (oldest and newest entry per slot).
4. :func:`index_pass` (one per index file, after its parts): joins the parts' chains and
   fills the slot table and header (:meth:`IndexFile.link_blocks`), so the bytes are those
   of the dispatcher putting every entry in order.

Expected failures (corrupt data, I/O) come back as :class:`TaskFailure` naming the task, so
a process pool or Spark never has to pickle an exception.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from rocketstore.errors import StoreError
from rocketstore.files.deleted_queues import queue_key
from rocketstore.files.holes import next_data_finder
from rocketstore.files.mapped_file_queue import offset_file_path
from rocketstore.format import index_layout
from rocketstore.format.commitlog_walk import scan_entry_file, scan_range
from rocketstore.format.dispatch_facts import dispatch_facts
from rocketstore.format.multi_dispatch import ExtraUnits, extra_units, merge_units
from rocketstore.format.queue_unit import CQ_UNIT_SIZE, max_queue_offset
from rocketstore.format.queue_unit import UNIT_DTYPE as _CQ_DTYPE
from rocketstore.format.record_scan import (
    CorruptRegion,
    NextData,
    Records,
    TopicTable,
    queue_groups,
)
from rocketstore.index_chain import ChainedBlock, EntryPoint, RunChainer, SlotRuns, write_blocks
from rocketstore.index_file import IndexFile
from rocketstore.paths import CommitLogDirs, offset_to_file_name
from rocketstore.rebuild.plan import CommitLogRange, RebuildSettings

UNIT_DTYPE = np.dtype(
    [("queue_offset", "<i8"), ("offset", "<i8"), ("size", "<i8"), ("tags_code", "<i8")]
)
_BLANK_UNIT = np.array([(0, 0x7FFFFFFF, 0)], dtype=_CQ_DTYPE)


@dataclass(frozen=True)
class TaskFailure:
    """A task that could not do its work: what it was working on and why."""

    task: str
    reason: str


@dataclass(frozen=True)
class QueueSpan:
    topic: str
    queue_id: int
    start: int  # first row in the range's units file
    count: int


@dataclass
class ScanResult:
    """What one range holds, in CommitLog order (positions are file positions)."""

    number: int
    first_position: int | None
    stop: str
    stop_position: int
    stop_reason: str
    corrupt: list[CorruptRegion]
    records: int
    last_store_timestamp: int  # of the range's last record (0 if none)
    queues: list[QueueSpan]
    key_count: int
    records_after_last_key: int  # records after the last one that had index keys
    units_path: str | None
    keys_path: str | None
    bytes_scanned: int = 0
    topics: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ScanTask:
    settings: RebuildSettings
    commit_range: CommitLogRange


@dataclass(frozen=True)
class ScanBundle:
    """Scan tasks run one after another as one runner task: a Spark task costs a slot tens
    of milliseconds, and the six ranges of a 2 GiB CommitLog took a local[2] job's scan
    0.50 s as six tasks, 0.42 s as two."""

    tasks: tuple[ScanTask, ...]

    @property
    def bytes(self) -> int:
        return sum(_scan_cost(task) for task in self.tasks)


# A bundle holds at most about this much CommitLog (unless there are fewer workers than
# that makes bundles): a large store still gets many tasks, for balance and retries.
MAX_SCAN_BUNDLE_BYTES = 4 * 1024**3


def _scan_cost(task: ScanTask) -> int:
    return task.commit_range.end - task.commit_range.start


def bundle_scans(
    tasks: list[ScanTask], workers: int, max_bundle_bytes: int = MAX_SCAN_BUNDLE_BYTES
) -> list[ScanBundle]:
    """``tasks`` dealt into bundles of about equal size: one a worker, or more when a
    bundle would hold over ``max_bundle_bytes``. Each bundle's tasks in CommitLog order."""
    total = sum(_scan_cost(t) for t in tasks)
    count = max(1, workers, -(-total // max(1, max_bundle_bytes)))
    return [
        ScanBundle(tuple(sorted(group, key=lambda t: t.commit_range.number)))
        for group in deal(tasks, count, _scan_cost)
    ]


def scan_bundle_pass(bundle: ScanBundle) -> list[ScanResult | TaskFailure]:
    return [scan_pass(task) for task in bundle.tasks]


def scan_pass(task: ScanTask) -> ScanResult | TaskFailure:
    """Pass 1 over one CommitLog range (see the module docstring)."""
    part = task.commit_range
    settings = task.settings
    path = offset_file_path(settings.commitlog_dirs, part.file_offset)
    try:
        with open(path, "rb") as handle:
            mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
            try:
                framed = CommitLogDirs((), dledger=settings.dledger_dirs).holds_entries(path)
                next_data = next_data_finder(handle.fileno(), len(mapped))
                return _scan(task, mapped, next_data, framed)
            finally:
                with contextlib.suppress(BufferError):  # numpy views alive: the GC unmaps it
                    mapped.close()
    except (StoreError, OSError) as e:
        return TaskFailure(part.describe(), str(e))


def _scan(task: ScanTask, mapped: mmap.mmap, next_data: NextData, framed: bool) -> ScanResult:
    part, settings = task.commit_range, task.settings
    buf = memoryview(mapped)
    topics = TopicTable()
    if framed:  # a whole file of a DLedger log (plan.plan_ranges)
        found = scan_entry_file(buf, part.file_offset, len(mapped), topics)
    else:
        found = scan_range(
            buf,
            part.file_offset,
            part.start,
            part.end,
            len(mapped),
            # Damage is always stepped over here; the driver decides whether it fails the
            # job (it may be a torn tail, which is not an error).
            skip_corrupt=True,
            topics=topics,
            next_data=next_data,  # the unwritten rest of the newest file is not read
        )
    records = found.records
    count = len(records)
    units_path = keys_path = None
    queues: list[QueueSpan] = []
    key_count = 0
    after_last_key = count
    if count:
        facts = dispatch_facts(buf, records, topics, settings.delay_levels_ms, index=settings.index)
        codes, entries = facts.tags_codes, facts.entries
        if settings.queues:
            units_path, queues = _spill_units(task, buf, records, topics, codes)
        if settings.index and len(entries):
            entries["offset"] += part.file_offset
            keys_path = _spill_path(task, "keys")
            np.save(keys_path, entries, allow_pickle=False)
            key_count = len(entries)
            after_last_key = facts.records_after_last_key(count)
    return ScanResult(
        number=part.number,
        first_position=found.first_position,
        stop=found.stop,
        stop_position=found.stop_position,
        stop_reason=found.stop_reason,
        corrupt=found.corrupt,
        records=count,
        last_store_timestamp=int(records.store_timestamp[-1]) if count else 0,
        queues=queues,
        key_count=key_count,
        records_after_last_key=after_last_key,
        units_path=units_path,
        keys_path=keys_path,
        bytes_scanned=part.end - part.start,
        topics=list(topics.names),
    )


def _spill_units(
    task: ScanTask,
    data: memoryview,
    records: Records,
    topics: TopicTable,
    codes: npt.NDArray[np.int64],
) -> tuple[str | None, list[QueueSpan]]:
    """The range's consume queue units, queue by queue in CommitLog order, saved for the
    queue pass; with multi-dispatch, each queue's own units merged with those wrapped
    records give it (as the dispatcher writes them, record by record)."""
    extra: dict[tuple[str, int], ExtraUnits] = {}
    if task.settings.multi_dispatch:
        # Records whose two properties disagree get no extra units (the store's
        # dispatcher logs them; `rocketstore check` reports them).
        extra, _problems = extra_units(data, records, enable_lmq=task.settings.enable_lmq)
    pieces: list[tuple[str, int, ExtraUnits]] = []
    for rows, topic, queue_id in queue_groups(records, topics):
        own = ExtraUnits(rows, records.queue_offset[rows])
        more = extra.pop((topic, queue_id), None)
        pieces.append((topic, queue_id, own if more is None else merge_units(*own, more)))
    pieces += [(name, queue_id, more) for (name, queue_id), more in extra.items()]
    pieces = _without_deleted(task, records, pieces)
    if not pieces:
        return None, []
    rows = np.concatenate([piece.rows for _, _, piece in pieces])
    units = np.empty(len(rows), dtype=UNIT_DTYPE)
    units["queue_offset"] = np.concatenate([piece.queue_offsets for _, _, piece in pieces])
    units["offset"] = task.commit_range.file_offset + records.position[rows]
    units["size"] = records.size[rows]
    units["tags_code"] = codes[rows]
    spans = []
    start = 0
    for topic, queue_id, piece in pieces:
        spans.append(QueueSpan(topic, queue_id, start, len(piece.rows)))
        start += len(piece.rows)
    path = _spill_path(task, "units")
    np.save(path, units, allow_pickle=False)
    return path, spans


def _without_deleted(
    task: ScanTask, records: Records, pieces: list[tuple[str, int, ExtraUnits]]
) -> list[tuple[str, int, ExtraUnits]]:
    """The pieces without the units of queues deleted on purpose for records below the
    CommitLog end at their deletion (recovery leaves those out too)."""
    deleted = dict(task.settings.deleted_queues)
    if not deleted:
        return pieces
    kept = []
    for topic, queue_id, piece in pieces:
        cutoff = deleted.get(queue_key(topic, queue_id))
        if cutoff is not None:
            offsets = task.commit_range.file_offset + records.position[piece.rows]
            mask = offsets >= cutoff
            piece = ExtraUnits(piece.rows[mask], piece.queue_offsets[mask])  # noqa: PLW2901
            if not len(piece.rows):
                continue
        kept.append((topic, queue_id, piece))
    return kept


def _spill_path(task: ScanTask, kind: str) -> str:
    directory = task.settings.spill_dir
    os.makedirs(directory, exist_ok=True)
    return os.path.join(directory, f"{task.commit_range.number:06d}-{kind}.npy")


# --- pass 2: consume queues ---------------------------------------------------------------


@dataclass(frozen=True)
class QueuePiece:
    units_path: str
    start: int
    count: int


@dataclass(frozen=True)
class QueueBuild:
    topic: str
    queue_id: int
    pieces: tuple[QueuePiece, ...]  # in CommitLog order


@dataclass(frozen=True)
class QueueTask:
    directory: str  # the new consumequeue/ directory
    file_size: int
    queues: tuple[QueueBuild, ...]


@dataclass(frozen=True)
class QueueResult:
    queues: int
    units: int
    files: int


def queue_pass(task: QueueTask) -> QueueResult | TaskFailure:
    units = files = 0
    for queue in task.queues:
        try:
            written, created = _build_queue(task, queue)
        except (StoreError, OSError) as e:
            return TaskFailure(f"consume queue {queue.topic}-{queue.queue_id}", str(e))
        units += written
        files += created
    return QueueResult(len(task.queues), units, files)


def _load_pieces(pieces: tuple[QueuePiece, ...]) -> npt.NDArray[np.void]:
    parts = [np.load(p.units_path, mmap_mode="r")[p.start : p.start + p.count] for p in pieces]
    return np.concatenate(parts) if len(parts) > 1 else np.array(parts[0])


def queue_layout(
    queue_offsets: npt.NDArray[np.int64], file_size: int
) -> tuple[int, int, npt.NDArray[np.bool_]]:
    """Where the dispatcher puts a queue's units (spec 3.4, for units in CommitLog order):
    returns (first file's start, blank units before the first unit, which units are
    written). A first unit at offset q != 0 blank-fills its file up to q; a later unit whose
    offset is below the write position is a duplicate and skipped; one above it is written
    at the write position anyway ("logic queue order maybe wrong"). A unit whose offset no
    queue can reach (a damaged record's; ``ConsumeQueue.put`` leaves it out) is not
    written and does not count as the first."""
    written = (queue_offsets >= 0) & (queue_offsets <= max_queue_offset(file_size))
    possible = np.flatnonzero(written)
    if len(possible) == 0:
        return 0, 0, written
    first = int(queue_offsets[possible[0]])
    expect = first * CQ_UNIT_SIZE
    file_start = expect - expect % file_size
    fill = (expect % file_size) // CQ_UNIT_SIZE if first != 0 else 0
    if len(possible) < len(queue_offsets) or not np.all(np.diff(queue_offsets) == 1):
        current = expect + CQ_UNIT_SIZE if first != 0 else CQ_UNIT_SIZE
        for i in possible[1:]:
            q = int(queue_offsets[i])
            if q != 0 and q * CQ_UNIT_SIZE < current:
                written[i] = False
                continue
            current += CQ_UNIT_SIZE
    return file_start, fill, written


def _build_queue(task: QueueTask, queue: QueueBuild) -> tuple[int, int]:
    units = _load_pieces(queue.pieces)
    file_start, fill, written = queue_layout(units["queue_offset"], task.file_size)
    kept = units[written]
    data = np.empty(fill + len(kept), dtype=_CQ_DTYPE)
    data[:fill] = _BLANK_UNIT
    data["offset"][fill:] = kept["offset"]
    data["size"][fill:] = kept["size"]
    data["tags_code"][fill:] = kept["tags_code"]
    payload = data.tobytes()
    directory = os.path.join(task.directory, queue.topic, str(queue.queue_id))
    os.makedirs(directory, exist_ok=True)
    created = 0
    for at in range(0, len(payload), task.file_size):
        name = offset_to_file_name(file_start + at)
        with open(os.path.join(directory, name), "wb") as f:
            f.write(payload[at : at + task.file_size])
            f.truncate(task.file_size)  # full size, sparse beyond the data, as the engine
            f.flush()
            # Durable before the swap, as the index files are (and as the store's own
            # dispatcher leaves its queues when it closes): the checkpoint written after
            # the swap says the queues cover every record.
            os.fsync(f.fileno())
        created += 1
    return len(kept), created


# --- pass 2: index files ------------------------------------------------------------------


@dataclass(frozen=True)
class KeyPiece:
    keys_path: str
    start: int
    count: int


@dataclass(frozen=True)
class IndexPartTask:
    """Entries ``first_number`` onwards of one index file, written as one block chained
    within itself; several parts of a file are written in parallel."""

    file_number: int
    part: int  # the part's place in its file
    path: str
    hash_slot_num: int
    first_number: int  # entry number of the part's first entry (1 for a file's first)
    # Header begin time the part's time differences count from: the inherited time for a
    # file's first part (whose first entry then becomes the begin), else the file's first
    # entry's store time.
    begin_timestamp: int
    pieces: tuple[KeyPiece, ...]
    spill_dir: str

    @property
    def opens_file(self) -> bool:
        return self.first_number == 1

    def describe(self) -> str:
        return f"index file {self.file_number} part {self.part}"


@dataclass(frozen=True)
class IndexPartResult:
    file_number: int
    part: int
    entries: int
    runs_path: str  # the part's SlotRuns, for the file's link step
    first: EntryPoint
    last: EntryPoint


@dataclass(frozen=True)
class IndexTask:
    """One index file: created with the previous file's end values, then its parts linked
    into one set of chains, its slot table and header filled."""

    number: int
    path: str
    hash_slot_num: int
    index_num: int
    inherit_offset: int  # the previous file's end values (0 for the first file)
    inherit_timestamp: int
    parts: tuple[IndexPartResult, ...] = ()  # in entry order


@dataclass(frozen=True)
class IndexResult:
    number: int
    entries: int
    end_timestamp: int


def index_part_pass(task: IndexPartTask) -> IndexPartResult | TaskFailure:
    """Write one part's entries into its index file and spill its slot runs."""
    chainer = RunChainer(
        hash_slot_num=task.hash_slot_num,
        first_number=task.first_number,
        begin_timestamp=task.begin_timestamp,
        opens_file=task.opens_file,
    )

    def blocks() -> Iterator[tuple[int, ChainedBlock]]:
        for piece in task.pieces:
            rows = np.load(piece.keys_path, mmap_mode="r")[piece.start : piece.start + piece.count]
            yield from chainer.chunks(rows["key_hash"], rows["offset"], rows["store_timestamp"])

    try:
        os.makedirs(os.path.dirname(task.path), exist_ok=True)
        entries = write_blocks(task.path, task.hash_slot_num, blocks())
        if chainer.first is None or chainer.last is None:
            raise StoreError("an index part with no entries")
        runs = chainer.runs
        os.makedirs(task.spill_dir, exist_ok=True)
        runs_path = os.path.join(task.spill_dir, f"{task.file_number:06d}-{task.part:04d}-runs.npy")
        # Slots and entry numbers are below 2**31: int32 halves what the link step reads.
        # One plain .npy (an .npz is a zip the reader checks the CRC of: 18 ms a part).
        np.save(
            runs_path,
            np.stack([runs.slots, runs.firsts, runs.lasts]).astype(np.int32),
            allow_pickle=False,
        )
    except (StoreError, OSError, ValueError) as e:
        return TaskFailure(task.describe(), str(e))
    return IndexPartResult(
        task.file_number, task.part, entries, runs_path, chainer.first, chainer.last
    )


def _load_runs(path: str) -> SlotRuns:
    slots, firsts, lasts = np.load(path, allow_pickle=False)
    return SlotRuns(slots, firsts, lasts)


def index_pass(task: IndexTask) -> IndexResult | TaskFailure:
    """Create one index file (or finish the one its parts wrote): link the parts' chains,
    fill the slot table and the header."""
    try:
        os.makedirs(os.path.dirname(task.path), exist_ok=True)
        size = index_layout.file_size(task.hash_slot_num, task.index_num)
        if os.path.exists(task.path) and os.path.getsize(task.path) < size:
            os.truncate(task.path, size)  # the parts wrote entries only: now full size
        # create=True keeps the parts' entries (an existing file is not re-created) and
        # writes the header a new file starts with, as the live index service does.
        index_file = IndexFile(
            task.path,
            task.hash_slot_num,
            task.index_num,
            writable=True,
            create=True,
            end_phy_offset=task.inherit_offset,
            end_timestamp=task.inherit_timestamp,
        )
        try:
            entries = sum(p.entries for p in task.parts)
            if task.parts:
                index_file.link_blocks(
                    (_load_runs(p.runs_path) for p in task.parts),
                    first=task.parts[0].first,
                    last=task.parts[-1].last,
                    entries=entries,
                )
            index_file.flush()
            end = index_file.end_timestamp
        finally:
            index_file.close()
    except (StoreError, OSError, ValueError) as e:
        return TaskFailure(f"index file {task.number}", str(e))
    return IndexResult(task.number, entries, end)


BuildTask = QueueTask | IndexPartTask
BuildResult = QueueResult | IndexPartResult | TaskFailure


@dataclass(frozen=True)
class BuildBundle:
    """Second-job tasks run one after another as one runner task: consume queues and index
    parts side by side, one bundle a worker (a Spark task costs a slot tens of ms)."""

    tasks: tuple[BuildTask, ...]


def build_pass(bundle: BuildBundle) -> list[BuildResult]:
    return [
        queue_pass(task) if isinstance(task, QueueTask) else index_part_pass(task)
        for task in bundle.tasks
    ]


def build_cost(task: BuildTask) -> int:
    """A task's work, in about the same unit for both kinds (an index entry costs about
    two and a half queue units)."""
    if isinstance(task, QueueTask):
        return 2 * sum(piece.count for queue in task.queues for piece in queue.pieces)
    return 5 * sum(piece.count for piece in task.pieces)


def bundle_tasks(tasks: list[BuildTask], bundles: int) -> list[BuildBundle]:
    """``tasks`` dealt into at most ``bundles`` bundles of about equal cost (largest first)."""
    return [BuildBundle(tuple(b)) for b in deal(tasks, bundles, build_cost)]


T = TypeVar("T")


def deal(items: list[T], groups: int, cost: Callable[[T], int]) -> list[list[T]]:
    """``items`` dealt into at most ``groups`` non-empty groups of about equal cost: the
    costliest first, each to the group with the least so far (ties keep their order)."""
    loads = [0] * max(1, min(groups, len(items)))
    dealt: list[list[T]] = [[] for _ in loads]
    for item in sorted(items, key=cost, reverse=True):
        target = loads.index(min(loads))
        dealt[target].append(item)
        loads[target] += cost(item)
    return [group for group in dealt if group]
