"""paths: index file names and the times they stand for."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rocketstore.paths import index_file_ms, index_file_name, is_index_file_name

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
