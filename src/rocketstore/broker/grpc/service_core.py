"""What every RPC of the gRPC endpoint shares: the state (POP cursors, open
transactions, telemetry streams), the POP journal, and the checks of topics, groups,
receipt handles, filters and polling times, as the proxy's GrpcValidator makes them.

Layer: broker.grpc. ``ServiceCore`` is the base of the activities (send_activity,
receive_activity, pull_activity), which :class:`.service.MessagingService` puts together;
they share one instance's state.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import time
from collections.abc import Callable
from typing import Any

from google.protobuf.duration_pb2 import Duration

from rocketstore.broker.context import BrokerContext
from rocketstore.broker.grpc.convert import RequestError
from rocketstore.broker.grpc.pop import PopState, ReceiptHandle
from rocketstore.broker.grpc.pop_journal import PopJournal
from rocketstore.broker.grpc.protocol import rocketmq_v2_service_pb2 as spb
from rocketstore.broker.grpc.protocol import rocketmq_v2_types_pb2 as pb
from rocketstore.broker.grpc.queue_choice import RoundRobin
from rocketstore.broker.grpc.relay import Relays
from rocketstore.broker.topic_config import (
    TOPIC_MAX_LENGTH,
    TopicConfig,
    topic_name_problem,
)
from rocketstore.config import delay_levels_ms, parse_host
from rocketstore.format.selector import SQL92, TAG
from rocketstore.format.subscription import Subscription, build_subscription
from rocketstore.paths import NOT_ALLOWED_SEND_TOPICS

log = logging.getLogger(__name__)

# FAQUrl.attachDefaultURL's tail of a client exception's message.
FAQ_URL_TAIL = "\nFor more information, please visit the url, https://rocketmq.apache.org/docs/bestPractice/06FAQ"
# ProxyConfig's receive limits.
MIN_INVISIBLE_MS = 10_000
MAX_INVISIBLE_MS = 12 * 3600 * 1000
MIN_POLLING_MS = 5_000
MAX_POLLING_MS = 20_000
MAX_RECEIVE_BATCH = 32
# ProxyConfig.defaultInvisibleTimeMills: a receive asking auto_renew (PushConsumer) gets it,
# and the renewal extends it by as much: renewAheadTimeMillis before it runs out, every
# renewSchedulePeriodMillis, for at most renewMaxTimeMillis.
AUTO_RENEW_INVISIBLE_MS = 60_000
RENEW_AHEAD_MS = 10_000
RENEW_PERIOD_MS = 5_000
RENEW_MAX_MS = 3 * 3600 * 1000
CLIENT_ID_HEADER = "x-mq-client-id"
LANGUAGE_HEADER = "x-mq-language"
# The version the proxy registers every 5.x client with: ClientActivity.parseClientVersion
# fails on "5.0.7" (not an MQVersion name) and falls back to its own, V5_3_3's ordinal.
PROXY_CLIENT_VERSION = 479
# What the answer keeps back of the client's deadline (longPollingReserveTimeInMillis).
POLLING_RESERVE_MS = 100
# A producer's retries (the proxy's producer backoff policy).
PRODUCER_MAX_ATTEMPTS = 3


def now_ms() -> int:
    return int(time.time() * 1000)


def duration_ms(value: Duration) -> int:
    return int(value.seconds) * 1000 + int(value.nanos) // 1_000_000


def proto_duration(ms: int) -> Duration:
    return Duration(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def client_id(context: Any) -> str:
    """The x-mq-client-id header of a call ("" without one)."""
    return header(context, CLIENT_ID_HEADER)


def header(context: Any, name: str) -> str:
    """A call's metadata value ("" without one)."""
    for key, value in context.invocation_metadata() or ():
        if key == name:
            return str(value)
    return ""


def peer_address(peer: str) -> str:
    """grpc's ``context.peer()`` ("ipv4:127.0.0.1:5000", "ipv6:[::1]:5000") as ip:port."""
    kind, _, rest = peer.partition(":")
    if kind in ("ipv4", "ipv6") and rest:
        return rest
    return "127.0.0.1:0"


@dataclasses.dataclass(eq=False)
class TelemetryStream:
    """One client's telemetry stream: what the server sends it, and the topics it
    publishes or the group it consumes in (from its settings)."""

    outbox: asyncio.Queue[spb.TelemetryCommand | None] = dataclasses.field(
        default_factory=asyncio.Queue
    )
    topics: set[str] = dataclasses.field(default_factory=set)
    client: str = ""  # its x-mq-client-id
    group: str = ""  # a consumer's group ("" for a producer)
    # What the admin's consumer connection list shows of a consumer (its settings).
    address: str = ""
    language: str = ""
    consume_type: str = ""
    subscriptions: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)


