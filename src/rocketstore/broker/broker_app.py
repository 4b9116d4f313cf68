"""The broker over a store: :class:`BrokerApp` opens the store and the broker's state,
starts its servers (remoting, the VIP channel, HA, gRPC, metrics), the schedule and
transaction services, the persist and housekeeping timers and the name server
registration; ``stop`` undoes it in order, so a Ctrl-C or SIGTERM leaves a cleanly closed
store (no abort file) and persisted offsets.

Layer: broker (top). :mod:`rocketstore.broker.app` adds the name server, ``serve``'s pair
and the background runner for tests and benchmarks.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import socket
import stat
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from rocketstore.broker.acl import AclConfig
from rocketstore.broker.acl_store import WATCH_INTERVAL_MS, AclFile
from rocketstore.broker.broker_config import BrokerConfig
from rocketstore.broker.codes import RequestCode
from rocketstore.broker.consumer_offsets import ConsumerOffsets
from rocketstore.broker.context import BrokerContext
from rocketstore.broker.ha_master import ReplicationMaster
from rocketstore.broker.ha_metadata import SYNC_INTERVAL_MS, MetadataSync
from rocketstore.broker.ha_slave import ReplicationSlave
from rocketstore.broker.long_polling import HOLD_CHECK_INTERVAL_MS
from rocketstore.broker.metrics import MetricsServer
from rocketstore.broker.processors.pull_fast import FastFrames, FastPull
from rocketstore.broker.processors.send_fast import FastSend
from rocketstore.broker.registration import REGISTER_INTERVAL_MS, Registrar
from rocketstore.broker.router import BrokerRouter
from rocketstore.broker.schedule import ScheduleService
from rocketstore.broker.server import (
    Connection,
    Handler,
    RemotingServer,
    bind_socket,
    format_address,
)
from rocketstore.broker.stats import LatencyHistogram
from rocketstore.broker.subscription_groups import SubscriptionGroupManager
from rocketstore.broker.tls import ServerTls, TlsMode
from rocketstore.broker.topic_config import topic_manager_for
from rocketstore.broker.transaction_service import TransactionService
from rocketstore.config import StoreConfig, parse_host
from rocketstore.errors import ConfigError, StoreError
from rocketstore.remoting.acl_signing import SessionCredentials
from rocketstore.store import MessageStore
from rocketstore.store.timer import TimerMessageStore

if TYPE_CHECKING:  # grpcio is an extra: imported at run time only when served
    from rocketstore.broker.grpc.server import GrpcServer

log = logging.getLogger(__name__)

HOUSEKEEPING_INTERVAL_MS = 10_000
# Requests whose answers carry stored messages (server.MAX_BULKY_PER_CONNECTION).
# The hot requests a connection's read loop runs at once up to their first wait
# (server.start_eagerly); their paths were checked not to need a task of their own before
# it (no asyncio.timeout, no current_task). Every other request gets its task as before.
EAGER_CODES = frozenset(
    {
        RequestCode.SEND_MESSAGE,
        RequestCode.SEND_MESSAGE_V2,
        RequestCode.SEND_BATCH_MESSAGE,
        RequestCode.PULL_MESSAGE,
        RequestCode.LITE_PULL_MESSAGE,
    }
)
BULKY_CODES = frozenset(
    {
        RequestCode.PULL_MESSAGE,
        RequestCode.LITE_PULL_MESSAGE,
        RequestCode.QUERY_MESSAGE,
        RequestCode.VIEW_MESSAGE_BY_ID,
    }
)


class Service(Protocol):
    async def start(self) -> None: ...
    async def stop(self) -> None: ...


def bind_listen(listen: str) -> tuple[socket.socket, str]:
    host, port = parse_host(listen, what="listen address")
    try:
        sock = bind_socket(host, port)
    except OSError as e:
        raise OSError(e.errno, f"cannot listen on {listen}: {e.strerror}") from e
    return sock, format_address(sock.getsockname())


def join_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def close_store_dir(store_dir: str) -> None:
    """With ACL on, the store's messages are for its accounts only: a store directory
    other users can enter is closed to them (0700), said once in the log."""
    mode = stat.S_IMODE(os.stat(store_dir).st_mode)
    if mode & 0o077:
        os.chmod(store_dir, mode & 0o700)
        log.warning(
            "store directory %s was open to other users (mode %o); set to %o because ACL "
            "is on (its files are reachable only through it)",
            store_dir,
            mode,
            mode & 0o700,
        )


def registration_credentials(acl: AclConfig) -> SessionCredentials | None:
    """The account a broker with an ACL signs its name server registrations with: the
    ACL file's first admin account (a name server with the same file accepts it)."""
    for account in acl.rules.values():
        if account.admin:
            return SessionCredentials(account.access_key, account.secret_key)
    return None


