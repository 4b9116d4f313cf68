"""Blocking remoting requests: one-shot (:func:`invoke_sync`, for command-line tools) and
over a kept connection (:class:`BlockingConnection`, for the Spark source's driver and
executors, which pull many batches from one broker).

Layer: remoting. Plain sockets with timeouts, driving a sans-IO
:class:`~.connection.RemotingConnection` (framing, the frame limit, answer matching); no
asyncio (Spark's Python workers run
synchronous code), no store. The broker's asyncio client is rocketstore.broker.client.
"""

from __future__ import annotations

import itertools
import socket

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
    """One kept connection to one server, one request at a time. A failed request closes
    it (the next one reconnects): after a timeout the late answer must not be taken for
    the next request's."""

    def __init__(self, address: str, timeout_s: float = 10.0) -> None:
        self.address = address
        self.timeout_s = timeout_s
        self._sock: socket.socket | None = None
        self._protocol = RemotingConnection()

    def invoke(self, cmd: RemotingCommand) -> RemotingCommand:
        try:
            if self._sock is None:
                host, port = parse_host(self.address)
                self._sock = _connect(host, port, self.timeout_s)
                self._protocol = RemotingConnection()
            self._sock.sendall(self._protocol.send_request(cmd))
            return _answer(self._sock, self._protocol, cmd)
        except (OSError, RemotingClientError) as e:
            self.close()
            raise RemotingClientError(
                f"request code {cmd.code} to {self.address} failed: {e}"
            ) from e
        except ProtocolError:
            self.close()  # the stream is broken: the next request reconnects
            raise

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> BlockingConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
