"""MessagingService through grpcio on loopback (a background broker), with our own stubs:
the paths the real-client conformance tests cannot reach quickly (invisible times under
the proxy's 10 s, max delivery attempts, the DLQ, malformed input)."""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import queue
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("grpc")

import grpc

from rocketstore.broker.app import BackgroundServer, BrokerOptions
from rocketstore.broker.grpc.protocol import rocketmq_v2_service_pb2 as spb
from rocketstore.broker.grpc.protocol import rocketmq_v2_service_pb2_grpc as spb_grpc
from rocketstore.broker.grpc.protocol import rocketmq_v2_types_pb2 as pb
from rocketstore.broker.subscription_groups import SubscriptionGroupConfig
from rocketstore.broker.topic_config import TopicConfig
from rocketstore.config import StoreConfig
from rocketstore.format import properties as props
from rocketstore.status import GetStatus, PutStatus

TOPIC = pb.Resource(name="T")
GROUP = pb.Resource(name="G")


def _options(root: Path) -> BrokerOptions:
    return BrokerOptions(
        str(root),
        listen="127.0.0.1:0",
        store_config=StoreConfig(mapped_file_size_commit_log=16 * 1024 * 1024),
        grpc_listen="127.0.0.1:0",
    )


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[BackgroundServer, Any]]:
    with _serving(tmp_path / "store") as pair:
        yield pair


@contextlib.contextmanager
def _serving(root: Path) -> Iterator[tuple[BackgroundServer, Any]]:
    with BackgroundServer(_options(root)) as server:
        ctx = server.broker.ctx
        grpc_server = server.broker.grpc_server
        assert ctx is not None and grpc_server is not None and grpc_server.service is not None
        ctx.topics.update(TopicConfig("T", read_queue_nums=1, write_queue_nums=1))
        ctx.groups.update(SubscriptionGroupConfig("G", retry_max_times=1))
        grpc_server.service.min_invisible_ms = 500
        with grpc.insecure_channel(grpc_server.address) as channel:
            yield server, spb_grpc.MessagingServiceStub(channel)


def _send(stub: Any, body: bytes, message_id: str) -> spb.SendMessageResponse:
    message = pb.Message(
        topic=TOPIC,
        body=body,
        system_properties=pb.SystemProperties(message_id=message_id, tag="t"),
    )
    answer: spb.SendMessageResponse = stub.SendMessage(
        spb.SendMessageRequest(messages=[message]), timeout=10
    )
    return answer


def _receive(stub: Any, invisible_ms: int = 500, polling_s: int = 5) -> list[pb.Message]:
    request = spb.ReceiveMessageRequest(
        group=GROUP,
        message_queue=pb.MessageQueue(topic=TOPIC, id=0),
        filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"),
        batch_size=16,
    )
    request.invisible_duration.FromMilliseconds(invisible_ms)
    request.long_polling_timeout.FromSeconds(polling_s)
    answers = list(stub.ReceiveMessage(request, timeout=polling_s + 5))
    assert answers[0].WhichOneof("content") == "status"
    # Last, as the proxy ends every receive: the time it answered (5.x clients' metrics).
    assert answers[-1].WhichOneof("content") == "delivery_timestamp"
    assert abs(answers[-1].delivery_timestamp.ToMilliseconds() - time.time() * 1000) < 60_000
    return [a.message for a in answers if a.WhichOneof("content") == "message"]


def _dlq(server: BackgroundServer, expect: int) -> list[str]:
    """The UNIQ_KEYs in %DLQ%G once ``expect`` are there (the dispatch is asynchronous)."""
    store = server.broker.store
    assert store is not None
    deadline = time.monotonic() + 10
    while store.max_offset("%DLQ%G", 0) < expect and time.monotonic() < deadline:
        time.sleep(0.02)
    if store.max_offset("%DLQ%G", 0) == 0:
        return []
    result = store.get_messages("check", "%DLQ%G", 0, 0, 32)
    assert result.status is GetStatus.FOUND
    return [m.properties[props.UNIQ_KEY] for m in result.messages]