@dataclass
class BrokerOptions:
    store_dir: str
    listen: str = "127.0.0.1:10911"
    namesrv_addrs: list[str] = field(default_factory=list)
    broker: BrokerConfig = field(default_factory=BrokerConfig)
    store_config: StoreConfig | None = None
    # The address published to clients when listening on a wildcard address.
    advertise_host: str | None = None
    acl_file: str | None = None
    # TLS on the listeners (tls.server.mode; None: plain remoting only).
    tls: ServerTls | None = None
    # How often the ACL file is checked for changes (RocketMQ's AclFileWatchService: 5 s).
    acl_watch_interval_ms: int = WATCH_INTERVAL_MS
    register_interval_ms: int = REGISTER_INTERVAL_MS
    schedule_enable: bool = True
    # The broker.conf the settings came from (-c): updateBrokerConfig writes changes there.
    settings_path: str | None = None
    # A slave copies its master's topics, offsets and groups this often (SlaveSynchronize).
    metadata_sync_interval_ms: int = SYNC_INTERVAL_MS
    # HOST:PORT of the Prometheus endpoint (/metrics); None: no endpoint, no timing.
    metrics_listen: str | None = None
    # Where RocketMQ 5.x clients are served over gRPC (broker.grpc); None: not served.
    grpc_listen: str | None = None
    # TLS on the gRPC port (the proxy's tls.server.mode); None: as ``tls`` says, or
    # permissive with a self-signed certificate without one (the proxy's tlsTestModeEnable).
    grpc_tls_mode: TlsMode | None = None


