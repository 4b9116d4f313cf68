"""The admin's thread-stack and verify requests relayed to a 5.x client over its telemetry
stream (RocketMQ 5.3.3's GrpcClientChannel / ClientActivity): the answers' codes and
bodies, and the whole path through a background broker's remoting and gRPC ports with a
hand-driven telemetry stream."""

from __future__ import annotations

import asyncio
import json
import queue
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("grpc")

import grpc

from rocketstore.broker.app import BackgroundServer, BrokerOptions
from rocketstore.broker.codes import RequestCode, ResponseCode
from rocketstore.broker.grpc import relay
from rocketstore.broker.grpc.protocol import rocketmq_v2_service_pb2 as spb
from rocketstore.broker.grpc.protocol import rocketmq_v2_service_pb2_grpc as spb_grpc
from rocketstore.broker.grpc.protocol import rocketmq_v2_types_pb2 as pb
from rocketstore.broker.topic_config import TopicConfig
from rocketstore.config import StoreConfig
from rocketstore.remoting.blocking import invoke_sync, request


def test_a_thread_stack_answer_is_a_running_info_with_the_stack() -> None:
    ok = relay.thread_stack_answer(pb.Code.OK, "main\n  at x")
    assert (ok.code, ok.remark) == (ResponseCode.SUCCESS, "")
    assert ok.body == (
        b'{"jstack":"main\\n  at x","mqPopTable":{},"mqTable":{},"properties":{},'
        b'"statusTable":{},"subscriptionSet":[],"userConsumerInfo":{}}'
    )
    fifo = relay.thread_stack_answer(pb.Code.VERIFY_FIFO_MESSAGE_UNSUPPORTED, "")
    assert (fifo.code, fifo.remark) == (ResponseCode.NO_PERMISSION, "forbidden to verify message")
    for code in (0, pb.Code.NOT_IMPLEMENTED, pb.Code.INTERNAL_ERROR):
        failed = relay.thread_stack_answer(code, "s")
        assert (failed.code, failed.remark, failed.body) == (
            ResponseCode.SYSTEM_ERROR,
            "verify message failed",
            b"",
        )


def test_a_verify_answer_maps_the_status_to_a_consume_result() -> None:
    for code, result in (
        (pb.Code.OK, "CR_SUCCESS"),
        (pb.Code.FAILED_TO_CONSUME_MESSAGE, "CR_LATER"),
        (pb.Code.MESSAGE_CORRUPTED, "CR_RETURN_NULL"),
        (pb.Code.NOT_IMPLEMENTED, None),
    ):
        answer = relay.verify_answer(code)
        assert answer.code == ResponseCode.SUCCESS
        body = json.loads(answer.body)
        assert body.get("consumeResult") == result
        assert body["remark"] == "from gRPC client" and body["autoCommit"] is True
    assert relay.verify_answer(pb.Code.OK).body == (
        b'{"autoCommit":true,"consumeResult":"CR_SUCCESS","order":false,'
        b'"remark":"from gRPC client","spentTimeMills":0}'
    )


def test_a_nonce_is_answered_once_and_an_unanswered_one_times_out() -> None:
    async def run() -> None:
        relays = relay.Relays()
        relays.timeout_s = 0.05
        nonce, answer = relays.add()
        other, late = relays.add()
        assert nonce != other and len(relays) == 2
        assert relays.resolve(nonce, relay.verify_answer(pb.Code.OK))
        assert not relays.resolve(nonce, relay.verify_answer(pb.Code.OK))
        assert not relays.resolve("no-such-nonce", relay.verify_answer(pb.Code.OK))
        assert (await answer).code == ResponseCode.SUCCESS
        timed_out = await asyncio.wait_for(late, 5)
        assert (timed_out.code, timed_out.remark) == (
            ResponseCode.SYSTEM_BUSY,
            "call remote timeout",
        )
        assert len(relays) == 0

    asyncio.run(run())


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[BackgroundServer, Any]]:
    options = BrokerOptions(
        str(tmp_path / "store"),
        listen="127.0.0.1:0",
        store_config=StoreConfig(mapped_file_size_commit_log=16 * 1024 * 1024),
        grpc_listen="127.0.0.1:0",
    )
    with BackgroundServer(options) as server:
        ctx, grpc_server = server.broker.ctx, server.broker.grpc_server
        assert ctx is not None and grpc_server is not None and grpc_server.service is not None
        ctx.topics.update(TopicConfig("T", read_queue_nums=1, write_queue_nums=1))
        grpc_server.service.relays.timeout_s = 1.0
        with grpc.insecure_channel(grpc_server.address) as channel:
            yield server, spb_grpc.MessagingServiceStub(channel)


