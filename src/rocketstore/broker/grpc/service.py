"""apache.rocketmq.v2.MessagingService over the broker's state: routes, sends, and POP
receives with acks, as a RocketMQ 5 proxy answers them.

Layer: broker.grpc. Runs on the broker's event loop (grpc.aio), beside the remoting
server, with the same BrokerContext: a gRPC send is put exactly as a remoting send is
(``BrokerContext.put``), and long-polling receives wait on the same held-pull table.
Refusals carry the proxy's status codes and words (GrpcValidator, the activities).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import dataclasses
import functools
import itertools
import logging
import random
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from google.protobuf.duration_pb2 import Duration

from rocketstore.broker.codes import ResponseCode
from rocketstore.broker.context import BrokerContext
from rocketstore.broker.grpc import convert
from rocketstore.broker.grpc.convert import RequestError, status
from rocketstore.broker.grpc.pop import AckStatus, PopState, QueueCursor, ReceiptHandle
from rocketstore.broker.grpc.pop_journal import PopJournal
from rocketstore.broker.grpc.protocol import rocketmq_v2_service_pb2 as spb
from rocketstore.broker.grpc.protocol import rocketmq_v2_service_pb2_grpc as spb_grpc
from rocketstore.broker.grpc.protocol import rocketmq_v2_types_pb2 as pb
from rocketstore.broker.grpc.queue_choice import RoundRobin, group_queue
from rocketstore.broker.perm_name import PERM_WRITE
from rocketstore.broker.processors.offsets import query_offset_sync
from rocketstore.broker.processors.pull import response_code
from rocketstore.broker.processors.send import asks_for_timer, stored_properties, timer_stored
from rocketstore.broker.processors.send_back import retry_message
from rocketstore.broker.topic_config import (
    MULTI_TAG,
    TopicConfig,
    dlq_topic,
    topic_name_problem,
)
from rocketstore.broker.transaction import (
    COMMIT,
    ROLLBACK,
    half_message,
    half_message_properties,
)
from rocketstore.broker.transaction_service import CheckRequest, EndCode, EndRequest
from rocketstore.config import delay_levels_ms, parse_host
from rocketstore.errors import StoreError
from rocketstore.format import properties as props
from rocketstore.format import sysflag
from rocketstore.format.message import Message, MessageExt
from rocketstore.format.record import decode_message
from rocketstore.format.selector import SQL92, TAG
from rocketstore.format.subscription import Subscription, build_subscription
from rocketstore.paths import NOT_ALLOWED_SEND_TOPICS, RETRY_PREFIX
from rocketstore.put_path import PutResult, is_delayed
from rocketstore.status import Boundary, GetStatus, PutStatus
from rocketstore.store.timer import TIMER_TOPIC, TimerRefusal, timer_message_to_store

log = logging.getLogger(__name__)

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
# What the answer keeps back of the client's deadline (longPollingReserveTimeInMillis).
POLLING_RESERVE_MS = 100
# RecallMessageProcessor's tag of the delete unit it stores.
RECALL_MESSAGE_TAG = "_RECALL_TAG_"
# A producer's retries (the proxy's producer backoff policy).
PRODUCER_MAX_ATTEMPTS = 3

_PUT_FAILURES = {
    PutStatus.FLUSH_DISK_TIMEOUT: pb.Code.MASTER_PERSISTENCE_TIMEOUT,
    PutStatus.FLUSH_SLAVE_TIMEOUT: pb.Code.SLAVE_PERSISTENCE_TIMEOUT,
    PutStatus.SLAVE_NOT_AVAILABLE: pb.Code.HA_NOT_AVAILABLE,
    PutStatus.MESSAGE_ILLEGAL: pb.Code.BAD_REQUEST,
    PutStatus.PROPERTIES_SIZE_EXCEEDED: pb.Code.MESSAGE_PROPERTIES_TOO_LARGE,
}


def now_ms() -> int:
    return int(time.time() * 1000)


def _duration_ms(value: Duration) -> int:
    return int(value.seconds) * 1000 + int(value.nanos) // 1_000_000


def _duration(ms: int) -> Duration:
    return Duration(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def _client_id(context: Any) -> str:
    """The x-mq-client-id header of a call ("" without one)."""
    for key, value in context.invocation_metadata() or ():
        if key == CLIENT_ID_HEADER:
            return str(value)
    return ""


def _peer_address(peer: str) -> str:
    """grpc's ``context.peer()`` ("ipv4:127.0.0.1:5000", "ipv6:[::1]:5000") as ip:port."""
    kind, _, rest = peer.partition(":")
    if kind in ("ipv4", "ipv6") and rest:
        return rest
    return "127.0.0.1:0"


@dataclasses.dataclass(eq=False)
class _TelemetryStream:
    """One client's telemetry stream: what the server sends it, and the topics it
    publishes (from its settings)."""

    outbox: asyncio.Queue[spb.TelemetryCommand | None] = dataclasses.field(
        default_factory=asyncio.Queue
    )
    topics: set[str] = dataclasses.field(default_factory=set)


