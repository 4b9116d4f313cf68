"""RocketMQ 5.x clients over gRPC: the official Python client (rocketmq-python-client 5.x)
against ``serve --grpc-listen``.

The client's import name ``rocketmq`` is also the 0.4.4 C++ client's (the conformance
extra), so it runs from a venv of its own, made once (``.venv-rmq5`` in the checkout,
under a lock for pytest-xdist's workers), in subprocesses (py5/client5.py).
"""

from __future__ import annotations

import base64
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
from rocketstore.store import MessageStore
from tests.conformance.conftest import ClientRun, ask_about_grpc_consumer, broker_options

TOPIC = "TopicGrpc"


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


def _finish(run: ClientRun, timeout_s: float = 90) -> list[dict[str, Any]]:
    lines = run.finish(timeout_s)
    assert run.process.returncode == 0, "\n".join(run.stderr[-40:])
    return lines


def test_send_is_the_record_remoting_writes(py5_client, grpc_server, tmp_path):
    sent = [
        line
        for line in _finish(py5_client("send", _endpoint(grpc_server), TOPIC, 3))
        if line["event"] == "sent"
    ]
    assert len(sent) == 3, sent
    # Read offline (a read-only open takes no lock: safe beside the serving broker).
    with MessageStore.open(str(tmp_path / "store"), read_only=True) as store:
        found = []
        for queue_id in range(4):
            result = store.get_messages("check", TOPIC, queue_id, 0, 32)
            if result.status is GetStatus.FOUND:
                found.extend(result.messages)
    by_id = {m.properties[props.UNIQ_KEY]: m for m in found}
    assert set(by_id) == {line["id"] for line in sent}
    for line in sent:
        record = by_id[line["id"]]
        i = line["index"]
        assert record.body == f"body-{i}".encode()
        assert record.tags == "TagA"
        assert sorted(props.split_keys(record.keys)) == [f"key-{i}", f"other-{i}"]
        assert props.user_properties(record.properties) == {"color": "red", "index": str(i)}
        # What a RocketMQ 5 proxy adds: the producer group (the topic), the born time
        # and host the client reported, reconsume times 0, the broker's cluster.
        assert record.properties[props.PGROUP] == TOPIC
        assert record.properties[props.CLUSTER] == "DefaultCluster"
        assert record.properties[props.RECONSUME_TIME] == "0"
        assert record.properties[props.BORN_TIMESTAMP] == str(record.born_timestamp)
        assert record.born_host.startswith("127.0.0.1:")
        assert line["offset"] == record.queue_offset


def test_message_group_keeps_one_queue(py5_client, grpc_server):
    _finish(py5_client("send", _endpoint(grpc_server), TOPIC, 4, "--group", "order-7"))
    store = grpc_server.broker.store
    assert store is not None
    counts = [store.max_offset(TOPIC, q) for q in range(4)]
    assert sorted(counts) == [0, 0, 0, 4], counts


def test_simple_consumer_receives_and_acks(py5_client, grpc_server):
    endpoint = _endpoint(grpc_server)
    sent = _finish(py5_client("send", endpoint, TOPIC, 4))
    ids = {line["id"] for line in sent if line["event"] == "sent"}
    got = _finish(py5_client("receive", endpoint, "GroupA", TOPIC, 4, 10, "ack", "--wait-s", 40))
    received = [line for line in got if line["event"] == "received"]
    assert {line["id"] for line in received} == ids
    for line in received:
        assert line["tag"] == "TagA"
        assert line["attempt"] == 1
        assert not line["corrupted"]
        assert line["properties"]["color"] == "red"
    assert len([line for line in got if line["event"] == "acked"]) == 4
    # Acknowledged: the group's offsets are past every message, and nothing comes again.
    ctx = grpc_server.broker.ctx
    assert ctx is not None
    store = grpc_server.broker.store
    assert store is not None
    for queue_id in range(4):
        assert ctx.offsets.query("GroupA", TOPIC, queue_id) == store.max_offset(TOPIC, queue_id)
    again = _finish(py5_client("receive", endpoint, "GroupA", TOPIC, 1, 10, "ack", "--wait-s", 6))
    assert [line for line in again if line["event"] == "received"] == []


