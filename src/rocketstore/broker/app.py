"""Wiring: a name server, a broker over a store, or both in one process (``serve``).

Layer: broker (top). :class:`NamesrvApp` runs a name server; the broker itself is
:class:`~rocketstore.broker.broker_app.BrokerApp` (re-exported here); :class:`ServeApp`
runs both in one process and waits for the broker's registration; ``run_until_signal``
stops them in reverse order on SIGINT/SIGTERM, so the store closes cleanly (no abort
file) with its offsets persisted. :class:`BackgroundServer` runs ``serve``'s pair in a
thread for tests and benchmarks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from rocketstore.broker.acl_store import WATCH_INTERVAL_MS, AclFile
from rocketstore.broker.broker_app import (
    BULKY_CODES,
    EAGER_CODES,
    HOUSEKEEPING_INTERVAL_MS,
    BrokerApp,
    BrokerOptions,
    Service,
    bind_listen,
    registration_credentials,
)
from rocketstore.broker.namesrv import NameServer, RouteTable
from rocketstore.broker.namesrv_config import KvConfigTable, namesrv_config
from rocketstore.broker.server import RemotingServer
from rocketstore.broker.timeouts import within
from rocketstore.broker.tls import ServerTls
from rocketstore.config import parse_host
from rocketstore.errors import ConfigError
from rocketstore.paths import CONFIG_DIR

# Defined here, and the broker's names this module has always offered (now broker_app's).
__all__ = [
    "BULKY_CODES",
    "EAGER_CODES",
    "HOUSEKEEPING_INTERVAL_MS",
    "REGISTER_WAIT_S",
    "BackgroundServer",
    "BrokerApp",
    "BrokerOptions",
    "NamesrvApp",
    "ServeApp",
    "Service",
    "registration_credentials",
    "run_until_signal",
]

log = logging.getLogger(__name__)

# How long `serve` waits for its broker to register with its own name server.
REGISTER_WAIT_S = 10

T = TypeVar("T")


class NamesrvApp:
    def __init__(
        self,
        listen: str = "127.0.0.1:9876",
        broker_timeout_ms: int = 120_000,
        kv_config_path: str | None = None,
        acl_file: str | None = None,
        tls: ServerTls | None = None,
    ):
        """``kv_config_path``: where the KV config table is kept (None: in memory);
        ``acl_file``: plain_acl.yml whose admin accounts (or white lists) alone may
        register brokers and change settings."""
        self.listen = listen
        self.table = RouteTable(broker_timeout_ms)
        port = parse_host(listen, what="listen address")[1]
        self.namesrv = NameServer(
            self.table, namesrv_config(port, kv_config_path), KvConfigTable(kv_config_path)
        )
        self.server = RemotingServer(
            self.namesrv.handle, name="namesrv", on_close=self.table.connection_closed
        )
        self.address = ""
        self._housekeeping: asyncio.Task[None] | None = None
        self.tls = tls
        self.acl_file = AclFile(acl_file) if acl_file else None
        self.acl_watch_interval_ms = WATCH_INTERVAL_MS
        self._acl_watch: asyncio.Task[None] | None = None
        if self.acl_file is not None:
            watched = self.acl_file
            self.namesrv.acl = lambda: watched.config

    async def start(self) -> None:
        sock, self.address = bind_listen(self.listen)
        await self.server.start(sock, self.tls)
        self._housekeeping = asyncio.create_task(self._expire_loop())
        if self.acl_file is not None:
            self._acl_watch = asyncio.create_task(self._acl_watch_loop(self.acl_file))

    async def _expire_loop(self) -> None:
        while True:
            await asyncio.sleep(HOUSEKEEPING_INTERVAL_MS / 1000)
            self.table.expire()

    async def _acl_watch_loop(self, acl_file: AclFile) -> None:
        """The ACL file checked as the broker checks its own (AclFileWatchService)."""
        while True:
            await asyncio.sleep(self.acl_watch_interval_ms / 1000)
            try:
                acl_file.poll()
            except Exception:
                log.exception("checking ACL file %s failed", acl_file.path)

    async def stop(self) -> None:
        for task in (self._housekeeping, self._acl_watch):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        await self.server.stop()


async def run_until_signal(
    services: list[Service], on_ready: Callable[[], None] | None = None
) -> None:
    """Start the services in order, wait for SIGINT/SIGTERM, stop them in reverse order."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    started: list[Service] = []
    try:
        for service in services:
            await service.start()
            started.append(service)
        if on_ready is not None:
            on_ready()
        await stop.wait()
    finally:
        for service in reversed(started):
            try:
                await service.stop()
            except Exception:
                log.exception("stopping %s failed", type(service).__name__)
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


class ServeApp:
    """``rocketstore serve``: a name server and one broker registered with it."""

    def __init__(self, options: BrokerOptions, namesrv_listen: str = "127.0.0.1:9876"):
        self.options = options
        # The embedded name server keeps its KV config (order topic configs...) with the
        # store's other config files.
        kv_path = os.path.join(options.store_dir, CONFIG_DIR, "kvConfig.json")
        self.namesrv = NamesrvApp(
            namesrv_listen, kv_config_path=kv_path, acl_file=options.acl_file, tls=options.tls
        )
        self.broker: BrokerApp | None = None

    async def start(self) -> None:
        await self.namesrv.start()
        self.options.namesrv_addrs = [self.namesrv.address]
        self.broker = BrokerApp(self.options)
        try:
            await self.broker.start()
            registrar = self.broker.registrar
            assert registrar is not None
            try:
                await within(registrar.registered.wait(), REGISTER_WAIT_S)
            except TimeoutError:
                raise ConfigError(self._unregistered(registrar.last_failure)) from None
        except BaseException:
            await self.stop()
            raise

    def _unregistered(self, why: str) -> str:
        text = (
            f"the broker did not register with its name server within {REGISTER_WAIT_S} s"
            f" ({why or 'no answer'})"
        )
        acl = self.namesrv.acl_file
        if acl is not None and registration_credentials(acl.config) is None:
            text += (
                f"; {acl.path} has no admin account to sign the registration with: add one "
                "(admin: true) or white-list the broker's address (globalWhiteRemoteAddresses)"
            )
        return text

    async def stop(self) -> None:
        if self.broker is not None:
            await self.broker.stop()
        await self.namesrv.stop()


class BackgroundServer:
    """``serve`` in a background event loop thread (tests, benchmarks).

    ``start()`` returns once both servers listen and the broker registered; ``stop()``
    shuts them down as SIGTERM would.
    """

    def __init__(self, options: BrokerOptions, namesrv_listen: str = "127.0.0.1:0"):
        self.app = ServeApp(options, namesrv_listen)
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="broker-loop", daemon=True
        )

    @property
    def namesrv_address(self) -> str:
        return self.app.namesrv.address

    @property
    def broker_address(self) -> str:
        return self.app.broker.address if self.app.broker else ""

    @property
    def broker(self) -> BrokerApp:
        assert self.app.broker is not None
        return self.app.broker

    def call(self, coro: Coroutine[Any, Any, T], timeout_s: float = 30) -> T:
        """Run a coroutine in the server's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    def start(self, timeout_s: float = 30) -> BackgroundServer:
        self._thread.start()
        try:
            self.call(self.app.start(), timeout_s)
        except BaseException:
            self._stop_loop(timeout_s)
            raise
        return self

    def stop(self, timeout_s: float = 30) -> None:
        try:
            self.call(self.app.stop(), timeout_s)
        finally:
            self._stop_loop(timeout_s)

    def _stop_loop(self, timeout_s: float) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout_s)
        self.loop.close()

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
