"""The parallel rebuild against the store's own dispatcher: every consume-queue file and
every index file byte for byte, the checkpoint, salvage of corrupt records, and failures
that must leave the store untouched."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from rocketstore import Message, MessageStore
from rocketstore.errors import NotAStoreError
from rocketstore.paths import CONSUME_QUEUE_DIR, INDEX_DIR
from rocketstore.rebuild import driver, passes
from rocketstore.rebuild.driver import RebuildFailedError, rebuild_store
from rocketstore.rebuild.passes import TaskFailure
from rocketstore.rebuild.runners import ProcessRunner, SerialRunner
from tests.unit.rebuild.rebuild_helpers import (
    BASE_MS,
    assert_same_index,
    assert_same_queues,
    build_lmq_store,
    build_store,
    checkpoint_of,
    damage,
    dispatch_reference,
    files_under,
    index_files,
    lmq_config,
    record_offsets,
    small_config,
)

FILE_SIZE = small_config().mapped_file_size_commit_log


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("rebuild") / "store"
    build_store(root)
    return root


@pytest.fixture
def copy(reference: Path, tmp_path: Path) -> Path:
    root = tmp_path / "copy"
    shutil.copytree(reference, root)
    return root


def leftovers(root: Path) -> list[str]:
    return [n for n in os.listdir(root) if n.startswith(driver.WORK_PREFIX)]


@pytest.mark.parametrize("range_bytes", [997, 5000, FILE_SIZE])
def test_serial_rebuild_is_byte_identical(copy: Path, reference: Path, range_bytes: int) -> None:
    shutil.rmtree(copy / CONSUME_QUEUE_DIR)
    shutil.rmtree(copy / INDEX_DIR)
    (copy / "checkpoint").write_bytes(bytes(4096))
    report = rebuild_store(copy, SerialRunner(), config=small_config(), max_range_bytes=range_bytes)
    assert_same_queues(copy, reference)
    assert_same_index(copy, reference)
    assert len(index_files(reference)) > 5  # rolled over many times
    assert report.index_files == len(index_files(reference))
    assert report.corrupt == []
    assert report.ranges >= len(os.listdir(copy / "commitlog"))
    # The checkpoint the store itself writes on close: last record, index end.
    assert checkpoint_of(copy) == checkpoint_of(reference)
    assert leftovers(copy) == []


@pytest.mark.parametrize("range_bytes", [997, 4000, FILE_SIZE])
def test_lmq_units_are_rebuilt_as_the_dispatcher_wrote_them(
    tmp_path: Path, range_bytes: int
) -> None:
    reference = tmp_path / "reference"
    build_lmq_store(reference)
    lmq = [n for n in os.listdir(reference / CONSUME_QUEUE_DIR) if n.startswith("%LMQ%")]
    assert sorted(lmq) == ["%LMQ%a", "%LMQ%b", "%LMQ%c"]
    assert (reference / CONSUME_QUEUE_DIR / "PlainQ" / "1").is_dir()
    copy = tmp_path / "copy"
    shutil.copytree(reference, copy)
    shutil.rmtree(copy / CONSUME_QUEUE_DIR)
    rebuild_store(copy, SerialRunner(), config=lmq_config(), max_range_bytes=range_bytes)
    assert_same_queues(copy, reference)
    assert_same_index(copy, reference)


@pytest.mark.parametrize("parts", [2, 3, 17, 400])
def test_index_files_written_in_parts_are_byte_identical(
    copy: Path, reference: Path, parts: int
) -> None:
    """Each file's entries written as separate blocks, then linked: parts that split a
    slot's chain, parts of one entry, files cut into different numbers of parts."""
    shutil.rmtree(copy / INDEX_DIR)
    report = rebuild_store(
        copy,
        SerialRunner(),
        queues=False,
        config=small_config(),
        index_parts=parts,
        min_index_part_entries=1,
    )
    assert report.index_entries > parts
    assert_same_index(copy, reference)
    assert checkpoint_of(copy) == checkpoint_of(reference)


def test_process_pool_rebuild_is_byte_identical(copy: Path, reference: Path) -> None:
    with ProcessRunner(2) as runner:
        report = rebuild_store(
            copy, runner, config=small_config(), max_range_bytes=3000, min_index_part_entries=5
        )
    assert report.engine == "local"
    assert_same_queues(copy, reference)
    assert_same_index(copy, reference)
    assert checkpoint_of(copy) == checkpoint_of(reference)


def test_rebuilt_store_serves_reads(copy: Path, reference: Path) -> None:
    rebuild_store(copy, SerialRunner(), config=small_config())
    with (
        MessageStore.open(copy, small_config(), read_only=True) as rebuilt,
        MessageStore.open(reference, small_config(), read_only=True) as original,
    ):
        assert rebuilt.topics() == original.topics()
        got = rebuilt.query_messages("Orders", "shared", 64)
        assert [m.commit_log_offset for m in got] == [
            m.commit_log_offset for m in original.query_messages("Orders", "shared", 64)
        ]
        assert got