class _Client:
    """A consumer's telemetry stream driven by hand: the settings sent, and what the
    server sends it collected on a thread."""

    def __init__(self, stub: Any, client: str, group: str) -> None:
        self.outgoing: queue.Queue[spb.TelemetryCommand | None] = queue.Queue()
        self.incoming: queue.Queue[spb.TelemetryCommand] = queue.Queue()
        entry = pb.SubscriptionEntry(
            topic=pb.Resource(name="T"),
            expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="a || b"),
        )
        settings = pb.Settings(
            client_type=pb.ClientType.PUSH_CONSUMER,
            subscription=pb.Subscription(group=pb.Resource(name=group), subscriptions=[entry]),
        )
        self.outgoing.put(spb.TelemetryCommand(settings=settings))
        metadata = (("x-mq-client-id", client), ("x-mq-language", "PYTHON"))
        self.stream = stub.Telemetry(iter(self.outgoing.get, None), metadata=metadata)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        assert self.next().WhichOneof("command") == "settings"

    def _read(self) -> None:
        try:
            for command in self.stream:
                self.incoming.put(command)
        except grpc.RpcError:
            pass

    def next(self) -> spb.TelemetryCommand:
        return self.incoming.get(timeout=10)

    def close(self) -> None:
        self.outgoing.put(None)
        self.reader.join(10)


def _ask(server: BackgroundServer, code: int, fields: dict[str, str]) -> Any:
    return invoke_sync(server.broker_address, request(code, fields), 15)


def test_thread_stack_and_verify_through_the_telemetry_stream(served):
    server, stub = served
    client = _Client(stub, "c-1", "G")
    try:
        ask = {"consumerGroup": "G", "clientId": "c-1", "jstackEnable": "true"}
        with ThreadPoolExecutor(1) as pool:
            pending = pool.submit(_ask, server, RequestCode.GET_CONSUMER_RUNNING_INFO, ask)
            command = client.next()
            assert command.WhichOneof("command") == "print_thread_stack_trace_command"
            nonce = command.print_thread_stack_trace_command.nonce
            trace = spb.ThreadStackTrace(nonce=nonce, thread_stack_trace="stack of c-1")
            client.outgoing.put(
                spb.TelemetryCommand(status=pb.Status(code=pb.Code.OK), thread_stack_trace=trace)
            )
            answer = pending.result(15)
        assert answer.code == ResponseCode.SUCCESS
        assert json.loads(answer.body)["jstack"] == "stack of c-1"

        sent = spb.SendMessageRequest(
            messages=[
                pb.Message(
                    topic=pb.Resource(name="T"),
                    body=b"verify me",
                    system_properties=pb.SystemProperties(
                        message_id="01VERIFY", body_encoding=pb.Encoding.IDENTITY
                    ),
                )
            ]
        )
        (entry,) = stub.SendMessage(sent).entries
        assert entry.status.code == pb.Code.OK
        store = server.broker.store
        store.wait_dispatched()
        (stored,) = store.get_messages("g", "T", 0, 0, 1).messages
        direct = {"consumerGroup": "G", "clientId": "c-1", "msgId": stored.msg_id}
        with ThreadPoolExecutor(1) as pool:
            pending = pool.submit(_ask, server, RequestCode.CONSUME_MESSAGE_DIRECTLY, direct)
            command = client.next()
            assert command.WhichOneof("command") == "verify_message_command"
            verify = command.verify_message_command
            assert verify.message.body == b"verify me"
            assert verify.message.system_properties.message_id == "01VERIFY"
            result = spb.VerifyMessageResult(nonce=verify.nonce)
            client.outgoing.put(
                spb.TelemetryCommand(
                    status=pb.Status(code=pb.Code.FAILED_TO_CONSUME_MESSAGE),
                    verify_message_result=result,
                )
            )
            answer = pending.result(15)
        assert answer.code == ResponseCode.SUCCESS
        assert json.loads(answer.body)["consumeResult"] == "CR_LATER"

        # Unanswered: the proxy's SYSTEM_BUSY once the relay timeout has run out.
        started = time.monotonic()
        quiet = _ask(server, RequestCode.GET_CONSUMER_RUNNING_INFO, ask)
        assert (quiet.code, quiet.remark) == (ResponseCode.SYSTEM_BUSY, "call remote timeout")
        assert 0.9 <= time.monotonic() - started < 8
        assert client.next().WhichOneof("command") == "print_thread_stack_trace_command"

        # Another group's client id, and a client not connected: not online.
        for group, client_id in (("OtherGroup", "c-1"), ("G", "c-2")):
            gone = _ask(
                server,
                RequestCode.GET_CONSUMER_RUNNING_INFO,
                {**ask, "consumerGroup": group, "clientId": client_id},
            )
            assert (gone.code, gone.remark) == (
                ResponseCode.SYSTEM_ERROR,
                f"The Consumer <{group}> <{client_id}> not online",
            )
    finally:
        client.close()
    service = server.broker.grpc_server.service
    deadline = time.monotonic() + 10
    while service.live_clients and time.monotonic() < deadline:
        time.sleep(0.02)
    gone = _ask(server, RequestCode.GET_CONSUMER_RUNNING_INFO, ask)
    assert (gone.code, gone.remark) == (
        ResponseCode.SYSTEM_ERROR,
        "The Consumer <G> <c-1> not online",
    )
    assert len(service.relays) == 0


