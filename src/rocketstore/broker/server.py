"""The asyncio TCP server that speaks remoting frames, and the per-connection handle.

Layer: broker. Owns sockets and tasks only; what a request means is the router's business.
Each request runs as its own task, so a long-polling pull never blocks the heartbeats,
sends and offset commits that share its connection. A malformed or oversized frame closes
that one connection with a log line; the server and other connections carry on.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import socket
from collections.abc import Awaitable, Callable

from rocketstore.broker.codes import ResponseCode
from rocketstore.broker.remoting import (
    DEFAULT_MAX_FRAME_BYTES,
    ProtocolError,
    RemotingCommand,
    RequestFieldError,
    decode_command,
    encode_command,
    frame_length,
)
from rocketstore.broker.timeouts import within

log = logging.getLogger(__name__)

# Requests a single connection may have in flight before the server stops reading from it
# (back pressure instead of unbounded tasks).
MAX_IN_FLIGHT_PER_CONNECTION = 1024


class Connection:
    """One client connection: its peer address and a way to send it commands."""

    def __init__(self, writer: asyncio.StreamWriter, peer: str, local: str):
        self._writer = writer
        self.peer = peer  # "ip:port" of the client, as RocketMQ's born host
        self.local = local
        self.closed = False
        # Requests this side sent and awaits answers to (RocketMQ's Broker2Client calls).
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._next_opaque = itertools.count(1 << 30)

    async def request(self, cmd: RemotingCommand, timeout_s: float) -> RemotingCommand:
        """Send a request to the client and wait for its answer (TimeoutError after
        ``timeout_s``; ConnectionError when the connection closes first)."""
        cmd.opaque = next(self._next_opaque) & 0x7FFFFFFF
        answer: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
        self._pending[cmd.opaque] = answer
        try:
            self.send(cmd)
            return await asyncio.wait_for(answer, timeout_s)
        finally:
            self._pending.pop(cmd.opaque, None)

    def answered(self, cmd: RemotingCommand) -> None:
        """A response from the client: the answer to one of our requests, or to a one-way
        notification (then nobody waits for it)."""
        waiting = self._pending.pop(cmd.opaque, None)
        if waiting is not None and not waiting.done():
            waiting.set_result(cmd)

    def send(self, cmd: RemotingCommand) -> None:
        """Queue one frame (a single write, so frames of concurrent tasks never mix)."""
        if self.closed or self._writer.is_closing():
            return
        self._writer.write(encode_command(cmd))

    def close(self) -> None:
        self.closed = True
        self._writer.close()
        for waiting in self._pending.values():
            if not waiting.done():
                waiting.set_exception(ConnectionError(f"connection to {self.peer} closed"))
        self._pending.clear()

    def __repr__(self) -> str:
        return f"Connection({self.peer})"


Handler = Callable[[RemotingCommand, Connection], Awaitable[RemotingCommand | None]]


def format_address(address: object) -> str:
    """A socket address tuple -> ``ip:port`` (``[ip]:port`` for IPv6)."""
    if isinstance(address, tuple) and len(address) >= 2:
        host, port = str(address[0]), int(address[1])
        if host.startswith("::ffff:") and "." in host:
            host = host[len("::ffff:") :]  # an IPv4 client on a dual-stack socket
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return str(address)


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket (port 0 picks a free one); bound before the store opens so
    the store host can carry the real port."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(1024)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


class RemotingServer:
    def __init__(
        self,
        handler: Handler,
        *,
        name: str = "remoting",
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        on_close: Callable[[Connection], None] | None = None,
    ):
        self.handler = handler
        self.name = name
        self.max_frame_bytes = max_frame_bytes
        self.on_close = on_close
        self.connections: set[Connection] = set()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()  # one per connection
        self._requests: set[asyncio.Task[None]] = set()  # requests being handled
        self.address = ""

    async def start(self, sock: socket.socket) -> str:
        self._server = await asyncio.start_server(self._serve, sock=sock)
        self.address = format_address(sock.getsockname())
        log.info("%s listening on %s", self.name, self.address)
        return self.address

    async def stop(self, grace_s: float = 5.0) -> None:
        """Stop accepting, let requests in flight finish (up to ``grace_s``: a put being
        written completes and is answered), then close every connection."""
        if self._server is not None:
            self._server.close()
        pending = list(self._requests)
        if pending:
            await asyncio.wait(pending, timeout=grace_s)
        for conn in list(self.connections):
            conn.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await within(self._server.wait_closed(), 2)
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        peer = format_address(writer.get_extra_info("peername"))
        local = format_address(writer.get_extra_info("sockname"))
        conn = Connection(writer, peer, local)
        self.connections.add(conn)
        in_flight = asyncio.Semaphore(MAX_IN_FLIGHT_PER_CONNECTION)
        requests: set[asyncio.Task[None]] = set()
        try:
            while True:
                cmd = await self._read_command(reader)
                if cmd is None:
                    break
                if cmd.is_response:
                    conn.answered(cmd)
                    continue
                await in_flight.acquire()
                request = asyncio.create_task(self._handle(cmd, conn, in_flight))
                if not cmd.is_oneway:
                    # Only these end with the connection (a held pull has nobody to answer);
                    # a one-way request (END_TRANSACTION, an offset commit) is the client's
                    # last word even when it closes right after sending it.
                    requests.add(request)
                    request.add_done_callback(requests.discard)
                self._requests.add(request)
                request.add_done_callback(self._requests.discard)
                # Flow control: wait while the socket's send buffer is full.
                await writer.drain()
        except ProtocolError as e:
            log.warning("%s: closing connection from %s: %s", self.name, peer, e)
        except (ConnectionError, asyncio.IncompleteReadError, OSError):
            pass  # the peer went away
        except asyncio.CancelledError:
            pass
        finally:
            for request in list(requests):
                request.cancel()
            self.connections.discard(conn)
            conn.close()
            if self.on_close is not None:
                try:
                    self.on_close(conn)
                except Exception:
                    log.exception("%s: connection close hook failed", self.name)
            self._tasks.discard(task)

    async def _read_command(self, reader: asyncio.StreamReader) -> RemotingCommand | None:
        try:
            prefix = await reader.readexactly(4)
        except asyncio.IncompleteReadError as e:
            if e.partial:
                raise ProtocolError(
                    f"connection closed inside a frame prefix ({e.partial!r})"
                ) from e
            return None
        length = frame_length(prefix, self.max_frame_bytes)
        assert length is not None
        data = await reader.readexactly(length)
        return decode_command(data)

    async def _handle(
        self, cmd: RemotingCommand, conn: Connection, in_flight: asyncio.Semaphore
    ) -> None:
        try:
            try:
                response = await self.handler(cmd, conn)
            except RequestFieldError as e:
                response = cmd.response(ResponseCode.SYSTEM_ERROR, str(e))
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.exception("%s: request code %d from %s failed", self.name, cmd.code, conn)
                response = cmd.response(ResponseCode.SYSTEM_ERROR, f"{type(e).__name__}: {e}")
            if response is not None and not cmd.is_oneway:
                response.opaque = cmd.opaque
                conn.send(response)
        finally:
            in_flight.release()
