"""The ranges of Java's int and long: RocketMQ keeps offsets, times and counts in them,
so a value outside cannot come from (or go into) its files and protocol.

Layer: above errors only (constants, and the check of an int argument).
"""

from __future__ import annotations

from typing import SupportsIndex

from rocketstore.errors import ConfigError

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


def int_argument(name: str, value: object) -> int:
    """``value`` as an int (a numpy integer too), or ConfigError naming ``name``: a float,
    a str or a bool would fail deep down or silently read something else."""
    if type(value) is int:
        return value
    if isinstance(value, SupportsIndex) and not isinstance(value, bool):
        return value.__index__()
    raise ConfigError(f"{name} must be an int, got {type(value).__name__} {value!r}")
