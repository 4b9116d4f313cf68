"""Blocking remoting requests: one-shot (:func:`invoke_sync`, for command-line tools) and
over a kept connection (:class:`BlockingConnection`, for the Spark source's driver and
executors, which pull many batches from one broker).

Layer: remoting. Plain sockets with timeouts; no asyncio (Spark's Python workers run
synchronous code), no store. The broker's asyncio client is rocketstore.broker.client.
"""

from __future__ import annotations

import itertools
import socket

from rocketstore.config import parse_host
from rocketstore.errors import StoreError
from rocketstore.remoting.codec import (
    DEFAULT_MAX_FRAME_BYTES,
    RemotingCommand,
    decode_command,
    encode_command,
    frame_length,
)

# The version our requests carry (MQVersion.Version.V4_9_8's ordinal in 4.9.8), so a Java
# name server or broker applies its 4.9 rules to us.
CLIENT_VERSION = 433
_opaques = itertools.count(1)


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


def invoke_sync(address: str, cmd: RemotingCommand, timeout_s: float = 5.0) -> RemotingCommand:
    """Send one request on a fresh connection and wait for its answer (blocking)."""
    host, port = parse_host(address)
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.sendall(encode_command(cmd))
            return _answer(sock, cmd)
    except OSError as e:
        raise RemotingClientError(f"request code {cmd.code} to {address} failed: {e}") from e


def _answer(sock: socket.socket, cmd: RemotingCommand) -> RemotingCommand:
    """The response to ``cmd`` (requests the server sends meanwhile are dropped)."""
    while True:
        prefix = _recv_exactly(sock, 4)
        length = frame_length(prefix, DEFAULT_MAX_FRAME_BYTES)
        assert length is not None
        answer = decode_command(_recv_exactly(sock, length))
        if answer.is_response and answer.opaque == cmd.opaque:
            return answer


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise RemotingClientError("the server closed the connection")
        chunks += chunk
    return bytes(chunks)


class BlockingConnection:
    """One kept connection to one server, one request at a time. A failed request closes
    it (the next one reconnects): after a timeout the late answer must not be taken for
    the next request's."""

    def __init__(self, address: str, timeout_s: float = 10.0) -> None:
        self.address = address
        self.timeout_s = timeout_s
        self._sock: socket.socket | None = None

    def invoke(self, cmd: RemotingCommand) -> RemotingCommand:
        try:
            if self._sock is None:
                host, port = parse_host(self.address)
                self._sock = socket.create_connection((host, port), timeout=self.timeout_s)
            self._sock.sendall(encode_command(cmd))
            return _answer(self._sock, cmd)
        except (OSError, RemotingClientError) as e:
            self.close()
            raise RemotingClientError(
                f"request code {cmd.code} to {self.address} failed: {e}"
            ) from e

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> BlockingConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
