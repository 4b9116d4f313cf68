"""The gRPC server: MessagingService on a grpc.aio server in the broker's event loop.

Layer: broker.grpc. grpc.aio runs its calls as coroutines on the loop it was started
from, so the service shares the broker's state without locks or thread hops, as the
remoting server's processors do; blocking store reads go to worker threads the same way
(``BrokerContext.run``).

TLS as the 5.x proxy serves it (:class:`GrpcTls`): ``enforcing`` is grpcio's own TLS port;
``permissive`` (the proxy's default) puts :class:`~rocketstore.broker.grpc.tls_front.TlsFront`
on the public port, in front of a plain and a TLS loopback port of the same server;
``disabled`` is a plain port.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass

import grpc

from rocketstore.broker.broker_config import persist_config_file
from rocketstore.broker.context import BrokerContext
from rocketstore.broker.grpc.acl import AclInterceptor
from rocketstore.broker.grpc.pop_journal import PopJournal
from rocketstore.broker.grpc.protocol import rocketmq_v2_service_pb2_grpc as spb_grpc
from rocketstore.broker.grpc.service import RENEW_PERIOD_MS, MessagingService
from rocketstore.broker.grpc.tls_front import TlsFront
from rocketstore.broker.tls import ServerTls, TlsMode, self_signed_certificate
from rocketstore.config import parse_host
from rocketstore.errors import ConfigError
from rocketstore.files.atomic import read_json_with_backup
from rocketstore.paths import CONFIG_DIR

log = logging.getLogger(__name__)

# The biggest request taken: a 4 MiB body and its properties, with room to spare
# (the proxy's grpcMaxInboundMessageSize is 130 MB; rocketstore stores 4 MiB bodies).
MAX_RECEIVE_BYTES = 16 * 1024 * 1024
# How long stop() lets running calls finish (a long poll is answered at once: the
# server cancels it).
STOP_GRACE_S = 1.0
# The POP state's file under the store (docs/format.md, "grpcPopState.json").
POP_STATE_FILE = "grpcPopState.json"


@dataclass(frozen=True)
class GrpcTls:
    """TLS on the gRPC port: RocketMQ's ``tls.server.mode`` and the certificate (PEM)."""

    mode: TlsMode
    cert_chain: bytes = b""
    private_key: bytes = b""
    # Client certificates are required and verified against it (--tls-client-ca).
    client_ca: bytes | None = None

    @classmethod
    def configure(cls, tls: ServerTls | None, mode: TlsMode | None) -> GrpcTls:
        """The listeners' TLS (``--tls-*``) on the gRPC port, in ``mode`` (None: the
        listeners' mode). Without a certificate the proxy's ``tlsTestModeEnable``: a
        self-signed certificate made at start, in permissive mode unless told."""
        if tls is None:
            if mode is TlsMode.DISABLED:
                return cls(mode)
            try:
                cert, key = self_signed_certificate()
            except ConfigError as e:
                if mode is not None:  # asked for: a start without it would mislead
                    raise
                # (the default: plain clients still served, TLS ones told why not)
                log.warning("%s: the gRPC port serves plain connections only", e)
                return cls(TlsMode.DISABLED)
            return cls(TlsMode.PERMISSIVE if mode is None else mode, cert, key)
        mode = tls.mode if mode is None else mode
        if mode is TlsMode.DISABLED:
            return cls(mode)
        try:
            with open(tls.cert_file, "rb") as c, open(tls.key_file, "rb") as k:
                cert, key = c.read(), k.read()
            ca = None
            if tls.client_ca_file:
                with open(tls.client_ca_file, "rb") as f:
                    ca = f.read()
        except OSError as e:
            raise ConfigError(f"TLS on the gRPC port: {e}") from e
        return cls(mode, cert, key, ca)

    def credentials(self) -> grpc.ServerCredentials:
        return grpc.ssl_server_credentials(
            [(self.private_key, self.cert_chain)],
            root_certificates=self.client_ca,
            require_client_auth=self.client_ca is not None,
        )


