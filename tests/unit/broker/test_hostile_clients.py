"""Clients that would cost the broker without bound, over real loopback sockets against a
broker in this process (issue #33 items 4, 6, 7, 8): each is refused or dropped, and the
broker goes on serving everyone else. The bounds are set small so the attacks are."""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from rocketstore.broker.app import BackgroundServer, BrokerOptions
from rocketstore.broker.broker_config import BrokerConfig
from rocketstore.broker.client import invoke_sync, request
from rocketstore.broker.codes import RequestCode, ResponseCode
from rocketstore.broker.processors import clients
from rocketstore.broker.remoting import RemotingCommand, decode_command, encode_command
from rocketstore.broker.server import MAX_BULKY_PER_CONNECTION, RemotingServer
from tests.unit.broker.broker_helpers import small_store

T = TypeVar("T")
MIB = 1024 * 1024


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., BackgroundServer]]:
    """A broker (and its name server) with these BrokerConfig settings."""
    servers: list[BackgroundServer] = []

    def make(**settings: Any) -> BackgroundServer:
        options = BrokerOptions(
            str(tmp_path / f"s{len(servers)}"),
            listen="127.0.0.1:0",
            store_config=small_store(),
            broker=BrokerConfig(**settings),
        )
        servers.append(BackgroundServer(options).start())
        return servers[-1]

    yield make
    for server in servers:
        server.stop()


def _in_loop(server: BackgroundServer, fn: Callable[[], T]) -> T:
    async def run() -> T:
        return fn()

    return server.call(run())


def _remoting(server: BackgroundServer) -> RemotingServer:
    assert server.broker.server is not None
    return server.broker.server


def _connections(server: BackgroundServer) -> int:
    return _in_loop(server, lambda: len(_remoting(server).connections))


def _wait_until(condition: Callable[[], bool], what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _connect(server: BackgroundServer) -> socket.socket:
    host, port = server.broker_address.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=30)


def _drain_until_closed(sock: socket.socket, limit_bytes: int) -> int:
    """Read until the broker closes the connection; how many bytes came."""
    received = 0
    while received <= limit_bytes:
        try:
            chunk = sock.recv(MIB)
        except (ConnectionResetError, TimeoutError):
            break
        if not chunk:
            break
        received += len(chunk)
    return received


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, "connection closed"
        data += chunk
    return bytes(data)


def _ask(sock: socket.socket, cmd: RemotingCommand) -> RemotingCommand:
    """One request on a connection of the test's own, and its answer (the broker's own
    requests to the client, a NOTIFY_CONSUMER_IDS_CHANGED, are passed over)."""
    sock.sendall(encode_command(cmd))
    for _ in range(100):
        (length,) = struct.unpack(">i", _recv_exactly(sock, 4))
        answer = decode_command(_recv_exactly(sock, length))
        if answer.is_response and answer.opaque == cmd.opaque:
            return answer
    raise AssertionError("no answer")


def _send(server: BackgroundServer, topic: str, body: bytes) -> dict[str, str]:
    ext = {"a": "PG", "b": topic, "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1"}
    ext |= {"h": "0", "i": "", "j": "0", "k": "false"}
    answer = invoke_sync(server.broker_address, request(RequestCode.SEND_MESSAGE_V2, ext, body))
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    return answer.ext_fields


def _still_serves(server: BackgroundServer) -> None:
    _send(server, "Other", b"still here")


# --- item 4: answers a client never reads --------------------------------------------------


