"""Planning a batch read: options and pushed filters -> small, picklable input partitions.

Layer: spark (top). Reads only offsets from the store (queue min/max, ``offset_by_time``,
CommitLog file list); the rows are read by :mod:`rocketstore.spark.scan` on the executors.

Three kinds of partition:

- :class:`QueuePartition` ``(topic, queue_id, start, end)``: queue offsets [start, end) of
  one consume queue (``mode=queue``); big queues are split by ``maxRecordsPerPartition`` and
  ``minPartitions``. Small ones are packed, several to a task, into a
  :class:`QueueGroupPartition` (``maxPartitionBytes``, ``openCostInBytes``), as Spark's
  file sources pack small files.
- :class:`KeyPartition`: one topic's messages found through the index by ``key`` or
  ``uniqKey`` (pushed filters), kept only inside the planned queue ranges. A light
  queue (``%LMQ%...``) is read as queue partitions instead: its units point at records
  of other topics, which the index files under those topics. The first also finds
  (:class:`DispatchedLookup`), for the same keys under each of the store's ordinary
  topics, the records multi-dispatched into a planned queue with a plain name.
- :class:`CommitLogPartition` ``(file_offset, start, end)``: records starting at positions
  [start, end) of one CommitLog file (``mode=commitlog``); the reader finds the first
  record boundary by walking the file's records from position 0.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from pyspark.sql.datasource import InputPartition

from rocketstore.errors import ConfigError
from rocketstore.format.queue_unit import decode_units
from rocketstore.format.record_scan import walk_start_array
from rocketstore.paths import LMQ_PREFIX
from rocketstore.rebuild.plan import split_spans
from rocketstore.spark.options import (
    EARLIEST,
    LATEST,
    MAX_PARTITION_BYTES,
    OPEN_COST_BYTES,
    Bound,
    ReadOptions,
)
from rocketstore.spark.pushdown import Pushed
from rocketstore.store import MessageStore


@dataclass(frozen=True)
class QueuePartition(InputPartition):
    topic: str
    queue_id: int
    start: int  # first queue offset
    end: int  # exclusive
    # Streaming reads with failOnDataLoss: a unit or record removed by retention between
    # planning and reading fails the task instead of being skipped.
    fail_on_data_loss: bool = False

    @property
    def count(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class QueueGroupPartition(InputPartition):
    """Queue ranges read by one task, one after another, each in its queue's order: what
    :func:`group_partitions` packed together. Its rows are exactly its members' rows."""

    members: tuple[QueuePartition, ...]

    @property
    def count(self) -> int:
        return sum(member.count for member in self.members)


@dataclass(frozen=True)
class KeyPartition(InputPartition):
    topic: str
    ranges: tuple[tuple[int, int, int], ...]  # (queue_id, start, end) to keep
    keys: tuple[str, ...]  # look up these KEYS tokens ... (empty: use uniq_keys)
    uniq_keys: tuple[str, ...]  # ... or these UNIQ_KEYs
    # One partition of a read also finds the records dispatched into its queues.
    dispatched: DispatchedLookup | None = None


@dataclass(frozen=True)
class DispatchedLookup:
    """The rows of a read's indexed queues that are records of other topics: a record
    whose INNER_MULTI_DISPATCH names a queue has a unit there while the index files it
    under its own topic. The keys are looked up once under each of the store's ordinary
    topics (``sources``); the records that name a planned queue are kept at the offsets
    they name."""

    ranges: tuple[tuple[str, int, int, int], ...]  # (topic, queue id, start, end) to keep
    sources: tuple[str, ...]


@dataclass(frozen=True)
class CommitLogPartition(InputPartition):
    file_offset: int  # the file's first CommitLog offset (its name)
    start: int  # position in the file: records starting in [start, end) are ours
    end: int
    # A whole file of a DLedger log: its records are the bodies of its entries, found by
    # following them from the file's start (format.entry_scan).
    framed: bool = False


QueueRange = tuple[str, int, int, int]  # topic, queue id, start, end


def resolve_bound(
    store: MessageStore, bound: Bound, topic: str, qid: int, low: int, high: int
) -> int:
    """A bound's queue offset for one queue, clamped into [low, high]."""
    if bound.timestamp_ms is not None:
        return store.offset_by_time(topic, qid, bound.timestamp_ms, "lower")
    stamp = bound.timestamps.get((topic, qid))
    if stamp is not None:
        return store.offset_by_time(topic, qid, stamp, "lower")
    value = bound.offsets.get((topic, qid), bound.default)
    if value == EARLIEST:
        return low
    if value == LATEST:
        return high
    return min(max(value, low), high)


