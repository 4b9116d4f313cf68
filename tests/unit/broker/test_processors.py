"""Broker processors called directly (no sockets): send, pull with long polling, offsets,
heartbeat, send-back, query, view, locks, admin, unsupported codes and ACL."""

from __future__ import annotations

import asyncio
import json
import logging
import struct
import threading
import time
import zlib
from pathlib import Path
from typing import Any

import pytest

from rocketstore import Message
from rocketstore.broker.acl import AclConfig, sign
from rocketstore.broker.codes import RequestCode, ResponseCode
from rocketstore.broker.context import INLINE_PUT_MAX_BYTES, BrokerContext
from rocketstore.broker.processors.message_batch import BatchEntry, encode_batch
from rocketstore.broker.processors.pull import FLAG_COMMIT_OFFSET, FLAG_SUBSCRIPTION, FLAG_SUSPEND
from rocketstore.broker.processors.send import put_failure_remark
from rocketstore.broker.remoting import RemotingCommand, coerce_ext_fields
from rocketstore.broker.router import BrokerRouter
from rocketstore.broker.topic_config import MULTI_TAG, TopicConfig
from rocketstore.format import properties as props
from rocketstore.format.message import MessageExt
from rocketstore.format.message_id import offset_msg_id
from rocketstore.put_path import PutResult
from rocketstore.status import PutStatus
from tests.unit.broker.broker_helpers import (
    BROKER_ADDR,
    CLIENT_ADDR,
    FakeConnection,
    call,
    decode_records,
    inflate,
    make_context,
    pull,
    run,
    send_v2,
)

PROPS = (
    "KEYS\x01order-1 order-2\x02TAGS\x01tagA"
    "\x02UNIQ_KEY\x01AC11000100002A9F0000000000000001\x02WAIT\x01true"
)


def test_send_v2_then_pull_gives_back_every_field(ctx: BrokerContext) -> None:
    body = zlib.compress(b"hello " * 50)
    answer = call(
        ctx,
        RequestCode.SEND_MESSAGE_V2,
        send_v2("TopicA", queue_id=2, properties=PROPS, sys_flag=1),
        body,
    )
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    assert answer.ext_fields["queueId"] == "2" and answer.ext_fields["queueOffset"] == "0"
    msg_id = answer.ext_fields["msgId"]
    assert msg_id == offset_msg_id(BROKER_ADDR, 0)
    assert ctx.topics.get("TopicA") is not None  # auto-created from TBW102
    ctx.store.wait_dispatched()
    pulled = pull(ctx, "TopicA", 2, 0)
    assert pulled.code == ResponseCode.SUCCESS
    assert pulled.ext_fields["nextBeginOffset"] == "1"
    assert (pulled.ext_fields["minOffset"], pulled.ext_fields["maxOffset"]) == ("0", "1")
    [message] = decode_records(pulled.body)
    assert message.body == body  # stored compressed, unchanged
    assert inflate(message) == b"hello " * 50
    assert offset_msg_id(message.store_host, message.commit_log_offset) == msg_id
    assert message.born_host == CLIENT_ADDR and message.store_host == BROKER_ADDR
    assert message.tags == "tagA" and message.keys == "order-1 order-2"
    assert message.properties["CLUSTER"] == "DefaultCluster"
    assert "WAIT" not in message.properties
    assert message.born_timestamp == 1_700_000_000_000


def test_send_v1_header_names_and_random_queue(ctx: BrokerContext) -> None:
    ext = {
        "producerGroup": "PG",
        "topic": "T1",
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": 2,
        "queueId": -1,
        "sysFlag": 0,
        "bornTimestamp": 1,
        "flag": 3,
        "properties": "",
    }
    answer = call(ctx, RequestCode.SEND_MESSAGE, ext, b"x")
    assert answer.code == ResponseCode.SUCCESS
    assert 0 <= int(answer.ext_fields["queueId"]) < 2


def test_send_errors(tmp_path: Path) -> None:
    ctx = make_context(tmp_path / "s", auto_create=False)
    try:
        answer = call(ctx, RequestCode.SEND_MESSAGE_V2, send_v2("Unknown"), b"x")
        assert answer.code == ResponseCode.TOPIC_NOT_EXIST and "Unknown" in (answer.remark or "")
        answer = call(ctx, RequestCode.SEND_MESSAGE_V2, send_v2("SCHEDULE_TOPIC_XXXX"), b"x")
        assert answer.code == ResponseCode.NO_PERMISSION
        answer = call(ctx, RequestCode.SEND_MESSAGE_V2, send_v2("bad topic!"), b"x")
        assert answer.code == ResponseCode.SYSTEM_ERROR
        answer = call(ctx, RequestCode.SEND_MESSAGE_V2, {"a": "PG"}, b"x")
        assert answer.code == ResponseCode.SYSTEM_ERROR and "'topic'" in (answer.remark or "")
        answer = call(
            ctx,
            RequestCode.UPDATE_AND_CREATE_TOPIC,
            {"topic": "Known", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6},
        )
        assert answer.code == ResponseCode.SUCCESS
        answer = call(ctx, RequestCode.SEND_MESSAGE_V2, send_v2("Known", queue_id=5), b"x")
        assert answer.code == ResponseCode.SYSTEM_ERROR and "queueId[5]" in (answer.remark or "")
    finally:
        ctx.store.close()


