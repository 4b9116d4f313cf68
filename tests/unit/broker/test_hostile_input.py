"""Unusual input found by auditing the broker with raw sockets: each gets a clear answer,
and none of it can stop the broker from answering or from persisting its tables."""

from __future__ import annotations

import asyncio
import json
import struct
import time
from pathlib import Path
from typing import Any

import pytest

from rocketstore.broker.app import BackgroundServer, BrokerOptions
from rocketstore.broker.broker_config import BrokerConfig
from rocketstore.broker.client import RemotingClient, request
from rocketstore.broker.codes import RequestCode, ResponseCode
from rocketstore.broker.context import BrokerContext
from rocketstore.broker.remoting import (
    RemotingCommand,
    decode_frame,
    encode_command,
    replace_lone_surrogates,
)
from rocketstore.broker.router import BrokerRouter
from rocketstore.broker.server import Connection, RemotingServer, bind_socket
from rocketstore.paths import ABORT_FILE
from tests.unit.broker.broker_helpers import (
    FakeConnection,
    call,
    decode_records,
    pull,
    run,
    send_v2,
    small_store,
)

# --- lone surrogates ------------------------------------------------------------------
# JSON may escape half of a UTF-16 pair ("\ud800"); Python reads it into a str that no
# UTF-8 encoder takes, so it reached the config files and the response encoder.


def _raw_request(code: int, ext_json: str, body: bytes = b"") -> RemotingCommand:
    """A request decoded from a frame whose header JSON is written by hand (so it can
    hold escapes no JSON encoder writes for a str)."""
    header = f'{{"code":{code},"opaque":77,"flag":0,"extFields":{ext_json}}}'.encode()
    frame = struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body
    decoded = decode_frame(frame)
    assert decoded is not None
    return decoded[0]


def _route(ctx: BrokerContext, cmd: RemotingCommand) -> RemotingCommand:
    async def go() -> RemotingCommand | None:
        return await BrokerRouter(ctx).handle(cmd, FakeConnection())  # type: ignore[arg-type]

    answer = run(ctx, go)
    assert answer is not None
    encode_command(answer)  # the answer can be written
    return answer


def test_lone_surrogate_escapes_read_as_question_marks() -> None:
    assert replace_lone_surrogates(r'"a\ud800b\uDC00"') == '"a?b?"'
    assert replace_lone_surrogates(r'"\ud83d\ude00"') == r'"\ud83d\ude00"'  # a pair stays
    assert replace_lone_surrogates(r'"\\ud800"') == r'"\\ud800"'  # an escaped backslash
    assert replace_lone_surrogates(r'"\\\ud800\u0001"') == r'"\\?\u0001"'
    cmd = _raw_request(10, r'{"topic":"T\ud800","emoji":"\ud83d\ude00","nested":{"k":"\udfff"}}')
    assert cmd.ext_fields["topic"] == "T?"
    assert cmd.ext_fields["emoji"] == "\U0001f600"
    assert json.loads(cmd.ext_fields["nested"]) == {"k": "?"}


