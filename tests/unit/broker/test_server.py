"""The asyncio remoting server over real loopback sockets: concurrency per connection,
hostile frames close only their connection, one-way requests get no answer, frames cut
anywhere are reassembled."""

from __future__ import annotations

import asyncio
import logging
import struct

import pytest

from rocketstore.broker.client import RemotingClient, RemotingClientError, request
from rocketstore.broker.codes import ResponseCode
from rocketstore.broker.remoting import RemotingCommand, RequestFieldError, encode_command
from rocketstore.broker.server import Connection, RemotingServer, bind_socket
from rocketstore.remoting.connection import Event, RemotingConnection, ResponseReceived

SLOW, FAST, BOOM, BAD_FIELD, NOTE, SLOW_NOTE = 1, 2, 3, 4, 5, 6


class Handler:
    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.notes: list[str] = []

    async def __call__(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand | None:
        if cmd.code in (SLOW, SLOW_NOTE):
            await self.release.wait()
        if cmd.code == BOOM:
            raise RuntimeError("kaput")
        if cmd.code == BAD_FIELD:
            raise RequestFieldError("the request has no 'topic' field")
        if cmd.code in (NOTE, SLOW_NOTE):
            self.notes.append(cmd.ext_fields["text"])
        return cmd.response(ResponseCode.SUCCESS, conn.peer)


async def _server(handler: Handler, max_frame_bytes: int = 1 << 20) -> RemotingServer:
    server = RemotingServer(handler, name="test", max_frame_bytes=max_frame_bytes)
    await server.start(bind_socket("127.0.0.1", 0))
    return server


def test_requests_on_one_connection_run_concurrently() -> None:
    async def scenario() -> None:
        handler = Handler()
        server = await _server(handler)
        client = RemotingClient(server.address)
        try:
            slow = asyncio.create_task(client.invoke(request(SLOW), 5))
            fast = await client.invoke(request(FAST), 5)  # answered while SLOW is held
            assert fast.code == ResponseCode.SUCCESS and not slow.done()
            host, port = (fast.remark or "").rsplit(":", 1)
            assert host == "127.0.0.1" and int(port) > 0  # the client's own address
            handler.release.set()
            assert (await slow).code == ResponseCode.SUCCESS
            await client.invoke_oneway(request(NOTE, {"text": "hi"}))
            # A one-way request gets no answer; a later request still matches its own.
            assert (await client.invoke(request(FAST), 5)).code == 0
            assert handler.notes == ["hi"]
            failed = await client.invoke(request(BOOM), 5)
            assert failed.code == ResponseCode.SYSTEM_ERROR and "kaput" in (failed.remark or "")
            bad = await client.invoke(request(BAD_FIELD), 5)
            assert bad.code == ResponseCode.SYSTEM_ERROR and "'topic'" in (bad.remark or "")
        finally:
            await client.close()
            await server.stop()

    asyncio.run(scenario())


def test_a_one_way_request_finishes_after_its_connection_closes() -> None:
    """A client may close right after a one-way request (a producer's END_TRANSACTION):
    the request still runs to its end; a held request that needs an answer is dropped
    with the connection instead."""

    async def scenario() -> None:
        handler = Handler()
        server = await _server(handler)
        client = RemotingClient(server.address)
        try:
            answered = asyncio.create_task(client.invoke(request(SLOW_NOTE, {"text": "asked"}), 5))
            await client.invoke_oneway(request(SLOW_NOTE, {"text": "last word"}))
            await asyncio.sleep(0.05)
            await client.close()
            await asyncio.sleep(0.05)  # the server sees the connection gone
            handler.release.set()
            for _ in range(100):
                if handler.notes:
                    break
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.05)
            assert handler.notes == ["last word"]
            with pytest.raises(RemotingClientError):
                await answered
        finally:
            await server.stop()

    asyncio.run(scenario())