def test_push_consumer_receives_and_acks(py5_client, grpc_server):
    """The 5.x PushConsumer (auto-renewed receives, acks after its listener returns). It
    failed every receive until the stream ended with the proxy's delivery timestamp."""
    endpoint = _endpoint(grpc_server)
    sent = _finish(py5_client("send", endpoint, TOPIC, 4))
    ids = {line["id"] for line in sent if line["event"] == "sent"}
    got = _finish(py5_client("push", endpoint, "GroupPush", TOPIC, 4, "--wait-s", 40))
    assert {line["id"] for line in got if line["event"] == "received"} == ids, got
    ctx = grpc_server.broker.ctx
    assert ctx is not None
    store = grpc_server.broker.store
    assert store is not None
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:  # the acks are asynchronous to the listener
        committed = [ctx.offsets.query("GroupPush", TOPIC, q) for q in range(4)]
        if committed == [store.max_offset(TOPIC, q) for q in range(4)]:
            break
        time.sleep(0.2)
    assert committed == [store.max_offset(TOPIC, q) for q in range(4)]


def test_unacknowledged_message_comes_back_after_invisible_time(py5_client, grpc_server):
    endpoint = _endpoint(grpc_server)
    sent = _finish(py5_client("send", endpoint, TOPIC, 1))
    (message_id,) = [line["id"] for line in sent if line["event"] == "sent"]
    first = _finish(py5_client("receive", endpoint, "GroupB", TOPIC, 1, 10, "noack"))
    (taken,) = [line for line in first if line["event"] == "received"]
    assert taken["id"] == message_id and taken["attempt"] == 1
    # Invisible for 10 s (the proxy's least): then delivered again, its attempt counted.
    second = _finish(py5_client("receive", endpoint, "GroupB", TOPIC, 1, 10, "ack", "--wait-s", 40))
    received = [line for line in second if line["event"] == "received"]
    assert len(received) == 1, second
    (again,) = received
    assert again["id"] == message_id
    assert again["attempt"] == 2
    # (client-side times: the first one taken after the answer arrived, late under load)
    assert again["received_ms"] - taken["received_ms"] >= 9_000


def test_unknown_topic_is_refused_with_the_proxy_code(py5_client, grpc_server):
    lines = _finish(py5_client("send", _endpoint(grpc_server), "NoSuchTopic", 1))
    errors = [line for line in lines if line["event"] == "error"]
    assert len(errors) == 1, lines
    assert "NoSuchTopic" in errors[0]["text"]
    assert not [line for line in lines if line["event"] == "sent"]
    # The client reports a failed route fetch; the codes it was given, asked directly:
    import grpc

    from rocketstore.broker.grpc.protocol import rocketmq_v2_service_pb2 as spb
    from rocketstore.broker.grpc.protocol import rocketmq_v2_service_pb2_grpc as spb_grpc
    from rocketstore.broker.grpc.protocol import rocketmq_v2_types_pb2 as pb

    with grpc.insecure_channel(_endpoint(grpc_server)) as channel:
        stub = spb_grpc.MessagingServiceStub(channel)
        topic = pb.Resource(name="NoSuchTopic")
        route = stub.QueryRoute(spb.QueryRouteRequest(topic=topic), timeout=10)
        assert route.status.code == pb.Code.TOPIC_NOT_FOUND
        # TopicRouteService's MQClientException message, as ResponseBuilder passes it on.
        assert route.status.message.startswith(
            "CODE: 17  DESC: No topic route info in name server for the topic: NoSuchTopic\n"
        )
        message = pb.Message(
            topic=topic,
            body=b"x",
            system_properties=pb.SystemProperties(message_id="01ABCDEF"),
        )
        sent = stub.SendMessage(spb.SendMessageRequest(messages=[message]), timeout=10)
        assert sent.status.code == pb.Code.TOPIC_NOT_FOUND
        bad = pb.Resource(name="bad topic!")
        refused = stub.QueryRoute(spb.QueryRouteRequest(topic=bad), timeout=10)
        assert refused.status.code == pb.Code.ILLEGAL_TOPIC
        forged = stub.AckMessage(
            spb.AckMessageRequest(
                group=pb.Resource(name="GroupA"),
                topic=pb.Resource(name=TOPIC),
                entries=[
                    spb.AckMessageEntry(message_id="01", receipt_handle="0 1 2 0 0 broker-a 0 5")
                ],
            ),
            timeout=10,
        )
        assert forged.entries[0].status.code == pb.Code.INVALID_RECEIPT_HANDLE