def test_a_lone_surrogate_in_a_remark_still_gets_its_answer() -> None:
    """The response encoder writes "?" for it (as Java does) instead of failing, which
    left the request unanswered until the client's timeout."""

    async def handler(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        return cmd.response(ResponseCode.TOPIC_NOT_EXIST, "topic[T\ud800] not exist")

    async def scenario() -> None:
        server = RemotingServer(handler, name="test")
        await server.start(bind_socket("127.0.0.1", 0))
        client = RemotingClient(server.address)
        try:
            answer = await client.invoke(request(RequestCode.PULL_MESSAGE), 5)
            assert answer.code == ResponseCode.TOPIC_NOT_EXIST
            assert answer.remark == "topic[T?] not exist"
        finally:
            await client.close()
            await server.stop()

    asyncio.run(scenario())


def test_a_lone_surrogate_in_a_name_does_not_poison_the_config_files(
    ctx: BrokerContext,
) -> None:
    """A group named with a lone surrogate used to enter the group and offset tables,
    after which every write of subscriptionGroup.json and consumerOffset.json failed."""
    call(ctx, RequestCode.SEND_MESSAGE_V2, send_v2("TS"), b"kept")
    ctx.store.wait_dispatched()
    fields = (
        r'{"consumerGroup":"G\ud800","topic":"TS","queueId":"0","queueOffset":"0",'
        r'"maxMsgNums":"32","sysFlag":"4","commitOffset":"0","suspendTimeoutMillis":"0",'
        r'"subscription":"*","subVersion":"0"}'
    )
    pulled = _route(ctx, _raw_request(RequestCode.PULL_MESSAGE, fields))
    assert pulled.code == ResponseCode.SUCCESS
    assert [m.body for m in decode_records(pulled.body)] == [b"kept"]
    commit = r'{"consumerGroup":"O\udbff","topic":"TS","queueId":"0","commitOffset":"1"}'
    assert _route(ctx, _raw_request(RequestCode.UPDATE_CONSUMER_OFFSET, commit)).code == 0
    beat = rb'{"clientID":"c\ud800","producerDataSet":[{"groupName":"P\ud800"}]}'
    assert _route(ctx, _raw_request(RequestCode.HEART_BEAT, "{}", beat)).code == 0
    assert ctx.clients.producer_groups() == ["P?"]
    group = rb'{"groupName":"H\ud800","consumeEnable":true}'
    create = RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP
    assert _route(ctx, _raw_request(create, "{}", group)).code == 0
    # Later changes of both tables still reach their files.
    assert pull(ctx, "TS", consumerGroup="Later").code == ResponseCode.SUCCESS
    later = {"consumerGroup": "Later", "topic": "TS", "queueId": 0, "commitOffset": 1}
    assert call(ctx, RequestCode.UPDATE_CONSUMER_OFFSET, later).code == 0
    assert ctx.offsets.persist()
    config = Path(ctx.groups.path).parent
    groups = json.loads((config / "subscriptionGroup.json").read_text())["subscriptionGroupTable"]
    assert {"G?", "H?", "Later"} <= set(groups)
    offsets = json.loads((config / "consumerOffset.json").read_text())["offsetTable"]
    assert {"TS@O?", "TS@Later"} <= set(offsets)


def test_offsets_keep_being_persisted_after_a_failed_write(tmp_path: Path) -> None:
    """One failed write (of any kind) neither ends the persist timer, which left every
    later commit in memory only, nor keeps the store from closing cleanly at shutdown."""
    options = BrokerOptions(
        str(tmp_path / "store"),
        listen="127.0.0.1:0",
        store_config=small_store(),
        broker=BrokerConfig(flush_consumer_offset_interval_ms=100),
    )
    server = BackgroundServer(options).start()
    try:
        ctx = server.broker.ctx
        assert ctx is not None
        real = ctx.offsets.persist
        calls: list[int] = []

        def flaky(*, force: bool = False) -> bool:
            calls.append(1)
            if len(calls) == 1 or len(calls) > 3:
                raise ValueError("cannot encode")
            return real(force=force)

        ctx.offsets.persist = flaky  # type: ignore[method-assign]
        ctx.offsets.commit("G", "T", 0, 5)
        for _ in range(100):
            if len(calls) >= 3:
                break
            time.sleep(0.05)
        assert len(calls) >= 3  # the loop survived the first failure
        assert ctx.offsets.query("G", "T", 0) == 5
        assert not ctx.offsets.dirty  # a later round wrote the commit
    finally:
        server.stop()  # persist fails here too; the store still closes
    assert not (tmp_path / "store" / ABORT_FILE).exists()


# --- request fields -------------------------------------------------------------------


@pytest.mark.parametrize("data_set", ["consumerDataSet", "producerDataSet"])
@pytest.mark.parametrize("value", [5, True, 1.5])
def test_a_heartbeat_data_set_that_is_no_array_is_named(
    ctx: BrokerContext, data_set: str, value: Any
) -> None:
    body = json.dumps({"clientID": "c1", data_set: value}).encode()
    answer = call(ctx, RequestCode.HEART_BEAT, body=body)
    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert answer.remark == (f"heartbeat {data_set} must be an array, got {type(value).__name__}")


def test_a_topic_without_write_queues_refuses_a_send_to_any_queue(ctx: BrokerContext) -> None:
    """defaultTopicQueueNums 0 creates a topic with no queue; a send to "any queue"
    (queueId -1) was stored in queue 0, acknowledged, and could never be pulled."""
    fields = send_v2("NoQueues", queue_id=-1) | {"d": 0}
    answer = call(ctx, RequestCode.SEND_MESSAGE_V2, fields, b"x")
    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert (answer.remark or "").startswith("topic[NoQueues] has no write queue to send to")
    batch = call(ctx, RequestCode.SEND_BATCH_MESSAGE, fields, b"")
    assert batch.code == ResponseCode.SYSTEM_ERROR
    assert ctx.store.max_offset("NoQueues", 0) == 0


@pytest.mark.parametrize(
    ("letter", "name"),
    [
        ("e", "queueId"),
        ("f", "sysFlag"),
        ("h", "flag"),
        ("j", "reconsumeTimes"),
        ("d", "defaultTopicQueueNums"),
        ("l", "maxReconsumeTimes"),
    ],
)
@pytest.mark.parametrize("value", [2**31, -(2**31) - 1])
def test_send_header_ints_beyond_a_java_int_name_the_field(
    ctx: BrokerContext, letter: str, name: str, value: int
) -> None:
    answer = call(ctx, RequestCode.SEND_MESSAGE_V2, send_v2("TI") | {letter: value}, b"x")
    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert answer.remark == f"field {name!r} is out of an int's range, got {str(value)!r}"
    assert ctx.store.max_offset("TI", 0) == 0


@pytest.mark.parametrize(
    ("letter", "name"),
    [
        ("a", "producerGroup"),
        ("b", "topic"),
        ("c", "defaultTopic"),
        ("d", "defaultTopicQueueNums"),
        ("e", "queueId"),
        ("f", "sysFlag"),
        ("g", "bornTimestamp"),
        ("h", "flag"),
    ],
)
def test_a_send_without_a_required_header_field_is_refused(
    ctx: BrokerContext, letter: str, name: str
) -> None:
    """SendMessageRequestHeaderV2's @CFNotNull fields: a Java broker refuses the request
    without one; defaults would store a message with a made-up born time or flag."""
    fields = {k: v for k, v in send_v2("TR").items() if k != letter}
    for code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
        answer = call(ctx, code, fields, b"x")
        assert answer.code == ResponseCode.SYSTEM_ERROR
        assert answer.remark == f"the request has no {name!r} field"
    assert ctx.store.max_offset("TR", 0) == 0
    optional = {k: v for k, v in send_v2("TR").items() if k not in "ijklmn"}
    assert call(ctx, RequestCode.SEND_MESSAGE_V2, optional, b"x").code == ResponseCode.SUCCESS


def test_an_illegal_message_is_answered_with_the_limits(ctx: BrokerContext) -> None:
    limit = ctx.store.config.max_message_size
    answer = call(ctx, RequestCode.SEND_MESSAGE_V2, send_v2("TB"), b"x" * (limit + 1))
    assert answer.code == ResponseCode.MESSAGE_ILLEGAL
    assert answer.remark == (
        "the message is illegal, maybe msg body or properties length not matched. "
        f"msg body length limit {limit}B, msg properties length limit 32767B. "
        f"(body of {limit + 1} bytes is over max_message_size ({limit}))"
    )


@pytest.mark.parametrize("max_num", [0, -1])
def test_query_for_no_message_finds_none(ctx: BrokerContext, max_num: int) -> None:
    """IndexFile.selectPhyOffset stops before its first hit when asked for none."""
    call(ctx, RequestCode.SEND_MESSAGE_V2, send_v2("TQ", properties="KEYS\x01k1\x02"), b"q")
    ctx.store.wait_dispatched()
    query = {"topic": "TQ", "key": "k1", "beginTimestamp": 0, "endTimestamp": 2**62}
    assert call(ctx, RequestCode.QUERY_MESSAGE, query | {"maxNum": 1}).code == 0
    none = call(ctx, RequestCode.QUERY_MESSAGE, query | {"maxNum": max_num})
    assert none.code == ResponseCode.QUERY_NOT_FOUND
