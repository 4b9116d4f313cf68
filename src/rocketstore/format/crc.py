"""RocketMQ's CRC32: zlib CRC32 with the top bit cleared (``UtilAll.crc32``). Pure."""

from __future__ import annotations

import zlib

CRC_MASK = 0x7FFFFFFF


def masked_crc32(data: bytes | bytearray | memoryview) -> int:
    """CRC32 & 0x7FFFFFFF; an empty body gives 0."""
    if len(data) == 0:
        return 0
    return zlib.crc32(data) & CRC_MASK


# RocketMQ 5.x's property CRC (enabledAppendPropCRC): a record's properties end with
# "__CRC32#" 0x01, ten decimal digits of the masked CRC32 of every record byte before
# them, least significant digit first, and 0x02 (CommitLog.CRC32_RESERVED_LEN, 20 bytes).
PROPERTY_CRC_HEAD = b"__CRC32#\x01"
PROPERTY_CRC_LENGTH = len(PROPERTY_CRC_HEAD) + 10 + 1


def stored_property_crc(record: bytes | bytearray | memoryview) -> int | None:
    """The property CRC a record ends with (given whole, or its last 20 bytes), or None
    when it carries none."""
    tail = bytes(record[-PROPERTY_CRC_LENGTH:])
    if len(tail) < PROPERTY_CRC_LENGTH or not tail.startswith(PROPERTY_CRC_HEAD):
        return None
    digits = tail[len(PROPERTY_CRC_HEAD) : -1]
    if tail[-1:] != b"\x02" or not digits.isdigit():
        return None
    return int(digits[::-1])


def record_property_crc(record: bytes | bytearray | memoryview) -> int:
    """What the property CRC of a whole record should be: the masked CRC32 of its bytes
    before the 20-byte tail (not the body CRC's rule: an empty range gives 0 either way)."""
    return zlib.crc32(record[:-PROPERTY_CRC_LENGTH]) & CRC_MASK
