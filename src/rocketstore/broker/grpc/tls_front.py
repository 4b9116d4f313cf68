"""Plain and TLS gRPC on one port (the proxy's TLS mode ``permissive``).

Layer: broker.grpc. grpcio's server takes a port either plain or TLS, and takes no
accepted socket, so the public port is this front: it reads a connection's first byte
(0x16 opens a TLS handshake record, as RocketMQ's ``TlsModeHandler`` sniffs it; an HTTP/2
connection opens with the ASCII preface ``PRI * HTTP/2.0``) and relays the connection,
bytes unchanged, to one of two loopback ports of the same grpcio server: the plain one or
the TLS one (grpcio's C core does the TLS). What the relay costs is in docs/broker.md
("TLS on the gRPC port").

The gRPC server sees the relay's loopback address as the peer: :meth:`TlsFront.peer`
gives back the client's own address (for born hosts and the ACL's white lists), keyed by
the relay's local port.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import cast

from rocketstore.broker.tls import TLS_HANDSHAKE

__all__ = ["TlsFront"]

log = logging.getLogger(__name__)

# Pause reading one side while the other's write buffer holds this much (flow control
# across the relay: a slow reader must not make the broker buffer without bound).
HIGH_WATER_BYTES = 1024 * 1024
LOW_WATER_BYTES = 256 * 1024
# How long a closed connection's client address is still known by its relay port.
PEER_KEPT_S = 5.0


class _Relay(asyncio.Protocol):
    """One side of a relayed connection: what it reads goes to ``peer``'s transport."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.peer: _Relay | None = None
        self.pending: list[bytes] = []  # read before the other side exists
        self.closed = False
        self.port = 0  # an upstream side's local port (the key of TlsFront.peers)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # (cast: uvloop's TCPTransport is no subclass of asyncio.Transport)
        self.transport = cast(asyncio.Transport, transport)
        self.transport.set_write_buffer_limits(HIGH_WATER_BYTES, LOW_WATER_BYTES)

    def data_received(self, data: bytes) -> None:
        peer = self.peer
        if peer is None or peer.transport is None:
            self.pending.append(data)
            return
        peer.transport.write(data)

    def eof_received(self) -> bool:
        # (half-closed: the other way may still carry answers)
        peer = self.peer.transport if self.peer is not None else None
        if peer is not None and peer.can_write_eof():
            peer.write_eof()
            return True
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.close()

    # The other side's transport calls these on its own protocol: its write buffer is
    # this side's reading.
    def pause_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.resume_reading()


class _Client(_Relay):
    """The client's side: its first byte picks the target; then it relays."""

    def __init__(self, front: TlsFront) -> None:
        super().__init__()
        self.front = front
        self.started = False

    def data_received(self, data: bytes) -> None:
        if not self.started and data:
            self.started = True
            assert self.transport is not None
            self.transport.pause_reading()
            self.pending.append(data)
            self.front.track(asyncio.ensure_future(self._connect(data[0] == TLS_HANDSHAKE)))
            return
        super().data_received(data)

    async def _connect(self, tls: bool) -> None:
        assert self.transport is not None
        client = self.transport
        target = self.front.tls_target if tls else self.front.plain_target
        loop = asyncio.get_running_loop()
        try:
            _, upstream = await loop.create_connection(_Relay, *target)
        except OSError as e:
            log.warning("gRPC front: cannot reach the gRPC server at %s: %s", target, e)
            client.close()
            return
        sockname = upstream.transport.get_extra_info("sockname") if upstream.transport else None
        local_port = sockname[1] if sockname else 0
        peername = client.get_extra_info("peername")
        if local_port and peername:
            self.front.peers[local_port] = _address(peername)
        upstream.peer, self.peer, upstream.port = self, upstream, local_port
        assert upstream.transport is not None
        if self.closed:
            upstream.transport.close()
            self.front.peers.pop(local_port, None)
            return
        for chunk in self.pending:
            upstream.transport.write(chunk)
        self.pending.clear()
        # (the server may have spoken first, before the two were linked: its preface)
        for chunk in upstream.pending:
            client.write(chunk)
        upstream.pending.clear()
        if upstream.closed:  # (gone before the two were linked)
            client.close()
            return
        client.resume_reading()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.front.clients.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self.front.clients.discard(self)
        if self.peer is not None:
            # (kept a moment: the server may still be reading the connection's last calls)
            port = self.peer.port
            asyncio.get_running_loop().call_later(PEER_KEPT_S, self.front.peers.pop, port, None)


def _address(peername: object) -> str:
    if isinstance(peername, tuple) and len(peername) >= 2:
        host, port = peername[0], peername[1]
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    return "127.0.0.1:0"


class TlsFront:
    """The public port: sniffs each connection and relays it to ``plain_target`` or
    ``tls_target`` (loopback host, port)."""

    def __init__(self, plain_target: tuple[str, int], tls_target: tuple[str, int]) -> None:
        self.plain_target = plain_target
        self.tls_target = tls_target
        # the relay's local port -> the client's "ip:port"
        self.peers: dict[int, str] = {}
        self.clients: set[_Client] = set()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Future[None]] = set()

    def track(self, task: asyncio.Future[None]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def start(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _Client(self), sock=sock)

    def peer(self, address: str) -> str:
        """The client behind a relayed connection's ``ip:port`` as the gRPC server sees
        it (unchanged when it is not one of the relay's)."""
        _, _, port = address.rpartition(":")
        if port.isdigit():
            return self.peers.get(int(port), address)
        return address

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for task in list(self._tasks):
            task.cancel()
        # (Server.close leaves accepted connections open before Python 3.13)
        for client in list(self.clients):
            if client.transport is not None:
                client.transport.close()
