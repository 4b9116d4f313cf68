"""The network mode's stream reader without Spark or sockets (#35): offsets per (topic,
broker, queue) in the checkpoint form, new brokers and queues from the routes, admission
control, data loss, a broker that is down named, and the group commit."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from rocketstore.errors import ConfigError, DataLossError
from rocketstore.remoting.blocking import RemotingClientError
from rocketstore.remoting.codes import ResponseCode
from rocketstore.spark import network_scan
from rocketstore.spark.network_cluster import BrokerRoute, ClusterError, PullResult
from rocketstore.spark.network_plan import NetworkPartition
from rocketstore.spark.network_scan import read_network_partition
from rocketstore.spark.network_stream import NetworkStreamReader, from_json, to_json
from rocketstore.spark.options import parse_stream_options
from tests.spark.pull_helpers import PipelinedPulls
from tests.spark.spark_helpers import partitions_as

NAMESRV = "10.9.9.9:9876"
A, B = "10.0.0.1:10911", "10.0.0.2:10911"


class DictCluster:
    """Routes and queue bounds from dicts; brokers in ``down`` do not answer."""

    def __init__(self) -> None:
        self.routes: dict[str, list[BrokerRoute]] = {
            "T": [BrokerRoute("broker-a", ((0, A),), 2, 6, 2)]
        }
        self.low: dict[tuple[str, int], int] = {}
        self.high: dict[tuple[str, int], int] = {(A, 0): 5, (A, 1): 3}
        self.down: set[str] = set()
        self.commits: list[tuple[str, str, str, int, int]] = []
        self.heartbeats: list[tuple[str, str]] = []

    def __enter__(self) -> DictCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def topic_list(self) -> list[str]:
        return sorted(self.routes)

    def route(self, topic: str) -> list[BrokerRoute]:
        if topic not in self.routes:
            raise ConfigError(f"topic {topic!r} is unknown to the name servers {NAMESRV}")
        return self.routes[topic]

    def _check(self, address: str) -> None:
        if address in self.down:
            raise RemotingClientError(f"request code 30 to {address} failed: refused")

    def min_offset(self, address: str, topic: str, queue_id: int) -> int:
        self._check(address)
        return self.low.get((address, queue_id), 0)

    def max_offset(self, address: str, topic: str, queue_id: int) -> int:
        self._check(address)
        return self.high.get((address, queue_id), 0)

    def offset_by_time(self, address: str, topic: str, queue_id: int, timestamp_ms: int) -> int:
        return 1

    def commit_offset(
        self, address: str, group: str, topic: str, queue_id: int, offset: int
    ) -> None:
        self._check(address)
        self.commits.append((address, group, topic, queue_id, offset))

    def register_group(self, address: str, group: str) -> None:
        self._check(address)
        self.heartbeats.append((address, group))


def reader(cluster: DictCluster, **options: str) -> NetworkStreamReader:
    parsed = parse_stream_options({"namesrv": NAMESRV, "topics": "T", **options})
    return NetworkStreamReader(parsed, clock_ms=lambda: 0.0, cluster=lambda _ns: cluster)


def test_offsets_json_round_trip_and_a_file_mode_checkpoint_is_refused() -> None:
    offsets = {("T", "broker-b", 10): 1, ("T", "broker-a", 2): 7, ("S", "broker-a", 0): 0}
    assert to_json(offsets) == {"S": {"broker-a:0": 0}, "T": {"broker-a:2": 7, "broker-b:10": 1}}
    assert from_json(to_json(offsets)) == offsets
    with pytest.raises(ConfigError, match="store directory cannot be resumed"):
        from_json({"T": {"0": 3}})


def test_starts_latest_by_default_or_where_asked() -> None:
    cluster = DictCluster()
    assert reader(cluster).initialOffset() == {"T": {"broker-a:0": 5, "broker-a:1": 3}}
    start = reader(cluster, startingOffsets='{"T": {"broker-a:0": 2}}', failOnDataLoss="true")
    assert start.initialOffset() == {"T": {"broker-a:0": 2, "broker-a:1": 3}}
    assert reader(cluster, startingOffsets="earliest").initialOffset() == {
        "T": {"broker-a:0": 0, "broker-a:1": 0}
    }


def test_a_new_broker_is_read_from_its_first_offset_and_limits_apply() -> None:
    cluster = DictCluster()
    stream = reader(cluster, maxOffsetsPerTrigger="4")
    start = stream.initialOffset()
    cluster.high = {(A, 0): 7, (A, 1): 3, (B, 0): 4}
    cluster.routes["T"].append(BrokerRoute("broker-b", ((0, B),), 1, 6, 1))
    end = stream.latestOffset(start, ReadMaxRows(4))
    # 4 of the 6 new entries, shared by backlog (2 and 4): largest remainder.
    assert end == {"T": {"broker-a:0": 6, "broker-a:1": 3, "broker-b:0": 3}}
    parts = partitions_as(NetworkPartition, stream.partitions(start, end))
    assert [(p.broker, p.queue_id, p.start, p.end) for p in parts] == [
        ("broker-a", 0, 5, 6),
        ("broker-b", 0, 0, 3),
    ]
    assert all(isinstance(p, NetworkPartition) for p in parts)
    assert stream.latestOffset(end, ReadAllAvailable())["T"]["broker-b:0"] == 4
    assert stream.reportLatestOffset() == {"T": {"broker-a:0": 7, "broker-a:1": 3, "broker-b:0": 4}}


def test_available_now_stops_at_the_target() -> None:
    cluster = DictCluster()
    stream = reader(cluster, startingOffsets="earliest")
    start = stream.initialOffset()
    stream.prepareForTriggerAvailableNow()
    cluster.high[(A, 0)] = 50
    assert stream.latestOffset(start, ReadAllAvailable()) == {
        "T": {"broker-a:0": 5, "broker-a:1": 3}
    }


def test_retention_past_the_offset_is_data_loss_naming_the_queue() -> None:
    cluster = DictCluster()
    stream = reader(cluster, startingOffsets="earliest")
    start = stream.initialOffset()
    end = stream.latestOffset(start, ReadAllAvailable())
    cluster.low[(A, 0)] = 2
    with pytest.raises(DataLossError, match=r"queue broker-a:0: offsets \[0, 2\) are gone"):
        stream.partitions(start, end)
    lenient = reader(cluster, startingOffsets="earliest", failOnDataLoss="false")
    parts = partitions_as(NetworkPartition, lenient.partitions(start, end))
    assert [(p.queue_id, p.start) for p in parts] == [(0, 2), (1, 0)]


def test_a_broker_that_is_down_fails_the_batch_naming_it() -> None:
    cluster = DictCluster()
    stream = reader(cluster)
    start = stream.initialOffset()
    cluster.down.add(A)
    with pytest.raises(ClusterError, match=r"broker broker-a \(10.0.0.1:10911\) of topic 'T'"):
        stream.latestOffset(start, ReadAllAvailable())
    # A batch planned before the broker left the routes fails naming it, too.
    cluster.down.clear()
    del cluster.routes["T"]
    fresh = reader(cluster)
    with pytest.raises(ConfigError, match="topic 'T' is unknown"):
        fresh.partitions(start, {"T": {"broker-a:0": 9}})


def test_group_commits_the_end_offsets_and_failures_do_not_fail() -> None:
    cluster = DictCluster()
    stream = reader(cluster, group="spark_orders", startingOffsets="earliest")
    start = stream.initialOffset()
    end = stream.latestOffset(start, ReadAllAvailable())  # the start is what is done
    assert cluster.commits == [(A, "spark_orders", "T", 0, 0), (A, "spark_orders", "T", 1, 0)]
    stream.latestOffset(end, ReadAllAvailable())  # the batch [start, end) is committed
    assert cluster.commits[2:] == [(A, "spark_orders", "T", 0, 5), (A, "spark_orders", "T", 1, 3)]
    stream.latestOffset(end, ReadAllAvailable())
    assert len(cluster.commits) == 4  # sent once
    # One heartbeat per master and query run (the broker then routes %RETRY%spark_orders).
    assert cluster.heartbeats == [(A, "spark_orders")]
    cluster.commits.clear()
    real_commit = cluster.commit_offset

    def refuse(*args: Any) -> None:
        raise ClusterError("code 1, no")

    cluster.commit_offset = refuse  # type: ignore[assignment, method-assign]
    failing = reader(cluster, group="spark_orders")
    # Logged, not raised (the checkpoint is the source of truth) ...
    assert failing.latestOffset(end, ReadAllAvailable()) == end
    cluster.commit_offset = real_commit  # type: ignore[method-assign]
    # ... and sent again at the next trigger.
    failing.latestOffset(end, ReadAllAvailable())
    assert cluster.commits == [(A, "spark_orders", "T", 0, 5), (A, "spark_orders", "T", 1, 3)]
    assert reader(cluster).options.group is None
    with pytest.raises(ConfigError, match=r"option group='g' .* needs option namesrv"):
        parse_stream_options({"path": "/s", "group": "g"})
    with pytest.raises(ConfigError, match="not a valid consumer group"):
        parse_stream_options({"namesrv": NAMESRV, "group": "a b"})


@pytest.mark.parametrize(
    ("code", "next_offset", "why"),
    [
        (ResponseCode.PULL_NOT_FOUND, 3, "the broker has no message there"),
        (ResponseCode.PULL_OFFSET_MOVED, 7, r"gone \(retention\) up to 7"),
    ],
)
def test_a_streams_partition_the_broker_cut_short_is_data_loss(
    monkeypatch: pytest.MonkeyPatch, code: int, next_offset: int, why: str
) -> None:
    """Its end is in the checkpoint: stepping over would lose the messages for good."""

    class Cut(PipelinedPulls):
        def __enter__(self) -> Cut:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def pull(self, address: str, topic: str, qid: int, offset: int, n: int) -> PullResult:
            return PullResult(code, next_offset, 0, 9, 0, b"", None)

    monkeypatch.setattr(network_scan, "Cluster", lambda *a, **k: Cut())
    options = parse_stream_options({"namesrv": NAMESRV}).read
    part = NetworkPartition("T", "broker-a", ((0, A),), 0, 3, 9, fail_on_data_loss=True)
    with pytest.raises(
        DataLossError, match=rf"pull of T queue broker-a:0: offsets \[3, 9\).*{why}"
    ):
        list(read_network_partition(part, options))
    # A batch read's partition steps over (the queue changed since planning).
    lenient = NetworkPartition("T", "broker-a", ((0, A),), 0, 3, 9)
    assert list(read_network_partition(lenient, options)) == []
