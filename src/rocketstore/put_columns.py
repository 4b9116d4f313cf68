"""Columnar puts (``MessageStore.put_columns``): many messages of one topic given as
columns, checked, encoded and appended without a Message object per row.

Layer: engine paths, above put_path (whose checks it reuses) and below the store, which
wires it. A row means exactly the Message that :meth:`Columns.message` makes of it: the
pure-Python path prepares those Messages with ``MessagePreparer.prepare`` (the same
refusal rules as ``put_batch``), and the C encoder (``_native.encode_columns``) writes
the same bytes for the rows it takes, handing any other back. Building a Message per row
cost four times the put of a 100-byte message (issue #32: 0.28 s against 0.07 s for
200,000), which is what this path is for.

Rows go in as consecutive batches (``chunk_limits``); each is what ``put_batch`` of its
rows writes. A batch is appended once its rows and the row after it are checked, so a
refusal or a failed append stops the call with the batches before it stored (the result
says how many rows). The C encoder writes a batch straight into the CommitLog's mapped
file under the put lock (``CommitLog.append_in_place``), stamped as it goes and every
TOTALSIZE last; where the file is written with pwrite (SYNC_FLUSH) or rows carry their
own properties, it fills a buffer reused from batch to batch that ``append_encoded``
copies in. Per-row results go straight into preallocated arrays: no numpy operation on
them, each of which let the dispatcher take the GIL for a switch interval.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from rocketstore.commitlog import (
    Appended,
    AppendedBatch,
    CommitLog,
    EncodedBatch,
    InPlaceBatch,
    InPlaceTarget,
    PreparedMessage,
    RowOutputs,
)
from rocketstore.errors import ConfigError, StoreError
from rocketstore.format import native
from rocketstore.format import properties as props
from rocketstore.format.message import BODY_TYPES, Message
from rocketstore.format.message_id import joined_offset_msg_ids, offset_msg_id_from_bytes
from rocketstore.format.record import END_FILE_MIN_BLANK_LENGTH
from rocketstore.java_ints import JAVA_INT_MAX, JAVA_INT_MIN, JAVA_LONG_MAX, JAVA_LONG_MIN
from rocketstore.put_path import MessagePreparer, PutResult, Refusal
from rocketstore.status import AppendStatus, PutStatus

DEFAULT_BORN_HOST = "127.0.0.1:50000"  # Message's default
_NATIVE_MAX_COLUMNS = 16  # property columns the C encoder takes (MAX_COLUMNS)
_TRANSACTION_BITS = 0xC  # sysflag's transaction type
_NO_INTS: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
_NO_SIZES: npt.NDArray[np.int32] = np.zeros(0, dtype=np.int32)
# The C encoder's buffers, reused by later batches and calls (memory already faulted in:
# see _native.encode_columns); at most this many of at most this size are kept.
_KEEP_BUFFERS = 2
_KEEP_BUFFER_BYTES = 32 * 1024 * 1024
_buffers: list[bytearray] = []

# A column: one value for every row, or a sequence with one value per row.
TextColumn = str | Sequence[str | None] | None
IntColumn = int | Sequence[int]


@dataclass(frozen=True, slots=True)
class ColumnsResult:
    """What ``put_columns`` stored. Rows ``0 .. stored - 1`` are in the CommitLog, row
    ``i`` at ``commit_log_offsets[i]`` with queue offset ``queue_offsets[i]`` (all rows
    when ``ok``; none when a check refused the call, ``refused_row`` then naming the row).
    ``status`` is PUT_OK, the refusal, or what failed (an I/O error between two batches,
    a SYNC_FLUSH sync that did not complete: then the rows are stored but not known to be
    durable, as ``put_batch``'s results say with the same status)."""

    status: PutStatus
    commit_log_offsets: npt.NDArray[np.int64] = field(default_factory=lambda: _NO_INTS)
    queue_offsets: npt.NDArray[np.int64] = field(default_factory=lambda: _NO_INTS)
    sizes: npt.NDArray[np.int32] = field(default_factory=lambda: _NO_SIZES)
    store_timestamps: npt.NDArray[np.int64] = field(default_factory=lambda: _NO_INTS)
    store_host: bytes = b""  # encoded (8 or 20 bytes): the first half of each offsetMsgId
    reason: str = ""
    refused_row: int | None = None
    ok: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "ok", self.status is PutStatus.PUT_OK)

    @property
    def stored(self) -> int:
        """How many rows (from the first) are in the CommitLog."""
        return len(self.commit_log_offsets)

    def __len__(self) -> int:
        return self.stored

    def msg_id(self, row: int) -> str:
        """Row ``row``'s offsetMsgId (what ``view_message`` takes)."""
        return offset_msg_id_from_bytes(self.store_host, int(self.commit_log_offsets[row]))

    def msg_ids(self) -> list[str]:
        return [offset_msg_id_from_bytes(self.store_host, int(o)) for o in self.commit_log_offsets]

    def joined_msg_ids(self) -> str:
        """Every stored row's offsetMsgId, joined by "," (a batch send's msgId answer)."""
        if native.offset_msg_ids is not None and len(self.store_host) in (8, 20):
            return native.offset_msg_ids(self.store_host, self.commit_log_offsets)
        return joined_offset_msg_ids(self.store_host, self.commit_log_offsets)

    def result(self, row: int) -> PutResult:
        """Row ``row`` as ``put_batch`` would have answered it."""
        return PutResult(
            self.status,
            commit_log_offset=int(self.commit_log_offsets[row]),
            queue_offset=int(self.queue_offsets[row]),
            msg_id=self.msg_id(row),
            store_timestamp=int(self.store_timestamps[row]),
            size=int(self.sizes[row]),
            reason=self.reason,
        )


