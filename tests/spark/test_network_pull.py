"""Pulls in flight (#35): the network reader keeps several pulls of a queue in flight on
one connection and gets the same rows, in the same order, as one pull at a time: answers
out of order, fewer messages than asked, an OFFSET_MOVED answer in the middle, a
connection lost with pulls in flight. The clusters are the reader tests' store-backed
ones, so every read is compared with the file mode's read of the same store."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from rocketstore import MessageStore
from rocketstore.broker.app import BackgroundServer, BrokerOptions
from rocketstore.errors import DataLossError
from rocketstore.remoting.blocking import RemotingClientError, invoke_sync, request
from rocketstore.remoting.codes import RequestCode, ResponseCode
from rocketstore.spark import network_pull, network_scan
from rocketstore.spark.network_cluster import Cluster, PullRequest, PullResult
from rocketstore.spark.network_plan import NetworkPartition
from rocketstore.spark.network_pull import Puller, PullPipeline
from rocketstore.spark.network_scan import read_network_partition
from rocketstore.spark.options import parse_options, parse_stream_options
from tests.spark.test_network_reader import NAMESRV, StoreCluster, _read, two_brokers
from tests.unit.broker.broker_helpers import small_store

__all__ = ["two_brokers"]  # the fixture, imported for these tests

PAYMENTS_0 = '{"Payments": [0]}'  # 30 messages on each broker


def _rows_without_broker(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k != "broker"} for r in rows]


class Shuffled(StoreCluster):
    """Answers each connection's pulls in a random order (a Java broker answers pulls
    from a thread pool), and checks what is in flight: never more than the window, never
    two pulls asking for the same offsets."""

    def __init__(self, stores: dict[str, MessageStore], seed: int) -> None:
        super().__init__(stores)
        self.random = random.Random(seed)
        self.flying: dict[int, tuple[int, int, int]] = {}  # ticket -> (queue, first, end)
        self.most_in_flight = 0

    def send_pulls(self, address: str, pulls: list[PullRequest]) -> list[int]:
        tickets = super().send_pulls(address, pulls)
        for ticket, (_, qid, offset, count) in zip(tickets, pulls, strict=True):
            for other_qid, first, end in self.flying.values():
                assert other_qid != qid or end <= offset or offset + count <= first
            self.flying[ticket] = (qid, offset, offset + count)
        self.most_in_flight = max(self.most_in_flight, len(self.flying))
        return tickets

    def receive_pull(self, address: str) -> tuple[int, PullResult]:
        waiting = self._in_flight[address]
        waiting.rotate(-self.random.randrange(len(waiting)))
        ticket, result = waiting.popleft()
        self.flying.pop(ticket)
        return ticket, result


@pytest.mark.parametrize("window", [1, 3, 64])
def test_answers_out_of_order_give_the_rows_in_queue_order(
    two_brokers: StoreCluster, monkeypatch: pytest.MonkeyPatch, window: int
) -> None:
    expected = _read(two_brokers, monkeypatch)
    shuffled = Shuffled(two_brokers.stores, seed=window)
    monkeypatch.setattr(network_pull, "PULLS_IN_FLIGHT", window)
    got = _read(shuffled, monkeypatch)
    assert got == expected
    # Fewer than asked each time (7 of 32): the gaps were pulled, nothing twice.
    assert 0 < shuffled.most_in_flight <= window
    assert len(shuffled.pulls) == len(two_brokers.pulls)


def test_big_answers_shrink_the_window(
    two_brokers: StoreCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """About PULL_BYTES_IN_FLIGHT of answers in flight, whatever the window: here less
    than one answer's bytes, so one pull at a time once the first answer is in."""
    expected = _read(two_brokers, monkeypatch)
    shuffled = Shuffled(two_brokers.stores, seed=1)
    monkeypatch.setattr(network_pull, "PULL_BYTES_IN_FLIGHT", 1)
    assert _read(shuffled, monkeypatch) == expected
    assert shuffled.most_in_flight == 1


