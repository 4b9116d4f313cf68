"""Decoding the records of one CommitLog range in bulk: record starts, header fields and
validation as numpy arrays.

Layer: format. Pure functions over a buffer holding one whole CommitLog file (an mmap);
no files are opened here. Record starts are a chain (each TOTALSIZE leads to the next), so
they are walked one header at a time; everything else (the fixed header fields, the body,
topic and properties lengths, the checks of :func:`rocketstore.format.record.read_record`,
the self-located PHYSICALOFFSET and the file tail rule of recovery) is computed for a whole
run of records at once. Records with IPv6 hosts or the v2 magic, which are rare, go through
``read_record`` one by one.

A range's first record is found without walking the file from position 0: a record
stores its own CommitLog offset at +28, so the first position >= start that holds a record
magic, its own offset and a valid record is a record start. The driver checks that the
ranges join up (each range's walk must end where the next range's first record is).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, cast

import numpy as np
import numpy.typing as npt

from rocketstore.errors import CorruptDataError, IncompleteDataError
from rocketstore.format import native, sysflag
from rocketstore.format import record as rec
from rocketstore.format.properties_scan import prefix_hashes
from rocketstore.format.queue_unit import encode_units

_HEAD8 = struct.Struct(">ii")  # TOTALSIZE, MAGICCODE
_PHYSICAL = struct.Struct(">q")
_V1 = struct.pack(">i", rec.MESSAGE_MAGIC_V1)
_V2 = struct.pack(">i", rec.MESSAGE_MAGIC_V2)
_BLANK = struct.pack(">i", rec.BLANK_MAGIC)
_MAGICS = (rec.MESSAGE_MAGIC_V1, rec.MESSAGE_MAGIC_V2)
_V6_HOSTS = sysflag.BORNHOST_V6_FLAG | sysflag.STOREHOSTADDRESS_V6_FLAG

# The fixed part of a v1 record with IPv4 hosts, up to and including BODYLEN (88 bytes).
HEADER_DTYPE = np.dtype(
    [
        ("total", ">i4"),
        ("magic", ">i4"),
        ("body_crc", ">i4"),
        ("queue_id", ">i4"),
        ("flag", ">i4"),
        ("queue_offset", ">i8"),
        ("physical_offset", ">i8"),
        ("sys_flag", ">i4"),
        ("born_timestamp", ">i8"),
        ("born_host", "V8"),
        ("store_timestamp", ">i8"),
        ("store_host", "V8"),
        ("reconsume_times", ">i4"),
        ("prepared_offset", ">i8"),
        ("body_length", ">i4"),
    ]
)
_HEADER_SIZE = HEADER_DTYPE.itemsize
# Records decoded per numpy gather: small enough that a chunk's index matrix and
# temporaries stay in the CPU cache (a 512 MiB range of 1 KiB records scans about 15%
# faster in chunks of 8192 than of 32768; 4096 is no faster).
GATHER_RECORDS = 8192


_EMPTY_HEADERS = np.zeros(0, dtype=HEADER_DTYPE)


def _headers_at(raw: npt.NDArray[np.uint8], positions: npt.NDArray[np.int64]) -> npt.NDArray[Any]:
    """The fixed headers at ``positions`` (each with 88 bytes in ``raw``), copied out.

    ``raw`` is seen as overlapping headers, one starting at every byte (a stride of 1), so
    a fancy index copies just the 88 bytes of each record: ten times faster than gathering
    through a (records x 88) matrix of byte indices."""
    if len(raw) < _HEADER_SIZE:
        return np.zeros(len(positions), dtype=HEADER_DTYPE)
    every_byte = np.ndarray(
        shape=(len(raw) - _HEADER_SIZE + 1,),
        dtype=HEADER_DTYPE,
        buffer=raw,
        strides=(1,),
    )
    return every_byte[positions]


class TopicTable:
    """Topic names of a range, interned: records carry an id, the table the names."""

    def __init__(self) -> None:
        self.ids: dict[bytes, int] = {}
        self.names: list[str] = []
        self._prefixes: list[int] = []

    def prefix_hashes(self) -> npt.NDArray[np.uint64]:
        """Java hash of ``topic + "#"`` per topic id (mod 2**32), the start of every index
        key; extended as topics arrive, since the dispatcher's table lives as long as it."""
        new = self.names[len(self._prefixes) :]
        if new:
            self._prefixes.extend(prefix_hashes(new).tolist())
        return np.array(self._prefixes, dtype=np.uint64)

    def intern(self, topic_bytes: bytes) -> int:
        """The topic's id; -1 when the bytes are not UTF-8 (a corrupt record)."""
        found = self.ids.get(topic_bytes)
        if found is None:
            try:
                name = topic_bytes.decode("utf-8")
            except UnicodeDecodeError:
                return -1
            found = self.ids[topic_bytes] = len(self.names)
            self.names.append(name)
        return found

    def intern_many(
        self,
        raw: npt.NDArray[np.uint8],
        position: npt.NDArray[np.int64],
        length: npt.NDArray[np.int64],
        ok: npt.NDArray[np.bool_],
    ) -> npt.NDArray[np.int64]:
        """Ids of the topics at ``position`` (records with ``ok``); -1 for the others and
        for undecodable topics. Distinct topics are found with numpy, per topic length."""
        ids = np.full(len(position), -1, dtype=np.int64)
        for size in np.unique(length[ok]).tolist():
            rows = np.nonzero(ok & (length == size))[0]
            if size == 0:
                ids[rows] = self.intern(b"")  # "" is always valid UTF-8
                continue
            matrix = raw[position[rows][:, None] + np.arange(size, dtype=np.int64)]
            keys = np.ascontiguousarray(matrix).view(f"V{size}").reshape(len(rows))
            distinct, inverse = np.unique(keys, return_inverse=True)
            table = np.array(
                [self.intern(bytes(d)) for d in distinct],
                dtype=np.int64,
            )
            ids[rows] = table[inverse.reshape(-1)]
        return ids


