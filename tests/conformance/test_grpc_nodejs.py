"""The official RocketMQ 5.x Node.js client (rocketmq-client-nodejs 1.0.8, gRPC) against
``serve --grpc-listen``: a producer's messages received and acknowledged by a
SimpleConsumer and consumed by a PushConsumer (auto-renew receives), read by a 4.x-side
view of the store as the same records, and a delivery timestamp honoured."""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("grpc", reason="the grpc extra is not installed (pip install -e '.[grpc]')")

from rocketstore.broker.app import BackgroundServer
from rocketstore.broker.codes import RequestCode, ResponseCode
from rocketstore.broker.topic_config import TopicConfig
from rocketstore.format import properties as props
from rocketstore.status import GetStatus
from tests.conformance.conftest import ClientRun, ask_about_grpc_consumer, broker_options

TOPIC = "TopicNode"


@pytest.fixture
def grpc_server(tmp_path: Path) -> Iterator[BackgroundServer]:
    options = broker_options(tmp_path / "store")
    options.grpc_listen = "127.0.0.1:0"
    with BackgroundServer(options) as running:
        assert running.broker.ctx is not None
        running.broker.ctx.topics.update(TopicConfig(TOPIC))
        yield running


def _endpoint(server: BackgroundServer) -> str:
    assert server.broker.grpc_server is not None
    return server.broker.grpc_server.address


def _finish(run: ClientRun, timeout_s: float = 110) -> list[dict[str, Any]]:
    lines = run.finish(timeout_s)
    assert run.process.returncode == 0, "\n".join(run.stderr[-40:])
    return lines


def test_send_receive_ack_with_the_nodejs_client(js5_client: Any, grpc_server: Any) -> None:
    endpoint = _endpoint(grpc_server)
    sent = [e for e in _finish(js5_client("send", endpoint, TOPIC, 4)) if e["event"] == "sent"]
    assert len(sent) == 4, sent
    store = grpc_server.broker.store
    store.wait_dispatched()
    records = {}
    for queue_id in range(4):
        got = store.get_messages("check", TOPIC, queue_id, 0, 32)
        if got.status is GetStatus.FOUND:
            records.update({m.properties[props.UNIQ_KEY]: m for m in got.messages})
    assert set(records) == {e["id"] for e in sent}
    for line in sent:
        record = records[line["id"]]
        assert record.body == f"js-body-{line['index']}".encode()
        assert record.tags == "TagJs" and record.keys == f"key-{line['index']}"
        assert props.user_properties(record.properties) == {
            "lang": "js",
            "index": str(line["index"]),
        }
    lines = _finish(js5_client("receive", endpoint, "GroupNode", TOPIC, 4, 40))
    received = {e["id"]: e for e in lines if e["event"] == "received"}
    assert set(received) == set(records)
    for line in received.values():
        assert line["attempt"] == 1 and line["tag"] == "TagJs"
        assert line["properties"]["lang"] == "js"
    assert len([e for e in lines if e["event"] == "acked"]) == 4
    ctx = grpc_server.broker.ctx
    for queue_id in range(4):  # acknowledged: the group's offsets are at each queue's end
        assert ctx.offsets.query("GroupNode", TOPIC, queue_id) == store.max_offset(TOPIC, queue_id)


def test_push_consumer_and_a_delivery_timestamp(js5_client: Any, grpc_server: Any) -> None:
    endpoint = _endpoint(grpc_server)
    plain = [e for e in _finish(js5_client("send", endpoint, TOPIC, 2)) if e["event"] == "sent"]
    timed = [
        e for e in _finish(js5_client("send", endpoint, TOPIC, 1, 4000)) if e["event"] == "sent"
    ]
    assert len(plain) == 2 and len(timed) == 1
    lines = _finish(js5_client("push", endpoint, "GroupNodePush", TOPIC, 3, 60))
    consumed = {e["id"]: e for e in lines if e["event"] == "consumed"}
    assert set(consumed) == {e["id"] for e in plain + timed}, lines
    (late,) = timed
    assert consumed[late["id"]]["received_ms"] >= late["deliver_ms"]
    assert consumed[late["id"]]["delivery_ms"] == late["deliver_ms"]  # to the millisecond


def test_thread_stack_and_verify_requests_reach_the_nodejs_client(js5_client, grpc_server):
    """mqadmin's consumerStatus -s and queryMsgById -d about a Node.js consumer, relayed
    over its telemetry stream as the proxy relays them. The client answers the thread
    stack request with its 'mock stack'; a verify request it answers with a
    VerifyMessageCommand (status NOT_IMPLEMENTED), not the VerifyMessageResult the proxy
    waits for, so the proxy's relay timeout answers that one: SYSTEM_BUSY."""
    endpoint = _endpoint(grpc_server)
    service = grpc_server.broker.grpc_server.service
    service.relays.timeout_s = 2.0
    sent = [e for e in _finish(js5_client("send", endpoint, TOPIC, 1)) if e["event"] == "sent"]
    store = grpc_server.broker.store
    store.wait_dispatched()
    stored = [
        m
        for queue_id in range(4)
        for m in store.get_messages("check", TOPIC, queue_id, 0, 4).messages
        if m.properties[props.UNIQ_KEY] == sent[0]["id"]
    ]
    run = js5_client("idle", endpoint, "GroupNodeAdmin", TOPIC, 60)
    try:
        (started,) = run.wait_for("started", 1, 60)
        client = started["client_id"]
        ask = functools.partial(ask_about_grpc_consumer, grpc_server)
        running = ask(
            RequestCode.GET_CONSUMER_RUNNING_INFO, "GroupNodeAdmin", client, jstackEnable="true"
        )
        assert (running.code, running.remark) == (ResponseCode.SUCCESS, "")
        assert json.loads(running.body)["jstack"] == "mock stack"
        began = time.monotonic()
        direct = ask(
            RequestCode.CONSUME_MESSAGE_DIRECTLY, "GroupNodeAdmin", client, msgId=stored[0].msg_id
        )
        assert (direct.code, direct.remark) == (ResponseCode.SYSTEM_BUSY, "call remote timeout")
        assert time.monotonic() - began >= 1.9
        other = ask(
            RequestCode.GET_CONSUMER_RUNNING_INFO, "GroupOther", client, jstackEnable="true"
        )
        assert other.code == ResponseCode.SYSTEM_ERROR and "not online" in other.remark
    finally:
        run.process.kill()
        run.finish(10)


def test_a_send_short_of_its_replication_fails_as_against_the_proxy(
    js5_client: Any, tmp_path: Path
) -> None:
    """A SYNC_MASTER without a slave stores each send and answers SLAVE_NOT_AVAILABLE:
    this client raises the proxy's entry words (the Python client the response's) after
    its three attempts, each stored."""
    options = broker_options(tmp_path / "store", broker_role="SYNC_MASTER")
    options.grpc_listen = "127.0.0.1:0"
    with BackgroundServer(options) as server:
        assert server.broker.ctx is not None
        server.broker.ctx.topics.update(TopicConfig(TOPIC))
        lines = _finish(js5_client("send", _endpoint(server), TOPIC, 1))
        text = "send message failed, sendStatus=SLAVE_NOT_AVAILABLE"
        assert lines == [
            {
                "event": "error",
                "index": 0,
                "code": 50002,
                "text": f"[request-id=undefined, response-code=50002] {text}",
            }
        ]
        store = server.broker.store
        assert store is not None
        assert sum(store.max_offset(TOPIC, q) for q in range(4)) == 3