@pytest.mark.parametrize(
    ("flush", "body_bytes", "expected"),
    [
        ("ASYNC_FLUSH", 100, [("put", True), ("put_columns", True)]),
        ("ASYNC_FLUSH", INLINE_PUT_MAX_BYTES, [("put", True), ("put_columns", True)]),
        ("ASYNC_FLUSH", INLINE_PUT_MAX_BYTES + 1, [("put", False), ("put_columns", False)]),
        ("SYNC_FLUSH", 100, [("submit", True), ("submit_batch", True)]),
        ("SYNC_FLUSH", INLINE_PUT_MAX_BYTES + 1, [("put", False), ("put_batch", False)]),
    ],
)
def test_a_send_puts_on_the_loop_unless_its_bodies_are_big(
    tmp_path: Path, flush: str, body_bytes: int, expected: list[tuple[str, bool]]
) -> None:
    """Sends of small bodies are appended on the event loop (a worker thread's hop cost
    more than an ASYNC_FLUSH put); with SYNC_FLUSH they are submitted, and answered once
    the group commit thread's sync covers them. Big bodies take long to copy: those are
    put from a thread. Both kinds of send do so (an ASYNC_FLUSH batch as columns)."""
    ctx = make_context(tmp_path / "store", flush_disk_type=flush)
    threads: list[tuple[str, threading.Thread]] = []

    def recording(name: str) -> None:
        real = getattr(ctx.store, name)

        def call_it(*args: Any, **kwargs: Any) -> Any:
            threads.append((name, threading.current_thread()))
            return real(*args, **kwargs)

        setattr(ctx.store, name, call_it)

    for name in ("put", "put_batch", "put_columns", "submit", "submit_batch"):
        recording(name)
    try:
        single = call(ctx, RequestCode.SEND_MESSAGE_V2, send_v2("TI"), b"x" * body_bytes)
        half = body_bytes // 2
        entries = [BatchEntry(0, b"y" * half, {}), BatchEntry(0, b"z" * (body_bytes - half), {})]
        batch = call(ctx, RequestCode.SEND_BATCH_MESSAGE, send_v2("TI"), encode_batch(entries))
        syncs = ctx.store.group_commit.syncs
    finally:
        ctx.store.close()
    assert (single.code, batch.code) == (ResponseCode.SUCCESS, ResponseCode.SUCCESS)
    loop_thread = threading.main_thread()  # (asyncio.run's loop runs in the calling thread)
    assert [(name, thread is loop_thread) for name, thread in threads] == expected
    assert syncs == (2 if expected[0][0] == "submit" else 0)


def test_send_batch(ctx: BrokerContext) -> None:
    entries = [
        BatchEntry(0, f"m{i}".encode(), {"KEYS": f"k{i}", "UNIQ_KEY": f"U{i}"}) for i in range(3)
    ]
    answer = call(
        ctx,
        RequestCode.SEND_BATCH_MESSAGE,
        send_v2("TB", queue_id=1, properties="WAIT\x01true"),
        encode_batch(entries),
    )
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    ids = answer.ext_fields["msgId"].split(",")
    assert len(ids) == 3
    ctx.store.wait_dispatched()
    messages = decode_records(pull(ctx, "TB", 1, 0).body)
    assert [m.body for m in messages] == [b"m0", b"m1", b"m2"]
    assert [m.queue_offset for m in messages] == [0, 1, 2]
    assert [offset_msg_id(m.store_host, m.commit_log_offset) for m in messages] == ids
    assert all(m.properties["CLUSTER"] == "DefaultCluster" for m in messages)
    bad = call(ctx, RequestCode.SEND_BATCH_MESSAGE, send_v2("TB"), b"\0\0\0\x05")
    assert bad.code == ResponseCode.SYSTEM_ERROR


def _batch_records(ctx: BrokerContext) -> list[bytes]:
    """The CommitLog's records, each with its STORETIMESTAMP (the clock's) zeroed."""
    ctx.store.wait_dispatched()
    records = []
    offset = 0
    end = ctx.store.max_commit_log_offset()
    while offset < end:
        size = int.from_bytes(ctx.store.commitlog.read(offset, 4) or b"", "big")
        raw = bytearray(ctx.store.commitlog.read(offset, size) or b"")
        stamp_at = 68 if int.from_bytes(raw[36:40], "big") & 0x10 else 56  # (IPv6 born host)
        raw[stamp_at : stamp_at + 8] = bytes(8)
        records.append(bytes(raw))
        offset += size
    return records


@pytest.mark.parametrize("multi_tag", [False, True])
def test_a_batch_put_as_columns_stores_what_its_messages_stored(
    tmp_path: Path, multi_tag: bool
) -> None:
    """The same batch sends (flags, properties strings of every shape, WAIT and other
    header properties, reconsume times, a MULTI_TAG topic's sys flag) answered alike and
    stored byte for byte alike (but the store time) through put_columns and through a
    Message per entry, put_batch (the path before batch columns, still the definition)."""
    sends: list[tuple[list[BatchEntry], dict[str, Any]]] = [
        (
            [
                BatchEntry(7, b"m0", {}, "KEYS\x01k0\x02WAIT\x01true\x02"),
                BatchEntry(-1, b"", {}, "KEYS\x01k1"),
                BatchEntry(2**31 - 1, b"x" * 300, {}, ""),
                BatchEntry(0, "ü".encode(), {}, "TAGS\x01é\x02TAGS\x01b"),
            ],
            {"properties": "WAIT\x01true\x02extra\x01x", "reconsume_times": 3, "queue_id": 1},
        ),
        ([BatchEntry(0, b"only", {}, "UNIQ_KEY\x01U")], {"sys_flag": 0x1}),
    ]
    answers: dict[bool, list[tuple[int, dict[str, str]]]] = {}
    stored: dict[bool, list[bytes]] = {}
    counted: dict[bool, tuple[int, int]] = {}
    for as_columns in (True, False):
        ctx = make_context(tmp_path / f"store-{as_columns}")
        try:
            if multi_tag:
                ctx.topics.update(TopicConfig("TB", 4, 4, topic_filter_type=MULTI_TAG))

            async def declined(*args: Any, columns: bool = as_columns, **kwargs: Any) -> None:
                assert not columns, "the batch did not go in as columns"

            if as_columns:
                ctx.put_batch = declined  # type: ignore[assignment,method-assign]
            else:
                ctx.put_batch_columns = declined  # type: ignore[method-assign]
            answers[as_columns] = []
            for entries, header in sends:
                answer = call(
                    ctx,
                    RequestCode.SEND_BATCH_MESSAGE,
                    send_v2("TB", **header),
                    encode_batch(entries),
                )
                answers[as_columns].append((answer.code, answer.ext_fields))
            stored[as_columns] = _batch_records(ctx)
            traffic = ctx.stats.topic_traffic()["TB"]
            counted[as_columns] = (traffic.messages, traffic.bytes)
        finally:
            ctx.store.close()
    assert answers[True] == answers[False]
    assert all(code == ResponseCode.SUCCESS for code, _ in answers[True])
    assert len(stored[True]) == 5 and stored[True] == stored[False]
    assert counted[True] == counted[False] == (5, sum(len(r) for r in stored[True]))


