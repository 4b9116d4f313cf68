"""Holes of a preallocated file: skipped by the scans, never at the cost of a byte of data
(anything written, in any place, is still found; where the file system cannot tell, all
of the file counts as data)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketstore.files import holes
from rocketstore.files.mapped_file import MappedFile

SIZE = 4 * 1024 * 1024


def _file(tmp_path: Path, writes: list[tuple[int, bytes]]) -> MappedFile:
    mapped = MappedFile(str(tmp_path / "00000000000000000000"), SIZE, writable=True,
                        create=True, reserve=True)  # fmt: skip
    for position, data in writes:
        mapped.write_at(position, data)
    return mapped


def test_the_unwritten_rest_is_skipped(tmp_path: Path) -> None:
    mapped = _file(tmp_path, [(0, b"x" * 10_000)])
    try:
        fd = os.open(mapped.path, os.O_RDONLY)
        try:
            next_data = holes.next_data_finder(fd, SIZE)
            assert next_data(0) == 0
            assert next_data(5_000) == 5_000
            skipped = next_data(1024 * 1024)
            assert skipped in (SIZE, 1024 * 1024)  # the latter: the file system cannot tell
            spans = holes.data_spans(fd, 0, SIZE)
            assert spans[0][0] == 0 and spans[0][1] >= 10_000
        finally:
            os.close(fd)
    finally:
        mapped.close()


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(st.tuples(st.integers(0, SIZE - 64), st.binary(min_size=1, max_size=64)), max_size=5),
    st.integers(0, SIZE),
)
def test_last_nonzero_end_finds_every_write(
    tmp_path_factory: pytest.TempPathFactory, writes: list[tuple[int, bytes]], position: int
) -> None:
    mapped = _file(tmp_path_factory.mktemp("holes"), writes)
    try:
        raw = np.frombuffer(mapped.mm, dtype=np.uint8)
        nonzero = np.flatnonzero(raw[position:])
        want = position + int(nonzero[-1]) + 1 if len(nonzero) else position
        del raw, nonzero
        assert mapped.last_nonzero_end(position) == want
    finally:
        mapped.close()


def test_without_seek_data_everything_is_data(monkeypatch: pytest.MonkeyPatch) -> None:
    def unsupported(fd: int, position: int, how: int) -> int:
        raise OSError(errno.EINVAL, "no SEEK_DATA here")

    monkeypatch.setattr("rocketstore.files.holes.os.lseek", unsupported)
    assert holes.next_data_finder(3, 100)(10) == 10
    assert holes.data_spans(3, 10, 100) == [(10, 100)]
