"""Planning (ranges, geometry) and the task runners."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from rocketstore import StoreConfig
from rocketstore.errors import ConfigError, NotAStoreError
from rocketstore.rebuild.plan import (
    Geometry,
    commitlog_files,
    detect_geometry,
    plan_ranges,
    split_spans,
)
from rocketstore.rebuild.runners import ProcessRunner, SerialRunner
from tests.unit.rebuild.rebuild_helpers import build_store, small_config


def test_split_spans_cuts_each_file_separately() -> None:
    spans = [(0, 0, 10), (100, 0, 100), (200, 40, 45)]
    assert split_spans(spans, 40) == [
        (0, 0, 10),
        (100, 0, 40),
        (100, 40, 80),
        (100, 80, 100),
        (200, 40, 45),
    ]
    with pytest.raises(ConfigError, match="piece size must be positive"):
        split_spans(spans, 0)


def test_plan_covers_every_file_in_order(tmp_path: Path) -> None:
    root = tmp_path / "store"
    build_store(root, rounds=10)
    files = commitlog_files(str(root))
    file_size = small_config().mapped_file_size_commit_log
    ranges = plan_ranges(str(root), file_size, pieces=7, max_range_bytes=5000)
    assert [r.number for r in ranges] == list(range(len(ranges)))
    for offset, _length in files:
        mine = [r for r in ranges if r.file_offset == offset]
        assert mine[0].start == 0 and mine[-1].end == file_size
        assert all(a.end == b.start for a, b in itertools.pairwise(mine))
        assert all(r.end - r.start <= 5000 for r in mine)
    assert [r.is_last_file for r in ranges].count(True) == len(
        [r for r in ranges if r.file_offset == files[-1][0]]
    )
    with pytest.raises(ConfigError, match="expected 999"):
        plan_ranges(str(root), 999, pieces=2, max_range_bytes=5000)


def test_the_last_files_zero_tail_is_one_range(tmp_path: Path) -> None:
    """Pieces of the last file from the first that starts with zeros to its end are one
    range; zeros inside the data of an earlier piece change nothing."""
    root = tmp_path / "store"
    (root / "commitlog").mkdir(parents=True)
    file_size = 10_000
    data = bytearray(file_size)
    data[:3_500] = b"\x01" * 3_500
    data[1_000:1_008] = bytes(8)  # a zero run at a piece start inside the data
    (root / "commitlog" / f"{0:020d}").write_bytes(bytes(data))
    ranges = plan_ranges(str(root), file_size, pieces=10, max_range_bytes=1_000)
    assert [(r.start, r.end) for r in ranges] == [
        (0, 1_000), (1_000, 2_000), (2_000, 3_000), (3_000, 4_000), (4_000, 10_000)
    ]  # fmt: skip


def test_geometry_comes_from_the_files(tmp_path: Path) -> None:
    root = tmp_path / "store"
    build_store(root, rounds=4)
    found = detect_geometry(str(root), StoreConfig())
    config = small_config()
    assert found == Geometry(
        config.mapped_file_size_commit_log,
        config.consume_queue_file_size,
        config.max_hash_slot_num,
        config.max_index_num,
    )
    with pytest.raises(NotAStoreError, match="no commitlog/"):
        commitlog_files(str(tmp_path / "nothing"))


def _square(x: int) -> int:
    return x * x


@pytest.mark.parametrize("make", [SerialRunner, lambda: ProcessRunner(2)])
def test_runners_keep_task_order_and_report_each_task(make: object) -> None:
    runner = make()  # type: ignore[operator]
    done: list[int] = []
    if isinstance(runner, ProcessRunner):
        with runner:
            results = runner.map(_square, list(range(9)), done.append)
    else:
        results = runner.map(_square, list(range(9)), done.append)
    assert results == [x * x for x in range(9)]
    assert sorted(done) == list(range(9))


def test_process_runner_outside_its_block() -> None:
    with pytest.raises(RuntimeError, match="outside its `with` block"):
        ProcessRunner(1).map(_square, [1])


def test_build_tasks_are_dealt_into_balanced_bundles() -> None:
    from rocketstore.rebuild.passes import (
        IndexPartTask,
        KeyPiece,
        QueueBuild,
        QueuePiece,
        QueueTask,
        build_cost,
        bundle_tasks,
    )

    def part(n: int, entries: int) -> IndexPartTask:
        return IndexPartTask(0, n, "f", 4, 1, 0, (KeyPiece("k", 0, entries),), "s")

    def queue(units: int) -> QueueTask:
        return QueueTask("d", 20, (QueueBuild("T", 0, (QueuePiece("u", 0, units),)),))

    tasks: list[QueueTask | IndexPartTask] = [part(0, 100), part(1, 100), queue(240), queue(10)]
    bundles = bundle_tasks(tasks, 2)
    assert len(bundles) == 2
    assert sorted(map(id, (t for b in bundles for t in b.tasks))) == sorted(map(id, tasks))
    loads = [sum(build_cost(t) for t in b.tasks) for b in bundles]
    assert sorted(loads) == [520, 980]  # largest first, each to the lightest bundle
    assert len(bundle_tasks(tasks[:1], 8)) == 1
    assert bundle_tasks([], 2) == []


def test_scan_tasks_are_bundled_one_a_worker_up_to_a_size() -> None:
    """A runner task per worker (a Spark task costs its slot tens of ms), more when a
    bundle would exceed the size cap; each bundle's ranges in CommitLog order."""
    from rocketstore.rebuild.passes import ScanTask, bundle_scans
    from rocketstore.rebuild.plan import CommitLogRange

    sizes = [512, 512, 512, 512, 300, 300]
    tasks = []
    start = 0
    for number, size in enumerate(sizes):
        tasks.append(ScanTask(None, CommitLogRange(number, 0, start, start + size, False)))  # type: ignore[arg-type]
        start += size
    bundles = bundle_scans(tasks, 2, max_bundle_bytes=10_000)
    assert len(bundles) == 2
    assert [b.bytes for b in bundles] == [1324, 1324]
    for bundle in bundles:
        numbers = [t.commit_range.number for t in bundle.tasks]
        assert numbers == sorted(numbers)
    assert sorted(t.commit_range.number for b in bundles for t in b.tasks) == list(range(6))
    # Past the cap there are more bundles than workers (a big store keeps many tasks).
    assert len(bundle_scans(tasks, 2, max_bundle_bytes=700)) == 4
    assert len(bundle_scans(tasks, 16)) == 6  # never an empty bundle
    assert bundle_scans([], 2) == []
