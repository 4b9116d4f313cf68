"""Reading one network partition into Arrow record batches (runs on the executors).

Layer: spark (top). A :class:`.network_plan.NetworkPartition` is pulled from its broker
with PULL_MESSAGE; a :class:`.network_plan.NetworkKeyPartition` is answered by
QUERY_MESSAGE. Brokers answer both with CommitLog records back to back, which are decoded
by the file mode's column-wise decoder (:func:`.arrow_records.decode_records`), so the
columns are the same; a stretch it declines goes through the per-record decoder. Each row
gets the ``broker`` column (the brokerName it was read from).

A queue's range is pulled with several pulls in flight (:mod:`.network_pull`: master
first, the slave a broker suggests next); the records the answers bring are gathered and
decoded together, up to :data:`DECODE_ROWS` at a time: the column-wise decoder's cost is
mostly per call, and an answer holds at most 32 messages.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterator
from typing import Any

import numpy as np

from rocketstore.errors import CorruptDataError, DataLossError, IncompleteDataError
from rocketstore.format import record as rec
from rocketstore.format.record_scan import Stop, walk_start_array
from rocketstore.format.subscription import Subscription
from rocketstore.remoting.blocking import RemotingClientError
from rocketstore.remoting.codec import RemotingCommand
from rocketstore.remoting.codes import ResponseCode
from rocketstore.spark import network_pull
from rocketstore.spark.arrow_records import decode_records, ints_at, queue_offsets_at
from rocketstore.spark.columns import BROKER_COLUMN, RowBuffer, project
from rocketstore.spark.network_cluster import (
    MASTER_ID,
    QUERY_MAX_NUM,
    Cluster,
    ClusterError,
    refusal,
)
from rocketstore.spark.network_plan import NetworkKeyPartition, NetworkPartition
from rocketstore.spark.network_pull import Puller, PullPipeline
from rocketstore.spark.options import ReadOptions
from rocketstore.spark.pushdown import Pushed
from rocketstore.spark.scan import decoded_columns

log = logging.getLogger(__name__)

_HEADER = struct.Struct(">ii")  # TOTALSIZE, MAGICCODE
_PHYSICAL = struct.Struct(">q")
_QUEUE_OFFSET = struct.Struct(">q")
# Pulls in a row that move no offset forward (RETRY_IMMEDIATELY at the same place) before
# the partition fails naming the queue.
MAX_STALLED_PULLS = 5
# Pulled records decoded together: at most this many rows / bytes of records a batch (the
# file mode's FAST_CHUNK_UNITS: the decoder's and Arrow's cost per batch, not per row, was
# a fifth of the reader's CPU at 2,048; the pulls in flight keep the broker busy meanwhile).
DECODE_ROWS = 8192
DECODE_BYTES = 16 * 1024 * 1024


def record_positions(body: bytes, where: str) -> tuple[Any, Any, Any]:
    """(positions, sizes, CommitLog offsets) of the records back to back in ``body``;
    CorruptDataError naming ``where`` for a body that is not whole records."""
    starts = record_starts(body, where)
    return starts, ints_at(body, starts, 4), ints_at(body, starts + rec.POS_PHYSICALOFFSET, 8)


def record_starts(body: bytes, where: str) -> Any:
    """Where the records back to back in ``body`` start (walked in C when the extension
    is built); CorruptDataError naming ``where`` for a body that is not whole records."""
    starts, stop_at, stop = walk_start_array(memoryview(body), 0, len(body), len(body))
    if stop_at != len(body) or stop != Stop.BOUNDARY:
        return _checked_positions(body, where)[0]  # names what is wrong
    return starts


def _checked_positions(body: bytes, where: str) -> tuple[Any, Any, Any]:
    positions, sizes, physical = [], [], []
    position = 0
    while position < len(body):
        if position + 8 > len(body):
            raise CorruptDataError(f"{where}: {len(body) - position} bytes after the last record")
        total, magic = _HEADER.unpack_from(body, position)
        if magic not in (rec.MESSAGE_MAGIC_V1, rec.MESSAGE_MAGIC_V2) or total <= 0:
            raise CorruptDataError(f"{where}: no record at {position} ({magic=:#x})")
        if position + total > len(body):
            raise CorruptDataError(f"{where}: the record at {position} is cut off")
        positions.append(position)
        sizes.append(total)
        physical.append(_PHYSICAL.unpack_from(body, position + rec.POS_PHYSICALOFFSET)[0])
        position += total
    return (
        np.asarray(positions, dtype=np.int64),
        np.asarray(sizes, dtype=np.int64),
        np.asarray(physical, dtype=np.int64),
    )


def decode_body(
    body: bytes, where: str, include_body: bool, needed: frozenset[str] | None
) -> list[Any]:
    """Records back to back (a pull's or a query's answer) as record batches: column-wise,
    or one by one when the column-wise decoder declines them (an IPv6 host, text that is
    not UTF-8, a repeated property name)."""
    if not body:
        return []
    positions, sizes, physical = record_positions(body, where)
    offsets = queue_offsets_at(body, positions)
    return [decode_at(body, positions, sizes, physical, offsets, where, include_body, needed)]


def decode_at(
    region: bytes,
    positions: Any,
    sizes: Any,
    physical: Any,
    offsets: Any,
    where: str,
    include_body: bool,
    needed: frozenset[str] | None,
) -> Any:
    """The whole records at ``positions`` of ``region`` as one record batch."""
    batch = decode_records(region, positions, physical, sizes, offsets, include_body, needed)
    if batch is not None:
        return batch
    buffer = RowBuffer(include_body)
    for position in positions.tolist():
        try:
            view = rec.read_record(region, position, end=len(region))
        except (CorruptDataError, IncompleteDataError) as e:
            raise CorruptDataError(f"{where}: record at {position}: {e}") from e
        assert not isinstance(view, rec.Blank)
        buffer.append(rec.to_message_ext(region, view, read_body=include_body), view.queue_offset)
    return buffer.take()


class _Gathered:
    """Records of pull answers, decoded together (:data:`DECODE_ROWS`): per answer only
    its record starts are walked; the fields the reader checks are read for all at once."""

    def __init__(self, end: int) -> None:
        self.end = end  # queue offsets from here on are past the partition
        self._clear()

    def _clear(self) -> None:
        self.bodies: list[bytes] = []
        self.starts: list[Any] = []
        self.lows: list[int] = []  # per answer: queue offsets below were read already
        self.rows = 0
        self.bytes = 0

    @property
    def full(self) -> bool:
        return self.rows >= DECODE_ROWS or self.bytes >= DECODE_BYTES

    def add(self, body: bytes, starts: Any, low: int) -> None:
        """An answer's records at ``starts`` of ``body``; those below queue offset ``low``
        or at the partition's end and past are dropped."""
        if len(starts):
            self.starts.append(starts + self.bytes)
            self.bodies.append(body)
            self.lows.append(low)
            self.rows += len(starts)
            self.bytes += len(body)

    def take(self, where: str, include_body: bool, needed: frozenset[str] | None) -> Any | None:
        """The records gathered as one batch (None when none is kept); empties it."""
        if not self.starts:
            return None
        region = self.bodies[0] if len(self.bodies) == 1 else b"".join(self.bodies)
        positions = np.concatenate(self.starts)
        lows = np.repeat(np.asarray(self.lows, np.int64), [len(s) for s in self.starts])
        self._clear()
        offsets = queue_offsets_at(region, positions)
        keep = (offsets >= lows) & (offsets < self.end)
        if not np.all(keep):
            positions, offsets = positions[keep], offsets[keep]
            if not len(positions):
                return None
        sizes = ints_at(region, positions, 4)
        physical = ints_at(region, positions + rec.POS_PHYSICALOFFSET, 8)
        return decode_at(region, positions, sizes, physical, offsets, where, include_body, needed)