def _text_column(name: str, value: object, rows: int) -> str | list[object] | None:
    """A text column as one str for every row, a list of one value per row, or None."""
    if value is None or isinstance(value, str):
        return value
    return _rows_of(name, value, rows)


def _rows_of(name: str, value: object, rows: int) -> list[object]:
    """``value`` as a list of ``rows`` values, or ConfigError naming the column."""
    if isinstance(value, np.ndarray):
        value = value.tolist()  # numpy ints are no Python ints to the checks
    if isinstance(value, (*BODY_TYPES, str, Mapping)) or not isinstance(value, Sequence):
        raise ConfigError(
            f"{name} must be a sequence with one value per row, got {type(value).__name__}"
        )
    if len(value) != rows:
        raise ConfigError(f"{name} has {len(value)} rows, bodies has {rows}")
    return value if isinstance(value, list) else list(value)


@dataclass(frozen=True, slots=True)
class Columns:
    """``put_columns``'s arguments, with every column's shape checked."""

    topic: object
    bodies: list[object]
    queue_ids: int | list[object]
    # Property columns in the order they go into a row's properties: KEYS, TAGS, then
    # property_columns'; each a str for every row or a list with a value per row.
    names: tuple[object, ...]
    values: tuple[str | list[object], ...]
    labels: tuple[str, ...]  # the argument each came from, for refusals
    rows: list[object] | None  # each row's own properties (a mapping or None), first
    born_timestamp: object
    born_host: object
    flags: object = 0  # an int for every row, or a list with one per row
    sys_flag: object = 0
    reconsume_times: object = 0
    # Each row's stored properties string, as it is (VerbatimProperties), instead of the
    # property arguments: a broker's SEND_BATCH_MESSAGE entries.
    texts: list[object] | None = None

    @classmethod
    def of(
        cls,
        topic: object,
        bodies: object,
        *,
        queue_ids: object = 0,
        keys: object = None,
        tags: object = None,
        properties: object = None,
        property_columns: object = None,
        born_timestamp: object = None,
        born_host: object = DEFAULT_BORN_HOST,
        flags: object = 0,
        sys_flag: object = 0,
        reconsume_times: object = 0,
        property_texts: object = None,
    ) -> Columns:
        """ConfigError for a column that is no column (not a sequence, or not one value per
        body), or ``property_texts`` beside another property argument; what is wrong
        within a row is the put checks' to refuse."""
        if (
            isinstance(bodies, np.ndarray)
            or not isinstance(bodies, Sequence)
            or isinstance(bodies, (*BODY_TYPES, str))
        ):
            raise ConfigError(f"bodies must be a sequence of bytes, got {type(bodies).__name__}")
        rows = len(bodies)
        body_list = bodies if isinstance(bodies, list) else list(bodies)
        queues: int | list[object]
        if isinstance(queue_ids, int) and not isinstance(queue_ids, bool):
            queues = queue_ids
        else:
            queues = _rows_of("queue_ids", queue_ids, rows)
        if property_columns is None:
            property_columns = {}
        if not isinstance(property_columns, Mapping):
            raise ConfigError(
                "property_columns must be a mapping of property name to column, got "
                f"{type(property_columns).__name__}"
            )
        named: list[tuple[object, str | list[object], str]] = []
        given = [
            (props.KEYS, keys, "keys"),
            (props.TAGS, tags, "tags"),
            *(
                (name, value, f"property_columns[{name!r}]")
                for name, value in property_columns.items()
            ),
        ]
        for name, value, label in given:
            column = _text_column(label, value, rows)
            if column is not None:
                named.append((name, column, label))
        per_row = None if properties is None else _rows_of("properties", properties, rows)
        texts = None
        if property_texts is not None:
            if named or per_row is not None:
                raise ConfigError(
                    "property_texts are each row's whole properties string: no keys, tags, "
                    "properties or property_columns beside them"
                )
            texts = _rows_of("property_texts", property_texts, rows)
        flag_column = flags
        if not (isinstance(flags, int) and not isinstance(flags, bool)):
            flag_column = _rows_of("flags", flags, rows)
        return cls(
            topic=topic,
            bodies=body_list,
            queue_ids=queues,
            names=tuple(name for name, _, _ in named),
            values=tuple(column for _, column, _ in named),
            labels=tuple(label for _, _, label in named),
            rows=per_row,
            born_timestamp=born_timestamp,
            born_host=born_host,
            flags=flag_column,
            sys_flag=sys_flag,
            reconsume_times=reconsume_times,
            texts=texts,
        )

    def __len__(self) -> int:
        return len(self.bodies)

    def message(self, row: int) -> Message:
        """Row ``row`` as a Message: its own properties (in their order), then KEYS, TAGS
        and the property columns (a name already there keeps its place and takes the
        column's value; a None value leaves the name out)."""
        own = None if self.rows is None else self.rows[row]
        properties: object
        if self.texts is not None:
            text = self.texts[row]
            # (a text that is no str is refused by prepare, naming its type)
            properties = props.VerbatimProperties(text) if isinstance(text, str) else text
        elif own is None:
            properties = {}
        elif isinstance(own, Mapping):
            properties = dict(own)
        else:
            properties = own  # refused by prepare, naming its type
        if isinstance(properties, dict):
            for name, column in zip(self.names, self.values, strict=True):
                value = column if isinstance(column, str) else column[row]
                if value is not None:
                    properties[name] = value
        queue_id = self.queue_ids if isinstance(self.queue_ids, int) else self.queue_ids[row]
        # Values of any type: prepare refuses a row whose fields a record cannot take.
        fields: dict[str, Any] = {
            "topic": self.topic,
            "body": self.bodies[row],
            "queue_id": queue_id,
            "properties": properties,
            "born_timestamp": self.born_timestamp,
            "born_host": self.born_host,
            "flag": self.flags[row] if isinstance(self.flags, list) else self.flags,
            "sys_flag": self.sys_flag,
            "reconsume_times": self.reconsume_times,
        }
        return Message(**fields)

    def blame(self, preparer: MessagePreparer, row: int) -> str:
        """The argument that makes row ``row`` refused on its own: the first whose value,
        in an otherwise plain message, prepare refuses; "" when only their sum is (a
        record too large, properties too long together)."""
        topic = self.topic if preparer.topic_bytes(self.topic) is not None else "T"
        full = self.message(row)
        alone = [
            ("topic", _plain(self.topic)),
            ("bodies", _plain(topic, body=full.body)),
            ("queue_ids", _plain(topic, queue_id=full.queue_id)),
            ("born_timestamp", _plain(topic, born_timestamp=full.born_timestamp)),
            ("born_host", _plain(topic, born_host=full.born_host)),
            ("flags", _plain(topic, flag=full.flag)),
            ("sys_flag", _plain(topic, sys_flag=full.sys_flag)),
            ("reconsume_times", _plain(topic, reconsume_times=full.reconsume_times)),
        ]
        if self.texts is not None:
            alone.append(("property_texts", _plain(topic, properties=full.properties)))
        own = None if self.rows is None else self.rows[row]
        if own is not None:
            mapping = dict(own) if isinstance(own, Mapping) else own
            alone.append(("properties", _plain(topic, properties=mapping)))
        for name, column, label in zip(self.names, self.values, self.labels, strict=True):
            value = column if isinstance(column, str) else column[row]
            if value is not None:
                alone.append((label, _plain(topic, properties={name: value})))
        for label, message in alone:
            if isinstance(preparer.prepare(message, None, in_batch=True), Refusal):
                return label
        return ""


