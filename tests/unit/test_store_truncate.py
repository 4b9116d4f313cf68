"""MessageStore.truncate_commitlog: a slave whose CommitLog has more than its master's cuts
it back (queues, index and CommitLog), keeps the cut bytes beside the store, then takes
the master's bytes from there byte-identical; refusals change nothing."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.store import TruncateStatus
from tests.unit.test_store_replicated import (
    TOPIC,
    _commitlog_files,
    _config,
    _fill,
    _master_bytes,
    _queue_contents,
)


@pytest.fixture
def master(tmp_path: Path) -> Iterator[MessageStore]:
    store = MessageStore.open(tmp_path / "master", _config())
    _fill(store, 60)
    yield store
    store.close()


def _replicate(master: MessageStore, slave: MessageStore, start: int = 0) -> None:
    for offset, data in _master_bytes(master, start):
        slave.append_replicated(offset, data)


def _put(store: MessageStore, i: int) -> int:
    result = store.put(
        Message(topic=TOPIC, queue_id=i % 3, body=b"x" * 50, properties={"KEYS": f"k{i}"})
    )
    assert result.ok
    return result.commit_log_offset + result.size


def test_slave_ahead_is_cut_back_and_then_follows(master: MessageStore, tmp_path: Path) -> None:
    # The new master had the old one's first 60 messages (it was the slave that lagged);
    # this slave got 30 more from the old master before it died.
    new_master = MessageStore.open(tmp_path / "new-master", _config())
    _replicate(master, new_master)
    new_master.close()
    common = master.max_commit_log_offset()
    for i in range(100, 130):
        _put(master, i)
    slave = MessageStore.open(tmp_path / "slave", _config())
    with slave, MessageStore.open(tmp_path / "new-master", _config()) as new_master:
        _replicate(master, slave)
        slave_end = slave.max_commit_log_offset()
        assert slave_end == master.max_commit_log_offset() > common
        file_end = common - common % 8192 + 8192
        cut_bytes = slave.read_commitlog(common, min(slave_end, file_end) - common)
        assert cut_bytes
        slave.wait_dispatched()
        queue_units = slave.max_offset(TOPIC, 0)

        report = slave.truncate_commitlog(common, note="master 127.0.0.1:1 ends there")
        assert report.status is TruncateStatus.TRUNCATED
        assert (report.old_max_offset, report.offset) == (slave_end, common)
        assert report.bytes_cut == slave_end - common
        assert report.queue_units_dropped == 30
        assert report.index_entries_dropped >= 30
        assert slave.max_commit_log_offset() == common
        assert slave.max_offset(TOPIC, 0) == new_master.max_offset(TOPIC, 0) < queue_units
        assert slave.query_messages(TOPIC, "k110") == []
        assert len(slave.query_messages(TOPIC, "k7")) == 1
        # The cut bytes are kept, with what they were.
        kept = Path(report.kept_dir)
        assert kept.parent == Path(slave.root) and kept.name.startswith("truncated-")
        manifest = json.loads((kept / "truncation.json").read_text())
        assert manifest["truncatedTo"] == common and manifest["commitLogMaxOffset"] == slave_end
        assert manifest["reason"] == "master 127.0.0.1:1 ends there"
        first = manifest["pieces"][0]
        assert first["from"] == common
        assert cut_bytes.startswith((kept / first["file"]).read_bytes())
        assert sum(p["to"] - p["from"] for p in manifest["pieces"]) == slave_end - common

        # The new master goes on; the slave takes its bytes from the cut and ends
        # byte-identical to it.
        for i in range(200, 240):
            _put(new_master, i)
        _replicate(new_master, slave, common)
        new_master.flush()
        slave.flush()
        assert _commitlog_files(slave) == _commitlog_files(new_master)
        assert _queue_contents(slave) == _queue_contents(new_master)
        assert len(slave.query_messages(TOPIC, "k230")) == 1
        assert slave.query_messages(TOPIC, "k110") == []
        expected = _queue_contents(new_master)
    with MessageStore.open(tmp_path / "slave", _config()) as reopened:
        assert _queue_contents(reopened) == expected


def _written_files(store: MessageStore) -> dict[str, bytes]:
    """The CommitLog files holding data (not a spare the prefaulter made ahead)."""
    return {name: data for name, data in _commitlog_files(store).items() if any(data)}


def test_refusals_change_nothing(master: MessageStore, tmp_path: Path) -> None:
    pieces = _master_bytes(master)
    slave = MessageStore.open(tmp_path / "slave", _config())
    with slave:
        # A slave that started at the master's second file.
        for offset, data in pieces[1:]:
            slave.append_replicated(offset, data)
        low, high = slave.min_commit_log_offset(), slave.max_commit_log_offset()
        assert low == pieces[1][0] > 0
        before = _written_files(slave)

        assert slave.truncate_commitlog(high).status is TruncateStatus.NOTHING_TO_CUT
        assert slave.truncate_commitlog(high + 100).status is TruncateStatus.NOTHING_TO_CUT
        assert slave.truncate_commitlog(high - 1).status is TruncateStatus.NOT_A_RECORD_BOUNDARY
        assert slave.truncate_commitlog(low).status is TruncateStatus.BELOW_MIN_OFFSET
        report = slave.truncate_commitlog(low - 1)
        assert report.status is TruncateStatus.BELOW_MIN_OFFSET
        assert "BELOW_MIN_OFFSET" in report.summary()
        assert slave.max_commit_log_offset() == high
        assert _written_files(slave) == before
        assert not [n for n in os.listdir(slave.root) if n.startswith("truncated-")]

        # Allowed: everything goes (kept aside), and the slave starts again from the
        # master's first file.
        report = slave.truncate_commitlog(0, allow_empty=True)
        assert report.status is TruncateStatus.TRUNCATED
        assert report.bytes_cut == high - low
        assert slave.max_commit_log_offset() == 0
        assert slave.max_offset(TOPIC, 0) == 0
        kept = Path(report.kept_dir)
        assert {p.name for p in kept.iterdir()} == {
            "truncation.json",
            *(f"{o:020d}" for o, _ in pieces[1:]),
        }
        _replicate(master, slave)
        master.flush()
        slave.flush()
        assert _commitlog_files(slave) == _commitlog_files(master)
        assert _queue_contents(slave) == _queue_contents(master)


def test_read_only_store_refuses(master: MessageStore) -> None:
    master.flush()
    with MessageStore.open(master.root, StoreConfig(), read_only=True) as reader:
        from rocketstore.errors import ReadOnlyStoreError

        with pytest.raises(ReadOnlyStoreError):
            reader.truncate_commitlog(0)
