"""The parallel rebuild as Spark tasks (the shared local session), and the Parquet export
through the data source, read back."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path
from typing import Any

import pytest

from rocketstore.rebuild.driver import RebuildFailedError, rebuild_store
from rocketstore.spark.rebuild import SparkRunner, export_parquet
from tests.spark.spark_helpers import store_rows
from tests.unit.rebuild.rebuild_helpers import (
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


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("spark-rebuild") / "store"
    build_store(root, rounds=24)
    return root


def test_spark_rebuild_is_byte_identical(spark: Any, reference: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(reference, copy)
    runner = SparkRunner(spark.sparkContext)
    report = rebuild_store(copy, runner, config=small_config(), max_range_bytes=4000)
    assert report.engine == "spark" and report.ranges > 4
    assert_same_queues(copy, reference)
    assert_same_index(copy, reference)
    assert checkpoint_of(copy) == checkpoint_of(reference)


def test_spark_rebuild_writes_lmq_units(spark: Any, tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    build_lmq_store(reference)
    copy = tmp_path / "copy"
    shutil.copytree(reference, copy)
    report = rebuild_store(
        copy, SparkRunner(spark.sparkContext), config=lmq_config(), max_range_bytes=3000
    )
    assert report.ranges > 4
    assert_same_queues(copy, reference)
    assert_same_index(copy, reference)


def test_spark_salvage(spark: Any, reference: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(reference, copy)
    offsets = record_offsets(copy, small_config())
    victims = dict([offsets[3], offsets[100]])
    for offset in victims:
        damage(copy, offset, 0, b"\x7f\x00\x00\x00", small_config().mapped_file_size_commit_log)
    report = rebuild_store(
        copy, SparkRunner(spark.sparkContext), config=small_config(), skip_corrupt=True
    )
    assert {(r.offset, r.length) for r in report.corrupt} == set(victims.items())
    expected = tmp_path / "expected"
    dispatch_reference(copy, expected, victims, small_config())
    assert_same_queues(copy, expected)
    assert_same_index(copy, expected)


def test_export_parquet_dataset_reads_back(spark: Any, store_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "dataset"
    count = export_parquet(spark, str(store_path), str(out))
    want = store_rows(store_path)
    assert count == len(want)
    topics = sorted(p.name for p in out.iterdir() if p.name.startswith("topic="))
    # Spark escapes % in partition directory names (%RETRY%groupA -> %25RETRY%25groupA).
    assert topics == sorted({f"topic={r['topic'].replace('%', '%25')}" for r in want})
    assert all(p.name.startswith("date=") for t in topics for p in (out / t).iterdir())
    back = spark.read.parquet(str(out))
    rows = back.select("topic", "partition", "offset", "value", "date").collect()
    got = sorted((r["topic"], r["partition"], r["offset"], bytes(r["value"])) for r in rows)
    assert got == sorted((r["topic"], r["partition"], r["offset"], r["value"]) for r in want)
    utc_dates = {
        (r["topic"], r["partition"], r["offset"]): dt.datetime.fromtimestamp(
            r["ts_ms"] / 1000, dt.UTC
        ).date()
        for r in want
    }
    assert all(r["date"] == utc_dates[(r["topic"], r["partition"], r["offset"])] for r in rows)


def test_spark_failed_task_leaves_the_store(spark: Any, reference: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(reference, copy)
    offset, _ = record_offsets(copy, small_config())[50]
    damage(copy, offset, 4, b"\x00\x00\x00\x01", small_config().mapped_file_size_commit_log)
    before = files_under(copy, "consumequeue"), index_files(copy)
    with pytest.raises(RebuildFailedError, match=f"position {offset}"):
        rebuild_store(copy, SparkRunner(spark.sparkContext), config=small_config())
    assert (files_under(copy, "consumequeue"), index_files(copy)) == before