def _plain(topic: object, **fields: object) -> Message:
    """A message with only ``fields`` set (and an empty body), for ``Columns.blame``."""
    values: dict[str, Any] = {"topic": topic, "body": b"", **fields}
    return Message(**values)


def chunk_limits(preparer: MessagePreparer) -> tuple[int, int]:
    """(bodies, record bytes) a batch of put_columns may take: ``put_batch``'s limits
    (max_message_size of bodies; records that fit in one file), the records held to half a
    file so that a batch that does not fit the rest of one leaves at most that blank."""
    config = preparer.config
    return config.max_message_size, config.mapped_file_size_commit_log // 2


def _cuts_before(
    bodies: int, records: int, body: int, length: int, limits: tuple[int, int]
) -> bool:
    """Whether a batch holding ``bodies`` and ``records`` bytes ends before a row of
    ``body`` and ``length`` bytes (the C encoder cuts by the same rule)."""
    return bodies + body > limits[0] or records + length + END_FILE_MIN_BLANK_LENGTH > limits[1]


@dataclass(frozen=True, slots=True)
class _NativeArgs:
    """What the C encoder takes besides the columns, checked once per call."""

    topic: str
    topic_bytes: bytes
    born_host: bytes
    store_host: bytes
    born_ms: int


def _native_args(
    preparer: MessagePreparer, columns: Columns, store_host: str | None
) -> _NativeArgs | None:
    """The C encoder's arguments, or None for the Python path: no extension, or columns
    that are not the common case (whose checks are then the Python path's)."""
    topic, born, names = columns.topic, columns.born_timestamp, columns.names
    if (
        native.encode_columns is None
        or native.append_encoded is None  # (it stamps what the encoder wrote)
        or not isinstance(topic, str)
        or len(names) > _NATIVE_MAX_COLUMNS
    ):
        return None
    topic_bytes = preparer.topic_bytes(topic)
    if topic_bytes is None:
        return None
    if born is not None and (type(born) is not int or not JAVA_LONG_MIN <= born <= JAVA_LONG_MAX):
        return None
    # The batch fields as the C encoder takes them (an int32 each; a transactional sys
    # flag, which a batch refuses, is Python's).
    if not all(
        type(value) is int and JAVA_INT_MIN <= value <= JAVA_INT_MAX
        for value in (columns.sys_flag, columns.reconsume_times)
    ) or (isinstance(columns.sys_flag, int) and columns.sys_flag & _TRANSACTION_BITS):
        return None
    if type(columns.flags) is not list and not (
        type(columns.flags) is int and JAVA_INT_MIN <= columns.flags <= JAVA_INT_MAX
    ):
        return None
    # The C loop writes names as given: each must be one a record keeps, not DELAY (a
    # batch refuses a delayed message), and not set twice (the later keeps the place of
    # the first).
    if len(set(names)) != len(names) or any(
        not isinstance(name, str) or name == props.DELAY or props.property_problem({name: "x"})
        for name in names
    ):
        return None
    try:
        born_host = preparer.host_bytes(columns.born_host)
        stored_by = preparer.host_bytes(store_host or preparer.config.store_host)
    except ConfigError:  # (prepare words a bad host)
        return None
    born_ms = preparer.now_ms() if born is None else born
    return _NativeArgs(topic, topic_bytes, born_host, stored_by, born_ms)


