"""Recovery's zeroing of a file's stale tail (MappedFile.zero_tail) on a full disk: it
writes only where the file may hold data, with those blocks allocated first, so a hole
(a sparse queue file RocketMQ made) is never written through the mapping, where a full
disk is a SIGBUS. The full disk is simulated at the file layer: posix_fallocate fails
with ENOSPC (tests/crash/test_disk_full.py fills a real tmpfs where one can be mounted)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from rocketstore.errors import StoreError
from rocketstore.files.holes import data_spans
from rocketstore.files.mapped_file import MappedFile

SIZE = 256 * 1024


def _sparse(tmp_path: Path) -> Path:
    """Data at [0, 8 KiB) and [128 KiB, 136 KiB), a hole between and after."""
    path = tmp_path / "00000000000000000000"
    with open(path, "wb") as f:
        f.truncate(SIZE)
        f.write(b"\x01" * 8192)
        f.seek(128 * 1024)
        f.write(b"\x02" * 8192)
    return path


def _holes_known(path: Path) -> bool:
    fd = os.open(path, os.O_RDONLY)
    try:
        return data_spans(fd, 0, SIZE) == [(0, 8192), (128 * 1024, 136 * 1024)]
    finally:
        os.close(fd)


def test_zero_tail_writes_no_hole(tmp_path: Path) -> None:
    path = _sparse(tmp_path)
    if not _holes_known(path):
        pytest.skip("this file system does not report holes")
    mapped = MappedFile(str(path), SIZE, writable=True)
    try:
        assert mapped.zero_tail(4096) == 136 * 1024 - 4096
        mapped.flush()
    finally:
        mapped.close()
    data = path.read_bytes()
    assert data[:4096] == b"\x01" * 4096 and not any(data[4096:])
    fd = os.open(path, os.O_RDONLY)
    try:  # the hole between is still one: nothing was written into it
        assert all(end <= 8192 or begin >= 128 * 1024 for begin, end in data_spans(fd, 0, SIZE))
    finally:
        os.close(fd)


def test_zero_tail_on_a_full_disk_fails_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _sparse(tmp_path)
    before = path.read_bytes()

    def full(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    mapped = MappedFile(str(path), SIZE, writable=True)
    try:
        monkeypatch.setattr(os, "posix_fallocate", full)
        with pytest.raises(StoreError, match="No space left on device"):
            mapped.zero_tail(4096)
    finally:
        monkeypatch.undo()
        mapped.close()
    assert path.read_bytes() == before  # nothing written
