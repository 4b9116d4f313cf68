"""IndexFile layout: 40-byte header, int slots, 20-byte entries numbered from 1 (spec 4.1)."""

from __future__ import annotations

import mmap
import struct

import pytest

from rocketstore.errors import IncompleteDataError
from rocketstore.format.index_layout import (
    ENTRY_SIZE,
    HEADER_SIZE,
    SLOT_SIZE,
    IndexEntry,
    IndexHeader,
    decode_entry,
    decode_header,
    decode_slot,
    encode_entry,
    encode_header,
    encode_slot,
    entry_position,
    file_size,
    geometry_from_size,
    pack_entry_into,
    pack_header_into,
    pack_slot_into,
    slot_position,
)
from rocketstore.format.javahash import index_key_hash

DEFAULT_SLOTS = 5_000_000
DEFAULT_INDEX_NUM = 20_000_000


def test_sizes() -> None:
    assert (HEADER_SIZE, SLOT_SIZE, ENTRY_SIZE) == (40, 4, 20)


def test_default_geometry() -> None:
    assert file_size(DEFAULT_SLOTS, DEFAULT_INDEX_NUM) == 420_000_040
    assert slot_position(0) == 40
    assert slot_position(606_476) == 40 + 4 * 606_476
    assert slot_position(DEFAULT_SLOTS - 1) == 20_000_036
    assert entry_position(DEFAULT_SLOTS, 0) == 20_000_040  # never used
    assert entry_position(DEFAULT_SLOTS, 1) == 20_000_060  # first entry
    last = entry_position(DEFAULT_SLOTS, DEFAULT_INDEX_NUM - 1)
    assert last + ENTRY_SIZE == 420_000_040


def test_index_file_test_geometry() -> None:
    # IndexFileTest: hashSlotNum 100, indexNum 400.
    assert file_size(100, 400) == 40 + 400 + 8000
    assert entry_position(100, 1) == 460
    # "60" hashes to 1722 -> slot 22; it is the only key of "0".."398" with that hash there.
    assert index_key_hash("60") % 100 == 22
    in_slot_22 = [str(i) for i in range(399) if index_key_hash(str(i)) % 100 == 22]
    assert len(in_slot_22) > 1
    assert [k for k in in_slot_22 if index_key_hash(k) == 1722] == ["60"]


def test_geometry_from_size() -> None:
    assert geometry_from_size(420_000_040) == (DEFAULT_SLOTS, DEFAULT_INDEX_NUM)
    assert geometry_from_size(file_size(100, 400)) == (100, 400)
    assert geometry_from_size(file_size(10, 20), index_per_slot=2) == (10, 20)


@pytest.mark.parametrize("size", [0, 40, 41, 420_000_041, 10])
def test_geometry_from_bad_size(size: int) -> None:
    with pytest.raises(ValueError, match="index file size"):
        geometry_from_size(size)


def test_encode_header_golden() -> None:
    header = IndexHeader(1_700_000_000_000, 1_700_000_005_000, 0, 4096, 3, 5)
    expected = (
        struct.pack(">q", 1_700_000_000_000)  # 0  beginTimestamp
        + struct.pack(">q", 1_700_000_005_000)  # 8  endTimestamp
        + struct.pack(">q", 0)  # 16 beginPhyOffset
        + struct.pack(">q", 4096)  # 24 endPhyOffset
        + struct.pack(">i", 3)  # 32 hashSlotCount
        + struct.pack(">i", 5)  # 36 indexCount (entries + 1)
    )
    assert encode_header(header) == expected
    assert len(expected) == HEADER_SIZE
    assert decode_header(expected) == header


def test_fresh_file_header_is_zero() -> None:
    assert decode_header(bytes(420)) == IndexHeader(0, 0, 0, 0, 0, 0)


def test_encode_entry_golden() -> None:
    entry = IndexEntry(index_key_hash("AaTopic#BB"), 123_456, 59, 0)
    expected = (
        struct.pack(">i", 10_606_476)  # 0  keyHash
        + struct.pack(">q", 123_456)  # 4  CommitLog offset
        + struct.pack(">i", 59)  # 12 timeDiff in seconds
        + struct.pack(">i", 0)  # 16 previous entry number, 0 = end of chain
    )
    assert encode_entry(entry) == expected
    assert len(expected) == ENTRY_SIZE