def _batch_fields(columns: Columns) -> tuple[Any, int, int, list[Any] | None]:
    """encode_columns' last arguments: flags, sys flag, reconsume times, texts (checked
    by ``_native_args``)."""
    assert isinstance(columns.sys_flag, int) and isinstance(columns.reconsume_times, int)
    return columns.flags, columns.sys_flag, columns.reconsume_times, columns.texts


def _take_buffer() -> bytearray:
    try:
        return _buffers.pop()  # (pop, not a test first: another thread may take it)
    except IndexError:
        return bytearray()


def _give_back(buffer: bytearray) -> None:
    if len(_buffers) < _KEEP_BUFFERS and len(buffer) <= _KEEP_BUFFER_BYTES:
        _buffers.append(buffer)


def _encoded_batch(
    preparer: MessagePreparer, columns: Columns, args: _NativeArgs, start: int, out: bytearray
) -> tuple[EncodedBatch, int] | None:
    """The batch of rows from ``start`` encoded by the C extension into ``out`` (the
    batch's blob is a view of it, to release before ``out`` is used again), and where it
    ends; None when some row of it is not the common case."""
    assert native.encode_columns is not None
    config = preparer.config
    chunk_body, chunk_records = chunk_limits(preparer)
    encoded = native.encode_columns(
        args.topic,
        args.topic_bytes,
        columns.bodies,
        columns.queue_ids,
        columns.names,
        columns.values,
        columns.rows,
        args.born_host,
        args.store_host,
        args.born_ms,
        preparer.queue_keys,
        config.max_message_size,
        preparer.max_record,
        config.mapped_file_size_commit_log,
        chunk_body,
        chunk_records,
        start,
        out,
        0,
        -1,  # (no room: out grows)
        None,
        *_batch_fields(columns),
    )
    if not isinstance(encoded, tuple):
        return None
    length, meta, keys, body_bytes, end = encoded
    blob = memoryview(out)[:length]
    return EncodedBatch(blob, meta, keys, body_bytes, args.store_host), end


