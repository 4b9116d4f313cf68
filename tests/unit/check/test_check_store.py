"""``rocketstore.check.check_store`` called from Python, as Spark jobs, the broker and
scripts call it: typed results on a sound and on damaged stores, repair's actions and
refusals, and no CLI (click) on the way."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rocketstore import MessageStore
from rocketstore.check import (
    CheckStatus,
    CutOutcome,
    RebuildOutcome,
    RepairError,
    check_store,
)
from rocketstore.check.scan import CommitLogScan, ScannedRecord
from rocketstore.errors import ConfigError, StoreLockedError
from tests.cli.cli_helpers import CONFIG, build_store, commitlog_file, flip_byte

COUNT = 300


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("check") / "store"
    build_store(root, COUNT)
    return root


@pytest.fixture
def store(template: Path, tmp_path: Path) -> Path:
    root = tmp_path / "store"
    shutil.copytree(template, root)
    return root


def _records(root: Path) -> list[tuple[int, int]]:
    """(offset, body position within its file) of every record, in CommitLog order."""
    found: list[tuple[int, int]] = []
    record: ScannedRecord
    for record in CommitLogScan(str(root), check_crc=False).records():
        found.append((record.offset, record.view.body_position))
    return found


def _flip_magic(root: Path, offset: int) -> None:
    flip_byte(commitlog_file(root, offset), offset % CONFIG.mapped_file_size_commit_log + 5)


def test_a_sound_store_is_ok(store: Path) -> None:
    result = check_store(str(store), CONFIG)
    assert result.status is CheckStatus.OK and result.ok
    assert result.records == COUNT and result.queue_units == COUNT
    assert not result.problems and not result.missed and not result.repairs
    assert result.before is None


def test_a_damaged_record_is_a_problem_and_its_message_is_missed(store: Path) -> None:
    offset, _body = _records(store)[COUNT // 2]
    _flip_magic(store, offset)
    result = check_store(str(store), CONFIG)
    assert result.status is CheckStatus.PROBLEMS
    first = result.problems[0]
    assert (first.area, first.kind, first.offset) == ("commitlog", "structure", offset)
    assert first.line().startswith(f"commitlog/{offset - offset % (64 * 1024):020d}: offset")
    # Its consume queue unit names bytes a pull cannot read: a consumer misses it.
    assert [m.offset for m in result.missed] == [offset]
    # Records after the damage are read on, as a pull reads them.
    assert result.records == COUNT - 1


def test_repair_cuts_a_corrupt_tail_and_rebuilds(store: Path) -> None:
    offset, _body = _records(store)[-1]
    _flip_magic(store, offset)
    result = check_store(str(store), CONFIG, repair=True)
    assert result.status is CheckStatus.REPAIRED and result.ok
    assert result.before is not None and not result.before.ok
    cut, rebuilt = result.repairs
    assert isinstance(cut, CutOutcome) and cut.offset == offset
    assert isinstance(rebuilt, RebuildOutcome) and rebuilt.rebuilt_queues
    assert result.records == COUNT - 1 and result.records_cut_off == 0  # (unreadable before)
    assert check_store(str(store), CONFIG).status is CheckStatus.OK


def test_repair_refuses_to_cut_readable_records_unless_forced(store: Path) -> None:
    offset, _body = _records(store)[COUNT // 2]
    _flip_magic(store, offset)
    files = {p.name: p.read_bytes() for p in (store / "commitlog").iterdir()}
    with pytest.raises(RepairError, match="followed by readable records") as refused:
        check_store(str(store), CONFIG, repair=True)
    assert refused.value.check is not None and not refused.value.check.ok
    assert not refused.value.repairs
    assert {p.name: p.read_bytes() for p in (store / "commitlog").iterdir()} == files
    forced = check_store(str(store), CONFIG, repair=True, force=True)
    assert forced.status is CheckStatus.REPAIRED
    assert forced.records == COUNT // 2 and forced.records_cut_off == COUNT // 2 - 1


def test_repair_keeps_a_bad_body_crc_and_warns(store: Path) -> None:
    offset, body = _records(store)[10]
    flip_byte(commitlog_file(store, offset), body)
    result = check_store(str(store), CONFIG, repair=True)
    assert result.status is CheckStatus.PROBLEMS and not result.repairs
    assert [p.kind for p in result.problems] == ["crc"]
    assert result.warnings == [
        f"1 record(s) with a bad body CRC were kept (the first at offset {offset}); "
        "`check --repair --force` cuts the CommitLog there"
    ]


def test_repair_needs_the_writer_lock(store: Path) -> None:
    with MessageStore.open(store, CONFIG), pytest.raises(StoreLockedError):
        check_store(str(store), CONFIG, repair=True)
    assert check_store(str(store), CONFIG, repair=True).status is CheckStatus.OK


def test_force_without_repair_is_misuse(store: Path) -> None:
    with pytest.raises(ConfigError):
        check_store(str(store), CONFIG, force=True)


def test_the_library_does_not_load_the_cli() -> None:
    code = "import sys, rocketstore.check; assert 'click' not in sys.modules, 'click loaded'"
    subprocess.run([sys.executable, "-c", code], check=True)