def test_past_max_attempts_a_message_moves_to_the_dlq(served):
    server, stub = served
    assert _send(stub, b"m", "01AA").status.code == pb.Code.OK
    (first,) = _receive(stub)
    assert first.system_properties.delivery_attempt == 1
    started = time.monotonic()
    (second,) = _receive(stub)  # held until the first delivery's invisible time ran out
    assert time.monotonic() - started >= 0.3
    assert second.system_properties.delivery_attempt == 2
    assert second.system_properties.message_id == "01AA"
    # retryMaxTimes 1: two deliveries, then the DLQ instead of a third.
    assert _receive(stub, polling_s=2) == []
    assert _dlq(server, 1) == ["01AA"]
    ctx = server.broker.ctx
    assert ctx is not None
    assert ctx.offsets.query("G", "T", 0) == 1  # nothing of the group left in flight


def test_forward_to_dlq_and_change_invisible_duration(served):
    server, stub = served
    _send(stub, b"a", "01AB")
    (taken,) = _receive(stub, invisible_ms=5000)
    handle = taken.system_properties.receipt_handle
    change = spb.ChangeInvisibleDurationRequest(
        group=GROUP, topic=TOPIC, receipt_handle=handle, message_id="01AB"
    )
    change.invisible_duration.FromSeconds(30)
    renewed = stub.ChangeInvisibleDuration(change, timeout=10)
    assert renewed.status.code == pb.Code.OK and renewed.receipt_handle != handle
    again = stub.ChangeInvisibleDuration(change, timeout=10)  # the old handle
    assert again.status.code == pb.Code.INVALID_RECEIPT_HANDLE
    forward = spb.ForwardMessageToDeadLetterQueueRequest(
        group=GROUP,
        topic=TOPIC,
        receipt_handle=renewed.receipt_handle,
        message_id="01AB",
        delivery_attempt=1,
        max_delivery_attempts=2,
    )
    assert stub.ForwardMessageToDeadLetterQueue(forward, timeout=10).status.code == pb.Code.OK
    assert _dlq(server, 1) == ["01AB"]
    ack = spb.AckMessageRequest(
        group=GROUP,
        topic=TOPIC,
        entries=[spb.AckMessageEntry(message_id="01AB", receipt_handle=renewed.receipt_handle)],
    )
    assert stub.AckMessage(ack, timeout=10).status.code == pb.Code.INVALID_RECEIPT_HANDLE


def test_a_dlq_copy_stored_past_its_flush_wait_is_not_forwarded_again(served, monkeypatch):
    """A DLQ put answered FLUSH_DISK_TIMEOUT is in the CommitLog: the message leaves the
    group's flight then, or a later forward would store it in the DLQ twice."""
    server, stub = served
    ctx = server.broker.ctx
    assert ctx is not None
    put = ctx.put

    async def put_past_its_wait(message, body_bytes):
        result = await put(message, body_bytes)
        return dataclasses.replace(result, status=PutStatus.FLUSH_DISK_TIMEOUT)

    _send(stub, b"a", "01AC")
    (taken,) = _receive(stub, invisible_ms=5000)
    monkeypatch.setattr(ctx, "put", put_past_its_wait)
    forward = spb.ForwardMessageToDeadLetterQueueRequest(
        group=GROUP,
        topic=TOPIC,
        receipt_handle=taken.system_properties.receipt_handle,
        message_id="01AC",
        delivery_attempt=1,
        max_delivery_attempts=2,
    )
    assert stub.ForwardMessageToDeadLetterQueue(forward, timeout=10).status.code == pb.Code.OK
    assert _dlq(server, 1) == ["01AC"]
    assert ctx.offsets.query("G", "T", 0) == 1  # acknowledged: nothing left in flight
    again = stub.ForwardMessageToDeadLetterQueue(forward, timeout=10)
    assert again.status.code == pb.Code.INVALID_RECEIPT_HANDLE
    assert _dlq(server, 1) == ["01AC"]