def _with_broker(batch: Any, broker: str) -> Any:
    import pyarrow as pa  # noqa: PLC0415

    # (pa.repeat: a list of num_rows str to convert cost 0.4 us a row, a tenth of the read)
    column = pa.repeat(pa.scalar(broker, pa.string()), batch.num_rows)
    return batch.append_column(BROKER_COLUMN, column)


def _keep(batch: Any, mask: Any) -> Any:
    import pyarrow as pa  # noqa: PLC0415

    return batch if bool(np.all(mask)) else batch.filter(pa.array(mask, pa.bool_()))


def _subscription_mask(batch: Any, subscription: Subscription) -> Any:
    """Rows whose tag (tags option) or properties (sql92 option) the subscription takes."""
    rows = batch.num_rows
    if subscription.matches_all:
        return np.ones(rows, dtype=bool)
    if subscription.selector is not None:
        properties = batch.column("properties").to_pylist()
        return np.array(
            [subscription.match_properties(dict(p or [])) for p in properties], dtype=bool
        )
    tags = batch.column("tags").to_pylist()
    return np.array([subscription.match_tags(t) for t in tags], dtype=bool)


def read_network_partition(partition: object, options: ReadOptions) -> Iterator[Any]:
    """The partition's rows as Arrow batches of the read's columns."""
    subscription = options.subscription()
    needed = decoded_columns(options, Pushed(), subscription)
    if needed is not None:
        needed = needed | {"properties"} if subscription.selector is not None else needed
    if isinstance(partition, NetworkPartition):
        batches = _pulled(partition, options, subscription, needed)
    elif isinstance(partition, NetworkKeyPartition):
        if needed is not None:
            needed = needed | {"keys", "uniqKey"}
        batches = _queried(partition, options, subscription, needed)
    else:  # Spark's placeholder when a plan has no partitions
        return iter(())
    return project(batches, options.columns)