class MessagingService(spb_grpc.MessagingServiceServicer):
    """The RPCs served; the rest answer UNIMPLEMENTED (the generated base class)."""

    def __init__(self, ctx: BrokerContext, address: str) -> None:
        self.ctx = ctx
        self.address = address  # the gRPC endpoint's ip:port, for routes
        self.pop = PopState(ctx.broker_name)
        # Where the POP state's changes go before an answer (the server sets it once the
        # state is loaded; None: kept in memory only).
        self.journal: PopJournal | None = None
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
        self._streams: list[_TelemetryStream] = []
        self._stream_turn = itertools.count()
        # Clients with a telemetry stream open, by client id (how many streams).
        self.live_clients: dict[str, int] = {}
        # One receive at a time per group and topic: two would read the same cursor.
        self._receive_locks: dict[tuple[str, str], asyncio.Lock] = {}
        # A call's ip:port -> the client's (the permissive TLS front relays connections).
        self.peer_of: Callable[[str], str] = str

    # --- the POP state's journal ---------------------------------------------------------

    def _journal_write(self) -> PopJournal | None:
        """Write the POP state's changes to the journal; the journal when they need an
        fsync too (SYNC_FLUSH)."""
        records = self.pop.take_changes()
        journal = self.journal
        if not records or journal is None:
            return None
        try:
            journal.append(records)
        except OSError as e:
            # The next snapshot still holds them; only a crash before it loses them.
            log.error("writing the POP journal failed: %s", e)
            return None
        return journal if journal.sync else None

    async def _journal(self) -> None:
        """Write the POP state's changes ahead of the answer about them: what a receive
        handed out (its delivery attempts) and what an ack removed survive a kill -9 once
        answered, as RocketMQ 5 puts its checkpoint and ack records before answering."""
        journal = self._journal_write()
        if journal is not None:
            try:
                await self.ctx.run(journal.fsync)
            except OSError as e:
                log.error("syncing the POP journal failed: %s", e)

    def commit_all(self) -> None:
        """Every POP cursor's consumer offset (after the state was read back)."""
        for cursor in self.pop.cursors():
            self._commit(*cursor.key)

    # --- checks shared by the RPCs ------------------------------------------------------

    def _topic(self, resource: pb.Resource, *, write: bool = False) -> TopicConfig:
        name = resource.name
        if not name:
            raise RequestError(pb.Code.ILLEGAL_TOPIC, "topic name cannot be empty")
        problem = topic_name_problem(name)
        if problem is not None:
            raise RequestError(pb.Code.ILLEGAL_TOPIC, f"topic name {name!r} is illegal: {problem}")
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
            raise RequestError(pb.Code.TOPIC_NOT_FOUND, f"topic not found: {name}")
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

    # --- routes, heartbeats, settings ---------------------------------------------------

    async def QueryRoute(
        self, request: spb.QueryRouteRequest, context: Any
    ) -> spb.QueryRouteResponse:
        try:
            config = self._topic(request.topic)
        except RequestError as e:
            return spb.QueryRouteResponse(status=status(e.code, e.message))
        broker = self._broker(request.endpoints)
        types = [
            pb.MessageType.NORMAL,
            pb.MessageType.FIFO,
            pb.MessageType.DELAY,
            pb.MessageType.TRANSACTION,
        ]
        queues = []
        # As the proxy lists a topic's queues (genMessageQueueFromQueueData): queues both
        # read and written, then the read-only and write-only rest.
        both = min(config.read_queue_nums, config.write_queue_nums)
        readable, writeable = config.readable, config.writeable
        for queue_id in range(max(config.read_queue_nums, config.write_queue_nums)):
            reads = readable and queue_id < config.read_queue_nums
            writes = writeable and queue_id < config.write_queue_nums
            if queue_id < both and reads and writes:
                permission = pb.Permission.READ_WRITE
            elif reads:
                permission = pb.Permission.READ
            elif writes:
                permission = pb.Permission.WRITE
            else:
                permission = pb.Permission.NONE
            queues.append(
                pb.MessageQueue(
                    topic=request.topic,
                    id=queue_id,
                    permission=permission,
                    broker=broker,
                    accept_message_types=types,
                )
            )
        return spb.QueryRouteResponse(status=status(pb.Code.OK), message_queues=queues)

    async def Heartbeat(self, request: spb.HeartbeatRequest, context: Any) -> spb.HeartbeatResponse:
        if request.HasField("group") and request.group.name:
            try:
                self._group(request.group)
            except RequestError as e:
                return spb.HeartbeatResponse(status=status(e.code, e.message))
        return spb.HeartbeatResponse(status=status(pb.Code.OK))

    async def NotifyClientTermination(
        self, request: spb.NotifyClientTerminationRequest, context: Any
    ) -> spb.NotifyClientTerminationResponse:
        # Messages the client holds stay invisible until their time runs out, as in RocketMQ.
        return spb.NotifyClientTerminationResponse(status=status(pb.Code.OK))

    def _settings_answer(self, settings: pb.Settings) -> pb.Settings:
        """The client's settings merged with the server's (GrpcClientSettingsManager)."""
        answer = pb.Settings()
        answer.CopyFrom(settings)
        if settings.WhichOneof("pub_sub") == "subscription":
            retry_max = 16
            group = settings.subscription.group.name
            config = self.ctx.groups.get(group) if group else None
            if config is not None:
                retry_max = config.retry_max_times
            answer.backoff_policy.Clear()
            answer.backoff_policy.max_attempts = retry_max + 1
            # A 4.x consumer's retry delays: delay levels 3 and up.
            levels = self._delay_levels_ms[2:]
            answer.backoff_policy.customized_backoff.next.extend(_duration(ms) for ms in levels)
            if not answer.subscription.HasField("receive_batch_size"):
                answer.subscription.receive_batch_size = MAX_RECEIVE_BATCH
            # A FIFO group (consumeMessageOrderly), as GrpcClientSettingsManager says.
            answer.subscription.fifo = config is not None and config.consume_message_orderly
        else:
            answer.backoff_policy.Clear()
            answer.backoff_policy.max_attempts = PRODUCER_MAX_ATTEMPTS
            backoff = answer.backoff_policy.exponential_backoff
            backoff.initial.CopyFrom(_duration(10))
            backoff.max.CopyFrom(_duration(1000))
            backoff.multiplier = 2.0
            answer.publishing.max_body_size = self.ctx.store.config.max_message_size
            answer.publishing.validate_message_type = False
        return answer

    async def Telemetry(
        self, request_iterator: AsyncIterator[spb.TelemetryCommand], context: Any
    ) -> AsyncIterator[spb.TelemetryCommand]:
        """The settings exchange (each settings command answered with the merged
        settings) and the server's own commands to the client: orphaned-transaction
        recovery for the topics a producer publishes. Answers to commands the server
        never sends are dropped."""
        stream = _TelemetryStream()
        self._streams.append(stream)
        client = _client_id(context)
        if client:
            self.live_clients[client] = self.live_clients.get(client, 0) + 1

        async def read() -> None:
            try:
                async for command in request_iterator:
                    kind = command.WhichOneof("command")
                    if kind == "settings":
                        settings = command.settings
                        if settings.WhichOneof("pub_sub") == "publishing":
                            stream.topics = {t.name for t in settings.publishing.topics}
                        answer = self._settings_answer(settings)
                        stream.outbox.put_nowait(
                            spb.TelemetryCommand(status=status(pb.Code.OK), settings=answer)
                        )
                    elif kind is None:
                        stream.outbox.put_nowait(
                            spb.TelemetryCommand(
                                status=status(
                                    pb.Code.BAD_REQUEST, "telemetry command without a command"
                                )
                            )
                        )
            finally:
                stream.outbox.put_nowait(None)

        reader = asyncio.create_task(read())
        try:
            while (item := await stream.outbox.get()) is not None:
                yield item
        finally:
            self._streams.remove(stream)
            reader.cancel()
            if client:
                left = self.live_clients.pop(client, 1) - 1
                if left > 0:
                    self.live_clients[client] = left

    def renew(self) -> int:
        """Extend the invisible time of what connected clients' auto-renewing receives
        hold (called every RENEW_PERIOD_MS)."""
        renewed = self.pop.renew(
            now_ms(),
            lambda client: self.live_clients.get(client, 0) > 0,
            RENEW_AHEAD_MS,
            AUTO_RENEW_INVISIBLE_MS,
            RENEW_MAX_MS,
        )
        # (not synced: a renewal lost makes a message visible early, never lost)
        self._journal_write()
        return renewed

    def recover_orphaned(self, request: CheckRequest) -> bool:
        """A transaction check for a half message of a gRPC producer (its group is the
        topic): RecoverOrphanedTransactionCommand over the telemetry stream of a producer
        publishing that topic, taken in turn; False when none is connected."""
        topic = request.producer_group
        streams = [s for s in self._streams if topic in s.topics]
        transaction_id = request.fields.get("transactionId")
        if not streams or not transaction_id:
            return False
        try:
            half = decode_message(request.body)
        except StoreError as e:
            log.error("transaction check of %s not sent over gRPC: %s", transaction_id, e)
            return False
        self._transactions[(topic, transaction_id)] = (
            int(request.fields["commitLogOffset"]),
            int(request.fields["tranStateTableOffset"]),
        )
        command = spb.RecoverOrphanedTransactionCommand(
            message=convert.proto_message(half), transaction_id=transaction_id
        )
        stream = streams[next(self._stream_turn) % len(streams)]
        stream.outbox.put_nowait(spb.TelemetryCommand(recover_orphaned_transaction_command=command))
        return True

    # --- sending ------------------------------------------------------------------------

    async def SendMessage(
        self, request: spb.SendMessageRequest, context: Any
    ) -> spb.SendMessageResponse:
        try:
            return await self._send(request, self.peer_of(_peer_address(context.peer())))
        except RequestError as e:
            return spb.SendMessageResponse(status=status(e.code, e.message))

    def _send_queue(self, request: spb.SendMessageRequest, config: TopicConfig) -> int:
        if config.write_queue_nums <= 0:
            raise RequestError(pb.Code.FORBIDDEN, "no writable queue")
        group = request.messages[0].system_properties.message_group
        if len(request.messages) == 1 and group:
            return group_queue(group, config.write_queue_nums)
        return self._round_robin.pick(config.write_queue_nums)

    def _record(
        self, message: pb.Message, born_host: str, queue_id: int, config: TopicConfig
    ) -> Message:
        now = now_ms()
        fields = convert.send_fields(
            message,
            born_host.rsplit(":", 1)[0],
            max_body_bytes=self.ctx.store.config.max_message_size,
            delay_levels_ms=self._delay_levels_ms,
            now_ms=now,
            timer_wheel=self.ctx.store.config.timer_wheel_enable,
        )
        sys_flag = fields.sys_flag
        if config.topic_filter_type == MULTI_TAG:
            sys_flag |= sysflag.MULTI_TAGS_FLAG
        if fields.transactional:
            if self.ctx.config.reject_transaction_message:
                raise RequestError(
                    pb.Code.FORBIDDEN,
                    f"the broker[{self.ctx.broker_host}] sending transaction message is forbidden",
                )
            # Stored as a half message until EndTransaction, as a remoting send's.
            return half_message(
                body=message.body,
                flag=0,
                sys_flag=sys_flag,
                properties=half_message_properties(
                    fields.properties, self.ctx.cluster_name, config.topic_name, queue_id
                ),
                born_timestamp=fields.born_timestamp,
                born_host=born_host,
                reconsume_times=0,
            )
        timer = asks_for_timer(fields.properties, config.topic_name)
        record = Message(
            topic=config.topic_name,
            body=message.body,
            queue_id=queue_id,
            flag=0,
            sys_flag=sys_flag,
            properties=stored_properties(
                fields.properties,
                self.ctx.cluster_name,
                keep_wait=timer or is_delayed(fields.properties, sys_flag),
            ),
            born_timestamp=fields.born_timestamp,
            born_host=born_host,
            reconsume_times=0,
        )
        if not timer:
            return record
        stored = timer_stored(self.ctx, record)
        if isinstance(stored, TimerRefusal):
            raise RequestError(pb.Code.ILLEGAL_DELIVERY_TIME, stored.remark)
        return stored

    def _recall_handle(self, record: Message) -> str:
        """SendMessageProcessor.attachRecallHandle: a timer message sent alone (not in a
        batch) gets RecallMessageHandle.HandleV1, base64url of "v1 <real topic> <broker>
        <TIMER_OUT_MS + 1> <UNIQ_KEY>"; "" for any other."""
        properties = record.properties
        out_ms, real = properties.get(props.TIMER_OUT_MS), properties.get(props.REAL_TOPIC)
        uniq = properties.get(props.UNIQ_KEY)
        if record.topic != TIMER_TOPIC or not out_ms or not real or not uniq:
            return ""
        if real.startswith(RETRY_PREFIX):
            return ""
        raw = f"v1 {real} {self.ctx.broker_name} {int(out_ms) + 1} {uniq}"
        return base64.urlsafe_b64encode(raw.encode()).decode()

    async def _send(
        self, request: spb.SendMessageRequest, born_host: str
    ) -> spb.SendMessageResponse:
        if not request.messages:
            raise RequestError(pb.Code.MESSAGE_CORRUPTED, "no message to send")
        topic = request.messages[0].topic
        for message in request.messages:
            if message.topic != topic:
                raise RequestError(pb.Code.MESSAGE_CORRUPTED, "topic in message is not same")
        config = self._topic(topic, write=True)
        if not config.writeable:
            raise RequestError(
                pb.Code.FORBIDDEN, f"the topic[{topic.name}] sending message is forbidden"
            )
        queue_id = self._send_queue(request, config)
        records = [self._record(m, born_host, queue_id, config) for m in request.messages]
        body_bytes = sum(len(r.body) for r in records)
        results: list[PutResult]
        if len(records) == 1:
            results = [await self.ctx.put(records[0], body_bytes)]
        else:
            # One batch whatever its kinds: the store writes each record to its own topic
            # (a timer one into rmq_sys_wheel_timer, a half message into the half topic),
            # all in one append. (RocketMQ 5.3.3's broker skips its timer hook for a batch
            # and would deliver a timer entry at once.)
            results = await self.ctx.put_batch(records, body_bytes)
            if len(results) != len(records):  # one refusal of the whole batch (a slave's)
                results = [results[0]] * len(records)
        entries = []
        codes = set()
        for message, result in zip(request.messages, results, strict=True):
            message_id = message.system_properties.message_id
            if result.status is PutStatus.PUT_OK:
                if message.system_properties.message_type == pb.MessageType.TRANSACTION:
                    key = (config.topic_name, message_id)
                    self._transactions[key] = (result.commit_log_offset, result.queue_offset)
                entry = spb.SendResultEntry(
                    status=status(pb.Code.OK),
                    message_id=message_id,
                    transaction_id=message_id,
                    offset=result.queue_offset,
                    recall_handle=self._recall_handle(records[0]) if len(records) == 1 else "",
                )
            else:
                code = _PUT_FAILURES.get(result.status, pb.Code.INTERNAL_SERVER_ERROR)
                why = result.reason or result.status.value
                entry = spb.SendResultEntry(
                    status=status(code, f"send message failed, sendStatus={why}")
                )
            entries.append(entry)
            codes.add(entry.status.code)
        stored = sum(1 for r in results if r.status is PutStatus.PUT_OK)
        if stored:
            self.ctx.stats.stored(config.topic_name, stored)
        if len(codes) > 1:
            overall = status(pb.Code.MULTIPLE_RESULTS)
        else:
            overall = entries[0].status
        return spb.SendMessageResponse(status=overall, entries=entries)

    # --- POP consumption ----------------------------------------------------------------

    async def QueryAssignment(
        self, request: spb.QueryAssignmentRequest, context: Any
    ) -> spb.QueryAssignmentResponse:
        try:
            config = self._topic(request.topic)
            self._group(request.group)
        except RequestError as e:
            return spb.QueryAssignmentResponse(status=status(e.code, e.message))
        if not config.readable or config.read_queue_nums <= 0:
            return spb.QueryAssignmentResponse(
                status=status(pb.Code.FORBIDDEN, "no readable queue")
            )
        # One assignment of every queue (id -1): the broker picks among them at receive.
        queue = pb.MessageQueue(
            topic=request.topic,
            id=-1,
            permission=pb.Permission.READ_WRITE if config.writeable else pb.Permission.READ,
            broker=self._broker(request.endpoints),
        )
        return spb.QueryAssignmentResponse(
            status=status(pb.Code.OK), assignments=[pb.Assignment(message_queue=queue)]
        )

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
            _duration_ms(request.long_polling_timeout)
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

    async def ReceiveMessage(
        self, request: spb.ReceiveMessageRequest, context: Any
    ) -> AsyncIterator[spb.ReceiveMessageResponse]:
        async for answer in self._receive_answers(request, context):
            yield answer
        # The proxy ends every receive with the time it answered (ReceiveMessageResponse-
        # StreamWriter.onComplete): the Python 5.x client's PushConsumer takes its delivery
        # latency from it, and without it fails every receive that brought messages.
        stamp = spb.ReceiveMessageResponse()
        stamp.delivery_timestamp.FromMilliseconds(now_ms())
        yield stamp

    async def _receive_answers(
        self, request: spb.ReceiveMessageRequest, context: Any
    ) -> AsyncIterator[spb.ReceiveMessageResponse]:
        try:
            polling_ms = self._polling_ms(request, context)
            config = self._topic(request.message_queue.topic)
            group = self._group(request.group)
            invisible_ms = _duration_ms(request.invisible_duration)
            renew_client = ""
            if request.auto_renew:
                # A PushConsumer's receive: the proxy's default invisible time
                # (enableProxyAutoRenew), renewed while the client is connected.
                invisible_ms = AUTO_RENEW_INVISIBLE_MS
                renew_client = _client_id(context)
            elif invisible_ms < self.min_invisible_ms:
                raise RequestError(
                    pb.Code.ILLEGAL_INVISIBLE_TIME,
                    f"the invisibleTime is too small. min is {self.min_invisible_ms}",
                )
            if invisible_ms > MAX_INVISIBLE_MS:
                raise RequestError(
                    pb.Code.ILLEGAL_INVISIBLE_TIME,
                    f"the invisibleTime is too large. max is {MAX_INVISIBLE_MS}",
                )
            subscription = self._subscription(request.filter_expression)
            batch = request.batch_size if request.batch_size > 0 else MAX_RECEIVE_BATCH
            batch = min(batch, MAX_RECEIVE_BATCH)
        except RequestError as e:
            yield spb.ReceiveMessageResponse(status=status(e.code, e.message))
            return
        # Every queue of the topic, whichever the client named: the proxy pops the broker's
        # acting queue (-1), which the broker serves from all its queues, starting at a
        # random one (PopMessageProcessor) so that no queue waits behind the others.
        count = config.read_queue_nums
        first = random.randrange(count) if count else 0
        queue_ids = [(first + i) % count for i in range(count)]
        deadline = time.monotonic() + polling_ms / 1000
        lock = self._receive_locks.setdefault((group, config.topic_name), asyncio.Lock())
        while True:
            async with lock:
                found = await self._pop(
                    group,
                    config.topic_name,
                    queue_ids,
                    batch,
                    invisible_ms,
                    subscription,
                    renew_client,
                )
                await self._journal()  # before the answer goes out
            log.debug(
                "receive %s/%s queues %s: %d message(s)",
                group,
                config.topic_name,
                queue_ids,
                len(found),
            )
            if found:
                yield spb.ReceiveMessageResponse(status=status(pb.Code.OK))
                for message in found:
                    yield spb.ReceiveMessageResponse(message=message)
                return
            if not await self._wait(group, config.topic_name, queue_ids, deadline):
                yield spb.ReceiveMessageResponse(
                    status=status(pb.Code.MESSAGE_NOT_FOUND, "no new message")
                )
                return

    def _start_offset(self, group: str, topic: str, queue_id: int) -> int:
        """Where a group's POP starts in a queue: its committed offset, else the first
        message while the queue still begins at 0 (the proxy's in-memory rule for a new
        group), else the queue's end."""
        committed = self.ctx.offsets.query(group, topic, queue_id)
        if committed is not None and committed >= 0:
            return committed
        if self.ctx.store.min_offset(topic, queue_id) <= 0:
            return 0
        return self.ctx.store.max_offset(topic, queue_id)

    async def _pop(
        self,
        group: str,
        topic: str,
        queue_ids: list[int],
        batch: int,
        invisible_ms: int,
        subscription: Subscription,
        renew_client: str = "",
    ) -> list[pb.Message]:
        """Up to ``batch`` messages: overdue ones first (their attempt counted), then new
        ones, each queue from where its cursor stands."""
        out: list[pb.Message] = []
        store = self.ctx.store
        fifo = self._is_fifo(group)
        for queue_id in queue_ids:
            if len(out) >= batch:
                break
            cursor = self.pop.cursor(
                group,
                topic,
                queue_id,
                functools.partial(self._start_offset, group, topic, queue_id),
            )
            now = now_ms()
            if fifo and cursor.blocked(now):
                # A FIFO group's queue gives nothing while a message of it is in flight
                # (RocketMQ 5's order pop, ConsumerOrderInfoManager.checkBlock).
                continue
            for held in cursor.overdue(now):
                if len(out) >= batch:
                    break
                ext = await self.ctx.run(store.look_message, held.commit_log_offset)
                if ext is None:  # gone with its CommitLog file: nothing left to deliver
                    self.pop.drop(cursor, held.offset)
                    continue
                if held.attempt >= self._max_attempts(group):
                    # Delivered as often as the group allows: to %DLQ%<group>, as
                    # RocketMQ 5's revive service moves it.
                    if await self._to_dead_letter_queue(group, ext, held.attempt):
                        self.pop.drop(cursor, held.offset)
                    continue
                attempt = held.attempt + 1
                handle = self.pop.hand_out(
                    cursor,
                    queue_id,
                    held.offset,
                    held.commit_log_offset,
                    attempt,
                    now,
                    invisible_ms,
                    renew_client,
                )
                out.append(self._answer(ext, handle, attempt, invisible_ms))
            if len(out) >= batch:
                break
            if fifo and cursor.in_flight:
                # Those come again first; what follows them waits until they are done.
                self._commit(group, topic, queue_id)
                continue
            result = await self.ctx.run(
                store.get_matching_messages,
                group,
                topic,
                queue_id,
                cursor.next_offset,
                batch - len(out),
                subscription,
            )
            if result.status is GetStatus.FOUND:
                now = now_ms()
                for ext in result.messages:
                    handle = self.pop.hand_out(
                        cursor,
                        queue_id,
                        ext.queue_offset,
                        ext.commit_log_offset,
                        1,
                        now,
                        invisible_ms,
                        renew_client,
                    )
                    out.append(self._answer(ext, handle, 1, invisible_ms))
            if result.status is not GetStatus.NO_MATCHED_LOGIC_QUEUE:
                self.pop.advance(cursor, result.next_begin_offset)
            self._commit(group, topic, queue_id)
        return out

    def _is_fifo(self, group: str) -> bool:
        config = self.ctx.groups.get(group)
        return config is not None and config.consume_message_orderly

    def _max_attempts(self, group: str) -> int:
        """Deliveries a group's message gets: its retryMaxTimes + 1, as the settings the
        client was given say."""
        config = self.ctx.groups.get(group)
        return (config.retry_max_times if config is not None else 16) + 1

    async def _to_dead_letter_queue(self, group: str, ext: MessageExt, attempts: int) -> bool:
        """Store ``ext`` in ``%DLQ%<group>`` (created write-only with one queue, as a
        send-back creates it); whether it was stored."""
        original = dataclasses.replace(ext, reconsume_times=max(attempts - 1, 0))
        message, _to_dlq = retry_message(original, group, -1, 0, ext.properties.get(props.UNIQ_KEY))
        topic = dlq_topic(group)
        if topic not in self.ctx.topics:
            self.ctx.topics.create_on_send_back(topic, 1, PERM_WRITE)
            self.ctx.topics_changed()
        result = await self.ctx.put(message, len(message.body))
        if result.status is not PutStatus.PUT_OK:
            log.warning(
                "moving a message of %s/%s to %s failed (%s); it stays in flight",
                group,
                ext.topic,
                topic,
                result.reason or result.status.value,
            )
            return False
        self.ctx.stats.sent_back(group, ext.topic, True)
        return True

    @staticmethod
    def _answer(
        ext: MessageExt, handle: ReceiptHandle, attempt: int, invisible_ms: int
    ) -> pb.Message:
        return convert.proto_message(
            ext, receipt_handle=handle.encode(), delivery_attempt=attempt, invisible_ms=invisible_ms
        )

    def _commit(self, group: str, topic: str, queue_id: int) -> None:
        """The group's consumer offset: its lowest message not acknowledged."""
        cursor = self.pop.find(group, topic, queue_id)
        if cursor is None:
            return
        offset = cursor.lowest_unacked
        if self.ctx.offsets.query(group, topic, queue_id) != offset:
            self.ctx.offsets.commit(group, topic, queue_id, offset)

    async def _wait(self, group: str, topic: str, queue_ids: list[int], deadline: float) -> bool:
        """Wait for a message to arrive or one in flight to come due; False once the
        deadline passed."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        store = self.ctx.store
        fifo = self._is_fifo(group)
        due: list[float] = []
        checks: list[tuple[int, Callable[[], bool]]] = []
        for queue_id in queue_ids:
            cursor = self.pop.find(group, topic, queue_id)
            if cursor is None:
                continue
            visible = cursor.next_visible_ms()
            if visible is not None:
                due.append((visible - now_ms()) / 1000)

            def has_new(
                q: int = queue_id, at: int = cursor.next_offset, held: QueueCursor = cursor
            ) -> bool:
                # A FIFO queue with a message in flight is blocked: new messages behind it
                # wait (the ack wakes this wait, or the message's invisible time ends).
                if fifo and held.in_flight:
                    return False
                return store.max_offset(topic, q) > at

            checks.append((queue_id, has_new))
        timeout = min([remaining, *due]) if due else remaining
        if timeout <= 0:
            return True
        if not checks:
            await asyncio.sleep(min(timeout, 1.0))
            return time.monotonic() < deadline
        waits = [
            asyncio.ensure_future(self.ctx.waiters.wait((topic, q), check, timeout))
            for q, check in checks
        ]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
        return time.monotonic() < deadline or any(check() for _q, check in checks)

    def _handle(self, text: str) -> ReceiptHandle:
        handle = ReceiptHandle.decode(text)
        if handle is None:
            raise RequestError(pb.Code.INVALID_RECEIPT_HANDLE, "receipt handle is not valid")
        return handle

    async def AckMessage(
        self, request: spb.AckMessageRequest, context: Any
    ) -> spb.AckMessageResponse:
        try:
            config = self._topic(request.topic)
            group = self._group(request.group)
            if not request.entries:
                raise RequestError(pb.Code.BAD_REQUEST, "ack entries is empty")
        except RequestError as e:
            return spb.AckMessageResponse(status=status(e.code, e.message))
        results = []
        touched: set[int] = set()
        for entry in request.entries:
            handle = ReceiptHandle.decode(entry.receipt_handle)
            if (
                handle is not None
                and self.pop.ack(group, config.topic_name, handle) is AckStatus.OK
            ):
                touched.add(handle.queue_id)
                entry_status = status(pb.Code.OK)
            else:
                entry_status = status(
                    pb.Code.INVALID_RECEIPT_HANDLE,
                    "receipt handle is not valid, expired or already acknowledged",
                )
            results.append(
                spb.AckMessageResultEntry(
                    message_id=entry.message_id,
                    receipt_handle=entry.receipt_handle,
                    status=entry_status,
                )
            )
        for queue_id in touched:
            self._commit(group, config.topic_name, queue_id)
        await self._journal()  # an ack answered is an ack kept
        if touched and self._is_fifo(group):
            # A FIFO queue may be free now: receives waiting on it look again.
            self.ctx.waiters.arrived((config.topic_name, q) for q in touched)
        codes = {r.status.code for r in results}
        overall = status(pb.Code.MULTIPLE_RESULTS) if len(codes) > 1 else results[0].status
        return spb.AckMessageResponse(status=overall, entries=results)

    async def ChangeInvisibleDuration(
        self, request: spb.ChangeInvisibleDurationRequest, context: Any
    ) -> spb.ChangeInvisibleDurationResponse:
        try:
            config = self._topic(request.topic)
            group = self._group(request.group)
            invisible_ms = _duration_ms(request.invisible_duration)
            if invisible_ms < 0 or invisible_ms > MAX_INVISIBLE_MS:
                raise RequestError(
                    pb.Code.ILLEGAL_INVISIBLE_TIME,
                    f"the invisibleTime is out of range [0, {MAX_INVISIBLE_MS}]",
                )
            handle = self._handle(request.receipt_handle)
            if handle.expires_ms < now_ms():
                raise RequestError(pb.Code.INVALID_RECEIPT_HANDLE, "receipt handle is expired")
            renewed = self.pop.change_invisible(
                group, config.topic_name, handle, invisible_ms, now_ms()
            )
            if renewed is None:
                raise RequestError(
                    pb.Code.INVALID_RECEIPT_HANDLE,
                    "receipt handle is not valid, expired or already acknowledged",
                )
        except RequestError as e:
            return spb.ChangeInvisibleDurationResponse(status=status(e.code, e.message))
        await self._journal()
        return spb.ChangeInvisibleDurationResponse(
            status=status(pb.Code.OK), receipt_handle=renewed.encode()
        )

    async def ForwardMessageToDeadLetterQueue(
        self, request: spb.ForwardMessageToDeadLetterQueueRequest, context: Any
    ) -> spb.ForwardMessageToDeadLetterQueueResponse:
        """A push consumer gives a message up: it goes to ``%DLQ%<group>`` and leaves the
        group's messages in flight (acknowledged)."""
        try:
            config = self._topic(request.topic)
            group = self._group(request.group)
            handle = self._handle(request.receipt_handle)
            cursor = self.pop.find(group, config.topic_name, handle.queue_id)
            held = cursor.in_flight.get(handle.offset) if cursor is not None else None
            if cursor is None or held is None or held.pop_ms != handle.pop_ms:
                raise RequestError(
                    pb.Code.INVALID_RECEIPT_HANDLE,
                    "receipt handle is not valid, expired or already acknowledged",
                )
            ext = await self.ctx.run(self.ctx.store.look_message, held.commit_log_offset)
            if ext is None:
                raise RequestError(pb.Code.MESSAGE_NOT_FOUND, "the message is no longer stored")
            attempts = max(request.delivery_attempt, held.attempt)
            if not await self._to_dead_letter_queue(group, ext, attempts):
                raise RequestError(
                    pb.Code.INTERNAL_SERVER_ERROR, "storing the message in the DLQ failed"
                )
            if self.pop.ack(group, config.topic_name, handle) is AckStatus.OK:
                self._commit(group, config.topic_name, handle.queue_id)
                await self._journal()
        except RequestError as e:
            return spb.ForwardMessageToDeadLetterQueueResponse(status=status(e.code, e.message))
        return spb.ForwardMessageToDeadLetterQueueResponse(status=status(pb.Code.OK))

    # --- pull consumption: PullMessage and the offsets -----------------------------------
    # Not in RocketMQ 5.3.3's proxy (its MessagingService answers them UNIMPLEMENTED);
    # served as the proxy's pull activity of apache/rocketmq#6756 serves them: a pull of
    # one queue from an offset the client keeps, and the group's consumer offsets, on the
    # consume queues and the consumer offsets a remoting consumer uses.

    def _queue_id(self, queue: pb.MessageQueue, config: TopicConfig) -> int:
        queue_id = int(queue.id)
        count = max(config.read_queue_nums, config.write_queue_nums)
        if queue_id < 0 or queue_id >= count:
            raise RequestError(
                pb.Code.BAD_REQUEST,
                f"queueId[{queue_id}] is illegal, topic:[{config.topic_name}] "
                f"topicConfig.readQueueNums:[{config.read_queue_nums}]",
            )
        return queue_id

    async def PullMessage(
        self, request: spb.PullMessageRequest, context: Any
    ) -> AsyncIterator[spb.PullMessageResponse]:
        """Messages of one queue from ``offset`` (a long poll while there is none), then
        the offset to pull next; nothing is committed (the pull's sysflag has no commit)."""
        try:
            polling_ms = self._polling_ms(request, context)
            config = self._topic(request.message_queue.topic)
            group = self._group(request.group)
            if not config.readable:
                raise RequestError(
                    pb.Code.FORBIDDEN,
                    f"the topic[{config.topic_name}] pulling message is forbidden",
                )
            queue_id = self._queue_id(request.message_queue, config)
            subscription = self._subscription(request.filter_expression)
            offset = int(request.offset)
            if offset < 0:
                raise RequestError(pb.Code.ILLEGAL_OFFSET, f"offset {offset} is negative")
            batch = request.batch_size if request.batch_size > 0 else MAX_RECEIVE_BATCH
            batch = min(batch, MAX_RECEIVE_BATCH)
        except RequestError as e:
            yield spb.PullMessageResponse(status=status(e.code, e.message))
            return
        store, topic = self.ctx.store, config.topic_name
        deadline = time.monotonic() + polling_ms / 1000
        while True:
            result = await self.ctx.run(
                store.get_matching_messages, group, topic, queue_id, offset, batch, subscription
            )
            code = response_code(result, offset)
            remaining = deadline - time.monotonic()
            if code != ResponseCode.PULL_NOT_FOUND or remaining <= 0:
                break

            def has_new() -> bool:
                return store.max_offset(topic, queue_id) > offset

            # Held as a remoting pull with the suspend flag is: until a message comes.
            await self.ctx.waiters.wait((topic, queue_id), has_new, remaining)
        if result.status is GetStatus.FOUND and result.messages:
            yield spb.PullMessageResponse(status=status(pb.Code.OK))
            for ext in result.messages:
                yield spb.PullMessageResponse(message=convert.proto_message(ext))
        elif result.status is GetStatus.FOUND:
            yield spb.PullMessageResponse(
                status=status(pb.Code.MESSAGE_NOT_FOUND, "no match message")
            )
        elif code == ResponseCode.PULL_OFFSET_MOVED:
            yield spb.PullMessageResponse(status=status(pb.Code.ILLEGAL_OFFSET, "ILLEGAL_OFFSET"))
        else:
            yield spb.PullMessageResponse(
                status=status(pb.Code.MESSAGE_NOT_FOUND, "no new message")
            )
        yield spb.PullMessageResponse(next_offset=result.next_begin_offset)

    async def UpdateOffset(
        self, request: spb.UpdateOffsetRequest, context: Any
    ) -> spb.UpdateOffsetResponse:
        """Commit the group's consumer offset of one queue (UPDATE_CONSUMER_OFFSET)."""
        try:
            config = self._topic(request.message_queue.topic)
            group = self._group(request.group)
            queue_id = self._queue_id(request.message_queue, config)
            if request.offset < 0:
                raise RequestError(pb.Code.ILLEGAL_OFFSET, f"offset {request.offset} is negative")
        except RequestError as e:
            return spb.UpdateOffsetResponse(status=status(e.code, e.message))
        self.ctx.offsets.commit(group, config.topic_name, queue_id, int(request.offset))
        return spb.UpdateOffsetResponse(status=status(pb.Code.OK, "OK"))

    async def GetOffset(self, request: spb.GetOffsetRequest, context: Any) -> spb.GetOffsetResponse:
        """The group's consumer offset of one queue as QUERY_CONSUMER_OFFSET answers it
        (0 for a new group while the queue starts at 0); OFFSET_NOT_FOUND for none."""
        try:
            config = self._topic(request.message_queue.topic)
            group = self._group(request.group)
            queue_id = self._queue_id(request.message_queue, config)
        except RequestError as e:
            return spb.GetOffsetResponse(status=status(e.code, e.message))
        offset = await self.ctx.run(query_offset_sync, self.ctx, group, config.topic_name, queue_id)
        if offset is None:
            return spb.GetOffsetResponse(
                status=status(
                    pb.Code.OFFSET_NOT_FOUND,
                    "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first",
                )
            )
        return spb.GetOffsetResponse(status=status(pb.Code.OK, "OK"), offset=offset)

    async def QueryOffset(
        self, request: spb.QueryOffsetRequest, context: Any
    ) -> spb.QueryOffsetResponse:
        """A queue's first or next offset, or the first stored at or after a time (the
        remoting GET_MIN_OFFSET / GET_MAX_OFFSET / SEARCH_OFFSET_BY_TIMESTAMP)."""
        try:
            config = self._topic(request.message_queue.topic)
            queue_id = self._queue_id(request.message_queue, config)
            policy = request.query_offset_policy
            topic, store = config.topic_name, self.ctx.store
            if policy == pb.QueryOffsetPolicy.BEGINNING:
                offset = store.min_offset(topic, queue_id)
            elif policy == pb.QueryOffsetPolicy.END:
                offset = store.max_offset(topic, queue_id)
            elif policy == pb.QueryOffsetPolicy.TIMESTAMP:
                if not request.HasField("timestamp"):
                    raise RequestError(
                        pb.Code.BAD_REQUEST,
                        "timestamp is required when queryOffsetPolicy is TIMESTAMP",
                    )
                offset = await self.ctx.run(
                    store.offset_by_time,
                    topic,
                    queue_id,
                    request.timestamp.ToMilliseconds(),
                    Boundary.LOWER,
                )
            else:
                raise RequestError(pb.Code.BAD_REQUEST, "unrecognized queryOffsetPolicy")
        except RequestError as e:
            return spb.QueryOffsetResponse(status=status(e.code, e.message))
        return spb.QueryOffsetResponse(status=status(pb.Code.OK, "OK"), offset=offset)

    # --- recalling a timer message ----------------------------------------------------------

    async def RecallMessage(
        self, request: spb.RecallMessageRequest, context: Any
    ) -> spb.RecallMessageResponse:
        """Cancel a timer message before its time (RIP-43's recall): a delete unit for it
        into the timer wheel, as RocketMQ 5.3.3's RecallMessageProcessor stores one. Its
        refusals come through the proxy as INTERNAL_SERVER_ERROR with the broker's words
        (ResponseBuilder maps none of its codes)."""
        try:
            config = self._topic(request.topic)
            try:
                text = base64.urlsafe_b64decode(request.recall_handle.encode()).decode()
            except (binascii.Error, UnicodeDecodeError, ValueError):
                text = ""
            items = text.split(" ")
            if not request.recall_handle or items[0] != "v1" or len(items) < 5:
                raise RequestError(pb.Code.INTERNAL_SERVER_ERROR, "recall handle is invalid")
            topic, broker_name, timestamp, message_id = items[1:5]
            failed = pb.Code.INTERNAL_SERVER_ERROR
            if not self.ctx.config.recall_message_enable:
                raise RequestError(failed, "recall failed, operation is forbidden")
            if self.ctx.config.is_slave:
                raise RequestError(failed, "recall failed, broker service not available")
            if topic != config.topic_name:
                raise RequestError(failed, "recall failed, topic not match")
            if broker_name != self.ctx.broker_name:
                raise RequestError(failed, "recall failed, broker service not available")
            store_config = self.ctx.store.config
            try:
                left_ms = int(timestamp) - now_ms()
            except ValueError:
                left_ms = -1
            if left_ms <= 0 or left_ms >= store_config.timer_max_delay_sec * 1000:
                raise RequestError(failed, "recall failed, timestamp invalid")
            born = now_ms()
            delete = Message(
                topic=topic,
                body=b"0",
                queue_id=0,
                flag=0,
                sys_flag=0,
                properties={
                    props.TAGS: RECALL_MESSAGE_TAG,
                    props.TIMER_DEL_UNIQKEY: f"{topic}+{message_id}",
                    props.UNIQ_KEY: message_id,
                    props.TIMER_DELIVER_MS: timestamp,
                    props.BORN_TIMESTAMP: str(born),
                    # (its empty TRACE_CONTEXT left out: a record keeps no empty value)
                },
                born_timestamp=born,
                born_host=_peer_address(context.peer()),
                reconsume_times=0,
            )
            stored = timer_message_to_store(store_config, delete)
            if isinstance(stored, TimerRefusal):
                raise RequestError(failed, "recall failed, execute error")
            result = await self.ctx.put(stored, len(stored.body))
            if result.status not in (
                PutStatus.PUT_OK,
                PutStatus.FLUSH_DISK_TIMEOUT,
                PutStatus.FLUSH_SLAVE_TIMEOUT,
                PutStatus.SLAVE_NOT_AVAILABLE,
            ):
                why = result.reason or result.status.value
                log.warning("recall of %s: its delete unit was not stored: %s", message_id, why)
                raise RequestError(failed, "recall failed, execute error")
        except RequestError as e:
            return spb.RecallMessageResponse(status=status(e.code, e.message))
        return spb.RecallMessageResponse(status=status(pb.Code.OK, "OK"), message_id=message_id)

    async def EndTransaction(
        self, request: spb.EndTransactionRequest, context: Any
    ) -> spb.EndTransactionResponse:
        """Commit or roll back a half message this endpoint stored (the transaction
        service's end, as END_TRANSACTION does it)."""
        try:
            config = self._topic(request.topic)
            key = (config.topic_name, request.transaction_id)
            found = self._transactions.get(key)
            if found is None:
                raise RequestError(
                    pb.Code.INVALID_TRANSACTION_ID,
                    f"transaction id {request.transaction_id!r} names no open transaction "
                    f"of topic {config.topic_name}",
                )
            if request.resolution == pb.TransactionResolution.COMMIT:
                kind = COMMIT
            elif request.resolution == pb.TransactionResolution.ROLLBACK:
                kind = ROLLBACK
            else:  # unknown: left for the transaction check, as RocketMQ does
                return spb.EndTransactionResponse(status=status(pb.Code.OK))
            service = self.ctx.transactions
            if service is None:
                raise RequestError(
                    pb.Code.INTERNAL_SERVER_ERROR, "this broker has no transaction service running"
                )
            commit_log_offset, queue_offset = found
            end = EndRequest(
                producer_group=config.topic_name,  # the proxy's producer group
                tran_state_table_offset=queue_offset,
                commit_log_offset=commit_log_offset,
                commit_or_rollback=kind,
                from_transaction_check=request.source == pb.TransactionSource.SOURCE_SERVER_CHECK,
                msg_id=request.message_id,
                transaction_id=request.transaction_id,
            )
            outcome = await self.ctx.run(service.end, end)
            if outcome is not None and outcome.code is not EndCode.SUCCESS:
                raise RequestError(
                    pb.Code.INTERNAL_SERVER_ERROR, outcome.remark or outcome.code.name
                )
            self._transactions.pop(key, None)
        except RequestError as e:
            return spb.EndTransactionResponse(status=status(e.code, e.message))
        return spb.EndTransactionResponse(status=status(pb.Code.OK))