@pytest.mark.parametrize(
    "garbage",
    [
        struct.pack(">i", 1 << 28) + b"x" * 16,  # over the frame limit
        struct.pack(">ii", 10, 6) + b"{oops}",  # header is not JSON
        struct.pack(">i", 1),  # length below the minimum
        b"GET / HTTP/1.1\r\n\r\n",  # not our protocol at all
    ],
)
def test_hostile_frame_closes_only_its_connection(
    garbage: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        server = await _server(Handler(), max_frame_bytes=1024)
        host, port = server.address.rsplit(":", 1)
        good = RemotingClient(server.address)
        try:
            assert (await good.invoke(request(FAST), 5)).code == 0
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(garbage)
            await writer.drain()
            assert await asyncio.wait_for(reader.read(), 5) == b""  # closed by the server
            writer.close()
            assert (await good.invoke(request(FAST), 5)).code == 0  # others unaffected
            assert len(server.connections) == 1
        finally:
            await good.close()
            await server.stop()

    with caplog.at_level(logging.WARNING, logger="rocketstore.broker.server"):
        asyncio.run(scenario())
    assert any("closing connection from 127.0.0.1" in r.getMessage() for r in caplog.records)


def test_client_errors_name_the_address() -> None:
    async def scenario() -> None:
        sock = bind_socket("127.0.0.1", 0)
        port = sock.getsockname()[1]
        sock.close()
        client = RemotingClient(f"127.0.0.1:{port}")
        with pytest.raises(RemotingClientError, match=f"127.0.0.1:{port}"):
            await client.invoke(request(FAST), 1)

    asyncio.run(scenario())


def test_half_frame_then_close_is_tolerated() -> None:
    async def scenario() -> None:
        server = await _server(Handler())
        host, port = server.address.rsplit(":", 1)
        frame = encode_command(request(FAST))
        _reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(frame[: len(frame) // 2])
        await writer.drain()
        writer.close()
        await asyncio.sleep(0.1)
        assert not server.connections
        await server.stop()

    asyncio.run(scenario())


def test_the_server_asks_a_client_and_gets_its_answer() -> None:
    """Connection.request: a request to the client on its own connection, its answer
    matched by opaque (RocketMQ's Broker2Client calls: consumerStatus...); a connection
    that closes first fails the wait."""
    asked: list[RemotingCommand] = []
    failures: list[BaseException] = []

    async def handler(cmd: RemotingCommand, conn: Connection) -> RemotingCommand | None:
        try:
            answer = await conn.request(RemotingCommand(99, ext_fields={"q": "x"}), 5)
        except ConnectionError as e:
            failures.append(e)
            return None
        return cmd.response(ResponseCode.SUCCESS, answer.remark)

    async def scenario() -> None:
        server = RemotingServer(handler, name="test")
        await server.start(bind_socket("127.0.0.1", 0))
        client: RemotingClient

        def answer(cmd: RemotingCommand) -> None:
            asked.append(cmd)
            assert client._writer is not None
            client._writer.write(encode_command(cmd.response(0, f"pong-{cmd.ext_fields['q']}")))

        client = RemotingClient(server.address, on_request=answer)
        try:
            got = await client.invoke(request(FAST), 5)
            assert (got.code, got.remark) == (ResponseCode.SUCCESS, "pong-x")
            assert [c.code for c in asked] == [99]
            silent = RemotingClient(server.address)  # drops the server's requests
            pending = asyncio.create_task(silent.invoke(request(FAST), 5))
            await asyncio.sleep(0.3)
            await silent.close()
            with pytest.raises(RemotingClientError):
                await pending
            for _ in range(50):
                if failures:
                    break
                await asyncio.sleep(0.05)
            assert failures and "closed" in str(failures[0])
        finally:
            await client.close()
            await server.stop()

    asyncio.run(scenario())


def test_frames_pipelined_in_one_write_or_dribbled_byte_by_byte_are_all_answered() -> None:
    """The server is a driver of RemotingConnection: however the bytes arrive, each whole
    request is answered once, in order (answers read with a RemotingConnection too)."""

    async def scenario() -> None:
        server = await _server(Handler())
        host, port = server.address.rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        client = RemotingConnection()
        asked = [request(FAST) for _ in range(5)]
        try:
            writer.write(b"".join(client.send_request(cmd) for cmd in asked[:3]))
            for frame in [client.send_request(cmd) for cmd in asked[3:]]:
                for i in range(len(frame)):
                    writer.write(frame[i : i + 1])
                    await writer.drain()
            events: list[Event] = []
            while len(events) < len(asked):
                data = await asyncio.wait_for(reader.read(4096), 5)
                assert data, "the server closed the connection"
                events += client.receive_data(data)
            assert [e.request for e in events if isinstance(e, ResponseReceived)] == asked
            assert client.pending_opaques == frozenset()
        finally:
            writer.close()
            await server.stop()

    asyncio.run(scenario())
