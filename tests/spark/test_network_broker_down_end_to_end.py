"""Option brokerDownWaitMs against real processes (#35): ``rocketstore namesrv`` and two
``rocketstore broker`` processes, broker-b SIGKILLed after planning and restarted while
the read waits. The driver's and the executors' code run here without Spark (what they
do between planning and reading is what a broker going down hits): a stream's
micro-batch planned before the kill, its partitions asked and pulled while broker-b is
down, each row once; without the option the same read fails naming broker-b."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from rocketstore.remoting.blocking import RemotingClientError
from rocketstore.spark.network_cluster import ClusterError
from rocketstore.spark.network_plan import NetworkPartition
from rocketstore.spark.network_stream import NetworkStreamReader
from rocketstore.spark.options import parse_stream_options
from tests.spark.network_helpers import (
    Cluster,
    create_topic,
    kill_broker,
    restart_broker,
    running_cluster,
    send,
)
from tests.spark.spark_helpers import partitions_as

TOPIC = "Waits"
QUEUES = 2
RESTART_AFTER_S = 1.5


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("network-down")) as running:
        create_topic(running, TOPIC, QUEUES)
        for i in range(5):
            for broker in sorted(running.brokers):
                for qid in range(QUEUES):
                    send(running, broker, TOPIC, qid, i)
        yield running


def _reader(cluster: Cluster, **options: str) -> NetworkStreamReader:
    given = {"namesrv": cluster.namesrv, "topics": TOPIC, "startingOffsets": "earliest"}
    return NetworkStreamReader(parse_stream_options({**given, **options}))


def _rows(reader: NetworkStreamReader, partitions: Any) -> list[tuple[str, int, int]]:
    return sorted(
        (row["broker"], row["partition"], row["offset"])
        for partition in partitions
        for batch in reader.read(partition)
        for row in batch.to_pylist()
    )


def _expected(cluster: Cluster) -> list[tuple[str, int, int]]:
    return sorted((m["broker"], m["partition"], m["offset"]) for m in cluster.sent)


class Restarter:
    """Restarts a killed broker from another thread after a delay (while the read waits)."""

    def __init__(self, cluster: Cluster, name: str) -> None:
        self.error: BaseException | None = None
        self._thread = threading.Timer(RESTART_AFTER_S, self._run, (cluster, name))

    def _run(self, cluster: Cluster, name: str) -> None:
        try:
            restart_broker(cluster, name)
        except BaseException as e:  # reported by join()
            self.error = e

    def __enter__(self) -> Restarter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._thread.join()
        if self.error is not None:
            raise self.error


def test_without_the_option_a_down_broker_fails_the_micro_batch_naming_it(
    cluster: Cluster,
) -> None:
    reader = _reader(cluster)
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    kill_broker(cluster, "broker-b")
    try:
        address = cluster.brokers["broker-b"]
        with pytest.raises(ClusterError, match=rf"broker broker-b \({address}\) of topic 'Waits' "
                           r"did not answer .*option brokerDownWaitMs waits"):  # fmt: skip
            reader.partitions(start, end)
    finally:
        restart_broker(cluster, "broker-b")


def _waited(caplog: pytest.LogCaptureFixture, address: str) -> bool:
    return any(
        f"{address}" in r.getMessage() and "brokerDownWaitMs" in r.getMessage()
        for r in caplog.records
    )


def test_a_stream_waits_for_a_broker_that_comes_back_and_reads_each_row_once(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    reader = _reader(cluster, brokerDownWaitMs="60000")
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())  # planned with broker-b up
    kill_broker(cluster, "broker-b")
    with Restarter(cluster, "broker-b"):
        # The planning waits on broker-b's min offsets.
        partitions = partitions_as(NetworkPartition, reader.partitions(start, end))
    assert _waited(caplog, cluster.brokers["broker-b"])
    assert {p.broker for p in partitions} == {"broker-a", "broker-b"}
    assert _rows(reader, partitions) == _expected(cluster)


def test_executors_wait_for_a_broker_killed_after_planning(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    reader = _reader(cluster, brokerDownWaitMs="60000")
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    partitions = partitions_as(NetworkPartition, reader.partitions(start, end))
    kill_broker(cluster, "broker-b")
    with Restarter(cluster, "broker-b"):
        rows = _rows(reader, partitions)  # broker-b's pulls wait until it is back
    assert _waited(caplog, cluster.brokers["broker-b"])
    assert rows == _expected(cluster)
    # Without the option the executor's pull fails naming the broker.
    plain = _reader(cluster)
    kill_broker(cluster, "broker-b")
    try:
        b_parts = [p for p in partitions if p.broker == "broker-b"]
        with pytest.raises(RemotingClientError, match="from broker broker-b"):
            _rows(plain, b_parts)
    finally:
        restart_broker(cluster, "broker-b")
