"""Masked CRC32 (``UtilAll.crc32``): zlib CRC32 with the top bit cleared; empty -> 0."""

from __future__ import annotations

import zlib

import pytest

from rocketstore.format.crc import CRC_MASK, masked_crc32


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