def test_bad_requests_get_the_proxy_codes_and_the_server_carries_on(served):
    server, stub = served
    request = spb.ReceiveMessageRequest(group=GROUP, message_queue=pb.MessageQueue(topic=TOPIC))
    request.invisible_duration.FromMilliseconds(100)
    request.long_polling_timeout.FromSeconds(5)
    answer, stamp = list(stub.ReceiveMessage(request, timeout=10))
    assert answer.status.code == pb.Code.ILLEGAL_INVISIBLE_TIME
    assert stamp.WhichOneof("content") == "delivery_timestamp"
    namespaced = pb.Resource(resource_namespace="ns", name="T")
    route = stub.QueryRoute(spb.QueryRouteRequest(topic=namespaced), timeout=10)
    assert route.status.code == pb.Code.ILLEGAL_ACCESS_POINT
    empty = stub.SendMessage(spb.SendMessageRequest(), timeout=10)
    assert empty.status.code == pb.Code.MESSAGE_CORRUPTED
    # Bytes that are no protobuf message: grpcio refuses them, the server serves on.
    grpc_server = server.broker.grpc_server
    assert grpc_server is not None
    with grpc.insecure_channel(grpc_server.address) as channel:
        raw = channel.unary_unary("/apache.rocketmq.v2.MessagingService/SendMessage")
        with pytest.raises(grpc.RpcError) as caught:
            raw(b"\xff\xff\xff\xff garbage", timeout=10)
        assert caught.value.code() in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN)
    assert _send(stub, b"still here", "01AC").status.code == pb.Code.OK


def _ack(stub: Any, message: pb.Message) -> int:
    request = spb.AckMessageRequest(
        group=GROUP,
        topic=TOPIC,
        entries=[
            spb.AckMessageEntry(
                message_id=message.system_properties.message_id,
                receipt_handle=message.system_properties.receipt_handle,
            )
        ],
    )
    code: int = stub.AckMessage(request, timeout=10).status.code
    return code


def test_pop_state_survives_a_restart(tmp_path):
    root = tmp_path / "store"
    with _serving(root) as (_server, stub):
        for i in range(3):
            _send(stub, f"m{i}".encode(), f"01B{i}")
        taken: list[pb.Message] = []
        while len(taken) < 3:  # (the dispatch may not have reached all three yet)
            taken += _receive(stub, invisible_ms=60_000)
        assert [m.system_properties.message_id for m in taken] == ["01B0", "01B1", "01B2"]
        assert _ack(stub, taken[1]) == pb.Code.OK  # the middle one: the offset stays at 0
    assert (root / "config" / "grpcPopState.json").exists()
    with _serving(root) as (server, stub):
        # Neither the acknowledged message nor those still invisible come (back) now.
        assert _receive(stub, polling_s=2) == []
        # Handles given before the restart still acknowledge.
        assert _ack(stub, taken[0]) == pb.Code.OK
        assert _ack(stub, taken[1]) == pb.Code.INVALID_RECEIPT_HANDLE  # acknowledged before
        ctx = server.broker.ctx
        assert ctx is not None
        assert ctx.offsets.query("G", "T", 0) == 2  # 01B2 still in flight
        service = server.broker.grpc_server.service  # type: ignore[union-attr]
        assert service is not None
        cursor = service.pop.find("G", "T", 0)
        assert cursor is not None and list(cursor.in_flight) == [2]
        assert (
            cursor.in_flight[2].visible_at_ms
            == taken[2].system_properties.invisible_duration.ToMilliseconds()
            + cursor.in_flight[2].pop_ms
        )