def test_a_batch_refused_as_columns_is_refused_in_put_batchs_words(ctx: BrokerContext) -> None:
    """A refusal (a DELAY in a batch) is put_batch's: nothing stored, its remark."""
    entries = [BatchEntry(0, b"a", {}, "DELAY\x013")]
    answer = call(ctx, RequestCode.SEND_BATCH_MESSAGE, send_v2("TB"), encode_batch(entries))
    assert answer.code == ResponseCode.MESSAGE_ILLEGAL
    assert "message 0 of the batch: a batch cannot hold" in (answer.remark or "")
    assert ctx.store.max_commit_log_offset() == 0


def test_send_batch_stores_each_messages_property_bytes_then_the_batchs(
    ctx: BrokerContext,
) -> None:
    """RocketMQ 4.9.8 (CommitLog.MessageExtEncoder, spec 1.5): a batch record's properties
    are the message's own bytes as the client encoded them (here a 5.2+ client's trailing
    separator, and WAIT), then the batch's: the header's properties and CLUSTER in HashMap
    order (buckets of a 16-slot table: extra 7, CLUSTER 12, WAIT 13), WAIT kept."""
    inner = ["KEYS\x01k0\x02WAIT\x01true\x02", "KEYS\x01k1", ""]
    entries = [
        BatchEntry(0, f"m{i}".encode(), props.decode_properties_str(t), t)
        for i, t in enumerate(inner)
    ]
    batch = "extra\x01x\x02CLUSTER\x01DefaultCluster\x02WAIT\x01true"
    stored = [inner[0] + batch, inner[1] + "\x02" + batch, batch]
    answer = call(
        ctx,
        RequestCode.SEND_BATCH_MESSAGE,
        send_v2("TB", queue_id=0, properties="WAIT\x01true\x02extra\x01x"),
        encode_batch(entries),
    )
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    ctx.store.wait_dispatched()
    records = decode_records(pull(ctx, "TB", 0, 0).body)
    for record, text in zip(records, stored, strict=True):
        raw = ctx.store.commitlog.read(record.commit_log_offset, record.size)
        assert raw is not None
        # The record ends with PROPERTIESLENGTH (2 bytes) and the properties.
        want = text.encode()
        assert raw[-len(want) - 2 :] == len(want).to_bytes(2, "big") + want
    assert [m.body for m in ctx.store.query_messages("TB", "k1")] == [b"m1"]


def test_a_batchs_own_uniq_key_is_not_appended_to_its_entries(ctx: BrokerContext) -> None:
    """A 5.x client's batch has a UNIQ_KEY of its own (DefaultMQProducer.batch:
    MessageClientIDSetter.setUniqID(msgBatch)). Appended after each entry's, every entry
    would decode with the batch's id (RocketMQ issue #9416): an idempotent consumer would
    drop all but one. The batch's other properties are still appended, as 4.9.8 does."""
    entries = [BatchEntry(0, f"m{i}".encode(), {"UNIQ_KEY": f"U{i}"}) for i in range(3)]
    answer = call(
        ctx,
        RequestCode.SEND_BATCH_MESSAGE,
        send_v2("TU", queue_id=0, properties="WAIT\x01true\x02UNIQ_KEY\x01BATCH"),
        encode_batch(entries),
    )
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    ctx.store.wait_dispatched()
    records = decode_records(pull(ctx, "TU", 0, 0).body)
    assert [m.properties["UNIQ_KEY"] for m in records] == ["U0", "U1", "U2"]
    assert all(m.properties["WAIT"] == "true" for m in records)
    for record in records:
        raw = ctx.store.commitlog.read(record.commit_log_offset, record.size)
        assert raw is not None and b"BATCH" not in raw


def test_pull_statuses(ctx: BrokerContext) -> None:
    assert pull(ctx, "Nope", 0, 0).code == ResponseCode.TOPIC_NOT_EXIST
    call(ctx, RequestCode.SEND_MESSAGE_V2, send_v2("TP"), b"x")
    ctx.store.wait_dispatched()
    assert pull(ctx, "TP", 9, 0).code == ResponseCode.SYSTEM_ERROR
    assert pull(ctx, "TP", 1, 0).code == ResponseCode.PULL_NOT_FOUND  # empty queue at 0
    assert pull(ctx, "TP", 1, 5).code == ResponseCode.PULL_OFFSET_MOVED  # empty queue, 5
    answer = pull(ctx, "TP", 0, 1)
    assert (
        answer.code == ResponseCode.PULL_NOT_FOUND and answer.ext_fields["nextBeginOffset"] == "1"
    )
    answer = pull(ctx, "TP", 0, 7)
    assert (
        answer.code == ResponseCode.PULL_OFFSET_MOVED
        and answer.ext_fields["nextBeginOffset"] == "1"
    )
    tagged = pull(ctx, "TP", 0, 0, sysFlag=4, subscription="other")
    assert tagged.code == ResponseCode.PULL_RETRY_IMMEDIATELY
    # SQL92 needs enablePropertyFilter (tests/unit/broker/test_pull_selectors.py).
    sql = pull(ctx, "TP", 0, 0, sysFlag=4, subscription="a > 1", expressionType="SQL92")
    assert sql.code == ResponseCode.SYSTEM_ERROR
    assert sql.remark == "The broker does not support consumer to filter message by SQL92"


