"""Masked CRC32 (``UtilAll.crc32``): zlib CRC32 with the top bit cleared; empty -> 0."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketstore.format.crc import (
    CRC_MASK,
    PROPERTY_CRC_LENGTH,
    masked_crc32,
    record_property_crc,
    stored_property_crc,
)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        # Spec Appendix A (java.util.zip.CRC32 & 0x7FFFFFFF).
        (b"Once, there was a chance for me!", 151_131_488),
        (b"body", 1_537_739_698),
        (b"123456789", 1_274_296_614),
        (b"", 0),
    ],
)
def test_masked_crc32_vectors(data: bytes, expected: int) -> None:
    assert masked_crc32(data) == expected


def test_top_bit_is_cleared() -> None:
    # "body": raw CRC32 0xDBA80BB2 has the top bit set; stored value is 0x5BA80BB2.
    assert zlib.crc32(b"body") == 0xDBA80BB2
    assert masked_crc32(b"body") == 0x5BA80BB2
    # "123456789": the CRC-32 check value 0xCBF43926 -> 0x4BF43926.
    assert masked_crc32(b"123456789") == 0x4BF43926


def test_mask_constant() -> None:
    assert CRC_MASK == 0x7FFFFFFF


def test_accepts_bytearray_and_memoryview() -> None:
    data = b"Once, there was a chance for me!"
    assert masked_crc32(bytearray(data)) == 151_131_488
    assert masked_crc32(memoryview(b"xx" + data)[2:]) == 151_131_488
    assert masked_crc32(memoryview(b"")) == 0


def test_result_is_a_non_negative_java_int() -> None:
    for data in (b"\xff" * 7, b"\x00", b"a" * 1000):
        assert 0 <= masked_crc32(data) <= 0x7FFFFFFF


# --- the property CRC of RocketMQ 5.x (enabledAppendPropCRC) -------------------------------


def _with_tail(head: bytes, value: int) -> bytes:
    """``head`` followed by the tail RocketMQ 5.x writes (MessageDecoder.createCrc32)."""
    return head + b"__CRC32#\x01" + f"{value:010d}"[::-1].encode() + b"\x02"


def test_property_crc_digits_are_least_significant_first() -> None:
    assert PROPERTY_CRC_LENGTH == 20
    assert _with_tail(b"", 123).endswith(b"3210000000\x02")
    assert stored_property_crc(_with_tail(b"xyz", 123)) == 123


@given(st.binary(max_size=200))
def test_a_record_with_its_tail_checks_and_one_flipped_byte_does_not(head: bytes) -> None:
    record = _with_tail(head, zlib.crc32(head) & CRC_MASK)
    assert stored_property_crc(record) == record_property_crc(record)
    assert stored_property_crc(record[-PROPERTY_CRC_LENGTH:]) == record_property_crc(record)
    if head:
        flipped = bytes([head[0] ^ 1]) + record[1:]
        assert stored_property_crc(flipped) != record_property_crc(flipped)


@pytest.mark.parametrize(
    "record",
    [
        b"",
        b"short",
        b"TAGS\x01a" * 4,  # properties without the tail
        b"__CRC32#\x01321000000x\x02",  # not ten digits
        b"__CRC32#\x0132100000000",  # no closing separator
    ],
)
def test_records_without_a_property_crc(record: bytes) -> None:
    assert stored_property_crc(record) is None
