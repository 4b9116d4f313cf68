"""Spark streaming reads of a running cluster through its name server only (issue #35):
real ``rocketstore namesrv`` and two ``rocketstore broker`` processes on loopback; a query
run to the end, one killed with SIGKILL in a child process and restarted (each row once in
the parquet sink), the consumer group's offsets the query commits, and a broker killed and
restarted between micro-batches."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketstore.broker import admin_client
from rocketstore.remoting.blocking import invoke_sync, request
from rocketstore.remoting.codes import RequestCode, ResponseCode
from tests.spark.network_helpers import (
    START_TIMEOUT_S,
    Cluster,
    create_topic,
    kill_broker,
    restart_broker,
    running_cluster,
    send,
)

TOPIC = "Ticks"
QUEUES = 2
IDENTITY = ("broker", "partition", "offset")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("network-stream")) as running:
        create_topic(running, TOPIC, QUEUES)
        _send_round(running, range(6))
        yield running


def _send_round(cluster: Cluster, numbers: range) -> None:
    for i in numbers:
        for broker in sorted(cluster.brokers):
            for qid in range(QUEUES):
                send(cluster, broker, TOPIC, qid, i)


def _expected(cluster: Cluster) -> list[tuple[Any, ...]]:
    return sorted(
        (m["broker"], m["partition"], m["offset"], m["value"])
        for m in cluster.sent
        if m["topic"] == TOPIC
    )


def _query(spark: Any, cluster: Cluster, out: Path, checkpoint: Path, **options: str) -> Any:
    reader = spark.readStream.format("rocketstore").option("namesrv", cluster.namesrv)
    for name, value in {"topics": TOPIC, "startingOffsets": "earliest", **options}.items():
        reader = reader.option(name, value)
    return (
        reader.load()
        .select(*IDENTITY, "value")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )


def _rows(spark: Any, out: Path) -> list[tuple[Any, ...]]:
    return sorted(
        (r["broker"], r["partition"], r["offset"], bytes(r["value"]))
        for r in spark.read.parquet(str(out)).collect()
    )


def _group_offsets(cluster: Cluster, group: str) -> dict[tuple[str, int], int]:
    found = {}
    for broker, address in sorted(cluster.brokers.items()):
        for qid in range(QUEUES):
            ext = {"consumerGroup": group, "topic": TOPIC, "queueId": str(qid)}
            answer = invoke_sync(address, request(RequestCode.QUERY_CONSUMER_OFFSET, ext))
            if answer.code == ResponseCode.SUCCESS:
                found[(broker, qid)] = int(answer.ext_fields["offset"])
    return found


def test_available_now_reads_what_was_sent_and_commits_the_group(
    spark: Any, cluster: Cluster, tmp_path: Path
) -> None:
    out, checkpoint = tmp_path / "out", tmp_path / "ckpt"
    query = _query(spark, cluster, out, checkpoint, maxOffsetsPerTrigger="16", group="ticks_job")
    query.awaitTermination()
    assert query.exception() is None
    assert _rows(spark, out) == _expected(cluster)
    assert len(query.recentProgress) > 1  # the limit split the backlog
    ends = {(m["broker"], m["partition"]): m["offset"] + 1 for m in cluster.sent}
    assert _group_offsets(cluster, "ticks_job") == ends
    # The group's heartbeat made each broker create %RETRY%ticks_job (what mqadmin
    # consumerProgress -g routes first; a Java 4.9.8 broker made it too).
    deadline = time.monotonic() + 30
    while len((admin_client.topic_route(cluster.namesrv, "%RETRY%ticks_job") or {}).get(
        "brokerDatas", []
    )) < len(cluster.brokers):  # fmt: skip
        assert time.monotonic() < deadline, "%RETRY%ticks_job is not routed to every broker"
        time.sleep(0.1)


CHILD = """
import os, sys
from pyspark.sql import SparkSession
from rocketstore.spark import register
spark = (SparkSession.builder.master("local[1]").appName("killed-stream")
         .config("spark.ui.enabled", "false").config("spark.driver.memory", "512m")
         .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.sql.shuffle.partitions", "1").getOrCreate())
register(spark)
namesrv, topic, out, checkpoint = sys.argv[1:5]
(spark.readStream.format("rocketstore").option("namesrv", namesrv).option("topics", topic)
 .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "3").load()
 .select("broker", "partition", "offset", "value")
 .writeStream.format("parquet").option("path", out).option("checkpointLocation", checkpoint)
 .trigger(processingTime="100 milliseconds").start().awaitTermination())
"""


def _committed_batches(checkpoint: Path) -> int:
    commits = checkpoint / "commits"
    return len([p for p in commits.iterdir() if p.name.isdigit()]) if commits.exists() else 0


def test_a_killed_query_restarted_reads_each_row_once(
    spark: Any, cluster: Cluster, tmp_path: Path
) -> None:
    out, checkpoint = tmp_path / "out", tmp_path / "ckpt"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    script = textwrap.dedent(CHILD)
    args = [cluster.namesrv, TOPIC, str(out), str(checkpoint)]
    child = subprocess.Popen([sys.executable, "-c", script, *args], env=env)
    try:
        deadline = time.monotonic() + 4 * START_TIMEOUT_S
        while _committed_batches(checkpoint) < 2 and child.poll() is None:
            assert time.monotonic() < deadline, "the child query committed no batch in time"
            time.sleep(0.2)
        assert child.poll() is None, f"the child query exited ({child.returncode})"
    finally:
        child.kill()  # SIGKILL, mid-stream
        child.wait(timeout=30)
    assert _committed_batches(checkpoint) < 1 + len(_expected(cluster)) // 3  # not done
    _send_round(cluster, range(100, 103))  # more arrive while it is down
    query = _query(spark, cluster, out, checkpoint)
    query.awaitTermination()
    assert query.exception() is None
    assert _rows(spark, out) == _expected(cluster)  # each exactly once, new ones included


def test_a_broker_killed_and_restarted_loses_nothing(
    spark: Any, cluster: Cluster, tmp_path: Path
) -> None:
    """A broker down: the micro-batch fails naming it (while the name server still routes
    it) or its queues wait (once the route dropped it); back, the query reads on, each row
    once."""
    out, checkpoint = tmp_path / "out", tmp_path / "ckpt"
    _query(spark, cluster, out, checkpoint).awaitTermination()
    kill_broker(cluster, "broker-b")
    for i in range(200, 202):
        send(cluster, "broker-a", TOPIC, 0, i)
    query = _query(spark, cluster, out, checkpoint)
    try:
        query.awaitTermination()
    except Exception as e:  # StreamingQueryException
        assert f"broker broker-b ({cluster.brokers['broker-b']})" in str(e)
    restart_broker(cluster, "broker-b")
    deadline = time.monotonic() + START_TIMEOUT_S
    while not any(b == "broker-b" for b, _ in _routed(cluster)):
        assert time.monotonic() < deadline, "broker-b is not routed again"
        time.sleep(0.2)
    for i in range(200, 202):
        send(cluster, "broker-b", TOPIC, 1, i)
    query = _query(spark, cluster, out, checkpoint)
    query.awaitTermination()
    assert query.exception() is None
    assert _rows(spark, out) == _expected(cluster)


def _routed(cluster: Cluster) -> list[tuple[str, int]]:
    route = admin_client.topic_route(cluster.namesrv, TOPIC) or {}
    return [(q["brokerName"], q["readQueueNums"]) for q in route.get("queueDatas", [])]