def test_a_grpc_consumer_is_in_the_groups_connection_list(served):
    """mqadmin's consumerConnection (and consumerStatus, which starts from it) lists a
    5.x consumer as the proxy registers it: its client id, address and language, the
    proxy's own version, CLUSTERING, CONSUME_FROM_LAST_OFFSET, its subscriptions."""
    server, stub = served
    assert _ask(server, RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "G"}).code == (
        ResponseCode.CONSUMER_NOT_ONLINE
    )
    client = _Client(stub, "c-4", "G")
    try:
        answer = _ask(server, RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "G"})
        assert answer.code == ResponseCode.SUCCESS
        body = json.loads(answer.body)
        (connection,) = body["connectionSet"]
        assert connection["clientId"] == "c-4" and connection["language"] == "PYTHON"
        assert connection["clientAddr"].startswith("127.0.0.1:") and connection["version"] == 479
        assert body["consumeType"] == "CONSUME_PASSIVELY"
        assert body["messageModel"] == "CLUSTERING"
        assert body["consumeFromWhere"] == "CONSUME_FROM_LAST_OFFSET"
        sub = body["subscriptionTable"]["T"]
        assert (sub["subString"], sub["expressionType"], sorted(sub["tagsSet"])) == (
            "a || b",
            "TAG",
            ["a", "b"],
        )
        assert sorted(sub["codeSet"]) == sorted([97, 98])  # String.hashCode of "a", "b"
    finally:
        client.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        gone = _ask(server, RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "G"})
        if gone.code == ResponseCode.CONSUMER_NOT_ONLINE:
            break
        time.sleep(0.05)
    assert gone.code == ResponseCode.CONSUMER_NOT_ONLINE


def test_running_info_without_jstack_waits_out_the_brokers_call(served, monkeypatch):
    """The proxy sends nothing for GET_CONSUMER_RUNNING_INFO without jstack, so the
    broker's own wait (10 s; lowered here) ends it: CONSUME_MSG_TIMEOUT."""
    from rocketstore.broker.processors import client_calls

    monkeypatch.setattr(client_calls, "CALL_CLIENT_TIMEOUT_S", 0.5)
    server, stub = served
    client = _Client(stub, "c-3", "G")
    try:
        ask = {"consumerGroup": "G", "clientId": "c-3", "jstackEnable": "false"}
        answer = _ask(server, RequestCode.GET_CONSUMER_RUNNING_INFO, ask)
        assert (answer.code, answer.remark) == (
            ResponseCode.CONSUME_MSG_TIMEOUT,
            "consumer <G> <c-3> Timeout: no answer in 0.5 s",
        )
        assert client.incoming.empty()
    finally:
        client.close()
