"""Held pulls are woken per queue: idle long-polls of one topic cost a producer of another
nothing (issue #33 item 3), and a multi-dispatched message wakes the queues it names."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.broker.app import BackgroundServer, BrokerOptions
from rocketstore.broker.client import invoke_sync, request
from rocketstore.broker.codes import RequestCode, ResponseCode
from rocketstore.broker.long_polling import PullWaiters, QueueKey
from rocketstore.broker.remoting import RemotingCommand, decode_command, encode_command
from rocketstore.format.multi_dispatch import INNER_MULTI_DISPATCH
from tests.unit.broker.broker_helpers import small_store

T = TypeVar("T")
QUEUES = 8
HELD_PER_QUEUE = 40


def _in_loop(server: BackgroundServer, fn: Callable[[], T]) -> T:
    """``fn()`` on the broker's event loop thread, after the callbacks already queued there
    (a dispatch report among them)."""

    async def run() -> T:
        return fn()

    return server.call(run())


def _wait_until(condition: Callable[[], bool], what: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, "connection closed"
        data += chunk
    return bytes(data)


def _read_frame(sock: socket.socket) -> RemotingCommand:
    (length,) = struct.unpack(">i", _recv_exactly(sock, 4))
    return decode_command(_recv_exactly(sock, length))


def _send(broker: str, topic: str, queue_id: int) -> None:
    ext = {"a": "PG", "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id), "f": "0"}
    ext |= {"g": "1", "h": "0", "i": "", "j": "0", "k": "false"}
    answer = invoke_sync(broker, request(RequestCode.SEND_MESSAGE_V2, ext, b"x"))
    assert answer.code == ResponseCode.SUCCESS, answer.remark


def _held_pull(queue_id: int) -> bytes:
    ext = {"consumerGroup": "G", "topic": "Idle", "queueId": str(queue_id), "queueOffset": "0"}
    ext |= {"maxMsgNums": "32", "sysFlag": "6", "commitOffset": "0", "subscription": "*"}
    ext |= {"suspendTimeoutMillis": "55000", "subVersion": "0"}  # held, subscription "*"
    return encode_command(request(RequestCode.PULL_MESSAGE, ext))


def test_idle_long_polls_are_woken_only_by_their_own_queue(tmp_path: Path) -> None:
    options = BrokerOptions(str(tmp_path / "s"), listen="127.0.0.1:0", store_config=small_store())
    with BackgroundServer(options) as server:
        broker = server.broker_address
        for topic in ("Idle", "Busy"):
            ext = {"topic": topic, "readQueueNums": str(QUEUES), "writeQueueNums": str(QUEUES)}
            answer = invoke_sync(broker, request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext))
            assert answer.code == ResponseCode.SUCCESS
        host, port = broker.rsplit(":", 1)
        pollers = [socket.create_connection((host, int(port)), timeout=30) for _ in range(2)]
        try:
            for n, poller in enumerate(pollers):
                half = range(n * QUEUES // 2, (n + 1) * QUEUES // 2)
                poller.sendall(b"".join(_held_pull(q) for q in half for _ in range(HELD_PER_QUEUE)))
            ctx = server.broker.ctx
            assert ctx is not None
            total = QUEUES * HELD_PER_QUEUE
            _wait_until(lambda: _in_loop(server, lambda: ctx.waiters.held) == total, "held pulls")

            # Count the held pulls' checks of their queue from here on.
            lookups: list[str] = []
            max_offset = ctx.store.max_offset

            def counting(topic: str, queue_id: int) -> int:
                lookups.append(topic)
                return max_offset(topic, queue_id)

            ctx.store.max_offset = counting  # type: ignore[method-assign]
            for i in range(20):
                _send(broker, "Busy", i % QUEUES)
            ctx.store.wait_dispatched()
            assert _in_loop(server, lambda: (ctx.waiters.held, lookups.count("Idle"))) == (total, 0)

            _send(broker, "Idle", 5)  # the second connection holds queue 5's pulls
            answers = [_read_frame(pollers[1]) for _ in range(HELD_PER_QUEUE)]
            assert {a.code for a in answers} == {ResponseCode.SUCCESS}
            assert {a.ext_fields["nextBeginOffset"] for a in answers} == {"1"}
            remaining = total - HELD_PER_QUEUE
            _wait_until(lambda: _in_loop(server, lambda: ctx.waiters.held) == remaining, "held")
        finally:
            for poller in pollers:
                poller.close()


class _Recorder(PullWaiters):
    def __init__(self, *, holding: bool = True) -> None:
        super().__init__()
        self.reported: set[QueueKey] = set()
        self.calls = 0
        if holding:  # a pull held on some other queue: runs are reported
            self._held[("Elsewhere", 0)] = set()

    def arrived(self, keys: Iterable[QueueKey]) -> None:
        self.calls += 1
        self.reported.update(keys)


def test_runs_are_not_reported_while_no_pull_is_held(tmp_path: Path) -> None:
    # (A slave taking its master's bytes dispatched them all for nobody.)
    with MessageStore.open(tmp_path, StoreConfig(mapped_file_size_commit_log=64 * 1024)) as store:
        waiters = _Recorder(holding=False)
        waiters.watch(store)
        assert store.put(Message("T", b"m", 3)).ok
        store.wait_dispatched()
    assert waiters.calls == 0


def test_a_multi_dispatched_message_reports_the_queues_it_names(tmp_path: Path) -> None:
    config = StoreConfig(
        mapped_file_size_commit_log=64 * 1024,
        mapped_file_size_consume_queue=20 * 20,
        enable_lmq=True,
        enable_multi_dispatch=True,
    )
    with MessageStore.open(tmp_path, config) as store:
        waiters = _Recorder()
        waiters.watch(store)
        waiters.watch(store)  # once per store, however often
        properties: dict[str, Any] = {INNER_MULTI_DISPATCH: "%LMQ%123,%LMQ%456"}
        assert store.put(Message("T", b"m", 3, properties=properties)).ok
        assert store.put(Message("U", b"m", 1)).ok
        store.wait_dispatched()
    assert waiters.reported == {("T", 3), ("U", 1), ("%LMQ%123", 0), ("%LMQ%456", 0)}


def test_a_held_pull_that_times_out_leaves_its_connection_serving(tmp_path: Path) -> None:
    """A pull runs in its connection's read loop until it is held (server.start_eagerly);
    its expiry answers it and must not cancel that loop: the next request on the same
    connection is answered too."""
    options = BrokerOptions(str(tmp_path / "s"), listen="127.0.0.1:0", store_config=small_store())
    with BackgroundServer(options) as server:
        _send(server.broker_address, "Idle", 0)  # the topic exists; queue 1 stays empty
        host, port = server.broker_address.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            for round_ in range(2):
                ext = {"consumerGroup": "G", "topic": "Idle", "queueId": "1"}
                ext |= {"queueOffset": "0", "maxMsgNums": "32", "sysFlag": "6"}
                ext |= {"commitOffset": "0", "subscription": "*", "subVersion": "0"}
                ext |= {"suspendTimeoutMillis": "300"}
                pull = request(RequestCode.PULL_MESSAGE, ext)
                started = time.monotonic()
                sock.sendall(encode_command(pull))
                answer = _read_frame(sock)
                assert answer.opaque == pull.opaque
                assert answer.code == ResponseCode.PULL_NOT_FOUND, (round_, answer.remark)
                assert time.monotonic() - started >= 0.25  # held until its timeout