class Stop:
    """Why a range's walk ended."""

    BOUNDARY = "boundary"  # the next record starts at or past the range end
    BLANK = "blank"  # an END_OF_FILE blank: the rest of the file is unused
    END_OF_DATA = "end-of-data"  # zero bytes where a record would start
    CORRUPT = "corrupt"  # invalid bytes, and no valid record after them in the range
    # A record the buffer holds only the start of, within its file: a write in progress
    # (format.commitlog_walk, for a caller reading less than the whole file).
    INCOMPLETE = "incomplete"


@dataclass
class Records:
    """Valid records of a run, as arrays (positions are within the file)."""

    position: npt.NDArray[np.int64]
    size: npt.NDArray[np.int64]
    queue_id: npt.NDArray[np.int64]
    queue_offset: npt.NDArray[np.int64]
    sys_flag: npt.NDArray[np.int64]
    store_timestamp: npt.NDArray[np.int64]
    topic_position: npt.NDArray[np.int64]
    topic_length: npt.NDArray[np.int64]
    properties_position: npt.NDArray[np.int64]
    properties_length: npt.NDArray[np.int64]
    topic_id: npt.NDArray[np.int64]  # index into the scan's TopicTable
    # The body, for recovery's CRC check (the stored CRC as the record holds it).
    body_position: npt.NDArray[np.int64]
    body_length: npt.NDArray[np.int64]
    body_crc: npt.NDArray[np.int64]

    def __len__(self) -> int:
        return len(self.position)

    @staticmethod
    def concat(parts: list[Records]) -> Records:
        if not parts:
            empty = np.zeros(0, dtype=np.int64)
            return Records(*([empty] * len(Records.__dataclass_fields__)))
        if len(parts) == 1:
            return parts[0]
        names = [f for f in Records.__dataclass_fields__]
        return Records(*(np.concatenate([getattr(p, n) for p in parts]) for n in names))

    def take(self, count: int) -> Records:
        return self.slice(0, count)

    def slice(self, start: int, stop: int) -> Records:
        names = [f for f in Records.__dataclass_fields__]
        return Records(*(getattr(self, n)[start:stop] for n in names))

    def commit_log_offsets(self, base: int) -> npt.NDArray[np.int64]:
        """Each record's CommitLog offset, ``base`` being that of buffer position 0."""
        return base + self.position


