"""The console's HTTP server: the standard library's WSGI server, one thread per
request, in a thread of its own (a slow page never holds up a broker's event loop).

Layer: console.
"""

from __future__ import annotations

import asyncio
import logging
import socketserver
import threading
from collections.abc import Callable
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from rocketstore.config import parse_host
from rocketstore.console.app import Console
from rocketstore.console.source import Source

log = logging.getLogger(__name__)


class _ThreadingServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        log.debug("%s " + format, self.address_string(), *args)


class ConsoleServer:
    """Serves a :class:`Console` at ``listen`` (HOST:PORT; port 0 picks one)."""

    def __init__(self, source: Source, listen: str, *, actions: bool = False) -> None:
        self.console = Console(source, actions_enabled=actions)
        self.listen = listen
        self._server: _ThreadingServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        name = host.decode() if isinstance(host, bytes) else str(host)
        return f"[{name}]:{port}" if ":" in name else f"{name}:{port}"

    def start(self) -> None:
        host, port = parse_host(self.listen, what="console listen address")
        try:
            server = make_server(
                host, port, self.console, server_class=_ThreadingServer, handler_class=_QuietHandler
            )
        except OSError as e:
            raise OSError(e.errno, f"cannot listen on {self.listen}: {e.strerror}") from e
        assert isinstance(server, _ThreadingServer)
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, name="rocketstore-console", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join()
        self._server = self._thread = None


class ConsoleService:
    """``serve --http-listen``: the console as one of the broker's services, started
    after the broker (its pages read the broker's context) and stopped before it."""

    def __init__(self, make: Callable[[], ConsoleServer]) -> None:
        self._make = make
        self.server: ConsoleServer | None = None

    async def start(self) -> None:
        server = self._make()
        server.console.actions.loop = asyncio.get_running_loop()
        await asyncio.to_thread(server.start)
        self.server = server

    async def stop(self) -> None:
        if self.server is not None:
            await asyncio.to_thread(self.server.stop)
            self.server = None
