"""``MessageStore.undispatched_record``: a cleanly stopped store whose consume queues do
not cover its CommitLog (queues removed, or kept in RocksDB by a RocketMQ 5 broker)."""

from __future__ import annotations

import shutil
from pathlib import Path

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.format.sysflag import TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE

SMALL = StoreConfig(mapped_file_size_commit_log=4096)


def _fill(root: Path, count: int) -> None:
    with MessageStore.open(root, SMALL) as store:
        for i in range(count):
            assert store.put(Message(f"T{i % 3}", b"x" * 300, i % 2)).ok


def test_queues_that_cover_the_commitlog_give_none(tmp_path: Path) -> None:
    _fill(tmp_path / "s", 40)  # several CommitLog files, blank ends included
    with MessageStore.open(tmp_path / "s", read_only=True) as store:
        assert store.undispatched_record() is None


def test_removed_queues_give_the_first_record_they_lack(tmp_path: Path) -> None:
    _fill(tmp_path / "s", 40)
    # Message 39, the newest, is T0's: only the tail past every queue's end is looked at.
    shutil.rmtree(tmp_path / "s" / "consumequeue" / "T0")
    with MessageStore.open(tmp_path / "s", read_only=True) as store:
        found = store.undispatched_record()
        assert found is not None
        assert (found.topic, found.queue_id) == ("T0", 1)
        assert found.commitlog_end == store.commitlog.max_offset()
        assert found.offset < found.commitlog_end
    shutil.rmtree(tmp_path / "s" / "consumequeue")
    with MessageStore.open(tmp_path / "s", read_only=True) as store:
        found = store.undispatched_record()
        assert found is not None and (found.offset, found.topic) == (0, "T0")


def test_records_that_get_no_unit_are_not_counted(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with MessageStore.open(root, SMALL) as store:
        assert store.put(Message("T", b"plain")).ok
        for flag in (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE):
            assert store.put(Message("T", b"no unit", sys_flag=flag)).ok
    with MessageStore.open(root, read_only=True) as store:
        assert store.undispatched_record() is None