def check_assigned_queues(store: MessageStore, options: ReadOptions) -> None:
    """A batch read's ``assign`` naming queues the store does not have is a mistake in the
    option (a typo'd id or topic), named rather than read as nothing. (A stream does not
    check: its queues may appear later.)"""
    assign = options.selection.assign
    if assign is None:
        return
    have = store.topics()
    missing = [
        f"{topic} queue {qid} ({topic} has queues {have[topic]})"
        if topic in have
        else f"{topic} queue {qid} (no such topic)"
        for topic, qids in sorted(assign.items())
        for qid in sorted(qids)
        if qid not in have.get(topic, ())
    ]
    if missing:
        raise ConfigError(
            f"option assign names queues the store does not have: {'; '.join(missing)}"
        )


def queue_ranges(store: MessageStore, options: ReadOptions, pushed: Pushed) -> list[QueueRange]:
    """The non-empty [start, end) of every queue to read, options and pushed filters applied."""
    ranges: list[QueueRange] = []
    for topic, qid in options.selection.select(store.topics()):
        if pushed.topics is not None and topic not in pushed.topics:
            continue
        if pushed.queue_ids is not None and qid not in pushed.queue_ids:
            continue
        low, high = store.min_offset(topic, qid), store.max_offset(topic, qid)
        start = resolve_bound(store, options.start, topic, qid, low, high)
        end = resolve_bound(store, options.end, topic, qid, low, high)
        if pushed.offset_min is not None:
            start = max(start, pushed.offset_min)
        if pushed.offset_max is not None:
            end = min(end, pushed.offset_max)
        # Pushed time bounds narrow the range (store times rise along a queue); the scan
        # still checks every row's time, so a narrowed range never lets a wrong row in.
        if pushed.time_min_ms is not None and start < end:
            start = max(start, store.offset_by_time(topic, qid, pushed.time_min_ms, "lower"))
        if pushed.time_max_ms is not None and start < end:
            end = min(end, store.offset_by_time(topic, qid, pushed.time_max_ms, "lower"))
        if end > start:
            ranges.append((topic, qid, start, end))
    return ranges


def split_ranges(
    ranges: list[QueueRange],
    max_records: int | None,
    min_partitions: int | None,
    fail_on_data_loss: bool = False,
) -> list[QueuePartition]:
    """One partition per range, split so none exceeds ``max_records`` and, when
    ``min_partitions`` asks for more, cut into pieces of about total / min_partitions."""
    total = sum(end - start for _, _, start, end in ranges)
    piece: int | None = max_records
    if min_partitions and total and len(ranges) < min_partitions:
        even = math.ceil(total / min_partitions)
        piece = even if piece is None else min(piece, even)
    partitions: list[QueuePartition] = []
    for topic, qid, start, end in ranges:
        step = piece or (end - start)
        for first in range(start, end, step):
            last = min(first + step, end)
            partitions.append(QueuePartition(topic, qid, first, last, fail_on_data_loss))
    return partitions


# A task of a Python data source costs Spark a fixed part (scheduling, the worker's round
# trip, the reader unpickled, the Arrow stream opened; docs/spark.md "Partitions"), so
# small queue ranges are packed into one task the way Spark packs small files (the rule
# and the defaults of spark.sql.files.maxPartitionBytes and openCostInBytes).
# Units read at the start of a queue range on the driver to estimate its bytes.
SAMPLE_UNITS = 32