def _cluster(options: ReadOptions) -> Cluster:
    """An executor's connections: signed and waiting for brokers as the options say."""
    return Cluster(credentials=options.credentials, broker_down_wait_ms=options.broker_down_wait_ms)


def _pulled(
    part: NetworkPartition,
    options: ReadOptions,
    subscription: Subscription,
    needed: frozenset[str] | None,
) -> Iterator[Any]:
    where = f"{part.topic} queue {part.broker}:{part.queue_id}"
    gathered = _Gathered(part.end)
    with _cluster(options) as cluster:
        for body, starts, low in _pulled_records(part, options, cluster):
            gathered.add(body, starts, low)
            if gathered.full:
                yield from _kept(gathered, where, part.broker, options, subscription, needed)
    yield from _kept(gathered, where, part.broker, options, subscription, needed)


def _kept(
    gathered: _Gathered,
    where: str,
    broker: str,
    options: ReadOptions,
    subscription: Subscription,
    needed: frozenset[str] | None,
) -> Iterator[Any]:
    batch = gathered.take(f"pull of {where}", options.include_body, needed)
    if batch is not None:
        kept = _keep(batch, _subscription_mask(batch, subscription))
        if kept.num_rows:
            yield _with_broker(kept, broker)


def _pulled_records(
    part: NetworkPartition, options: ReadOptions, cluster: Cluster
) -> Iterator[tuple[bytes, Any, int]]:
    """(answer body, its record starts, the queue offset it was pulled at) of the answers
    that bring the partition's range, in queue order; records below that offset (already
    read) or at the partition's end and past are the caller's to drop."""
    where = f"{part.topic} queue {part.broker}:{part.queue_id}"
    puller = Puller(cluster, part.broker, part.addresses)
    pipeline = PullPipeline(
        puller, part.topic, part.queue_id, part.start, part.end, network_pull.PULLS_IN_FLIGHT
    )
    offset = part.start
    stalled = 0
    while offset < part.end:
        result = pipeline.pull(offset)
        next_offset = result.next_begin_offset
        if result.code == ResponseCode.SUCCESS:
            body = result.body
            starts = record_starts(body, f"pull of {where}")
            if len(starts):
                yield body, starts, offset
                # An answer's records come in queue order: the last one's is the highest.
                last = int(starts[-1]) + rec.POS_QUEUEOFFSET
                next_offset = max(next_offset, _QUEUE_OFFSET.unpack_from(body, last)[0] + 1)
        elif result.code == ResponseCode.PULL_NOT_FOUND:
            # No message at or past offset: the queue ends before planned.
            _cut_short(part, where, offset, "the broker has no message there")
            return
        elif result.code == ResponseCode.PULL_OFFSET_MOVED:
            if next_offset <= offset:
                _cut_short(part, where, offset, "the broker moved the offset back")
                return
            _cut_short(part, where, offset, f"they are gone (retention) up to {next_offset}")
            log.warning(
                "%s: offsets [%d, %d) are gone (retention); reading on from %d",
                where, offset, min(next_offset, part.end), next_offset,
            )  # fmt: skip
        elif result.code != ResponseCode.PULL_RETRY_IMMEDIATELY:
            answer = RemotingCommand(code=result.code, remark=result.remark)
            signed = options.credentials is not None
            raise refusal(
                f"pull of {where} at offset {offset}", f"broker {part.broker} ({puller.address})",
                answer, signed,
            )  # fmt: skip
        if next_offset <= offset:
            stalled += 1
            if stalled >= MAX_STALLED_PULLS:
                raise ClusterError(
                    f"pull of {where}: the broker keeps answering code {result.code} at "
                    f"offset {offset} without moving on"
                )
            continue
        stalled = 0
        offset = next_offset


