"""IndexFile layout codec (pure).

header (40 bytes)
  0  8  beginTimestamp    store time of the first entry (see the rollover quirk)
  8  8  endTimestamp      store time of the newest entry
  16 8  beginPhyOffset    CommitLog offset of the first entry
  24 8  endPhyOffset      CommitLog offset of the newest entry
  32 4  hashSlotCount     slots that hold a chain
  36 4  indexCount        entries + 1 (numbering starts at 1)
slots: int per slot at 40 + 4*slot -> number of the newest entry in that slot, 0 = none
entry i at 40 + 4*slots + 20*i:
  0  4  keyHash           abs(String.hashCode(topic#key)), MIN_VALUE -> 0
  4  8  phyOffset         CommitLog offset of the message
  12 4  timeDiff          seconds since the header's beginTimestamp
  16 4  prevIndex         previous entry number in the same slot, 0 = end of chain
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from rocketstore.errors import IncompleteDataError
from rocketstore.format.buffers import ReadableBuffer, WritableBuffer

HEADER_SIZE = 40
SLOT_SIZE = 4
ENTRY_SIZE = 20
_HEADER = struct.Struct(">qqqqii")
_ENTRY = struct.Struct(">iqii")
_SLOT = struct.Struct(">i")


class IndexHeader(NamedTuple):
    begin_timestamp: int
    end_timestamp: int
    begin_phy_offset: int
    end_phy_offset: int
    hash_slot_count: int
    index_count: int


class IndexEntry(NamedTuple):
    key_hash: int
    phy_offset: int
    time_diff: int
    prev_index: int


def file_size(hash_slot_num: int, index_num: int) -> int:
    return HEADER_SIZE + hash_slot_num * SLOT_SIZE + index_num * ENTRY_SIZE


def slot_position(slot: int) -> int:
    return HEADER_SIZE + slot * SLOT_SIZE


def entry_position(hash_slot_num: int, number: int) -> int:
    return HEADER_SIZE + hash_slot_num * SLOT_SIZE + number * ENTRY_SIZE


def geometry_from_size(size: int, index_per_slot: int = 4) -> tuple[int, int]:
    """(hash_slot_num, index_num) of a file of ``size`` bytes, assuming
    index_num = index_per_slot * hash_slot_num (RocketMQ's defaults have ratio 4)."""
    body = size - HEADER_SIZE
    per_slot = SLOT_SIZE + index_per_slot * ENTRY_SIZE
    if body <= 0 or body % per_slot:
        raise ValueError(f"index file size {size} does not fit a 1:{index_per_slot} geometry")
    slots = body // per_slot
    return slots, slots * index_per_slot


def encode_header(header: IndexHeader) -> bytes:
    return _HEADER.pack(*header)


def decode_header(buf: ReadableBuffer, position: int = 0) -> IndexHeader:
    if position + HEADER_SIZE > len(buf):
        raise IncompleteDataError(HEADER_SIZE, max(0, len(buf) - position), "index header")
    return IndexHeader(*_HEADER.unpack_from(buf, position))


def encode_entry(entry: IndexEntry) -> bytes:
    return _ENTRY.pack(*entry)


def decode_entry(buf: ReadableBuffer, position: int) -> IndexEntry:
    if position + ENTRY_SIZE > len(buf):
        raise IncompleteDataError(ENTRY_SIZE, max(0, len(buf) - position), "index entry")
    return IndexEntry(*_ENTRY.unpack_from(buf, position))


def pack_entry_into(buf: WritableBuffer, position: int, entry: IndexEntry) -> None:
    """Write an entry in place (avoids a temporary bytes object on the hot path)."""
    _ENTRY.pack_into(buf, position, *entry)


def pack_slot_into(buf: WritableBuffer, position: int, value: int) -> None:
    _SLOT.pack_into(buf, position, value)


def pack_header_into(buf: WritableBuffer, header: IndexHeader) -> None:
    _HEADER.pack_into(buf, 0, *header)


def encode_slot(value: int) -> bytes:
    return _SLOT.pack(value)


def decode_slot(buf: ReadableBuffer, position: int) -> int:
    if position + SLOT_SIZE > len(buf):
        raise IncompleteDataError(SLOT_SIZE, max(0, len(buf) - position), "index slot")
    return int(_SLOT.unpack_from(buf, position)[0])
