"""The ACL on the gRPC port: what each request needs (PlainAccessResource.parse), the
5.x clients' authorization header, and the verdicts through grpcio with our own stubs
(right key, wrong secret, no header, a topic without permission, a white-listed
address, the streams)."""

from __future__ import annotations

import datetime
import queue
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("grpc")

import grpc

from rocketstore.broker.acl import AclCheck, AclConfig
from rocketstore.broker.acl_permissions import ANY, PUB, SUB
from rocketstore.broker.app import BackgroundServer, BrokerOptions
from rocketstore.broker.grpc.acl import (
    authorize_call,
    call_resources,
    parse_authorization,
    sign_date_time,
)
from rocketstore.broker.grpc.protocol import rocketmq_v2_service_pb2 as spb
from rocketstore.broker.grpc.protocol import rocketmq_v2_service_pb2_grpc as spb_grpc
from rocketstore.broker.grpc.protocol import rocketmq_v2_types_pb2 as pb
from rocketstore.broker.remoting import ProtocolError
from rocketstore.broker.subscription_groups import SubscriptionGroupConfig
from rocketstore.broker.topic_config import TopicConfig
from rocketstore.config import StoreConfig

ACL = """accounts:
- accessKey: RocketMQ
  secretKey: 12345678
  admin: true
- accessKey: limited1
  secretKey: limited-secret
  defaultTopicPerm: DENY
  defaultGroupPerm: DENY
  topicPerms:
  - AclOpen=PUB|SUB
  - AclReadOnly=SUB
  groupPerms:
  - GroupOpen=SUB
"""


def R(name: str) -> pb.Resource:
    return pb.Resource(name=name)