@dataclass(slots=True)
class _InPlace:
    """``append_in_place``'s encoder for the batch of rows from ``start``, their values
    going into ``done``'s arrays; ``end`` is where the batch it appended ends."""

    preparer: MessagePreparer
    columns: Columns
    args: _NativeArgs
    done: Appends
    start: int
    end: int = 0

    def __call__(self, target: InPlaceTarget) -> InPlaceBatch | bool | None:
        assert native.encode_columns is not None
        preparer, columns, args, done = self.preparer, self.columns, self.args, self.done
        chunk_body, chunk_records = chunk_limits(preparer)
        stamp = (
            target.queue_table,
            target.physical_start,
            target.timestamp,
            done.offsets,
            done.queue_offsets,
            done.sizes,
            done.stamps,
            done.stored,
        )
        encoded = native.encode_columns(
            args.topic,
            args.topic_bytes,
            columns.bodies,
            columns.queue_ids,
            columns.names,
            columns.values,
            None,  # (rows' own properties go through a buffer)
            args.born_host,
            args.store_host,
            args.born_ms,
            preparer.queue_keys,
            preparer.config.max_message_size,
            preparer.max_record,
            preparer.config.mapped_file_size_commit_log,
            chunk_body,
            chunk_records,
            self.start,
            target.mapping,
            target.position,
            target.room,
            stamp,
            *_batch_fields(columns),
        )
        if encoded is None or isinstance(encoded, bool):
            return encoded
        length, _meta, _keys, _body_bytes, self.end = encoded
        return InPlaceBatch(length, self.end - self.start)


def _prepared_batch(
    preparer: MessagePreparer, columns: Columns, store_host: str | None, start: int
) -> tuple[list[PreparedMessage], int] | tuple[Refusal, int]:
    """The batch of rows from ``start`` prepared one by one, and where it ends; or the
    refusal of a row (its reason naming the row and the argument) and the row."""
    limits = chunk_limits(preparer)
    prepared: list[PreparedMessage] = []
    bodies = records = 0
    for row in range(start, len(columns)):
        message = columns.message(row)
        item = preparer.prepare(message, store_host, in_batch=True)
        if isinstance(item, Refusal):
            blamed = columns.blame(preparer, row)
            where = f"row {row} ({blamed})" if blamed else f"row {row}"
            return Refusal(item.status, f"{where}: {item.reason}"), row
        body = len(message.body)  # (as put_batch counts a batch's bodies)
        if row > start and _cuts_before(bodies, records, body, item.length, limits):
            return prepared, row
        prepared.append(item)
        bodies += body
        records += item.length
    return prepared, len(columns)


