"""The network mode's reader logic without Spark or sockets (#35): options, planning
against an in-memory cluster, pulled bodies decoded, the pull loop's answers. The cluster
here serves the shared test store as two brokers, so its rows can be checked against the
file mode's read of the same store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketstore import GetStatus, MessageStore
from rocketstore.errors import ConfigError
from rocketstore.remoting.codes import ResponseCode
from rocketstore.spark import network_scan
from rocketstore.spark.network_cluster import (
    AccessDeniedError,
    BrokerRoute,
    PullResult,
    loads_fastjson,
    parse_route,
)
from rocketstore.spark.network_plan import (
    NetworkKeyPartition,
    NetworkPartition,
    plan_network_read,
)
from rocketstore.spark.network_scan import decode_body, read_network_partition
from rocketstore.spark.options import parse_options
from tests.spark.pull_helpers import PipelinedPulls
from tests.spark.spark_helpers import BASE_MS, STEP_MS, read_all

NAMESRV = "10.9.9.9:9876"


class StoreCluster(PipelinedPulls):
    """Brokers over read-only stores: what a name server and brokers would answer."""

    def __init__(self, stores: dict[str, MessageStore], slaves: bool = False) -> None:
        self.stores = stores
        self.addresses = {
            name: ((0, f"10.0.0.{i}:10911"), *(((1, f"10.0.1.{i}:10911"),) if slaves else ()))
            for i, name in enumerate(sorted(stores))
        }
        self.by_address = {a: n for n, pairs in self.addresses.items() for _, a in pairs}
        self.pulls: list[tuple[str, str, int, int]] = []
        self.queries: list[tuple[str, str, bool]] = []
        self.suggest = 0

    def __enter__(self) -> StoreCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def topic_list(self) -> list[str]:
        return sorted({t for s in self.stores.values() for t in s.topics()})

    def route(self, topic: str) -> list[BrokerRoute]:
        routes = [
            BrokerRoute(name, self.addresses[name], len(store.topics()[topic]), 6)
            for name, store in sorted(self.stores.items())
            if topic in store.topics()
        ]
        if not routes:
            raise ConfigError(f"topic {topic!r} is unknown to the name servers {NAMESRV}")
        return routes

    def _store(self, address: str) -> MessageStore:
        return self.stores[self.by_address[address]]

    def min_offset(self, address: str, topic: str, queue_id: int) -> int:
        return self._store(address).min_offset(topic, queue_id)

    def max_offset(self, address: str, topic: str, queue_id: int) -> int:
        return self._store(address).max_offset(topic, queue_id)

    def offset_by_time(self, address: str, topic: str, queue_id: int, timestamp_ms: int) -> int:
        return self._store(address).offset_by_time(topic, queue_id, timestamp_ms, "lower")

    def _records(self, store: MessageStore, messages: list[Any]) -> bytes:
        return b"".join(store.commitlog.read(m.commit_log_offset, m.size) or b"" for m in messages)

    def pull(
        self, address: str, topic: str, queue_id: int, offset: int, max_nums: int
    ) -> PullResult:
        self.pulls.append((address, topic, queue_id, offset))
        store = self._store(address)
        got = store.get_messages("g", topic, queue_id, offset, min(max_nums, 7))
        found = got.status is GetStatus.FOUND
        code = ResponseCode.SUCCESS if found else ResponseCode.PULL_NOT_FOUND
        body = self._records(store, got.messages) if found else b""
        return PullResult(
            code, got.next_begin_offset, got.min_offset, got.max_offset, self.suggest, body, None
        )

    def query(self, address: str, topic: str, key: str, unique: bool) -> bytes:
        self.queries.append((address, key, unique))
        store = self._store(address)
        found = (
            store.query_by_unique_key(topic, key)
            if unique
            else store.query_messages(topic, key, 64, 0, 1 << 62)
        )
        return self._records(store, found)


@pytest.fixture
def two_brokers(store_path: Path, store_copy: Path) -> Iterator[StoreCluster]:
    a = MessageStore.open(store_path, read_only=True)
    b = MessageStore.open(store_copy, read_only=True)
    try:
        yield StoreCluster({"broker-a": a, "broker-b": b})
    finally:
        a.close()
        b.close()


def _read(
    cluster: StoreCluster, monkeypatch: pytest.MonkeyPatch, **options: str
) -> list[dict[str, Any]]:
    monkeypatch.setattr(network_scan, "Cluster", lambda *a, **k: cluster)
    parsed = parse_options({"namesrv": NAMESRV, **{k.lower(): v for k, v in options.items()}})
    rows = []
    for partition in plan_network_read(cluster, parsed):
        for batch in read_network_partition(partition, parsed):
            rows.extend(batch.to_pylist())
    return sorted(rows, key=lambda r: (r["broker"], r.get("topic"), r["partition"], r["offset"]))


# --- options ----------------------------------------------------------------------------


def test_path_and_namesrv_together_name_both() -> None:
    with pytest.raises(ConfigError, match=r"path='/s'.*namesrv='h:9876'"):
        parse_options({"path": "/s", "namesrv": "h:9876"})


def test_namesrv_without_path_is_a_network_read() -> None:
    options = parse_options({"namesrv": " 127.0.0.1:9876 ; 127.0.0.2:9876 "})
    assert options.network and options.namesrv == "127.0.0.1:9876;127.0.0.2:9876"
    with pytest.raises(ConfigError, match=r"path is required.*namesrv"):
        parse_options({})
    with pytest.raises(ConfigError, match="not host:port"):
        parse_options({"namesrv": "nameserver"})
    with pytest.raises(ConfigError, match="mode='commitlog'"):
        parse_options({"namesrv": "h:1", "mode": "commitlog"})


def test_network_offsets_name_their_broker() -> None:
    options = parse_options(
        {
            "namesrv": "h:1",
            "startingoffsets": '{"A": {"broker-a:0": 12, "broker-b:0": -2}}',
            "endingoffsetsbytimestamp": '{"A": {"broker-b:1": 1700}}',
        }
    )
    assert options.start.broker_offsets == {("A", "broker-a", 0): 12, ("A", "broker-b", 0): -2}
    assert options.start.offsets == {}
    assert options.end.broker_timestamps == {("A", "broker-b", 1): 1700}
    with pytest.raises(ConfigError, match=r'names no broker.*"broker-a:0"'):
        parse_options({"namesrv": "h:1", "startingoffsets": '{"A": {"0": 1}}'})
    with pytest.raises(ConfigError, match="broker-a:0: offset 5 > 3"):
        parse_options(
            {
                "namesrv": "h:1",
                "startingoffsets": '{"A": {"broker-a:0": 5}}',
                "endingoffsets": '{"A": {"broker-a:0": 3}}',
            }
        )


def test_file_mode_takes_broker_keyed_offsets_for_any_broker_name() -> None:
    options = parse_options({"path": "/s", "startingoffsets": '{"A": {"whatever:1": 4, "2": 5}}'})
    assert options.start.offsets == {("A", 1): 4, ("A", 2): 5}
    with pytest.raises(ConfigError, match="queue 1 is given twice"):
        parse_options({"path": "/s", "startingoffsets": '{"A": {"b1:1": 4, "b2:1": 5}}'})


def test_broker_column_only_through_name_servers() -> None:
    assert parse_options({"namesrv": "h:1", "columns": "broker,offset"}).columns == (
        "broker",
        "offset",
    )
    with pytest.raises(ConfigError, match="broker only through name servers"):
        parse_options({"path": "/s", "columns": "broker"})


# --- the cluster's answers ----------------------------------------------------------------


def test_fastjson_route_with_unquoted_broker_ids() -> None:
    body = (
        b'{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},'
        b'"brokerName":"broker-a","cluster":"c"}],"filterServerTable":{},'
        b'"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,'
        b'"topicSysFlag":0,"writeQueueNums":4}]}'
    )
    (broker,) = parse_route("T", loads_fastjson(body, "route"))
    assert broker.addresses == ((0, "10.0.0.1:10911"), (1, "10.0.0.2:10911"))
    assert (broker.master, broker.read_queue_nums, broker.readable) == ("10.0.0.1:10911", 4, True)


# --- planning -----------------------------------------------------------------------------


def test_plan_default_topics_per_broker_and_queue(two_brokers: StoreCluster) -> None:
    parts = plan_network_read(two_brokers, parse_options({"namesrv": NAMESRV}))
    assert all(isinstance(p, NetworkPartition) for p in parts)
    queues = {(p.broker, p.topic, p.queue_id) for p in parts if isinstance(p, NetworkPartition)}
    # The system topic is left out by default, as in the file mode (7 default queues).
    assert len(queues) == 2 * 7
    assert not any(t.startswith("RMQ_SYS") for _, t, _ in queues)


def test_plan_bounds_by_broker_and_split(two_brokers: StoreCluster) -> None:
    options = parse_options(
        {
            "namesrv": NAMESRV,
            "topics": "Payments",
            "startingoffsets": '{"Payments": {"broker-b:1": 10}}',
            "endingoffsets": '{"Payments": {"broker-b:1": 20}}',
            "maxrecordsperpartition": "4",
        }
    )
    parts = [p for p in plan_network_read(two_brokers, options) if isinstance(p, NetworkPartition)]
    b1 = [(p.start, p.end) for p in parts if (p.broker, p.queue_id) == ("broker-b", 1)]
    a1 = [(p.start, p.end) for p in parts if (p.broker, p.queue_id) == ("broker-a", 1)]
    assert b1 == [(10, 14), (14, 18), (18, 20)]
    assert a1[0][0] == 0 and a1[-1][1] == 30 and all(e - s <= 4 for s, e in a1)


def test_plan_names_unknown_topic_and_broker(two_brokers: StoreCluster) -> None:
    with pytest.raises(ConfigError, match="'Nope' is unknown"):
        plan_network_read(two_brokers, parse_options({"namesrv": NAMESRV, "topics": "Nope"}))
    options = parse_options(
        {"namesrv": NAMESRV, "topics": "Orders", "startingoffsets": '{"Orders":{"broker-x:0":1}}'}
    )
    with pytest.raises(ConfigError, match=r"startingOffsets Orders/broker-x:0.*broker-a \(4"):
        plan_network_read(two_brokers, options)
    options = parse_options({"namesrv": NAMESRV, "assign": '{"Orders": [9]}'})
    with pytest.raises(ConfigError, match="assign names queues no broker has: Orders queue 9"):
        plan_network_read(two_brokers, options)


def test_plan_keys_as_one_query_partition_per_broker(two_brokers: StoreCluster) -> None:
    options = parse_options({"namesrv": NAMESRV, "topics": "Orders", "keys": "shared"})
    parts = plan_network_read(two_brokers, options)
    assert [(p.broker, p.topic) for p in parts if isinstance(p, NetworkKeyPartition)] == [
        ("broker-a", "Orders"),
        ("broker-b", "Orders"),
    ]


# --- reading ------------------------------------------------------------------------------


def test_rows_equal_the_file_mode_on_each_broker(
    two_brokers: StoreCluster, store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = _read(two_brokers, monkeypatch)
    files = read_all({"path": str(store_path)})
    for broker in ("broker-a", "broker-b"):
        mine = [
            {k: v for k, v in r.items() if k != "broker"} for r in rows if r["broker"] == broker
        ]
        assert mine == sorted(files, key=lambda r: (r["topic"], r["partition"], r["offset"]))
    # Each queue is pulled in the broker's batches (up to 7 here, fewer at the small
    # consume queue files' ends), not message by message.
    assert len(two_brokers.pulls) < len(rows) / 3


def test_timestamps_tags_and_columns(
    two_brokers: StoreCluster, store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    low, high = BASE_MS + STEP_MS * 100, BASE_MS + STEP_MS * 200
    options = {
        "topics": "Orders",
        "startingTimestamp": str(low),
        "endingTimestamp": str(high),
        "tags": "TagA || TagC",
        "columns": "broker,partition,offset,tags,timestamp",
    }
    rows = _read(two_brokers, monkeypatch, **options)
    assert rows and all(
        set(r) == {"broker", "partition", "offset", "tags", "timestamp"} for r in rows
    )
    files = read_all({"path": str(store_path), **options, "columns": "partition,offset,tags"})
    got = sorted(
        (r["partition"], r["offset"], r["tags"]) for r in rows if r["broker"] == "broker-a"
    )
    assert got == sorted((r["partition"], r["offset"], r["tags"]) for r in files)


def test_key_lookups_query_without_pulling(
    two_brokers: StoreCluster, store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = _read(two_brokers, monkeypatch, topics="Orders", keys='["Orders-2-7", "Orders-1-3"]')
    assert sorted((r["broker"], r["partition"], r["offset"]) for r in rows) == [
        ("broker-a", 1, 3),
        ("broker-a", 2, 7),
        ("broker-b", 1, 3),
        ("broker-b", 2, 7),
    ]
    rows = _read(two_brokers, monkeypatch, topics="Orders", uniqKeys="UOrders030012")
    assert [(r["broker"], r["uniqKey"]) for r in rows] == [
        ("broker-a", "UOrders030012"),
        ("broker-b", "UOrders030012"),
    ]
    assert two_brokers.pulls == []
    assert len(two_brokers.queries) == 2 * 2 + 2


def test_a_key_with_more_matches_than_a_query_gives_is_scanned(
    two_brokers: StoreCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """'shared' tags every fifth message of each queue; with the query limit at 2 a
    broker's answer may be cut, and that broker's ranges are pulled instead."""
    full = _read(two_brokers, monkeypatch, topics="Orders", keys="shared")
    monkeypatch.setattr(network_scan, "QUERY_MAX_NUM", 2)
    cut = _read(two_brokers, monkeypatch, topics="Orders", keys="shared")
    assert cut == full and len(full) == 2 * 4 * 6
    assert two_brokers.pulls


def test_pulls_follow_the_suggested_slave(
    store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with MessageStore.open(store_path, read_only=True) as store:
        cluster = StoreCluster({"broker-a": store}, slaves=True)
        cluster.suggest = 1
        rows = _read(cluster, monkeypatch, assign='{"Payments": [0]}')
    assert len(rows) == 30
    used = [address for address, *_ in cluster.pulls]
    assert used[0] == "10.0.0.0:10911" and set(used[1:]) == {"10.0.1.0:10911"}


def test_pull_answers_that_move_on_or_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = [
        PullResult(ResponseCode.PULL_OFFSET_MOVED, 5, 5, 9, 0, b"", "OFFSET_TOO_SMALL"),
        PullResult(ResponseCode.PULL_RETRY_IMMEDIATELY, 7, 5, 9, 0, b"", "NO_MATCHED_MESSAGE"),
        PullResult(ResponseCode.PULL_NOT_FOUND, 9, 5, 9, 0, b"", "OFFSET_OVERFLOW_ONE"),
    ]
    offsets: list[int] = []

    class Scripted(StoreCluster):
        def pull(self, address: str, topic: str, qid: int, offset: int, n: int) -> PullResult:
            offsets.append(offset)
            return answers.pop(0)

    cluster = Scripted({})
    monkeypatch.setattr(network_scan, "Cluster", lambda *a, **k: cluster)
    part = NetworkPartition("T", "broker-a", ((0, "10.0.0.1:1"),), 0, 0, 20)
    assert list(read_network_partition(part, parse_options({"namesrv": NAMESRV}))) == []
    assert offsets == [0, 5, 7]


def test_a_refused_pull_names_the_queue_and_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    class Refusing(StoreCluster):
        def pull(self, address: str, topic: str, qid: int, offset: int, n: int) -> PullResult:
            return PullResult(ResponseCode.NO_PERMISSION, 0, 0, 0, 0, b"", "forbidden")

    monkeypatch.setattr(network_scan, "Cluster", lambda *a, **k: Refusing({}))
    part = NetworkPartition("T", "broker-a", ((0, "10.0.0.1:1"),), 3, 0, 20)
    # NO_PERMISSION is the ACL's refusal: the error says which options to give.
    with pytest.raises(
        AccessDeniedError,
        match=r"T queue broker-a:3 .*ACL of broker broker-a \(10.0.0.1:1\) \(code 16 "
        r"NO_PERMISSION, forbidden\): the broker checks an ACL: give options accessKey",
    ):
        list(read_network_partition(part, parse_options({"namesrv": NAMESRV})))


def test_decode_body_refuses_a_cut_record() -> None:
    assert decode_body(b"", "pull", True, None) == []
    with pytest.raises(Exception, match="pull of X: 3 bytes after the last record"):
        decode_body(b"abc", "pull of X", True, None)


def test_streams_through_name_servers_get_the_network_stream_reader() -> None:
    from rocketstore.spark.network_stream import NetworkStreamReader
    from rocketstore.spark.source import RocketStoreDataSource
    from rocketstore.spark.stream import RefusedStreamReader

    source = RocketStoreDataSource({"namesrv": NAMESRV})
    assert isinstance(source.streamReader(None), NetworkStreamReader)
    bad = RocketStoreDataSource({"namesrv": NAMESRV, "endingOffsets": "latest"})
    assert isinstance(bad.streamReader(None), RefusedStreamReader)