def _headers(access_key: str, secret_key: str) -> list[tuple[str, str]]:
    """As the 5.x Python client's Signature.metadata builds them."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    signature = sign_date_time(secret_key, now)
    return [
        ("x-mq-date-time", now),
        ("x-mq-client-id", "client-1"),
        (
            "authorization",
            f"MQv2-HMAC-SHA1 Credential={access_key}, SignedHeaders=x-mq-date-time, "
            f"Signature={signature}",
        ),
    ]


def test_each_request_needs_what_the_proxy_reads() -> None:
    send = spb.SendMessageRequest(messages=[pb.Message(topic=R("T")), pb.Message(topic=R("T"))])
    assert call_resources(send) == {"T": PUB}
    receive = spb.ReceiveMessageRequest(group=R("G"), message_queue=pb.MessageQueue(topic=R("T")))
    assert call_resources(receive) == {"%RETRY%G": SUB, "T": SUB}
    assert call_resources(spb.AckMessageRequest(group=R("G"), topic=R("T"))) == {
        "%RETRY%G": SUB,
        "T": SUB,
    }
    assert call_resources(spb.EndTransactionRequest(topic=R("T"))) == {"T": PUB}
    assert call_resources(spb.QueryRouteRequest(topic=R("T"))) == {"T": ANY}
    named = pb.Resource(resource_namespace="ns", name="T")
    assert call_resources(spb.QueryRouteRequest(topic=named)) == {"ns%T": ANY}
    producer = spb.HeartbeatRequest(client_type=pb.ClientType.PRODUCER)
    assert call_resources(producer) == {}
    consumer = spb.HeartbeatRequest(client_type=pb.ClientType.SIMPLE_CONSUMER, group=R("G"))
    assert call_resources(consumer) == {"%RETRY%G": SUB}
    settings = pb.Settings(
        subscription=pb.Subscription(
            group=R("G"), subscriptions=[pb.SubscriptionEntry(topic=R("T1"))]
        )
    )
    assert call_resources(spb.TelemetryCommand(settings=settings)) == {
        "%RETRY%G": SUB,
        "T1": SUB,
    }
    publishing = pb.Settings(publishing=pb.Publishing(topics=[R("A"), R("B")]))
    assert call_resources(spb.TelemetryCommand(settings=publishing)) == {"A": PUB, "B": PUB}
    assert call_resources(spb.NotifyClientTerminationRequest()) == {}
    for unreadable in (
        spb.SendMessageRequest(),
        spb.SendMessageRequest(messages=[pb.Message(topic=R("A")), pb.Message(topic=R("B"))]),
        spb.HeartbeatRequest(client_type=pb.ClientType.PUSH_CONSUMER),
        spb.TelemetryCommand(settings=pb.Settings()),
    ):
        with pytest.raises(ProtocolError):
            call_resources(unreadable)


def test_authorization_header() -> None:
    value = "MQv2-HMAC-SHA1 Credential=AK/x/y, SignedHeaders=x-mq-date-time, Signature=0aF1"
    assert parse_authorization(value) == ("AK", "0aF1")
    for bad in ("", "Basic abc", "MQv2-HMAC-SHA1 Credential=AK", "MQv2-HMAC-SHA1 Signature"):
        with pytest.raises(ValueError):
            parse_authorization(bad)
    # the 5.x Python client's Signature.sign("12345678", "20261129T120000Z")
    assert sign_date_time("12345678", "20261129T120000Z") == (
        "d8baccbbb8eca39a667e65dd5537760603a92383"
    )


def test_the_verdict_is_the_remoting_one() -> None:
    acl = AclConfig.from_document(
        {
            "accounts": [
                {"accessKey": "limited1", "secretKey": "limited-secret", "defaultTopicPerm": "SUB"}
            ]
        }
    )
    route = spb.QueryRouteRequest(topic=R("T"))
    assert authorize_call(route, _headers("limited1", "limited-secret"), "10.0.0.1", acl).ok
    wrong = authorize_call(route, _headers("limited1", "not-the-secret"), "10.0.0.1", acl)
    assert wrong.check is AclCheck.BAD_SIGNATURE
    assert wrong.message == "Check signature failed for accessKey=limited1"
    assert authorize_call(route, [], "10.0.0.1", acl).check is AclCheck.NO_ACCESS_KEY
    unknown = authorize_call(route, _headers("stranger", "whatever1"), "10.0.0.1", acl)
    assert unknown.check is AclCheck.UNKNOWN_ACCESS_KEY
    acl = AclConfig.from_document(
        {"accounts": [], "globalWhiteRemoteAddresses": ["10.0.0.*"]}, "white"
    )
    assert authorize_call(route, [], "10.0.0.1", acl).ok
    assert not authorize_call(route, [], "10.0.1.1", acl).ok


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[BackgroundServer, Any]]:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL)
    acl.chmod(0o600)
    options = BrokerOptions(
        str(tmp_path / "store"),
        listen="127.0.0.1:0",
        store_config=StoreConfig(mapped_file_size_commit_log=16 * 1024 * 1024),
        grpc_listen="127.0.0.1:0",
        acl_file=str(acl),
    )
    with BackgroundServer(options) as server:
        ctx, grpc_server = server.broker.ctx, server.broker.grpc_server
        assert ctx is not None and grpc_server is not None
        for topic in ("AclOpen", "AclReadOnly", "AclClosed"):
            ctx.topics.update(TopicConfig(topic, read_queue_nums=1, write_queue_nums=1))
        ctx.groups.update(SubscriptionGroupConfig("GroupOpen"))
        with grpc.insecure_channel(grpc_server.address) as channel:
            yield server, spb_grpc.MessagingServiceStub(channel)


def _send(stub: Any, topic: str, headers: list[tuple[str, str]]) -> pb.Status:
    message = pb.Message(
        topic=R(topic), body=b"b", system_properties=pb.SystemProperties(message_id="01AB")
    )
    answer = stub.SendMessage(
        spb.SendMessageRequest(messages=[message]), metadata=headers, timeout=10
    )
    status: pb.Status = answer.status
    return status


def test_sends_through_grpcio(served) -> None:
    _server, stub = served
    assert _send(stub, "AclOpen", _headers("limited1", "limited-secret")).code == pb.Code.OK
    assert _send(stub, "AclClosed", _headers("RocketMQ", "12345678")).code == pb.Code.OK
    wrong = _send(stub, "AclOpen", _headers("limited1", "wrong-secret"))
    assert wrong.code == pb.Code.UNAUTHORIZED
    assert wrong.message == "Check signature failed for accessKey=limited1"
    closed = _send(stub, "AclClosed", _headers("limited1", "limited-secret"))
    assert (closed.code, closed.message) == (
        pb.Code.UNAUTHORIZED,
        "No default permission for topic:AclClosed",
    )
    read_only = _send(stub, "AclReadOnly", _headers("limited1", "limited-secret"))
    assert read_only.code == pb.Code.UNAUTHORIZED
    missing = _send(stub, "AclOpen", [("x-mq-client-id", "client-1")])
    assert (missing.code, missing.message) == (pb.Code.UNAUTHORIZED, "No accessKey is configured")


def test_streams_through_grpcio(served) -> None:
    _server, stub = served
    request = spb.ReceiveMessageRequest(
        group=R("GroupOther"),
        message_queue=pb.MessageQueue(topic=R("AclOpen"), id=0),
        filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"),
        batch_size=1,
    )
    request.invisible_duration.FromSeconds(10)
    request.long_polling_timeout.FromSeconds(1)
    answers = list(
        stub.ReceiveMessage(request, metadata=_headers("limited1", "limited-secret"), timeout=10)
    )
    assert [a.status.code for a in answers] == [pb.Code.UNAUTHORIZED]
    assert answers[0].status.message == "No default permission for group:GroupOther"

    commands: queue.Queue[spb.TelemetryCommand | None] = queue.Queue()
    denied = pb.Settings(publishing=pb.Publishing(topics=[R("AclClosed")]))
    allowed = pb.Settings(
        client_type=pb.ClientType.PRODUCER, publishing=pb.Publishing(topics=[R("AclOpen")])
    )
    commands.put(spb.TelemetryCommand(settings=denied))
    commands.put(spb.TelemetryCommand(settings=allowed))
    stream = stub.Telemetry(
        iter(commands.get, None), metadata=_headers("limited1", "limited-secret"), timeout=10
    )
    first, second = next(stream), next(stream)
    commands.put(None)
    assert first.status.code == pb.Code.UNAUTHORIZED
    assert first.status.message == "No default permission for topic:AclClosed"
    assert second.WhichOneof("command") == "settings"  # the allowed one, answered
    stream.cancel()