def test_held_pull_answers_when_a_message_arrives(ctx: BrokerContext) -> None:
    call(ctx, RequestCode.SEND_MESSAGE_V2, send_v2("TL"), b"first")
    ctx.store.wait_dispatched()
    router = BrokerRouter(ctx)
    pull = RemotingCommand(
        RequestCode.PULL_MESSAGE,
        ext_fields={
            "consumerGroup": "G",
            "topic": "TL",
            "queueId": "0",
            "queueOffset": "1",
            "maxMsgNums": "32",
            "sysFlag": str(FLAG_SUSPEND | FLAG_COMMIT_OFFSET | FLAG_SUBSCRIPTION),
            "commitOffset": "1",
            "suspendTimeoutMillis": "15000",
            "subscription": "*",
        },
    )

    async def scenario() -> tuple[RemotingCommand | None, float]:
        conn = FakeConnection()
        held = asyncio.create_task(router.handle(pull, conn))  # type: ignore[arg-type]
        await asyncio.sleep(0.2)
        assert not held.done() and ctx.waiters.held == 1
        started = time.monotonic()
        answer = await router.handle(
            RemotingCommand(
                RequestCode.SEND_MESSAGE_V2,
                ext_fields={k: str(v) for k, v in send_v2("TL").items()},
                body=b"second",
            ),
            conn,  # type: ignore[arg-type]
        )
        assert answer is not None and answer.code == ResponseCode.SUCCESS
        result = await asyncio.wait_for(held, 5)
        return result, time.monotonic() - started

    answer, waited = run(ctx, scenario)
    assert answer is not None and answer.code == ResponseCode.SUCCESS
    assert [m.body for m in decode_records(answer.body)] == [b"second"]
    assert waited < 5
    assert ctx.offsets.query("G", "TL", 0) == 1  # the commit riding on the pull


def test_held_pull_times_out_with_not_found(ctx: BrokerContext) -> None:
    call(ctx, RequestCode.SEND_MESSAGE_V2, send_v2("TT"), b"x")
    ctx.store.wait_dispatched()
    answer = pull(
        ctx, "TT", 0, 1, sysFlag=FLAG_SUSPEND | FLAG_SUBSCRIPTION, suspendTimeoutMillis=100
    )
    assert answer.code == ResponseCode.PULL_NOT_FOUND


def test_consumer_offsets(ctx: BrokerContext) -> None:
    query = {"consumerGroup": "G", "topic": "TO", "queueId": 0}
    assert call(ctx, RequestCode.QUERY_CONSUMER_OFFSET, query).ext_fields["offset"] == "0"
    answer = call(ctx, RequestCode.UPDATE_CONSUMER_OFFSET, {**query, "commitOffset": 12})
    assert answer.code == ResponseCode.SUCCESS
    assert call(ctx, RequestCode.QUERY_CONSUMER_OFFSET, query).ext_fields["offset"] == "12"
    for _ in range(3):
        call(ctx, RequestCode.SEND_MESSAGE_V2, send_v2("TO"), b"x")
    ctx.store.wait_dispatched()
    queue = {"topic": "TO", "queueId": 0}
    assert call(ctx, RequestCode.GET_MAX_OFFSET, queue).ext_fields["offset"] == "3"
    assert call(ctx, RequestCode.GET_MIN_OFFSET, queue).ext_fields["offset"] == "0"
    found = call(ctx, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {**queue, "timestamp": 0})
    assert found.ext_fields["offset"] == "0"
    # A 5.x client's boundaryType: after every message, LOWER is the max offset and UPPER
    # the last message.
    later = {**queue, "timestamp": 2**62}
    for boundary, offset in ((None, "3"), ("LOWER", "3"), ("UPPER", "2")):
        fields = later if boundary is None else {**later, "boundaryType": boundary}
        answer = call(ctx, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, fields)
        assert answer.ext_fields["offset"] == offset, boundary
    bad = call(ctx, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {**later, "boundaryType": "MIDDLE"})
    assert bad.code == ResponseCode.SYSTEM_ERROR and "MIDDLE" in (bad.remark or "")
    earliest = call(ctx, RequestCode.GET_EARLIEST_MSG_STORETIME, queue)
    assert int(earliest.ext_fields["timestamp"]) > 0


