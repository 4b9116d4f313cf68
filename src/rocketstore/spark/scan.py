"""Reading one input partition into Arrow record batches (runs on the executors).

Layer: spark (top). Goes through the read-only store for queue and key partitions (consume
queue units, then CommitLog records; the index for keys), and straight over the CommitLog
file for a ``mode=commitlog`` partition, so that mode needs no consumequeue/ or index/.

Each Python worker keeps the stores it opened (read-only opens are cheap to refresh and
costly to repeat: they validate the CommitLog's tail).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
import mmap
import os
import threading
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np

from rocketstore.config import StoreConfig
from rocketstore.errors import (
    CorruptDataError,
    DataLossError,
    IncompleteDataError,
    NotAStoreError,
)
from rocketstore.files.holes import next_data_finder
from rocketstore.files.mapped_file_queue import offset_file_path
from rocketstore.files.store_dir import missing_commitlog, with_dledger
from rocketstore.format import record as rec
from rocketstore.format import sysflag
from rocketstore.format.message import MessageExt
from rocketstore.format.queue_unit import decode_units
from rocketstore.format.record_scan import NextData, Records
from rocketstore.format.subscription import Subscription, parse_subscription
from rocketstore.java_ints import JAVA_INT_MAX
from rocketstore.paths import CommitLogDirs
from rocketstore.spark import light_rows
from rocketstore.spark.arrow_records import decode_records
from rocketstore.spark.columns import ALWAYS_DECODED, RowBuffer, project
from rocketstore.spark.commitlog_runs import partition_runs
from rocketstore.spark.options import EARLIEST, LATEST, MODE_COMMITLOG, ReadOptions
from rocketstore.spark.plan import (
    CommitLogPartition,
    DispatchedLookup,
    KeyPartition,
    QueueGroupPartition,
    QueuePartition,
)
from rocketstore.spark.pushdown import Pushed
from rocketstore.store import MessageStore

log = logging.getLogger(__name__)

FAST_CHUNK_UNITS = 8192  # consume-queue units decoded column-wise at a time
MAX_REGION_BYTES = 16 * 1024 * 1024  # CommitLog bytes copied out per record batch
MATCH_ALL = parse_subscription(None)
NOTHING_PUSHED = Pushed()

_STORES: dict[tuple[str, CommitLogDirs], MessageStore] = {}
_STORES_LOCK = threading.Lock()
_KEY_QUERY_MAX = JAVA_INT_MAX  # every match: the query takes a Java int count


def open_store(options: ReadOptions) -> MessageStore:
    """The read-only store of ``options`` (its path and CommitLog directories), opened
    once per process."""
    path = options.path
    root = os.path.abspath(path)
    config = store_config(options)
    dirs = config.commit_log_dirs(root)
    key = (root, dirs)
    with _STORES_LOCK:
        store = _STORES.get(key)
        if store is None:
            if not os.path.isdir(root):
                raise NotAStoreError(f"path {path!r} is not a store directory (no such directory)")
            lacks = missing_commitlog(root, dirs)
            if lacks is not None:
                raise NotAStoreError(f"path {path!r} is not a rocketstore/RocketMQ store ({lacks})")
            store = MessageStore.open(root, config, read_only=True)
            _STORES[key] = store
        return store


def store_config(options: ReadOptions) -> StoreConfig:
    """The settings the store of ``options`` is read with: its CommitLog directories, and
    the DLedger log its directory holds, if any (files.store_dir.with_dledger)."""
    config = StoreConfig(
        store_path_commit_log=options.store_path_commit_log,
        read_only_commit_log_store_paths=options.read_only_commit_log_store_paths,
        enable_dledger_commit_log=bool(options.store_path_dledger_commit_log.strip()),
        store_path_dledger_commit_log=options.store_path_dledger_commit_log,
    )
    return with_dledger(os.path.abspath(options.path), config)


def close_stores() -> None:
    """Close every store this process opened (tests; workers simply exit)."""
    with _STORES_LOCK:
        for store in _STORES.values():
            store.close()
        _STORES.clear()


def _batches(
    rows: Iterator[tuple[MessageExt, int]],
    include_body: bool,
    queue: tuple[str, int] | None = None,
) -> Iterator[Any]:
    """Rows in Arrow batches; ``queue``: the (topic, queue id) they were read through."""
    buffer = RowBuffer(include_body)
    for message, queue_offset in rows:
        buffer.append(message, queue_offset, queue)
        if buffer.full:
            yield buffer.take()
    if len(buffer):
        yield buffer.take()


def read_partition(
    partition: object, options: ReadOptions, pushed: Pushed
) -> Iterator[Any]:  # pyarrow.RecordBatch
    """The partition's rows as Arrow batches of the read's columns (``options.columns``)."""
    subscription = options.subscription()
    needed = decoded_columns(options, pushed, subscription)
    return project(_read(partition, options, pushed, subscription, needed), options.columns)


def decoded_columns(
    options: ReadOptions, pushed: Pushed, subscription: Subscription
) -> frozenset[str] | None:
    """What the column-wise decoders must fill for a read of ``options.columns`` (None:
    every column): those, and what the scans filter on."""
    if options.columns is None:
        return None
    needed = set(options.columns)
    if options.mode == MODE_COMMITLOG or pushed != NOTHING_PUSHED:
        # (A queue read's topic and partition are its queue's, filled without decoding;
        # the pushed filters' checks read the others.)
        needed |= ALWAYS_DECODED
    if pushed.keys is not None:
        needed.add("key")
    if pushed.uniq_keys is not None:
        needed.add("uniqKey")
    if not subscription.matches_all:
        needed.add("tags")
    if options.mode == MODE_COMMITLOG:
        needed.add("properties")  # a multi-dispatch record's rows in other queues
    return frozenset(needed)


def _read(
    partition: object,
    options: ReadOptions,
    pushed: Pushed,
    subscription: Subscription,
    needed: frozenset[str] | None,
) -> Iterator[Any]:
    if isinstance(partition, QueueGroupPartition):
        # One member after another: each queue's rows in its order, as its own task would.
        return itertools.chain.from_iterable(
            _read(member, options, pushed, subscription, needed) for member in partition.members
        )
    if isinstance(partition, QueuePartition) and subscription.matches_all:
        store = open_store(options)
        return _queue_batches(store, partition, pushed, options.include_body, needed)
    if isinstance(partition, QueuePartition):
        store = open_store(options)
        rows = _queue_rows(store, partition, subscription, pushed, options.include_body)
        return _batches(rows, options.include_body, (partition.topic, partition.queue_id))
    if isinstance(partition, KeyPartition):
        store = open_store(options)
        rows = _key_rows(store, partition, subscription, pushed)
    elif isinstance(partition, CommitLogPartition):
        # Key filters and SQL92 selectors are checked per record.
        if not pushed.by_index and subscription.selector is None:
            return _commitlog_batches(partition, options, subscription, pushed, needed)
        rows = _commitlog_rows(partition, options, subscription, pushed)
    else:  # Spark's placeholder when a plan has no partitions
        return iter(())
    return _batches(rows, options.include_body)


def _accepts(
    pushed: Pushed, message: MessageExt, queue_offset: int, queue: tuple[str, int] | None = None
) -> bool:
    topic, queue_id = queue if queue is not None else (message.topic, message.queue_id)
    return pushed.accepts_row(
        topic,
        queue_id,
        queue_offset,
        message.store_timestamp,
        message.keys,
        message.uniq_key,
    )


def _queue_rows(
    store: MessageStore,
    part: QueuePartition,
    subscription: Subscription,
    pushed: Pushed,
    include_body: bool,
) -> Iterator[tuple[MessageExt, int]]:
    """Units [start, end) of one queue; tagsCode first, then the record's real tag (or
    the SQL92 selector, on its properties)."""
    for offset, units in _unit_chunks(store, part, None):
        for i in range(len(units)):
            physical = int(units[i]["offset"])
            size = int(units[i]["size"])
            if physical < 0 or size <= 0 or size == 0x7FFFFFFF:
                continue  # blank fill
            if not subscription.match_code(int(units[i]["tags_code"])):
                continue
            found = store.commitlog_record(physical)
            if found is None or found[1].size != size:
                if part.fail_on_data_loss:
                    _lost(part, offset + i, offset + i + 1, "its CommitLog record is gone")
                continue  # the record went with retention
            data, view = found
            message = rec.to_message_ext(data, view, read_body=include_body)
            if subscription.match_properties(message.properties) and _accepts(
                pushed, message, offset + i, (part.topic, part.queue_id)
            ):
                yield message, offset + i


def _unit_chunks(
    store: MessageStore, part: QueuePartition, max_units: int | None
) -> Iterator[tuple[int, Any]]:
    """(first queue offset, decoded units) for the units [start, end) of one queue, at most
    ``max_units`` at a time; a file retention removed is stepped over (or, with
    failOnDataLoss, reported). A chunk with no whole unit (a unit cut at a file's end)
    comes out empty, and the next one starts one offset further."""
    store.max_offset(part.topic, part.queue_id)  # refresh what a live writer appended
    queue = store.queue_view(part.topic, part.queue_id)
    if queue is None:
        return
    offset = part.start
    while offset < part.end:
        wanted = part.end - offset if max_units is None else min(part.end - offset, max_units)
        raw = queue.units_from(offset, wanted * 20)
        if raw is None:  # removed by retention (or a hole): go on with the next file
            skip_to = max(queue.next_file_offset(offset), queue.min_offset())
            if part.fail_on_data_loss:
                _lost(part, offset, min(skip_to, part.end), "its consume queue file is gone")
            offset = skip_to
            continue
        units = decode_units(raw)
        yield offset, units
        offset += max(len(units), 1)


def _queue_batches(
    store: MessageStore,
    part: QueuePartition,
    pushed: Pushed,
    include_body: bool,
    needed: frozenset[str] | None,
) -> Iterator[Any]:
    """Units [start, end) of one queue decoded column-wise (:mod:`.arrow_records`); a
    stretch that decoder declines goes through :func:`_queue_rows` instead."""
    for offset, units in _unit_chunks(store, part, FAST_CHUNK_UNITS):
        count = len(units)
        batches = _decode_units(store, part, units, offset, include_body, needed) if count else None
        count = max(count, 1)  # a cut unit at a file's end: the reference path steps over it
        if batches is None:
            stretch = dataclasses.replace(part, start=offset, end=offset + count)
            rows = _queue_rows(store, stretch, MATCH_ALL, pushed, include_body)
            yield from _batches(rows, include_body, (part.topic, part.queue_id))
        else:
            for batch in batches:
                kept = _apply_pushed(batch, pushed)
                if kept.num_rows:
                    yield kept


def _decode_units(
    store: MessageStore,
    part: QueuePartition,
    units: Any,
    first_offset: int,
    include_body: bool,
    needed: frozenset[str] | None,
) -> list[Any] | None:
    """Record batches for decoded consume-queue units of ``part``'s queue, or None to
    decode them one by one. Their topic and partition are the queue's: a light queue's
    (LMQ) units point at records of other topics and queues, and its rows are its own.
    Units are cut into runs that lie in one CommitLog file and hold at most
    MAX_REGION_BYTES of records; each run is copied out of the file once."""
    physical = units["offset"].astype(np.int64)
    sizes = units["size"].astype(np.int64)
    queue_offsets = first_offset + np.arange(len(units), dtype=np.int64)
    real = (physical >= 0) & (sizes > 0) & (sizes != 0x7FFFFFFF)  # not blank fill
    physical, sizes, queue_offsets = physical[real], sizes[real], queue_offsets[real]
    file_size = store.config.mapped_file_size_commit_log
    batches = []
    begin = 0
    while begin < len(physical):
        file_start = int(physical[begin]) - int(physical[begin]) % file_size
        in_file = begin + int(np.searchsorted(physical[begin:], file_start + file_size))
        # At most MAX_REGION_BYTES of records a run (copied alone when sparse).
        copied_bytes = np.cumsum(sizes[begin:in_file])
        end = begin + max(int(np.searchsorted(copied_bytes, MAX_REGION_BYTES, "right")), 1)
        if np.any(np.diff(physical[begin:end]) <= 0):
            return None  # not in CommitLog order: leave it to the reference path
        batch = _decode_in_place(
            store,
            physical[begin:end],
            sizes[begin:end],
            queue_offsets[begin:end],
            include_body,
            needed,
            (part.topic, part.queue_id),
        )
        if batch is None:
            return None
        batches.append(batch)
        begin = end
    return batches


def _decode_in_place(
    store: MessageStore,
    physical: Any,
    sizes: Any,
    queue_offsets: Any,
    include_body: bool,
    needed: frozenset[str] | None,
    queue: tuple[str, int],
) -> Any | None:
    """The records at CommitLog offsets ``physical`` (ascending, in one file) decoded
    where they lie in the mapping, the file held meanwhile; None when they are not all
    written there, the file is being deleted or the decoder declines them. Nothing is
    copied first: a queue among 63 others would copy 64 times its bytes. Every column the
    decoder returns is its own copy, so nothing of the mapping outlives the call
    (releasing the view would fail if something did)."""
    low = int(physical[0])
    high = int(physical[-1] + sizes[-1])
    with store.commitlog_view(low, high - low) as view:
        if view is None:
            return None
        return decode_records(
            view, physical - low, physical, sizes, queue_offsets, include_body, needed, queue
        )


def _apply_pushed(batch: Any, pushed: Pushed) -> Any:
    """The rows of ``batch`` that every pushed filter accepts (as ``Pushed.accepts_row``):
    offset and time bounds, topics and queues, and the ``key`` / ``uniqKey`` values (a
    light queue read with pushed key filters is scanned, not looked up in the index)."""
    if pushed == NOTHING_PUSHED:
        return batch
    import pyarrow as pa  # noqa: PLC0415

    offsets = batch.column("offset").to_numpy()
    times_ms = batch.column("timestamp").cast(pa.int64()).to_numpy() // 1000
    keep = np.ones(batch.num_rows, dtype=bool)
    if pushed.offset_min is not None:
        keep &= offsets >= pushed.offset_min
    if pushed.offset_max is not None:
        keep &= offsets < pushed.offset_max
    if pushed.time_min_ms is not None:
        keep &= times_ms >= pushed.time_min_ms
    if pushed.time_max_ms is not None:
        keep &= times_ms < pushed.time_max_ms
    if pushed.topics is not None or pushed.queue_ids is not None:
        topics = batch.column("topic").to_pylist()
        queue_ids = batch.column("partition").to_numpy()
        keep &= np.array(
            [
                (pushed.topics is None or t in pushed.topics)
                and (pushed.queue_ids is None or int(q) in pushed.queue_ids)
                for t, q in zip(topics, queue_ids, strict=True)
            ],
            dtype=bool,
        )
    for values, column in ((pushed.keys, "key"), (pushed.uniq_keys, "uniqKey")):
        if values is not None:
            keep &= np.asarray(_is_in(batch.column(column), sorted(values)), dtype=bool)
    return batch if keep.all() else batch.filter(pa.array(keep))


def _lost(part: QueuePartition, first: int, end: int, why: str) -> None:
    raise DataLossError(
        f"the streaming query lost messages: topic {part.topic!r} queue {part.queue_id}: "
        f"offsets [{first}, {end}) were removed while the batch was read ({why}). "
        "Restart with failOnDataLoss=false to skip them"
    )


def _key_rows(
    store: MessageStore, part: KeyPartition, subscription: Subscription, pushed: Pushed
) -> Iterator[tuple[MessageExt, int]]:
    """Messages found through the index, kept if they lie in a planned queue range."""
    wanted = {qid: (start, end) for qid, start, end in part.ranges}
    seen: set[int] = set()
    found = _indexed(store, part, part.topic)
    for message in sorted(found, key=lambda m: m.commit_log_offset):
        if message.commit_log_offset in seen or not sysflag.gets_queue_entry(message.sys_flag):
            continue
        seen.add(message.commit_log_offset)
        span = wanted.get(message.queue_id)
        if span is None or not span[0] <= message.queue_offset < span[1]:
            continue
        if subscription.match_properties(message.properties) and _accepts(
            pushed, message, message.queue_offset
        ):
            yield message, message.queue_offset
    if part.dispatched is not None:
        yield from _dispatched_key_rows(store, part, part.dispatched, subscription, pushed)


def _indexed(store: MessageStore, part: KeyPartition, topic: str) -> list[MessageExt]:
    """The messages of ``topic`` the index finds for the partition's keys: every match
    (a claimed filter is applied exactly)."""
    found: list[MessageExt] = []
    if part.uniq_keys:
        for uniq in part.uniq_keys:
            found.extend(store.query_by_unique_key(topic, uniq, _KEY_QUERY_MAX))
    else:
        for key in part.keys:
            token = key.split()[0]  # any token of KEYS finds it; the row check is exact
            found.extend(store.query_messages(topic, token, _KEY_QUERY_MAX))
    return found


def _dispatched_key_rows(
    store: MessageStore,
    part: KeyPartition,
    lookup: DispatchedLookup,
    subscription: Subscription,
    pushed: Pushed,
) -> Iterator[tuple[MessageExt, int]]:
    """Rows of the read's planned queues that are records of other topics, dispatched
    there (INNER_MULTI_DISPATCH naming them): the index files them under their own
    topic, where the partition's keys are looked up."""
    wanted = {(topic, qid): (start, end) for topic, qid, start, end in lookup.ranges}
    seen: set[tuple[str, int, int]] = set()
    for source in lookup.sources:
        for message in _indexed(store, part, source):
            if not sysflag.gets_queue_entry(message.sys_flag):
                continue
            for copy, offset in light_rows.message_copies(message):
                where = (copy.topic, copy.queue_id)
                span = wanted.get(where)
                if span is None or not span[0] <= offset < span[1] or (*where, offset) in seen:
                    continue
                seen.add((*where, offset))
                if subscription.match_properties(copy.properties) and _accepts(
                    pushed, copy, offset
                ):
                    yield copy, offset


class _Bounds(NamedTuple):
    """A queue's read bounds from the options: queue offsets and store times (ms), each
    inclusive at the start and exclusive at the end, None where unbounded."""

    offset_min: int | None
    offset_max: int | None
    time_min: int | None
    time_max: int | None

    def accepts(self, queue_offset: int, store_ms: int) -> bool:
        return (
            (self.offset_min is None or queue_offset >= self.offset_min)
            and (self.offset_max is None or queue_offset < self.offset_max)
            and (self.time_min is None or store_ms >= self.time_min)
            and (self.time_max is None or store_ms < self.time_max)
        )


def _bounds(options: ReadOptions, topic: str, qid: int) -> _Bounds:
    """The options' numeric offsets and timestamps for one queue (there is no queue to
    resolve -2/-1 against in ``mode=commitlog``: those bound nothing here)."""
    found: list[int | None] = []
    for bound in (options.start, options.end):
        offset = bound.offsets.get((topic, qid))
        found.append(None if offset in (None, EARLIEST, LATEST) else offset)
    stamps = [b.timestamp_ms if b.timestamp_ms is not None else b.timestamps.get((topic, qid))
              for b in (options.start, options.end)]  # fmt: skip
    return _Bounds(found[0], found[1], stamps[0], stamps[1])


def _within_options(
    options: ReadOptions, topic: str, qid: int, queue_offset: int, store_ms: int
) -> bool:
    """The options' selection and bounds, checked per row (no queue to resolve them)."""
    if not options.selection.accepts(topic, qid):
        return False
    return _bounds(options, topic, qid).accepts(queue_offset, store_ms)


def _commitlog_rows(
    part: CommitLogPartition, options: ReadOptions, subscription: Subscription, pushed: Pushed
) -> Iterator[tuple[MessageExt, int]]:
    """A CommitLog partition record by record (the reference path; reads with pushed key
    filters take it): the walker's records (:func:`.commitlog_runs.partition_runs`)."""
    with _mapped_commitlog_file(options, part) as mapped:
        if mapped is None:
            return
        view, path, next_data = mapped
        for records in _partition_runs(view, path, part, next_data):
            for position in records.position.tolist():
                yield from _record_row(view, path, position, options, subscription, pushed)


def _partition_runs(
    buf: memoryview, path: str, part: CommitLogPartition, next_data: NextData
) -> Iterator[Records]:
    return partition_runs(buf, path, part.file_offset, part.start, part.end,
                          framed=part.framed, next_data=next_data)  # fmt: skip


@contextlib.contextmanager
def _mapped_commitlog_file(
    options: ReadOptions, part: CommitLogPartition
) -> Iterator[tuple[memoryview, str, NextData] | None]:
    """The partition's CommitLog file mapped read-only (view, path, and where data may
    start from a position on: holes are skipped unread); None when it is empty or went
    with retention before it was read."""
    path = offset_file_path(
        store_config(options).commit_log_dirs(os.path.abspath(options.path)).all,
        part.file_offset,
    )
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed in the finally below
    except FileNotFoundError:
        log.warning("%s went with retention before it was read", path)
        yield None
        return
    try:
        length = os.fstat(handle.fileno()).st_size
        if length == 0:
            yield None
            return
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        view = memoryview(mapped)
        try:
            yield view, path, next_data_finder(handle.fileno(), length)
        finally:
            view.release()
            mapped.close()
    finally:
        handle.close()


def _record_row(
    buf: memoryview,
    path: str,
    position: int,
    options: ReadOptions,
    subscription: Subscription,
    pushed: Pushed,
) -> Iterator[tuple[MessageExt, int]]:
    """The record at ``position`` as a row, when the options, tags and pushed filters take
    it (nothing otherwise)."""
    try:
        view = rec.read_record(buf, position)
    except (CorruptDataError, IncompleteDataError) as e:
        raise CorruptDataError(str(e), path=path, position=position) from e
    assert not isinstance(view, rec.Blank)
    if not sysflag.gets_queue_entry(view.sys_flag):
        return
    message: MessageExt | None = None
    if _within_options(options, view.topic, view.queue_id, view.queue_offset, view.store_timestamp):
        message = rec.to_message_ext(buf, view, read_body=options.include_body)
        if subscription.match_properties(message.properties) and _accepts(
            pushed, message, view.queue_offset
        ):
            yield message, view.queue_offset
    if not light_rows.may_have_copies(buf, view):
        return
    if message is None:
        message = rec.to_message_ext(buf, view, read_body=options.include_body)
    for copy, queue_offset in light_rows.message_copies(message):
        if (
            _within_options(options, copy.topic, copy.queue_id, queue_offset, view.store_timestamp)
            and subscription.match_properties(copy.properties)
            and _accepts(pushed, copy, queue_offset)
        ):
            yield copy, queue_offset


def _commitlog_batches(
    part: CommitLogPartition,
    options: ReadOptions,
    subscription: Subscription,
    pushed: Pushed,
    needed: frozenset[str] | None,
) -> Iterator[Any]:
    """A CommitLog partition decoded column-wise (:mod:`.arrow_records`), one walker run
    (at most 4 MiB of records) at a time, the options applied to each batch. A run that
    decoder declines goes through the per-record path; damage fails the read, naming the
    file, the position and the walker's reason."""
    with _mapped_commitlog_file(options, part) as mapped:
        if mapped is None:
            return
        view, path, next_data = mapped
        for records in _partition_runs(view, path, part, next_data):
            yield from _run_batches(view, path, part.file_offset, records, options,
                                    subscription, pushed, needed)  # fmt: skip


def _run_batches(
    buf: memoryview,
    path: str,
    file_offset: int,
    records: Records,
    options: ReadOptions,
    subscription: Subscription,
    pushed: Pushed,
    needed: frozenset[str] | None,
) -> Iterator[Any]:
    """The walker's ``records`` column-wise with the options applied, or record by record
    when the decoder declines them."""
    batch = _decode_run(buf, file_offset, records, options, needed)
    if batch is None:
        rows = (
            row
            for position in records.position.tolist()
            for row in _record_row(buf, path, position, options, subscription, pushed)
        )
        yield from _batches(rows, options.include_body)
        return
    for decoded in (batch, light_rows.batch_copies(batch)):
        if decoded is not None:
            kept = _filter_chunk(decoded, options, subscription, pushed)
            if kept.num_rows:
                yield kept


def _decode_run(
    buf: memoryview,
    file_offset: int,
    records: Records,
    options: ReadOptions,
    needed: frozenset[str] | None,
) -> Any | None:
    """The walker's ``records`` (one run: ascending positions in one file) as a
    column-wise batch, decoded where they lie in the mapping (every column the decoder
    returns is a copy of its own, so the view can be released afterwards)."""
    positions = records.position
    low = int(positions[0])
    high = int(positions[-1] + records.size[-1])
    with buf[low:high] as region:
        return decode_records(
            region,
            positions - low,
            file_offset + positions,
            records.size,
            records.queue_offset,
            options.include_body,
            needed,
        )


def _filter_chunk(
    batch: Any, options: ReadOptions, subscription: Subscription, pushed: Pushed
) -> Any:
    """The rows the per-record path keeps: records with a queue entry, in the selected
    queues, within the options' offset and time bounds, with a matching tag, accepted by
    the pushed filters."""
    import pyarrow as pa  # noqa: PLC0415

    flags = batch.column("sysFlag").to_numpy().astype(np.int64)
    transaction = flags & sysflag.TRANSACTION_MASK
    keep = (transaction == sysflag.TRANSACTION_NOT_TYPE) | (
        transaction == sysflag.TRANSACTION_COMMIT_TYPE
    )
    offsets = batch.column("offset").to_numpy()
    store_ms = batch.column("timestamp").cast(pa.int64()).to_numpy() // 1000
    encoded = batch.column("topic").dictionary_encode()
    topic_codes = np.asarray(encoded.indices).astype(np.int64)
    topics = encoded.dictionary.to_pylist()
    queue_ids = batch.column("partition").to_numpy().astype(np.int64)
    pairs = topic_codes * (1 << 32) + queue_ids
    distinct, inverse = np.unique(pairs, return_inverse=True)
    for k, pair in enumerate(distinct.tolist()):
        topic, qid = topics[pair >> 32], pair & 0xFFFFFFFF
        mine = inverse == k
        if not options.selection.accepts(topic, qid):
            keep &= ~mine
            continue
        low, high, early, late = _bounds(options, topic, qid)
        outside = np.zeros(len(offsets), dtype=bool)
        if low is not None:
            outside |= offsets < low
        if high is not None:
            outside |= offsets >= high
        if early is not None:
            outside |= store_ms < early
        if late is not None:
            outside |= store_ms >= late
        keep &= ~(mine & outside)
    if not subscription.matches_all:
        tags = batch.column("tags")
        wanted = [t for t in tags.unique().to_pylist() if subscription.match_tags(t)]
        keep &= np.asarray(_is_in(tags, wanted), dtype=bool)
    kept = batch if keep.all() else batch.filter(pa.array(keep))
    return _apply_pushed(kept, pushed)


def _is_in(values: Any, wanted: list[Any]) -> Any:
    """Whether each value is one of ``wanted`` (a null is never)."""
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.compute as pc  # noqa: PLC0415

    found = pc.is_in(values, value_set=pa.array(wanted, values.type))
    return pc.fill_null(found, False).to_numpy(zero_copy_only=False)