class Appends:
    """What the batches of a put_columns did: per-row arrays, filled for the rows
    appended (``stored`` of them, from the first), and what stopped the rest (None:
    nothing did). The C append writes its rows' values into the arrays itself."""

    def __init__(self, rows: int):
        self.offsets: npt.NDArray[np.int64] = np.empty(rows, dtype=np.int64)
        self.queue_offsets: npt.NDArray[np.int64] = np.empty(rows, dtype=np.int64)
        self.sizes: npt.NDArray[np.int32] = np.empty(rows, dtype=np.int32)
        self.stamps: npt.NDArray[np.int64] = np.empty(rows, dtype=np.int64)
        self.failure: Refusal | None = None
        self.refused_row: int | None = None
        self.end_offset: int | None = None  # the CommitLog end to make durable (None: none)
        self.stored = 0

    def outputs(self) -> RowOutputs:
        """Where the next encoded batch's values go."""
        return RowOutputs(self.offsets, self.queue_offsets, self.sizes, self.stamps, self.stored)

    def add_rows(self, rows: int, appended: AppendedBatch) -> None:
        """A batch of ``rows`` appended by C with ``outputs()``: its values are in."""
        self.stored += rows
        self.end_offset = appended.end_offset

    def add_appended(self, items: Sequence[Appended]) -> None:
        good = [a for a in items if a.status is AppendStatus.PUT_OK]
        at = slice(self.stored, self.stored + len(good))
        self.offsets[at] = [a.commit_log_offset for a in good]
        self.queue_offsets[at] = [a.queue_offset for a in good]
        self.sizes[at] = [a.size for a in good]
        self.stamps[at] = [a.store_timestamp for a in good]
        self.stored += len(good)
        if good:
            self.end_offset = good[-1].commit_log_offset + good[-1].size

    def stop(self, failure: Refusal, *, refused_row: int | None = None) -> None:
        """The call stops at ``failure``; its reason says what was stored before."""
        before = f" (rows 0..{self.stored - 1} were stored)" if self.stored else ""
        self.failure = Refusal(failure.status, failure.reason + before)
        self.refused_row = refused_row

    def result(self, status: PutStatus, store_host: bytes) -> ColumnsResult:
        """The ColumnsResult: ``status`` (PUT_OK, or the sync's) unless something stopped
        the call."""
        reason = ""
        if self.failure is not None:
            status, reason = self.failure.status, self.failure.reason
        if not self.stored:
            return ColumnsResult(
                status, store_host=store_host, reason=reason, refused_row=self.refused_row
            )
        stored = self.stored
        return ColumnsResult(
            status,
            self.offsets[:stored],
            self.queue_offsets[:stored],
            self.sizes[:stored],
            self.stamps[:stored],
            store_host=store_host,
            reason=reason,
            refused_row=self.refused_row,
        )


def put_rows(
    preparer: MessagePreparer,
    commitlog: CommitLog,
    columns: Columns,
    store_host: str | None,
    store_timestamp: int | None,
    *,
    native_ok: bool = True,
) -> Appends:
    """Check, encode and append the rows, a batch at a time: the C encoder's when it takes
    the batch (and ``native_ok``), else prepared one by one, whose checks define the
    outcome. A batch is appended once its rows and the row after it are checked; a
    refusal or a failed append stops the call, the batches before it staying stored."""
    done = Appends(len(columns))
    args = _native_args(preparer, columns, store_host) if native_ok else None
    if args is None:
        _put_prepared(preparer, commitlog, columns, store_host, store_timestamp, 0, done)
        return done
    if columns.rows is None and not commitlog.write_through:
        _put_in_place(preparer, commitlog, columns, args, store_host, store_timestamp, done)
        return done
    out = _take_buffer()
    try:
        start = 0
        while start < len(columns) and done.failure is None:
            encoded = _encoded_batch(preparer, columns, args, start, out)
            if encoded is None:  # (rows the C encoder leaves to Python: one batch of them)
                start = _put_prepared(
                    preparer, commitlog, columns, store_host, store_timestamp, start, done, 1
                )
                continue
            batch, end = encoded
            view = batch.blob
            try:
                appended = commitlog.append_encoded(batch, store_timestamp, done.outputs())
            except (OSError, StoreError) as e:
                done.stop(Refusal(PutStatus.CREATE_MAPEDFILE_FAILED, str(e)))
                break
            finally:
                if isinstance(view, memoryview):  # (so that out may grow again)
                    view.release()
            if appended is None:  # (the batch limits rule this out)
                done.stop(Refusal(PutStatus.UNKNOWN_ERROR, "a batch did not fit a file"))
                break
            done.add_rows(len(batch), appended)
            start = end
    finally:
        _give_back(out)
    return done


