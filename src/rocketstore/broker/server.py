"""The asyncio TCP server that speaks remoting frames, and the per-connection handle.

Layer: broker. Owns sockets and tasks only: it feeds each connection's bytes to a sans-IO
:class:`~rocketstore.remoting.connection.RemotingConnection`, which frames, bounds and
matches them, and acts on its events; what a request means is the router's business.
Each request runs as its own task, so a long-polling pull never blocks the heartbeats,
sends and offset commits that share its connection. A malformed or oversized frame closes
that one connection with a log line; the server and other connections carry on.

What one client may cost is bounded (:class:`ConnectionLimits`, docs/broker.md "Protocol
handling and safety"): its unsent answers (reading stops above the high water mark, the
connection is dropped past ``server_channel_max_unsent_bytes``), the bytes of unfinished
frames across all connections, and its silence (serverChannelMaxIdleTimeSeconds).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import socket
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from rocketstore.broker.codes import ResponseCode
from rocketstore.broker.remoting import (
    DEFAULT_MAX_FRAME_BYTES,
    ProtocolError,
    RemotingCommand,
    RequestFieldError,
)
from rocketstore.broker.request_tasks import BulkyPlace, current_place, parked, start_eagerly
from rocketstore.broker.timeouts import within
from rocketstore.broker.tls import TLS_HANDSHAKE, ServerTls, TlsMode
from rocketstore.errors import StoreError
from rocketstore.remoting.connection import (
    AnsweredInline,
    ProtocolViolation,
    RemotingConnection,
    ResponseReceived,
)

# Defined here, and the request task helpers callers have taken from here.
__all__ = [
    "MAX_BULKY_PER_CONNECTION",
    "MAX_IN_FLIGHT_PER_CONNECTION",
    "WHOLE_READ_MAX_BYTES",
    "Connection",
    "ConnectionLimitError",
    "ConnectionLimits",
    "DefaultLimits",
    "Handler",
    "RemotingServer",
    "bind_socket",
    "format_address",
    "parked",
    "start_eagerly",
]

log = logging.getLogger(__name__)

# How long a new connection on a permissive TLS port has to send its first byte (and,
# with TLS, to finish the handshake).
_SNIFF_TIMEOUT_S = 30.0

# Requests a single connection may have in flight before the server stops reading from it
# (back pressure instead of unbounded tasks).
MAX_IN_FLIGHT_PER_CONNECTION = 1024
# Requests whose answers carry stored messages (up to 4 MiB each) a connection may have
# being worked on at once; the server reads no more of its requests until one is answered.
# With the write-buffer high water mark this bounds what a client that never reads its
# answers costs: about this many answers, not one per pipelined request. A held pull gives
# its place up while it waits (:func:`parked`).
MAX_BULKY_PER_CONNECTION = 8
# Unfinished frames up to this size are not counted; the bytes of larger ones are counted
# against ``server_partial_frames_max_bytes`` as they arrive.
WHOLE_READ_MAX_BYTES = 64 * 1024
# At most this much is read from a socket at once (what a connection may hold beyond its
# unfinished frame: the requests of one read wait there while back pressure holds them).
_CHUNK_BYTES = 1024 * 1024
# The idle check's period at most (a connection is closed up to this late).
_IDLE_CHECK_MAX_S = 5.0


class ConnectionLimits(Protocol):
    """The bounds a server applies, read each time they are used (BrokerConfig has these
    fields, so updateBrokerConfig changes them live)."""

    # Close a connection that neither sent a byte nor took one of its answers this long
    # (RocketMQ's serverChannelMaxIdleTimeSeconds, Netty's ALL_IDLE); 0: never.
    server_channel_max_idle_time_seconds: int
    # Stop reading a connection's requests while more of its answers than the high mark
    # wait to be sent; read again below the low mark (Netty's WriteBufferWaterMark).
    write_buffer_high_water_mark: int
    write_buffer_low_water_mark: int
    # Drop a connection whose unsent answers pass this (a client that never reads).
    server_channel_max_unsent_bytes: int
    # The bytes of frames still arriving, across all connections.
    server_partial_frames_max_bytes: int


@dataclass
class DefaultLimits:
    """The defaults (a name server's, a test server's); BrokerConfig's are the same."""

    server_channel_max_idle_time_seconds: int = 120
    write_buffer_high_water_mark: int = 64 * 1024
    write_buffer_low_water_mark: int = 32 * 1024
    server_channel_max_unsent_bytes: int = 64 * 1024 * 1024
    server_partial_frames_max_bytes: int = 256 * 1024 * 1024


class ConnectionLimitError(StoreError):
    """A connection went past one of the server's bounds; it is closed."""