def queue_groups(
    records: Records, topics: TopicTable
) -> list[tuple[npt.NDArray[np.int64], str, int]]:
    """The records that get a consume-queue unit (NOT and COMMIT, not PREPARED or
    ROLLBACK), grouped by queue: (row numbers in CommitLog order, topic, queue id) per
    queue, queues ordered by (topic id, queue id)."""
    return [
        (rows, topics.names[topic_id], queue_id) for rows, topic_id, queue_id in _groups(records)
    ]


def _groups(records: Records) -> list[tuple[npt.NDArray[np.int64], int, int]]:
    """``queue_groups`` as (rows, topic id, queue id)."""
    kind = records.sys_flag & sysflag.TRANSACTION_MASK
    queued = (kind == sysflag.TRANSACTION_NOT_TYPE) | (kind == sysflag.TRANSACTION_COMMIT_TYPE)
    rows = np.flatnonzero(queued)
    if not len(rows):
        return []
    group_key = records.topic_id[rows] * (1 << 32) + (records.queue_id[rows] & 0xFFFFFFFF)
    if np.all(group_key == group_key[0]):
        return [(rows, int(records.topic_id[rows[0]]), int(records.queue_id[rows[0]]))]
    order = np.argsort(group_key, kind="stable")  # CommitLog order kept inside a group
    rows = rows[order]
    sorted_keys = group_key[order]
    cuts = (np.flatnonzero(np.diff(sorted_keys)) + 1).tolist()
    groups = []
    for begin, end in zip([0, *cuts], [*cuts, len(rows)], strict=True):
        first = int(rows[begin])
        groups.append((rows[begin:end], int(records.topic_id[first]), int(records.queue_id[first])))
    return groups


class QueueRun(NamedTuple):
    """One queue's consume-queue units of a run of records (see ``queue_runs``)."""

    topic_id: int
    queue_id: int
    units: bytes  # 20-byte units back to back, as the queue file holds them
    rows: bytes  # the records' row numbers, int64 in native order
    first_queue_offset: int
    consecutive: bool  # queue offsets follow one another from the first
    first_end: int  # CommitLog end (offset + size) of the first record
    last_end: int  # and of the last

    def row_numbers(self) -> npt.NDArray[np.int64]:
        return np.frombuffer(self.rows, dtype=np.int64)


def queue_runs(
    records: Records, offsets: npt.NDArray[np.int64], tags_codes: npt.NDArray[np.int64]
) -> list[QueueRun]:
    """``queue_groups`` with each queue's units already encoded (``offsets`` being the
    records' CommitLog offsets): what a dispatcher appends when the queue continues as
    expected, in one C pass without the GIL where the extension is built."""
    columns = (
        records.topic_id,
        records.queue_id,
        records.sys_flag,
        offsets,
        records.size,
        tags_codes,
        records.queue_offset,
    )
    if native.queue_units is not None:
        contiguous = [np.ascontiguousarray(c, dtype=np.int64) for c in columns]
        return [QueueRun(*item) for item in native.queue_units(*contiguous)]
    runs = []
    for rows, topic_id, queue_id in _groups(records):
        queue_offsets = records.queue_offset[rows]
        ends = offsets[rows] + records.size[rows]
        expected = queue_offsets[0] + np.arange(len(rows), dtype=np.int64)
        runs.append(
            QueueRun(
                topic_id,
                queue_id,
                encode_units(offsets[rows], records.size[rows], tags_codes[rows]),
                rows.astype(np.int64).tobytes(),
                int(queue_offsets[0]),
                bool(np.array_equal(queue_offsets, expected)),
                int(ends[0]),
                int(ends[-1]),
            )
        )
    return runs


@dataclass
class CorruptRegion:
    """Bytes skipped by ``--skip-corrupt``: from ``offset`` for ``length`` bytes (None: to
    the end of the CommitLog's data), and why the record at ``offset`` was rejected."""

    offset: int
    length: int | None
    reason: str


@dataclass
class RangeScan:
    records: Records
    first_position: int | None  # first record start found in the range
    stop: str
    stop_position: int  # where the walk ended (a record start, blank, zeros or bad bytes)
    stop_reason: str = ""
    corrupt: list[CorruptRegion] = field(default_factory=list)


