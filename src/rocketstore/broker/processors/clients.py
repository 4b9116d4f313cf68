"""Client membership: HEART_BEAT (34), UNREGISTER_CLIENT (35),
GET_CONSUMER_LIST_BY_GROUP (38), CHECK_CLIENT_CONFIG (46).

Layer: broker processors. A consumer's heartbeat registers it in its group and creates the
group's ``%RETRY%`` topic; a change of membership is pushed to the group's clients
(NOTIFY_CONSUMER_IDS_CHANGED) so they rebalance at once.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rocketstore.broker.broker_config import parse_fastjson
from rocketstore.broker.codes import ResponseCode
from rocketstore.broker.context import BrokerContext
from rocketstore.broker.remoting import RemotingCommand, RequestFieldError, ext_str
from rocketstore.broker.topic_config import retry_topic
from rocketstore.errors import ConfigError
from rocketstore.format.selector import TAG
from rocketstore.format.subscription import build_subscription
from rocketstore.remoting.peer import Peer

log = logging.getLogger(__name__)


# Bodies above this are parsed on a worker thread, one at a time: a 1 MiB heartbeat takes
# tens of milliseconds to parse, which on the event loop every other connection would wait.
INLINE_PARSE_MAX_BYTES = 64 * 1024
_PARSER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rocketstore-heartbeat")
# The worker hands the GIL to the event loop after this many JSON objects. json.loads never
# lets go of it by itself, so a worker parsing 1 MiB heartbeats back to back held a
# producer to 126 msg/s (234 with a Python call per object, 1,011 with this; 1,850 alone).
_OBJECTS_PER_YIELD = 8
_objects = itertools.count()


def _yield_gil(obj: dict[str, Any]) -> dict[str, Any]:
    if next(_objects) % _OBJECTS_PER_YIELD == 0:
        time.sleep(0)
    return obj


def parse_heartbeat(body: bytes, *, off_loop: bool = False) -> dict[str, Any]:
    """The heartbeat's JSON; ``off_loop``: parsed so that the event loop's thread gets the
    GIL between objects."""
    try:
        data = parse_fastjson(body.decode("utf-8"), _yield_gil if off_loop else None)
    except (UnicodeDecodeError, ValueError) as e:
        raise RequestFieldError(f"heartbeat body is not JSON: {e}") from e
    if not isinstance(data, dict) or not isinstance(data.get("clientID"), str):
        raise RequestFieldError("heartbeat body has no clientID")
    return data


def _groups(data: dict[str, Any], key: str) -> list[dict[str, Any]]:
    items = data.get(key)
    if items is None:
        return []
    if not isinstance(items, list):
        # fastjson cannot read a Set<ConsumerData> out of anything but an array either.
        raise RequestFieldError(f"heartbeat {key} must be an array, got {type(items).__name__}")
    return [g for g in items if isinstance(g, dict) and isinstance(g.get("groupName"), str)]


def _channel_facts(cmd: RemotingCommand, conn: Peer) -> dict[str, Any]:
    """What the admin requests show of a client's connection (ClientChannelInfo)."""
    return {"addr": conn.peer, "language": cmd.language, "version": cmd.version}


async def heart_beat(ctx: BrokerContext, cmd: RemotingCommand, conn: Peer) -> RemotingCommand:
    limit = ctx.config.heartbeat_max_body_bytes
    if len(cmd.body) > limit:
        log.warning("heartbeat of %d bytes from %s refused", len(cmd.body), conn.peer)
        return cmd.response(
            ResponseCode.SYSTEM_ERROR,
            f"heartbeat body of {len(cmd.body)} bytes is larger than this broker's "
            f"heartbeatMaxBodyBytes {limit}",
        )
    if len(cmd.body) > INLINE_PARSE_MAX_BYTES:
        loop = asyncio.get_running_loop()
        data = await loop.run_in_executor(
            _PARSER, functools.partial(parse_heartbeat, cmd.body, off_loop=True)
        )
    else:
        data = parse_heartbeat(cmd.body)
    client_id = data["clientID"]
    for consumer in _groups(data, "consumerDataSet"):
        group = consumer["groupName"]
        group_config = ctx.groups.find(group)
        if group_config is not None and retry_topic(group) not in ctx.topics:
            ctx.topics.create_retry_topic(group, group_config.retry_queue_nums)
            ctx.topics_changed()
        if ctx.clients.register_consumer(
            group, client_id, conn, consumer, **_channel_facts(cmd, conn)
        ):
            log.info("consumer %s joined group %s from %s", client_id, group, conn.peer)
            if group_config is None or group_config.notify_consumer_ids_changed_enable:
                ctx.notify_consumers_changed(group)
    for producer in _groups(data, "producerDataSet"):
        ctx.clients.register_producer(
            producer["groupName"], client_id, conn, **_channel_facts(cmd, conn)
        )
    return cmd.response(ResponseCode.SUCCESS)


async def unregister_client(
    ctx: BrokerContext, cmd: RemotingCommand, conn: Peer
) -> RemotingCommand:
    ext = cmd.ext_fields
    client_id = ext_str(ext, "clientID")
    group = ext.get("consumerGroup", "")
    if ctx.clients.unregister(
        client_id, consumer_group=group, producer_group=ext.get("producerGroup", "")
    ):
        log.info("consumer %s left group %s", client_id, group)
        ctx.notify_consumers_changed(group)
    return cmd.response(ResponseCode.SUCCESS)


async def get_consumer_list(
    ctx: BrokerContext, cmd: RemotingCommand, conn: Peer
) -> RemotingCommand:
    group = ext_str(cmd.ext_fields, "consumerGroup")
    ids = ctx.clients.consumer_ids(group)
    if not ids:
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {group}")
    body = json.dumps({"consumerIdList": ids}, separators=(",", ":")).encode("utf-8")
    return cmd.response(ResponseCode.SUCCESS, body=body)


async def check_client_config(
    ctx: BrokerContext, cmd: RemotingCommand, conn: Peer
) -> RemotingCommand:
    """A Java consumer's check, when it starts, that the broker can serve its subscription
    (``{clientId, group, subscriptionData}``): a TAG one always; a SQL92 one only with
    enablePropertyFilter, and only if the selector parses."""
    if not cmd.body:
        return cmd.response(ResponseCode.SUCCESS)
    try:
        data = parse_fastjson(cmd.body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise RequestFieldError(f"check client config body is not JSON: {e}") from e
    subscription = data.get("subscriptionData") if isinstance(data, dict) else None
    if not isinstance(subscription, dict):
        return cmd.response(ResponseCode.SUCCESS)
    kind = subscription.get("expressionType")
    if kind in (None, "", TAG):
        return cmd.response(ResponseCode.SUCCESS)
    if not ctx.config.enable_property_filter:
        return cmd.response(
            ResponseCode.SYSTEM_ERROR,
            f"The broker does not support consumer to filter message by {kind}",
        )
    expression = subscription.get("subString")
    try:
        build_subscription(expression if isinstance(expression, str) else None, str(kind))
    except ConfigError as e:
        log.info("client %s: subscription %r refused: %s", conn.peer, expression, e)
        return cmd.response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(e))
    return cmd.response(ResponseCode.SUCCESS)