class BrokerApp:
    def __init__(self, options: BrokerOptions):
        self.options = options
        self.store: MessageStore | None = None
        self.ctx: BrokerContext | None = None
        self.server: RemotingServer | None = None
        self.vip_server: RemotingServer | None = None  # the listen port - 2 (fastListenPort)
        # Common single sends answered from their frames' bytes (processors.send_fast).
        self.fast_send: FastSend | None = None
        # ... and common pulls (processors.pull_fast); both behind one hook.
        self.fast_pull: FastPull | None = None
        self.fast_frames: FastFrames | None = None
        self.schedule: ScheduleService | None = None
        self.timer: TimerMessageStore | None = None
        self.registrar: Registrar | None = None
        self.replication_master: ReplicationMaster | None = None
        self.replication_slave: ReplicationSlave | None = None
        self.metadata_sync: MetadataSync | None = None
        self.metrics: MetricsServer | None = None
        self.grpc_server: GrpcServer | None = None
        self.address = ""
        self._timers: list[asyncio.Task[None]] = []

    def _advertised(self, bound: str) -> str:
        host, port = parse_host(bound)
        if self.options.advertise_host:
            host = self.options.advertise_host
        elif host in ("0.0.0.0", "::"):
            raise ConfigError(
                "listening on a wildcard address needs --advertise HOST: the address clients "
                "reach this broker at (it is also written into every stored message)"
            )
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    async def start(self) -> None:
        opts = self.options
        opts.broker.validate()
        # Before the store is opened: a bad ACL file must not leave an opened store behind.
        acl_file = AclFile(opts.acl_file) if opts.acl_file else None
        acl = acl_file.config if acl_file is not None else None
        if acl_file is not None and acl_file.readable_by_others():
            log.warning(
                "ACL file %s is readable by other users: it holds secret keys (chmod 600 it)",
                acl_file.path,
            )
        sock, bound = bind_listen(opts.listen)
        ha_sock: socket.socket | None = None
        try:
            if opts.metrics_listen is not None:
                self.metrics = MetricsServer(lambda: self.ctx, opts.metrics_listen)
                await asyncio.to_thread(self.metrics.start)
            if not opts.broker.is_slave:
                ha_sock = self._bind_ha(bound)
            self.address = self._advertised(bound)
            config = (opts.store_config or StoreConfig()).replace(store_host=self.address)
            os.makedirs(opts.store_dir, exist_ok=True)
            if acl is not None:
                close_store_dir(opts.store_dir)
            self.store = await asyncio.to_thread(MessageStore.open, opts.store_dir, config)
        except BaseException:
            sock.close()
            if ha_sock is not None:
                ha_sock.close()
            if self.metrics is not None:
                self.metrics.stop()
                self.metrics = None
            raise
        store = self.store
        b = opts.broker
        topics = topic_manager_for(opts.store_dir, b, timer_wheel=store.config.timer_wheel_enable)
        ctx = BrokerContext(
            store=store,
            topics=topics,
            offsets=ConsumerOffsets(opts.store_dir),
            groups=SubscriptionGroupManager(
                opts.store_dir, auto_create=b.auto_create_subscription_group
            ),
            config=b,
            broker_addr=self.address,
            acl=acl,
            settings_path=opts.settings_path,
        )
        if acl_file is not None:
            ctx.extra["acl_file"] = acl_file
            acl_file.on_change = functools.partial(setattr, ctx, "acl")
        ctx.transactions = TransactionService(
            store,
            ctx.offsets,
            topics,
            self.address,
            timeout_ms=b.transaction_timeout_ms,
            check_max=b.transaction_check_max,
            on_topics_changed=ctx.topics_changed,
        )
        self.ctx = ctx
        ctx.waiters.bind(asyncio.get_running_loop())
        ctx.waiters.watch(store)
        if ha_sock is not None:
            self.replication_master = ReplicationMaster(store, b)
            ctx.replication = self.replication_master
            await self.replication_master.start(ha_sock, parse_host(self.address)[0])
        elif b.is_slave:
            self.replication_slave = ReplicationSlave(store, b)
            ctx.replication_slave = self.replication_slave
            self.replication_slave.start()
            self.metadata_sync = MetadataSync(ctx, interval_ms=opts.metadata_sync_interval_ms)
            self.metadata_sync.start()
        # A slave delivers no delayed messages and checks no transactions: its master does
        # (BrokerController.startProcessorByHa).
        if opts.schedule_enable and not b.is_slave:
            self.schedule = ScheduleService(store, opts.store_dir)
            self.schedule.start()
            ctx.schedule = self.schedule
            if store.config.timer_wheel_enable:
                # Its files are read (recovery) before it starts: off the loop.
                self.timer = await asyncio.to_thread(TimerMessageStore, store)
                self.timer.start()
                ctx.timer = self.timer
        router = BrokerRouter(ctx)
        self.fast_send = FastSend(ctx)
        self.fast_pull = FastPull(ctx)
        self.fast_frames = FastFrames(self.fast_send, self.fast_pull)
        handle = router.handle
        if self.metrics is not None:
            ctx.stats.rpc_latency = LatencyHistogram()
            ctx.stats.message_sizes = {}
            handle = router.timed_handle
        self.server = RemotingServer(
            handle,
            name="broker",
            on_close=self._connection_closed,
            limits=b,  # read at each use, so updateBrokerConfig changes them live
            bulky_codes=BULKY_CODES,
            eager_codes=EAGER_CODES,
            fast_frames=self.fast_frames,
        )
        await self.server.start(sock, opts.tls)
        await self._start_vip_channel(handle, bound)
        if opts.grpc_listen:
            await self._start_grpc(ctx, opts.grpc_listen)
        if opts.namesrv_addrs:
            # Beside an enforcing name server of the same serve, registration must speak
            # TLS, trusting the certificate both listeners present.
            own_tls = (
                opts.tls.self_client_context()
                if opts.tls and opts.tls.mode is TlsMode.ENFORCING
                else None
            )
            self.registrar = Registrar(
                ctx, opts.namesrv_addrs, opts.register_interval_ms, ssl_context=own_tls
            )
            if acl is not None:
                self.registrar.credentials = registration_credentials(acl)
            if self.replication_master is not None:
                self.registrar.ha_server_addr = self.replication_master.address
            if self.replication_slave is not None:
                self.registrar.on_master = self._master_learned
            ctx.on_topics_changed = self.registrar.trigger
            self.registrar.start()
        self._timers = [
            asyncio.create_task(self._persist_loop()),
            asyncio.create_task(self._housekeeping_loop()),
            asyncio.create_task(self._hold_check_loop()),
        ]
        if not b.is_slave:
            self._timers.append(asyncio.create_task(self._transaction_check_loop()))
        if acl_file is not None:
            self._timers.append(asyncio.create_task(self._acl_watch_loop(acl_file)))
        log.info("broker %s serving %s at %s", b.broker_name, opts.store_dir, self.address)

    def _master_learned(self, ha_address: str, master_address: str) -> None:
        """A slave's registration answer: the master's HA address (unless haMasterAddress
        is set) and its remoting address, which the metadata sync asks."""
        slave = self.replication_slave
        if slave is not None:
            learned = "" if self.options.broker.ha_master_address else ha_address
            slave.update_master_address(learned, master_address)
        if self.metadata_sync is not None:
            self.metadata_sync.update_master_address(master_address)

    async def _start_vip_channel(self, handle: Handler, bound: str) -> None:
        """The same requests on the listen port - 2, as a Java broker's fastRemotingServer
        (fastListenPort) serves them: a Java slave asks its master GET_ALL_TOPIC_CONFIG
        there (BrokerOuterAPI.getAllTopicConfig uses MixAll.brokerVIPChannel), as do
        clients with vipChannelEnabled. Best effort: a port taken, or a broker on an
        ephemeral port, goes without it (logged)."""
        host, port = parse_host(bound)
        if parse_host(self.options.listen)[1] == 0 or port < 3:
            return
        try:
            sock, vip_bound = bind_listen(join_address(host, port - 2))
        except OSError as e:
            log.warning("no VIP channel (listen port - 2, a Java slave's topic sync): %s", e)
            return
        b = self.options.broker
        self.vip_server = RemotingServer(
            handle,
            name="broker-vip",
            on_close=self._connection_closed,
            limits=b,
            bulky_codes=BULKY_CODES,
            eager_codes=EAGER_CODES,
            fast_frames=self.fast_frames,
        )
        await self.vip_server.start(sock, self.options.tls)
        log.info("VIP channel (fastListenPort) at %s", vip_bound)

    async def _start_grpc(self, ctx: BrokerContext, listen: str) -> None:
        """The gRPC endpoint for RocketMQ 5.x clients, on this loop (broker.grpc). Imported
        here: grpcio is an extra, needed only by brokers that serve it."""
        try:
            from rocketstore.broker.grpc.server import GrpcServer  # noqa: PLC0415
        except ImportError as e:
            raise ConfigError(
                f"--grpc-listen needs the grpc extra (pip install 'rocketstore[grpc]'): {e}"
            ) from e
        from rocketstore.broker.grpc.server import GrpcTls  # noqa: PLC0415

        tls = await asyncio.to_thread(
            GrpcTls.configure, self.options.tls, self.options.grpc_tls_mode
        )
        server = GrpcServer(ctx, listen, tls)
        await server.start()
        self.grpc_server = server

    def _bind_ha(self, bound: str) -> socket.socket:
        """The socket a master's slaves connect to: haListenPort, or the listen port + 1,
        on the listen host."""
        host, port = parse_host(bound)
        ha_port = self.options.broker.ha_listen_port
        if not ha_port and parse_host(self.options.listen)[1] != 0:
            ha_port = port + 1
        # (a broker on an ephemeral port, in tests, gets an ephemeral HA port too)
        try:
            sock, _bound = bind_listen(join_address(host, ha_port))
        except OSError as e:
            if self.options.broker.ha_listen_port:
                raise
            # The default port taken: slaves that learn the address from the name
            # servers find this one (a Java broker would not start).
            log.warning("replication: %s; slaves are listened for on another port", e)
            sock, _bound = bind_listen(join_address(host, 0))
        return sock

    def _connection_closed(self, conn: Connection) -> None:
        if self.ctx is None:
            return
        for group in self.ctx.clients.connection_closed(conn):
            self.ctx.notify_consumers_changed(group)

    async def _persist_loop(self) -> None:
        assert self.ctx is not None
        while True:
            # Read at each round: updateBrokerConfig may change it.
            await asyncio.sleep(self.options.broker.flush_consumer_offset_interval_ms / 1000)
            try:
                await asyncio.to_thread(self.ctx.offsets.persist)
            except OSError as e:
                log.error("persisting consumer offsets failed: %s", e)
            except Exception:
                # Never let one failed write end the loop: every later commit would then
                # live in memory only, and be lost at the next restart.
                log.exception("persisting consumer offsets failed")

    async def _housekeeping_loop(self) -> None:
        assert self.ctx is not None
        while True:
            await asyncio.sleep(HOUSEKEEPING_INTERVAL_MS / 1000)
            self.ctx.stats.roll_day()
            for group in self.ctx.clients.expire():
                self.ctx.notify_consumers_changed(group)

    async def _acl_watch_loop(self, acl_file: AclFile) -> None:
        """AclFileWatchService: the ACL file reloaded when its content changes."""
        while True:
            await asyncio.sleep(self.options.acl_watch_interval_ms / 1000)
            try:
                acl_file.poll()
            except Exception:
                log.exception("checking ACL file %s failed", acl_file.path)

    async def _hold_check_loop(self) -> None:
        """PullRequestHoldService's pass: held pulls whose queue grew without a report
        (none should) are answered within HOLD_CHECK_INTERVAL_MS rather than at their
        suspend time."""
        assert self.ctx is not None
        ctx = self.ctx
        while True:
            interval_ms = (
                HOLD_CHECK_INTERVAL_MS if ctx.long_polling_enable else ctx.short_polling_ms
            )
            await asyncio.sleep(interval_ms / 1000)
            ctx.waiters.check_held()

    async def _transaction_check_loop(self) -> None:
        """TransactionalMessageCheckService: a check pass every transactionCheckInterval,
        its CHECK_TRANSACTION_STATE requests sent to the producers."""
        assert self.ctx is not None and self.ctx.transactions is not None
        service = self.ctx.transactions
        while True:
            await asyncio.sleep(self.options.broker.transaction_check_interval_ms / 1000)
            try:
                requests = await asyncio.to_thread(service.check)
            except (StoreError, OSError) as e:
                log.error("transaction check failed: %s", e)
                continue
            for request in requests:
                self.ctx.send_transaction_check(request)

    async def stop(self) -> None:
        if self.metrics is not None:
            await asyncio.to_thread(self.metrics.stop)
            self.metrics = None
        for task in self._timers:
            task.cancel()
        for task in self._timers:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._timers = []
        if self.registrar is not None:
            await self.registrar.stop()
        if self.metadata_sync is not None:
            await self.metadata_sync.stop()
        if self.replication_slave is not None:
            await self.replication_slave.stop()
        if self.replication_master is not None:
            await self.replication_master.stop()
        if self.ctx is not None:
            self.ctx.waiters.close()  # held pulls answer now instead of at their timeout
        if self.grpc_server is not None:
            await self.grpc_server.stop()
        if self.server is not None:
            await self.server.stop()
        if self.vip_server is not None:
            await self.vip_server.stop()
        if self.schedule is not None:
            await asyncio.to_thread(self.schedule.shutdown)
        if self.timer is not None:
            await asyncio.to_thread(self.timer.shutdown)
        if self.ctx is not None:
            try:
                await asyncio.to_thread(self.ctx.offsets.persist)
            except Exception:
                # The store must still close cleanly (no abort file, no recovery scan).
                log.exception("persisting consumer offsets at shutdown failed")
        if self.store is not None:
            await asyncio.to_thread(self.store.close)
            log.info("broker stopped; store %s closed", self.options.store_dir)
