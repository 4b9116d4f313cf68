"""Retention, after RocketMQ's DefaultMessageStoreCleanFilesTest and
MappedFileQueueTest.testDeleteExpiredFileByTime (spec sections 9 and 11).

Geometry as in the Java test: CommitLog and consume-queue files of 128 bytes (the queue
size rounds up to 140 = 7 units), 7 entries per index file, and messages of exactly 120
bytes, so that every CommitLog file holds one message and every queue and index file seven.
Disk usage, clock and the pause between deletions are fakes; the background thread never
fires (one-hour interval), rounds are run with ``run_once``.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from rocketstore import (
    ConfigError,
    GetStatus,
    Message,
    MessageStore,
    PutStatus,
    ReadOnlyStoreError,
    StoreConfig,
)
from rocketstore.errors import FileRemovedError
from rocketstore.format import record as rec
from rocketstore.format.properties import encode_properties_str
from rocketstore.services.retention import RetentionReport, Trigger, disk_usage_ratio
from rocketstore.status import RunningFlags

TOPIC = "Clean"
GROUP = "GROUP_A"
FILE_SIZE = 128
MESSAGE_SIZE = 120
NOW = 1_700_000_000.0  # the fake clock, epoch seconds
HOUR = time.localtime(NOW).tm_hour
THIS_HOUR = f"{HOUR:02d}"
OTHER_HOUR = f"{(HOUR + 12) % 24:02d}"
BASE_MS = 1_699_990_000_000  # store time of message 0; message i is i seconds later


class FakeDisk:
    """``disk_usage`` provider: one ratio for every path, changed by the test."""

    def __init__(self, ratio: float = 0.5):
        self.ratio = ratio
        self.paths: list[str] = []

    def __call__(self, path: str) -> float:
        self.paths.append(path)
        return self.ratio


@dataclass
class Rig:
    store: MessageStore
    disk: FakeDisk
    now: list[float] = field(default_factory=lambda: [NOW])
    sleeps: list[float] = field(default_factory=list)

    def advance(self, seconds: float) -> None:
        self.now[0] += seconds

    @property
    def commitlog_dir(self) -> str:
        return os.path.join(self.store.root, "commitlog")

    def counts(self) -> tuple[int, int, int]:
        """Files on disk: (CommitLog, consume queue TOPIC/0, index)."""
        root = self.store.root
        return (
            len(os.listdir(self.commitlog_dir)),
            len(os.listdir(os.path.join(root, "consumequeue", TOPIC, "0"))),
            len(os.listdir(os.path.join(root, "index"))),
        )


def _config(**changes: object) -> StoreConfig:
    base = StoreConfig(
        mapped_file_size_commit_log=FILE_SIZE,
        mapped_file_size_consume_queue=FILE_SIZE,
        max_hash_slot_num=16,
        max_index_num=8,
        file_reserved_time=1,
        delete_when=OTHER_HOUR,
        clean_resource_interval=3_600_000,
        # These tests count the files on disk; no spare CommitLog file made ahead.
        commit_log_prefault_bytes=0,
    )
    return base.replace(**changes)


def _key(i: int) -> str:
    return f"k{i:03d}"


def _message(i: int) -> Message:
    properties = {"KEYS": _key(i)}
    fixed = 91 + len(TOPIC) + len(encode_properties_str(properties).encode())
    body = f"body {i:04d}".encode().ljust(MESSAGE_SIZE - fixed, b".")
    assert len(body) >= 9
    return Message(TOPIC, body, properties=properties, born_timestamp=BASE_MS)


def _age(rig: Rig, old: Iterable[int]) -> None:
    """Files in ``old`` were last modified 2 h ago (file_reserved_time is 1 h), the others
    a minute ago."""
    old_set = set(old)
    for number, mapped in enumerate(rig.store.commitlog.files.files):
        stamp = NOW - 2 * 3600 if number in old_set else NOW - 60
        os.utime(mapped.path, (stamp, stamp))


def _open(path: Path, count: int = 55, old: Iterable[int] = range(15), **changes: object) -> Rig:
    store = MessageStore.open(path, _config(**changes))
    rig = Rig(store, FakeDisk())
    store.retention.disk_usage = rig.disk
    store.retention.clock = lambda: rig.now[0]
    store.retention.sleep = rig.sleeps.append
    for i in range(count):
        result = store.put(_message(i), store_timestamp=BASE_MS + i * 1000)
        assert result.ok and result.size == MESSAGE_SIZE
    store.wait_dispatched()
    store.flush()  # before the mtimes are set: a later msync must not touch them
    _age(rig, old)
    return rig


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    opened = _open(tmp_path / "store")
    yield opened
    opened.store.close()


def _body(store: MessageStore, commit_log_offset: int) -> bytes | None:
    found = store.look_message(commit_log_offset)
    return found.body if found is not None else None


# --- the geometry ------------------------------------------------------------------------


def test_each_commitlog_file_holds_one_message_and_queue_and_index_files_seven(rig: Rig) -> None:
    assert rig.counts() == (55, 8, 8)  # 55 = 7 x 7 + 6 in queue and index
    assert rig.store.min_offset(TOPIC, 0) == 0
    assert rig.store.max_offset(TOPIC, 0) == 55
    assert _body(rig.store, 54 * FILE_SIZE) == _message(54).body


# --- when files are deleted ------------------------------------------------------------------


def test_time_up_deletes_expired_files_at_most_ten_per_round(tmp_path: Path) -> None:
    rig = _open(tmp_path, delete_when=f"{(HOUR + 1) % 24:02d};{THIS_HOUR}")
    with rig.store:
        first = rig.store.retention.run_once()
        assert first.trigger is Trigger.TIME
        assert len(first.commitlog_files) == 10
        assert rig.counts() == (45, 7, 7)  # floor(10 / 7) queue and index files
        assert rig.sleeps[:9] == [0.1] * 9  # a pause between deletions, none after the last

        second = rig.store.retention.run_once()
        assert len(second.commitlog_files) == 5
        assert rig.counts() == (40, 6, 6)  # floor(15 / 7)

        third = rig.store.retention.run_once()  # file 15 is young: nothing behind it goes
        assert third.files_deleted == 0
        assert rig.counts() == (40, 6, 6)
        assert rig.store.min_commit_log_offset() == 15 * FILE_SIZE
        assert rig.store.min_offset(TOPIC, 0) == 15
        assert rig.store.max_offset(TOPIC, 0) == 55


def test_space_above_max_used_ratio_deletes_expired_files(rig: Rig) -> None:
    rig.disk.ratio = 0.75  # not above 75 %, and not the hour: nothing to do
    idle = rig.store.retention.run_once()
    assert idle.trigger is None and idle.files_deleted == 0

    rig.disk.ratio = 0.80
    report = rig.store.retention.run_once()
    assert report.trigger is Trigger.SPACE
    assert "disk_max_used_space_ratio 75%" in report.trigger_reason
    assert not report.clean_immediately
    assert len(report.commitlog_files) == 10
    assert all(d.reason.startswith("expired") for d in report.commitlog_files)
    assert len(rig.store.retention.run_once().commitlog_files) == 5
    assert rig.store.retention.run_once().files_deleted == 0
    assert rig.counts() == (40, 6, 6)
    assert not rig.store.running_flags & RunningFlags.DISK_FULL


def test_an_unmeasurable_disk_counts_as_full_for_retention(rig: Rig) -> None:
    rig.disk.ratio = -1.0  # RocketMQ: ratio < 0 also means "reclaim space"
    report = rig.store.retention.run_once()
    assert report.trigger is Trigger.SPACE
    assert len(report.commitlog_files) == 10
    assert not report.disk_full


def test_above_the_forcible_ratio_files_go_regardless_of_age(rig: Rig) -> None:
    rig.disk.ratio = 0.86
    deleted = [len(rig.store.retention.run_once().commitlog_files) for _ in range(7)]
    assert deleted == [10, 10, 10, 10, 10, 4, 0]  # never the newest file
    assert rig.counts() == (1, 1, 1)
    assert rig.store.min_offset(TOPIC, 0) == 54
    assert rig.store.max_offset(TOPIC, 0) == 55
    result = rig.store.get_messages(GROUP, TOPIC, 0, 54)
    assert result.status is GetStatus.FOUND
    assert [m.body for m in result.messages] == [_message(54).body]
    assert rig.store.running_flags.writeable  # 86 % is not above the warning level


def test_forcible_deletion_can_be_disabled(tmp_path: Path) -> None:
    rig = _open(tmp_path, clean_file_forcibly_enable=False)
    with rig.store:
        rig.disk.ratio = 0.86
        assert len(rig.store.retention.run_once().commitlog_files) == 10
        assert len(rig.store.retention.run_once().commitlog_files) == 5
        assert rig.store.retention.run_once().files_deleted == 0


def test_manual_delete_ignores_hour_and_disk(tmp_path: Path) -> None:
    rig = _open(tmp_path, disk_max_used_space_ratio=99)  # clamped to 95
    with rig.store:
        assert rig.store.retention.run_once().files_deleted == 0

        report = rig.store.delete_expired_files()
        assert report.trigger is Trigger.MANUAL
        assert len(report.commitlog_files) == 15  # two rounds of the batch in one call
        assert len(report.queue_files) == 2 and len(report.index_files) == 2
        assert rig.counts() == (40, 6, 6)

        forced = rig.store.delete_expired_files(force=True)
        assert len(forced.commitlog_files) == 39
        assert all("force=True" in d.reason for d in forced.commitlog_files)
        assert rig.counts() == (1, 1, 1)
        assert rig.store.min_offset(TOPIC, 0) == 54


def test_dry_run_reports_what_and_why_without_deleting(rig: Rig) -> None:
    report = rig.store.delete_expired_files(dry_run=True)
    assert report.dry_run
    assert len(report.commitlog_files) == 15
    assert report.min_commit_log_offset == 15 * FILE_SIZE
    assert [os.path.basename(d.path) for d in report.queue_files] == [
        f"{0:020d}",
        f"{140:020d}",
    ]
    assert len(report.index_files) == 2
    assert "file_reserved_time is 1 h" in report.commitlog_files[0].reason
    assert "below the CommitLog min offset 1920" in report.queue_files[0].reason
    assert report.summary().startswith("would delete 15 CommitLog, 2 consume-queue and 2 index")
    assert rig.counts() == (55, 8, 8)

    plan = rig.store.retention.plan()
    assert plan == report.deletions()
    done = rig.store.delete_expired_files()
    assert [d.path for d in done.deletions()] == [d.path for d in plan]
    assert not any(os.path.exists(path) for path, _ in plan)

    forced_plan = rig.store.retention.plan(force=True)
    assert len([d for d in forced_plan if "commitlog" in d.path]) == 39


def test_disk_full_flag_is_set_and_cleared(rig: Rig) -> None:
    rig.disk.ratio = 0.90  # not above the warning level
    assert not rig.store.retention.run_once().disk_full

    rig.disk.ratio = 0.91
    report = rig.store.retention.run_once()
    assert report.disk_full and report.disk_full_changed
    assert rig.store.running_flags & RunningFlags.DISK_FULL
    assert len(report.commitlog_files) == 10  # above 85 % as well: deleted regardless of age
    refused = rig.store.put(_message(99))
    assert refused.status is PutStatus.SERVICE_NOT_AVAILABLE
    assert "disk is full" in refused.reason
    batch = rig.store.put_batch([_message(98)])
    assert batch[0].status is PutStatus.SERVICE_NOT_AVAILABLE

    again = rig.store.retention.run_once()
    assert again.disk_full and not again.disk_full_changed

    rig.disk.ratio = 0.60
    cleared = rig.store.retention.run_once()
    assert not cleared.disk_full and cleared.disk_full_changed
    assert not rig.store.running_flags & RunningFlags.DISK_FULL
    assert rig.store.put(_message(99)).ok


def test_a_full_disk_is_not_an_abnormal_shutdown(tmp_path: Path) -> None:
    rig = _open(tmp_path, count=3)
    rig.disk.ratio = 0.95
    assert rig.store.retention.run_once().disk_full
    rig.store.close()
    assert not os.path.exists(tmp_path / "abort")  # the files are consistent


def test_no_holes_and_never_the_newest(tmp_path: Path) -> None:
    """MappedFileQueueTest.testDeleteExpiredFileByTime: 50 files, 0-4 and 21-49 old: the
    deletion stops at the first young file, 45 remain."""
    rig = _open(tmp_path, count=50, old=[*range(5), *range(21, 50)], delete_file_batch_max=100)
    with rig.store:
        assert len(rig.store.delete_expired_files().commitlog_files) == 5
        assert rig.counts()[0] == 45
        _age(rig, range(45))  # now every file is old, the newest too
        rig.store.delete_expired_files()
        assert rig.counts()[0] == 1
        assert os.listdir(rig.commitlog_dir) == [f"{49 * FILE_SIZE:020d}"]


# --- readers -------------------------------------------------------------------------------


def test_a_file_held_by_a_reader_is_not_unmapped_under_it(rig: Rig) -> None:
    rig.store.config.delete_when = THIS_HOUR
    first = rig.store.commitlog.files.files[0]
    assert first.hold()  # a reader, e.g. a consumer mid-copy, holds the oldest file

    report = rig.store.retention.run_once()
    assert report.commitlog_files == []  # no hole: nothing behind it goes either
    assert report.held_files == [first.path]
    assert os.path.exists(first.path)
    # The holder still reads real bytes ...
    view = rec.read_record(first.read(0, MESSAGE_SIZE), 0)
    assert isinstance(view, rec.RecordView) and view.queue_offset == 0
    # ... while new readers see the file as gone.
    assert rig.store.look_message(0) is None
    assert rig.store.min_commit_log_offset() == FILE_SIZE
    pulled = rig.store.get_messages(GROUP, TOPIC, 0, 0)
    assert pulled.status is GetStatus.OFFSET_TOO_SMALL and pulled.next_begin_offset == 1

    first.release()
    after = rig.store.retention.run_once()
    assert after.commitlog_files[0].path == first.path
    assert after.commitlog_files[0].reason == "retired earlier while a reader held it"
    assert len(after.commitlog_files) == 10
    assert not os.path.exists(first.path)


def test_a_file_held_too_long_is_deleted_and_unmapped_on_release(rig: Rig) -> None:
    rig.store.config.delete_when = THIS_HOUR
    first = rig.store.commitlog.files.files[0]
    assert first.hold()
    assert rig.store.retention.run_once().held_files == [first.path]
    rig.advance(119)
    assert rig.store.retention.run_once().held_files == [first.path]

    rig.advance(1)  # destroy_mapped_file_interval_forcibly: 120 s
    report = rig.store.retention.run_once()
    assert report.commitlog_files[0].path == first.path
    assert "destroy_mapped_file_interval_forcibly" in report.commitlog_files[0].reason
    assert not os.path.exists(first.path)
    assert first.read(0, 4) == MESSAGE_SIZE.to_bytes(4, "big")  # still mapped for its holder

    first.release()  # the last reader out unmaps it
    with pytest.raises(FileRemovedError):
        first.read(0, 4)


def test_readers_running_during_retention_see_statuses_never_garbage(rig: Rig) -> None:
    errors: list[BaseException] = []
    reads = [0]
    done = threading.Event()
    allowed = {
        GetStatus.FOUND,
        GetStatus.OFFSET_TOO_SMALL,
        GetStatus.MESSAGE_WAS_REMOVING,
        GetStatus.OFFSET_FOUND_NULL,
    }

    def read_all() -> None:
        try:
            while not done.is_set():
                for q in range(55):
                    result = rig.store.get_messages(GROUP, TOPIC, 0, q, 4)
                    assert result.status in allowed, result.status
                    for m in result.messages:
                        assert m.body == _message(m.queue_offset).body
                    body = _body(rig.store, q * FILE_SIZE)
                    assert body is None or body == _message(q).body
                    for m in rig.store.query_messages(TOPIC, _key(q)):
                        assert m.body == _message(q).body
                    reads[0] += 1
        except BaseException as e:
            errors.append(e)

    readers = [threading.Thread(target=read_all) for _ in range(3)]
    for reader in readers:
        reader.start()
    try:
        rig.disk.ratio = 0.86
        # A round that meets a held file stops there: retry. Bounded by time, not by a
        # count of rounds: on a loaded machine the readers hold files through more rounds.
        deadline = time.monotonic() + 60
        while rig.counts()[0] != 1 and time.monotonic() < deadline:
            rig.store.retention.run_once()
    finally:
        done.set()
        for reader in readers:
            reader.join()
    assert not errors, errors[0]
    assert reads[0] > 0
    assert rig.counts() == (1, 1, 1)


def test_after_cleanup_every_remaining_message_is_readable(tmp_path: Path) -> None:
    path = tmp_path / "store"
    rig = _open(path)
    with rig.store as store:
        store.delete_expired_files()
        _check_after_cleanup(store)
    with MessageStore.open(path, _config()) as store:  # and after a restart
        assert not store.recovery_report.truncated_bytes
        _check_after_cleanup(store)


def _check_after_cleanup(store: MessageStore) -> None:
    assert store.min_commit_log_offset() == 15 * FILE_SIZE
    assert store.min_offset(TOPIC, 0) == 15
    assert store.max_offset(TOPIC, 0) == 55
    for i in range(15, 55):
        assert _body(store, i * FILE_SIZE) == _message(i).body  # by offset
        found = store.query_messages(TOPIC, _key(i))  # by key
        assert [m.commit_log_offset for m in found] == [i * FILE_SIZE]
    assert store.query_messages(TOPIC, _key(3)) == []
    assert _body(store, 3 * FILE_SIZE) is None
    assert store.offset_by_time(TOPIC, 0, BASE_MS + 20_000) == 20  # by time
    assert store.offset_by_time(TOPIC, 0, BASE_MS) == 15
    pulled = store.get_messages(GROUP, TOPIC, 0, 15, 32)
    assert pulled.status is GetStatus.FOUND
    assert pulled.messages[0].body == _message(15).body
    too_small = store.get_messages(GROUP, TOPIC, 0, 3)
    assert too_small.status is GetStatus.OFFSET_TOO_SMALL
    assert too_small.next_begin_offset == 15


def test_a_read_only_opener_follows_the_writers_deletions(rig: Rig) -> None:
    with MessageStore.open(rig.store.root, _config(), read_only=True) as reader:
        assert reader.get_messages(GROUP, TOPIC, 0, 0).status is GetStatus.FOUND
        with pytest.raises(ReadOnlyStoreError):
            reader.delete_expired_files()
        reader.retention.clock = lambda: NOW
        # The rig's disk, not this machine's: on a disk above disk_max_used_space_ratio
        # the dry run would (rightly) list every file but the newest.
        reader.retention.disk_usage = rig.disk
        assert len(reader.delete_expired_files(dry_run=True).commitlog_files) == 15

        rig.store.delete_expired_files()
        reader.refresh()  # list the directories now, not in up to 50 ms
        result = reader.get_messages(GROUP, TOPIC, 0, 0)
        assert result.status is GetStatus.OFFSET_TOO_SMALL
        assert result.next_begin_offset == 15
        assert reader.look_message(0) is None
        assert reader.query_messages(TOPIC, _key(3)) == []
        assert [m.body for m in reader.query_messages(TOPIC, _key(20))] == [_message(20).body]
        assert len(reader.index.files) == 6


# --- configuration and the default disk provider --------------------------------------------


def test_disk_usage_ratio_is_a_whole_percent(tmp_path: Path) -> None:
    ratio = disk_usage_ratio(str(tmp_path))
    assert 0 < ratio <= 1
    assert round(ratio * 100, 6) == int(round(ratio * 100, 6))
    assert disk_usage_ratio(str(tmp_path / "missing")) == -1.0


def test_disk_usage_ratio_counts_bytes_about_to_be_written(tmp_path: Path) -> None:
    st = os.statvfs(tmp_path)
    entire = (st.f_blocks - st.f_bfree + st.f_bavail) * st.f_frsize
    now = disk_usage_ratio(str(tmp_path))
    # A tenth of the filesystem more: ten points more (each rounded up to a whole percent).
    later = disk_usage_ratio(str(tmp_path), entire // 10)
    assert now + 0.09 <= later <= now + 0.11
    assert disk_usage_ratio(str(tmp_path), 0) == now


def test_delete_when_must_name_hours(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="delete_when"):
        MessageStore.open(tmp_path, _config(delete_when="4am"))
    with pytest.raises(ConfigError, match="delete_when"):
        MessageStore.open(tmp_path, _config(delete_when="24"))


def test_the_background_service_runs_rounds(tmp_path: Path) -> None:
    rig = _open(tmp_path, count=20)
    with rig.store as store:
        store.retention.shutdown()
        store.config.clean_resource_interval = 1
        rig.disk.ratio = 0.80
        ran = threading.Event()
        real_run_once = store.retention.run_once

        def run_once_and_signal() -> RetentionReport:
            report = real_run_once()
            if report.commitlog_files:
                ran.set()
            return report

        store.retention.run_once = run_once_and_signal  # type: ignore[method-assign]
        store.retention.start()
        assert ran.wait(timeout=10)
    assert rig.counts()[0] < 20
