"""Blocking remoting requests: one-shot (:func:`invoke_sync`, for command-line tools) and
over a kept connection (:class:`BlockingConnection`, for the Spark source's driver and
executors, which pull many batches from one broker: one request at a time, or several in
flight with :meth:`BlockingConnection.send` and :meth:`BlockingConnection.receive`).

Layer: remoting. Plain sockets with timeouts, driving a sans-IO
:class:`~.connection.RemotingConnection` (framing, the frame limit, answer matching); no
asyncio (Spark's Python workers run
synchronous code), no store. The broker's asyncio client is rocketstore.broker.client.
"""

from __future__ import annotations

import itertools
import socket
from collections import deque

from rocketstore.config import parse_host
from rocketstore.errors import StoreError
from rocketstore.remoting.codec import ProtocolError, RemotingCommand
from rocketstore.remoting.connection import (
    ProtocolViolation,
    RemotingConnection,
    ResponseReceived,
)
from rocketstore.remoting.tls import client_context

# The version our requests carry (MQVersion.Version.V4_9_8's ordinal in 4.9.8), so a Java
# name server or broker applies its 4.9 rules to us.
CLIENT_VERSION = 433
_opaques = itertools.count(1)
# At most this much is read from the socket at once.
_READ_BYTES = 1024 * 1024


class RemotingClientError(StoreError):
    """A request could not be sent or got no answer in time."""


def request(
    code: int, ext_fields: dict[str, str] | None = None, body: bytes = b""
) -> RemotingCommand:
    return RemotingCommand(
        code=code,
        opaque=next(_opaques),
        ext_fields=dict(ext_fields or {}),
        body=body,
        language="PYTHON",
        version=CLIENT_VERSION,
    )


def _connect(host: str, port: int, timeout_s: float) -> socket.socket:
    """A connection, with TLS when the process has it on (:mod:`rocketstore.remoting.tls`)."""
    sock = socket.create_connection((host, port), timeout=timeout_s)
    context = client_context()
    if context is None:
        return sock
    try:
        return context.wrap_socket(sock)
    except OSError:
        sock.close()
        raise


def invoke_sync(address: str, cmd: RemotingCommand, timeout_s: float = 5.0) -> RemotingCommand:
    """Send one request on a fresh connection and wait for its answer (blocking)."""
    host, port = parse_host(address)
    try:
        with _connect(host, port, timeout_s) as sock:
            protocol = RemotingConnection()
            sock.sendall(protocol.send_request(cmd))
            return _answer(sock, protocol, cmd)
    except OSError as e:
        raise RemotingClientError(f"request code {cmd.code} to {address} failed: {e}") from e


def _answer(
    sock: socket.socket, protocol: RemotingConnection, cmd: RemotingCommand
) -> RemotingCommand:
    """The response to ``cmd`` (requests the server sends meanwhile are dropped). A frame
    that breaks the protocol raises its ProtocolError."""
    while True:
        data = sock.recv(_READ_BYTES)
        if not data:
            why = "".join(f": {e.reason}" for e in protocol.receive_eof())
            raise RemotingClientError(f"the server closed the connection{why}")
        for event in protocol.receive_data(data):
            if isinstance(event, ProtocolViolation):
                raise event.error
            if isinstance(event, ResponseReceived) and event.command.opaque == cmd.opaque:
                return event.command


class BlockingConnection:
    """One kept connection to one server: one request at a time (:meth:`invoke`), or
    several in flight (:meth:`send` each, then :meth:`receive` the answers in the order
    the server sends them). A failed request closes it (the next one reconnects): after a
    timeout the late answer must not be taken for the next request's, and the answers to
    requests still in flight are lost with it."""

    def __init__(self, address: str, timeout_s: float = 10.0) -> None:
        self.address = address
        self.timeout_s = timeout_s
        self._sock: socket.socket | None = None
        self._protocol = RemotingConnection()
        # Answers read from the socket and not yet taken by receive().
        self._answers: deque[RemotingCommand] = deque()

    def invoke(self, cmd: RemotingCommand) -> RemotingCommand:
        try:
            sock = self._connected()
            sock.sendall(self._protocol.send_request(cmd))
            return _answer(sock, self._protocol, cmd)
        except (OSError, RemotingClientError) as e:
            self.close()
            raise RemotingClientError(
                f"request code {cmd.code} to {self.address} failed: {e}"
            ) from e
        except ProtocolError:
            self.close()  # the stream is broken: the next request reconnects
            raise

    def send(self, *cmds: RemotingCommand) -> None:
        """Send ``cmds`` (in one write) without waiting for their answers (:meth:`receive`
        takes them)."""
        try:
            sock = self._connected()
            sock.sendall(b"".join(self._protocol.send_request(cmd) for cmd in cmds))
        except OSError as e:
            self.close()
            codes = ", ".join(sorted({str(cmd.code) for cmd in cmds}))
            raise RemotingClientError(f"request code {codes} to {self.address} failed: {e}") from e

    def receive(self) -> RemotingCommand:
        """The next answer to a request :meth:`send` sent (requests the server sends are
        dropped); RemotingClientError when none comes in ``timeout_s`` or the connection
        ends, which also loses every answer still due."""
        try:
            while not self._answers:
                if self._sock is None:
                    raise RemotingClientError("no request is in flight (the connection closed)")
                data = self._sock.recv(_READ_BYTES)
                if not data:
                    why = "".join(f": {e.reason}" for e in self._protocol.receive_eof())
                    raise RemotingClientError(f"the server closed the connection{why}")
                for event in self._protocol.receive_data(data):
                    if isinstance(event, ProtocolViolation):
                        raise event.error
                    if isinstance(event, ResponseReceived):
                        self._answers.append(event.command)
            return self._answers.popleft()
        except (OSError, RemotingClientError) as e:
            self.close()
            raise RemotingClientError(f"answer from {self.address} failed: {e}") from e
        except ProtocolError:
            self.close()
            raise

    def _connected(self) -> socket.socket:
        if self._sock is None:
            host, port = parse_host(self.address)
            self._sock = _connect(host, port, self.timeout_s)
            # Requests sent while others are in flight must not wait for an ACK (Nagle).
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._protocol = RemotingConnection()
            self._answers.clear()
        return self._sock

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self._answers.clear()

    def __enter__(self) -> BlockingConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