class RangeCorruptError(CorruptDataError):
    """A record in a range failed validation and corrupt records are not being skipped."""


def check_record(buf: memoryview, base: int, position: int, file_size: int) -> str | None:
    """Why the record at ``position`` is not a valid, self-located record (None if it is)."""
    try:
        view = rec.read_record(buf, position, end=file_size)
    except IncompleteDataError as e:
        return f"record runs past the end of its file ({e})"
    except CorruptDataError as e:
        return e.reason
    if isinstance(view, rec.Blank):
        if view.remaining != file_size - position:
            return f"blank record with wrong length {view.remaining}"
        return None
    if view.physical_offset != base + position:
        return f"stale record: PHYSICALOFFSET {view.physical_offset} at {base + position}"
    record_end = position + view.size
    if file_size - record_end < rec.END_FILE_MIN_BLANK_LENGTH and record_end != file_size:
        return "record leaves less than 8 bytes before the file end"
    return None


# Where data may start at or after a position of the file (the file's size if nowhere):
# ``lseek(SEEK_DATA)``, from a caller that has the file open. Bytes before it read as
# zeros (a hole, or a preallocated extent never written), so they need not be looked at:
# reading them through the mapping would cost a page fault per page.
NextData = Callable[[int], int]


def find_record_start(
    buf: memoryview,
    base: int,
    start: int,
    end: int,
    file_size: int,
    next_data: NextData | None = None,
) -> int | None:
    """The first position in [start, end) holding a valid self-located record or a blank
    of the right length; None if there is none.

    Leading zero bytes (the unwritten tail of a pre-sized file) are skipped a megabyte at a
    time with numpy; then each magic is searched for (C speed) only before the best
    candidate found so far, so a range inside data costs about one record's bytes.
    """
    finder = cast(Any, buf.obj).find  # an mmap or bytes: a C-speed search
    # A record's first non-zero byte is within its first 8 (TOTALSIZE's high bytes are
    # zeros, its magic is not): zeros are skipped over [start, end + 7), and the search
    # starts 7 bytes before the first non-zero step, or a record starting in the last
    # bytes of a small window, after zeros, would be missed.
    first_data = _skip_zeros(buf, start, min(end + 7, file_size, len(buf)), next_data)
    start = max(start, first_data - 7)
    if start >= end:
        return None
    best = end
    for magic in (_V1, _V2, _BLANK):
        at = start
        while at < best:
            # The magic of a start before `best` ends at best + 7 at the latest.
            hit = finder(magic, at + 4, best + 7)
            if hit < 0:
                break
            candidate = hit - 4
            if _is_start(buf, base, candidate, file_size, magic):
                best = candidate
                break
            at = candidate + 1
    return best if best < end else None


_ZERO_STEP = 1024 * 1024


def _skip_zeros(buf: memoryview, start: int, end: int, next_data: NextData | None = None) -> int:
    """The start of the first megabyte-aligned step in [start, end) holding a non-zero
    byte (``end`` if every byte is zero); holes ``next_data`` names are skipped unread."""
    at = start
    while at < end:
        if next_data is not None:
            at = max(at, next_data(at))
            if at >= end:
                return end
        step = min(end, at + _ZERO_STEP)
        if np.any(np.frombuffer(buf, dtype=np.uint8, count=step - at, offset=at)):
            return at
        at = step
    return end


def _is_start(buf: memoryview, base: int, position: int, file_size: int, magic: bytes) -> bool:
    if position + 8 > file_size:
        return False
    if magic == _BLANK:
        total: int = struct.unpack_from(">i", buf, position)[0]
        return total == file_size - position
    if position + 36 > file_size:
        return False
    (physical,) = _PHYSICAL.unpack_from(buf, position + 28)
    if physical != base + position:
        return False
    return bool(check_record(buf, base, position, file_size) is None)


_STOPS = (Stop.BOUNDARY, Stop.BLANK, Stop.END_OF_DATA, Stop.CORRUPT)  # the C codes, in order


