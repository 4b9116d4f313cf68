"""format.record_search: finding whole, valid records past damage, and never taking
random bytes, torn records or stale ones for them."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.format.record_search import first_valid_record, valid_record_at

BASE = 1 << 20  # the file's first CommitLog offset: records say where they are


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, list[tuple[int, int, int]]]:
    """A file's bytes holding 20 records, and (position, size, store time) of each."""
    root = tmp_path_factory.mktemp("search") / "s"
    config = StoreConfig(mapped_file_size_commit_log=BASE)
    with MessageStore.open(root, config) as store:
        # One record nearly fills the first file: the rest start the second, at BASE.
        filler = store.put(Message("F", b"x" * (BASE - 110)), store_timestamp=1)
        assert filler.ok
        placed = []
        for i in range(20):
            sent = store.put(Message("T", b"body-%d" % i * (i + 1)), store_timestamp=1000 + i)
            assert sent.ok and sent.commit_log_offset >= BASE
            placed.append((sent.commit_log_offset - BASE, sent.size, 1000 + i))
    data = (root / "commitlog" / f"{BASE:020d}").read_bytes()
    return data, placed


def test_each_record_is_found_from_just_before_it(
    records: tuple[bytes, list[tuple[int, int, int]]],
) -> None:
    data, placed = records
    for position, _size, stamp in placed:
        assert valid_record_at(data, position, BASE, stamp)
        found = first_valid_record(data, max(0, position - 3), len(data), BASE, 0)
        assert found == position
    end = placed[-1][0] + placed[-1][1]
    assert first_valid_record(data, end, len(data), BASE, 0) is None


def test_the_checks_that_make_a_record_count(
    records: tuple[bytes, list[tuple[int, int, int]]],
) -> None:
    data, placed = records
    position, size, stamp = placed[5]
    assert not valid_record_at(data, position, BASE + 20, 0)  # PHYSICALOFFSET elsewhere
    assert not valid_record_at(data, position, BASE, stamp + 1)  # older than the newest
    body_flip = bytearray(data)
    body_flip[position + size - 30] ^= 1  # inside the body or properties
    torn = bytearray(data)
    torn[position + size // 2 : position + size] = bytes(size - size // 2)
    for damaged in (body_flip, torn):
        assert first_valid_record(bytes(damaged), position, position + size, BASE, 0) is None


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(min_size=0, max_size=4000), st.integers(0, 19))
def test_random_bytes_are_no_record_and_do_not_hide_one(
    records: tuple[bytes, list[tuple[int, int, int]]], noise: bytes, which: int
) -> None:
    """Garbage before a record (with magics sprinkled in) is never taken for one, and
    the record after it is still found at its own position."""
    data, placed = records
    position, _size, _stamp = placed[which]
    magic = b"\xda\xa3\x20\xa7"
    salted = bytearray(noise)
    for at in range(0, len(salted) - 8, 97):
        salted[at + 4 : at + 8] = magic
    start = max(0, position - len(salted))
    buf = bytearray(data)
    buf[start:position] = salted[len(salted) - (position - start) :]
    assert first_valid_record(bytes(buf), start, len(buf), BASE, 0) == position


def test_empty_and_zero_buffers_hold_no_record() -> None:
    assert first_valid_record(b"", 0, 0, 0, 0) is None
    assert first_valid_record(bytes(100), 0, 100, 0, 0) is None
