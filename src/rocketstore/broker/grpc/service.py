"""apache.rocketmq.v2.MessagingService over the broker's state: routes, sends, and POP
receives with acks, as a RocketMQ 5 proxy answers them.

Layer: broker.grpc. Runs on the broker's event loop (grpc.aio), beside the remoting
server, with the same BrokerContext: a gRPC send is put exactly as a remoting send is
(``BrokerContext.put``), and long-polling receives wait on the same held-pull table.
Refusals carry the proxy's status codes and words (GrpcValidator, the activities).
Routes, heartbeats, settings and telemetry are here; sends in send_activity, POP in
receive_activity, pulls and offsets in pull_activity, their shared state and checks in
service_core.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

from rocketstore.broker.codes import RequestCode
from rocketstore.broker.context import ClientAnswer, OtherConsumer
from rocketstore.broker.grpc import convert, relay
from rocketstore.broker.grpc.convert import RequestError, status
from rocketstore.broker.grpc.protocol import rocketmq_v2_service_pb2 as spb
from rocketstore.broker.grpc.protocol import rocketmq_v2_service_pb2_grpc as spb_grpc
from rocketstore.broker.grpc.protocol import rocketmq_v2_types_pb2 as pb
from rocketstore.broker.grpc.pull_activity import PullActivity
from rocketstore.broker.grpc.receive_activity import ReceiveActivity
from rocketstore.broker.grpc.send_activity import SendActivity
from rocketstore.broker.grpc.service_core import (
    AUTO_RENEW_INVISIBLE_MS,
    LANGUAGE_HEADER,
    MAX_RECEIVE_BATCH,
    PRODUCER_MAX_ATTEMPTS,
    PROXY_CLIENT_VERSION,
    RENEW_AHEAD_MS,
    RENEW_MAX_MS,
    RENEW_PERIOD_MS,
    TelemetryStream,
    client_id,
    header,
    now_ms,
    peer_address,
    proto_duration,
)
from rocketstore.broker.transaction_service import CheckRequest
from rocketstore.errors import StoreError
from rocketstore.format.record import decode_message
from rocketstore.format.selector import SQL92, TAG
from rocketstore.format.subscription import build_subscription

__all__ = ["RENEW_PERIOD_MS", "MessagingService"]

log = logging.getLogger(__name__)


class MessagingService(
    SendActivity, ReceiveActivity, PullActivity, spb_grpc.MessagingServiceServicer
):
    """The RPCs served (routes, heartbeats, settings and telemetry here; the rest in the
    activities); any other answers UNIMPLEMENTED (the generated base class)."""

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
            answer.backoff_policy.customized_backoff.next.extend(
                proto_duration(ms) for ms in levels
            )
            if not answer.subscription.HasField("receive_batch_size"):
                answer.subscription.receive_batch_size = MAX_RECEIVE_BATCH
            # A FIFO group (consumeMessageOrderly), as GrpcClientSettingsManager says.
            answer.subscription.fifo = config is not None and config.consume_message_orderly
        else:
            answer.backoff_policy.Clear()
            answer.backoff_policy.max_attempts = PRODUCER_MAX_ATTEMPTS
            backoff = answer.backoff_policy.exponential_backoff
            backoff.initial.CopyFrom(proto_duration(10))
            backoff.max.CopyFrom(proto_duration(1000))
            backoff.multiplier = 2.0
            answer.publishing.max_body_size = self.ctx.store.config.max_message_size
            answer.publishing.validate_message_type = False
        return answer

    async def Telemetry(
        self, request_iterator: AsyncIterator[spb.TelemetryCommand], context: Any
    ) -> AsyncIterator[spb.TelemetryCommand]:
        """The settings exchange (each settings command answered with the merged
        settings) and the server's own commands to the client: orphaned-transaction
        recovery for the topics a producer publishes, and the admin's thread-stack and
        verify requests (:meth:`ask_client`), whose answers come back here. Anything
        else a client sends is dropped, as the proxy drops it."""
        client = client_id(context)
        stream = TelemetryStream(
            client=client,
            address=self.peer_of(peer_address(context.peer())),
            language=header(context, LANGUAGE_HEADER) or "OTHER",
        )
        self._streams.append(stream)
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
                        elif settings.WhichOneof("pub_sub") == "subscription":
                            stream.group = settings.subscription.group.name
                            stream.consume_type = (
                                "CONSUME_ACTIVELY"
                                if settings.client_type == pb.ClientType.SIMPLE_CONSUMER
                                else "CONSUME_PASSIVELY"
                            )
                            stream.subscriptions = _subscription_beans(settings.subscription)
                        answer = self._settings_answer(settings)
                        stream.outbox.put_nowait(
                            spb.TelemetryCommand(status=status(pb.Code.OK), settings=answer)
                        )
                    elif kind == "thread_stack_trace":
                        trace = command.thread_stack_trace
                        stack = relay.thread_stack_answer(
                            command.status.code, trace.thread_stack_trace
                        )
                        self.relays.resolve(trace.nonce, stack)
                    elif kind == "verify_message_result":
                        result = command.verify_message_result
                        result_code = command.status.code
                        self.relays.resolve(result.nonce, relay.verify_answer(result_code))
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

    def consumers(self, group: str) -> list[OtherConsumer]:
        """The group's consumers with a telemetry stream open, as the proxy registers
        them in the broker's consumer table (what mqadmin's consumerConnection lists)."""
        found: dict[str, OtherConsumer] = {}
        for stream in self._streams:
            if stream.group == group and stream.client:
                found[stream.client] = OtherConsumer(
                    stream.client,
                    stream.address,
                    stream.language,
                    PROXY_CLIENT_VERSION,
                    stream.consume_type,
                    stream.subscriptions,
                )
        return list(found.values())

    def ask_client(
        self, code: int, group: str, client: str, fields: dict[str, str], body: bytes
    ) -> asyncio.Future[ClientAnswer] | None:
        """An admin's GET_CONSUMER_RUNNING_INFO or CONSUME_MESSAGE_DIRECTLY for consumer
        ``client`` of ``group``, sent over its telemetry stream as the proxy sends it
        (GrpcClientChannel): the future of its answer, None when no such consumer has a
        stream open. Without jstackEnable the proxy sends nothing, and the broker's own
        wait runs out; an unanswered command is answered SYSTEM_BUSY after the relay
        timeout."""
        found = [s for s in self._streams if s.client == client and s.group == group]
        if not found or code not in (
            RequestCode.GET_CONSUMER_RUNNING_INFO,
            RequestCode.CONSUME_MESSAGE_DIRECTLY,
        ):
            return None
        stream = found[-1]
        loop = asyncio.get_running_loop()
        if code == RequestCode.GET_CONSUMER_RUNNING_INFO:
            if fields.get("jstackEnable") != "true":
                return loop.create_future()
            nonce, answer = self.relays.add()
            command = spb.TelemetryCommand(
                print_thread_stack_trace_command=spb.PrintThreadStackTraceCommand(nonce=nonce)
            )
        else:
            try:
                message = decode_message(body)
            except StoreError as e:  # the proxy's decode fails the write: an exception
                failed: asyncio.Future[ClientAnswer] = loop.create_future()
                failed.set_exception(e)
                return failed
            nonce, answer = self.relays.add()
            command = spb.TelemetryCommand(
                verify_message_command=spb.VerifyMessageCommand(
                    nonce=nonce, message=convert.proto_message(message)
                )
            )
        stream.outbox.put_nowait(command)
        return answer

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


def _subscription_beans(subscription: pb.Subscription) -> dict[str, dict[str, Any]]:
    """A consumer's subscriptions as the SubscriptionData beans the proxy builds
    (FilterAPI.build), by topic; an expression the filter refuses is left out."""
    beans: dict[str, dict[str, Any]] = {}
    now = now_ms()
    for entry in subscription.subscriptions:
        sql = entry.expression.type == pb.FilterType.SQL
        expression = entry.expression.expression.strip() or "*"
        try:
            parsed = build_subscription(expression, SQL92 if sql else TAG)
        except Exception:  # the selector's parse errors, whatever their class
            continue
        beans[entry.topic.name] = {
            "classFilterMode": False,
            "codeSet": set(parsed.codes),
            "expressionType": parsed.expression_type,
            "subString": expression,
            "subVersion": now,
            "tagsSet": set(parsed.tags),
            "topic": entry.topic.name,
        }
    return beans
