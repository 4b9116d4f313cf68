"""RocketMQ's CRC32: zlib CRC32 with the top bit cleared (``UtilAll.crc32``). Pure."""

from __future__ import annotations

import zlib

CRC_MASK = 0x7FFFFFFF


def masked_crc32(data: bytes | bytearray | memoryview) -> int:
    """CRC32 & 0x7FFFFFFF; an empty body gives 0."""
    if len(data) == 0:
        return 0
    return zlib.crc32(data) & CRC_MASK