def test_queues_only_keeps_the_index(copy: Path, reference: Path) -> None:
    before = index_files(copy)
    shutil.rmtree(copy / CONSUME_QUEUE_DIR)
    report = rebuild_store(copy, SerialRunner(), queues=True, index=False, config=small_config())
    assert report.index_files == 0
    assert_same_queues(copy, reference)
    assert index_files(copy) == before


def test_index_only_keeps_the_queues(copy: Path, reference: Path) -> None:
    (copy / CONSUME_QUEUE_DIR / "Orders" / "0" / "00000000000000000000").write_bytes(b"x")
    shutil.rmtree(copy / INDEX_DIR)
    rebuild_store(copy, SerialRunner(), queues=False, index=True, config=small_config())
    assert_same_index(copy, reference)
    assert (copy / CONSUME_QUEUE_DIR / "Orders" / "0" / "00000000000000000000").read_bytes() == b"x"


def test_index_rollover_exactly_full_then_a_keyless_record(tmp_path: Path) -> None:
    """A file that fills with a record's last key is followed by a new, empty file only
    when another record is dispatched (spec 15.2): both cases, against the live store."""
    config = small_config(max_index_num=11)  # 10 entries a file
    for trailing in (0, 1):
        root = tmp_path / f"store{trailing}"
        with MessageStore.open(root, config) as store:
            for i in range(20):  # one UNIQ_KEY each: exactly two full files
                msg = Message("T", b"x", properties={"UNIQ_KEY": f"u{i}"})
                assert store.put(msg, BASE_MS + i).ok
            for i in range(trailing):
                assert store.put(Message("T", b"no keys"), BASE_MS + 100 + i).ok
        copy = tmp_path / f"copy{trailing}"
        shutil.copytree(root, copy)
        report = rebuild_store(copy, SerialRunner(), config=config)
        assert report.index_files == 2 + trailing
        assert_same_index(copy, root)
        assert_same_queues(copy, root)


