"""Consumer offsets and queue offsets: QUERY_CONSUMER_OFFSET (14),
UPDATE_CONSUMER_OFFSET (15), SEARCH_OFFSET_BY_TIMESTAMP (29), GET_MAX_OFFSET (30),
GET_MIN_OFFSET (31), GET_EARLIEST_MSG_STORETIME (32).

Layer: broker processors.
"""

from __future__ import annotations

from rocketstore.broker.codes import ResponseCode
from rocketstore.broker.context import BrokerContext
from rocketstore.broker.remoting import RemotingCommand, ext_int, ext_str
from rocketstore.errors import ConfigError
from rocketstore.read_path import TOTAL_PHYSICAL_MEMORY
from rocketstore.remoting.peer import Peer
from rocketstore.status import Boundary


def _first_message_in_disk(ctx: BrokerContext, topic: str, queue_id: int) -> bool:
    """checkInDiskByConsumeOffset(topic, queue, 0): is message 0 far behind the CommitLog
    end (out of the memory RocketMQ assumes caches it)? False when there is none."""
    result = ctx.store.get_messages("", topic, queue_id, 0, 1)
    if not result.messages:
        return False
    memory = TOTAL_PHYSICAL_MEMORY * ctx.store.config.access_message_in_memory_max_ratio / 100
    behind = ctx.store.max_commit_log_offset() - result.messages[0].commit_log_offset
    return behind > memory


def query_offset_sync(ctx: BrokerContext, group: str, topic: str, queue_id: int) -> int | None:
    """The group's committed offset; else 0 when the queue still starts at 0 and its
    first message is in memory (a new group reads from the start); else None."""
    committed = ctx.offsets.query(group, topic, queue_id)
    if committed is not None and committed >= 0:
        return committed
    if ctx.store.min_offset(topic, queue_id) <= 0 and not _first_message_in_disk(
        ctx, topic, queue_id
    ):
        return 0
    return None


async def query_consumer_offset(
    ctx: BrokerContext, cmd: RemotingCommand, conn: Peer
) -> RemotingCommand:
    ext = cmd.ext_fields
    group, topic = ext_str(ext, "consumerGroup"), ext_str(ext, "topic")
    queue_id = ext_int(ext, "queueId")
    offset = await ctx.run(query_offset_sync, ctx, group, topic, queue_id)
    if offset is None:
        return cmd.response(
            ResponseCode.QUERY_NOT_FOUND,
            "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first",
        )
    return cmd.response(ResponseCode.SUCCESS, None, {"offset": offset})


async def update_consumer_offset(
    ctx: BrokerContext, cmd: RemotingCommand, conn: Peer
) -> RemotingCommand:
    ext = cmd.ext_fields
    ctx.offsets.commit(
        ext_str(ext, "consumerGroup"),
        ext_str(ext, "topic"),
        ext_int(ext, "queueId"),
        ext_int(ext, "commitOffset"),
    )
    return cmd.response(ResponseCode.SUCCESS)


async def get_max_offset(ctx: BrokerContext, cmd: RemotingCommand, conn: Peer) -> RemotingCommand:
    ext = cmd.ext_fields
    offset = ctx.store.max_offset(ext_str(ext, "topic"), ext_int(ext, "queueId"))
    return cmd.response(ResponseCode.SUCCESS, None, {"offset": offset})


async def get_min_offset(ctx: BrokerContext, cmd: RemotingCommand, conn: Peer) -> RemotingCommand:
    ext = cmd.ext_fields
    offset = ctx.store.min_offset(ext_str(ext, "topic"), ext_int(ext, "queueId"))
    return cmd.response(ResponseCode.SUCCESS, None, {"offset": offset})


async def search_offset_by_timestamp(
    ctx: BrokerContext, cmd: RemotingCommand, conn: Peer
) -> RemotingCommand:
    ext = cmd.ext_fields
    # 5.x clients say which entry they want (BoundaryType); 4.x ones get LOWER, as a 5.x
    # broker gives them.
    try:
        boundary = Boundary.parse(ext.get("boundaryType") or Boundary.LOWER)
    except ConfigError as e:
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"boundaryType: {e}")
    offset = await ctx.run(
        ctx.store.offset_by_time,
        ext_str(ext, "topic"),
        ext_int(ext, "queueId"),
        ext_int(ext, "timestamp"),
        boundary,
    )
    return cmd.response(ResponseCode.SUCCESS, None, {"offset": offset})


async def get_earliest_msg_store_time(
    ctx: BrokerContext, cmd: RemotingCommand, conn: Peer
) -> RemotingCommand:
    ext = cmd.ext_fields
    topic, queue_id = ext_str(ext, "topic"), ext_int(ext, "queueId")

    def earliest() -> int:
        return ctx.store.message_store_time(topic, queue_id, ctx.store.min_offset(topic, queue_id))

    timestamp = await ctx.run(earliest)
    return cmd.response(ResponseCode.SUCCESS, None, {"timestamp": timestamp})