class ServiceCore:
    """The state and the checks the RPCs share."""

    def __init__(self, ctx: BrokerContext, address: str) -> None:
        self.ctx = ctx
        self.address = address  # the gRPC endpoint's ip:port, for routes
        self.pop = PopState(ctx.broker_name)
        # Where the POP state's changes go before an answer (the server sets it once the
        # state is loaded; None: kept in memory only).
        self.journal: PopJournal | None = None
        # Journal lines written that need an fsync (SYNC_FLUSH), how many of them an fsync
        # has covered, and the fsync under way (at most one; later lines wait for the next).
        self._journal_written = 0
        self._journal_synced_to = 0
        self._journal_syncing: asyncio.Future[None] | None = None
        # The store's delay levels (fixed while it is open), parsed once, not per send.
        self._delay_levels_ms = delay_levels_ms(ctx.store.config.message_delay_level)
        # The least invisible time a receive may ask (the proxy's
        # minInvisibleTimeMillsForRecv); tests lower it.
        self.min_invisible_ms = MIN_INVISIBLE_MS
        self._round_robin = RoundRobin()
        # Half messages sent and not yet ended, by (topic, transaction id): their CommitLog
        # and half-queue offsets, which EndTransaction needs (the proxy's
        # TransactionDataManager; in memory: one not ended before a restart is settled
        # by the transaction check, as a 4.x producer's is).
        self._transactions: dict[tuple[str, str], tuple[int, int]] = {}
        # The open telemetry streams, and which one a transaction check goes to next.
        self._streams: list[TelemetryStream] = []
        self._stream_turn = itertools.count()
        # Clients with a telemetry stream open, by client id (how many streams).
        self.live_clients: dict[str, int] = {}
        # Admin requests relayed to clients over their streams, waiting for answers.
        self.relays = Relays()
        # One receive at a time per group and topic: two would read the same cursor.
        self._receive_locks: dict[tuple[str, str], asyncio.Lock] = {}
        # A call's ip:port -> the client's (the permissive TLS front relays connections).
        self.peer_of: Callable[[str], str] = str

    # --- the POP state's journal ---------------------------------------------------------

    def _journal_write(self) -> int:
        """Write the POP state's changes to the journal: the line's number when it needs
        an fsync too (SYNC_FLUSH), else 0."""
        records = self.pop.take_changes()
        journal = self.journal
        if not records or journal is None:
            return 0
        try:
            journal.append(records)
        except OSError as e:
            # The next snapshot still holds them; only a crash before it loses them.
            log.error("writing the POP journal failed: %s", e)
            return 0
        if not journal.sync:
            return 0
        self._journal_written += 1
        return self._journal_written

    async def _journal(self) -> None:
        """Write the POP state's changes ahead of the answer about them: what a receive
        handed out (its delivery attempts) and what an ack removed survive a kill -9 once
        answered, as RocketMQ 5 puts its checkpoint and ack records before answering."""
        await self._journal_synced(self._journal_write())

    async def _journal_synced(self, line: int) -> None:
        """Wait until journal line ``line`` (0: none) is on disk. One fsync answers every
        line written before it began: concurrent receives and acks share it (group
        commit), instead of one fsync each, one after another."""
        while self._journal_synced_to < line:
            if self._journal_syncing is None:
                self._journal_syncing = asyncio.ensure_future(self._journal_fsync())
            await asyncio.shield(self._journal_syncing)

    async def _journal_fsync(self) -> None:
        covered = self._journal_written  # every line up to here was written before the fsync
        journal = self.journal
        try:
            if journal is not None:
                await self.ctx.run(journal.fsync)
        except OSError as e:
            log.error("syncing the POP journal failed: %s", e)
        finally:
            self._journal_synced_to = max(self._journal_synced_to, covered)
            self._journal_syncing = None

    def commit_all(self) -> None:
        """Every POP cursor's consumer offset (after the state was read back)."""
        for cursor in self.pop.cursors():
            self._commit(*cursor.key)

    # --- checks shared by the RPCs ------------------------------------------------------

    def _topic(self, resource: pb.Resource, *, write: bool = False) -> TopicConfig:
        name = resource.name
        # GrpcValidator.validateTopic: Validators.checkTopic's words, in its order.
        if not name.strip():
            raise RequestError(pb.Code.ILLEGAL_TOPIC, "The specified topic is blank")
        if len(name) > TOPIC_MAX_LENGTH:
            raise RequestError(
                pb.Code.ILLEGAL_TOPIC,
                f"The specified topic is longer than topic max length {TOPIC_MAX_LENGTH}.",
            )
        if topic_name_problem(name) is not None:
            raise RequestError(
                pb.Code.ILLEGAL_TOPIC,
                f"The specified topic[{name}] contains illegal characters, "
                "allowing only ^[%|a-zA-Z0-9_-]+$",
            )
        if self.ctx.topics.is_system_topic(name):
            # GrpcValidator.validateTopic: no RPC of a 5.x client names one (their routes
            # are not given out, nothing is sent to or received from them here).
            raise RequestError(pb.Code.ILLEGAL_TOPIC, "cannot access system topic")
        if resource.resource_namespace:
            raise RequestError(
                pb.Code.ILLEGAL_ACCESS_POINT,
                f"resource namespace {resource.resource_namespace!r} is not served here "
                "(rocketstore has no namespaces)",
            )
        if write and name in NOT_ALLOWED_SEND_TOPICS:
            raise RequestError(pb.Code.FORBIDDEN, f"Sending message to topic[{name}] is forbidden.")
        config = self.ctx.topics.peek(name)
        if config is None:
            # TopicRouteService's MQClientException, its getMessage() (ResponseBuilder).
            raise RequestError(
                pb.Code.TOPIC_NOT_FOUND,
                f"CODE: 17  DESC: No topic route info in name server for the topic: {name}"
                + FAQ_URL_TAIL,
            )
        return config

    def _group(self, resource: pb.Resource) -> str:
        name = resource.name
        if not name:
            raise RequestError(pb.Code.ILLEGAL_CONSUMER_GROUP, "consumer group cannot be empty")
        problem = topic_name_problem(name)
        if problem is not None:
            raise RequestError(
                pb.Code.ILLEGAL_CONSUMER_GROUP, f"consumer group {name!r} is illegal"
            )
        if self.ctx.groups.find(name) is None:
            raise RequestError(
                pb.Code.CONSUMER_GROUP_NOT_FOUND, f"consumer group not found: {name}"
            )
        return name

    def _endpoints(self, asked: pb.Endpoints) -> pb.Endpoints:
        """The endpoints routes name: those the client reached us at, else our address."""
        if asked.addresses:
            return asked
        host, port = parse_host(self.address)
        scheme = pb.AddressScheme.IPv6 if ":" in host else pb.AddressScheme.IPv4
        return pb.Endpoints(scheme=scheme, addresses=[pb.Address(host=host, port=port)])

    def _broker(self, asked: pb.Endpoints) -> pb.Broker:
        return pb.Broker(name=self.ctx.broker_name, id=0, endpoints=self._endpoints(asked))

    @staticmethod
    def _subscription(expression: pb.FilterExpression) -> Subscription:
        kind = SQL92 if expression.type == pb.FilterType.SQL else TAG
        try:
            return build_subscription(expression.expression or "*", kind)
        except Exception as e:  # the selector's parse errors, whatever their class
            raise RequestError(pb.Code.ILLEGAL_FILTER_EXPRESSION, str(e)) from e

    def _polling_ms(
        self, request: spb.ReceiveMessageRequest | spb.PullMessageRequest, context: Any
    ) -> int:
        remaining = context.time_remaining()
        remaining_ms = int(remaining * 1000) if remaining is not None else MAX_POLLING_MS
        polling = (
            duration_ms(request.long_polling_timeout)
            if request.HasField("long_polling_timeout")
            else remaining_ms // 2
        )
        polling = max(MIN_POLLING_MS, min(polling, MAX_POLLING_MS))
        if polling > remaining_ms:
            if remaining_ms < MIN_POLLING_MS:
                raise RequestError(
                    pb.Code.ILLEGAL_POLLING_TIME,
                    "The deadline time remaining is not enough for polling, please check "
                    "network condition",
                )
            polling = remaining_ms
        return max(0, polling - POLLING_RESERVE_MS)

    def _is_fifo(self, group: str) -> bool:
        config = self.ctx.groups.get(group)
        return config is not None and config.consume_message_orderly

    def _commit(self, group: str, topic: str, queue_id: int) -> None:
        """The group's consumer offset: its lowest message not acknowledged."""
        cursor = self.pop.find(group, topic, queue_id)
        if cursor is None:
            return
        offset = cursor.lowest_unacked
        if self.ctx.offsets.query(group, topic, queue_id) != offset:
            self.ctx.offsets.commit(group, topic, queue_id, offset)

    def _handle(self, text: str) -> ReceiptHandle:
        handle = ReceiptHandle.decode(text)
        if handle is None:
            raise RequestError(pb.Code.INVALID_RECEIPT_HANDLE, "receipt handle is not valid")
        return handle