class Connection:
    """One client connection: the driver of its :class:`RemotingConnection` on the write
    side (the server's read loop feeds it), and the :class:`~rocketstore.remoting.peer.Peer`
    the handlers see: its address, and ways to send it commands."""

    def __init__(
        self,
        writer: asyncio.StreamWriter,
        peer: str,
        local: str,
        limits: ConnectionLimits | None = None,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    ):
        self._writer = writer
        self.peer = peer  # "ip:port" of the client, as RocketMQ's born host
        self.local = local
        self.limits: ConnectionLimits = limits or DefaultLimits()
        self.protocol = RemotingConnection(max_frame_bytes)
        self.closed = False
        # When the client last sent a byte, or last took what was written to it (a write
        # into an empty buffer: the ones before it reached the socket). monotonic s.
        self.last_active_s = time.monotonic()
        # The bytes of this connection's unfinished frame counted in the server's
        # partial_frame_bytes (RemotingServer keeps it).
        self.partial_frame_bytes = 0
        # Requests this side sent and awaits answers to (RocketMQ's Broker2Client calls).
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._next_opaque = itertools.count(1 << 30)
        # Frames queued this loop turn, written together by one write at its end.
        self._out: list[bytes] = []
        self._out_bytes = 0

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
            self.protocol.forget(cmd.opaque)

    def answered(self, cmd: RemotingCommand) -> None:
        """A response from the client: the answer to one of our requests, or to a one-way
        notification (then nobody waits for it)."""
        waiting = self._pending.pop(cmd.opaque, None)
        if waiting is not None and not waiting.done():
            waiting.set_result(cmd)

    @property
    def unsent_bytes(self) -> int:
        """Bytes written to this connection that its socket has not taken yet."""
        return self._writer.transport.get_write_buffer_size() + self._out_bytes

    def flush(self) -> None:
        """Write the frames queued this loop turn, in one write (one send system call for
        the answers of many pipelined requests)."""
        out = self._out
        if not out:
            return
        self._out = []
        self._out_bytes = 0
        if self.closed or self._writer.is_closing():
            return
        self._writer.write(out[0] if len(out) == 1 else b"".join(out))

    def send(self, cmd: RemotingCommand) -> None:
        """Queue one frame (a single write, so frames of concurrent tasks never mix); a
        connection whose unsent bytes are past the bound is dropped instead."""
        if not self._has_room():
            return
        if cmd.is_response:
            frame = self.protocol.send_response(cmd)
        else:
            frame = self.protocol.send_request(cmd)
        self._queue(frame)

    def send_frame(self, frame: bytes) -> None:
        """``send`` for an answer already encoded (a send answered inline)."""
        if self._has_room():
            self._queue(frame)

    def _has_room(self) -> bool:
        """Whether a frame may be queued: the connection is open and its unsent bytes are
        within the bound (else it is dropped, with a log line)."""
        if self.closed or self._writer.is_closing():
            return False
        unsent = self.unsent_bytes
        if unsent == 0:
            self.last_active_s = time.monotonic()
        elif unsent > self.limits.server_channel_max_unsent_bytes:
            # Checked before the write, so one answer of any size always goes out.
            log.warning(
                "closing connection from %s: %d bytes of answers it does not read "
                "(serverChannelMaxUnsentBytes %d)",
                self.peer,
                unsent,
                self.limits.server_channel_max_unsent_bytes,
            )
            self.abort()
            return False
        return True

    def _queue(self, frame: bytes) -> None:
        if not self._out:
            asyncio.get_running_loop().call_soon(self.flush)
        self._out.append(frame)
        self._out_bytes += len(frame)

    def abort(self) -> None:
        """Close at once, dropping what was not sent (a hostile or idle client: a graceful
        close would wait for it to read)."""
        self._out = []
        self._out_bytes = 0
        self._writer.transport.abort()
        self.close()

    def close(self) -> None:
        self.flush()  # answers queued this turn still go out before the close
        self.closed = True
        self._writer.close()
        for waiting in self._pending.values():
            if not waiting.done():
                waiting.set_exception(ConnectionError(f"connection to {self.peer} closed"))
        self._pending.clear()
        self.protocol.forget_all()

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
        limits: ConnectionLimits | None = None,
        bulky_codes: frozenset[int] = frozenset(),
        eager_codes: frozenset[int] = frozenset(),
        fast_frames: Callable[[bytes, Connection], bytes | None] | None = None,
    ):
        """``bulky_codes``: the request codes whose answers carry stored messages;
        ``eager_codes``: the ones started at once in the read loop (:func:`start_eagerly`),
        which must not need a task of their own before their first wait (asyncio.timeout
        and current_task would find the read loop's); ``fast_frames``: the hook that
        answers a request from its frame's bytes, or None to decode it (the broker's
        common sends: no command, no task, no router)."""
        self.handler = handler
        self.bulky_codes = bulky_codes
        self.eager_codes = eager_codes
        self.fast_frames = fast_frames
        self.name = name
        self.max_frame_bytes = max_frame_bytes
        self.on_close = on_close
        self.limits: ConnectionLimits = limits or DefaultLimits()
        self.connections: set[Connection] = set()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()  # one per connection
        self._requests: set[asyncio.Task[None]] = set()  # requests being handled
        self._idle_check: asyncio.Task[None] | None = None
        self.partial_frame_bytes = 0  # bytes of large frames still arriving, all connections
        self.address = ""
        # TLS permissive mode: our own accept loop, which sniffs each connection's first byte
        self._listening: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None

    async def start(self, sock: socket.socket, tls: ServerTls | None = None) -> str:
        mode = tls.mode if tls is not None else TlsMode.DISABLED
        if tls is None or mode is TlsMode.DISABLED:
            self._server = await asyncio.start_server(self._serve, sock=sock)
        elif mode is TlsMode.ENFORCING:
            context = tls.server_context()
            self._server = await asyncio.start_server(self._serve, sock=sock, ssl=context)
        else:
            self._listening = sock
            self._accepting = asyncio.create_task(self._accept_sniffing(sock, tls.server_context()))
        self.address = format_address(sock.getsockname())
        self._idle_check = asyncio.create_task(self._close_idle_loop())
        log.info("%s listening on %s", self.name, self.address)
        return self.address

    async def _accept_sniffing(self, sock: socket.socket, context: ssl.SSLContext) -> None:
        """Permissive mode: plain remoting and TLS on one port (RocketMQ's TlsModeHandler)."""
        loop = asyncio.get_running_loop()
        sock.setblocking(False)
        while True:
            try:
                conn, _ = await loop.sock_accept(sock)
            except OSError as e:
                log.warning("%s: accept failed: %s", self.name, e)
                await asyncio.sleep(0.1)
                continue
            task = asyncio.create_task(self._sniff(conn, context))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _sniff(self, conn: socket.socket, context: ssl.SSLContext) -> None:
        loop = asyncio.get_running_loop()
        try:
            readable: asyncio.Future[None] = loop.create_future()

            def wake() -> None:
                if not readable.done():
                    readable.set_result(None)

            loop.add_reader(conn.fileno(), wake)
            try:
                # A connection that says nothing is dropped as an idle one would be.
                await asyncio.wait_for(readable, _SNIFF_TIMEOUT_S)
            finally:
                loop.remove_reader(conn.fileno())
            first = conn.recv(1, socket.MSG_PEEK)
            if not first:
                conn.close()
                return
            use_tls = first[0] == TLS_HANDSHAKE
            reader = asyncio.StreamReader(limit=2**16)
            transport, protocol = await loop.connect_accepted_socket(
                lambda: asyncio.StreamReaderProtocol(reader),
                conn,
                ssl=context if use_tls else None,
                ssl_handshake_timeout=_SNIFF_TIMEOUT_S if use_tls else None,
            )
        except (OSError, TimeoutError, ssl.SSLError) as e:
            log.warning("%s: connection dropped before its first request: %s", self.name, e)
            conn.close()
            return
        writer = asyncio.StreamWriter(transport, protocol, reader, loop)
        await self._serve(reader, writer)

    async def _close_idle_loop(self) -> None:
        while True:
            idle_s = self.limits.server_channel_max_idle_time_seconds
            await asyncio.sleep(min(idle_s / 4, _IDLE_CHECK_MAX_S) if idle_s > 0 else 5)
            if idle_s > 0:
                self.close_idle(idle_s)

    def close_idle(self, idle_s: float) -> None:
        """Drop every connection idle for more than ``idle_s`` (RocketMQ closes the channel
        on Netty's ALL_IDLE event): a half-sent frame or an unread answer is not held
        forever."""
        now = time.monotonic()
        for conn in list(self.connections):
            if now - conn.last_active_s > idle_s:
                log.warning(
                    "%s: closing connection from %s: idle for %.0f s "
                    "(serverChannelMaxIdleTimeSeconds %s)",
                    self.name,
                    conn.peer,
                    now - conn.last_active_s,
                    idle_s,
                )
                conn.abort()

    async def stop(self, grace_s: float = 5.0) -> None:
        """Stop accepting, let requests in flight finish (up to ``grace_s``: a put being
        written completes and is answered), then close every connection."""
        if self._idle_check is not None:
            self._idle_check.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._idle_check
            self._idle_check = None
        if self._server is not None:
            self._server.close()
        if self._accepting is not None:
            self._accepting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._accepting
            self._accepting = None
        if self._listening is not None:
            self._listening.close()
            self._listening = None
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
        conn = Connection(writer, peer, local, self.limits, self.max_frame_bytes)
        self.connections.add(conn)
        writer.transport.set_write_buffer_limits(
            self.limits.write_buffer_high_water_mark, self.limits.write_buffer_low_water_mark
        )
        fast = self.fast_frames
        if fast is not None:
            conn.protocol.fast = lambda frame: fast(frame, conn)
        in_flight = asyncio.Semaphore(MAX_IN_FLIGHT_PER_CONNECTION)
        bulky = asyncio.Semaphore(MAX_BULKY_PER_CONNECTION)
        requests: set[asyncio.Task[None]] = set()
        try:
            while True:
                data = await reader.read(_CHUNK_BYTES)
                if not data:
                    for violation in conn.protocol.receive_eof():
                        raise violation.error
                    break
                conn.last_active_s = time.monotonic()
                events = conn.protocol.receive_data(data)
                self._count_partial_frame(conn)
                for event in events:
                    if isinstance(event, ProtocolViolation):
                        raise event.error
                    if isinstance(event, AnsweredInline):
                        conn.send_frame(event.frame)
                        continue
                    if isinstance(event, ResponseReceived):
                        conn.answered(event.command)
                        continue
                    cmd = event.command
                    await in_flight.acquire()
                    place = None
                    if cmd.code in self.bulky_codes:
                        await bulky.acquire()
                        place = BulkyPlace(bulky)
                    handling = self._handle(cmd, conn, in_flight, place)
                    if cmd.code in self.eager_codes:
                        request = start_eagerly(handling)
                    else:
                        request = asyncio.create_task(handling)
                    if request is None:
                        # Answered already (queued on conn). Reading on while the answers
                        # are above the high water mark is checked once per read below.
                        continue
                    if not cmd.is_oneway:
                        # Only these end with the connection (a held pull has nobody to
                        # answer); a one-way request (END_TRANSACTION, an offset commit) is
                        # the client's last word even when it closes right after sending it.
                        requests.add(request)
                        request.add_done_callback(requests.discard)
                    self._requests.add(request)
                    request.add_done_callback(self._requests.discard)
                    # Flow control: read no more requests while this connection's answers
                    # are above the high water mark (until they drain below the low one).
                    await self._drain(conn, writer)
                if events:
                    # The answers this read completed (inline ones, eager ones that did
                    # not wait) go out now in one write, not a loop turn later: a
                    # consumer's next pull waits for this one's answer.
                    conn.flush()
                await self._drain(conn, writer)
        except ProtocolError as e:
            log.warning("%s: closing connection from %s: %s", self.name, peer, e)
        except ConnectionLimitError as e:
            log.warning("%s: closing connection from %s: %s", self.name, peer, e)
            conn.abort()
        except (ConnectionError, OSError):
            pass  # the peer went away
        except asyncio.CancelledError:
            pass
        finally:
            for request in list(requests):
                request.cancel()
            self.partial_frame_bytes -= conn.partial_frame_bytes
            conn.partial_frame_bytes = 0
            self.connections.discard(conn)
            conn.close()
            if self.on_close is not None:
                try:
                    self.on_close(conn)
                except Exception:
                    log.exception("%s: connection close hook failed", self.name)
            self._tasks.discard(task)

    async def _drain(self, conn: Connection, writer: asyncio.StreamWriter) -> None:
        """Wait while ``conn``'s answers are above the high water mark (the queued ones
        written first, so the transport knows them)."""
        if conn.unsent_bytes > self.limits.write_buffer_low_water_mark:
            conn.flush()
            await writer.drain()
        elif writer.is_closing():
            await writer.drain()  # raises the connection's error, as before

    def _count_partial_frame(self, conn: Connection) -> None:
        """Count the bytes of ``conn``'s unfinished frame, if it is a large one, against
        the bound on unfinished frames across connections (40 clients that each sent
        16 MiB less a byte held 664 MiB); past it, ConnectionLimitError closes ``conn``.
        Frames up to WHOLE_READ_MAX_BYTES are never counted."""
        length = conn.protocol.incoming_frame_bytes
        held = conn.protocol.partial_frame_bytes
        counted = held if length is not None and length > WHOLE_READ_MAX_BYTES else 0
        growth = counted - conn.partial_frame_bytes
        limit = self.limits.server_partial_frames_max_bytes
        if growth > 0 and self.partial_frame_bytes + growth > limit:
            raise ConnectionLimitError(
                f"unfinished frames of all connections would pass {limit} bytes "
                f"(serverPartialFramesMaxBytes); this one had {conn.partial_frame_bytes} "
                f"of {length}"
            )
        self.partial_frame_bytes += growth
        conn.partial_frame_bytes = counted

    async def _handle(
        self,
        cmd: RemotingCommand,
        conn: Connection,
        in_flight: asyncio.Semaphore,
        place: BulkyPlace | None,
    ) -> None:
        current_place.set(place)  # this task's own context
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
            if place is not None:
                place.give_up()
            in_flight.release()