def _put_in_place(
    preparer: MessagePreparer,
    commitlog: CommitLog,
    columns: Columns,
    args: _NativeArgs,
    store_host: str | None,
    store_timestamp: int | None,
    done: Appends,
) -> None:
    """``put_rows`` with the C encoder writing each batch straight into the CommitLog's
    mapped file (``CommitLog.append_in_place``): no blob to fill and copy."""
    start = 0
    while start < len(columns) and done.failure is None:
        encode = _InPlace(preparer, columns, args, done, start)
        try:
            appended = commitlog.append_in_place(encode, store_timestamp)
        except (OSError, StoreError) as e:
            done.stop(Refusal(PutStatus.CREATE_MAPEDFILE_FAILED, str(e)))
            break
        if appended is None:  # (rows the C encoder leaves to Python: one batch of them)
            start = _put_prepared(
                preparer, commitlog, columns, store_host, store_timestamp, start, done, 1
            )
            continue
        done.add_rows(encode.end - start, appended)
        start = encode.end


def _put_prepared(
    preparer: MessagePreparer,
    commitlog: CommitLog,
    columns: Columns,
    store_host: str | None,
    store_timestamp: int | None,
    start: int,
    done: Appends,
    batches: int | None = None,
) -> int:
    """``put_rows``' Python path: the rows from ``start`` prepared one by one and appended
    a batch at a time (at most ``batches`` of them; None: to the end); return where it
    stopped."""
    while start < len(columns) and done.failure is None and batches != 0:
        if batches is not None:
            batches -= 1
        try:
            prepared, end = _prepared_batch(preparer, columns, store_host, start)
            if isinstance(prepared, Refusal):
                done.stop(prepared, refused_row=end)
                break
            items = commitlog.append(prepared, store_timestamp)
        except (OSError, StoreError) as e:
            done.stop(Refusal(PutStatus.CREATE_MAPEDFILE_FAILED, str(e)))
            break
        done.add_appended(items)
        if any(a.status is not AppendStatus.PUT_OK for a in items):  # (not seen: an
            done.stop(Refusal(PutStatus.UNKNOWN_ERROR, "an append failed"))  # append raises)
            break
        start = end
    return start


@dataclass(frozen=True, slots=True)
class RowsCheck:
    """What ``check_rows`` found: the record length of every row, or the first row
    refused (``refused_row``) and why, as ``put_columns`` words it."""

    lengths: npt.NDArray[np.int64]
    refusal: Refusal | None = None
    refused_row: int | None = None


def check_rows(
    preparer: MessagePreparer, columns: Columns, store_host: str | None = None
) -> RowsCheck:
    """Check and encode every row as ``put_rows`` would, appending nothing: what a caller
    that must refuse all rows or none checks first (the Spark sink's commit), and the
    record lengths it plans file rolls with. The C encoder's batches go into a scratch
    buffer (rows it hands back are prepared one by one)."""
    lengths = np.empty(len(columns), dtype=np.int64)
    args = _native_args(preparer, columns, store_host)
    out = _take_buffer()
    try:
        start = 0
        while start < len(columns):
            encoded = None if args is None else _encoded_batch(preparer, columns, args, start, out)
            if encoded is None:
                prepared, end = _prepared_batch(preparer, columns, store_host, start)
                if isinstance(prepared, Refusal):
                    return RowsCheck(lengths[:start], prepared, end)
                lengths[start:end] = [item.length for item in prepared]
            else:
                batch, end = encoded
                if isinstance(batch.blob, memoryview):  # (so that out may grow again)
                    batch.blob.release()
                lengths[start:end] = np.frombuffer(batch.meta, dtype=np.int32)[0::2]
            start = end
    finally:
        _give_back(out)
    return RowsCheck(lengths)


__all__ = [
    "DEFAULT_BORN_HOST",
    "Columns",
    "ColumnsResult",
    "IntColumn",
    "RowsCheck",
    "TextColumn",
    "check_rows",
    "put_rows",
]
