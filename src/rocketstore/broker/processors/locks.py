"""LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42): queue locks for orderly consumers.

Layer: broker processors.
"""

from __future__ import annotations

import json
from typing import Any

from rocketstore.broker.codes import ResponseCode
from rocketstore.broker.context import BrokerContext
from rocketstore.broker.queue_locks import QueueKey
from rocketstore.broker.remoting import RemotingCommand, RequestFieldError, loads_json
from rocketstore.remoting.peer import Peer


def parse_lock_body(body: bytes) -> tuple[str, str, list[QueueKey]]:
    """(consumerGroup, clientId, queues) of a (Un)LockBatchRequestBody."""
    try:
        data = loads_json(body)
    except (UnicodeDecodeError, ValueError) as e:
        raise RequestFieldError(f"lock request body is not JSON: {e}") from e
    if not isinstance(data, dict):
        raise RequestFieldError("lock request body must be a JSON object")
    group, client_id = data.get("consumerGroup"), data.get("clientId")
    if not isinstance(group, str) or not isinstance(client_id, str):
        raise RequestFieldError("lock request body needs consumerGroup and clientId")
    queues: list[QueueKey] = []
    for item in data.get("mqSet") or []:
        try:
            queues.append((str(item["topic"]), str(item["brokerName"]), int(item["queueId"])))
        except (KeyError, TypeError, ValueError) as e:
            raise RequestFieldError(f"bad message queue in lock request: {item!r}") from e
    return group, client_id, queues


def _queue_json(queue: QueueKey) -> dict[str, Any]:
    return {"topic": queue[0], "brokerName": queue[1], "queueId": queue[2]}


async def lock_batch(ctx: BrokerContext, cmd: RemotingCommand, conn: Peer) -> RemotingCommand:
    group, client_id, queues = parse_lock_body(cmd.body)
    locked = ctx.locks.try_lock(group, queues, client_id)
    body = json.dumps({"lockOKMQSet": [_queue_json(q) for q in locked]}, separators=(",", ":"))
    return cmd.response(ResponseCode.SUCCESS, body=body.encode("utf-8"))


async def unlock_batch(ctx: BrokerContext, cmd: RemotingCommand, conn: Peer) -> RemotingCommand:
    group, client_id, queues = parse_lock_body(cmd.body)
    ctx.locks.unlock(group, queues, client_id)
    return cmd.response(ResponseCode.SUCCESS)
