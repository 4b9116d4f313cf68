"""A CommitLog outside the store root, or spread over several directories (RocketMQ's
``storePathCommitLog`` with ``,`` and ``readOnlyCommitLogStorePaths``: spec 1.1 and
MultiPathMappedFileQueueTest): where files go, reading them back, recovery, retention."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.errors import ConfigError, CorruptDataError, NotAStoreError
from rocketstore.status import GetStatus, PutStatus

FILE_SIZE = 4096


def _config(root: Path, paths: str, read_only: str = "") -> StoreConfig:
    return StoreConfig(
        mapped_file_size_commit_log=FILE_SIZE,
        store_path_commit_log=",".join(str(root / p) for p in paths.split(",")),
        read_only_commit_log_store_paths=",".join(str(root / p) for p in read_only.split(",") if p),
    )


def _message(i: int) -> Message:
    body = f"message {i:04d}".encode().ljust(300, b".")
    return Message("T", body, i % 2, properties={"KEYS": f"k{i}"})


def _put(store: MessageStore, start: int, count: int) -> list[str]:
    ids = []
    for i in range(start, start + count):
        result = store.put(_message(i))
        assert result.status is PutStatus.PUT_OK
        ids.append(result.msg_id)
    store.wait_dispatched()
    return ids


def _placement(root: Path, store: MessageStore) -> list[str]:
    """The directory (relative to ``root``) of each CommitLog file, in offset order."""
    return [os.path.relpath(os.path.dirname(f.path), root) for f in store.commitlog.files.files]


def _round(paths: list[str], files: int) -> list[str]:
    return [paths[i % len(paths)] for i in range(files)]


def _bodies(store: MessageStore) -> list[bytes]:
    found = []
    for queue_id in (0, 1):
        offset = 0
        while (got := store.get_messages("g", "T", queue_id, offset, 32)).messages:
            assert got.status is GetStatus.FOUND
            found += [m.body for m in got.messages if m.body is not None]
            offset = got.next_begin_offset
    return sorted(found)


def test_files_go_round_the_sorted_paths_and_read_back_after_a_restart(tmp_path: Path) -> None:
    config = _config(tmp_path, "logs-c,logs-a,logs-b")
    root = tmp_path / "store"
    with MessageStore.open(root, config) as store:
        ids = _put(store, 0, 60)  # 10 records a file
        placed = _placement(tmp_path, store)
        assert len(placed) >= 5
        assert placed == _round(["logs-a", "logs-b", "logs-c"], len(placed))
    assert not (root / "commitlog").exists()
    with MessageStore.open(root, config) as store:
        assert store.recovery_report.redispatched_records == 0
        assert _bodies(store) == sorted(_message(i).body for i in range(60))
        assert (viewed := store.view_message(ids[40])) is not None
        assert viewed.body == _message(40).body
        assert [m.body for m in store.query_messages("T", "k33")] == [_message(33).body]
        _put(store, 60, 20)
        placed = _placement(tmp_path, store)
        assert placed == _round(["logs-a", "logs-b", "logs-c"], len(placed))
    with MessageStore.open(root, config, read_only=True) as reader:
        assert len(_bodies(reader)) == 80
    # Without the settings the store has no CommitLog: said plainly, not read as empty.
    with pytest.raises(NotAStoreError, match=r"no commitlog/"):
        MessageStore.open(root, read_only=True)
    with pytest.raises(NotAStoreError, match="no CommitLog directory: "):
        MessageStore.open(root, _config(tmp_path, "x,y"), read_only=True)


def test_one_path_elsewhere_holds_the_whole_commitlog(tmp_path: Path) -> None:
    config = StoreConfig(
        mapped_file_size_commit_log=FILE_SIZE, store_path_commit_log=str(tmp_path / "disk2")
    )
    with MessageStore.open(tmp_path / "store", config) as store:
        _put(store, 0, 30)
    assert sorted(os.listdir(tmp_path / "disk2")) == [f"{i * FILE_SIZE:020d}" for i in range(3)]
    with MessageStore.open(tmp_path / "store", config, read_only=True) as reader:
        assert len(_bodies(reader)) == 30


def test_read_only_paths_are_read_but_never_written(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with MessageStore.open(root, _config(tmp_path, "a,b")) as store:
        _put(store, 0, 30)
        before = _placement(tmp_path, store)
        assert before == _round(["a", "b"], len(before))
    # b becomes read-only (an old disk being drained): new files go to a alone.
    config = _config(tmp_path, "a,b", read_only="b")
    with MessageStore.open(root, config) as store:
        assert len(_bodies(store)) == 30
        _put(store, 30, 30)
        placed = _placement(tmp_path, store)
        assert placed[: len(before)] == before
        assert placed[len(before) :] == ["a"] * (len(placed) - len(before)) != []


def test_a_full_path_is_skipped_while_another_has_room(tmp_path: Path) -> None:
    root = tmp_path / "store"
    config = _config(tmp_path, "a,b,c")
    used = {str(tmp_path / "a"): 0.5, str(tmp_path / "b"): 0.9, str(tmp_path / "c"): 0.5}
    for name in "abc":
        (tmp_path / name).mkdir()
    with MessageStore.open(root, config) as store:
        store.retention.disk_usage = lambda path: used.get(path, 0.5)
        report = store.retention.run_once()  # measures each path, as RocketMQ's cleaner
        assert store.commitlog.full_paths == frozenset({str(tmp_path / "b")})
        assert report.disk_ratio == 0.5  # the path with the most room counts
        _put(store, 0, 40)
        placed = _placement(tmp_path, store)
        assert len(placed) >= 3
        assert placed == _round(["a", "c"], len(placed))


def test_recovery_after_a_crash_cuts_the_torn_tail_in_whichever_directory(
    tmp_path: Path,
) -> None:
    root = tmp_path / "store"
    config = _config(tmp_path, "a,b")
    with MessageStore.open(root, config) as store:
        _put(store, 0, 20)  # two files, the second (in b) partly written
        end = store.max_commit_log_offset()
    last = tmp_path / "b" / f"{FILE_SIZE:020d}"
    with open(last, "r+b") as f:  # half a record, as a kill mid-append leaves it
        f.seek(end - FILE_SIZE)
        f.write(b"\x00\x00\x01\x2c\xda\xa3\x20\xa7")
    (root / "abort").touch()
    with MessageStore.open(root, config) as store:
        assert store.max_commit_log_offset() == end
        assert store.recovery_report.abnormal
        assert store.recovery_report.truncated_bytes == 8  # the torn half record
        assert len(_bodies(store)) == 20
        _put(store, 20, 1)
        viewed = store.view_message(store.query_messages("T", "k20")[0].msg_id)
        assert viewed is not None and viewed.body == (_message(20).body)


def test_retention_deletes_old_files_in_every_directory(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with MessageStore.open(root, _config(tmp_path, "a,b")) as store:
        _put(store, 0, 60)
        files = len(store.commitlog.files.files)
        report = store.delete_expired_files(force=True)
        assert report.files_deleted == files - 1  # every file but the newest
        assert len(_placement(tmp_path, store)) == 1
        spare = store.commitlog.files.spare  # the next file, made ahead in its directory
        kept = {store.commitlog.files.files[0].path} | ({spare.path} if spare else set())
        assert {str(tmp_path / d / n) for d in "ab" for n in os.listdir(tmp_path / d)} == kept
        assert store.min_commit_log_offset() == (files - 1) * FILE_SIZE


def test_a_writer_without_the_paths_refuses_to_empty_the_queues(tmp_path: Path) -> None:
    root = tmp_path / "store"
    config = _config(tmp_path, "a,b")
    with MessageStore.open(root, config) as store:
        _put(store, 0, 30)
    careful = StoreConfig(cut_damaged_commitlog=False)  # as the CLI's writers open
    with pytest.raises(CorruptDataError, match=r"no CommitLog file in .*30 units.*30 entries"):
        MessageStore.open(root, careful)
    with MessageStore.open(root, config, read_only=True) as reader:
        assert len(_bodies(reader)) == 30  # nothing was lost
    # RocketMQ's own recovery (the default) empties them, as RocketMQ does.
    with MessageStore.open(root) as store:
        assert store.recovery_report.queue_units_dropped == 30
        assert store.max_offset("T", 0) == 0


def test_a_writer_refuses_a_commitlog_with_a_directory_missing(tmp_path: Path) -> None:
    """A path not mounted: a gap in the files, or the newest files gone while the queues
    point into them. RocketMQ's recovery would cut there and write new files where the
    missing ones belong; the CLI's writers refuse and lose nothing."""
    root = tmp_path / "store"
    config = _config(tmp_path, "a,b")
    with MessageStore.open(root, config) as store:
        _put(store, 0, 60)
        files = [f.path for f in store.commitlog.files.files]
    careful = config.replace(cut_damaged_commitlog=False)
    (tmp_path / "b").rename(tmp_path / "b.unmounted")
    (tmp_path / "b").mkdir()  # the empty mount point
    with pytest.raises(CorruptDataError, match="CommitLog files are missing between"):
        MessageStore.open(root, careful)
    # Only the newest file gone: the queues and index point past the last file left.
    (tmp_path / "b").rmdir()
    (tmp_path / "b.unmounted").rename(tmp_path / "b")
    newest = Path(files[-1])
    newest.rename(tmp_path / "newest")
    with pytest.raises(CorruptDataError, match=r"point to CommitLog offset .* past the last"):
        MessageStore.open(root, careful)
    (tmp_path / "newest").rename(newest)
    with MessageStore.open(root, careful) as store:
        assert len(_bodies(store)) == 60


def test_a_path_that_is_no_directory_is_named_when_a_writer_opens(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("not a directory")
    with pytest.raises(ConfigError, match=r"CommitLog path .*afile is not a directory"):
        MessageStore.open(tmp_path / "store", _config(tmp_path, "a,afile"))
