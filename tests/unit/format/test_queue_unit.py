"""ConsumeQueue unit: CommitLog offset (long), size (int), tagsCode (long) (spec 3.1-3.2)."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from rocketstore.errors import IncompleteDataError
from rocketstore.format.javahash import tags_code
from rocketstore.format.queue_unit import (
    BLANK_UNIT,
    CQ_UNIT_SIZE,
    UNIT_DTYPE,
    QueueUnit,
    decode_unit,
    decode_units,
    encode_unit,
)


def test_unit_size() -> None:
    assert CQ_UNIT_SIZE == 20
    assert UNIT_DTYPE.itemsize == 20


def test_encode_golden() -> None:
    expected = (
        struct.pack(">q", 123_456_789_012)  # CommitLog offset
        + struct.pack(">i", 157)  # message size
        + bytes.fromhex("0000000000272BF7")  # tagsCode of "TAG1" = 2,567,159
    )
    assert encode_unit(123_456_789_012, 157, tags_code("TAG1")) == expected


def test_negative_tags_code_is_sign_extended() -> None:
    # "AaTopic#BB".hashCode() = -10,606,476 -> FF FF FF FF FF 5E 28 74 as a long.
    got = encode_unit(0, 1, tags_code("AaTopic#BB"))
    assert got[12:] == bytes.fromhex("FFFFFFFFFF5E2874")
    assert decode_unit(got).tags_code == -10_606_476


def test_blank_fill_unit() -> None:
    expected = (
        struct.pack(">q", 0)  # offset 0L
        + bytes.fromhex("7FFFFFFF")  # size Integer.MAX_VALUE
        + struct.pack(">q", 0)  # tagsCode 0L
    )
    assert expected == BLANK_UNIT
    unit = decode_unit(BLANK_UNIT)
    assert unit == QueueUnit(0, 0x7FFFFFFF, 0)
    assert unit.is_blank_fill
    assert unit.is_valid  # recovery counts blank fill units as valid


@pytest.mark.parametrize(
    ("offset", "size", "valid"),
    [
        (0, 1, True),
        (100, 157, True),
        (0, 0, False),  # zeroed tail of a file
        (-1, 157, False),
        (100, -5, False),
        (-10, 0, False),
    ],
)
def test_is_valid(offset: int, size: int, valid: bool) -> None:
    unit = QueueUnit(offset, size, 0)
    assert unit.is_valid is valid
    assert not unit.is_blank_fill


def test_blank_fill_needs_all_three_fields() -> None:
    assert not QueueUnit(0, 0x7FFFFFFF, 1).is_blank_fill
    assert not QueueUnit(20, 0x7FFFFFFF, 0).is_blank_fill


def test_decode_at_position() -> None:
    buf = bytes(40) + encode_unit(7, 8, 9) + bytes(3)
    assert decode_unit(buf, 40) == QueueUnit(7, 8, 9)
    assert decode_unit(memoryview(buf), 40) == QueueUnit(7, 8, 9)
    assert decode_unit(bytearray(buf), 40).commit_log_offset == 7


def test_extreme_values() -> None:
    unit = QueueUnit(2**63 - 1, -(2**31), -(2**63))
    assert decode_unit(encode_unit(*unit)) == unit


@pytest.mark.parametrize(("length", "position"), [(0, 0), (19, 0), (39, 20), (20, 1), (20, 40)])
def test_short_buffer_is_incomplete(length: int, position: int) -> None:
    with pytest.raises(IncompleteDataError):
        decode_unit(bytes(length), position)


def test_decode_units_numpy() -> None:
    units = [QueueUnit(0, 0x7FFFFFFF, 0), QueueUnit(157, 200, 2_567_159), QueueUnit(357, 9, -3)]
    buf = b"".join(encode_unit(*u) for u in units) + b"\x01\x02"  # trailing partial unit
    arr = decode_units(buf)
    assert len(arr) == 3
    assert arr["offset"].tolist() == [0, 157, 357]
    assert arr["size"].tolist() == [0x7FFFFFFF, 200, 9]
    assert arr["tags_code"].tolist() == [0, 2_567_159, -3]
    for i, unit in enumerate(units):
        assert decode_unit(buf, i * CQ_UNIT_SIZE) == unit


def test_decode_units_empty_and_views() -> None:
    assert len(decode_units(b"")) == 0
    assert len(decode_units(bytes(19))) == 0
    raw = bytearray(encode_unit(1, 2, 3))
    arr = decode_units(raw)
    assert arr.dtype == UNIT_DTYPE
    assert int(arr["size"][0]) == 2
    assert decode_units(memoryview(bytes(raw)))["tags_code"].tolist() == [3]
    assert isinstance(arr, np.ndarray)
