"""What a request handler may ask of the connection a request came on.

Layer: remoting. A typing protocol only: the broker's processors and name server are typed
against :class:`Peer`, not against the asyncio server's connection class, so they can be
called with a test double and never reach into sockets, buffers or limits.

The connection itself is the registration handle: the client registry and the name server
keep it (compared by identity) to know which clients and brokers it carries, and the
server's close hook tells them when it goes.
"""

from __future__ import annotations

from typing import Protocol

from rocketstore.remoting.codec import RemotingCommand


class Peer(Protocol):
    """The other end of one connection, as a request handler sees it."""

    @property
    def peer(self) -> str:
        """The remote address, ``ip:port`` (RocketMQ's born host and channel address)."""
        ...

    def send(self, cmd: RemotingCommand) -> None:
        """Queue a response or a one-way request to the peer (NOTIFY_CONSUMER_IDS_CHANGED,
        CHECK_TRANSACTION_STATE); dropped if the connection is closed."""
        ...

    async def request(self, cmd: RemotingCommand, timeout_s: float) -> RemotingCommand:
        """Send a request to the peer and await its answer (Broker2Client.callClient):
        TimeoutError after ``timeout_s``, ConnectionError if the connection closes first."""
        ...
