"""A slave's copy of its master's metadata (RocketMQ 4.9's SlaveSynchronize).

Layer: broker. Every ``SYNC_INTERVAL_MS`` (BrokerController's slave schedule), and as
soon as the master's address is first learned or changes, a slave asks its master for its
topics (GET_ALL_TOPIC_CONFIG), consumer offsets (GET_ALL_CONSUMER_OFFSET), delay offsets
(GET_ALL_DELAY_OFFSET) and subscription groups (GET_ALL_SUBSCRIPTIONGROUP_CONFIG), and
takes them as RocketMQ's slave does:

- topics and groups: when the master's data version differs from the slave's, the whole
  table and the data version are replaced, and topics.json / subscriptionGroup.json
  written;
- consumer offsets: each TOPIC@GROUP of the master's replaces the slave's (``putAll``: an
  entry only the slave has stays), and consumerOffset.json is written;
- delay offsets: delayOffset.json is written with the master's table (the slave runs no
  schedule service; a slave later started as a master goes on from there).

With a master that has ACL on, the requests are signed with the broker's
innerClientAuthenticationCredentials (RocketMQ 5's setting; a 4.9.8 slave sends them
unsigned and its master must white-list its address).

The master is the ``masterAddr`` the name servers answer the slave's registration with
(its remoting address, not its HA one); without a name server there is no metadata sync,
as in RocketMQ. Each of the four steps fails alone (logged) and is tried again next round.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from rocketstore.broker.broker_config import (
    DELAY_OFFSET_FILE,
    config_file_path,
    parse_fastjson,
    persist_config_file,
    signed,
)
from rocketstore.broker.client import RemotingClient, RemotingClientError, request
from rocketstore.broker.codes import RequestCode, ResponseCode
from rocketstore.broker.consumer_offsets import OffsetTable, decode_offset_file
from rocketstore.broker.context import BrokerContext
from rocketstore.broker.schedule import decode_delay_offset_file, encode_delay_offset_file
from rocketstore.broker.subscription_groups import (
    SubscriptionGroupConfig,
    decode_subscription_group_file,
)
from rocketstore.broker.timeouts import BackgroundLoop, wait_event
from rocketstore.broker.topic_config import DataVersion, TopicsFile, decode_topics_file
from rocketstore.errors import ConfigError, StoreError

log = logging.getLogger(__name__)

SYNC_INTERVAL_MS = 10_000
# BrokerOuterAPI's getAll* calls wait 3 s for the master's answer.
REQUEST_TIMEOUT_S = 3.0

T = TypeVar("T")
GroupsFile = tuple[dict[str, SubscriptionGroupConfig], DataVersion]


class MasterAnswerError(StoreError):
    """The master answered a metadata request with something other than SUCCESS."""


def _decode(body: bytes, decode: Callable[[Any], T]) -> T:
    """A body as a Java or rocketstore master writes it (fastjson: unquoted integer
    keys allowed); ValueError says what is wrong."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"body is not UTF-8: {e}") from e
    return decode(parse_fastjson(text))


def decode_topic_config_body(body: bytes) -> TopicsFile:
    """TopicConfigSerializeWrapper: ``{"dataVersion":{...},"topicConfigTable":{...}}``."""
    return _decode(body, decode_topics_file)


def decode_consumer_offset_body(body: bytes) -> OffsetTable:
    """ConsumerOffsetSerializeWrapper: ``{"offsetTable":{"TOPIC@GROUP":{0:12}}}``."""
    return _decode(body, decode_offset_file)


def decode_delay_offset_body(body: bytes) -> dict[int, int]:
    """DelayOffsetSerializeWrapper: ``{"offsetTable":{1:0,2:5}}``."""
    return _decode(body, decode_delay_offset_file)


def decode_subscription_group_body(body: bytes) -> GroupsFile:
    """SubscriptionGroupWrapper: ``{"dataVersion":{...},"subscriptionGroupTable":{...}}``."""
    return _decode(body, decode_subscription_group_file)