def test_heartbeat_registers_and_notifies_the_group(ctx: BrokerContext) -> None:
    def beat(client_id: str, conn: FakeConnection) -> None:
        body = json.dumps(
            {
                "clientID": client_id,
                "consumerDataSet": [
                    {
                        "groupName": "G",
                        "consumeType": "CONSUME_PASSIVELY",
                        "messageModel": "CLUSTERING",
                        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                        "subscriptionDataSet": [
                            {
                                "topic": "T",
                                "subString": "*",
                                "tagsSet": [],
                                "codeSet": [],
                                "subVersion": 1,
                            }
                        ],
                        "unitMode": False,
                    }
                ],
                "producerDataSet": [{"groupName": "PG"}],
            }
        ).encode()
        assert call(ctx, RequestCode.HEART_BEAT, body=body, conn=conn).code == ResponseCode.SUCCESS

    c1, c2 = FakeConnection(peer="10.0.0.1:1"), FakeConnection(peer="10.0.0.2:2")
    beat("c1", c1)
    assert ctx.topics.get("%RETRY%G") is not None
    beat("c2", c2)
    assert [cmd.code for cmd in c1.sent] == [RequestCode.NOTIFY_CONSUMER_IDS_CHANGED] * 2
    assert c1.sent[-1].is_oneway and c1.sent[-1].ext_fields == {"consumerGroup": "G"}
    listed = call(ctx, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G"})
    assert json.loads(listed.body) == {"consumerIdList": ["c1", "c2"]}
    assert (
        call(ctx, RequestCode.UNREGISTER_CLIENT, {"clientID": "c2", "consumerGroup": "G"}).code == 0
    )
    listed = call(ctx, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G"})
    assert json.loads(listed.body) == {"consumerIdList": ["c1"]}
    assert (
        call(ctx, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "X"}).code
        == ResponseCode.SYSTEM_ERROR
    )
    assert call(ctx, RequestCode.HEART_BEAT, body=b"[]").code == ResponseCode.SYSTEM_ERROR


def test_send_back_retries_then_dead_letters(ctx: BrokerContext) -> None:
    call(ctx, RequestCode.SEND_MESSAGE_V2, send_v2("TR", properties=PROPS), b"payload")
    ctx.store.wait_dispatched()
    [original] = decode_records(pull(ctx, "TR", 0, 0).body)
    origin_id = offset_msg_id(original.store_host, original.commit_log_offset)
    back = {
        "offset": original.commit_log_offset,
        "group": "G",
        "delayLevel": 0,
        "originMsgId": origin_id,
        "originTopic": "TR",
        "maxReconsumeTimes": 2,
    }
    assert call(ctx, RequestCode.CONSUMER_SEND_MSG_BACK, back).code == ResponseCode.SUCCESS
    ctx.store.wait_dispatched()
    [scheduled] = decode_records(_pull_schedule(ctx, 3))
    assert scheduled.properties["REAL_TOPIC"] == "%RETRY%G"
    assert scheduled.properties["RETRY_TOPIC"] == "TR"
    assert scheduled.properties["ORIGIN_MESSAGE_ID"] == origin_id
    assert scheduled.properties["DELAY"] == "3"  # 3 + reconsumeTimes
    assert scheduled.reconsume_times == 1
    assert scheduled.body == b"payload" and scheduled.born_host == CLIENT_ADDR
    # The retried copy (reconsume_times 1 < 2) fails again: level 3 + 1.
    back2 = {**back, "offset": scheduled.commit_log_offset}
    assert call(ctx, RequestCode.CONSUMER_SEND_MSG_BACK, back2).code == ResponseCode.SUCCESS
    ctx.store.wait_dispatched()
    second = decode_records(_pull_schedule(ctx, 4))[-1]
    assert second.reconsume_times == 2
    back3 = {**back, "offset": second.commit_log_offset}
    assert call(ctx, RequestCode.CONSUMER_SEND_MSG_BACK, back3).code == ResponseCode.SUCCESS
    ctx.store.wait_dispatched()
    # Past the max reconsume times: the DLQ, no delay.
    [dead] = _dlq(ctx)
    assert dead.topic == "%DLQ%G" and dead.reconsume_times == 3
    assert "DELAY" not in dead.properties
    assert dead.properties["ORIGIN_MESSAGE_ID"] == origin_id
    missing = call(ctx, RequestCode.CONSUMER_SEND_MSG_BACK, {**back, "offset": 999_999})
    assert missing.code == ResponseCode.SYSTEM_ERROR
    # A group no topic name may hold: an answer naming it, and no topic made.
    bad = call(ctx, RequestCode.CONSUMER_SEND_MSG_BACK, {**back, "group": "a;b"})
    assert bad.code == ResponseCode.SYSTEM_ERROR and "'a;b'" in (bad.remark or "")
    assert "%RETRY%a;b" not in ctx.topics


def _pull_schedule(ctx: BrokerContext, level: int) -> bytes:
    result = ctx.store.get_messages("G", "SCHEDULE_TOPIC_XXXX", level - 1, 0, 32)
    return b"".join(
        ctx.store.commitlog.read(m.commit_log_offset, m.size) or b"" for m in result.messages
    )


def _dlq(ctx: BrokerContext) -> list[MessageExt]:
    result = ctx.store.get_messages("G", "%DLQ%G", 0, 0, 32)
    return list(result.messages)


def test_query_by_key_unique_key_and_view_by_id(ctx: BrokerContext) -> None:
    answer = call(ctx, RequestCode.SEND_MESSAGE_V2, send_v2("TQ", properties=PROPS), b"q")
    ctx.store.wait_dispatched()
    query = {
        "topic": "TQ",
        "key": "order-2",
        "maxNum": 32,
        "beginTimestamp": 0,
        "endTimestamp": 2**62,
    }
    found = call(ctx, RequestCode.QUERY_MESSAGE, query)
    assert found.code == ResponseCode.SUCCESS
    assert [m.body for m in decode_records(found.body)] == [b"q"]
    assert int(found.ext_fields["indexLastUpdatePhyoffset"]) >= 0
    unique = call(
        ctx,
        RequestCode.QUERY_MESSAGE,
        {**query, "key": "AC11000100002A9F0000000000000001", "_UNIQUE_KEY_QUERY": "true"},
    )
    assert [m.body for m in decode_records(unique.body)] == [b"q"]
    none = call(ctx, RequestCode.QUERY_MESSAGE, {**query, "key": "nope"})
    assert none.code == ResponseCode.QUERY_NOT_FOUND
    empty = call(ctx, RequestCode.QUERY_MESSAGE, {**query, "key": ""})
    assert empty.code == ResponseCode.QUERY_NOT_FOUND  # never indexed, as in RocketMQ
    too_late = call(ctx, RequestCode.QUERY_MESSAGE, {**query, "endTimestamp": "9" * 25})
    assert too_late.code == ResponseCode.SYSTEM_ERROR
    assert too_late.remark == f"field 'endTimestamp' is out of a long's range, got {'9' * 25!r}"
    offset = int(answer.ext_fields["msgId"][-16:], 16)
    viewed = call(ctx, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": offset})
    assert [m.body for m in decode_records(viewed.body)] == [b"q"]
    assert (
        call(ctx, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": 12345}).code
        == ResponseCode.SYSTEM_ERROR
    )


def test_lock_and_unlock_batch(ctx: BrokerContext) -> None:
    mqs = [{"topic": "T", "brokerName": "broker-a", "queueId": i} for i in range(2)]
    body = json.dumps(
        {"consumerGroup": "G", "clientId": "c1", "onlyThisBroker": False, "mqSet": mqs}
    ).encode()
    answer = call(ctx, RequestCode.LOCK_BATCH_MQ, body=body)
    assert json.loads(answer.body) == {"lockOKMQSet": mqs}
    other = json.dumps({"consumerGroup": "G", "clientId": "c2", "mqSet": mqs}).encode()
    assert json.loads(call(ctx, RequestCode.LOCK_BATCH_MQ, body=other).body) == {"lockOKMQSet": []}
    assert call(ctx, RequestCode.UNLOCK_BATCH_MQ, body=body).code == ResponseCode.SUCCESS
    assert json.loads(call(ctx, RequestCode.LOCK_BATCH_MQ, body=other).body) == {"lockOKMQSet": mqs}
    assert call(ctx, RequestCode.LOCK_BATCH_MQ, body=b"{}").code == ResponseCode.SYSTEM_ERROR


def test_admin_topic_requests(ctx: BrokerContext) -> None:
    changed: list[int] = []
    ctx.on_topics_changed = lambda: changed.append(1)
    ext = {
        "topic": "Adm",
        "readQueueNums": 2,
        "writeQueueNums": 2,
        "perm": 6,
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": 0,
        "order": False,
    }
    assert call(ctx, RequestCode.UPDATE_AND_CREATE_TOPIC, ext).code == ResponseCode.SUCCESS
    table = json.loads(call(ctx, RequestCode.GET_ALL_TOPIC_CONFIG).body)["topicConfigTable"]
    assert table["Adm"]["readQueueNums"] == 2
    assert (
        call(ctx, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "Adm"}).code == ResponseCode.SUCCESS
    )
    assert ctx.topics.get("Adm") is None and len(changed) == 2
    bad = call(ctx, RequestCode.UPDATE_AND_CREATE_TOPIC, {**ext, "perm": 99})
    assert bad.code == ResponseCode.SYSTEM_ERROR


def test_delete_topic_takes_its_queues_and_clean_unused_topic_the_unconfigured(
    ctx: BrokerContext,
) -> None:
    """DELETE_TOPIC_IN_BROKER deletes the topic's consume queues (its messages stay in the
    CommitLog) and refuses a system topic; CLEAN_UNUSED_TOPIC (316) deletes the queues of
    every topic without a config, as RocketMQ's cleanUnusedTopic."""
    for topic in ("Del", "Keep"):
        assert call(ctx, RequestCode.SEND_MESSAGE_V2, send_v2(topic), b"x").code == 0
    ctx.store.wait_dispatched()
    # A topic written without the broker: no config names it.
    assert ctx.store.put(Message("Engine", b"x", queue_id=0)).ok
    ctx.store.wait_dispatched()
    assert call(ctx, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "Del"}).code == 0
    assert set(ctx.store.topics()) == {"Keep", "Engine"}  # the others' queues stay
    system = call(ctx, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "TBW102"})
    assert (system.code, system.remark) == (
        ResponseCode.SYSTEM_ERROR,
        "The topic[TBW102] is conflict with system topic.",
    )
    assert ctx.topics.get("TBW102") is not None
    assert call(ctx, RequestCode.CLEAN_UNUSED_TOPIC).code == ResponseCode.SUCCESS
    assert set(ctx.store.topics()) == {"Keep"}