def test_slot_golden() -> None:
    assert encode_slot(7) == b"\x00\x00\x00\x07"
    assert decode_slot(bytes(40) + encode_slot(7), 40) == 7


def test_decode_in_a_file_image() -> None:
    slots, index_num = 10, 40
    image = bytearray(file_size(slots, index_num))
    header = IndexHeader(1000, 2000, 10, 20, 1, 3)
    image[0:HEADER_SIZE] = encode_header(header)
    e1 = IndexEntry(index_key_hash("FooBar#Hello"), 10, 0, 0)
    e2 = IndexEntry(index_key_hash("FooBar#Hello"), 20, 1, 1)
    slot = e1.key_hash % slots
    image[slot_position(slot) : slot_position(slot) + 4] = encode_slot(2)
    image[entry_position(slots, 1) : entry_position(slots, 1) + 20] = encode_entry(e1)
    image[entry_position(slots, 2) : entry_position(slots, 2) + 20] = encode_entry(e2)
    view = memoryview(bytes(image))
    assert decode_header(view) == header
    assert decode_slot(view, slot_position(slot)) == 2
    head = decode_entry(view, entry_position(slots, 2))
    assert head == e2
    assert decode_entry(view, entry_position(slots, head.prev_index)) == e1
    last = entry_position(slots, index_num - 1)
    assert decode_entry(view, last) == IndexEntry(0, 0, 0, 0)


def test_decode_header_at_position() -> None:
    header = IndexHeader(-1, 2**63 - 1, -(2**63), 0, -(2**31), 2**31 - 1)
    assert decode_header(b"xx" + encode_header(header), 2) == header


@pytest.mark.parametrize(("length", "position"), [(0, 0), (39, 0), (40, 1), (100, 61)])
def test_short_header_is_incomplete(length: int, position: int) -> None:
    with pytest.raises(IncompleteDataError):
        decode_header(bytes(length), position)


@pytest.mark.parametrize(("length", "position"), [(0, 0), (19, 0), (40, 21), (60, 60)])
def test_short_entry_is_incomplete(length: int, position: int) -> None:
    with pytest.raises(IncompleteDataError):
        decode_entry(bytes(length), position)


@pytest.mark.parametrize(("length", "position"), [(0, 0), (3, 0), (44, 41)])
def test_short_slot_is_incomplete(length: int, position: int) -> None:
    with pytest.raises(IncompleteDataError):
        decode_slot(bytes(length), position)


def test_pack_into_matches_encoders() -> None:
    slots, index_num = 10, 40
    image = bytearray(file_size(slots, index_num))
    header = IndexHeader(1000, 2000, 10, 20, 1, 2)
    entry = IndexEntry(index_key_hash("FooBar#Hello"), 10, 0, 0)
    slot = entry.key_hash % slots
    pack_header_into(image, header)
    pack_slot_into(image, slot_position(slot), 1)
    pack_entry_into(image, entry_position(slots, 1), entry)
    expected = bytearray(file_size(slots, index_num))
    expected[0:40] = encode_header(header)
    expected[slot_position(slot) : slot_position(slot) + 4] = encode_slot(1)
    expected[entry_position(slots, 1) : entry_position(slots, 1) + 20] = encode_entry(entry)
    assert image == expected


def test_pack_into_and_decode_on_an_anonymous_mmap() -> None:
    size = file_size(10, 40)
    with mmap.mmap(-1, size) as mem:
        header = IndexHeader(1, 2, 3, 4, 5, 6)
        entry = IndexEntry(7, 8, 9, 1)
        pack_header_into(mem, header)
        pack_slot_into(mem, slot_position(9), 3)
        pack_entry_into(mem, entry_position(10, 3), entry)
        assert decode_header(mem) == header
        assert decode_slot(mem, slot_position(9)) == 3
        assert decode_entry(mem, entry_position(10, 3)) == entry
