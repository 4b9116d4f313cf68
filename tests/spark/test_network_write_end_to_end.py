"""Spark local[2] writing to a running cluster through its name server only (issue #35):
batch and streaming writes sent by the executors to a real ``rocketstore namesrv`` and two
``rocketstore broker`` processes, read back from each broker's store in file mode."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketstore.format.javahash import java_string_hash
from tests.spark.network_helpers import Cluster, create_topic, kill_broker, running_cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("network-write")) as running:
        yield running


def _stored(spark: Any, cluster: Cluster, topic: str) -> list[dict[str, Any]]:
    """Every message of ``topic`` in the brokers' stores (file mode: the reference)."""
    rows = []
    for broker, store in sorted(cluster.stores.items()):
        df = spark.read.format("rocketstore").option("topics", topic).load(str(store))
        rows += [{**row.asDict(recursive=True), "broker": broker} for row in df.collect()]
    return rows


def _input(spark: Any, count: int) -> Any:
    rows = [
        (
            f"body {i}",
            f"k{i % 3}" if i % 2 else None,
            "TagA" if i % 2 else "TagB",
            {"color": ("red", "blue")[i % 2], "n": str(i)},
        )
        for i in range(count)
    ]
    schema = "value string, key string, tags string, properties map<string,string>"
    return spark.createDataFrame(rows, schema).repartition(2)


def test_batch_write_is_stored_on_both_brokers_with_every_field(
    spark: Any, cluster: Cluster
) -> None:
    create_topic(cluster, "Written", 2)
    _input(spark, 40).write.format("rocketstore").option("namesrv", cluster.namesrv).option(
        "topic", "Written"
    ).mode("append").save()
    stored = _stored(spark, cluster, "Written")
    assert len(stored) == 40
    assert {r["broker"] for r in stored} == {"broker-a", "broker-b"}
    by_body = {r["value"].decode(): r for r in stored}
    queues = [(b, q) for b in ("broker-a", "broker-b") for q in range(2)]
    for i in range(40):
        row = by_body[f"body {i}"]
        assert row["topic"] == "Written"
        assert row["key"] == (f"k{i % 3}" if i % 2 else None)
        assert row["tags"] == ("TagA" if i % 2 else "TagB")
        assert row["headers"] == {"color": ("red", "blue")[i % 2], "n": str(i)}
        assert row["flag"] == 0 and row["reconsumeTimes"] == 0
        assert re.fullmatch("[0-9A-F]{32}", row["uniqKey"])
        assert row["properties"]["UNIQ_KEY"] == row["uniqKey"]
        if row["key"] is not None:  # SelectMessageQueueByHash over both brokers' queues
            assert (row["broker"], row["partition"]) == queues[
                abs(java_string_hash(row["key"])) % 4
            ]
    assert len({r["uniqKey"] for r in stored}) == 40
    # The network read of the same topic gives the same rows.
    network = spark.read.format("rocketstore").option("namesrv", cluster.namesrv)
    read = network.option("topics", "Written").load().collect()
    assert sorted(r["uniqKey"] for r in read) == sorted(r["uniqKey"] for r in stored)


def test_queue_id_column_and_an_auto_created_topic(spark: Any, cluster: Cluster) -> None:
    df = spark.createDataFrame([("x", 0), ("y", 3)], "value string, queueId int")
    # Option topic: the driver's route (TBW102's, both brokers) serves every task, though
    # the first send makes the name server route the new topic to one broker for a while.
    writer = df.repartition(2).write.format("rocketstore").option("namesrv", cluster.namesrv)
    writer.option("topic", "AutoMade").option("queueNums", "2").mode("append").save()
    stored = _stored(spark, cluster, "AutoMade")
    # queueId numbers the write queues across brokers (2 each, by name): 3 is b's queue 1.
    assert sorted((r["value"], r["broker"], r["partition"]) for r in stored) == [
        (b"x", "broker-a", 0),
        (b"y", "broker-b", 1),
    ]


def test_streaming_sink_sends_each_micro_batch(
    spark: Any, cluster: Cluster, tmp_path: Path
) -> None:
    create_topic(cluster, "Streamed", 2)
    source = tmp_path / "in"
    _input(spark, 12).select("value", "key").write.json(str(source))
    query = (
        spark.readStream.schema("value string, key string")
        .json(str(source))
        .writeStream.format("rocketstore")
        .option("namesrv", cluster.namesrv)
        .option("topic", "Streamed")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert query.exception() is None
    stored = _stored(spark, cluster, "Streamed")
    assert sorted(r["value"].decode() for r in stored) == sorted(f"body {i}" for i in range(12))
    assert len({r["uniqKey"] for r in stored}) == 12


def test_unknown_column_and_both_sinks_are_refused(spark: Any, cluster: Cluster) -> None:
    df = spark.createDataFrame([("x", 1)], "value string, oops int")
    writer = df.write.format("rocketstore").option("namesrv", cluster.namesrv)
    with pytest.raises(Exception, match="oops"):
        writer.option("topic", "Written").mode("append").save()


def test_a_broker_down_the_rows_go_to_the_other(spark: Any, cluster: Cluster) -> None:
    """broker-b killed: its queues' rows are retried on broker-a (or broker-b has left the
    route already); none is lost. Last in the module: the broker stays down."""
    create_topic(cluster, "Failover", 2)
    kill_broker(cluster, "broker-b")
    df = spark.createDataFrame(
        [(f"f{i}", f"key{i}") for i in range(12)], "value string, key string"
    )
    df.write.format("rocketstore").option("namesrv", cluster.namesrv).option(
        "topic", "Failover"
    ).mode("append").save()
    stored = _stored(spark, cluster, "Failover")
    assert sorted(r["value"] for r in stored) == sorted(f"f{i}".encode() for i in range(12))
    assert {r["broker"] for r in stored} == {"broker-a"}