def test_empty_store_and_zero_filled_last_file(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with MessageStore.open(root, small_config()):
        pass
    with pytest.raises(NotAStoreError, match="no commitlog/"):
        rebuild_store(root, SerialRunner(), config=small_config())
    assert leftovers(root) == []
    (root / "commitlog").mkdir()
    report = rebuild_store(root, SerialRunner(), config=small_config())
    assert (report.records, report.queues, report.index_files) == (0, 0, 0)
    # A store with data and an all-zero file created ahead of need (left by a crash).
    with MessageStore.open(root, small_config()) as store:
        assert store.put(Message("T", b"x", properties={"KEYS": "k"}), BASE_MS).ok
    (root / "commitlog" / f"{FILE_SIZE:020d}").write_bytes(bytes(FILE_SIZE))
    report = rebuild_store(root, SerialRunner(), config=small_config())
    assert (report.records, report.queue_units, report.index_entries) == (1, 1, 1)


def test_corrupt_record_fails_the_job_and_leaves_the_store_untouched(
    copy: Path, reference: Path
) -> None:
    offsets = record_offsets(copy, small_config())
    offset, _size = offsets[len(offsets) // 2]
    damage(copy, offset, 4, b"\x00\x11\x22\x33", FILE_SIZE)  # the magic code
    queues, index = files_under(copy, CONSUME_QUEUE_DIR), index_files(copy)
    with pytest.raises(RebuildFailedError) as caught:
        rebuild_store(copy, SerialRunner(), config=small_config(), max_range_bytes=4096)
    message = str(caught.value)
    assert "CommitLog range [" in message
    assert str(offset) in message
    assert "illegal magic code" in message
    assert files_under(copy, CONSUME_QUEUE_DIR) == queues
    assert index_files(copy) == index
    assert leftovers(copy) == []


@pytest.mark.parametrize(
    ("module", "step"),
    [(passes, "index_part_pass"), (driver, "index_pass"), (passes, "queue_pass")],
)
def test_a_failed_index_or_queue_task_leaves_the_store_untouched(
    copy: Path, monkeypatch: pytest.MonkeyPatch, module: object, step: str
) -> None:
    queues, index = files_under(copy, CONSUME_QUEUE_DIR), index_files(copy)
    checkpoint = (copy / "checkpoint").read_bytes()
    monkeypatch.setattr(module, step, lambda task: TaskFailure("index file 3", "disk"))
    with pytest.raises(RebuildFailedError, match="index file 3: disk"):
        rebuild_store(copy, SerialRunner(), config=small_config())
    assert files_under(copy, CONSUME_QUEUE_DIR) == queues
    assert index_files(copy) == index
    assert (copy / "checkpoint").read_bytes() == checkpoint
    assert leftovers(copy) == []


DAMAGES = {
    "magic": (4, b"\x00\x11\x22\x33"),
    "body length": (84, b"\x00\x00\x7f\xff"),
    "total size": (0, b"\x00\x10\x00\x00"),
    "physical offset": (28, b"\x00\x00\x00\x00\x00\x00\x00\x03"),
}


@pytest.mark.parametrize("kind", sorted(DAMAGES))
@pytest.mark.parametrize("range_bytes", [1500, FILE_SIZE])
def test_skip_corrupt_rebuilds_everything_around_the_damage(
    copy: Path, tmp_path: Path, kind: str, range_bytes: int
) -> None:
    """Salvage: the damaged records are reported (offset and reason) and the queues and
    index are exactly what the dispatcher writes for the CommitLog without them."""
    offsets = record_offsets(copy, small_config())
    victims = dict([offsets[5], offsets[len(offsets) // 2], offsets[-3]])
    at, value = DAMAGES[kind]
    for offset in victims:
        damage(copy, offset, at, value, FILE_SIZE)
    report = rebuild_store(
        copy,
        SerialRunner(),
        config=small_config(),
        skip_corrupt=True,
        max_range_bytes=range_bytes,
    )
    assert sorted(r.offset for r in report.corrupt) == sorted(victims)
    for region in report.corrupt:
        assert region.reason
        assert region.length == victims[region.offset]
    assert report.records == len(offsets) - len(victims)
    expected = tmp_path / "expected"
    dispatch_reference(copy, expected, victims, small_config())
    assert_same_queues(copy, expected)
    assert_same_index(copy, expected)


def test_a_torn_tail_is_not_dispatched_and_not_an_error(copy: Path, tmp_path: Path) -> None:
    """Damage after the last valid record (a write cut by a crash) ends the data, as the
    store's recovery (and the single engine) treats it; it is reported, never skipped
    silently, and fails nothing even without --skip-corrupt."""
    offsets = record_offsets(copy, small_config())
    offset, size = offsets[-1]
    damage(copy, offset, 0, b"\x00\x00\x00\x00", FILE_SIZE)  # TOTALSIZE not yet published
    report = rebuild_store(copy, SerialRunner(), config=small_config(), max_range_bytes=2000)
    assert [(r.offset, r.length) for r in report.torn_tail] == [(offset, None)]
    assert report.corrupt == []
    assert report.records == len(offsets) - 1
    expected = tmp_path / "expected"
    dispatch_reference(copy, expected, {offset: size}, small_config())
    assert_same_queues(copy, expected)
    assert_same_index(copy, expected)


def test_work_left_by_a_dead_rebuild_is_cleared(copy: Path, reference: Path) -> None:
    """A rebuild killed mid-swap: the old queues sit in its work directory and the store has
    none; the next rebuild puts them back before anything else, then clears the leftovers."""
    stale = copy / f"{driver.WORK_PREFIX}dead"
    (stale / "scan").mkdir(parents=True)
    (stale / "scan" / "000000-units.npy").write_bytes(b"spill")
    os.rename(copy / CONSUME_QUEUE_DIR, stale / f"old-{CONSUME_QUEUE_DIR}")
    assert driver.clear_stale_work(str(copy)) == [stale.name]
    assert not stale.exists()
    assert_same_queues(copy, reference)
    (copy / f"{driver.WORK_PREFIX}other").mkdir()
    rebuild_store(copy, SerialRunner(), config=small_config())
    assert leftovers(copy) == []
    assert_same_queues(copy, reference)


def test_index_disabled_builds_no_index(tmp_path: Path) -> None:
    config = small_config(message_index_enable=False)
    root = tmp_path / "store"
    build_store(root, rounds=6, config=config)
    assert index_files(root) == []
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    report = rebuild_store(copy, SerialRunner(), config=config)
    assert report.index_files == 0 and index_files(copy) == []
    assert_same_queues(copy, root)


def test_queue_files_are_synced_before_the_swap(
    copy: Path, reference: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every consume-queue file written is fsynced (and index files flushed) before the
    new directories are swapped in and the checkpoint says they cover every record."""
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)  # every fsync, whoever makes it
    swapped: list[bool] = []
    real_swap = driver._swap_in

    def swap_in(root: str, work: str, swap: list[tuple[str, str]]) -> None:
        written = sorted(str(p) for p in Path(work, CONSUME_QUEUE_DIR).rglob("*") if p.is_file())
        swapped.append(bool(written) and set(written) <= set(synced))
        real_swap(root, work, swap)

    monkeypatch.setattr(driver, "_swap_in", swap_in)
    rebuild_store(copy, SerialRunner(), config=small_config())
    assert swapped == [True]
    assert_same_queues(copy, reference)
