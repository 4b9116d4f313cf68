"""ConsumeQueueExt units and addresses (spec 3.7; RocketMQ's ConsumeQueueExtTest): the
unit's bytes, decorate/unDecorate, isExtAddr's boundary, and what mqadmin shows."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketstore.errors import CorruptDataError
from rocketstore.format.cq_ext import (
    MAX_ADDRESS,
    MAX_REAL_OFFSET,
    MIN_EXT_UNIT_SIZE,
    ExtUnit,
    address_of,
    bitmap_text,
    decode_ext_unit,
    encode_ext_unit,
    ext_unit_json,
    is_ext_address,
    real_offset,
)

LONGS = st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1)
UNITS = st.builds(ExtUnit, LONGS, LONGS, st.binary(max_size=64))


def test_unit_bytes_are_rocketmqs() -> None:
    unit = ExtUnit(tags_code=2598903, msg_store_time=1_795_702_651_973, bitmap=b"\x01\x02")
    assert encode_ext_unit(unit) == struct.pack(">hqqh", 22, 2598903, 1_795_702_651_973, 2) + (
        b"\x01\x02"
    )
    assert ExtUnit(5, 6).size == MIN_EXT_UNIT_SIZE == 20


@given(UNITS, st.binary(max_size=30))
def test_a_unit_reads_back_wherever_it_lies(unit: ExtUnit, before: bytes) -> None:
    data = before + encode_ext_unit(unit) + b"\x00" * 3
    assert decode_ext_unit(data, len(before)) == unit


@given(st.integers(min_value=0, max_value=MAX_REAL_OFFSET))
def test_addresses_and_offsets_invert(offset: int) -> None:
    address = address_of(offset)
    assert is_ext_address(address)
    assert real_offset(address) == offset


def test_the_address_boundary() -> None:
    # A tag hash is a sign-extended Java int; a delivery time is positive: neither is one.
    assert is_ext_address(MAX_ADDRESS) and MAX_ADDRESS == -(2**31) - 1
    assert not is_ext_address(-(2**31))
    assert not is_ext_address(1_700_000_000_000)
    assert address_of(0) == -(2**63)
    with pytest.raises(ValueError, match="outside"):
        address_of(MAX_REAL_OFFSET + 1)
    with pytest.raises(ValueError, match="not a ConsumeQueueExt address"):
        real_offset(-5)


def test_where_no_unit_is() -> None:
    assert decode_ext_unit(bytes(40), 0) is None  # zeros past the last unit
    assert decode_ext_unit(b"\xff\xff" + bytes(20), 0) is None  # a file's end marker
    assert decode_ext_unit(b"\x00", 0) is None  # no room for a size
    with pytest.raises(CorruptDataError, match="claims 12 bytes"):
        decode_ext_unit(struct.pack(">h", 12) + bytes(30), 0)
    with pytest.raises(CorruptDataError, match="claims 40 bytes"):
        decode_ext_unit(struct.pack(">h", 40) + bytes(20), 0)
    with pytest.raises(CorruptDataError, match="holds a 9-byte bitmap in 22 bytes"):
        decode_ext_unit(struct.pack(">hqqh", 22, 0, 0, 9) + bytes(9), 0)


def test_as_mqadmin_shows_it() -> None:
    plain = ExtUnit(tags_code=2598904, msg_store_time=1_795_702_651_976)
    assert ext_unit_json(plain) == '{"msgStoreTime":1795702651976,"size":20,"tagsCode":2598904}'
    bits = bytes.fromhex("0000000000001a66")
    with_bits = ExtUnit(tags_code=1, msg_store_time=2, bitmap=bits)
    assert ext_unit_json(with_bits) == (
        '{"filterBitMap":"AAAAAAAAGmY=","msgStoreTime":2,"size":28,"tagsCode":1}'
    )
    # BitsArray.toString: last byte first, each from its high bit; a break after byte 0.
    assert bitmap_text(bits) == "01100110" + "00011010" + "0" * 48 + "\n"
