"""Requests mqadmin has the broker pass on to one consumer and answers with the consumer's
reply: GET_CONSUMER_RUNNING_INFO (307, consumerStatus, consumerProgress -s) and
CONSUME_MESSAGE_DIRECTLY (309, queryMsgById/queryMsgByUniqueKey -g -d).

Layer: broker processors. RocketMQ's AdminBrokerProcessor.callConsumer: the request's
fields (and body) go to the client's connection as a new request, and the client's answer
is the answer, waited for up to 10 s (Broker2Client.callClient). A client id no remoting
consumer of the group has goes to ``ctx.client_call_fallback`` (the gRPC endpoint's
consumers, asked over their telemetry streams as RocketMQ 5's proxy asks them).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Protocol, runtime_checkable

from rocketstore.broker.codes import RequestCode, ResponseCode
from rocketstore.broker.context import BrokerContext, ClientAnswer
from rocketstore.broker.remoting import FLAG_RESPONSE, RemotingCommand, ext_str
from rocketstore.errors import CorruptDataError, StoreError
from rocketstore.format.message_id import decode_offset_msg_id
from rocketstore.remoting.peer import Peer

# Broker2Client.callClient's timeout.
CALL_CLIENT_TIMEOUT_S = 10.0


@runtime_checkable
class ClientCaller(Protocol):
    """A client connection the broker can send a request on and await the answer."""

    async def request(self, cmd: RemotingCommand, timeout_s: float) -> RemotingCommand: ...


async def _call_consumer(
    ctx: BrokerContext, code: int, cmd: RemotingCommand, ext: dict[str, str], body: bytes
) -> RemotingCommand:
    group, client_id = ext_str(ext, "consumerGroup"), ext_str(ext, "clientId")
    info = ctx.clients.consumer_group(group)
    channel = info.clients.get(client_id) if info is not None else None
    if channel is None or not isinstance(channel.connection, ClientCaller):
        fallback = ctx.client_call_fallback
        asked = fallback(code, group, client_id, ext, body) if fallback is not None else None
        if asked is None:
            return cmd.response(
                ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online"
            )
        return await _relayed(cmd, group, client_id, asked)
    request = RemotingCommand(code, ext_fields=dict(ext), body=body)
    try:
        answer = await channel.connection.request(request, CALL_CLIENT_TIMEOUT_S)
    except TimeoutError:
        return cmd.response(
            ResponseCode.CONSUME_MSG_TIMEOUT,
            f"consumer <{group}> <{client_id}> Timeout: no answer in {CALL_CLIENT_TIMEOUT_S:g} s",
        )
    except (ConnectionError, OSError) as e:
        return cmd.response(
            ResponseCode.SYSTEM_ERROR, f"invoke consumer <{group}> <{client_id}> Exception: {e}"
        )
    # The consumer's answer, as it gave it (the framework sets the opaque mqadmin awaits).
    return RemotingCommand(
        answer.code,
        opaque=cmd.opaque,
        flag=FLAG_RESPONSE,
        remark=answer.remark,
        ext_fields=dict(answer.ext_fields),
        body=answer.body,
    )


async def _relayed(
    cmd: RemotingCommand, group: str, client_id: str, asked: Awaitable[ClientAnswer]
) -> RemotingCommand:
    """The answer of a client asked through the fallback, within the same 10 s."""
    try:
        answer = await asyncio.wait_for(asked, CALL_CLIENT_TIMEOUT_S)
    except TimeoutError:
        return cmd.response(
            ResponseCode.CONSUME_MSG_TIMEOUT,
            f"consumer <{group}> <{client_id}> Timeout: no answer in {CALL_CLIENT_TIMEOUT_S:g} s",
        )
    except (ConnectionError, OSError, StoreError) as e:
        return cmd.response(
            ResponseCode.SYSTEM_ERROR, f"invoke consumer <{group}> <{client_id}> Exception: {e}"
        )
    return RemotingCommand(
        answer.code, opaque=cmd.opaque, flag=FLAG_RESPONSE, remark=answer.remark, body=answer.body
    )


async def get_consumer_running_info(
    ctx: BrokerContext, cmd: RemotingCommand, conn: Peer
) -> RemotingCommand:
    return await _call_consumer(
        ctx, RequestCode.GET_CONSUMER_RUNNING_INFO, cmd, dict(cmd.ext_fields), cmd.body
    )


async def consume_message_directly(
    ctx: BrokerContext, cmd: RemotingCommand, conn: Peer
) -> RemotingCommand:
    """The record the request's msgId (an offsetMsgId) names goes along as the body, and
    the broker's name as ``brokerName``."""
    ext = {**cmd.ext_fields, "brokerName": ctx.broker_name}
    body = b""
    try:
        _host, offset = decode_offset_msg_id(ext_str(ext, "msgId"))
    except CorruptDataError:
        offset = -1  # RocketMQ goes on without a body too
    if offset >= 0:
        message = await ctx.run(ctx.store.look_message, offset)
        if message is not None:
            raw = await ctx.run(ctx.store.read_commitlog, offset, message.size)
            body = raw or b""
    return await _call_consumer(ctx, RequestCode.CONSUME_MESSAGE_DIRECTLY, cmd, ext, body)
