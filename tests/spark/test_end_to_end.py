"""End to end through one shared local SparkSession: rows equal the store's own API, and
pushed filters change nothing but the work done."""

from __future__ import annotations

import datetime as dt

import pytest

from rocketstore import MessageStore
from rocketstore.spark import columns
from tests.spark.spark_helpers import DEFAULT_QUEUES, ROUNDS, store_rows


def _ids(rows):
    return sorted((r["topic"], r["partition"], r["offset"]) for r in rows)


def test_batch_read_equals_store_api(spark, store_path):
    df = spark.read.format("rocketstore").load(str(store_path))
    assert df.schema == columns.spark_schema()
    rows = [r.asDict() for r in df.collect()]
    expected = store_rows(store_path)
    assert _ids(rows) == _ids(expected)
    by_offset = {r["commitLogOffset"]: r for r in rows}
    for want in expected[:25]:
        got = by_offset[want["commitLogOffset"]]
        assert bytes(got["value"]) == want["value"]
        assert got["key"] == want["key"] and got["uniqKey"] == want["uniqKey"]
        assert got["timestamp"].replace(tzinfo=dt.UTC).timestamp() * 1000 == want["ts_ms"]
        assert got["properties"]["TAGS"] == want["tags"]


def test_commitlog_mode_and_options(spark, store_path):
    path = str(store_path)
    scan = spark.read.format("rocketstore").option("mode", "commitlog")
    assert scan.option("minPartitions", "5").load(path).count() == DEFAULT_QUEUES * ROUNDS
    tagged = (
        spark.read.format("rocketstore")
        .option("topics", "Orders")
        .option("tags", "TagB")
        .option("startingOffsets", '{"Orders":{"0":10}}')
        .option("maxRecordsPerPartition", "4")
        .load(path)
    )
    rows = tagged.select("topic", "partition", "offset", "tags").collect()
    assert rows and {r["tags"] for r in rows} == {"TagB"}
    assert all(r["offset"] >= 10 for r in rows if r["partition"] == 0)


def test_pushdown_on_and_off_give_identical_rows(spark, store_path):
    with MessageStore.open(store_path, read_only=True) as store:
        cut = store.message_store_time("Orders", 1, 20)
    cut_literal = dt.datetime.fromtimestamp(cut / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    queries = [
        "topic = 'Orders' AND partition IN (1, 2) AND offset >= 5 AND offset < 25",
        f"timestamp < TIMESTAMP '{cut_literal}' AND topic IN ('Payments', 'Orders')",
        "key = 'Orders-2-7' OR key = 'Payments-1-3'",
        "key IN ('Orders-2-7', 'Payments-1-3', 'Orders-0-10 shared') AND offset > 0",
        "uniqKey = 'UPayments010004'",
        "offset IN (3, 9) AND tags = 'TagA' AND partition <> 1",
    ]
    path = str(store_path)
    for mode in ("queue", "commitlog"):
        for where in queries:
            results = []
            for pushdown in ("true", "false"):
                df = (
                    spark.read.format("rocketstore")
                    .option("mode", mode)
                    .option("pushdown", pushdown)
                    .load(path)
                    .where(where)
                )
                results.append(
                    _ids(r.asDict() for r in df.select("topic", "partition", "offset").collect())
                )
            assert results[0] == results[1], (mode, where)
            assert results[0] or "uniqKey" in where, (mode, where)


def test_errors_name_the_option_and_the_path(spark, tmp_path):
    with pytest.raises(Exception, match="maxRecordsPerPartition='zero'"):
        spark.read.format("rocketstore").option("maxRecordsPerPartition", "zero").load(
            str(tmp_path)
        ).count()
    with pytest.raises(Exception, match=r"not a store directory|not a rocketstore"):
        spark.read.format("rocketstore").load(str(tmp_path / "nothing")).count()


def test_pushed_filters_shape_the_plan(spark, store_path):
    def partitions(where: str, pushdown: str = "true") -> int:
        # One partition a queue (nothing packed), so the count shows the queues planned.
        df = (
            spark.read.format("rocketstore")
            .option("pushdown", pushdown)
            .option("maxPartitionBytes", "1")
            .load(str(store_path))
        )
        return int(df.where(where).rdd.getNumPartitions())

    assert partitions("topic = 'Orders' AND key = 'Orders-2-7'") == 1  # one index lookup
    assert partitions("topic = 'Orders' AND key = 'Orders-2-7'", "false") == DEFAULT_QUEUES
    assert partitions("topic = 'Payments' AND partition = 0") == 1
    assert partitions("topic = 'Payments'") == 2
    # A pushed time range outside every queue plans no queue at all (Spark's placeholder).
    assert partitions("timestamp > TIMESTAMP '2100-01-01 00:00:00'") == 1
    assert partitions("offset >= 1000") == 1


def test_small_queues_packed_into_fewer_tasks_read_the_same_rows(spark, store_path):
    path = str(store_path)

    def load(**options):
        reader = spark.read.format("rocketstore")
        for name, value in options.items():
            reader = reader.option(name, value)
        return reader.load(path)

    packed, apart = load(), load(maxPartitionBytes="1")
    pairs = load(openCostInBytes="1000000", maxPartitionBytes="2100000")
    assert packed.rdd.getNumPartitions() == 1
    assert apart.rdd.getNumPartitions() == DEFAULT_QUEUES
    assert pairs.rdd.getNumPartitions() == 4
    columns_read = ["topic", "partition", "offset", "commitLogOffset", "value", "properties"]
    expected = sorted(tuple(r) for r in apart.select(*columns_read).collect())
    for df in (packed, pairs):
        rows = df.select(*columns_read).collect()
        assert sorted(tuple(r) for r in rows) == expected
    # Within a task each queue's rows come in queue order.
    order: dict[tuple[str, int], list[int]] = {}
    for r in packed.select("topic", "partition", "offset").collect():
        order.setdefault((r["topic"], r["partition"]), []).append(r["offset"])
    assert all(offsets == sorted(offsets) for offsets in order.values())
    commitlog = load(mode="commitlog").select("topic", "partition", "offset").collect()
    assert sorted(tuple(r) for r in commitlog) == sorted(tuple(e[:3]) for e in expected)
