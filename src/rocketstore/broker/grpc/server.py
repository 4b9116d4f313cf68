"""The gRPC server: MessagingService on a grpc.aio server in the broker's event loop.

Layer: broker.grpc. grpc.aio runs its calls as coroutines on the loop it was started
from, so the service shares the broker's state without locks or thread hops, as the
remoting server's processors do; blocking store reads go to worker threads the same way
(``BrokerContext.run``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable

import grpc

from rocketstore.broker.broker_config import persist_config_file
from rocketstore.broker.context import BrokerContext
from rocketstore.broker.grpc.protocol import rocketmq_v2_service_pb2_grpc as spb_grpc
from rocketstore.broker.grpc.service import RENEW_PERIOD_MS, MessagingService
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


class GrpcServer:
    def __init__(self, ctx: BrokerContext, listen: str) -> None:
        self.ctx = ctx
        self.listen = listen
        self.address = ""
        self._server: grpc.aio.Server | None = None
        self.service: MessagingService | None = None
        self._persist_task: asyncio.Task[None] | None = None
        self._renew_task: asyncio.Task[None] | None = None
        self.pop_state_path = os.path.join(ctx.store.root, CONFIG_DIR, POP_STATE_FILE)

    async def start(self) -> None:
        host, port = parse_host(self.listen, what="--grpc-listen")
        server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", MAX_RECEIVE_BYTES),
                ("grpc.so_reuseport", 0),
            ]
        )
        target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        try:
            bound = server.add_insecure_port(target)
        except RuntimeError as e:  # grpcio's "Failed to bind"
            raise OSError(f"cannot listen on {self.listen} (gRPC): {e}") from e
        if bound == 0:
            raise OSError(f"cannot listen on {self.listen} (gRPC)")
        advertised = self.ctx.broker_host
        if host not in ("0.0.0.0", "::"):
            advertised = host
        self.address = f"[{advertised}]:{bound}" if ":" in advertised else f"{advertised}:{bound}"
        # (the generated function has no annotations)
        register: Callable[[object, object], None] = spb_grpc.add_MessagingServiceServicer_to_server
        self.service = MessagingService(self.ctx, self.address)
        await asyncio.to_thread(self._load_pop_state, self.service)
        register(self.service, server)
        await server.start()
        self._server = server
        self.ctx.transaction_check_fallback = self.service.recover_orphaned
        self._persist_task = asyncio.create_task(self._persist_loop())
        self._renew_task = asyncio.create_task(self._renew_loop())
        log.info("gRPC endpoint (RocketMQ 5.x clients) at %s", self.address)

    def _load_pop_state(self, service: MessagingService) -> None:
        try:
            document = read_json_with_backup(self.pop_state_path, self.pop_state_path)
        except ConfigError as e:
            log.error("%s; POP consumers start again at their committed offsets", e)
            return
        if document is None:
            return
        try:
            held = service.pop.load_document(document, self.ctx.offsets.query)
        except ValueError as e:
            log.error(
                "%s: %s; POP consumers start again at their committed offsets",
                self.pop_state_path,
                e,
            )
            return
        log.info("POP state read from %s: %d message(s) in flight", self.pop_state_path, held)

    async def _persist_loop(self) -> None:
        while True:
            # The consumer offsets' interval: the two files move together.
            await asyncio.sleep(self.ctx.config.flush_consumer_offset_interval_ms / 1000)
            if self.service is None:
                continue
            document = self.service.pop.to_document()
            try:
                await asyncio.to_thread(persist_config_file, self.pop_state_path, document)
            except OSError as e:
                log.error("persisting the POP state failed: %s", e)

    async def _renew_loop(self) -> None:
        while True:
            await asyncio.sleep(RENEW_PERIOD_MS / 1000)
            if self.service is not None:
                self.service.renew()

    async def stop(self) -> None:
        self.ctx.transaction_check_fallback = None
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
        if self._server is not None:
            await self._server.stop(STOP_GRACE_S)
            self._server = None
        if self.service is not None:
            try:
                await asyncio.to_thread(
                    persist_config_file, self.pop_state_path, self.service.pop.to_document()
                )
            except OSError as e:
                log.error("persisting the POP state at shutdown failed: %s", e)
