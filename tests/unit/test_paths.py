"""paths: index file names and the times they stand for."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rocketstore.paths import (
    index_file_ms,
    index_file_name,
    is_index_file_name,
    is_offset_file_name,
)

# 2001-09-09 .. 2286-11-20: every name has 17 digits.
EPOCH_MS = st.integers(min_value=1_000_000_000_000, max_value=9_999_999_999_999)


@given(EPOCH_MS)
def test_a_name_reads_back_as_its_time(epoch_ms: int) -> None:
    name = index_file_name(epoch_ms)
    assert is_index_file_name(name)
    back = index_file_ms(name)
    assert back is not None
    # The same wall-clock time (a repeated local hour reads as its first occurrence).
    assert index_file_name(back) == name
    assert index_file_name(back + 1) > name


def test_names_that_stand_for_no_time() -> None:
    assert index_file_ms("99999999999999999") is None  # month 99
    assert index_file_ms("2026112606") is None  # not a name
    assert index_file_ms("20261301000000000") is None  # month 13


def test_an_offset_past_a_java_long_is_no_file_name() -> None:
    """RocketMQ never names a file past Long.MAX_VALUE; such a name would overflow every
    offset computed from it (the C decoder refused it with an OverflowError)."""
    assert is_offset_file_name(f"{2**63 - 1:020d}")
    assert not is_offset_file_name("99999999999999999999")
    assert not is_offset_file_name(f"{2**63:020d}")
