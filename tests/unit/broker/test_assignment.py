"""QUERY_ASSIGNMENT (400): broker-side rebalance for RocketMQ 5.x consumers."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from rocketstore.broker.codes import RequestCode, ResponseCode
from rocketstore.broker.context import BrokerContext
from rocketstore.broker.processors.assignment import allocate_averagely, allocate_by_circle
from rocketstore.broker.topic_config import TopicConfig
from tests.unit.broker.broker_helpers import call, heartbeat


@given(st.integers(0, 40), st.integers(1, 12))
def test_each_strategy_shares_every_queue_out_once(queues: int, clients: int) -> None:
    mq_all = list(range(queues))
    cid_all = [f"c{i:02d}" for i in range(clients)]
    for strategy in (allocate_averagely, allocate_by_circle):
        parts = [strategy(mq_all, cid_all, cid) for cid in cid_all]
        assert sorted(q for part in parts for q in part) == mq_all
        sizes = [len(part) for part in parts]
        assert max(sizes) - min(sizes) <= 1
    assert allocate_averagely(mq_all, cid_all, "stranger") == []


def test_averagely_as_rocketmq_splits_eight_queues_among_three() -> None:
    clients = ["a", "b", "c"]
    assert [allocate_averagely(list(range(8)), clients, c) for c in clients] == [
        [0, 1, 2], [3, 4, 5], [6, 7]
    ]  # fmt: skip
    assert [allocate_by_circle(list(range(8)), clients, c) for c in clients] == [
        [0, 3, 6], [1, 4, 7], [2, 5]
    ]  # fmt: skip


def _beat(ctx: BrokerContext, client_id: str) -> None:
    subscription = {"topic": "T", "subString": "*", "tagsSet": [], "codeSet": [], "subVersion": 1}
    heartbeat(ctx, subscription, client_id=client_id)


def _assignment(ctx: BrokerContext, **fields: str) -> list[int] | None:
    request = {"topic": "T", "consumerGroup": "G", "clientId": "c1", "strategyName": "AVG",
               "messageModel": "CLUSTERING", **fields}  # fmt: skip
    answer = call(ctx, RequestCode.QUERY_ASSIGNMENT, body=json.dumps(request).encode())
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    body = json.loads(answer.body)
    if "messageQueueAssignments" not in body:
        return None
    for each in body["messageQueueAssignments"]:
        assert each["mode"] == "PULL" and each["messageQueue"]["topic"] == "T"
        assert each["messageQueue"]["brokerName"] == ctx.broker_name
    return sorted(a["messageQueue"]["queueId"] for a in body["messageQueueAssignments"])


def test_query_assignment_shares_the_topics_read_queues_among_the_groups_clients(
    ctx: BrokerContext,
) -> None:
    ctx.topics.update(TopicConfig("T", read_queue_nums=5, write_queue_nums=5))
    assert _assignment(ctx) is None  # no client of the group yet: nothing to say
    _beat(ctx, "c1")
    _beat(ctx, "c2")
    assert _assignment(ctx) == [0, 1, 2]
    assert _assignment(ctx, clientId="c2") == [3, 4]
    assert _assignment(ctx, strategyName="AVG_BY_CIRCLE") == [0, 2, 4]
    assert _assignment(ctx, messageModel="BROADCASTING") == [0, 1, 2, 3, 4]
    assert _assignment(ctx, strategyName="CONFIG") is None  # not run here
    assert _assignment(ctx, topic="Missing") is None
    bad = call(ctx, RequestCode.QUERY_ASSIGNMENT, body=b"[1]")
    assert bad.code == ResponseCode.SYSTEM_ERROR and "not an object" in (bad.remark or "")