class GrpcServer:
    def __init__(self, ctx: BrokerContext, listen: str, tls: GrpcTls | None = None) -> None:
        self.ctx = ctx
        self.listen = listen
        self.tls = tls if tls is not None else GrpcTls(TlsMode.DISABLED)
        self.front: TlsFront | None = None
        self.address = ""
        self._server: grpc.aio.Server | None = None
        self.service: MessagingService | None = None
        self._persist_task: asyncio.Task[None] | None = None
        self._renew_task: asyncio.Task[None] | None = None
        config_dir = os.path.join(ctx.store.root, CONFIG_DIR)
        self.pop_state_path = os.path.join(config_dir, POP_STATE_FILE)
        self.journal = PopJournal(config_dir, sync=ctx.store.config.flush_disk_type == "SYNC_FLUSH")

    async def start(self) -> None:
        host, port = parse_host(self.listen, what="--grpc-listen")
        # The ACL (plain_acl.yml, reloaded into ctx.acl) on every call, when the broker has one.
        acl = AclInterceptor(lambda: self.ctx.acl) if self.ctx.acl is not None else None
        server = grpc.aio.server(
            interceptors=[acl] if acl is not None else None,
            options=[
                ("grpc.max_receive_message_length", MAX_RECEIVE_BYTES),
                ("grpc.so_reuseport", 0),
            ],
        )
        front_sock: socket.socket | None = None
        if self.tls.mode is TlsMode.PERMISSIVE:
            front_sock, bound = _bind(host, port)
            try:
                plain = _add_port(server, "127.0.0.1:0", None)
                secure = _add_port(server, "127.0.0.1:0", self.tls.credentials())
            except OSError:
                front_sock.close()
                raise
            self.front = TlsFront(("127.0.0.1", plain), ("127.0.0.1", secure))
        else:
            target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            credentials = self.tls.credentials() if self.tls.mode is TlsMode.ENFORCING else None
            try:
                bound = _add_port(server, target, credentials)
            except OSError as e:
                raise OSError(f"cannot listen on {self.listen} (gRPC): {e}") from e
        advertised = self.ctx.broker_host
        if host not in ("0.0.0.0", "::"):
            advertised = host
        self.address = f"[{advertised}]:{bound}" if ":" in advertised else f"{advertised}:{bound}"
        # (the generated function has no annotations)
        register: Callable[[object, object], None] = spb_grpc.add_MessagingServiceServicer_to_server
        self.service = MessagingService(self.ctx, self.address)
        if self.front is not None:
            self.service.peer_of = self.front.peer
            if acl is not None:
                acl.peer_of = self.front.peer
        generation = await asyncio.to_thread(self._load_pop_state, self.service)
        # A fresh snapshot and journal generation before the first call: the journal
        # replayed is then in the snapshot, and the offsets follow the state read.
        self.journal.generation = generation - 1
        await self._snapshot()
        self.service.journal = self.journal
        self.service.commit_all()
        settled = await self.service.settle_dlq_moves()
        if settled:
            log.info("%d move(s) to %%DLQ%% found stored after a crash; not stored again", settled)
        register(self.service, server)
        await server.start()
        self._server = server
        if self.front is not None and front_sock is not None:
            await self.front.start(front_sock)
        self.ctx.transaction_check_fallback = self.service.recover_orphaned
        self.ctx.client_call_fallback = self.service.ask_client
        self.ctx.other_consumers = self.service.consumers
        self._persist_task = asyncio.create_task(self._persist_loop())
        self._renew_task = asyncio.create_task(self._renew_loop())
        log.info(
            "gRPC endpoint (RocketMQ 5.x clients) at %s, TLS %s",
            self.address,
            self.tls.mode.value,
        )

    def _load_pop_state(self, service: MessagingService) -> int:
        """Read the snapshot and replay the journal after it; the journal generation to
        write next (past every one on disk)."""
        on_disk = self.journal.generations()
        after = max(on_disk, default=0) + 1
        since = 0
        try:
            document = read_json_with_backup(self.pop_state_path, self.pop_state_path)
        except ConfigError as e:
            log.error("%s; POP consumers start from their journal and committed offsets", e)
            document = None
        if document is not None:
            try:
                service.pop.load_document(document, self.ctx.offsets.query)
                since = int(document.get("journal", 0))
            except (ValueError, TypeError) as e:
                log.error(
                    "%s: %s; POP consumers start from their journal and committed offsets",
                    self.pop_state_path,
                    e,
                )
        records = self.journal.read(since)
        held = service.pop.replay(records, self.ctx.offsets.query)
        if document is not None or records:
            log.info(
                "POP state read from %s and %d journal record(s): %d message(s) in flight",
                self.pop_state_path,
                len(records),
                held,
            )
        return max(after, since + 1)

    async def _snapshot(self) -> None:
        """Write the POP state whole, starting the next journal generation first (the
        snapshot is taken with no await in between, so it holds every record before that
        generation); the generations before the previous one are deleted after."""
        if self.service is None:
            return
        generation = self.journal.generation + 1
        self.journal.start(generation)
        document = self.service.pop.to_document(generation)
        await asyncio.to_thread(persist_config_file, self.pop_state_path, document)
        await asyncio.to_thread(self.journal.remove_before, generation - 1)

    async def _persist_loop(self) -> None:
        while True:
            # The consumer offsets' interval: the two files move together.
            await asyncio.sleep(self.ctx.config.flush_consumer_offset_interval_ms / 1000)
            if self.journal.written_bytes == 0:
                continue  # nothing changed since the last snapshot
            try:
                await self._snapshot()
            except OSError as e:
                log.error("persisting the POP state failed: %s", e)

    async def _renew_loop(self) -> None:
        while True:
            await asyncio.sleep(RENEW_PERIOD_MS / 1000)
            if self.service is not None:
                self.service.renew()

    async def stop(self) -> None:
        self.ctx.transaction_check_fallback = None
        self.ctx.client_call_fallback = None
        self.ctx.other_consumers = None
        if self._renew_task is not None:
            self._renew_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renew_task
            self._renew_task = None
        if self._persist_task is not None:
            self._persist_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._persist_task
            self._persist_task = None
        if self.front is not None:
            await self.front.stop()
        if self._server is not None:
            await self._server.stop(STOP_GRACE_S)
            self._server = None
        if self.service is not None:
            try:
                await self._snapshot()
            except OSError as e:
                log.error("persisting the POP state at shutdown failed: %s", e)
            self.service.journal = None
        self.journal.close()


def _add_port(
    server: grpc.aio.Server, target: str, credentials: grpc.ServerCredentials | None
) -> int:
    """Bind ``target`` plain (``credentials`` None) or with TLS; the port bound."""
    try:
        if credentials is None:
            bound = server.add_insecure_port(target)
        else:
            bound = server.add_secure_port(target, credentials)
    except RuntimeError as e:  # grpcio's "Failed to bind"
        raise OSError(f"cannot listen on {target} (gRPC): {e}") from e
    if bound == 0:
        raise OSError(f"cannot listen on {target} (gRPC)")
    return int(bound)


def _bind(host: str, port: int) -> tuple[socket.socket, int]:
    """The permissive front's listening socket (grpcio's ports set SO_REUSEADDR too)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(1024)
        sock.setblocking(False)
    except OSError as e:
        sock.close()
        raise OSError(f"cannot listen on {host}:{port} (gRPC): {e}") from e
    return sock, int(sock.getsockname()[1])
