"""``rocketstore compare`` (issue #36): two real stores' CommitLogs, by offset."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from rocketstore import Message, MessageStore
from rocketstore.format.record import BLANK_MAGIC
from tests.cli.cli_helpers import (
    BASE_MS,
    CONFIG,
    Run,
    build_store,
    commitlog_file,
    flip_byte,
    message_of,
)

COUNT = 600
# BORNTIMESTAMP's last byte in a record: no check of recovery's or a read's looks at it.
BORN_TIMESTAMP_LAST_BYTE = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 7

Cli = Callable[..., Run]


def _append(root: Path, count: int, body: bytes = b"more") -> None:
    with MessageStore.open(root, CONFIG) as store:
        for i in range(count):
            assert store.put(Message("Extra", body + b"%d" % i)).status.ok
        store.wait_dispatched()


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "a", tmp_path / "b"
    build_store(a, COUNT)
    shutil.copytree(a, b)
    return a, b


def test_identical_stores(cli: Cli, pair: tuple[Path, Path]) -> None:
    run = cli("compare", *pair)
    assert run.code == 0, run.err
    assert "identical" in run.out


def test_a_copy_with_more_records_has_the_other_as_its_prefix(
    cli: Cli, pair: tuple[Path, Path]
) -> None:
    a, b = pair
    _append(b, 50)
    run = cli("compare", a, b)
    assert run.code == 0, run.err
    assert "A is a prefix of B" in run.out
    run = cli("--json", "compare", b, a)
    assert run.code == 0, run.err
    (answer,) = run.json_lines()
    assert answer["verdict"] == "b_prefix_of_a"
    assert answer["a"]["maxOffset"] > answer["b"]["maxOffset"]
    assert answer["overlapOnly"] is False


def test_one_flipped_byte_is_found_with_its_file_and_record(
    cli: Cli, pair: tuple[Path, Path]
) -> None:
    a, b = pair
    with MessageStore.open(a, CONFIG, read_only=True) as store:
        victim = store.get_messages("x", "OrderEvents", 1, 20, 1).messages[0]
    at = victim.commit_log_offset + BORN_TIMESTAMP_LAST_BYTE
    file = commitlog_file(b, at)
    flip_byte(file, at - int(file.name))
    run = cli("--json", "compare", a, b)
    assert run.code == 1, run.err
    (answer,) = run.json_lines()
    assert answer["verdict"] == "differ"
    assert (answer["offset"], answer["file"]) == (at, file.name)
    assert answer["recordOffset"] == victim.commit_log_offset
    assert answer["recordA"]["queueOffset"] == 20
    assert answer["recordA"]["topic"] == "OrderEvents"
    text = cli("compare", a, b)
    assert text.code == 1
    assert f"they differ at CommitLog offset {at} (file {file.name}" in text.out


def test_different_records_after_a_common_prefix(cli: Cli, pair: tuple[Path, Path]) -> None:
    a, b = pair
    end = MessageStore.open(a, CONFIG, read_only=True)
    try:
        common = end.max_commit_log_offset()
    finally:
        end.close()
    _append(a, 5, b"from-a")
    _append(b, 5, b"from-b-longer")
    run = cli("--json", "compare", a, b)
    assert run.code == 1, run.err
    (answer,) = run.json_lines()
    assert answer["recordOffset"] == common
    assert answer["recordA"]["size"] != answer["recordB"]["size"]


def test_different_first_files_compare_the_overlap(cli: Cli, pair: tuple[Path, Path]) -> None:
    a, b = pair
    first = sorted((b / "commitlog").iterdir())[0]
    first.unlink()  # as retention would have it
    run = cli("--json", "compare", a, b)
    assert run.code == 0, run.err
    (answer,) = run.json_lines()
    assert answer["overlapOnly"] is True
    assert answer["comparedFrom"] == CONFIG.mapped_file_size_commit_log
    assert answer["verdict"] == "identical"
    assert "only [65536, " in cli("compare", a, b).out


def test_not_a_store_is_a_usage_error_naming_the_path(
    cli: Cli, pair: tuple[Path, Path], tmp_path: Path
) -> None:
    a, _b = pair
    for bad in (tmp_path / "nowhere", tmp_path):
        run = cli("compare", a, bad)
        assert run.code == 2
        assert str(bad) in run.err


def test_different_file_sizes_compare_up_to_the_smaller_files_end(
    cli: Cli, pair: tuple[Path, Path], tmp_path: Path
) -> None:
    a, _b = pair
    size = CONFIG.mapped_file_size_commit_log
    wide = tmp_path / "wide"
    with MessageStore.open(wide, CONFIG.replace(mapped_file_size_commit_log=2 * size)) as store:
        for i in range(COUNT):
            assert store.put(message_of(i), store_timestamp=BASE_MS + i * 1000).status.ok
    run = cli("--json", "compare", a, wide)
    assert run.code == 1, run.err
    (answer,) = run.json_lines()
    assert (answer["a"]["fileSize"], answer["b"]["fileSize"]) == (size, 2 * size)
    assert answer["verdict"] == "file_sizes_differ"
    assert answer["comparedTo"] == size
    # The same records up to A's first blank, where its first file ends early.
    blank = answer["sameUpTo"]
    assert size - 1024 < blank < size
    with MessageStore.open(a, CONFIG, read_only=True) as store:
        head = store.read_commitlog(blank, 8)
        assert head is not None and int.from_bytes(head[4:8], "big", signed=True) == BLANK_MAGIC
    assert "different CommitLog file sizes" in cli("compare", a, wide).out
    # A byte that differs before there is a difference, as with equal sizes.
    flip_byte(commitlog_file(wide, 0), BORN_TIMESTAMP_LAST_BYTE)
    run = cli("--json", "compare", a, wide)
    assert run.code == 1
    (answer,) = run.json_lines()
    assert (answer["verdict"], answer["offset"]) == ("differ", BORN_TIMESTAMP_LAST_BYTE)
