"""The CommitLog prefaulter: faults pages in ahead of the writer without changing a byte,
follows file rolls, and turns itself off (never failing a put) where it cannot work."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.commitlog import CommitLog
from rocketstore.errors import ConfigError
from rocketstore.files import mapped_file, native_io
from rocketstore.format.native import native
from rocketstore.index import SPARE_NAME
from rocketstore.services.prefaulter import (
    STEP_BYTES,
    ZERO_AHEAD_BYTES,
    ZERO_STEP_BYTES,
    Prefaulter,
)

FILE_SIZE = 1024 * 1024


def _commitlog(tmp_path: Path) -> CommitLog:
    return CommitLog(str(tmp_path), FILE_SIZE, writable=True)


@pytest.mark.skipif(native is None, reason="the C extension is not built")
def test_runs_ahead_of_the_write_position_and_changes_nothing(tmp_path: Path) -> None:
    commitlog = _commitlog(tmp_path)
    try:
        mapped = commitlog.files.last_file_for_write(0)
        mapped.write_at(0, b"data")
        mapped.wrote_position = 4
        prefaulter = Prefaulter(commitlog, 256 * 1024)
        while prefaulter.run_once():
            pass
        assert prefaulter.enabled
        assert prefaulter.ready_offset == 4 + 256 * 1024
        assert mapped.read(0, 8) == b"data" + bytes(4)
        assert not any(mapped.read(4, 256 * 1024))
        assert not prefaulter.run_once()  # nothing to do until the writer moves on
        # After a roll it works on the new file, from its start.
        mapped.wrote_position = FILE_SIZE
        rolled = commitlog.files.last_file_for_write(0)
        prefaulter.run_once()
        assert prefaulter.ready_offset > rolled.file_from_offset
    finally:
        commitlog.close()


def test_turns_itself_off_where_it_cannot_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(native_io, "populate_write", None)
    commitlog = _commitlog(tmp_path)
    try:
        commitlog.files.last_file_for_write(0)
        prefaulter = Prefaulter(commitlog, 64 * 1024)
        assert not prefaulter.run_once()
        assert not prefaulter.faults_enabled
        assert not prefaulter.run_once()  # and stays off
    finally:
        commitlog.close()


def test_a_store_runs_with_it_off_and_on(tmp_path: Path) -> None:
    for ahead in (0, 64 * 1024):
        config = StoreConfig(mapped_file_size_commit_log=FILE_SIZE, commit_log_prefault_bytes=ahead)
        with MessageStore.open(str(tmp_path / str(ahead)), config) as store:
            results = store.put_batch([Message("T", b"x" * 1000)] * 200)
            assert all(r.ok for r in results)
            if ahead == 0:
                assert not store.prefaulter.enabled


def test_a_negative_margin_is_refused() -> None:
    with pytest.raises(ConfigError, match="commit_log_prefault_bytes"):
        StoreConfig(commit_log_prefault_bytes=-1).validate()


def test_makes_the_next_file_ahead_and_faults_into_it(tmp_path: Path) -> None:
    commitlog = _commitlog(tmp_path)
    try:
        prefaulter = Prefaulter(commitlog, 256 * 1024)
        # An empty CommitLog: the first file is made before the first put needs it.
        prefaulter.run_once()
        first = commitlog.files.spare
        assert first is not None and first.file_from_offset == 0
        assert commitlog.files.last_file_for_write(0) is first
        # Far from the end of the file: no spare yet.
        first.wrote_position = 4096
        while prefaulter.run_once():
            pass
        assert commitlog.files.spare is None
        # Within the margin of the end: the next file is made, and faulted once the
        # last one is faulted to its end.
        first.wrote_position = FILE_SIZE - 64 * 1024
        while prefaulter.run_once():
            pass
        spare = commitlog.files.spare
        assert spare is not None and spare.file_from_offset == FILE_SIZE
        if prefaulter.faults_enabled:
            assert prefaulter.ready_offset == first.wrote_position + 256 * 1024
        assert not any(spare.read(0, 256 * 1024))
        first.wrote_position = FILE_SIZE
        assert commitlog.files.last_file_for_write(0) is spare
        prefaulter.run_once()  # the next spare is not due yet
        assert commitlog.files.spare is None
        spare.wrote_position = FILE_SIZE - 1024
        prefaulter.run_once()
        assert commitlog.files.spare is not None
    finally:
        commitlog.close()
    # Closing deleted the unused spare; the two files taken by the writer stay.
    names = sorted(p.name for p in (tmp_path / "commitlog").iterdir())
    assert names == [f"{0:020d}", f"{FILE_SIZE:020d}"]


def test_a_full_disk_is_left_to_the_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    commitlog = _commitlog(tmp_path)
    calls: list[int] = []

    def no_space(start_offset: int = 0) -> None:
        calls.append(start_offset)
        raise OSError(28, "No space left on device")

    try:
        monkeypatch.setattr(commitlog.files, "prepare_next", no_space)
        prefaulter = Prefaulter(commitlog, 64 * 1024)
        for _ in range(3):
            prefaulter.run_once()
        assert len(calls) == 1  # not retried until the writer has moved to another file
        assert prefaulter.enabled
        assert "could not make the next CommitLog file" in caplog.text
        mapped = commitlog.files.last_file_for_write(0)  # the writer's own roll still works
        assert mapped.file_from_offset == 0
    finally:
        commitlog.close()


def test_a_store_opened_and_closed_leaves_no_files(tmp_path: Path) -> None:
    config = StoreConfig(mapped_file_size_commit_log=FILE_SIZE)
    store = MessageStore.open(str(tmp_path / "s"), config)
    store.prefaulter.run_once()  # as its thread would, at once
    made_index_spare = (tmp_path / "s" / "index" / SPARE_NAME).exists()
    store.close()
    assert not (tmp_path / "s" / "commitlog").exists()
    assert not (tmp_path / "s" / "index").exists()
    assert made_index_spare or native is None or not store.index._can_prefault
    with MessageStore.open(str(tmp_path / "s"), config) as store:
        assert store.put(Message("T", b"x")).ok
    assert [p.name for p in (tmp_path / "s" / "commitlog").iterdir()] == [f"{0:020d}"]


@pytest.mark.skipif(native is None, reason="the C extension is not built")
def test_the_writers_margin_comes_before_the_index(tmp_path: Path) -> None:
    class Index:
        steps = 0

        def prefault_ahead(self) -> bool:
            self.steps += 1
            return False

    margin = 3 * STEP_BYTES  # three steps, in a file that holds them all
    commitlog = CommitLog(str(tmp_path), 4 * STEP_BYTES, writable=True)
    try:
        commitlog.files.last_file_for_write(0)
        index = Index()
        prefaulter = Prefaulter(commitlog, margin, index)  # type: ignore[arg-type]
        while prefaulter.run_once():
            assert index.steps == 0  # no index work while the margin is short
        assert prefaulter.ready_offset == margin
        assert index.steps == 1  # its turn came with the last step of the margin
    finally:
        commitlog.close()


def test_with_zero_fill_it_zeroes_ahead_instead_of_faulting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """For a written-through CommitLog (SYNC_FLUSH) the margin gets real zeros while the
    syncs are small, never over written bytes; the pages are never faulted in."""
    commitlog = _commitlog(tmp_path)
    try:
        mapped = commitlog.files.last_file_for_write(0)
        mapped.write_at(0, b"data")
        mapped.wrote_position = 4
        zeroed: list[tuple[int, int]] = []
        real = commitlog.zero_ahead

        def spy(target: mapped_file.MappedFile, start: int, end: int) -> int:
            zeroed.append((start, end))
            return real(target, start, end)

        monkeypatch.setattr(commitlog, "zero_ahead", spy)
        monkeypatch.setattr(
            mapped_file.MappedFile, "prefault", lambda *a: pytest.fail("faulted in")
        )
        small = [True]
        prefaulter = Prefaulter(commitlog, 32 * 1024 * 1024, zero_fill=lambda: small[0])
        assert prefaulter.margin == ZERO_AHEAD_BYTES < prefaulter.ahead_bytes
        while prefaulter.run_once():
            pass
        # Within the 1 MiB file: from the write position to the file end, in steps.
        assert zeroed[0] == (4, ZERO_STEP_BYTES) or zeroed[0] == (4, FILE_SIZE)
        assert zeroed[-1][1] == FILE_SIZE
        assert mapped.read(0, 8) == b"data" + bytes(4)
        assert prefaulter.ready_offset >= FILE_SIZE
        # Large syncs: nothing is zeroed, and the margin counts as ready (no wake-ups).
        zeroed.clear()
        small[0] = False
        mapped.wrote_position = FILE_SIZE
        rolled = commitlog.files.last_file_for_write(0)
        while prefaulter.run_once():
            pass
        assert zeroed == []
        assert prefaulter.ready_offset >= rolled.file_from_offset + FILE_SIZE
    finally:
        commitlog.close()


def test_with_faults_off_an_append_within_the_margin_wakes_nothing(tmp_path: Path) -> None:
    # A slave's pwrite appends turn the faults off; each append woke the thread before,
    # for a run that had nothing to do.
    commitlog = _commitlog(tmp_path)
    try:
        mapped = commitlog.files.last_file_for_write(0)
        prefaulter = Prefaulter(commitlog, 256 * 1024)
        prefaulter.skip_commitlog_faults()
        mapped.wrote_position = 4096
        prefaulter.run_once()
        assert not any(mapped.read(0, 8192))  # nothing faulted or written
        prefaulter._wake.clear()
        prefaulter.wakeup(4096 + 64 * 1024)
        assert not prefaulter._wake.is_set()
        # Half the margin on, it runs again (the next file must still be made ahead).
        prefaulter.wakeup(4096 + 256 * 1024)
        assert prefaulter._wake.is_set()
    finally:
        commitlog.close()
