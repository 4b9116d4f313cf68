"""``rebuild --engine local`` (and the flag checks of every engine) through the console
script: same bytes as the store's dispatcher, salvage report, untouched store on failure."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli.cli_helpers import Run
from tests.unit.rebuild.rebuild_helpers import (
    assert_same_index,
    assert_same_queues,
    build_store,
    damage,
    files_under,
    index_files,
    record_offsets,
    small_config,
)

Cli = Callable[..., Run]
FILE_SIZE = small_config().mapped_file_size_commit_log


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("engines") / "store"
    build_store(root, rounds=20)
    return root


@pytest.fixture
def copy(reference: Path, tmp_path: Path) -> Path:
    root = tmp_path / "copy"
    shutil.copytree(reference, root)
    return root


def test_local_engine_matches_the_dispatcher(copy: Path, reference: Path, cli: Cli) -> None:
    # Damaged queue and index files (the geometry is taken from the files that remain).
    (copy / "consumequeue" / "Orders" / "1" / "00000000000000000000").write_bytes(bytes(160))
    shutil.rmtree(copy / "consumequeue" / "Payments")
    for name in sorted((copy / "index").iterdir())[:-1]:
        name.unlink()
    run = cli("--store", copy, "--json", "rebuild", "--engine", "local")
    assert run.code == 0, run.err
    (said,) = run.json_lines()
    assert said["type"] == "rebuild" and said["records"] > 100
    assert said["indexFiles"] == len(index_files(reference)) > 3
    assert_same_queues(copy, reference)
    assert_same_index(copy, reference)


def test_flags_that_need_another_engine(copy: Path, cli: Cli) -> None:
    skip = cli("--store", copy, "rebuild", "--skip-corrupt")
    assert skip.code == 2 and "--skip-corrupt needs --engine local or spark" in skip.err
    master = cli("--store", copy, "rebuild", "--engine", "local", "--master", "local[2]")
    assert master.code == 2 and "--master needs --engine spark" in master.err


def test_local_engine_fails_on_damage_and_leaves_the_store(copy: Path, cli: Cli) -> None:
    offset, _size = record_offsets(copy, small_config())[40]
    damage(copy, offset, 4, b"\x01\x02\x03\x04", FILE_SIZE)
    queues, index = files_under(copy, "consumequeue"), index_files(copy)
    run = cli("--store", copy, "rebuild", "--engine", "local")
    assert run.code == 1
    assert "rebuild failed, queues and index left as they were" in run.err
    assert f"position {offset}" in run.err and "illegal magic code" in run.err
    assert files_under(copy, "consumequeue") == queues
    assert index_files(copy) == index


def test_skip_corrupt_reports_each_skipped_record(copy: Path, cli: Cli) -> None:
    offsets = record_offsets(copy, small_config())
    victims = dict([offsets[10], offsets[77]])
    for offset in victims:
        damage(copy, offset, 4, b"\x01\x02\x03\x04", FILE_SIZE)
    run = cli("--store", copy, "--json", "rebuild", "--engine", "local", "--skip-corrupt")
    assert run.code == 0, run.err
    lines = run.json_lines()
    skipped = [line for line in lines if line["type"] == "skipped"]
    assert {(s["offset"], s["length"]) for s in skipped} == set(victims.items())
    assert all("illegal magic code" in s["reason"] for s in skipped)
    assert lines[-1]["records"] == len(offsets) - 2


def test_export_engine_flags(copy: Path, cli: Cli, tmp_path: Path) -> None:
    jsonl = cli("--store", copy, "export", "--engine", "spark", "--format", "jsonl", tmp_path / "x")
    assert jsonl.code == 2 and "--engine spark writes --format parquet" in jsonl.err
    ranged = cli(
        "--store", copy, "export", "--engine", "spark", "--format", "parquet", "--from", "0",
        tmp_path / "y",
    )  # fmt: skip
    assert ranged.code == 2 and "--from/--to are not supported" in ranged.err
    master = cli("--store", copy, "export", "--format", "jsonl", "--master", "local", "-")
    assert master.code == 2 and "--master needs --engine spark" in master.err


def test_spark_conf_flags(copy: Path, cli: Cli) -> None:
    local = cli("--store", copy, "rebuild", "--engine", "local", "--conf", "spark.a=b")
    assert local.code == 2 and "--conf needs --engine spark" in local.err
    jsonl = cli("--store", copy, "export", "--format", "jsonl", "--conf", "spark.a=b", "-")
    assert jsonl.code == 2 and "--conf needs --engine spark" in jsonl.err
    bad = cli("--store", copy, "rebuild", "--engine", "spark", "--conf", "spark.driver.memory")
    assert bad.code == 2 and "'spark.driver.memory' is not KEY=VALUE" in bad.err


@pytest.mark.cli_subprocess  # a Spark session of its own
def test_export_spark_takes_spark_settings(copy: Path, cli: Cli, tmp_path: Path) -> None:
    """--conf reaches the session: Spark names Parquet files by their codec."""
    pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        pytest.skip("no Java for Spark")
    out = tmp_path / "dataset"
    run = cli(
        "--store", copy, "export", "--engine", "spark", "--master", "local[1]",
        "--conf", "spark.sql.parquet.compression.codec=uncompressed",
        "--conf", "spark.ui.enabled=false", "--format", "parquet", out,
    )  # fmt: skip
    assert run.code == 0, run.err
    files = [p.name for p in out.rglob("part-*.parquet")]
    assert files and not any(".snappy." in name for name in files)
