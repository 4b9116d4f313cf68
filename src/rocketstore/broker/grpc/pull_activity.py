"""The gRPC endpoint's pull consumption: PullMessage and the consumer offset RPCs, on
the consume queues and consumer offsets a remoting consumer uses.

Layer: broker.grpc.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from rocketstore.broker.codes import ResponseCode
from rocketstore.broker.grpc import convert
from rocketstore.broker.grpc.convert import RequestError, status
from rocketstore.broker.grpc.protocol import rocketmq_v2_service_pb2 as spb
from rocketstore.broker.grpc.protocol import rocketmq_v2_types_pb2 as pb
from rocketstore.broker.grpc.service_core import (
    MAX_RECEIVE_BATCH,
    ServiceCore,
)
from rocketstore.broker.processors.offsets import query_offset_sync
from rocketstore.broker.processors.pull import response_code
from rocketstore.broker.topic_config import (
    TopicConfig,
)
from rocketstore.status import Boundary, GetStatus

log = logging.getLogger(__name__)


class PullActivity(ServiceCore):
    """PullMessage, UpdateOffset, GetOffset and QueryOffset."""

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
