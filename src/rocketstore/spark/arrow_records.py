"""CommitLog records -> one Arrow record batch, decoded column-wise with numpy and Arrow
compute (the hot path of a Spark read).

Layer: spark (top). Pure: works on a byte buffer and record positions; no store, no I/O.
The per-record decoder (:mod:`rocketstore.format.record` + :class:`.columns.RowBuffer`)
stays the reference: :func:`decode_records` gives the same rows or returns None, and the
caller then decodes that stretch the slow way. None is returned for what is rare and
fiddly column-wise: a record that does not check out (removed by retention, overwritten,
corrupt), an IPv6 host, a property name repeated in one record, text that is not UTF-8.

Fixed fields are gathered for all records at once (big-endian, per-record positions: an
IPv6 born host shifts later fields). Bodies, topics and properties are copied out through
Arrow binary-view arrays over the copied CommitLog region. Properties are split with Arrow
kernels by RocketMQ's rule (segments between 0x02; a segment is kept when its first 0x01
has text on both sides); hosts are formatted once per distinct value.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from rocketstore.format import properties as props
from rocketstore.format import record as rec
from rocketstore.format import sysflag
from rocketstore.format.hosts import decode_host
from rocketstore.spark.columns import (
    COLUMN_NAMES,
    FROM_PROPERTIES,
    TIMESTAMP_TYPE_LOG_APPEND_TIME,
    arrow_schema,
)

Int64s = npt.NDArray[np.int64]
# Records' bytes: a copy, or a view of the mapped file held while they are decoded (every
# column made from them is a copy of its own).
Region = bytes | memoryview
_V6_FLAGS = sysflag.BORNHOST_V6_FLAG | sysflag.STOREHOSTADDRESS_V6_FLAG


def _words(buf: npt.NDArray[np.uint8], width: int) -> npt.NDArray[np.signedinteger[Any]]:
    """``buf`` seen as signed big-endian ints of ``width`` bytes starting at every byte
    (a view: indexing it reads one field per record, no row of bytes copied first)."""
    count = max(len(buf) - width + 1, 0)
    return np.ndarray((count,), dtype=f">i{width}", buffer=buf, strides=(1,))


def _be(buf: npt.NDArray[np.uint8], positions: Int64s, width: int) -> Int64s:
    """Signed big-endian ints of ``width`` bytes at ``positions`` (clipped into the buffer:
    a garbage length must not raise here; the record checks reject it afterwards)."""
    if len(buf) < width:
        return np.zeros(len(positions), dtype=np.int64)
    index = np.clip(positions, 0, len(buf) - width)
    return _words(buf, width)[index].astype(np.int64)


# Fixed fields of a record with IPv4 hosts: TOTALSIZE .. BODYLEN (see format.record).
HEADER_BYTES = 88


class _Header:
    """The fixed fields of the records at ``positions``, each read when asked for (every
    record is whole in the buffer: the caller checked)."""

    def __init__(self, buf: npt.NDArray[np.uint8], positions: Int64s) -> None:
        self.buf = buf
        self.positions = positions

    def field(self, at: int, width: int) -> Int64s:
        """Signed big-endian ints of ``width`` bytes at ``at`` in each record."""
        return _words(self.buf, width)[self.positions + at].astype(np.int64)


def _rows_at(buf: npt.NDArray[np.uint8], starts: Int64s, width: int) -> npt.NDArray[np.uint8]:
    """``width`` bytes at each start, one row each (starts at most ``len(buf) - width``):
    rows of a sliding-window view, copied row by row without a per-byte index array."""
    return np.lib.stride_tricks.sliding_window_view(buf, width)[starts]


_TWELVE = np.arange(12)


def _prefixes(buf: npt.NDArray[np.uint8], starts: Int64s) -> npt.NDArray[np.int32]:
    """The 4 bytes at each start as a little-endian int32 (a view's prefix)."""
    return np.ascontiguousarray(_heads(buf, starts)[:, :4]).view("<i4").ravel()


def _heads(buf: npt.NDArray[np.uint8], starts: Int64s) -> npt.NDArray[np.uint8]:
    """The 12 bytes at each start (zeros past the buffer's end)."""
    limit = len(buf) - 12
    if limit >= 0 and (not len(starts) or int(starts.max()) <= limit):
        return _rows_at(buf, starts, 12)
    heads = np.zeros((len(starts), 12), dtype=np.uint8)
    inside = starts <= limit
    if limit >= 0:
        heads[inside] = _rows_at(buf, starts[inside], 12)
    for row in np.flatnonzero(~inside).tolist():  # the last values of the buffer: few
        tail = buf[int(starts[row]) : int(starts[row]) + 12]
        heads[row, : len(tail)] = tail
    return heads


def _gather(
    buf: npt.NDArray[np.uint8], region: Region, starts: Int64s, lengths: Int64s, kind: Any
) -> Any:
    """The byte ranges as an Arrow array of ``kind`` (binary or string; a string cast
    checks UTF-8 and raises ArrowInvalid). Built as a binary *view* array over the region
    (16 bytes per value, no copy of the values), which Arrow's cast then compacts: about
    three times faster than joining Python slices."""
    import pyarrow as pa  # noqa: PLC0415

    rows = len(starts)
    # As a long value: length, 4-byte prefix, buffer index 0, offset (int32 columns).
    words = np.empty((rows, 4), dtype="<i4")
    words[:, 0] = lengths
    words[:, 1] = _prefixes(buf, starts)
    words[:, 2] = 0
    words[:, 3] = starts
    views = words.view(np.uint8)
    short = np.flatnonzero(lengths <= 12)
    if len(short):  # inlined instead: the value's bytes, zero padded
        heads = _heads(buf, starts[short])
        views[short, 4:16] = heads * (lengths[short][:, None] > _TWELVE)
    array = pa.Array.from_buffers(
        pa.binary_view(), rows, [None, pa.py_buffer(views), pa.py_buffer(region)]
    )
    return array.cast(kind)


def ints_at(region: Region, positions: Int64s, width: int) -> Int64s:
    """Signed big-endian ints of ``width`` bytes at ``positions`` of ``region`` (each
    inside it)."""
    return _be(np.frombuffer(region, dtype=np.uint8), positions, width)


def queue_offsets_at(region: Region, positions: Int64s) -> Int64s:
    """QUEUEOFFSET of the records at ``positions`` (each a whole record in ``region``)."""
    buf = np.frombuffer(region, dtype=np.uint8)
    raw = np.ascontiguousarray(_rows_at(buf, positions + rec.POS_QUEUEOFFSET, 8))
    return raw.view(">i8").ravel().astype(np.int64)


def _repeated(value: str, rows: int) -> Any:
    """A string column holding ``value`` in every row, built on its buffers."""
    import pyarrow as pa  # noqa: PLC0415

    data = value.encode("utf-8")
    offsets = np.arange(0, len(data) * (rows + 1), len(data) or 1, dtype=np.int32)
    if not data:
        offsets = np.zeros(rows + 1, dtype=np.int32)
    return pa.Array.from_buffers(
        pa.string(), rows, [None, pa.py_buffer(offsets), pa.py_buffer(data * rows)]
    )


def _constant_or_gather(
    buf: npt.NDArray[np.uint8], region: Region, starts: Int64s, lengths: Int64s
) -> Any:
    """The topic column: one topic repeated (a queue's records all have it) or gathered."""
    import pyarrow as pa  # noqa: PLC0415

    width = int(lengths[0])
    if width > 0 and np.all(lengths == width) and int(starts.max()) + width <= len(buf):
        text = _rows_at(buf, starts, width)
        if np.all(text == text[0]):
            value = text[0].tobytes().decode("utf-8")  # UnicodeDecodeError: see caller
            return _repeated(value, len(starts))
    return _gather(buf, region, starts, lengths, pa.string())


def _hosts(header: _Header, at: int) -> Any:
    """``ip:port`` of IPv4 host fields, formatted once per distinct value."""
    import pyarrow as pa  # noqa: PLC0415

    packed = header.field(at, 8).astype(np.uint64)
    if np.all(packed == packed[0]):  # the usual case: one store host, one producer host
        return _repeated(decode_host(int(packed[0]).to_bytes(8, "big")), len(packed))
    distinct, inverse = np.unique(packed, return_inverse=True)
    texts = [decode_host(int(v).to_bytes(8, "big")) for v in distinct.tolist()]
    return pa.array(texts, pa.string()).take(pa.array(inverse.astype(np.int32)))


_HEX_PAIRS = np.array(
    [int.from_bytes(f"{b:02X}".encode(), "little") for b in range(256)], dtype="<u2"
)  # byte -> its two upper-case hex digits, as one little-endian uint16


def _msg_ids(header: _Header, physical: Int64s) -> Any:
    """offsetMsgId: 8 bytes of store host and 8 of offset as 32 upper-case hex digits."""
    import pyarrow as pa  # noqa: PLC0415

    rows = len(physical)
    raw = np.empty((rows, 16), dtype=np.uint8)
    raw[:, :8] = header.field(64, 8).astype(">i8").view(np.uint8).reshape(rows, 8)
    raw[:, 8:] = physical.astype(">i8").view(np.uint8).reshape(rows, 8)
    text = _HEX_PAIRS[raw]  # (rows, 16) uint16 = (rows, 32) ASCII bytes
    offsets = np.arange(0, 32 * rows + 1, 32, dtype=np.int32)
    return pa.Array.from_buffers(
        pa.string(), rows, [None, pa.py_buffer(offsets), pa.py_buffer(text.tobytes())]
    )


def _timestamps(millis: Int64s) -> Any:
    """Epoch milliseconds as Arrow timestamp[us, UTC], built on the numpy buffer."""
    import pyarrow as pa  # noqa: PLC0415

    micros = np.ascontiguousarray(millis * 1000, dtype=np.int64)
    kind = pa.timestamp("us", tz="UTC")
    return pa.Array.from_buffers(kind, len(micros), [None, pa.py_buffer(micros)])


def _properties(text: Any, rows: int, headers: bool) -> dict[str, Any] | None:
    """The ``properties`` column as map<string,string> (and ``headers``, the user
    properties, when asked), and the KEYS, TAGS and UNIQ_KEY columns under those names.
    A name a record repeats keeps its first position with its last value, as the
    reference decoder's dict does: every record of a Java batch send repeats one
    (CommitLog.MessageExtBatchEncoder appends the batch's properties, WAIT among them, to
    each entry's own), and declining those sent whole stores down the per-record path."""
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.compute as pc  # noqa: PLC0415

    segments = pc.split_pattern(text, props.PROPERTY_SEPARATOR)
    flat = segments.flatten()
    parent = np.asarray(segments.value_parent_indices())
    has_separator = np.asarray(pc.match_substring(flat, props.NAME_VALUE_SEPARATOR))
    if not has_separator.all():
        flat = flat.filter(pa.array(has_separator))
        parent = parent[has_separator]
    pairs = pc.split_pattern(flat, props.NAME_VALUE_SEPARATOR, max_splits=1)
    names, values = pc.list_element(pairs, 0), pc.list_element(pairs, 1)
    keep = np.asarray(
        pc.and_(pc.greater(pc.binary_length(names), 0), pc.greater(pc.binary_length(values), 0))
    )
    if not keep.all():
        mask = pa.array(keep)
        names, values, parent = names.filter(mask), values.filter(mask), parent[keep]
    # Names repeat across records (KEYS, TAGS ...): number them once, then a record that
    # repeats a name shows up as a repeated (record, name number) pair.
    encoded = names.dictionary_encode()
    codes = np.asarray(encoded.indices).astype(np.int64)
    distinct = encoded.dictionary.to_pylist()
    pair = parent.astype(np.int64) * max(len(distinct), 1) + codes
    if len(pair) > 1:
        order = np.argsort(pair, kind="stable")  # a repeated pair's entries in text order
        ordered = pair[order]
        repeated = ordered[1:] == ordered[:-1]
        if repeated.any():
            firsts = np.flatnonzero(np.concatenate(([True], ~repeated)))
            lasts = np.concatenate((firsts[1:], [len(pair)])) - 1
            source = np.arange(len(pair))
            source[order[firsts]] = order[lasts]  # the first entry takes the last value
            kept = np.zeros(len(pair), dtype=bool)
            kept[order[firsts]] = True
            values = values.take(pa.array(source[kept]))
            names, parent, codes = names.filter(pa.array(kept)), parent[kept], codes[kept]
    offsets = np.zeros(rows + 1, dtype=np.int32)
    np.cumsum(np.bincount(parent, minlength=rows), out=offsets[1:])
    kind = pa.map_(pa.field("key", pa.string(), nullable=False), pa.field("value", pa.string()))
    found = {"properties": pa.MapArray.from_arrays(pa.array(offsets), names, values, type=kind)}
    for name in (props.KEYS, props.TAGS, props.UNIQ_KEY):
        where = np.full(rows, -1, dtype=np.int64)
        if name in distinct:
            entries = np.flatnonzero(codes == distinct.index(name))
            where[parent[entries]] = entries
        found[name] = values.take(pa.array(where, mask=where < 0))
    if headers:
        system = np.array([n in props.SYSTEM_PROPERTY_NAMES for n in distinct], dtype=bool)
        user = ~system[codes] if len(distinct) else np.zeros(0, dtype=bool)
        user_offsets = np.zeros(rows + 1, dtype=np.int32)
        np.cumsum(np.bincount(parent[user], minlength=rows), out=user_offsets[1:])
        mask = pa.array(user)
        found["headers"] = pa.MapArray.from_arrays(
            pa.array(user_offsets), names.filter(mask), values.filter(mask), type=kind
        )
    return found


def _keys_list(keys: Any, rows: int) -> Any:
    """KEYS split on spaces, empty tokens dropped; [] where there is no KEYS."""
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.compute as pc  # noqa: PLC0415

    tokens = pc.split_pattern(pc.fill_null(keys, ""), props.KEY_SEPARATOR)
    flat = tokens.flatten()
    parent = np.asarray(tokens.value_parent_indices())
    nonempty = np.asarray(pc.greater(pc.binary_length(flat), 0))
    offsets = np.zeros(rows + 1, dtype=np.int32)
    np.cumsum(np.bincount(parent[nonempty], minlength=rows), out=offsets[1:])
    kind = pa.list_(pa.field("element", pa.string()))
    return pa.ListArray.from_arrays(pa.array(offsets), flat.filter(pa.array(nonempty)), type=kind)


def decode_records(
    region: Region,
    positions: Int64s,
    expected_offsets: Int64s,
    expected_sizes: Int64s,
    queue_offsets: Int64s,
    include_body: bool,
    columns: frozenset[str] | None = None,
    queue: tuple[str, int] | None = None,
) -> Any | None:
    """Records at ``positions`` of ``region`` as a RecordBatch of the read schema, or None.
    ``columns``: the columns to decode (in the schema's order; all for None). ``queue``:
    the (topic, queue id) the records were read through, which every row's ``topic`` and
    ``partition`` are then (not decoded).

    ``expected_offsets`` / ``expected_sizes`` are what the consume queue says (CommitLog
    offset and size): a record that disagrees, or whose lengths do not add up to its
    size, makes the whole call return None.
    """
    import pyarrow as pa  # noqa: PLC0415

    rows = len(positions)
    buf = np.frombuffer(region, dtype=np.uint8)
    if rows == 0 or int(positions.max()) + rec.FIXED_OVERHEAD_V4 > len(buf):
        return None
    header = _Header(buf, positions)
    total = header.field(rec.POS_TOTALSIZE, 4)
    magic = header.field(rec.POS_MAGIC, 4)
    sys_flag = header.field(rec.POS_SYSFLAG, 4)
    physical = header.field(rec.POS_PHYSICALOFFSET, 8)
    v2 = magic == rec.MESSAGE_MAGIC_V2
    if (
        np.any(total != expected_sizes)
        or np.any(physical != expected_offsets)
        or np.any((magic != rec.MESSAGE_MAGIC_V1) & ~v2)
        or np.any(sys_flag & _V6_FLAGS)
        or int((positions + total).max()) > len(buf)
    ):
        return None
    # IPv4 hosts from here on: the layout of the module docstring of format.record.
    body_length = header.field(84, 4)
    body_at = positions + HEADER_BYTES
    topic_length_at = body_at + body_length
    if np.all(v2):  # one record format in a run, nearly always: one width read
        topic_length = _be(buf, topic_length_at, 2)
    elif not np.any(v2):
        topic_length = _be(buf, topic_length_at, 1)
    else:
        topic_length = np.where(v2, _be(buf, topic_length_at, 2), _be(buf, topic_length_at, 1))
    topic_at = topic_length_at + np.where(v2, 2, 1)
    properties_length = _be(buf, topic_at + topic_length, 2)
    properties_at = topic_at + topic_length + 2
    if (
        np.any(body_length < 0)
        or np.any(topic_length < 0)
        or np.any(properties_length < 0)
        or np.any(properties_at + properties_length != positions + total)
    ):
        return None
    wanted = COLUMN_NAMES if columns is None else [c for c in COLUMN_NAMES if c in columns]
    try:
        if queue is not None:
            topic = _repeated(queue[0], rows)
        elif "topic" in wanted:
            topic = _constant_or_gather(buf, region, topic_at, topic_length)
        text = None
        if not FROM_PROPERTIES.isdisjoint(wanted):
            text = _gather(buf, region, properties_at, properties_length, pa.string())
    except (pa.ArrowInvalid, UnicodeDecodeError):
        return None  # not UTF-8: the reference decoder replaces bad bytes
    named: dict[str, Any] = {}
    if text is not None:
        decoded = _properties(text, rows, "headers" in wanted)
        if decoded is None:
            return None
        named = decoded
    # Each column is built only when wanted: the value of this dict is a maker.
    makers = {
        "key": lambda: named[props.KEYS],
        "value": lambda: (
            _gather(buf, region, body_at, body_length, pa.binary())
            if include_body
            else pa.nulls(rows, pa.binary())
        ),
        "topic": lambda: topic,
        "partition": lambda: pa.array(
            np.full(rows, queue[1], np.int32)
            if queue is not None
            else header.field(rec.POS_QUEUEID, 4).astype(np.int32)
        ),
        "offset": lambda: pa.array(queue_offsets.astype(np.int64)),
        "timestamp": lambda: _timestamps(header.field(56, 8)),
        "timestampType": lambda: pa.array(np.full(rows, TIMESTAMP_TYPE_LOG_APPEND_TIME, np.int32)),
        "keys": lambda: _keys_list(named[props.KEYS], rows),
        "tags": lambda: named[props.TAGS],
        "msgId": lambda: _msg_ids(header, physical),
        "uniqKey": lambda: named[props.UNIQ_KEY],
        "commitLogOffset": lambda: pa.array(physical),
        "size": lambda: pa.array(total.astype(np.int32)),
        "bornTimestamp": lambda: _timestamps(header.field(rec.POS_BORNTIMESTAMP, 8)),
        "bornHost": lambda: _hosts(header, rec.POS_BORNHOST),
        "storeHost": lambda: _hosts(header, 64),
        "sysFlag": lambda: pa.array(sys_flag.astype(np.int32)),
        "flag": lambda: pa.array(header.field(rec.POS_FLAG, 4).astype(np.int32)),
        "reconsumeTimes": lambda: pa.array(header.field(72, 4).astype(np.int32)),
        "bodyCRC": lambda: pa.array(header.field(rec.POS_BODYCRC, 4).astype(np.int32)),
        "properties": lambda: named["properties"],
        "headers": lambda: named["headers"],
    }
    return pa.RecordBatch.from_arrays(
        [makers[name]() for name in wanted], schema=arrow_schema(wanted)
    )