def test_fifo_group_one_message_at_a_time_in_order(served):
    """A FIFO group (consumeMessageOrderly): its queue hands out the next message only
    after the one in flight is acknowledged, gone to the DLQ, or (its invisible time over)
    handed out again first; the settings tell the client fifo."""
    server, stub = served
    ctx = server.broker.ctx
    assert ctx is not None
    ctx.groups.update(SubscriptionGroupConfig("G", retry_max_times=1, consume_message_orderly=True))
    for i in range(4):
        assert _send(stub, f"m{i}".encode(), f"01F{i}").status.code == pb.Code.OK

    def one(polling_s: int = 5, invisible_ms: int = 800) -> list[pb.Message]:
        request = spb.ReceiveMessageRequest(
            group=GROUP,
            message_queue=pb.MessageQueue(topic=TOPIC, id=0),
            filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"),
            batch_size=1,
        )
        request.invisible_duration.FromMilliseconds(invisible_ms)
        request.long_polling_timeout.FromSeconds(polling_s)
        answers = list(stub.ReceiveMessage(request, timeout=polling_s + 5))
        return [a.message for a in answers if a.WhichOneof("content") == "message"]

    (m0,) = one()
    assert m0.body == b"m0"
    started = time.monotonic()
    # m1 is there, but m0 is in flight: the receive gets m0 again once its time is over.
    (again,) = one()
    assert time.monotonic() - started >= 0.5
    assert (again.body, again.system_properties.delivery_attempt) == (b"m0", 2)
    assert _ack(stub, again) == pb.Code.OK
    (m1,) = one()
    assert (m1.body, m1.system_properties.delivery_attempt) == (b"m1", 1)
    # Not acknowledged twice: to the DLQ (retryMaxTimes 1), then m2 comes.
    (m1_again,) = one()
    assert m1_again.body == b"m1"
    (m2,) = one(invisible_ms=6000)  # long enough to be acknowledged under load
    assert m2.body == b"m2"
    assert _dlq(server, 1) == ["01F1"]
    # An ack wakes a receive waiting on the blocked queue at once.
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(one, 8)
        time.sleep(0.3)
        started = time.monotonic()
        assert _ack(stub, m2) == pb.Code.OK
        (m3,) = waiting.result(timeout=15)
    assert m3.body == b"m3"
    assert time.monotonic() - started < 4  # the ack, not m2's 6 s invisible time
    # The client learns the group is FIFO from the settings answer.
    grpc_server = server.broker.grpc_server
    assert grpc_server is not None and grpc_server.service is not None
    settings = pb.Settings(subscription=pb.Subscription(group=GROUP))
    assert grpc_server.service._settings_answer(settings).subscription.fifo


def test_auto_renew_receive_gets_the_proxy_default_invisible_time(served):
    """A PushConsumer's receive (auto_renew, no invisible duration): not refused as too
    short; its message stays invisible for the proxy's 60 s default."""
    _server, stub = served
    assert _send(stub, b"p", "01AR").status.code == pb.Code.OK
    request = spb.ReceiveMessageRequest(
        group=GROUP,
        message_queue=pb.MessageQueue(topic=TOPIC, id=-1),
        filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"),
        batch_size=4,
        auto_renew=True,
    )
    request.long_polling_timeout.FromSeconds(5)
    answers = list(stub.ReceiveMessage(request, timeout=10))
    assert answers[0].status.code == pb.Code.OK
    (message,) = [a.message for a in answers if a.WhichOneof("content") == "message"]
    assert message.system_properties.invisible_duration.seconds == 60


def test_auto_renewed_messages_stay_invisible_while_the_client_is_connected(served):
    """The proxy's renewal: what a PushConsumer's receive took is extended while the
    client's telemetry stream is open (x-mq-client-id), and no longer once it closed."""
    server, stub = served
    grpc_server = server.broker.grpc_server
    assert grpc_server is not None and grpc_server.service is not None
    service = grpc_server.service
    metadata = (("x-mq-client-id", "push-1"),)
    commands: queue.Queue[spb.TelemetryCommand | None] = queue.Queue()
    telemetry = stub.Telemetry(iter(commands.get, None), metadata=metadata)
    deadline = time.monotonic() + 10
    while service.live_clients.get("push-1", 0) < 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert service.live_clients == {"push-1": 1}
    assert _send(stub, b"r", "01RN").status.code == pb.Code.OK
    request = spb.ReceiveMessageRequest(
        group=GROUP,
        message_queue=pb.MessageQueue(topic=TOPIC, id=-1),
        filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"),
        batch_size=4,
        auto_renew=True,
    )
    request.long_polling_timeout.FromSeconds(5)
    answers = list(stub.ReceiveMessage(request, metadata=metadata, timeout=10))
    (message,) = [a.message for a in answers if a.WhichOneof("content") == "message"]
    cursor = service.pop.find("G", "T", 0)
    assert cursor is not None
    held = cursor.in_flight[0]
    assert held.renew_client == "push-1"
    held.visible_at_ms = int(time.time() * 1000) + 5_000  # as if 55 s had passed
    assert service.renew() == 1
    assert held.visible_at_ms > int(time.time() * 1000) + 50_000
    commands.put(None)  # the client goes away
    with contextlib.suppress(grpc.RpcError):
        for _answer in telemetry:
            pass
    deadline = time.monotonic() + 10
    while service.live_clients and time.monotonic() < deadline:
        time.sleep(0.02)
    assert service.live_clients == {}
    held.visible_at_ms = int(time.time() * 1000) + 5_000
    assert service.renew() == 0
    assert _ack(stub, message) == pb.Code.OK


