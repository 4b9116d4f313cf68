"""CONSUMER_SEND_MSG_BACK (36): a consumer returns a message it failed to consume.

Layer: broker processors. The message is stored again in ``%RETRY%<group>`` with a delay
level (3 + reconsumeTimes unless the client chose one), RETRY_TOPIC naming its first topic,
ORIGIN_MESSAGE_ID its first id and reconsumeTimes + 1; the schedule service brings it
back when due. Past the max reconsume times (or with a negative level) it goes to
``%DLQ%<group>`` instead.
"""

from __future__ import annotations

import random

from rocketstore.broker.codes import ResponseCode
from rocketstore.broker.context import BrokerContext
from rocketstore.broker.perm_name import PERM_READ, PERM_WRITE, is_writeable
from rocketstore.broker.processors.send import PUT_STATUS_CODES
from rocketstore.broker.remoting import RemotingCommand, ext_int, ext_str
from rocketstore.broker.topic_config import dlq_topic, retry_topic
from rocketstore.errors import ConfigError
from rocketstore.format import properties as props
from rocketstore.format.javahash import java_hashmap_ordered
from rocketstore.format.message import Message, MessageExt
from rocketstore.remoting.peer import Peer
from rocketstore.status import PutStatus

# The first retry delay level: 3 = 10 s with the default levels.
FIRST_RETRY_DELAY_LEVEL = 3


def retry_message(
    original: MessageExt,
    group: str,
    delay_level: int,
    max_reconsume_times: int,
    origin_msg_id: str | None,
    retry_queue_id: int = 0,
) -> tuple[Message, bool]:
    """The message to store for a send-back, and whether it goes to the DLQ."""
    properties = dict(original.properties)
    properties.setdefault(props.RETRY_TOPIC, original.topic)
    properties.pop(props.WAIT, None)
    to_dlq = original.reconsume_times >= max_reconsume_times or delay_level < 0
    queue_id = retry_queue_id
    if to_dlq:
        topic = dlq_topic(group)
        queue_id = 0
        properties.pop(props.DELAY, None)
    else:
        topic = retry_topic(group)
        if delay_level == 0:
            delay_level = FIRST_RETRY_DELAY_LEVEL + original.reconsume_times
        properties[props.DELAY] = str(delay_level)
    properties[props.ORIGIN_MESSAGE_ID] = (
        properties.get(props.ORIGIN_MESSAGE_ID) or origin_msg_id or original.msg_id
    )
    message = Message(
        topic=topic,
        body=original.body or b"",
        queue_id=queue_id,
        flag=original.flag,
        sys_flag=original.sys_flag,
        properties=java_hashmap_ordered(properties),
        born_timestamp=original.born_timestamp,
        born_host=original.born_host,
        reconsume_times=original.reconsume_times + 1,
    )
    return message, to_dlq


async def consumer_send_back(
    ctx: BrokerContext, cmd: RemotingCommand, conn: Peer
) -> RemotingCommand:
    ext = cmd.ext_fields
    offset = ext_int(ext, "offset")
    group = ext_str(ext, "group")
    delay_level = ext_int(ext, "delayLevel", 0)
    group_config = ctx.groups.find(group)
    if group_config is None:
        return cmd.response(
            ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {group}"
        )
    if not is_writeable(ctx.config.broker_permission):
        return cmd.response(
            ResponseCode.NO_PERMISSION,
            f"the broker[{ctx.broker_host}] sending message is forbidden",
        )
    if group_config.retry_queue_nums <= 0:
        return cmd.response(ResponseCode.SUCCESS)  # the group keeps no retries: dropped
    # Clients since 3.4.9 send their own limit; the group's retryMaxTimes is for older ones.
    max_times = ext_int(ext, "maxReconsumeTimes", group_config.retry_max_times)
    original = await ctx.run(ctx.store.look_message, offset)
    if original is None:
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {offset}")
    message, to_dlq = retry_message(
        original,
        group,
        delay_level,
        max_times,
        ext.get("originMsgId") or None,
        random.randrange(group_config.retry_queue_nums),
    )
    if message.topic not in ctx.topics:
        perm = PERM_WRITE if to_dlq else PERM_READ | PERM_WRITE
        queues = 1 if to_dlq else group_config.retry_queue_nums
        try:
            ctx.topics.create_on_send_back(message.topic, queues, perm)
        except ConfigError as e:  # a group name no topic name may hold
            return cmd.response(
                ResponseCode.SYSTEM_ERROR, f"consumer group {group!r} has no valid retry topic: {e}"
            )
        ctx.topics_changed()
    result = await ctx.put(message, len(message.body))
    if result.status is PutStatus.PUT_OK:
        # incSendBackNums: keyed by the topic the message was consumed from
        back_topic = original.properties.get("RETRY_TOPIC") or original.topic
        ctx.stats.sent_back(group, back_topic, to_dlq)
        return cmd.response(ResponseCode.SUCCESS)
    code = PUT_STATUS_CODES.get(result.status, ResponseCode.SYSTEM_ERROR)
    return cmd.response(code, result.reason or result.status.value)
