"""Scratch space for the rebuild's spills: made only where there is room, removed after the
job, and cleared when the rebuild that made it was killed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections import namedtuple
from pathlib import Path

import pytest

from rocketstore.rebuild import passes, scratch
from rocketstore.rebuild.driver import rebuild_store
from rocketstore.rebuild.runners import SerialRunner
from tests.unit.rebuild.rebuild_helpers import (
    assert_same_index,
    assert_same_queues,
    build_store,
    small_config,
)

Usage = namedtuple("Usage", "total used free")


def test_scratch_is_made_under_the_root_with_the_pid(tmp_path: Path) -> None:
    made = scratch.make_scratch(1024, str(tmp_path))
    assert made is not None
    assert os.path.dirname(made) == str(tmp_path)
    assert os.path.basename(made).startswith(f"{scratch.PREFIX}{os.getpid()}-")


def test_no_scratch_without_the_root_or_room(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert scratch.make_scratch(1024, str(tmp_path / "missing")) is None
    monkeypatch.setattr(shutil, "disk_usage", lambda _path: Usage(100, 0, 1_000))
    assert scratch.make_scratch(1_000, str(tmp_path)) is None  # 600 B of spills, 2x > free
    assert scratch.make_scratch(800, str(tmp_path)) is not None


def test_scratch_of_a_dead_rebuild_is_cleared(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    gone = tmp_path / f"{scratch.PREFIX}{dead.stdout.strip()}-abc"
    alive = tmp_path / f"{scratch.PREFIX}{os.getpid()}-def"
    other = tmp_path / "someone-else"
    for directory in (gone, alive, other):
        directory.mkdir()
        (directory / "spill.npy").write_bytes(b"x")
    assert scratch.clear_dead_scratch(str(tmp_path)) == [gone.name]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([alive.name, other.name])


@pytest.mark.parametrize("use_scratch", [True, False])
def test_rebuild_spills_to_scratch_and_removes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, use_scratch: bool
) -> None:
    reference = tmp_path / "store"
    build_store(reference, rounds=10)
    copy = tmp_path / "copy"
    shutil.copytree(reference, copy)
    root = tmp_path / "shm"
    root.mkdir()
    monkeypatch.setattr(scratch, "SCRATCH_ROOT", str(root))
    spilled: list[str] = []
    real_spill_path = passes._spill_path

    def spill_path(task: passes.ScanTask, kind: str) -> str:
        spilled.append(real_spill_path(task, kind))
        return spilled[-1]

    monkeypatch.setattr(passes, "_spill_path", spill_path)
    rebuild_store(copy, SerialRunner(), config=small_config(), scratch=use_scratch)
    assert spilled
    assert all(p.startswith(str(root)) == use_scratch for p in spilled)
    assert list(root.iterdir()) == []  # removed with the job
    assert_same_queues(copy, reference)
    assert_same_index(copy, reference)


def test_a_runner_without_the_local_attribute_counts_as_not_local(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A runner written against the protocol before ``local`` existed still works: its
    spills stay in the store's work directory and every step runs through it."""
    reference = tmp_path / "store"
    build_store(reference, rounds=5)
    copy = tmp_path / "copy"
    shutil.copytree(reference, copy)
    from rocketstore.rebuild import driver

    def no_scratch(_bytes: int) -> str:
        raise AssertionError("scratch made for a runner not known to be local")

    monkeypatch.setattr(driver, "make_scratch", no_scratch)

    class OldRunner:
        name = "old"
        workers = 2

        def __init__(self) -> None:
            self.calls = 0

        def map(self, fn, tasks, on_done=None):
            self.calls += 1
            return SerialRunner().map(fn, tasks, on_done)

    runner = OldRunner()
    rebuild_store(copy, runner, config=small_config())  # type: ignore[arg-type]
    assert runner.calls == 3  # scan, build and link all went through it
    assert_same_queues(copy, reference)
    assert_same_index(copy, reference)
