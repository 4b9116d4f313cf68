"""QUERY_MESSAGE (12) by key or unique key, and VIEW_MESSAGE_BY_ID (33) by CommitLog offset.

Layer: broker processors. Both answer with raw CommitLog records, as a Java broker does.
"""

from __future__ import annotations

from rocketstore.broker.codes import ResponseCode
from rocketstore.broker.context import BrokerContext
from rocketstore.broker.remoting import RemotingCommand, ext_bool, ext_int, ext_str
from rocketstore.format.message import MessageExt
from rocketstore.java_ints import JAVA_LONG_MAX
from rocketstore.remoting.peer import Peer

UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"


def _records(ctx: BrokerContext, messages: list[MessageExt]) -> bytes:
    chunks = []
    for message in messages:
        raw = ctx.store.read_commitlog(message.commit_log_offset, message.size)
        if raw is not None:
            chunks.append(raw)
    return b"".join(chunks)


async def query_message(ctx: BrokerContext, cmd: RemotingCommand, conn: Peer) -> RemotingCommand:
    ext = cmd.ext_fields
    topic, key = ext_str(ext, "topic"), ext_str(ext, "key")
    max_num = ext_int(ext, "maxNum", ctx.store.config.default_query_max_num)
    begin = ext_int(ext, "beginTimestamp", 0)
    end = ext_int(ext, "endTimestamp", JAVA_LONG_MAX)
    unique = ext_bool(ext, UNIQUE_KEY_QUERY)

    def find() -> tuple[bytes, int, int]:
        if not topic or not key:
            # RocketMQ never indexes an empty key (nor a key of no topic): nothing to find.
            found = []
        elif unique:  # RocketMQ replaces maxNum with defaultQueryMaxNum for these
            found = ctx.store.query_by_unique_key(topic, key)
        elif max_num <= 0:
            # IndexFile.selectPhyOffset stops before its first hit when asked for none.
            found = []
        else:
            limit = min(max_num, ctx.store.config.max_msgs_num_batch)
            found = ctx.store.query_messages(topic, key, limit, begin, end)
        last_update, last_offset = ctx.store.index_last_update()
        return _records(ctx, found), last_update, last_offset

    body, last_update, last_offset = await ctx.run(find)
    ext_out = {
        "indexLastUpdateTimestamp": last_update,
        "indexLastUpdatePhyoffset": last_offset,
    }
    if not body:
        return cmd.response(
            ResponseCode.QUERY_NOT_FOUND,
            "can not find message, maybe time range not correct",
            ext_out,
        )
    return cmd.response(ResponseCode.SUCCESS, None, ext_out, body)


async def view_message_by_id(
    ctx: BrokerContext, cmd: RemotingCommand, conn: Peer
) -> RemotingCommand:
    offset = ext_int(cmd.ext_fields, "offset")
    message = await ctx.run(ctx.store.look_message, offset)
    raw = (
        ctx.store.read_commitlog(message.commit_log_offset, message.size)
        if message is not None
        else None
    )
    if raw is None:
        return cmd.response(
            ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {offset}"
        )
    return cmd.response(ResponseCode.SUCCESS, body=raw)