class MetadataSync(BackgroundLoop):
    """SlaveSynchronize: ``sync_once`` is one round (tests call it); ``start`` runs rounds
    every ``interval_ms`` and whenever the master's address changes."""

    def __init__(self, ctx: BrokerContext, *, interval_ms: int = SYNC_INTERVAL_MS):
        self.ctx = ctx
        self.interval_ms = interval_ms
        self.master_address = ""
        self.rounds = 0  # completed rounds that asked a master
        self.failures = 0  # steps that failed, over all rounds
        self._client: RemotingClient | None = None
        self._delay_offsets_written: dict[int, int] | None = None
        self._wake = asyncio.Event()

    def update_master_address(self, address: str) -> None:
        """The masterAddr of a registration answer (empty: the name servers know no
        master; the slave keeps what it copied and asks nobody)."""
        if address != self.master_address:
            log.info("metadata sync: master %r -> %r", self.master_address, address)
            self.master_address = address
            if address:
                self._wake.set()

    async def stop(self) -> None:
        await super().stop()
        if self._client is not None:
            await self._client.close()
            self._client = None

    async def _run(self) -> None:
        while True:
            await wait_event(self._wake, self.interval_ms / 1000)
            self._wake.clear()
            await self.sync_once()

    async def _client_for(self, address: str) -> RemotingClient:
        if self._client is not None and self._client.address != address:
            await self._client.close()
            self._client = None
        if self._client is None:
            self._client = RemotingClient(address)
        return self._client

    async def sync_once(self) -> bool:
        """Copy the master's four tables; False when there is no master to ask (none
        known, or this broker's own address)."""
        address = self.master_address
        if not address or address == self.ctx.broker_addr:
            return False
        client = await self._client_for(address)
        steps: list[tuple[str, Callable[[RemotingClient], Awaitable[None]]]] = [
            ("topic config", self._sync_topics),
            ("consumer offsets", self._sync_consumer_offsets),
            ("delay offsets", self._sync_delay_offsets),
            ("subscription groups", self._sync_subscription_groups),
        ]
        for what, step in steps:
            try:
                await step(client)
            except (RemotingClientError, MasterAnswerError, ValueError, ConfigError) as e:
                self.failures += 1
                log.error("metadata sync: %s from master %s: %s", what, address, e)
            except OSError as e:
                self.failures += 1
                log.error("metadata sync: %s from master %s not written: %s", what, address, e)
        self.rounds += 1
        return True

    async def _fetch(self, client: RemotingClient, code: RequestCode) -> bytes:
        answer = await client.invoke(signed(request(code), self.ctx.config), REQUEST_TIMEOUT_S)
        if answer.code != ResponseCode.SUCCESS:
            raise MasterAnswerError(f"{code.name} answered {answer.code}: {answer.remark}")
        return answer.body

    async def _sync_topics(self, client: RemotingClient) -> None:
        wrapper = decode_topic_config_body(
            await self._fetch(client, RequestCode.GET_ALL_TOPIC_CONFIG)
        )
        topics = self.ctx.topics
        if topics.data_version == wrapper.data_version:
            return
        await asyncio.to_thread(topics.replace_all, wrapper.topics, wrapper.data_version)
        log.info(
            "metadata sync: %d topics from master %s (data version %d)",
            len(wrapper.topics),
            client.address,
            wrapper.data_version.counter,
        )
        # The name servers learn the slave's topics at once rather than at the next
        # registration (RocketMQ waits for it).
        self.ctx.topics_changed()

    async def _sync_consumer_offsets(self, client: RemotingClient) -> None:
        table = decode_consumer_offset_body(
            await self._fetch(client, RequestCode.GET_ALL_CONSUMER_OFFSET)
        )
        offsets = self.ctx.offsets
        offsets.put_all(table)
        await asyncio.to_thread(offsets.persist)

    async def _sync_delay_offsets(self, client: RemotingClient) -> None:
        table = decode_delay_offset_body(
            await self._fetch(client, RequestCode.GET_ALL_DELAY_OFFSET)
        )
        if table == self._delay_offsets_written:
            return  # (RocketMQ writes the file every round)
        path = config_file_path(self.ctx.store.root, DELAY_OFFSET_FILE)
        await asyncio.to_thread(persist_config_file, path, encode_delay_offset_file(table))
        self._delay_offsets_written = table

    async def _sync_subscription_groups(self, client: RemotingClient) -> None:
        groups, version = decode_subscription_group_body(
            await self._fetch(client, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        )
        manager = self.ctx.groups
        if manager.data_version == version:
            return
        await asyncio.to_thread(manager.replace_all, groups, version)
        log.info(
            "metadata sync: %d subscription groups from master %s", len(groups), client.address
        )