def test_unsupported_codes(ctx: BrokerContext) -> None:
    answer = call(ctx, 301)  # REGISTER_FILTER_SERVER (filter servers are not served)
    assert answer.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert "301" in (answer.remark or "")


def test_acl_rejects_unsigned_and_wrongly_signed_requests(ctx: BrokerContext) -> None:
    ctx.acl = AclConfig.from_entries([{"accessKey": "rocketmq2", "secretKey": "12345678"}])
    query = {"consumerGroup": "G", "topic": "T", "queueId": "0"}
    assert call(ctx, RequestCode.QUERY_CONSUMER_OFFSET, query).code == ResponseCode.NO_PERMISSION
    signed = {**query, "AccessKey": "rocketmq2"}
    signed["Signature"] = sign(signed, b"", "12345678")
    assert call(ctx, RequestCode.QUERY_CONSUMER_OFFSET, signed).code == ResponseCode.SUCCESS
    forged = {**signed, "Signature": sign({**query, "AccessKey": "rocketmq2"}, b"", "wrong")}
    assert call(ctx, RequestCode.QUERY_CONSUMER_OFFSET, forged).code == ResponseCode.NO_PERMISSION


def test_acl_authorizes_topics_and_admin_codes(
    ctx: BrokerContext, caplog: pytest.LogCaptureFixture
) -> None:
    """A non-admin account cannot change fileReservedTime or run DELETE_EXPIRED_COMMITLOG;
    a refusal names the resource and is logged."""
    ctx.acl = AclConfig.from_entries(
        [
            {
                "accessKey": "rocketmq2",
                "secretKey": "12345678",
                "defaultTopicPerm": "SUB",
                "topicPerms": ["Open=PUB"],
            }
        ]
    )

    def signed(ext: dict[str, Any]) -> dict[str, str]:
        fields = {**coerce_ext_fields(ext), "AccessKey": "rocketmq2"}
        return {**fields, "Signature": sign(fields, b"x", "12345678")}

    for code in (RequestCode.UPDATE_BROKER_CONFIG, RequestCode.DELETE_EXPIRED_COMMITLOG):
        answer = call(ctx, code, signed({}), b"x")
        assert answer.code == ResponseCode.NO_PERMISSION
        assert "Need admin permission" in (answer.remark or "")
    assert call(ctx, RequestCode.SEND_MESSAGE_V2, signed(send_v2("Open")), b"x").code == (
        ResponseCode.SUCCESS
    )
    with caplog.at_level(logging.WARNING, logger="rocketstore.broker.router"):
        refused = call(ctx, RequestCode.SEND_MESSAGE_V2, signed(send_v2("Closed")), b"x")
    assert refused.code == ResponseCode.NO_PERMISSION
    assert refused.remark == "ACL check failed: DENIED: No default permission for topic:Closed"
    assert any("No default permission for topic:Closed" in r.getMessage() for r in caplog.records)
    assert not any("12345678" in r.getMessage() for r in caplog.records)


def test_acl_requests_without_acl(ctx: BrokerContext) -> None:
    update = {"accessKey": "someone1", "secretKey": "12345678"}
    answer = call(ctx, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, update)
    assert answer.code == ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED
    assert "not enabled" in (answer.remark or "")
    answer = call(ctx, RequestCode.GET_BROKER_CLUSTER_ACL_INFO)
    assert answer.code == ResponseCode.SYSTEM_ERROR


