"""Reading a DLedger CommitLog (enableDLegerCommitLog): the store finds it by itself,
reads every record by queue, key and id, stops at a damaged entry, sees entries a broker
appends while it is open, and refuses to write. The stores are rocketstore's own,
framed as a DLedger broker frames them (tests/dledger_helpers.py); the golden tests
check the same against stores RocketMQ 4.9.8 wrote."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.errors import ConfigError
from rocketstore.files.store_dir import with_dledger
from rocketstore.format import dledger_entry as dl
from rocketstore.status import GetStatus
from tests.dledger_helpers import Framed, frame_as_dledger

CONFIG = StoreConfig(
    mapped_file_size_commit_log=8192,
    mapped_file_size_consume_queue=400,
    max_hash_slot_num=16,
    max_index_num=64,
)
COUNT = 100


def _write(root: Path, count: int = COUNT, first: int = 0) -> None:
    with MessageStore.open(root, CONFIG) as store:
        for i in range(first, first + count):
            store.put(
                Message(
                    "TopicA",
                    b"body-%d " % i * 5,
                    queue_id=i % 4,
                    properties={"TAGS": f"t{i % 3}", "KEYS": f"k{i}"},
                )
            )


def _framed(root: Path, keep_plain: int = 0) -> Framed:
    _write(root)
    return frame_as_dledger(root, hash_slot_num=CONFIG.max_hash_slot_num, keep_plain=keep_plain)


def _all_bodies(store: MessageStore) -> list[bytes]:
    bodies = []
    for queue_id in range(4):
        offset = 0
        while True:
            result = store.get_messages("g", "TopicA", queue_id, offset, 32)
            if result.status is not GetStatus.FOUND:
                break
            bodies += [m.body for m in result.messages if m.body is not None]
            offset = result.next_begin_offset
    return sorted(bodies)


@pytest.mark.parametrize("keep_plain", [0, 30], ids=["dledger", "mixed"])
def test_every_message_reads_by_queue_key_and_id(keep_plain: int, tmp_path: Path) -> None:
    framed = _framed(tmp_path, keep_plain)
    with MessageStore.open(tmp_path, CONFIG, read_only=True) as store:
        assert store.commitlog.dirs.dledger == (str(tmp_path / "dledger-n0" / "data"),)
        assert _all_bodies(store) == sorted(b"body-%d " % i * 5 for i in range(COUNT))
        for i, new_offset in enumerate(framed.moved.values()):
            found = store.query_messages("TopicA", f"k{i}")
            assert [m.commit_log_offset for m in found] == [new_offset]
            assert store.view_message(found[0].msg_id) == found[0]
        last = framed.entries[-1]
        assert store.max_commit_log_offset() == last.end
        assert store.recovery_report.records_scanned == COUNT


def _entry_at(root: Path, framed: Framed, number: int) -> tuple[Path, int]:
    entry = framed.entries[number]
    data = root / "dledger-n0" / "data"
    start = entry.pos - entry.pos % CONFIG.mapped_file_size_commit_log
    return data / f"{start:020d}", entry.pos - start


@pytest.mark.parametrize(
    ("field_at", "value", "reason"),
    [
        (8, struct.pack(">q", 77), "index 77 does not follow"),
        (24, struct.pack(">q", 5), "says it is at 5"),
        (48 + 4, b"\0\0\0\0", "DLedger entry 60"),  # the record's magic
        (48 + 100, b"\xff", "body CRC mismatch"),  # a body byte
    ],
    ids=["index", "pos", "record", "crc"],
)
def test_reading_stops_at_a_damaged_entry(
    field_at: int, value: bytes, reason: str, tmp_path: Path
) -> None:
    framed = _framed(tmp_path)
    path, position = _entry_at(tmp_path, framed, 60)
    with open(path, "r+b") as f:
        f.seek(position + field_at)
        f.write(value)
    with MessageStore.open(tmp_path, CONFIG, read_only=True) as store:
        assert store.max_commit_log_offset() == framed.entries[60].pos
        assert reason in store.recovery_report.stop_reason
        assert store.recovery_report.records_scanned == 60
        # Records before the damage are there by queue and key; the damaged one is not.
        assert store.query_messages("TopicA", "k59")
        assert not store.query_messages("TopicA", "k60")


def test_a_reader_sees_entries_appended_while_it_is_open(tmp_path: Path) -> None:
    """The incremental refresh starts at the last entry boundary it knows."""
    framed = _framed(tmp_path)
    path, position = _entry_at(tmp_path, framed, COUNT - 1)
    last = framed.entries[-1]
    tail = path.read_bytes()[position + last.size :]
    path.write_bytes(path.read_bytes()[: position + last.size] + bytes(len(tail)))
    # Hide the last entry, open, then write it back: a broker appending.
    with open(path, "r+b") as f:
        f.seek(position)
        hidden = f.read(last.size)
        f.seek(position)
        f.write(bytes(last.size))
    with MessageStore.open(tmp_path, CONFIG, read_only=True) as store:
        assert store.max_commit_log_offset() == last.pos
        with open(path, "r+b") as f:
            f.seek(position)
            f.write(hidden)
        store.refresh()
        assert store.max_commit_log_offset() == last.end
        assert store.look_message(last.body_offset) is not None


def test_writers_refuse_a_dledger_store_and_leave_it_alone(tmp_path: Path) -> None:
    _framed(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(ConfigError, match=r"DLedger log .* reads it but does not write it"):
        MessageStore.open(tmp_path, CONFIG)
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert not (tmp_path / "abort").exists()


def test_several_members_need_the_self_id(tmp_path: Path) -> None:
    _framed(tmp_path)
    (tmp_path / "dledger-n1" / "data").mkdir(parents=True)
    with pytest.raises(ConfigError, match=r"several members \(dledger-n0, dledger-n1\)"):
        MessageStore.open(tmp_path, CONFIG, read_only=True)
    chosen = CONFIG.replace(enable_dledger_commit_log=True, dledger_self_id="n0")
    with MessageStore.open(tmp_path, chosen, read_only=True) as store:
        assert len(_all_bodies(store)) == COUNT


def test_settings_name_the_log(tmp_path: Path) -> None:
    _framed(tmp_path)
    moved = tmp_path / "elsewhere"
    (tmp_path / "dledger-n0" / "data").rename(moved)
    # Not found where a DLedger log would be: the directory is not a store without settings.
    assert not with_dledger(str(tmp_path), CONFIG).enable_dledger_commit_log
    config = CONFIG.replace(
        enable_dledger_commit_log=True, store_path_dledger_commit_log=str(moved)
    )
    assert config.commit_log_dirs(str(tmp_path)).dledger == (str(moved),)
    with MessageStore.open(tmp_path, config, read_only=True) as store:
        assert len(_all_bodies(store)) == COUNT
    with pytest.raises(ConfigError, match="enableDLegerCommitLog needs dLegerSelfId"):
        CONFIG.replace(enable_dledger_commit_log=True).commit_log_dirs(str(tmp_path))


def test_an_entry_never_spans_files(tmp_path: Path) -> None:
    """The framing's own facts, as the golden store shows them: a blank ends a file an
    entry would not fit, and each record's PHYSICALOFFSET is its entry's pos + 48."""
    framed = _framed(tmp_path)
    size = CONFIG.mapped_file_size_commit_log
    assert any(e.pos % size == 0 and e.pos for e in framed.entries)  # a roll happened
    for entry in framed.entries:
        assert entry.pos // size == (entry.end - 1) // size
    data = tmp_path / "dledger-n0" / "data"
    first = (data / f"{0:020d}").read_bytes()
    ends = max(e.end for e in framed.entries if e.end <= size)
    assert first[ends : ends + 8] == dl.encode_blank(size - ends)


def _files(directory: Path) -> list[bytes]:
    return [p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()]


@pytest.mark.parametrize("keep_plain", [0, 30], ids=["dledger", "mixed"])
def test_the_parallel_rebuild_follows_the_entries(keep_plain: int, tmp_path: Path) -> None:
    """Each file of the DLedger log is one range; the queues and index come out as the
    dispatcher made them (index files compared in order: their names are build times)."""
    from rocketstore.rebuild.driver import rebuild_store
    from rocketstore.rebuild.runners import SerialRunner

    framed = _framed(tmp_path, keep_plain)
    queues, index = _files(tmp_path / "consumequeue"), _files(tmp_path / "index")
    report = rebuild_store(tmp_path, SerialRunner(), config=CONFIG)
    assert report.records == COUNT
    assert report.commit_log_end == framed.entries[-1].end
    assert _files(tmp_path / "consumequeue") == queues
    assert _files(tmp_path / "index") == index


def test_the_parallel_rebuild_stops_at_a_damaged_entry(tmp_path: Path) -> None:
    from rocketstore.rebuild.driver import rebuild_store
    from rocketstore.rebuild.runners import RebuildFailedError, SerialRunner

    framed = _framed(tmp_path)
    path, position = _entry_at(tmp_path, framed, 20)
    with open(path, "r+b") as f:
        f.seek(position + 24)
        f.write(struct.pack(">q", 3))  # pos: not where the entry is
    with pytest.raises(RebuildFailedError, match=r"DLedger entry 20 says it is at 3"):
        rebuild_store(tmp_path, SerialRunner(), config=CONFIG)
    report = rebuild_store(tmp_path, SerialRunner(), config=CONFIG, skip_corrupt=True)
    lost = [e for e in framed.entries if e.pos // 8192 == framed.entries[20].pos // 8192]
    assert report.records == COUNT - len([e for e in lost if e.index >= 20])
    (region,) = report.corrupt
    assert region.offset == framed.entries[20].pos
