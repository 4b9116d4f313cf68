"""DLedger entries: how a broker with ``enableDLegerCommitLog`` frames its CommitLog.

Pure. Such a broker keeps its log in ``dledger-<selfId>/data/`` (files named by their
start offset, ``mappedFileSizeCommitLog`` bytes each, as CommitLog files) in DLedger's
own format (openmessaging DLedger 0.3.1.2, the version RocketMQ 4.9.8 and 5.3.3 use):
one entry per message, a 48-byte header and the message record as RocketMQ writes it
into a plain CommitLog (§3 of docs/format.md), its PHYSICALOFFSET being the offset of
the record itself (entry position + 48). Consume-queue units, index entries and message
ids name that offset, so a reader finds records where they say; only a walk over the
log must step over the headers.

Entry (big-endian; ``DLedgerEntryCoder.encode``):

    offset  size  field
    0       4     magic      1 (``MAGIC_1``)
    4       4     size       whole entry: 48 + body size
    8       8     index      0, 1, 2...: one more than the entry before
    16      8     term       the leader's term; never lower than the entry before
    24      8     pos        the entry's own offset in the log
    32      4     channel    reserved (0)
    36      4     chainCrc   reserved by RocketMQ's use (0)
    40      4     bodyCrc    reserved by RocketMQ's use (0)
    44      4     body size
    48      -     body       the message record

An entry never spans files: one that would leave fewer than 8 bytes in its file goes to
the next, and the rest of the file starts with a blank (``MmapFileList.preAppend``): int
magic -1, int bytes remaining, zeros.

Beside the data, ``dledger-<selfId>/index/`` holds a 32-byte unit per entry index (int
magic, long pos, int size, long index, long term) and ``dledger-<selfId>/checkpoint`` a
Java properties file with ``endIndex`` and ``committedIndex``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from rocketstore.errors import CorruptDataError, IncompleteDataError

MAGIC_1 = 1
CURRENT_MAGIC = MAGIC_1
BLANK_MAGIC = -1
# Four ints and three longs, then the body's length (DLedgerEntry.HEADER_SIZE + 4).
HEADER_SIZE = 44
BODY_OFFSET = 48
POS_OFFSET = 24
# preAppend keeps room for a blank of at least this many bytes at the end of a file.
MIN_BLANK_LENGTH = 8
INDEX_UNIT_SIZE = 32
CHECKPOINT_FILE = "checkpoint"
DATA_DIR = "data"
INDEX_DIR = "index"

_ENTRY = struct.Struct(">iiqqqiiii")
_INDEX_UNIT = struct.Struct(">iqiqq")
_BLANK = struct.Struct(">ii")


@dataclass(frozen=True, slots=True)
class EntryHeader:
    """The 48 bytes before a message record."""

    magic: int
    size: int
    index: int
    term: int
    pos: int
    channel: int
    chain_crc: int
    body_crc: int
    body_size: int

    @property
    def body_offset(self) -> int:
        """Where the message record is: the offset queues, index and ids name."""
        return self.pos + BODY_OFFSET

    @property
    def end(self) -> int:
        return self.pos + self.size


@dataclass(frozen=True, slots=True)
class IndexUnit:
    """One 32-byte unit of ``dledger-<selfId>/index/``: where entry ``index`` is."""

    magic: int
    pos: int
    size: int
    index: int
    term: int


def encode_entry(
    index: int,
    term: int,
    pos: int,
    body: bytes,
    *,
    magic: int = CURRENT_MAGIC,
    channel: int = 0,
    chain_crc: int = 0,
    body_crc: int = 0,
) -> bytes:
    """An entry as DLedger writes it (the body as given: RocketMQ's append hook has already
    set the record's PHYSICALOFFSET to ``pos + 48``)."""
    header = _ENTRY.pack(
        magic,
        BODY_OFFSET + len(body),
        index,
        term,
        pos,
        channel,
        chain_crc,
        body_crc,
        len(body),
    )
    return header + body


def decode_entry_header(buf: bytes | bytearray | memoryview, position: int) -> EntryHeader:
    """The header at ``position``, fields as stored (``entry_problem`` judges them).
    IncompleteDataError when fewer than 48 bytes are there."""
    if position < 0 or position + BODY_OFFSET > len(buf):
        raise IncompleteDataError(BODY_OFFSET, max(0, len(buf) - position), "DLedger entry header")
    return EntryHeader(*_ENTRY.unpack_from(buf, position))


def encode_blank(remaining: int) -> bytes:
    """The 8 bytes that end a data file with ``remaining`` bytes left (the rest is zeros)."""
    if remaining < MIN_BLANK_LENGTH:
        raise ValueError(f"a blank needs {MIN_BLANK_LENGTH} bytes, {remaining} remain")
    return _BLANK.pack(BLANK_MAGIC, remaining)


def magic_at(buf: bytes | bytearray | memoryview, position: int) -> int | None:
    """The int at ``position`` (an entry's magic, or the blank's -1), None past the end."""
    if position < 0 or position + 4 > len(buf):
        return None
    value: int = struct.unpack_from(">i", buf, position)[0]
    return value


def entry_problem(
    header: EntryHeader,
    absolute_pos: int,
    file_end: int,
    previous: EntryHeader | None = None,
) -> str | None:
    """Why ``header``, read at log offset ``absolute_pos`` in a file ending at log offset
    ``file_end``, is no valid entry, or None. The checks of DLedger's recovery
    (``DLedgerMmapFileStore.recover``): a known magic, a size past the header that is the
    header plus the body, ``pos`` equal to where the entry is, an index one more than the
    previous entry's and a term no lower; and the entry within its file with room for a
    blank after it, as ``preAppend`` leaves."""
    if not MAGIC_1 <= header.magic <= CURRENT_MAGIC:
        return f"unknown DLedger entry magic {header.magic}"
    if header.size <= HEADER_SIZE:
        return f"DLedger entry size {header.size} is not past the {HEADER_SIZE}-byte header"
    if header.body_size < 0 or header.body_size + BODY_OFFSET != header.size:
        return f"DLedger entry size {header.size} is not {BODY_OFFSET} + body {header.body_size}"
    if header.pos != absolute_pos:
        return f"DLedger entry {header.index} says it is at {header.pos}"
    if header.end > file_end or (
        header.end != file_end and file_end - header.end < MIN_BLANK_LENGTH
    ):
        return f"DLedger entry {header.index} of {header.size} bytes does not fit its file"
    if header.index < 0:
        return f"DLedger entry index {header.index} is negative"
    if previous is not None:
        if header.index != previous.index + 1:
            return f"DLedger entry index {header.index} does not follow {previous.index}"
        if header.term < previous.term:
            return f"DLedger entry term {header.term} is below the previous {previous.term}"
    return None


def encode_index_unit(unit: IndexUnit) -> bytes:
    return _INDEX_UNIT.pack(unit.magic, unit.pos, unit.size, unit.index, unit.term)


def decode_index_unit(buf: bytes | bytearray | memoryview, position: int = 0) -> IndexUnit:
    if position < 0 or position + INDEX_UNIT_SIZE > len(buf):
        raise IncompleteDataError(
            INDEX_UNIT_SIZE, max(0, len(buf) - position), "DLedger index unit"
        )
    return IndexUnit(*_INDEX_UNIT.unpack_from(buf, position))


def parse_checkpoint(text: str) -> dict[str, int]:
    """``endIndex`` and ``committedIndex`` of a DLedger checkpoint (Java properties written
    by ``Properties.store``: a ``#`` date comment, then ``key=value`` lines). A value that
    is no integer is a CorruptDataError naming it; unknown keys are left out."""
    found: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped[0] in "#!":
            continue
        key, sep, value = stripped.partition("=")
        if not sep:
            continue
        key = key.strip()
        if key not in ("endIndex", "committedIndex"):
            continue
        try:
            found[key] = int(value.strip())
        except ValueError as e:
            raise CorruptDataError(
                f"DLedger checkpoint line {number}: {key} is {value.strip()!r}, not a number"
            ) from e
    return found


@dataclass(slots=True)
class EntryWalk:
    """What ``walk_entries`` found in one file: the valid entries in order, and where and
    why it stopped (``stop_reason`` None: the file is finished, by a blank or by an entry
    that ends exactly at its end)."""

    entries: list[EntryHeader]
    stop_position: int
    stop_reason: str | None


END_OF_DATA = "end of data"


def walk_entries(
    buf: bytes | bytearray | memoryview,
    base: int,
    position: int,
    file_size: int,
    previous: EntryHeader | None = None,
) -> EntryWalk:
    """Follow the entries of the data file at log offset ``base`` from ``position``
    (an entry boundary), as DLedger's recovery does: a blank finishes the file, zeros
    where a header would be end the data, and the first entry failing ``entry_problem``
    stops the walk with its reason. ``previous`` is the entry before ``position`` (in
    this or an earlier file), for the index and term checks. The bodies are not looked
    at: they are message records for the record codecs."""
    entries: list[EntryHeader] = []
    end = min(file_size, len(buf))
    file_end = base + file_size
    while position < file_size:
        if position + MIN_BLANK_LENGTH > end:
            return EntryWalk(entries, position, f"{file_size - position} bytes left in the file")
        magic, size = _BLANK.unpack_from(buf, position)
        if magic == BLANK_MAGIC:
            if size != file_size - position:
                return EntryWalk(entries, position, f"DLedger blank with wrong length {size}")
            return EntryWalk(entries, position, None)
        if magic == 0 and size == 0:
            return EntryWalk(entries, position, END_OF_DATA)
        if position + BODY_OFFSET > end:
            return EntryWalk(entries, position, "DLedger entry header cut by the file end")
        header = EntryHeader(*_ENTRY.unpack_from(buf, position))
        problem = entry_problem(header, base + position, file_end, previous)
        if problem is not None:
            return EntryWalk(entries, position, problem)
        entries.append(header)
        previous = header
        position += header.size
    return EntryWalk(entries, position, None)
