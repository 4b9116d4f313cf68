"""Reading a ``mode=commitlog`` partition: one CommitLog file's records, straight from the
file (no consumequeue/ or index/ needed), with the options' queues and bounds applied per row.

Layer: spark (top). Column-wise where the decoder takes a walker run (``commitlog_batches``),
record by record otherwise (``commitlog_rows``, the reference path, which reads with pushed
key filters or a SQL92 selector take).
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np

from rocketstore.config import StoreConfig
from rocketstore.errors import CorruptDataError, IncompleteDataError
from rocketstore.files.holes import next_data_finder
from rocketstore.files.mapped_file_queue import offset_file_path
from rocketstore.files.store_dir import with_dledger
from rocketstore.format import record as rec
from rocketstore.format import sysflag
from rocketstore.format.message import MessageExt
from rocketstore.format.record_scan import NextData, Records
from rocketstore.format.subscription import Subscription
from rocketstore.spark import light_rows
from rocketstore.spark.arrow_records import decode_records
from rocketstore.spark.commitlog_runs import partition_runs
from rocketstore.spark.options import EARLIEST, LATEST, ReadOptions
from rocketstore.spark.plan import CommitLogPartition
from rocketstore.spark.pushdown import Pushed
from rocketstore.spark.scan_filters import accepts, apply_pushed, is_in, row_batches

log = logging.getLogger(__name__)


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


def commitlog_rows(
    part: CommitLogPartition, options: ReadOptions, subscription: Subscription, pushed: Pushed
) -> Iterator[tuple[MessageExt, int]]:
    """A CommitLog partition record by record (the reference path; reads with pushed key
    filters take it): the walker's records (:func:`.commitlog_runs.partition_runs`)."""
    with _mapped_commitlog_file(options, part) as mapped:
        if mapped is None:
            return
        view, path, next_data = mapped
        for records in _walker_runs(view, path, part, next_data):
            for position in records.position.tolist():
                yield from _record_row(view, path, position, options, subscription, pushed)


def _walker_runs(
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
        if subscription.match_properties(message.properties) and accepts(
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
            and accepts(pushed, copy, queue_offset)
        ):
            yield copy, queue_offset


def commitlog_batches(
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
        for records in _walker_runs(view, path, part, next_data):
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
        yield from row_batches(rows, options.include_body)
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
        keep &= np.asarray(is_in(tags, wanted), dtype=bool)
    kept = batch if keep.all() else batch.filter(pa.array(keep))
    return apply_pushed(kept, pushed)
