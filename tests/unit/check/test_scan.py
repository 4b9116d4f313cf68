"""CommitLogScan beside a writer: a record still being copied when the walk reached it, and
finished by the time the scan looked past it, is read as the record it became, not as
damage (the race tests/cli/test_check_live.py met once in CI). Made deterministic by
finishing the record from inside the scan's own look past the stop."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rocketstore.check import scan as scan_module
from rocketstore.check.scan import CommitLogScan
from tests.cli.cli_helpers import CONFIG, build_store, commitlog_file

COUNT = 120


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("scan") / "store"
    build_store(root, COUNT)
    return root


@pytest.fixture
def store(template: Path, tmp_path: Path) -> Path:
    root = tmp_path / "store"
    shutil.copytree(template, root)
    return root


def _offsets(root: Path) -> list[tuple[int, int]]:
    """(offset, size) of every record of a sound store."""
    return [(r.offset, r.view.size) for r in CommitLogScan(str(root)).records()]


def _in_flight(
    root: Path, offset: int, size: int, hole: slice
) -> tuple[Path, int, bytes, Callable[[], None]]:
    """Zero ``hole`` of the record at ``offset`` (as a writer that has not copied those
    bytes yet); returns a callable that copies them in (the writer finishing)."""
    path = commitlog_file(root, offset)
    position = offset % CONFIG.mapped_file_size_commit_log
    with open(path, "r+b") as f:
        f.seek(position)
        whole = f.read(size)
        torn = bytearray(whole)
        torn[hole] = bytes(len(torn[hole]))
        f.seek(position)
        f.write(torn)

    def finish() -> None:
        with open(path, "r+b") as f:
            f.seek(position)
            f.write(whole)

    return path, position, whole, finish


def _finishing(monkeypatch: pytest.MonkeyPatch, name: str, finish: Callable[[], None]) -> list[int]:
    """Patch the scan's ``name`` so its first call finishes the record first; the calls
    are counted."""
    real = getattr(scan_module, name)
    calls: list[int] = []

    def patched(*args: Any) -> Any:
        if not calls:
            finish()
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(scan_module, name, patched)
    return calls


@pytest.mark.parametrize(
    ("hole", "looks_past_with"),
    [
        (slice(40, None), "readable_record_after"),  # the header is there, the rest is not
        (slice(0, 8), "first_nonzero"),  # all but its size and magic
    ],
    ids=["tail-not-copied", "head-not-copied"],
)
def test_a_record_finished_while_the_scan_looked_past_it_is_no_damage(
    store: Path, monkeypatch: pytest.MonkeyPatch, hole: slice, looks_past_with: str
) -> None:
    records = _offsets(store)
    offset, size = records[len(records) // 2]
    *_, finish = _in_flight(store, offset, size, hole)
    calls = _finishing(monkeypatch, looks_past_with, finish)
    scan = CommitLogScan(str(store), resume_after_damage=True)
    assert [(r.offset, r.view.size) for r in scan.records()] == records
    assert calls, "the scan never looked past the record"
    assert scan.issues == [] and scan.damaged == []


def test_a_record_that_stays_torn_is_still_damage(store: Path) -> None:
    records = _offsets(store)
    (offset, size), (following, _) = records[60], records[61]
    _in_flight(store, offset, size, slice(40, None))
    scan = CommitLogScan(str(store), resume_after_damage=True)
    found = [r.offset for r in scan.records()]
    assert offset not in found and following in found
    assert [(i.offset, i.kind) for i in scan.issues] == [(offset, "structure")]
    assert scan.damaged == [(offset, following)]
