"""QUERY_CONSUME_QUEUE (321): mqadmin queryCq against the broker."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rocketstore.broker.codes import RequestCode, ResponseCode
from rocketstore.broker.context import BrokerContext
from tests.unit.broker.broker_helpers import call, heartbeat, make_context, send_v2


def _query(ctx: BrokerContext, **fields: object) -> tuple[int, str | None, dict[str, Any] | None]:
    ext = {"topic": "Q", "queueId": 0, "index": 0, "count": 10, **fields}
    answer = call(ctx, RequestCode.QUERY_CONSUME_QUEUE, ext)
    body = json.loads(answer.body) if answer.body else None
    return answer.code, answer.remark, body


def _fill(ctx: BrokerContext, count: int) -> None:
    for i in range(count):
        tags = f"TAGS\x01{'ab'[i % 2]}"
        assert call(ctx, RequestCode.SEND_MESSAGE_V2, send_v2("Q", properties=tags), b"x").code == 0
    ctx.store.wait_dispatched()


def test_units_from_an_index_and_the_queue_bounds(ctx: BrokerContext) -> None:
    _fill(ctx, 6)
    code, remark, body = _query(ctx, index=2, count=3)
    assert (code, remark) == (ResponseCode.SUCCESS, None)
    assert body is not None and (body["minQueueIndex"], body["maxQueueIndex"]) == (0, 6)
    assert "subscriptionData" not in body and "filterData" not in body
    queue = ctx.store.queues[("Q", 0)]
    expected = []
    for offset in (2, 3, 4):
        unit = queue.unit(offset)
        assert unit is not None
        expected.append(
            {
                "eval": False,
                "physicOffset": unit.commit_log_offset,
                "physicSize": unit.size,
                "tagsCode": unit.tags_code,
            }
        )
    assert body["queueData"] == expected
    # Past the end: RocketMQ's remark and no body (mqadmin then fails to decode it).
    past = _query(ctx, index=6)
    assert past == (ResponseCode.SUCCESS, "Index 6 of 0@Q is not exist!", None)
    assert _query(ctx, queueId=3)[:2] == (ResponseCode.SYSTEM_ERROR, "3@Q is not exist!")
    assert _query(ctx, topic="Nope")[:2] == (ResponseCode.SYSTEM_ERROR, "0@Nope is not exist!")


def test_with_a_group_the_body_says_how_it_subscribes(ctx: BrokerContext) -> None:
    _fill(ctx, 2)
    code, _remark, body = _query(ctx, consumerGroup="G", count=1)
    assert code == ResponseCode.SUCCESS and body is not None
    assert body["filterData"] == "G@Q is not online!"
    assert "subscriptionData" not in body
    subscription: dict[str, object] = {
        "topic": "Q",
        "subString": "a",
        "tagsSet": ["a"],
        "codeSet": [97],
    }
    subscription |= {"subVersion": 5, "classFilterMode": False, "expressionType": "TAG"}
    heartbeat(ctx, subscription)
    code, _remark, body = _query(ctx, consumerGroup="G", count=1)
    assert body is not None
    assert body["subscriptionData"]["subString"] == "a"
    assert body["filterData"] == "null"  # a tag subscription keeps no filter data
    assert len(body["queueData"]) == 1


def test_units_end_with_the_queue_file_as_get_index_buffer(tmp_path: Path) -> None:
    """RocketMQ reads from the unit to the readable end of its file: a count that runs past
    a file's end gets the units up to it."""
    ctx = make_context(tmp_path / "store", mapped_file_size_consume_queue=5 * 20)
    try:
        _fill(ctx, 8)
        code, _remark, body = _query(ctx, index=3, count=10)
        assert code == ResponseCode.SUCCESS and body is not None
        assert len(body["queueData"]) == 2  # units 3 and 4; 5 starts the next file
        assert len(_query(ctx, index=5, count=10)[2]["queueData"]) == 3  # type: ignore[index]
    finally:
        ctx.store.close()


def test_clean_expired_consume_queue(tmp_path: Path) -> None:
    """CLEAN_EXPIRED_CONSUMEQUEUE (306, mqadmin cleanExpiredCQ): the queues whose records
    retention deleted go; RocketMQ answers success either way."""
    ctx = make_context(tmp_path / "store", mapped_file_size_commit_log=4096)
    try:
        for queue_id, count in ((3, 4), (0, 120)):
            for _ in range(count):
                fields = send_v2("Q", queue_id=queue_id)
                assert call(ctx, RequestCode.SEND_MESSAGE_V2, fields, b"x" * 20).code == 0
        ctx.store.wait_dispatched()
        ctx.store.delete_expired_files(force=True)
        answer = call(ctx, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE)
        assert (answer.code, answer.remark) == (ResponseCode.SUCCESS, None)
        assert ctx.store.topics()["Q"] == [0]
        again = call(ctx, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE)
        assert again.code == ResponseCode.SUCCESS and ctx.store.topics()["Q"] == [0]
    finally:
        ctx.store.close()