def test_send_to_retry_topic_past_max_reconsume_goes_to_dlq(ctx: BrokerContext) -> None:
    ext = send_v2("%RETRY%G", reconsume_times=3, max_reconsume_times=3)
    answer = call(ctx, RequestCode.SEND_MESSAGE_V2, ext, b"dead")
    assert answer.code == ResponseCode.SUCCESS
    ctx.store.wait_dispatched()
    [dead] = _dlq(ctx)
    assert dead.body == b"dead"
    assert ctx.topics.get("%DLQ%G") is not None
    # With the DELAY a client's own send-back sets, RocketMQ 4.9.8 keeps the level (its
    # DLQ branch clears it on a map the request's properties then replace): the message
    # is scheduled, bound for the DLQ.
    delayed = send_v2("%RETRY%G", reconsume_times=3, max_reconsume_times=3, properties="DELAY\x013")
    assert call(ctx, RequestCode.SEND_MESSAGE_V2, delayed, b"later").code == ResponseCode.SUCCESS
    ctx.store.wait_dispatched()
    assert len(_dlq(ctx)) == 1
    (scheduled,) = ctx.store.get_messages("G", "SCHEDULE_TOPIC_XXXX", 2, 0, 32).messages
    assert scheduled.body == b"later"
    assert scheduled.properties["REAL_TOPIC"] == "%DLQ%G"
    assert scheduled.properties["DELAY"] == "3"
    below = send_v2("%RETRY%G", reconsume_times=1, max_reconsume_times=3)
    assert call(ctx, RequestCode.SEND_MESSAGE_V2, below, b"again").code == ResponseCode.SUCCESS
    ctx.store.wait_dispatched()
    assert ctx.store.max_offset("%RETRY%G", 0) == 1


def _java_bucket(name: str, capacity: int) -> int:
    """java.util.HashMap's bucket of a String key (String.hashCode, then h ^ h >>> 16)."""
    data, h = name.encode("utf-16-be"), 0
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i : i + 2], "big")) & 0xFFFFFFFF
    return (h ^ (h >> 16)) & (capacity - 1)


def test_a_dropped_wait_still_sized_the_map_the_properties_are_ordered_by(
    ctx: BrokerContext,
) -> None:
    """11 properties + WAIT + CLUSTER is 13 entries, past a 16-slot HashMap's threshold of
    12: RocketMQ's map grew to 32 slots before WAIT was removed, so the stored order is
    that of 32 buckets, not of the 16 that the 12 kept entries would need."""
    names = [f"p{i}" for i in range(11)]
    sent = "".join(f"{n}\x01v\x02" for n in names) + "WAIT\x01true"
    answer = call(ctx, RequestCode.SEND_MESSAGE_V2, send_v2("TW", properties=sent), b"x")
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    kept = [*names, "CLUSTER"]
    order = sorted(kept, key=lambda n: (_java_bucket(n, 32), kept.index(n)))
    assert order != sorted(kept, key=lambda n: (_java_bucket(n, 16), kept.index(n)))
    ctx.store.wait_dispatched()
    (record,) = decode_records(pull(ctx, "TW", 0, 0).body)
    assert list(record.properties) == order


