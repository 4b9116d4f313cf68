"""The gRPC server: MessagingService on a grpc.aio server in the broker's event loop.

Layer: broker.grpc. grpc.aio runs its calls as coroutines on the loop it was started
from, so the service shares the broker's state without locks or thread hops, as the
remoting server's processors do; blocking store reads go to worker threads the same way
(``BrokerContext.run``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import grpc

from rocketstore.broker.context import BrokerContext
from rocketstore.broker.grpc.protocol import rocketmq_v2_service_pb2_grpc as spb_grpc
from rocketstore.broker.grpc.service import MessagingService
from rocketstore.config import parse_host

log = logging.getLogger(__name__)

# The biggest request taken: a 4 MiB body and its properties, with room to spare
# (the proxy's grpcMaxInboundMessageSize is 130 MB; rocketstore stores 4 MiB bodies).
MAX_RECEIVE_BYTES = 16 * 1024 * 1024
# How long stop() lets running calls finish (a long poll is answered at once: the
# server cancels it).
STOP_GRACE_S = 1.0


class GrpcServer:
    def __init__(self, ctx: BrokerContext, listen: str) -> None:
        self.ctx = ctx
        self.listen = listen
        self.address = ""
        self._server: grpc.aio.Server | None = None
        self.service: MessagingService | None = None

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
        register(self.service, server)
        await server.start()
        self._server = server
        log.info("gRPC endpoint (RocketMQ 5.x clients) at %s", self.address)

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(STOP_GRACE_S)
            self._server = None
