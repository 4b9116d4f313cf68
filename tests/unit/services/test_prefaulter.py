"""The CommitLog prefaulter: faults pages in ahead of the writer without changing a byte,
follows file rolls, and turns itself off (never failing a put) where it cannot work."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.commitlog import CommitLog
from rocketstore.errors import ConfigError
from rocketstore.files import mapped_file
from rocketstore.format.native import native
from rocketstore.services.prefaulter import Prefaulter

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
    monkeypatch.setattr(mapped_file, "native", None)
    commitlog = _commitlog(tmp_path)
    try:
        commitlog.files.last_file_for_write(0)
        prefaulter = Prefaulter(commitlog, 64 * 1024)
        assert not prefaulter.run_once()
        assert not prefaulter.enabled
        prefaulter.wakeup(10)  # a no-op now
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