def _view_requests(server: BackgroundServer, count: int) -> bytes:
    """``count`` pipelined VIEW_MESSAGE_BY_ID of a stored 1 MiB message."""
    _send(server, "Big", b"b" * MIB)
    store = server.broker.ctx.store  # type: ignore[union-attr]
    store.wait_dispatched()
    found = store.get_messages("G", "Big", 0, 0, 1)
    offset = str(found.messages[0].commit_log_offset)
    return encode_command(request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": offset})) * count


def _never_reading(server: BackgroundServer) -> socket.socket:
    sock = _connect(server)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    return sock


def _peak_unsent_until_dropped(server: BackgroundServer) -> int:
    """The most unsent bytes seen on the broker's connections until none is left."""
    peak = 0
    deadline = time.monotonic() + 60
    while True:
        unsent = _in_loop(server, lambda: [c.unsent_bytes for c in _remoting(server).connections])
        if not unsent:
            return peak
        peak = max(peak, *unsent)
        assert time.monotonic() < deadline, "the connection was not dropped"
        time.sleep(0.01)


def test_unsent_answers_past_the_bound_drop_the_connection(
    start: Callable[..., BackgroundServer],
) -> None:
    server = start(server_channel_max_unsent_bytes=2 * MIB)
    requests = 300  # 300 MiB of answers, were they all buffered
    attacker = _never_reading(server)
    try:
        attacker.sendall(_view_requests(server, requests))
        assert _peak_unsent_until_dropped(server) <= 4 * MIB  # the bound and one answer
        # What reached the socket: a few answers and the kernel's buffers, not 300 MiB.
        assert _drain_until_closed(attacker, requests * MIB) < requests * MIB // 10
    finally:
        attacker.close()
    _still_serves(server)


def test_a_client_that_stops_reading_stalls_then_is_closed_as_idle(
    start: Callable[..., BackgroundServer],
) -> None:
    """Under the bound, the broker stops reading the client's requests once about
    MAX_BULKY_PER_CONNECTION answers wait, and closes it when it stays idle."""
    server = start(server_channel_max_idle_time_seconds=1)
    attacker = _never_reading(server)
    try:
        attacker.sendall(_view_requests(server, 300))
        assert _peak_unsent_until_dropped(server) <= (MAX_BULKY_PER_CONNECTION + 2) * MIB
    finally:
        attacker.close()
    _still_serves(server)


def test_a_client_that_reads_pipelined_answers_gets_them_all(
    start: Callable[..., BackgroundServer],
) -> None:
    server = start(server_channel_max_unsent_bytes=(MAX_BULKY_PER_CONNECTION + 4) * MIB)
    requests = 60
    pipelined = _view_requests(server, requests)
    reader = _connect(server)
    try:
        sender = threading.Thread(target=reader.sendall, args=(pipelined,))
        sender.start()
        answers = 0
        buffer = b""
        while answers < requests:
            chunk = reader.recv(MIB)
            assert chunk, "the broker closed a connection that reads its answers"
            buffer += chunk
            while len(buffer) >= 4 and len(buffer) >= 4 + struct.unpack(">i", buffer[:4])[0]:
                buffer = buffer[4 + struct.unpack(">i", buffer[:4])[0] :]
                answers += 1
        sender.join(30)
    finally:
        reader.close()


# --- item 6: queue counts ----------------------------------------------------------------


def test_queue_counts_past_the_bound_are_refused_by_name(
    start: Callable[..., BackgroundServer],
) -> None:
    server = start(max_queue_nums=64)
    broker = server.broker_address

    def create(read: str, write: str = "4") -> RemotingCommand:
        ext = {"topic": "Many", "readQueueNums": read, "writeQueueNums": write, "perm": "6"}
        return invoke_sync(broker, request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext))

    too_long = create(str(2**63 - 1))
    assert too_long.code == ResponseCode.SYSTEM_ERROR
    assert "readQueueNums" in (too_long.remark or "") and "int" in (too_long.remark or "")
    too_many = create("4", str(2**31 - 1))
    assert too_many.code == ResponseCode.SYSTEM_ERROR
    assert "writeQueueNums 2147483647 is more than this broker's maxQueueNums 64" in (
        too_many.remark or ""
    )
    assert create("64", "64").code == ResponseCode.SUCCESS
    group = {"groupName": "G", "retryQueueNums": 2**31 - 1}
    answer = invoke_sync(
        broker,
        request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=json.dumps(group).encode()),
    )
    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert "retryQueueNums 2147483647 is more than this broker's maxQueueNums 64" in (
        answer.remark or ""
    )
    stats = invoke_sync(broker, request(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "Many"}))
    assert stats.code == ResponseCode.SUCCESS
    assert stats.body.count(b'"queueId"') == 64  # one entry per queue


# --- item 7: idle connections and half-sent frames ---------------------------------------