def test_rocketmq5_client_requests(ctx: BrokerContext, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the real RocketMQ 5.3.3 client sends beyond 4.9's: a DefaultLitePullConsumer
    pulls with LITE_PULL_MESSAGE (361, served as PULL_MESSAGE); every send is answered
    with its transactionId (the UNIQ_KEY); a timer message (TIMER_DELIVER_MS, _DELAY_MS,
    _DELAY_SEC) is refused as by a 5.x broker with its timer wheel off, not delivered at
    once, unless it carries a delay level too (the level wins), and with the wheel on is
    stored in rmq_sys_wheel_timer as HookUtils.transformTimerMessage does."""
    sent = call(ctx, RequestCode.SEND_MESSAGE_V2, send_v2("TopicA", queue_id=0, properties=PROPS))
    assert sent.code == ResponseCode.SUCCESS, sent.remark
    assert sent.ext_fields["transactionId"] == "AC11000100002A9F0000000000000001"
    ctx.store.wait_dispatched()
    ext = {
        "consumerGroup": "G", "topic": "TopicA", "queueId": "0", "queueOffset": "0",
        "maxMsgNums": "10", "sysFlag": "22", "commitOffset": "0", "suspendTimeoutMillis": "0",
        "subscription": "*", "subVersion": "0", "expressionType": "TAG", "ReqT": "0",
        "bname": "broker-a", "maxMsgBytes": "2147483647",
    }  # fmt: skip
    lite = call(ctx, RequestCode.LITE_PULL_MESSAGE, ext)
    assert lite.code == ResponseCode.SUCCESS, lite.remark
    assert [m.tags for m in decode_records(lite.body)] == ["tagA"]
    timers = ("TIMER_DELIVER_MS\x014102444800000", "TIMER_DELAY_SEC\x0120", "TIMER_DELAY_MS\x015")
    monkeypatch.setattr(ctx.store.config, "timer_wheel_enable", False)
    for timer in timers:
        refused = call(
            ctx, RequestCode.SEND_MESSAGE_V2, send_v2("TopicA", properties=f"{PROPS}\x02{timer}")
        )
        assert (refused.code, refused.remark) == (
            ResponseCode.SYSTEM_ERROR,
            "accurate timer message is not enabled, timerWheelEnable is false",
        )
    leveled = call(
        ctx,
        RequestCode.SEND_MESSAGE_V2,
        send_v2("TopicA", properties=f"{PROPS}\x02TIMER_DELAY_SEC\x0120\x02DELAY\x012"),
    )
    assert leveled.code == ResponseCode.SUCCESS, leveled.remark
    ctx.store.wait_dispatched()
    assert ctx.store.max_offset("TopicA", 0) == 1  # nothing of the refused was stored
    # With the wheel on (RocketMQ 5's default) they wait in the timer topic; a time past
    # is stored as a plain message; one beyond timerMaxDelaySec is illegal.
    monkeypatch.setattr(ctx.store.config, "timer_wheel_enable", True)
    for timer in (*timers[1:], "TIMER_DELIVER_MS\x011"):
        sent = call(
            ctx,
            RequestCode.SEND_MESSAGE_V2,
            send_v2("TopicA", queue_id=0, properties=f"{PROPS}\x02{timer}"),
        )
        assert sent.code == ResponseCode.SUCCESS, sent.remark
        assert sent.ext_fields["queueId"] == "0"
    far = call(
        ctx, RequestCode.SEND_MESSAGE_V2, send_v2("TopicA", properties=f"{PROPS}\x02{timers[0]}")
    )
    assert far.code == ResponseCode.MESSAGE_ILLEGAL
    assert (far.remark or "").startswith("timer message illegal, the delay time should not be")
    ctx.store.wait_dispatched()
    assert ctx.store.max_offset("TopicA", 0) == 2
    assert ctx.store.max_offset("rmq_sys_wheel_timer", 0) == 2
    waiting, _ = ctx.store.get_messages("G", "rmq_sys_wheel_timer", 0, 0, 10).messages
    assert waiting.properties["REAL_TOPIC"] == "TopicA"
    assert waiting.properties["REAL_QID"] == "0"
    assert waiting.properties["WAIT"] == "true"  # the hook writes the map, WAIT in it
    assert int(waiting.properties["TIMER_OUT_MS"]) % 1000 == 0


def test_send_of_a_delayed_message_writes_wait_re_put_last_as_sendmessageprocessor(
    ctx: BrokerContext,
) -> None:
    """RocketMQ 4.9.8's SendMessageProcessor decodes the request's properties into a
    HashMap, puts CLUSTER, removes WAIT and puts it back; CommitLog's delay rewrite then
    puts REAL_TOPIC and REAL_QID and writes the whole map, WAIT included. A client's map
    (TAGS, KEYS, WAIT, DELAY, UNIQ_KEY put in that order) arrives as KEYS, UNIQ_KEY, WAIT,
    DELAY, TAGS (its HashMap order). The broker's map: KEYS, UNIQ_KEY, DELAY, TAGS, CLUSTER,
    WAIT; with REAL_TOPIC and REAL_QID, 8 entries in 16 buckets: REAL_TOPIC 1, KEYS 7,
    UNIQ_KEY 12, CLUSTER 12, DELAY 13, WAIT 13, TAGS 14, REAL_QID 15, ties in insertion
    order, so DELAY now comes before WAIT (the store alone keeps WAIT first: test_store)."""
    request = "KEYS\x01k1\x02UNIQ_KEY\x01U1\x02WAIT\x01true\x02DELAY\x013\x02TAGS\x01T"
    answer = call(ctx, RequestCode.SEND_MESSAGE_V2, send_v2("TopicD", properties=request), b"b")
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    stored = ctx.store.look_message(0)
    assert stored is not None
    properties = (
        b"REAL_TOPIC\x01TopicD\x02KEYS\x01k1\x02UNIQ_KEY\x01U1\x02CLUSTER\x01DefaultCluster"
        b"\x02DELAY\x013\x02WAIT\x01true\x02TAGS\x01T\x02REAL_QID\x010"
    )
    topic = b"SCHEDULE_TOPIC_XXXX"
    record = b"".join(
        [
            struct.pack(">i", 91 + 1 + len(topic) + len(properties)),  # TOTALSIZE
            bytes.fromhex("DAA320A7"),  # MAGICCODE v1
            struct.pack(">i", zlib.crc32(b"b") & 0x7FFFFFFF),  # BODYCRC
            struct.pack(">i", 2),  # QUEUEID: delay level 3 - 1
            struct.pack(">i", 0),  # FLAG
            struct.pack(">q", 0),  # QUEUEOFFSET
            struct.pack(">q", 0),  # PHYSICALOFFSET
            struct.pack(">i", 0),  # SYSFLAG
            struct.pack(">q", 1_700_000_000_000),  # BORNTIMESTAMP
            bytes([10, 1, 2, 3]) + struct.pack(">i", 45678),  # BORNHOST (CLIENT_ADDR)
            struct.pack(">q", stored.store_timestamp),  # STORETIMESTAMP (the broker's now)
            bytes([127, 0, 0, 1]) + struct.pack(">i", 10911),  # STOREHOSTADDRESS
            struct.pack(">i", 0),  # RECONSUMETIMES
            struct.pack(">q", 0),  # PREPARED TRANSACTION OFFSET
            struct.pack(">i", 1),  # BODYLEN
            b"b",  # BODY
            bytes([len(topic)]),  # TOPICLEN
            topic,  # TOPIC
            struct.pack(">h", len(properties)),  # PROPLEN
            properties,  # PROPERTIES
        ]
    )
    with open(Path(ctx.store.root) / "commitlog" / f"{0:020d}", "rb") as f:
        assert f.read(len(record)) == record


def test_send_of_a_plain_message_leaves_wait_out(ctx: BrokerContext) -> None:
    """Not delayed: the record holds the properties string the processor wrote before
    putting WAIT back, so no WAIT."""
    request = "KEYS\x01k1\x02WAIT\x01true\x02TAGS\x01T"
    answer = call(ctx, RequestCode.SEND_MESSAGE_V2, send_v2("TopicP", properties=request), b"b")
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    stored = ctx.store.look_message(0)
    assert stored is not None
    assert list(stored.properties) == ["KEYS", "CLUSTER", "TAGS"]


@pytest.mark.parametrize(
    ("status", "words"),
    [
        (PutStatus.CREATE_MAPEDFILE_FAILED, "create mapped file failed, server is busy or broken."),
        (
            PutStatus.OS_PAGECACHE_BUSY,
            "[PC_SYNCHRONIZED]broker busy, start flow control for a while",
        ),
        (PutStatus.UNKNOWN_ERROR, "UNKNOWN_ERROR"),
        (
            PutStatus.MESSAGE_ILLEGAL,
            "the message is illegal, maybe msg body or properties length not matched. "
            "msg body length limit 4194304B, msg properties length limit 32767B.",
        ),
    ],
)
def test_a_refused_puts_remark_is_handle_put_message_results(
    ctx: BrokerContext, status: PutStatus, words: str
) -> None:
    """SendMessageProcessor's words for each refusal (RocketMQ 4.9.8 and 5.3.3 alike),
    then the store's reason when it gave one; the proxy passes them on to 5.x clients."""
    assert put_failure_remark(PutResult(status, reason="disk on fire"), ctx).startswith(words)
    assert put_failure_remark(PutResult(status, reason="disk on fire"), ctx).endswith(
        " (disk on fire)"
    )
    refused = put_failure_remark(PutResult(PutStatus.SERVICE_NOT_AVAILABLE), ctx)
    assert refused.startswith(
        "service not available now. It may be caused by one of the following reasons: "
        "the broker's disk is full [CL: "
    )
    assert refused.endswith(
        "], messages are put to the slave, message store has been shut down, etc. "
        "(SERVICE_NOT_AVAILABLE)"
    )
