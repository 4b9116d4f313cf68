"""A small remoting client: the broker's link to its name servers, and admin tools' and
tests' way to talk to a running broker.

Layer: broker. ``RemotingClient`` is asyncio, a driver of a sans-IO
:class:`~rocketstore.remoting.connection.RemotingConnection` (which frames the bytes and
matches answers to requests by opaque);
``invoke_sync``, a blocking one-shot request for command-line tools, is
:mod:`rocketstore.remoting.blocking`'s, re-exported here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Callable

from rocketstore.broker.remoting import (
    DEFAULT_MAX_FRAME_BYTES,
    FLAG_ONEWAY,
    ProtocolError,
    RemotingCommand,
)
from rocketstore.broker.timeouts import within
from rocketstore.config import parse_host
from rocketstore.remoting.blocking import (
    CLIENT_VERSION,
    RemotingClientError,
    invoke_sync,
    request,
)
from rocketstore.remoting.connection import (
    ProtocolViolation,
    RemotingConnection,
    RequestReceived,
    ResponseReceived,
)
from rocketstore.remoting.tls import client_context

log = logging.getLogger(__name__)

# At most this much is read from the socket at once.
_READ_BYTES = 1024 * 1024

# Moved to rocketstore.remoting.blocking (the Spark source uses them too).
__all__ = ["CLIENT_VERSION", "RemotingClient", "RemotingClientError", "invoke_sync", "request"]


class RemotingClient:
    """One connection to one server; ``invoke`` may be called concurrently."""

    def __init__(
        self,
        address: str,
        *,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        on_request: Callable[[RemotingCommand], None] | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ):
        """``ssl_context``: TLS with it; None: as the process's setting says
        (:func:`rocketstore.remoting.tls.client_context`)."""
        self.address = address
        self.ssl_context = ssl_context if ssl_context is not None else client_context()
        self.max_frame_bytes = max_frame_bytes
        # Requests the server sends on this connection (CHECK_TRANSACTION_STATE,
        # NOTIFY_CONSUMER_IDS_CHANGED ...); without a handler they are dropped.
        self.on_request = on_request
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._protocol = RemotingConnection(max_frame_bytes)
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._connect_lock = asyncio.Lock()

    @property
    def connected(self) -> bool:
        return self._writer is not None and not self._writer.is_closing()

    async def _connect(self) -> asyncio.StreamWriter:
        async with self._connect_lock:
            if self._writer is not None and not self._writer.is_closing():
                return self._writer
            host, port = parse_host(self.address)
            try:
                reader, writer = await asyncio.open_connection(
                    host,
                    port,
                    ssl=self.ssl_context,
                    server_hostname="" if self.ssl_context else None,
                )
            except OSError as e:
                raise RemotingClientError(f"cannot connect to {self.address}: {e}") from e
            self._writer = writer
            self._protocol = RemotingConnection(self.max_frame_bytes)
            self._reader_task = asyncio.create_task(self._read_loop(reader, self._protocol))
            return writer

    async def _read_loop(self, reader: asyncio.StreamReader, protocol: RemotingConnection) -> None:
        try:
            while True:
                data = await reader.read(_READ_BYTES)
                events = protocol.receive_data(data) if data else protocol.receive_eof()
                for event in events:
                    if isinstance(event, ProtocolViolation):
                        raise event.error
                    if isinstance(event, RequestReceived):
                        if self.on_request is not None:
                            self.on_request(event.command)
                        continue
                    if not isinstance(event, ResponseReceived):
                        continue  # (AnsweredInline: this side sets no fast hook)
                    future = self._pending.pop(event.command.opaque, None)
                    if future is not None and not future.done():
                        future.set_result(event.command)
                if not data:
                    break
        except (ConnectionError, OSError, ProtocolError) as e:
            log.debug("connection to %s ended: %s", self.address, e)
        finally:
            self._fail_pending(f"connection to {self.address} closed")
            if self._writer is not None:
                self._writer.close()

    def _fail_pending(self, why: str) -> None:
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(RemotingClientError(why))

    async def invoke(self, cmd: RemotingCommand, timeout_s: float = 3.0) -> RemotingCommand:
        writer = await self._connect()
        future: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
        self._pending[cmd.opaque] = future
        protocol = self._protocol
        writer.write(protocol.send_request(cmd))
        try:
            return await within(future, timeout_s)
        except TimeoutError as e:
            raise RemotingClientError(
                f"no answer from {self.address} to request code {cmd.code} in {timeout_s}s"
            ) from e
        finally:
            self._pending.pop(cmd.opaque, None)
            protocol.forget(cmd.opaque)

    async def invoke_oneway(self, cmd: RemotingCommand) -> None:
        writer = await self._connect()
        cmd.flag |= FLAG_ONEWAY
        writer.write(self._protocol.send_request(cmd))
        await writer.drain()

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        if self._reader_task is not None:
            self._reader_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader_task
        self._writer = None
        self._reader_task = None
