"""MappedFile's write-through (pwrite beside the mapping) and ranged sync."""

from __future__ import annotations

import errno
import itertools
import os
from pathlib import Path

import pytest

from rocketstore.errors import FileRemovedError, StoreError
from rocketstore.files.mapped_file import MappedFile
from rocketstore.format.native import native

SIZE = 64 * 1024


def _file(tmp_path: Path, name: str = "00000000000000000000") -> MappedFile:
    return MappedFile(
        str(tmp_path / name), SIZE, writable=True, create=True, reserve=True, file_from_offset=0
    )


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_write_through_is_seen_through_the_mapping(tmp_path: Path) -> None:
    mapped = _file(tmp_path)
    try:
        mapped.write_through(100, b"hello")
        mapped.write_through(SIZE - 3, bytearray(b"end"))
        mapped.write_through(4096, memoryview(b"x" * 5000))
        assert mapped.read(100, 5) == b"hello"
        assert mapped.read(SIZE - 3, 3) == b"end"
        assert mapped.read(4096, 5000) == b"x" * 5000
        assert mapped.read(0, 100) == bytes(100)  # nothing else changed
        mapped.sync_range(100, 9096)
        mapped.sync_range(0, SIZE)
    finally:
        mapped.close()
    with open(tmp_path / "00000000000000000000", "rb") as f:
        data = f.read()
    assert data[100:105] == b"hello" and data[-3:] == b"end"


@pytest.mark.parametrize("path", ["python", "native"])
def test_write_through_parts_writes_them_one_after_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    from rocketstore.files import mapped_file, native_io

    if path == "native" and native is None:
        pytest.skip("the C extension is not built")
    if path == "python":
        monkeypatch.setattr(native_io, "write_parts", None)
        monkeypatch.setattr(mapped_file, "_IOV_MAX", 3)  # several pwritev calls
    data = os.urandom(20_000)
    backing = bytearray(data)
    cuts = [0, 1, 1, 4096, 9000, 9001, 15_000, 20_000]
    parts: list[bytes | bytearray | memoryview] = [
        memoryview(backing)[a:b] for a, b in itertools.pairwise(cuts)
    ]
    parts[2] = bytes(parts[2])
    mapped = _file(tmp_path)
    try:
        mapped.write_through_parts(500, parts)
        mapped.write_through_parts(SIZE - 3, [b"e", bytearray(b"nd")])
        mapped.write_through_parts(0, [])
        assert mapped.read(500, 20_000) == data
        assert mapped.read(SIZE - 3, 3) == b"end"
        assert mapped.read(0, 500) == bytes(500)
        with pytest.raises(StoreError, match="past the end"):
            mapped.write_through_parts(SIZE - 3, [b"ab", b"cd"])
    finally:
        mapped.close()


@pytest.mark.parametrize("write", ["write_through", "write_batch"])
def test_writes_refuse_what_they_cannot_do(tmp_path: Path, write: str) -> None:
    mapped = _file(tmp_path)
    with pytest.raises(StoreError, match="past the end"):
        getattr(mapped, write)(SIZE - 4, b"12345")
    with pytest.raises(StoreError, match="past the end"):
        getattr(mapped, write)(-1, b"12345")
    mapped.close()
    with pytest.raises(FileRemovedError):
        getattr(mapped, write)(0, b"12345")
    mapped.sync_range(0, 10)  # a closed file has nothing to sync: no error
    reader = MappedFile(str(tmp_path / "00000000000000000000"), SIZE, writable=False)
    try:
        with pytest.raises(StoreError, match="read-only"):
            getattr(reader, write)(0, b"12345")
    finally:
        reader.close()


@pytest.mark.parametrize("path", ["python", "native"])
def test_write_batch_writes_the_blob_and_leaves_it_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    from rocketstore.files import native_io

    if path == "native" and native is None:
        pytest.skip("the C extension is not built")
    if path == "python":
        monkeypatch.setattr(native_io, "write_batch", None)
    blob = bytearray(os.urandom(9000))
    blob[:4] = (9000).to_bytes(4, "big")
    before = bytes(blob)
    mapped = _file(tmp_path)
    try:
        mapped.write_batch(1000, blob)
        mapped.write_batch(SIZE - 3, b"end")  # shorter than a size: written as it is
        assert blob == before
        assert mapped.read(1000, 9000) == before
        assert mapped.read(SIZE - 3, 3) == b"end"
        assert mapped.read(0, 1000) == bytes(1000)
        mapped.sync_range(1000, 10_000)
    finally:
        mapped.close()
    with open(tmp_path / "00000000000000000000", "rb") as f:
        assert f.read()[1000:10_000] == before


@pytest.mark.skipif(native is None, reason="the C extension is not built")
def test_native_write_batch_reports_the_failed_write() -> None:
    assert native is not None
    read_end, write_end = os.pipe()
    try:
        with pytest.raises(OSError) as failed:  # a pipe has no positions
            native.write_batch(write_end, 0, b"123456789")
        assert failed.value.errno == errno.ESPIPE
        with pytest.raises(ValueError, match="negative"):
            native.write_batch(write_end, -1, b"123456789")
    finally:
        os.close(read_end)
        os.close(write_end)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_its_descriptor_is_opened_once_and_closed_with_the_file(tmp_path: Path) -> None:
    before = _open_fds()
    mapped = _file(tmp_path)
    mapped.write_through(0, b"a")
    opened = _open_fds()
    mapped.write_through(1, b"b")
    assert _open_fds() == opened
    mapped.close()
    assert _open_fds() == before


def test_a_renamed_file_is_still_written(tmp_path: Path) -> None:
    mapped = _file(tmp_path, "spare")
    try:
        mapped.rename(str(tmp_path / "00000000000000000000"))
        mapped.write_through(0, b"moved")
        assert mapped.read(0, 5) == b"moved"
    finally:
        mapped.close()


@pytest.mark.skipif(native is None, reason="the C extension is not built")
def test_msync_range_syncs_and_refuses_a_bad_range(tmp_path: Path) -> None:
    assert native is not None
    mapped = _file(tmp_path)
    mm = mapped.mm
    mm[5000:5005] = b"synce"
    native.msync_range(mm, 4096, 4096)
    native.msync_range(mm, 100, 10)  # an unaligned start syncs from its page
    native.msync_range(mm, 0, 0)
    with pytest.raises(ValueError, match="outside"):
        native.msync_range(mm, SIZE - 4096, 8192)
    with pytest.raises(ValueError, match="outside"):
        native.msync_range(mm, -4096, 4096)
    mapped.close()
    with pytest.raises(ValueError):
        native.msync_range(mm, 0, 4096)  # a closed mapping
    with open(tmp_path / "00000000000000000000", "rb") as f:
        assert f.read()[5000:5005] == b"synce"


@pytest.mark.parametrize("background", [False, True])
def test_a_background_flush_syncs_without_the_gil(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, background: bool
) -> None:
    """Only a flush nobody waits for goes through the C msync that lets other threads
    run; the others keep mmap.flush (and everything is flushed either way)."""
    from rocketstore.files import native_io

    calls: list[tuple[int, int]] = []
    monkeypatch.setattr(native_io, "msync_range", lambda mm, s, n: calls.append((s, n)))
    mapped = _file(tmp_path)
    try:
        mapped.write_at(0, b"x" * 9000)
        mapped.wrote_position = 9000
        assert mapped.flush(0, background=background) == 9000
        assert calls == ([(0, 9000)] if background else [])
        assert mapped.flushed_position == 9000
    finally:
        mapped.close()
