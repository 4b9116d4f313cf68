"""Reading one input partition into Arrow record batches (runs on the executors).

Layer: spark (top). Goes through the read-only store for queue and key partitions (consume
queue units, then CommitLog records; the index for keys), and straight over the CommitLog
file for a ``mode=commitlog`` partition, so that mode needs no consumequeue/ or index/.

Each Python worker keeps the stores it opened (read-only opens are cheap to refresh and
costly to repeat: they validate the CommitLog's tail).
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import os
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

from rocketstore.errors import (
    DataLossError,
    NotAStoreError,
)
from rocketstore.files.store_dir import missing_commitlog
from rocketstore.format import record as rec
from rocketstore.format import sysflag
from rocketstore.format.message import MessageExt
from rocketstore.format.queue_unit import decode_units
from rocketstore.format.subscription import Subscription, parse_subscription
from rocketstore.java_ints import JAVA_INT_MAX
from rocketstore.paths import CommitLogDirs
from rocketstore.spark import light_rows
from rocketstore.spark.arrow_records import decode_records
from rocketstore.spark.columns import ALWAYS_DECODED, project
from rocketstore.spark.commitlog_scan import commitlog_batches, commitlog_rows, store_config
from rocketstore.spark.options import MODE_COMMITLOG, ReadOptions
from rocketstore.spark.plan import (
    CommitLogPartition,
    DispatchedLookup,
    KeyPartition,
    QueueGroupPartition,
    QueuePartition,
)
from rocketstore.spark.pushdown import Pushed
from rocketstore.spark.scan_filters import NOTHING_PUSHED, accepts, apply_pushed, row_batches
from rocketstore.store import MessageStore

log = logging.getLogger(__name__)

FAST_CHUNK_UNITS = 8192  # consume-queue units decoded column-wise at a time
MAX_REGION_BYTES = 16 * 1024 * 1024  # CommitLog bytes copied out per record batch
MATCH_ALL = parse_subscription(None)

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


def close_stores() -> None:
    """Close every store this process opened (tests; workers simply exit)."""
    with _STORES_LOCK:
        for store in _STORES.values():
            store.close()
        _STORES.clear()


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
        return row_batches(rows, options.include_body, (partition.topic, partition.queue_id))
    if isinstance(partition, KeyPartition):
        store = open_store(options)
        rows = _key_rows(store, partition, subscription, pushed)
    elif isinstance(partition, CommitLogPartition):
        # Key filters and SQL92 selectors are checked per record.
        if not pushed.by_index and subscription.selector is None:
            return commitlog_batches(partition, options, subscription, pushed, needed)
        rows = commitlog_rows(partition, options, subscription, pushed)
    else:  # Spark's placeholder when a plan has no partitions
        return iter(())
    return row_batches(rows, options.include_body)


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
            if subscription.match_properties(message.properties) and accepts(
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
            yield from row_batches(rows, include_body, (part.topic, part.queue_id))
        else:
            for batch in batches:
                kept = apply_pushed(batch, pushed)
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
        if subscription.match_properties(message.properties) and accepts(
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
                if subscription.match_properties(copy.properties) and accepts(pushed, copy, offset):
                    yield copy, offset