def test_a_batch_mixing_timer_and_plain_messages_stores_each_as_its_kind(served):
    """The plain entries in the topic at once (one batch), the timer entry in
    rmq_sys_wheel_timer until its delivery time, not delivered early."""
    server, stub = served
    due_ms = int(time.time() * 1000) + 2500
    messages = []
    for i, timer in enumerate((False, True, False)):
        message = pb.Message(
            topic=TOPIC,
            body=f"b{i}".encode(),
            system_properties=pb.SystemProperties(
                message_id=f"01MIX{i}",
                tag="t",
                message_type=pb.MessageType.DELAY if timer else pb.MessageType.NORMAL,
            ),
        )
        if timer:
            message.system_properties.delivery_timestamp.FromMilliseconds(due_ms)
        messages.append(message)
    answer = stub.SendMessage(spb.SendMessageRequest(messages=messages), timeout=10)
    assert answer.status.code == pb.Code.OK, answer.status
    # One entry, as the proxy answers a batch (one SEND_BATCH_MESSAGE): the ids joined.
    assert [e.status.code for e in answer.entries] == [pb.Code.OK]
    assert answer.entries[0].message_id == "01MIX0,01MIX1,01MIX2"
    store = server.broker.store
    assert store is not None
    deadline = time.monotonic() + 10  # (the dispatch is asynchronous)
    while store.max_offset("rmq_sys_wheel_timer", 0) < 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert store.max_offset("rmq_sys_wheel_timer", 0) == 1
    first: list[pb.Message] = []
    deadline = time.monotonic() + 10
    while len(first) < 2 and time.monotonic() < deadline:
        first += _receive(stub, invisible_ms=60_000, polling_s=1)
    assert sorted(m.system_properties.message_id for m in first) == ["01MIX0", "01MIX2"]
    late = _receive(stub, invisible_ms=60_000, polling_s=10)
    assert [m.system_properties.message_id for m in late] == ["01MIX1"]
    assert time.time() * 1000 >= due_ms  # not early
    assert late[0].system_properties.delivery_timestamp.ToMilliseconds() == due_ms


def test_system_topics_are_refused_as_the_proxy_refuses_them(served):
    """GrpcValidator.validateTopic: ILLEGAL_TOPIC for a system topic, rmq_sys_wheel_timer
    (in the topic table with the timer wheel on, as RocketMQ 5 registers it) included."""
    server, stub = served
    ctx = server.broker.ctx
    assert ctx is not None
    assert ctx.topics.get("rmq_sys_wheel_timer") is not None
    for name in ("rmq_sys_wheel_timer", "SCHEDULE_TOPIC_XXXX", ctx.broker_name):
        topic = pb.Resource(name=name)
        route = stub.QueryRoute(spb.QueryRouteRequest(topic=topic), timeout=10)
        assert route.status.code == pb.Code.ILLEGAL_TOPIC
        assert route.status.message == "cannot access system topic"
        message = pb.Message(
            topic=topic,
            body=b"x",
            system_properties=pb.SystemProperties(message_id="01SYS", tag="t"),
        )
        sent = stub.SendMessage(spb.SendMessageRequest(messages=[message]), timeout=10)
        assert sent.status.code == pb.Code.ILLEGAL_TOPIC
        request = spb.ReceiveMessageRequest(
            group=GROUP, message_queue=pb.MessageQueue(topic=topic, id=0), batch_size=1
        )
        request.invisible_duration.FromSeconds(30)
        request.long_polling_timeout.FromSeconds(5)
        answers = list(stub.ReceiveMessage(request, timeout=15))
        assert answers[0].status.code == pb.Code.ILLEGAL_TOPIC