def test_rows_come_out_in_queue_order_within_a_partition(
    two_brokers: StoreCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(network_scan, "Cluster", lambda *a, **k: Shuffled(two_brokers.stores, 3))
    part = NetworkPartition("Payments", "broker-a", ((0, "10.0.0.0:10911"),), 0, 4, 27)
    offsets = [
        o for b in read_network_partition(part, parse_options({"namesrv": NAMESRV}))
        for o in b.column("offset").to_pylist()
    ]  # fmt: skip
    assert offsets == list(range(4, 27))


def test_one_pull_in_flight_follows_the_broker_step_by_step(
    two_brokers: StoreCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(network_pull, "PULLS_IN_FLIGHT", 1)
    _read(two_brokers, monkeypatch, assign=PAYMENTS_0)
    offsets = [
        offset for address, _, _, offset in two_brokers.pulls if address.endswith(".0:10911")
    ]
    assert offsets[0] == 0 and offsets == sorted(offsets)


class Moved(StoreCluster):
    """Offsets [10, 20) of every queue are gone (retention): a pull there answers
    OFFSET_MOVED to 20, and a pull before 10 stops at 10."""

    def pull(self, address: str, topic: str, qid: int, offset: int, n: int) -> PullResult:
        if 10 <= offset < 20:
            self.pulls.append((address, topic, qid, offset))
            return PullResult(ResponseCode.PULL_OFFSET_MOVED, 20, 0, 30, 0, b"", "moved")
        return super().pull(address, topic, qid, offset, min(n, 10 - offset) if offset < 10 else n)


def test_an_offset_moved_answer_in_the_middle(
    two_brokers: StoreCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    moved = Moved(two_brokers.stores)
    rows = [r for r in _read(moved, monkeypatch, assign=PAYMENTS_0) if r["broker"] == "broker-a"]
    assert [r["offset"] for r in rows] == [*range(10), *range(20, 30)]
    every = [r for r in _read(two_brokers, monkeypatch, assign=PAYMENTS_0)]
    assert rows == [r for r in every if r["broker"] == "broker-a" and not 10 <= r["offset"] < 20]
    # A stream's partition with failOnDataLoss fails instead of stepping over.
    monkeypatch.setattr(network_scan, "Cluster", lambda *a, **k: moved)
    part = NetworkPartition("Payments", "broker-a", ((0, "10.0.0.0:10911"),), 0, 0, 30, True)
    with pytest.raises(DataLossError, match=r"offsets \[10, 30\).*up to 20"):
        list(read_network_partition(part, parse_stream_options({"namesrv": NAMESRV}).read))


class Dropping(StoreCluster):
    """The connection fails once, on the ``fail_at``-th answer, losing every pull in
    flight on it; the next pulls reconnect."""

    def __init__(self, stores: dict[str, MessageStore], fail_at: int) -> None:
        super().__init__(stores)
        self.answers = 0
        self.fail_at = fail_at
        self.alone: list[int] = []

    def receive_pull(self, address: str) -> tuple[int, PullResult]:
        self.answers += 1
        if self.answers == self.fail_at:
            self._in_flight[address].clear()
            raise RemotingClientError(f"answer from {address} failed: connection reset")
        return super().receive_pull(address)


def test_a_connection_lost_with_pulls_in_flight_loses_no_row(
    two_brokers: StoreCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = _read(two_brokers, monkeypatch, topics="Orders")
    for fail_at in (1, 2, 5):
        got = _read(Dropping(two_brokers.stores, fail_at), monkeypatch, topics="Orders")
        assert got == expected


def test_a_broker_that_stays_down_is_named(
    store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Down(StoreCluster):
        def send_pulls(self, address: str, pulls: list[PullRequest]) -> list[int]:
            raise RemotingClientError(f"request code 11 to {address} failed: refused")

        def pull(self, address: str, topic: str, qid: int, offset: int, n: int) -> PullResult:
            raise RemotingClientError(f"request code 11 to {address} failed: refused")

    monkeypatch.setattr(network_scan, "Cluster", lambda *a, **k: Down({}))
    part = NetworkPartition("T", "broker-a", ((0, "10.0.0.1:1"),), 2, 0, 20)
    with pytest.raises(RemotingClientError, match=r"pull of T queue broker-a:2 at 0 .*refused"):
        list(read_network_partition(part, parse_options({"namesrv": NAMESRV})))


def test_the_pipeline_hands_out_the_answer_at_the_asked_offset(
    two_brokers: StoreCluster,
) -> None:
    """Asked at an offset no pull covers (after a jump), it pulls there first; answers
    of pulls below it are dropped."""
    puller = Puller(two_brokers, "broker-a", ((0, "10.0.0.0:10911"),))
    pipeline = PullPipeline(puller, "Payments", 0, 0, 30, window=4, stride=5)
    first = pipeline.pull(0)
    assert (first.code, first.next_begin_offset) == (ResponseCode.SUCCESS, 5)
    assert pipeline.pulls_sent == 4  # 0, 5, 10, 15 in flight
    jumped = pipeline.pull(17)
    assert (jumped.code, jumped.next_begin_offset) == (ResponseCode.SUCCESS, 22)
    sent = [offset for *_, offset in two_brokers.pulls]
    assert sent[:4] == [0, 5, 10, 15] and 17 in sent


def test_pulls_in_flight_on_a_real_broker(tmp_path: Path) -> None:
    """Several PULL_MESSAGEs on one connection to rocketstore's broker: each answered,
    matched by its ticket, past the end too; a partition read through it has every row."""
    options = BrokerOptions(
        str(tmp_path / "store"), listen="127.0.0.1:0", store_config=small_store()
    )
    with BackgroundServer(options) as server:
        address = server.broker_address
        ext = {"a": "PG", "b": "Pipe", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1"}
        ext |= {"h": "0", "i": "", "j": "0", "k": "false"}
        for i in range(100):
            sent = invoke_sync(address, request(RequestCode.SEND_MESSAGE_V2, ext, b"m%d" % i))
            assert sent.code == ResponseCode.SUCCESS, sent.remark
        with Cluster() as cluster:
            offsets = [0, 10, 20, 90, 200]
            tickets = cluster.send_pulls(address, [("Pipe", 0, o, 10) for o in offsets])
            answers = dict(cluster.receive_pull(address) for _ in offsets)
        assert sorted(answers) == sorted(tickets)
        by_offset = {o: answers[t] for o, t in zip(offsets, tickets, strict=True)}
        for offset in (0, 10, 20, 90):
            assert by_offset[offset].code == ResponseCode.SUCCESS
            assert by_offset[offset].next_begin_offset == offset + 10
        assert by_offset[200].code != ResponseCode.SUCCESS and not by_offset[200].body
        part = NetworkPartition("Pipe", "broker-a", ((0, address),), 0, 3, 100)
        batches = read_network_partition(part, parse_options({"namesrv": NAMESRV}))
        rows = [row for batch in batches for row in batch.to_pylist()]
    assert [r["offset"] for r in rows] == list(range(3, 100))
    assert [r["value"] for r in rows] == [b"m%d" % i for i in range(3, 100)]
