"""Mapped files keep no descriptor open: neither the mapping (CPython's mmap keeps a
duplicate of the one it maps) nor, once the writer has moved to the next file, the one its
writes went through."""

from __future__ import annotations

import mmap
import os
import sys
from pathlib import Path

import pytest

from rocketstore.files.mapped_file import MappedFile
from rocketstore.files.mapped_file_queue import MappedFileQueue
from rocketstore.files.mapping import holds_descriptor, map_file

SIZE = 64 * 1024
linux_only = pytest.mark.skipif(sys.platform != "linux", reason="counts /proc/self/fd")


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@linux_only
def test_a_mapping_holds_no_descriptor_and_still_works(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(bytes(SIZE))
    before = _open_fds()
    fd = os.open(path, os.O_RDWR)
    mapping = map_file(fd, SIZE, mmap.ACCESS_WRITE)
    os.close(fd)
    try:
        assert _open_fds() == before
        assert not holds_descriptor(mapping)
        mapping[10:13] = b"abc"
        mapping.flush()
        assert path.read_bytes()[10:13] == b"abc"
        spare = os.open(path, os.O_RDONLY)  # may reuse the number the duplicate had
    finally:
        mapping.close()  # must not close that number
    os.fstat(spare)
    os.close(spare)


@linux_only
def test_mapped_files_hold_no_descriptor(tmp_path: Path) -> None:
    before = _open_fds()
    files = [
        MappedFile(str(tmp_path / f"{i * SIZE:020d}"), SIZE, writable=True, create=True)
        for i in range(50)
    ]
    try:
        assert _open_fds() == before
    finally:
        for mapped in files:
            mapped.close()


@linux_only
def test_a_roll_closes_the_write_descriptor_of_the_full_file(tmp_path: Path) -> None:
    queue = MappedFileQueue(str(tmp_path), SIZE, writable=True)
    before = _open_fds()
    try:
        for _ in range(20):
            mapped = queue.last_file_for_write()
            mapped.write_through(mapped.wrote_position, bytes(SIZE))
            mapped.wrote_position = SIZE
            assert _open_fds() <= before + 1  # the last file's only
        assert len(queue.files) == 20
        first = queue.files[0]
        first.write_through(0, b"again")  # reopened on demand
        assert first.read(0, 5) == b"again"
    finally:
        queue.close()
    assert _open_fds() == before