def walk_start_array(
    buf: memoryview, position: int, end: int, file_size: int
) -> tuple[npt.NDArray[np.int64], int, str]:
    """:func:`walk_starts` with the starts as an int64 array (what :func:`decode_run`
    takes), walked in C when the extension is built."""
    if native.walk_starts is None:
        starts, stop_at, stop = _walk_starts_python(buf, position, end, file_size)
        return np.asarray(starts, dtype=np.int64), stop_at, stop
    # Every record is at least FIXED_OVERHEAD_V4 bytes: this many starts always fit.
    out = np.empty(max(0, end - position) // rec.FIXED_OVERHEAD_V4 + 2, dtype=np.int64)
    count, stop_at, code = native.walk_starts(buf, position, end, file_size, out)
    return out[:count], stop_at, _STOPS[code]


def walk_starts(
    buf: memoryview, position: int, end: int, file_size: int
) -> tuple[list[int], int, str]:
    """Follow TOTALSIZE from ``position`` while records start before ``end``. Returns the
    starts, where the walk stopped and why (only the header's magic and size are looked
    at; :func:`decode_run` validates the rest)."""
    if native.walk_starts is not None:
        starts, stop_at, stop = walk_start_array(buf, position, end, file_size)
        return starts.tolist(), stop_at, stop
    return _walk_starts_python(buf, position, end, file_size)


def _walk_starts_python(
    buf: memoryview, position: int, end: int, file_size: int
) -> tuple[list[int], int, str]:
    starts: list[int] = []
    append = starts.append
    unpack = _HEAD8.unpack_from
    while position < end:
        if position + 8 > file_size:
            return starts, position, Stop.CORRUPT
        total, magic = unpack(buf, position)
        if magic in _MAGICS:
            if total < rec.FIXED_OVERHEAD_V4 or position + total > file_size:
                return starts, position, Stop.CORRUPT
            append(position)
            position += total
        elif magic == rec.BLANK_MAGIC:
            return starts, position, Stop.BLANK
        elif total == 0 and magic == 0:
            return starts, position, Stop.END_OF_DATA
        else:
            return starts, position, Stop.CORRUPT
    return starts, position, Stop.BOUNDARY


def decode_run(
    buf: memoryview,
    raw: npt.NDArray[np.uint8],
    base: int,
    starts: list[int] | npt.NDArray[np.int64],
    file_size: int,
    topics: TopicTable,
) -> tuple[Records, int]:
    """Decode and validate records at ``starts``; returns the valid prefix and how many
    records it holds (the first invalid record ends it)."""
    if native.decode_chunk is not None:
        # One C call for the whole run: the gather chunks below keep numpy's temporaries
        # in cache, but C has none, and concatenating the chunks' columns cost a tenth of
        # a dispatch of 100 B records.
        positions = np.asarray(starts, dtype=np.int64)
        records, valid = _decode_chunk_native(buf, base, positions, file_size, topics)
        return (records.take(valid) if valid < len(records) else records), valid
    parts: list[Records] = []
    done = 0
    for first in range(0, len(starts), GATHER_RECORDS):
        chunk = np.asarray(starts[first : first + GATHER_RECORDS], dtype=np.int64)
        records, valid = _decode_chunk(buf, raw, base, chunk, file_size, topics)
        parts.append(records.take(valid) if valid < len(chunk) else records)
        done += valid
        if valid < len(chunk):
            break
    return Records.concat(parts), done


def _decode_chunk(
    buf: memoryview,
    raw: npt.NDArray[np.uint8],
    base: int,
    position: npt.NDArray[np.int64],
    file_size: int,
    topics: TopicTable,
) -> tuple[Records, int]:
    if native.decode_chunk is not None:
        return _decode_chunk_native(buf, base, position, file_size, topics)
    count = len(position)
    fits = position + _HEADER_SIZE <= min(file_size, len(raw))
    header = _headers_at(raw, np.where(fits, position, 0)) if count else _EMPTY_HEADERS
    total = header["total"].astype(np.int64)
    magic = header["magic"]
    flags = header["sys_flag"].astype(np.int64)
    simple = fits & (magic == rec.MESSAGE_MAGIC_V1) & ((flags & _V6_HOSTS) == 0)
    body_length = header["body_length"].astype(np.int64)
    ok = simple & (total >= rec.FIXED_OVERHEAD_V4) & (position + total <= file_size)
    ok &= (body_length >= 0) & (body_length <= total - rec.FIXED_OVERHEAD_V4)
    topic_len_at = np.where(ok, position + _HEADER_SIZE + body_length, 0)
    topic_length = raw[topic_len_at].view(np.int8).astype(np.int64)
    topic_position = topic_len_at + 1
    ok &= (topic_length >= 0) & (topic_position + topic_length + 2 <= position + total)
    props_len_at = np.where(ok, topic_position + topic_length, 0)
    props_length = (
        ((raw[props_len_at].astype(np.int64) << 8) | raw[props_len_at + 1].astype(np.int64))
        .astype(np.int16)
        .astype(np.int64)
    )
    props_position = props_len_at + 2
    ok &= props_length >= 0
    ok &= rec.FIXED_OVERHEAD_V4 + body_length + topic_length + props_length == total
    ok &= header["physical_offset"] == base + position
    record_end = position + total
    ok &= (file_size - record_end >= rec.END_FILE_MIN_BLANK_LENGTH) | (record_end == file_size)
    topic_id = topics.intern_many(raw, topic_position, topic_length, ok)
    ok &= topic_id >= 0
    records = Records(
        position=position,
        size=total,
        queue_id=header["queue_id"].astype(np.int64),
        queue_offset=header["queue_offset"].astype(np.int64),
        sys_flag=flags,
        store_timestamp=header["store_timestamp"].astype(np.int64),
        topic_position=topic_position,
        topic_length=topic_length,
        properties_position=props_position,
        properties_length=props_length,
        topic_id=topic_id,
        body_position=position + _HEADER_SIZE,
        body_length=body_length,
        body_crc=header["body_crc"].astype(np.int64),
    )
    return _finish_scalar(buf, base, records, np.flatnonzero(~ok), file_size, topics)


def _finish_scalar(
    buf: memoryview,
    base: int,
    records: Records,
    rejected: npt.NDArray[np.intp],
    file_size: int,
    topics: TopicTable,
) -> tuple[Records, int]:
    """Records the bulk path does not cover (IPv6 hosts, v2 magic) or rejected: decide
    one by one with the scalar decoder, which also gives the reason. Returns the records
    and how many of them, from the first, are valid."""
    for i in rejected.tolist():
        pos = int(records.position[i])
        if check_record(buf, base, pos, file_size) is not None:
            return records, i
        _fill_scalar(buf, records, i, pos, topics)
    return records, len(records)


def _decode_chunk_native(
    buf: memoryview,
    base: int,
    position: npt.NDArray[np.int64],
    file_size: int,
    topics: TopicTable,
) -> tuple[Records, int]:
    """``_decode_chunk`` with the per-record checks in C (the same checks, in the same
    order of fields; topics are interned into ``topics`` as they appear)."""
    assert native.decode_chunk is not None
    count = len(position)
    table = np.empty((len(Records.__dataclass_fields__), count), dtype=np.int64)
    ok = np.empty(count, dtype=np.uint8)
    positions = np.ascontiguousarray(position, dtype=np.int64)
    native.decode_chunk(buf, base, positions, file_size, topics.ids, topics.names, table, ok)
    records = Records(*table)
    return _finish_scalar(buf, base, records, np.flatnonzero(ok == 0), file_size, topics)


def _fill_scalar(
    buf: memoryview, records: Records, i: int, position: int, topics: TopicTable
) -> None:
    view = rec.read_record(buf, position)
    assert not isinstance(view, rec.Blank)
    records.size[i] = view.size
    records.queue_id[i] = view.queue_id
    records.queue_offset[i] = view.queue_offset
    records.sys_flag[i] = view.sys_flag
    records.store_timestamp[i] = view.store_timestamp
    topic_bytes = len(view.topic.encode("utf-8"))
    records.topic_length[i] = topic_bytes
    records.topic_position[i] = view.properties_position - 2 - topic_bytes
    records.properties_position[i] = view.properties_position
    records.properties_length[i] = view.properties_length
    records.topic_id[i] = topics.intern(view.topic.encode("utf-8"))
    records.body_position[i] = view.body_position
    records.body_length[i] = view.body_length
    records.body_crc[i] = view.body_crc