def _cut_short(part: NetworkPartition, where: str, offset: int, why: str) -> None:
    """A partition whose planned range the broker no longer has from ``offset`` on: a
    batch read steps over it (the queue changed since planning); a stream's partition
    planned with failOnDataLoss fails, since its end is in the checkpoint and the skipped
    messages would never be read."""
    if part.fail_on_data_loss:
        raise DataLossError(
            f"pull of {where}: offsets [{offset}, {part.end}) were planned for this "
            f"micro-batch, but {why}. Restart the query with failOnDataLoss=false to skip "
            "them"
        )


def _queried(
    part: NetworkKeyPartition,
    options: ReadOptions,
    subscription: Subscription,
    needed: frozenset[str] | None,
) -> Iterator[Any]:
    """The rows of the keys: QUERY_MESSAGE by UNIQ_KEY (when uniqKeys is given) or by KEYS
    token, kept when inside the planned ranges and matching every key option. A key query
    the broker may have cut at its limit (maxMsgsNumBatch) is answered by pulling the
    ranges instead (a scan of this broker's queues, the keys checked on every row)."""
    unique = bool(part.uniq_keys)
    lookups = part.uniq_keys if unique else part.keys
    address = dict(part.addresses).get(MASTER_ID, part.addresses[0][1])
    where = f"query of {part.topic} on {part.broker} ({address})"
    found: list[Any] = []
    with _cluster(options) as cluster:
        for key in lookups:
            try:
                body = cluster.query(address, part.topic, key, unique)
            except RemotingClientError as e:
                raise RemotingClientError(f"{where}: {e}") from e
            batches = decode_body(body, where, options.include_body, needed)
            if not unique and sum(b.num_rows for b in batches) >= QUERY_MAX_NUM:
                log.info(
                    "%s: key %r may have more matches than a query gives: scanning", where, key
                )
                yield from _scanned_keys(part, options, subscription, needed)
                return
            found += batches
    seen: set[tuple[int, int]] = set()
    for batch in found:
        kept = _keep(batch, _key_mask(batch, part, seen) & _subscription_mask(batch, subscription))
        if kept.num_rows:
            yield _with_broker(kept, part.broker)


def _key_mask(batch: Any, part: NetworkKeyPartition, seen: set[tuple[int, int]]) -> Any:
    """Rows of the partition's topic inside its ranges whose keys match the options (an
    index hit may be a hash collision), each (queue, offset) once."""
    ranges: dict[int, list[tuple[int, int]]] = {}
    for qid, start, end in part.ranges:
        ranges.setdefault(qid, []).append((start, end))
    topics = batch.column("topic").to_pylist()
    queues = batch.column("partition").to_pylist()
    offsets = batch.column("offset").to_pylist()
    keys = batch.column("keys").to_pylist()
    uniq = batch.column("uniqKey").to_pylist()
    mask = np.zeros(batch.num_rows, dtype=bool)
    for i in range(batch.num_rows):
        if topics[i] != part.topic or (queues[i], offsets[i]) in seen:
            continue
        if not any(s <= offsets[i] < e for s, e in ranges.get(queues[i], ())):
            continue
        if part.uniq_keys and uniq[i] not in part.uniq_keys:
            continue
        if part.keys and not set(keys[i] or ()) & set(part.keys):
            continue
        seen.add((queues[i], offsets[i]))
        mask[i] = True
    return mask


def _scanned_keys(
    part: NetworkKeyPartition,
    options: ReadOptions,
    subscription: Subscription,
    needed: frozenset[str] | None,
) -> Iterator[Any]:
    seen: set[tuple[int, int]] = set()
    for qid, start, end in part.ranges:
        pull = NetworkPartition(part.topic, part.broker, part.addresses, qid, start, end)
        for batch in _pulled(pull, options, subscription, needed):
            kept = _keep(batch, _key_mask(batch, part, seen))
            if kept.num_rows:
                yield kept