def group_partitions(
    parts: Sequence[QueuePartition],
    part_bytes: Sequence[int],
    max_partition_bytes: int = MAX_PARTITION_BYTES,
    open_cost_bytes: int = OPEN_COST_BYTES,
    max_records: int | None = None,
    min_partitions: int | None = None,
) -> list[QueuePartition | QueueGroupPartition]:
    """``parts`` packed in their order into tasks of at most about ``max_partition_bytes``,
    each part counted as its bytes (``part_bytes``) plus ``open_cost_bytes`` (Spark's
    FilePartition.getFilePartitions rule, without its sort). A pack never holds more than
    ``max_records`` entries; with ``min_partitions`` the packs are at most
    total / min_partitions, and the parts stay apart when packing would leave fewer
    partitions than that. A pack of one is the part itself."""
    total = sum(part_bytes) + open_cost_bytes * len(parts)
    limit = max_partition_bytes
    if min_partitions:
        limit = min(limit, max(open_cost_bytes, total // min_partitions))
    packs: list[list[QueuePartition]] = []
    size = records = 0
    for part, estimate in zip(parts, part_bytes, strict=True):
        cost = estimate + open_cost_bytes
        over_records = max_records is not None and records + part.count > max_records
        if not packs or size + cost > limit or over_records:
            packs.append([])
            size = records = 0
        packs[-1].append(part)
        size += cost
        records += part.count
    if min_partitions and len(packs) < min(min_partitions, len(parts)):
        return list(parts)
    return [pack[0] if len(pack) == 1 else QueueGroupPartition(tuple(pack)) for pack in packs]


def queue_members(partitions: Iterable[object]) -> list[QueuePartition]:
    """The queue ranges of ``partitions``, packs opened, in the order they are read."""
    found: list[QueuePartition] = []
    for partition in partitions:
        if isinstance(partition, QueueGroupPartition):
            found.extend(partition.members)
        elif isinstance(partition, QueuePartition):
            found.append(partition)
    return found


def range_bytes(store: MessageStore, parts: Sequence[QueuePartition]) -> list[int]:
    """Each part's bytes of CommitLog records, estimated on the driver: its entry count
    times the mean record size of the (at most SAMPLE_UNITS) units its queue holds at the
    part's start. Reading every unit would cost the driver 20 bytes a message."""
    means: dict[tuple[str, int], float] = {}
    estimates = []
    for part in parts:
        key = (part.topic, part.queue_id)
        if key not in means:
            means[key] = _mean_record_bytes(store, part)
        estimates.append(int(means[key] * part.count))
    return estimates


def _mean_record_bytes(store: MessageStore, part: QueuePartition) -> float:
    queue = store.queue_view(part.topic, part.queue_id)
    raw = None if queue is None else queue.units_from(part.start, SAMPLE_UNITS * 20)
    if not raw:
        return 0.0
    units = decode_units(raw)
    sizes = units["size"].astype(np.int64)
    real = sizes[(units["offset"] >= 0) & (sizes > 0) & (sizes != 0x7FFFFFFF)]
    return float(real.mean()) if len(real) else 0.0


def pack_queue_partitions(
    store: MessageStore, parts: list[QueuePartition], options: ReadOptions
) -> list[QueuePartition | QueueGroupPartition]:
    """:func:`group_partitions` with the read's options and the parts' estimated bytes."""
    if len(parts) < 2:
        return list(parts)
    return group_partitions(
        parts,
        range_bytes(store, parts),
        options.max_partition_bytes,
        options.open_cost_bytes,
        options.max_records_per_partition,
        options.min_partitions,
    )


def key_partitions(
    ranges: list[QueueRange], pushed: Pushed, store_topics: Iterable[str] = ()
) -> list[KeyPartition]:
    """One partition per topic (the index is searched per topic and key); the first
    also looks for the records the store's ordinary topics dispatched into these queues."""
    by_topic: dict[str, list[tuple[int, int, int]]] = {}
    for topic, qid, start, end in ranges:
        by_topic.setdefault(topic, []).append((qid, start, end))
    # uniqKey is the more selective lookup; `key` is then checked on each row.
    uniq = tuple(sorted(pushed.uniq_keys)) if pushed.uniq_keys is not None else ()
    keys = () if uniq else tuple(sorted(pushed.keys or ()))
    sources = tuple(sorted(t for t in set(store_topics) if not t.startswith(LMQ_PREFIX)))
    dispatched = DispatchedLookup(tuple(sorted(ranges)), sources) if sources else None
    return [
        KeyPartition(topic, tuple(queue_ranges), keys, uniq, dispatched if i == 0 else None)
        for i, (topic, queue_ranges) in enumerate(sorted(by_topic.items()))
    ]


def plan_queue_read(
    store: MessageStore, options: ReadOptions, pushed: Pushed, *, index: bool = True
) -> list[QueuePartition | QueueGroupPartition | KeyPartition]:
    """``index``: whether key constraints may be answered through the index; without it
    (keys/uniqKeys options on a store with no index) the queues are scanned and every
    row checked against them."""
    ranges = queue_ranges(store, options, pushed)
    if pushed.by_index and index:
        if (pushed.keys is not None and not pushed.keys) or (
            pushed.uniq_keys is not None and not pushed.uniq_keys
        ):
            return []  # `key IN ()` or contradicting equalities: nothing can match
        # A light queue's rows are records of other topics, filed in the index under
        # those topics: the index of the light queue's topic never finds them. Such
        # queues are read unit by unit; the scan checks the pushed keys on every row.
        light = [r for r in ranges if r[0].startswith(LMQ_PREFIX)]
        indexed = [r for r in ranges if not r[0].startswith(LMQ_PREFIX)]
        scanned = split_ranges(light, options.max_records_per_partition, options.min_partitions)
        packed = pack_queue_partitions(store, scanned, options)
        return [*key_partitions(indexed, pushed, store.topics()), *packed]
    parts = split_ranges(ranges, options.max_records_per_partition, options.min_partitions)
    return [*pack_queue_partitions(store, parts, options)]


# A partition finds its first record without reading what lies before it, so cutting a
# file costs nothing: 128 MiB, Spark's spark.sql.files.maxPartitionBytes default.
COMMITLOG_PARTITION_BYTES = 128 * 1024 * 1024


def plan_commitlog_read(store: MessageStore, options: ReadOptions) -> list[CommitLogPartition]:
    """File ranges of the CommitLog up to its validated end, at most
    COMMITLOG_PARTITION_BYTES each (as Spark's own file sources cut files); smaller pieces
    of about total / ``minPartitions`` bytes when that asks for more partitions."""
    file_size = store.config.mapped_file_size_commit_log
    low, high = store.min_commit_log_offset(), store.max_commit_log_offset()
    if low < 0 or high <= low:
        return []
    spans: list[tuple[int, int, int]] = []
    whole: list[CommitLogPartition] = []
    for first, path in store.commitlog_files():
        start, end = max(low, first) - first, min(high, first + file_size) - first
        if end <= start:
            continue
        if store.commitlog_dirs.holds_entries(path):
            # Entries are followed from the file's start; the options' bounds still apply
            # to each record.
            whole.append(CommitLogPartition(first, 0, end, framed=True))
        else:
            spans.append((first, start, end))
    if options.max_records_per_partition:
        if whole:
            raise ConfigError(
                "maxRecordsPerPartition with mode=commitlog cuts a plain CommitLog at record "
                "starts; a DLedger log is read file by file (use mode=queue, or minPartitions)"
            )
        spans = split_by_records(store, spans, options.max_records_per_partition)
    total = sum(end - start for _, start, end in spans)
    piece = min(file_size, COMMITLOG_PARTITION_BYTES)
    if options.min_partitions and len(spans) < options.min_partitions:
        piece = min(piece, max(1, math.ceil(total / options.min_partitions)))
    parts = [CommitLogPartition(*span) for span in split_spans(spans, piece)] + whole
    return sorted(parts, key=lambda p: (p.file_offset, p.start))


def split_by_records(
    store: MessageStore, spans: list[tuple[int, int, int]], max_records: int
) -> list[tuple[int, int, int]]:
    """Cut each ``(file_offset, start, end)`` span at record starts so that at most
    ``max_records`` records start in each piece. The planner walks the records' headers
    (their sizes) to find the starts: a pass over those bytes on the driver, done only
    when maxRecordsPerPartition asks for it in mode=commitlog. Records past a place the
    walk cannot follow (damage), or in a file retention took meanwhile, stay in the
    span's last piece, where the reader finds them as it always does."""
    pieces: list[tuple[int, int, int]] = []
    for first, start, end in spans:
        starts: list[int] = []
        # The whole mapped file (the open store has it mapped): the walk reads its length.
        file_size = store.config.mapped_file_size_commit_log
        with store.commitlog_view(first, file_size, written=False) as view:
            if view is not None:
                length = len(view)
                found, _stop_at, _why = walk_start_array(view, start, min(end, length), length)
                starts = [int(p) for p in found[max_records::max_records]]
        cuts = [start, *starts, end]
        pieces += [(first, low, high) for low, high in itertools.pairwise(cuts)]
    return pieces


def index_usable(store: MessageStore) -> bool:
    """Key lookups go through the index only when it exists and is enabled."""
    return bool(store.config.message_index_enable and store.index_files()) and os.path.isdir(
        os.path.join(store.root, "index")
    )
