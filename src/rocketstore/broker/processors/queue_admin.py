"""What mqadmin asks a broker about its consume queues: QUERY_CONSUME_QUEUE (321, queryCq)
CLEAN_EXPIRED_CONSUMEQUEUE (306, cleanExpiredCQ) and DELETE_EXPIRED_COMMITLOG (329,
deleteExpiredCommitLog).

Layer: broker processors. The body is RocketMQ 4.9.8's QueryConsumeQueueResponseBody as
AdminBrokerProcessor writes it with fastjson (properties by name, nulls left out).
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

from rocketstore.broker.codes import ResponseCode
from rocketstore.broker.context import BrokerContext
from rocketstore.broker.fastjson_body import dumps
from rocketstore.broker.remoting import RemotingCommand, ext_int, ext_str
from rocketstore.errors import ConfigError
from rocketstore.format.cq_ext import bitmap_text, ext_unit_json, is_ext_address
from rocketstore.format.queue_unit import CQ_UNIT_SIZE, decode_units
from rocketstore.format.selector import TAG
from rocketstore.format.subscription import Subscription, build_subscription
from rocketstore.remoting.peer import Peer

log = logging.getLogger(__name__)


def _group_filter(
    ctx: BrokerContext, group: str, topic: str
) -> tuple[dict[str, Any], Subscription | None]:
    """The body's subscriptionData and filterData for ``-g group``, and the subscription
    the units are evaluated with (None: the group does not consume the topic here)."""
    data = ctx.clients.subscription(group, topic)
    if data is None:
        return {"filterData": f"{group}@{topic} is not online!"}, None
    expression = data.get("subString")
    kind = str(data.get("expressionType") or TAG)
    fields: dict[str, Any] = {"subscriptionData": data}
    if kind.upper() == TAG:
        # ConsumerFilterManager keeps filter data for SQL92 selectors only:
        # JSON.toJSONString(null, true) is the text "null".
        fields["filterData"] = "null"
    else:
        filter_data = {
            "clientVersion": data.get("subVersion", 0),
            "consumerGroup": group,
            "expression": expression,
            "expressionType": kind,
            "topic": topic,
        }
        fields["filterData"] = json.dumps(filter_data, indent="\t", ensure_ascii=False)
    try:
        return fields, build_subscription(expression if isinstance(expression, str) else None, kind)
    except ConfigError:
        return fields, None


def _unit_data(
    ctx: BrokerContext,
    topic: str,
    queue_id: int,
    unit: tuple[int, int, int],
    subscription: Subscription | None,
) -> dict[str, Any]:
    """One ConsumeQueueData: the unit's fields, and for a ConsumeQueueExt address the
    extension unit (or why it is missing) and, with a group, whether its filter passes."""
    physical, size, tags_code = unit
    data: dict[str, Any] = {
        "eval": False,
        "physicOffset": physical,
        "physicSize": size,
        "tagsCode": tags_code,
    }
    if not is_ext_address(tags_code):
        return data
    ext = ctx.store.ext_unit(topic, queue_id, tags_code)
    if ext is None:
        data["msg"] = f"Cq extend not exist!addr: {tags_code}"
        return data
    data["extendDataJson"] = ext_unit_json(ext)
    if ext.bitmap:
        data["bitMap"] = bitmap_text(ext.bitmap)
    if subscription is not None:
        # The tag check on the extension's tagsCode; a SQL92 selector's bitmap is not
        # kept here, so the record decides (the consume-queue stage passes).
        data["eval"] = subscription.selector is not None or subscription.match_code(ext.tags_code)
    return data


async def clean_expired_consume_queue(
    ctx: BrokerContext, cmd: RemotingCommand, conn: Peer
) -> RemotingCommand:
    """Delete the queues whose messages are all gone from the CommitLog (the store's
    cleanExpiredConsumerQueue); RocketMQ answers success, and so does this."""
    removed = await ctx.run(ctx.store.clean_expired_queues)
    log_deleted_queues("cleanExpiredCQ", conn, removed)
    return cmd.response(ResponseCode.SUCCESS)


def log_deleted_queues(command: str, conn: Peer, removed: list[tuple[str, int]]) -> None:
    log.info(
        "%s from %s: %d consume queues deleted%s",
        command,
        conn.peer,
        len(removed),
        "".join(f" {topic}-{queue_id}" for topic, queue_id in removed),
    )


async def delete_expired_commit_log(
    ctx: BrokerContext, cmd: RemotingCommand, conn: Peer
) -> RemotingCommand:
    """mqadmin deleteExpiredCommitLog: RocketMQ arms its manual delete (the CommitLog files
    past fileReservedTime go whatever the hour, then the queue and index files below the
    new minimum) and answers at once; here the same retention runs in the background."""

    def delete() -> None:
        try:
            report = ctx.store.delete_expired_files()
        except Exception:
            log.exception("deleteExpiredCommitLog from %s failed", conn.peer)
            return
        log.info("deleteExpiredCommitLog from %s: %s", conn.peer, report.summary())

    threading.Thread(target=delete, name="manual-retention", daemon=True).start()
    return cmd.response(ResponseCode.SUCCESS)


async def query_consume_queue(
    ctx: BrokerContext, cmd: RemotingCommand, conn: Peer
) -> RemotingCommand:
    ext = cmd.ext_fields
    topic, queue_id = ext_str(ext, "topic"), ext_int(ext, "queueId")
    index, count = ext_int(ext, "index"), ext_int(ext, "count")
    group = ext.get("consumerGroup")
    queue = ctx.store.queue_view(topic, queue_id)
    if queue is None:
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"{queue_id}@{topic} is not exist!")
    body: dict[str, Any] = {
        "maxQueueIndex": ctx.store.max_offset(topic, queue_id),
        "minQueueIndex": ctx.store.min_offset(topic, queue_id),
    }
    subscription = None
    if group is not None:
        fields, subscription = _group_filter(ctx, str(group), topic)
        body.update(fields)
    raw = None
    if queue.min_offset() <= index:
        # getIndexBuffer: from the unit to the readable end of its file.
        raw = await ctx.run(queue.units_from, index, max(count, 0) * CQ_UNIT_SIZE)
    if raw is None:
        # RocketMQ answers so, without a body (mqadmin then fails to decode it).
        return cmd.response(
            ResponseCode.SUCCESS, f"Index {index} of {queue_id}@{topic} is not exist!"
        )
    units = decode_units(raw)
    rows = [(int(u["offset"]), int(u["size"]), int(u["tags_code"])) for u in units]
    body["queueData"] = [_unit_data(ctx, topic, queue_id, row, subscription) for row in rows]
    return cmd.response(ResponseCode.SUCCESS, None, body=dumps(body).encode("utf-8"))