def test_idle_connections_and_half_sent_frames_are_closed(
    start: Callable[..., BackgroundServer],
) -> None:
    server = start(server_channel_max_idle_time_seconds=1)
    silent = [_connect(server) for _ in range(5)]
    half_sent = [_connect(server) for _ in range(5)]
    try:
        frame = encode_command(request(RequestCode.SEND_MESSAGE_V2, body=b"x" * 200_000))
        for sock in half_sent:
            sock.sendall(frame[: len(frame) // 2])
        _wait_until(lambda: _connections(server) == 0, "idle connections to be closed")
        for sock in silent + half_sent:
            assert _drain_until_closed(sock, 0) == 0
    finally:
        for sock in silent + half_sent:
            sock.close()
    _still_serves(server)


def test_partial_frames_across_connections_are_bounded(
    start: Callable[..., BackgroundServer],
) -> None:
    budget = 4 * MIB
    server = start(server_partial_frames_max_bytes=budget)
    frame = encode_command(request(RequestCode.SEND_MESSAGE_V2, body=b"x" * MIB))
    part = frame[: 900 * 1024]  # 900 KiB of a 1 MiB frame, never finished
    senders = [_connect(server) for _ in range(8)]
    dropped = 0
    try:
        for sock in senders:
            try:
                sock.sendall(part)
            except OSError:
                dropped += 1

        # The frames that fit stay open; the one whose bytes would pass the bound is closed.
        # (Wait for the server to have read what was sent too: the connection count can
        # pass at once, before a byte was counted.)
        def held_now() -> int:
            return int(_in_loop(server, lambda: _remoting(server).partial_frame_bytes))

        _wait_until(
            lambda: _connections(server) <= budget // len(part) and held_now() > 0,
            "connections dropped and the kept frames' bytes counted",
        )
        held = held_now()
        assert 0 < held <= budget
        _still_serves(server)  # small frames never count
    finally:
        for sock in senders:
            sock.close()
    _wait_until(
        lambda: _in_loop(server, lambda: _remoting(server).partial_frame_bytes) == 0,
        "the closed connections' bytes to be released",
    )


# --- item 8: heartbeats ------------------------------------------------------------------


def _heartbeat(subscriptions: int) -> bytes:
    data = [
        {"topic": f"T{i}", "subString": "*", "tagsSet": [], "codeSet": [], "subVersion": 1}
        for i in range(subscriptions)
    ]
    group = {"groupName": "G", "consumeType": "CONSUME_PASSIVELY", "subscriptionDataSet": data}
    body = {"clientID": "attacker", "consumerDataSet": [group], "producerDataSet": []}
    return json.dumps(body).encode()


def test_big_heartbeats_are_refused_and_large_ones_parsed_off_the_loop(
    start: Callable[..., BackgroundServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = start(heartbeat_max_body_bytes=512 * 1024)
    threads: list[str] = []
    parse = clients.parse_heartbeat

    def recording(body: bytes, *, off_loop: bool = False) -> dict[str, Any]:
        threads.append(threading.current_thread().name)
        return parse(body, off_loop=off_loop)

    monkeypatch.setattr(clients, "parse_heartbeat", recording)
    broker = server.broker_address
    huge = _heartbeat(8_000)  # about a MiB
    refused = invoke_sync(broker, request(RequestCode.HEART_BEAT, body=huge))
    assert refused.code == ResponseCode.SYSTEM_ERROR
    assert f"heartbeat body of {len(huge)} bytes" in (refused.remark or "")
    assert "heartbeatMaxBodyBytes 524288" in (refused.remark or "")
    assert threads == []  # refused unparsed

    large = _heartbeat(2_000)  # above INLINE_PARSE_MAX_BYTES, under the bound
    assert clients.INLINE_PARSE_MAX_BYTES < len(large) < 512 * 1024
    client = _connect(server)  # a consumer stays registered while its connection lasts
    try:
        for _ in range(5):
            assert _ask(client, request(RequestCode.HEART_BEAT, body=large)).code == 0
        assert threads and all(name.startswith("rocketstore-heartbeat") for name in threads)
        members = _ask(
            client, request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G"})
        )
        assert json.loads(members.body)["consumerIdList"] == ["attacker"]
    finally:
        client.close()
    _still_serves(server)
