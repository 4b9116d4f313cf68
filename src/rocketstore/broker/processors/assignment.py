"""QUERY_ASSIGNMENT (400): the queues a RocketMQ 5.x consumer with broker-side rebalance
(``setClientRebalance(false)``) is to pull from.

Layer: broker processors. RocketMQ 5.x's QueryAssignmentProcessor: the topic's readable
queues (the route's), for a clustering consumer shared among the group's clients by the
client's strategy, each handed out in PULL mode (the broker's default request mode; POP is
not served here). The answer's ``messageQueueAssignments`` is left out (the client keeps
what it has) when the topic or the group's clients are unknown, or the strategy is one
this broker does not run.
"""

from __future__ import annotations

import logging
from typing import Any

from rocketstore.broker.codes import ResponseCode
from rocketstore.broker.context import BrokerContext
from rocketstore.broker.fastjson_body import MessageQueueKey, dumps
from rocketstore.broker.perm_name import PERM_READ
from rocketstore.broker.remoting import RemotingCommand, loads_json
from rocketstore.paths import RETRY_PREFIX
from rocketstore.remoting.peer import Peer

log = logging.getLogger(__name__)

# AllocateMessageQueueStrategy names the 5.x client sends.
AVERAGE = "AVG"
AVERAGE_BY_CIRCLE = "AVG_BY_CIRCLE"


def allocate_averagely(queues: list[Any], clients: list[str], client: str) -> list[Any]:
    """AllocateMessageQueueAveragely: a run of consecutive queues per client, the first
    ``len(queues) % len(clients)`` clients one queue more."""
    if client not in clients or not queues:
        return []
    index, count, total = clients.index(client), len(clients), len(queues)
    mod = total % count
    if total <= count:
        size = 1
    elif mod > 0 and index < mod:
        size = total // count + 1
    else:
        size = total // count
    start = index * size if mod > 0 and index < mod else index * size + mod
    return [queues[(start + i) % total] for i in range(min(size, total - start))]


def allocate_by_circle(queues: list[Any], clients: list[str], client: str) -> list[Any]:
    """AllocateMessageQueueAveragelyByCircle: every len(clients)-th queue."""
    if client not in clients:
        return []
    return queues[clients.index(client) :: len(clients)]


STRATEGIES = {AVERAGE: allocate_averagely, AVERAGE_BY_CIRCLE: allocate_by_circle}


def assigned_queues(ctx: BrokerContext, request: dict[str, Any]) -> list[MessageQueueKey] | None:
    """The queues for the request's client, or None: nothing to say."""
    topic = str(request.get("topic") or "")
    group = str(request.get("consumerGroup") or "")
    client_id = str(request.get("clientId") or "")
    config = ctx.topics.get(topic)
    if config is None or not config.perm & PERM_READ:
        if not topic.startswith(RETRY_PREFIX):
            log.warning("query assignment: group %s, topic %s does not exist", group, topic)
        return None
    queues = [
        MessageQueueKey(topic, ctx.broker_name, queue_id)
        for queue_id in range(config.read_queue_nums)
    ]
    if str(request.get("messageModel")) in ("BROADCASTING", "0"):
        return queues
    clients = sorted(ctx.clients.consumer_ids(group))
    if not clients:
        log.warning("query assignment: group %s has no client online", group)
        return None
    strategy = STRATEGIES.get(str(request.get("strategyName")))
    if strategy is None:
        log.warning("query assignment: strategy %r is not supported", request.get("strategyName"))
        return None
    chosen: list[MessageQueueKey] = strategy(queues, clients, client_id)
    return chosen


async def query_assignment(ctx: BrokerContext, cmd: RemotingCommand, conn: Peer) -> RemotingCommand:
    try:
        request = loads_json(cmd.body) if cmd.body else {}
    except (UnicodeDecodeError, ValueError) as e:
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"bad query assignment body: {e}")
    if not isinstance(request, dict):
        return cmd.response(ResponseCode.SYSTEM_ERROR, "bad query assignment body: not an object")
    queues = assigned_queues(ctx, request)
    body: dict[str, Any] = {}
    if queues is not None:
        body["messageQueueAssignments"] = [
            {"messageQueue": queue.as_bean(), "mode": "PULL"} for queue in queues
        ]
    return cmd.response(ResponseCode.SUCCESS, body=dumps(body).encode("utf-8"))
