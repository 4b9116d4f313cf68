"""The ranges of Java's int and long: RocketMQ keeps offsets, times and counts in them,
so a value outside cannot come from (or go into) its files and protocol.

Layer: bottom (constants only).
"""

from __future__ import annotations

JAVA_INT_MIN = -(2**31)
JAVA_INT_MAX = 2**31 - 1
JAVA_LONG_MIN = -(2**63)
JAVA_LONG_MAX = 2**63 - 1


def fits_java_long(value: int) -> bool:
    return JAVA_LONG_MIN <= value <= JAVA_LONG_MAX


def wrap_java_long(value: int) -> int:
    """``value`` as Java's long arithmetic leaves it: wrapped into 64 bits, two's complement."""
    value &= 0xFFFF_FFFF_FFFF_FFFF
    return value - (1 << 64) if value >> 63 else value