def _mq(queue_id: int = 0) -> pb.MessageQueue:
    return pb.MessageQueue(topic=TOPIC, id=queue_id)


def _pull(
    stub: Any, offset: int, batch: int = 16, polling_s: int = 5
) -> tuple[int, list[pb.Message], int]:
    """(status code, messages, next offset) of a PullMessage."""
    request = spb.PullMessageRequest(
        group=GROUP,
        message_queue=_mq(),
        offset=offset,
        batch_size=batch,
        filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"),
    )
    request.long_polling_timeout.FromSeconds(polling_s)
    answers = list(stub.PullMessage(request, timeout=polling_s + 5))
    assert answers[0].WhichOneof("content") == "status"
    assert answers[-1].WhichOneof("content") == "next_offset"
    messages = [a.message for a in answers if a.WhichOneof("content") == "message"]
    return answers[0].status.code, messages, answers[-1].next_offset


def _remoting_offset(server: BackgroundServer, group: str) -> str | None:
    from rocketstore.broker.codes import RequestCode
    from rocketstore.remoting.blocking import invoke_sync, request

    fields = {"consumerGroup": group, "topic": "T", "queueId": "0"}
    answer = invoke_sync(server.broker_address, request(RequestCode.QUERY_CONSUMER_OFFSET, fields))
    return answer.ext_fields.get("offset")


def test_pull_message_and_the_offsets_on_the_remoting_paths_queues_and_offsets(served):
    server, stub = served
    for i in range(3):
        _send(stub, f"p{i}".encode(), f"01PULL{i}")

    def query(policy: Any, at_ms: int | None = None) -> int:
        request = spb.QueryOffsetRequest(message_queue=_mq(), query_offset_policy=policy)
        if at_ms is not None:
            request.timestamp.FromMilliseconds(at_ms)
        answer = stub.QueryOffset(request, timeout=10)
        assert answer.status.code == pb.Code.OK, answer.status
        return int(answer.offset)

    deadline = time.monotonic() + 10  # (the dispatch is asynchronous)
    while query(pb.QueryOffsetPolicy.END) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert query(pb.QueryOffsetPolicy.END) == 3
    assert query(pb.QueryOffsetPolicy.BEGINNING) == 0
    assert query(pb.QueryOffsetPolicy.TIMESTAMP, 0) == 0
    assert query(pb.QueryOffsetPolicy.TIMESTAMP, int(time.time() * 1000) + 60_000) == 3
    no_time = stub.QueryOffset(
        spb.QueryOffsetRequest(
            message_queue=_mq(), query_offset_policy=pb.QueryOffsetPolicy.TIMESTAMP
        ),
        timeout=10,
    )
    assert no_time.status.code == pb.Code.BAD_REQUEST

    code, messages, next_offset = _pull(stub, 0, batch=2)
    assert code == pb.Code.OK and next_offset == 2
    assert [m.system_properties.message_id for m in messages] == ["01PULL0", "01PULL1"]
    assert [m.system_properties.queue_offset for m in messages] == [0, 1]
    assert messages[0].system_properties.delivery_attempt == 1
    assert not messages[0].system_properties.HasField("receipt_handle")
    code, messages, next_offset = _pull(stub, 2)
    assert (code, len(messages), next_offset) == (pb.Code.OK, 1, 3)
    # Past the end: a long poll, woken by a send.
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(_pull, stub, 3, 16, 10)
        time.sleep(0.5)
        started = time.monotonic()
        _send(stub, b"p3", "01PULL3")
        code, messages, next_offset = waiting.result(timeout=20)
    assert time.monotonic() - started < 5
    assert (code, [m.body for m in messages], next_offset) == (pb.Code.OK, [b"p3"], 4)
    code, messages, next_offset = _pull(stub, 100)
    assert (code, messages) == (pb.Code.ILLEGAL_OFFSET, [])

    # The consumer offsets are the remoting path's: a new group starts at 0 here.
    got = stub.GetOffset(spb.GetOffsetRequest(group=GROUP, message_queue=_mq()), timeout=10)
    assert (got.status.code, got.offset) == (pb.Code.OK, 0)
    update = spb.UpdateOffsetRequest(group=GROUP, message_queue=_mq(), offset=2)
    assert stub.UpdateOffset(update, timeout=10).status.code == pb.Code.OK
    assert _remoting_offset(server, "G") == "2"
    got = stub.GetOffset(spb.GetOffsetRequest(group=GROUP, message_queue=_mq()), timeout=10)
    assert (got.status.code, got.offset) == (pb.Code.OK, 2)
    ctx = server.broker.ctx
    assert ctx is not None
    ctx.offsets.commit("G", "T", 0, 3)  # as a remoting consumer's commit lands
    got = stub.GetOffset(spb.GetOffsetRequest(group=GROUP, message_queue=_mq()), timeout=10)
    assert got.offset == 3

    bad_queue = spb.UpdateOffsetRequest(group=GROUP, message_queue=_mq(7), offset=1)
    assert stub.UpdateOffset(bad_queue, timeout=10).status.code == pb.Code.BAD_REQUEST


