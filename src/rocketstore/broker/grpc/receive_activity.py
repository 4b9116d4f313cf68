"""The gRPC endpoint's POP consumption, as the proxy's ReceiveMessageActivity,
AckMessageActivity, ChangeInvisibleDurationActivity and ForwardMessageToDeadLetterQueue-
Activity answer: receives with an invisible time (long polling on the broker's held-pull
table), acks, redelivery with the attempt counted, the DLQ past the group's attempts, and
FIFO groups one message at a time.

Layer: broker.grpc.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import random
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from rocketstore.broker.grpc import convert
from rocketstore.broker.grpc.convert import RequestError, status
from rocketstore.broker.grpc.pop import AckStatus, InFlight, QueueCursor, ReceiptHandle
from rocketstore.broker.grpc.protocol import rocketmq_v2_service_pb2 as spb
from rocketstore.broker.grpc.protocol import rocketmq_v2_types_pb2 as pb
from rocketstore.broker.grpc.service_core import (
    AUTO_RENEW_INVISIBLE_MS,
    MAX_INVISIBLE_MS,
    MAX_RECEIVE_BATCH,
    ServiceCore,
    client_id,
    duration_ms,
    now_ms,
)
from rocketstore.broker.perm_name import PERM_WRITE
from rocketstore.broker.processors.send_back import retry_message
from rocketstore.broker.topic_config import (
    dlq_topic,
)
from rocketstore.crashpoints import AFTER_DLQ_PUT_BEFORE_JOURNAL, crash_point
from rocketstore.format import properties as props
from rocketstore.format.message import MessageExt
from rocketstore.format.subscription import Subscription
from rocketstore.status import GetStatus

log = logging.getLogger(__name__)


class ReceiveActivity(ServiceCore):
    """QueryAssignment, ReceiveMessage, AckMessage, ChangeInvisibleDuration and
    ForwardMessageToDeadLetterQueue."""

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
            invisible_ms = duration_ms(request.invisible_duration)
            renew_client = ""
            if request.auto_renew:
                # A PushConsumer's receive: the proxy's default invisible time
                # (enableProxyAutoRenew), renewed while the client is connected.
                invisible_ms = AUTO_RENEW_INVISIBLE_MS
                renew_client = client_id(context)
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
                line = self._journal_write()
            # Before the answer goes out, but outside the lock: the next receive of the
            # group pops meanwhile, and its line shares this fsync or the next.
            await self._journal_synced(line)
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
                    if await self._to_dead_letter_queue(group, ext, held.attempt, cursor, held):
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

    def _max_attempts(self, group: str) -> int:
        """Deliveries a group's message gets: its retryMaxTimes + 1, as the settings the
        client was given say."""
        config = self.ctx.groups.get(group)
        return (config.retry_max_times if config is not None else 16) + 1

    async def _to_dead_letter_queue(
        self, group: str, ext: MessageExt, attempts: int, cursor: QueueCursor, held: InFlight
    ) -> bool:
        """Store ``ext`` in ``%DLQ%<group>`` (created write-only with one queue, as a
        send-back creates it); whether it was stored. The move is journaled (and synced)
        before the put: a crash after the put and before the caller's drop is journaled
        leaves the restart a place to look for the copy instead of storing it again
        (:meth:`settle_dlq_moves`)."""
        original = dataclasses.replace(ext, reconsume_times=max(attempts - 1, 0))
        message, _to_dlq = retry_message(original, group, -1, 0, ext.properties.get(props.UNIQ_KEY))
        topic = dlq_topic(group)
        if topic not in self.ctx.topics:
            self.ctx.topics.create_on_send_back(topic, 1, PERM_WRITE)
            self.ctx.topics_changed()
        dlq_from = await self.ctx.run(self.ctx.store.max_offset, topic, 0)
        self.pop.begin_dlq_move(cursor, held.offset, dlq_from)
        await self._journal()
        result = await self.ctx.put(message, len(message.body))
        crash_point(AFTER_DLQ_PUT_BEFORE_JOURNAL)
        # Stored with a flush or replication wait that fell short is stored: keeping the
        # message in flight would forward it again and store it twice in the DLQ.
        if not result.status.stored:
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

    async def settle_dlq_moves(self) -> int:
        """After a restart: each move to %DLQ% journaled as begun and never as done is
        looked for in the DLQ from where the queue ended when it began (a copy with the
        message's ORIGIN_MESSAGE_ID, body and born time). Found: the message leaves the
        group's flight, as the move would have ended; not found: it stays, and moves
        again when it comes due. So a crash between the put and its drop stores it in
        the DLQ once, not twice. How many were found."""
        found = 0
        store = self.ctx.store
        for cursor, held in self.pop.dlq_moves():
            group = cursor.key[0]
            ext = await self.ctx.run(store.look_message, held.commit_log_offset)
            origin = None
            if ext is not None:
                origin = (
                    ext.properties.get(props.ORIGIN_MESSAGE_ID)
                    or ext.properties.get(props.UNIQ_KEY)
                    or ext.msg_id
                )
            offset, end = held.dlq_from, await self.ctx.run(store.max_offset, dlq_topic(group), 0)
            stored = False
            while ext is not None and not stored and offset < end:
                result = await self.ctx.run(
                    store.get_messages, group, dlq_topic(group), 0, offset, 32
                )
                if result.status is not GetStatus.FOUND:
                    break
                stored = any(
                    m.properties.get(props.ORIGIN_MESSAGE_ID) == origin
                    and m.born_timestamp == ext.born_timestamp
                    and m.body == ext.body
                    for m in result.messages
                )
                offset = result.next_begin_offset
            held.dlq_from = -1
            if stored:
                self.pop.drop(cursor, held.offset)
                self._commit(*cursor.key)
                found += 1
        await self._journal()
        return found

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
            invisible_ms = duration_ms(request.invisible_duration)
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
            if not await self._to_dead_letter_queue(group, ext, attempts, cursor, held):
                raise RequestError(
                    pb.Code.INTERNAL_SERVER_ERROR, "storing the message in the DLQ failed"
                )
            if self.pop.ack(group, config.topic_name, handle) is AckStatus.OK:
                self._commit(group, config.topic_name, handle.queue_id)
                await self._journal()
        except RequestError as e:
            return spb.ForwardMessageToDeadLetterQueueResponse(status=status(e.code, e.message))
        return spb.ForwardMessageToDeadLetterQueueResponse(status=status(pb.Code.OK))