def test_4x_and_5x_clients_see_the_same_messages(py_client, py5_client, grpc_server):
    """A 5.x producer's messages pushed to a 4.x consumer (remoting), and a 4.x producer's
    received over gRPC: the same ids, bodies, tags, keys and properties both ways."""
    endpoint = _endpoint(grpc_server)
    sent5 = [
        line for line in _finish(py5_client("send", endpoint, TOPIC, 3)) if line["event"] == "sent"
    ]
    run = py_client(
        "consume", grpc_server.namesrv_address, TOPIC, "Group4x", "--expect", 3, "--seconds", 40
    )
    received4 = [line for line in run.finish(70) if line["event"] == "recv"]
    by_id = {line["id"]: line for line in received4}
    assert set(by_id) == {line["id"] for line in sent5}, run.stderr[-10:]
    for line in sent5:
        got = by_id[line["id"]]
        assert base64.b64decode(got["body_b64"]) == f"body-{line['index']}".encode()
        assert got["tags"] == "TagA"
        assert sorted(got["keys"].split()) == [f"key-{line['index']}", f"other-{line['index']}"]

    sent4 = [
        line
        for line in py_client("produce", grpc_server.namesrv_address, "Topic4x", 3).finish(60)
        if line["event"] == "sent"
    ]
    assert len(sent4) == 3
    got5 = _finish(
        py5_client("receive", endpoint, "Group5x", "Topic4x", 3, 10, "ack", "--wait-s", 40)
    )
    received5 = {line["id"]: line for line in got5 if line["event"] == "received"}
    assert set(received5) == {line["msg_id"] for line in sent4}
    for line in sent4:
        got = received5[line["msg_id"]]
        assert got["body"].encode() == base64.b64decode(line["body_b64"])
        assert got["tag"] == f"tag{line['i'] % 3}"
        assert got["keys"] == sorted([f"key-{line['i']}", "shared-key"])
        assert got["properties"] == {"custom": f"v{line['i']}"}
        assert got["attempt"] == 1 and not got["corrupted"]


def test_transactional_messages_commit_and_roll_back(py5_client, grpc_server):
    endpoint = _endpoint(grpc_server)
    committed = _finish(py5_client("transact", endpoint, TOPIC, "commit"))
    rolled_back = _finish(py5_client("transact", endpoint, TOPIC, "rollback"))
    assert [line["event"] for line in committed] == ["sent", "ended"], committed
    assert [line["event"] for line in rolled_back] == ["sent", "ended"], rolled_back
    got = _finish(py5_client("receive", endpoint, "GroupTx", TOPIC, 2, 10, "ack", "--wait-s", 25))
    received = [line for line in got if line["event"] == "received"]
    # The committed one only, under the id the producer was given.
    assert [(line["id"], line["body"]) for line in received] == [(committed[0]["id"], "tx-commit")]


def test_an_orphaned_transaction_is_checked_over_telemetry(py5_client, tmp_path):
    """A half message its producer never ended: the broker's transaction check asks a
    5.x producer of the topic (RecoverOrphanedTransactionCommand on its telemetry
    stream); its checker's COMMIT ends it and the message is delivered."""
    options = broker_options(
        tmp_path / "store", transaction_timeout_ms=1000, transaction_check_interval_ms=1000
    )
    options.grpc_listen = "127.0.0.1:0"
    with BackgroundServer(options) as server:
        assert server.broker.ctx is not None
        server.broker.ctx.topics.update(TopicConfig(TOPIC))
        endpoint = _endpoint(server)
        left = _finish(py5_client("transact", endpoint, TOPIC, "none"))
        assert [line["event"] for line in left] == ["sent", "ended"], left
        checker = py5_client("checker", endpoint, TOPIC, 25)
        checked = checker.wait_for("checked", 1, 30)
        assert [line["id"] for line in checked][:1] == [left[0]["id"]], checker.stderr[-20:]
        got = _finish(py5_client("receive", endpoint, "GroupOrphan", TOPIC, 1, 10, "ack"))
        received = [line for line in got if line["event"] == "received"]
        assert [(line["id"], line["body"]) for line in received] == [(left[0]["id"], "tx-none")]
        checker.finish(40)


