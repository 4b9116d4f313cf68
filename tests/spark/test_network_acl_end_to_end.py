"""Options accessKey / secretKey against a real ``rocketstore broker --acl`` (issue #35):
Spark local[2] writes and reads through the name server with the account's keys; wrong or
missing keys fail naming the broker and the ACL refusal (a read at planning, a write on
the driver before any task)."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.spark.network_helpers import Cluster as RunningCluster
from tests.spark.network_helpers import _start, free_port, wait_registered

ACCESS_KEY = "RocketMQ"
SECRET_KEY = "12345678"
TOPIC = "Signed"


@contextlib.contextmanager
def _acl_cluster(root: Path) -> Iterator[RunningCluster]:
    """Name server + one broker that checks every request against plain_acl.yml."""
    acl = root / "plain_acl.yml"
    acl.write_text(
        f"accounts:\n  - accessKey: {ACCESS_KEY}\n    secretKey: {SECRET_KEY}\n"
        "    defaultTopicPerm: PUB|SUB\n    defaultGroupPerm: PUB|SUB\n"
    )
    settings = root / "broker.conf"
    settings.write_text(
        "mappedFileSizeCommitLog=4194304\nmappedFileSizeConsumeQueue=60000\n"
        "maxHashSlotNum=5000\nmaxIndexNum=20000\n"
    )
    namesrv = f"127.0.0.1:{free_port()}"
    address = f"127.0.0.1:{free_port()}"
    cluster = RunningCluster(namesrv, {"broker-acl": address}, {"broker-acl": root / "store"})
    try:
        kv = ["namesrv", "--listen", namesrv, "--kv-config", str(root / "kv.json")]
        cluster.processes["namesrv"] = _start(kv, "Ctrl-C stops")
        command = ["-c", str(settings), "broker", "--namesrv", namesrv]
        command += ["--broker-name", "broker-acl", "--listen", address]
        command += ["--store", str(root / "store"), "--flush", "SYNC_FLUSH", "--acl", str(acl)]
        cluster.processes["broker-acl"] = _start(command, "Ctrl-C stops")
        wait_registered(cluster)
        yield cluster
    finally:
        for process in cluster.processes.values():
            if process.poll() is None:
                process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
            if process.stderr is not None:
                process.stderr.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningCluster]:
    with _acl_cluster(tmp_path_factory.mktemp("network-acl")) as running:
        yield running


def _write(spark: Any, cluster: RunningCluster, rows: int, **keys: str) -> None:
    df = spark.createDataFrame(
        [(f"body {i}", f"k{i}") for i in range(rows)], "value string, key string"
    )
    writer = df.write.format("rocketstore").option("namesrv", cluster.namesrv)
    for name, value in {"topic": TOPIC, **keys}.items():
        writer = writer.option(name, value)
    writer.mode("append").save()


def _read(spark: Any, cluster: RunningCluster, **keys: str) -> list[tuple[str, str]]:
    reader = spark.read.format("rocketstore").option("namesrv", cluster.namesrv)
    for name, value in {"topics": TOPIC, **keys}.items():
        reader = reader.option(name, value)
    rows = reader.load().select("broker", "value", "key").collect()
    assert {r["broker"] for r in rows} <= {"broker-acl"}
    return sorted((bytes(r["value"]).decode(), r["key"]) for r in rows)


def test_signed_write_and_read_work(spark: Any, cluster: RunningCluster) -> None:
    keys = {"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}
    _write(spark, cluster, 20, **keys)  # the broker creates the topic on the first send
    assert _read(spark, cluster, **keys) == sorted((f"body {i}", f"k{i}") for i in range(20))
    # The key pushdown (QUERY_MESSAGE, with _UNIQUE_KEY_QUERY for uniqKeys) is signed too.
    assert _read(spark, cluster, keys="k7", **keys) == [("body 7", "k7")]


@pytest.mark.parametrize(
    ("keys", "hint"),
    [
        ({"accessKey": ACCESS_KEY, "secretKey": "wrong-secret"}, "BAD_SIGNATURE"),
        ({"accessKey": "NoSuchAccount", "secretKey": SECRET_KEY}, "UNKNOWN_ACCESS_KEY"),
        ({}, "NO_ACCESS_KEY"),
    ],
)
def test_wrong_or_missing_keys_fail_naming_the_broker_and_the_acl(
    spark: Any, cluster: RunningCluster, keys: dict[str, str], hint: str
) -> None:
    _write(spark, cluster, 1, accessKey=ACCESS_KEY, secretKey=SECRET_KEY)  # the topic exists
    address = cluster.brokers["broker-acl"]
    what = "check options accessKey and secretKey" if keys else "give options accessKey"
    with pytest.raises(Exception) as read_error:  # pyspark's own exception
        _read(spark, cluster, **keys)
    message = str(read_error.value)
    assert f"refused by the ACL of broker broker-acl ({address})" in message
    assert hint in message and what in message
    assert "AccessDeniedError" in message
    with pytest.raises(Exception) as write_error:
        _write(spark, cluster, 1, **keys)
    message = str(write_error.value)
    assert f"write to topic {TOPIC!r}: refused by the ACL of broker broker-acl ({address})" in (
        message
    )
    assert hint in message
