"""Spark local[2] reading a running cluster through its name server only (issue #35): a
real ``rocketstore namesrv`` and two ``rocketstore broker`` processes on loopback, no store
path anywhere in the network jobs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.spark.network_helpers import TOPIC, Cluster, load, pulled_count, running_cluster

IDENTITY = ("broker", "partition", "offset")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("network")) as running:
        load(running)
        yield running


def _network(spark: Any, cluster: Cluster, **options: str) -> Any:
    reader = spark.read.format("rocketstore").option("namesrv", cluster.namesrv)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def _rows(df: Any) -> list[dict[str, Any]]:
    rows = [row.asDict(recursive=True) for row in df.collect()]
    return sorted(rows, key=lambda r: tuple(r[c] for c in IDENTITY))


def test_batch_read_equals_what_was_sent_on_both_brokers(spark: Any, cluster: Cluster) -> None:
    rows = _rows(_network(spark, cluster, topics=TOPIC))
    sent = sorted(cluster.sent, key=lambda r: tuple(r[c] for c in IDENTITY))
    assert len(rows) == len(sent) == 2 * 3 * 8
    for row, message in zip(rows, sent, strict=True):
        for name in ("broker", "topic", "partition", "offset", "value", "key", "tags",
                     "uniqKey", "flag"):  # fmt: skip
            assert row[name] == message[name], name
        assert row["headers"] == {"color": message["color"]}
        assert row["keys"] == message["key"].split(" ")
        assert row["properties"]["UNIQ_KEY"] == message["uniqKey"]


def test_network_rows_equal_the_file_mode_rows_of_each_broker_store(
    spark: Any, cluster: Cluster
) -> None:
    """Every column but ``broker`` is what the file mode reads from that broker's store
    (a separate job over the brokers' directories: the reference, not the network read)."""
    network = _rows(_network(spark, cluster, topics=TOPIC))
    expected = []
    for broker, store in sorted(cluster.stores.items()):
        df = spark.read.format("rocketstore").option("topics", TOPIC).load(str(store))
        expected += [{**row.asDict(recursive=True), "broker": broker} for row in df.collect()]
    assert network == sorted(expected, key=lambda r: tuple(r[c] for c in IDENTITY))


def test_offsets_keyed_by_broker(spark: Any, cluster: Cluster) -> None:
    starting = f'{{"{TOPIC}": {{"broker-a:0": 5, "broker-b:2": 6}}}}'
    ending = f'{{"{TOPIC}": {{"broker-a:0": 7}}}}'
    rows = _rows(
        _network(spark, cluster, topics=TOPIC, startingOffsets=starting, endingOffsets=ending)
    )
    a0 = [r["offset"] for r in rows if (r["broker"], r["partition"]) == ("broker-a", 0)]
    b2 = [r["offset"] for r in rows if (r["broker"], r["partition"]) == ("broker-b", 2)]
    b0 = [r["offset"] for r in rows if (r["broker"], r["partition"]) == ("broker-b", 0)]
    assert (a0, b2, b0) == ([5, 6], [6, 7], list(range(8)))


def test_timestamp_range(spark: Any, cluster: Cluster) -> None:
    every = _rows(
        _network(spark, cluster, topics=TOPIC, columns="broker,partition,offset,timestamp")
    )
    stamps = sorted({r["timestamp"] for r in every})
    low, high = stamps[len(stamps) // 3], stamps[2 * len(stamps) // 3]
    low_ms, high_ms = (int(t.timestamp() * 1000) for t in (low, high))
    got = _rows(
        _network(
            spark,
            cluster,
            topics=TOPIC,
            columns="broker,partition,offset,timestamp",
            startingTimestamp=str(low_ms),
            endingTimestamp=str(high_ms),
        )
    )
    # Store times rise along each queue: [first at/after low, first at/after high).
    assert got == [r for r in every if low <= r["timestamp"] < high]
    assert got


def test_key_lookup_pulls_nothing(spark: Any, cluster: Cluster) -> None:
    before = {b: pulled_count(cluster, b, TOPIC) for b in cluster.brokers}
    rows = _rows(_network(spark, cluster, topics=TOPIC, keys="shared"))
    assert rows
    expected = sorted(
        (m["broker"], m["partition"], m["offset"])
        for m in cluster.sent
        if "shared" in m["key"].split(" ")
    )
    assert [tuple(r[c] for c in IDENTITY) for r in rows] == expected
    assert {r["broker"] for r in rows} == set(cluster.brokers)
    by_uniq = _rows(_network(spark, cluster, topics=TOPIC, uniqKeys='["U-broker-b-1-003"]'))
    assert [r["uniqKey"] for r in by_uniq] == ["U-broker-b-1-003"]
    assert {b: pulled_count(cluster, b, TOPIC) for b in cluster.brokers} == before
    # ... while a read of the queues is counted there (the counter does count pulls).
    _network(spark, cluster, topics=TOPIC, columns="offset").count()
    after = {b: pulled_count(cluster, b, TOPIC) for b in cluster.brokers}
    assert all(after[b] >= before[b] + 3 * 8 for b in cluster.brokers)


def test_unknown_topic_is_named(spark: Any, cluster: Cluster) -> None:
    with pytest.raises(Exception, match="NoSuchTopic"):
        _network(spark, cluster, topics="NoSuchTopic").collect()


def test_unreachable_name_server_is_named(spark: Any, tmp_path: Path) -> None:
    from tests.spark.network_helpers import free_port

    address = f"127.0.0.1:{free_port()}"
    df = spark.read.format("rocketstore").option("namesrv", address).option("topics", TOPIC)
    with pytest.raises(Exception, match=address):
        df.load().collect()
