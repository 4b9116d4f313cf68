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

from collections.abc import Sequence
from dataclasses import dataclass
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
from rocketstore.format.record import END_FILE_MIN_BLANK_LENGTH
from rocketstore.java_ints import JAVA_INT_MAX, JAVA_INT_MIN, JAVA_LONG_MAX, JAVA_LONG_MIN
from rocketstore.put_columns_rows import (
    DEFAULT_BORN_HOST,
    Columns,
    ColumnsResult,
    IntColumn,
    TextColumn,
)
from rocketstore.put_path import MessagePreparer, Refusal
from rocketstore.status import AppendStatus, PutStatus

_NATIVE_MAX_COLUMNS = 16  # property columns the C encoder takes (MAX_COLUMNS)
_TRANSACTION_BITS = 0xC  # sysflag's transaction type
# The C encoder's buffers, reused by later batches and calls (memory already faulted in:
# see _native.encode_columns); at most this many of at most this size are kept.
_KEEP_BUFFERS = 2
_KEEP_BUFFER_BYTES = 32 * 1024 * 1024
_buffers: list[bytearray] = []


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