def test_rpcs_not_served_answer_unimplemented(served):
    _server, stub = served
    request = spb.SyncLiteSubscriptionRequest(topic=TOPIC, group=GROUP)
    with pytest.raises(grpc.RpcError) as raised:
        stub.SyncLiteSubscription(request, timeout=10)
    assert raised.value.code() == grpc.StatusCode.UNIMPLEMENTED
    # The server carries on.
    assert stub.QueryRoute(spb.QueryRouteRequest(topic=TOPIC), timeout=10).status.code == 20000


def test_recall_message_cancels_a_timer_message_before_its_time(served):
    """A timer message sent alone gets RocketMQ 5.3.3's recall handle; RecallMessage (on
    with recallMessageEnable, off by default as in 5.3.3) stores a delete unit: the
    message never comes, its twin due at the same time does."""
    server, stub = served
    ctx = server.broker.ctx
    assert ctx is not None
    due_ms = (int(time.time()) + 4) * 1000 + 300
    handles = []
    for message_id in ("01RECALLED", "01KEPT"):
        message = pb.Message(
            topic=TOPIC,
            body=message_id.encode(),
            system_properties=pb.SystemProperties(
                message_id=message_id, tag="t", message_type=pb.MessageType.DELAY
            ),
        )
        message.system_properties.delivery_timestamp.FromMilliseconds(due_ms)
        answer = stub.SendMessage(spb.SendMessageRequest(messages=[message]), timeout=10)
        assert answer.status.code == pb.Code.OK
        handles.append(answer.entries[0].recall_handle)
    out_ms = due_ms // 1000 * 1000
    raw = base64.urlsafe_b64decode(handles[0]).decode()
    assert raw == f"v1 T {ctx.broker_name} {out_ms + 1} 01RECALLED"
    assert _send(stub, b"plain", "01PLAIN").entries[0].recall_handle == ""

    def recall(handle: str) -> spb.RecallMessageResponse:
        request = spb.RecallMessageRequest(topic=TOPIC, recall_handle=handle)
        answer: spb.RecallMessageResponse = stub.RecallMessage(request, timeout=10)
        return answer

    forbidden = recall(handles[0])
    assert forbidden.status.code == pb.Code.INTERNAL_SERVER_ERROR
    assert forbidden.status.message == "recall failed, operation is forbidden"
    ctx.config.recall_message_enable = True
    assert recall("not a handle").status.message == "recall handle is invalid"
    done = recall(handles[0])
    assert (done.status.code, done.message_id) == (pb.Code.OK, "01RECALLED"), done.status

    got: list[str] = []
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and "01KEPT" not in got:
        got += [m.system_properties.message_id for m in _receive(stub, 60_000, 5)]
    assert "01PLAIN" in got and "01KEPT" in got
    got += [m.system_properties.message_id for m in _receive(stub, 60_000, 5)]
    assert "01RECALLED" not in got
    late = recall(handles[1])
    assert late.status.message == "recall failed, timestamp invalid"
