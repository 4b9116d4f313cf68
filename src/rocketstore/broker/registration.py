"""The broker's registration with its name servers (BrokerOuterAPI.registerBrokerAll).

Layer: broker. Registers at start, every ``interval_ms`` (RocketMQ: 30 s) and at once when
the topic table changes; unregisters on shutdown. One persistent connection per name
server, so a killed broker leaves the route table as soon as that connection drops.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import ssl
from collections.abc import Callable

from rocketstore.broker.client import RemotingClient, RemotingClientError, request
from rocketstore.broker.codes import RequestCode, ResponseCode
from rocketstore.broker.context import BrokerContext
from rocketstore.broker.perm_name import is_readable, is_writeable
from rocketstore.broker.timeouts import BackgroundLoop, wait_event
from rocketstore.broker.topic_config import TopicConfig, encode_topics_file
from rocketstore.remoting.acl_signing import SessionCredentials, sign_request
from rocketstore.remoting.codec import RemotingCommand

log = logging.getLogger(__name__)

REGISTER_INTERVAL_MS = 30_000
MASTER_ID = 0


def registered_topics(ctx: BrokerContext) -> list[TopicConfig]:
    """The topic table as the name servers get it. A broker without read or write
    permission (brokerPermission) registers each topic as RocketMQ's
    ``new TopicConfig(name, readQueueNums, writeQueueNums, brokerPermission)``: that perm
    in place of the topic's own, and the order flag and sys flag left at their defaults."""
    topics = ctx.topics.all()
    perm = ctx.config.broker_permission
    if is_readable(perm) and is_writeable(perm):
        return list(topics)
    return [TopicConfig(t.topic_name, t.read_queue_nums, t.write_queue_nums, perm) for t in topics]


def register_request_body(ctx: BrokerContext) -> bytes:
    wrapper = encode_topics_file(registered_topics(ctx), ctx.topics.data_version)
    return json.dumps(
        {"topicConfigSerializeWrapper": wrapper, "filterServerList": []}, separators=(",", ":")
    ).encode("utf-8")


class Registrar(BackgroundLoop):
    def __init__(
        self,
        ctx: BrokerContext,
        namesrv_addrs: list[str],
        interval_ms: int = REGISTER_INTERVAL_MS,
        ssl_context: ssl.SSLContext | None = None,
    ):
        """``ssl_context``: TLS to the name servers (None: as the process's setting)."""
        self.ctx = ctx
        self.clients = [RemotingClient(addr, ssl_context=ssl_context) for addr in namesrv_addrs]
        self.interval_ms = interval_ms
        self._wake = asyncio.Event()
        self.registered = asyncio.Event()
        # A master's HA address (host:haListenPort), registered as haServerAddr.
        self.ha_server_addr = ""
        # A slave's: called with the answer's haServerAddr and masterAddr (its master's).
        self.on_master: Callable[[str, str], None] | None = None
        # Signs (un)registrations for name servers with an ACL (None: unsigned).
        self.credentials: SessionCredentials | None = None
        # Why the last registration failed ("" once one succeeded): for a start that waits.
        self.last_failure = ""

    def _signed(self, cmd: RemotingCommand) -> RemotingCommand:
        return cmd if self.credentials is None else sign_request(cmd, self.credentials)

    def trigger(self) -> None:
        """Thread-safe enough for the loop's own thread (processors run there)."""
        self._wake.set()

    def _ext(self) -> dict[str, str]:
        return {
            "brokerName": self.ctx.broker_name,
            "brokerAddr": self.ctx.broker_addr,
            "clusterName": self.ctx.cluster_name,
            "haServerAddr": self.ha_server_addr,
            "brokerId": str(self.ctx.config.broker_id),
            "compressed": "false",
        }

    async def register_once(self) -> None:
        body = register_request_body(self.ctx)
        for client in self.clients:
            try:
                answer = await client.invoke(
                    self._signed(request(RequestCode.REGISTER_BROKER, self._ext(), body)), 5.0
                )
            except RemotingClientError as e:
                log.warning("register with name server %s failed: %s", client.address, e)
                self.last_failure = f"name server {client.address}: {e}"
                continue
            if answer.code != ResponseCode.SUCCESS:
                log.warning(
                    "name server %s refused registration: %s", client.address, answer.remark
                )
                self.last_failure = f"name server {client.address} refused it: {answer.remark}"
                continue
            self.last_failure = ""
            self.registered.set()
            if self.on_master is not None:
                ext = answer.ext_fields
                self.on_master(ext.get("haServerAddr") or "", ext.get("masterAddr") or "")

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            await self.register_once()
            await wait_event(self._wake, self.interval_ms / 1000)

    async def stop(self) -> None:
        await super().stop()
        ext = self._ext()
        for client in self.clients:
            with contextlib.suppress(RemotingClientError, OSError):
                await client.invoke(self._signed(request(RequestCode.UNREGISTER_BROKER, ext)), 2.0)
            await client.close()