def test_fifo_group_delivers_a_message_group_in_order_one_at_a_time(py5_client, grpc_server):
    """A FIFO consumer group (consumeMessageOrderly, as mqadmin updateSubGroup -o true
    sets it): a message group's messages come in send order, the next only after the one
    before is acknowledged; one left unacknowledged comes again first, its attempt
    counted, and blocks what follows until then."""
    from rocketstore.broker.subscription_groups import SubscriptionGroupConfig

    ctx = grpc_server.broker.ctx
    assert ctx is not None
    ctx.groups.update(SubscriptionGroupConfig("GroupFifo", consume_message_orderly=True))
    endpoint = _endpoint(grpc_server)
    sent = [
        line["id"]
        for line in _finish(py5_client("send", endpoint, TOPIC, 4, "--group", "order-1"))
        if line["event"] == "sent"
    ]
    assert len(sent) == 4
    first = _finish(
        py5_client("receive", endpoint, "GroupFifo", TOPIC, 1, 10, "noack", "--batch", 1)
    )
    assert [line["id"] for line in first if line["event"] == "received"] == sent[:1]
    rest = _finish(
        py5_client(
            "receive", endpoint, "GroupFifo", TOPIC, 4, 10, "ack", "--batch", 1, "--wait-s", 40
        )
    )
    received = [line for line in rest if line["event"] == "received"]
    # The first again (after its 10 s), then the others in order, each once.
    assert [line["id"] for line in received] == sent, rest
    assert [line["attempt"] for line in received] == [2, 1, 1, 1]
    assert all(line["group"] == "order-1" for line in received)


def test_the_producer_recalls_a_timer_message(py5_client, grpc_server):
    """Producer.recall_message with the handle its send got (recallMessageEnable on): the
    recalled message never comes, the other one due at the same time does."""
    assert grpc_server.broker.ctx is not None
    grpc_server.broker.ctx.config.recall_message_enable = True
    endpoint = _endpoint(grpc_server)
    lines = _finish(py5_client("send", endpoint, TOPIC, 2, "--delay-ms", 3000, "--recall", 1))
    sent = [line["id"] for line in lines if line["event"] == "sent"]
    recalled = [line for line in lines if line["event"].startswith("recall")]
    assert len(sent) == 2, lines
    assert recalled == [{"event": "recalled", "index": 0, "id": sent[0]}], recalled
    run = py5_client("receive", endpoint, "GroupRecall", TOPIC, 2, 30, "ack", "--wait-s", 15)
    received = [line["id"] for line in _finish(run) if line["event"] == "received"]
    assert received == [sent[1]]


def test_thread_stack_and_verify_requests_to_the_python_client_time_out(py5_client, grpc_server):
    """The official Python client handles neither the thread stack nor the verify
    command: mqadmin gets the proxy's answer once the relay timeout has run out
    (SYSTEM_BUSY "call remote timeout"), not a hang."""
    endpoint = _endpoint(grpc_server)
    service = grpc_server.broker.grpc_server.service
    service.relays.timeout_s = 2.0
    sent = [e for e in _finish(py5_client("send", endpoint, TOPIC, 1)) if e["event"] == "sent"]
    store = grpc_server.broker.store
    store.wait_dispatched()
    stored = [
        m
        for queue_id in range(8)
        for m in store.get_messages("check", TOPIC, queue_id, 0, 4).messages
        if m.properties[props.UNIQ_KEY] == sent[0]["id"]
    ]
    run = py5_client("idle", endpoint, "GroupPyAdmin", TOPIC, 60)
    try:
        (started,) = run.wait_for("started", 1, 60)
        client = started["client_id"]
        for code, fields in (
            (RequestCode.GET_CONSUMER_RUNNING_INFO, {"jstackEnable": "true"}),
            (RequestCode.CONSUME_MESSAGE_DIRECTLY, {"msgId": stored[0].msg_id}),
        ):
            began = time.monotonic()
            answer = ask_about_grpc_consumer(grpc_server, code, "GroupPyAdmin", client, **fields)
            assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_BUSY, "call remote timeout")
            assert 1.9 <= time.monotonic() - began < 9
    finally:
        run.process.kill()
        run.finish(10)


def test_a_send_short_of_its_replication_fails_as_against_the_proxy(py5_client, tmp_path):
    """A SYNC_MASTER without a slave stores each send and answers SLAVE_NOT_AVAILABLE; the
    proxy's HA_NOT_AVAILABLE (no message id) makes the client retry, then raise."""
    options = broker_options(tmp_path / "store", broker_role="SYNC_MASTER")
    options.grpc_listen = "127.0.0.1:0"
    with BackgroundServer(options) as server:
        assert server.broker.ctx is not None
        server.broker.ctx.topics.update(TopicConfig(TOPIC))
        lines = _finish(py5_client("send", _endpoint(server), TOPIC, 1))
        # The overall status's message is the code's name, as the proxy's.
        assert lines == [
            {"event": "error", "index": 0, "code": 50002, "text": "50002, HA_NOT_AVAILABLE"}
        ]
        store = server.broker.store
        assert store is not None
        # Each of its three attempts stored (a queue each), as against RocketMQ 5.3.3.
        assert sum(store.max_offset(TOPIC, q) for q in range(4)) == 3
