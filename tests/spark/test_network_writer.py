"""The network mode's write logic without Spark or sockets: the batch body against the
broker's decoder, routes (and TBW102 auto-creation), queue choice, grouping per queue,
retries on the next broker and failures naming the brokers (issue #35)."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

from rocketstore.broker.processors.message_batch import decode_batch
from rocketstore.broker.processors.send import SendHeader
from rocketstore.errors import ConfigError
from rocketstore.format.javahash import java_string_hash
from rocketstore.format.properties import decode_properties_str
from rocketstore.remoting.blocking import RemotingClientError, request
from rocketstore.remoting.codec import RemotingCommand
from rocketstore.remoting.codes import RequestCode, ResponseCode
from rocketstore.remoting.send import OutgoingMessage, encode_message_batch
from rocketstore.spark import network_send
from rocketstore.spark.network_cluster import (
    AccessDeniedError,
    BrokerRoute,
    ClusterError,
    refusal,
)
from rocketstore.spark.network_send import Sender, write_route
from rocketstore.spark.sink_uniq_keys import KeyScope
from rocketstore.spark.write_options import check_columns, parse_write_options

A, B = "127.0.0.1:1001", "127.0.0.1:1002"


def broker(name: str, address: str, queues: int = 2, perm: int = 6) -> BrokerRoute:
    return BrokerRoute(name, ((0, address),), queues, perm, queues)


class FakeCluster:
    """Routes by topic; every request recorded; ``answer`` decides each response."""

    def __init__(
        self,
        routes: dict[str, list[BrokerRoute]],
        answer: Callable[[str, RemotingCommand], RemotingCommand | None] | None = None,
    ) -> None:
        self.routes = routes
        self.answer = answer
        self.requests: list[tuple[str, RemotingCommand]] = []
        self.stored: list[dict[str, Any]] = []

    def route(self, topic: str) -> list[BrokerRoute]:
        if topic not in self.routes:
            raise ConfigError(f"topic {topic!r} is unknown")
        return self.routes[topic]

    def invoke(self, address: str, cmd: RemotingCommand) -> RemotingCommand:
        self.requests.append((address, cmd))
        if self.answer is not None:
            answer = self.answer(address, cmd)
            if answer is not None:
                return answer
        header = SendHeader.parse(cmd.ext_fields)
        if cmd.code == RequestCode.SEND_BATCH_MESSAGE:
            entries = [(e.body, e.properties) for e in decode_batch(cmd.body)]
        else:
            entries = [(cmd.body, decode_properties_str(header.properties))]
        for body, properties in entries:
            self.stored.append(
                {"address": address, "topic": header.topic, "queue": header.queue_id,
                 "body": body, "properties": properties}
            )  # fmt: skip
        return cmd.response(ResponseCode.SUCCESS, None, {"queueOffset": 0, "msgId": "x"})


def rows(values: list[str], **columns: list[Any]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"value": values, **columns})


def send(cluster: FakeCluster, batch: pa.RecordBatch, **options: str) -> Sender:
    write = parse_write_options({"namesrv": "127.0.0.1:9876", **options}, streaming=False)
    fields = [(f.name, str(f.type).replace("int32", "int").replace("int64", "bigint"))
              for f in batch.schema]  # fmt: skip
    columns = check_columns(fields, write)
    sender = Sender(cluster, write, first_turn=0, clock_ms=lambda: 1_700_000_000_000)
    sender.send_batches(iter([batch]), columns, KeyScope("job", 3, 1234))
    return sender


def test_batch_body_golden_bytes_and_the_brokers_decoder() -> None:
    body = encode_message_batch([OutgoingMessage(b"abc", "KEYS\x01k1", 7)])
    props = b"KEYS\x01k1"
    expected = (
        struct.pack(">i", 20 + 3 + 2 + len(props))  # TOTALSIZE
        + struct.pack(">i", 0)  # MAGICCODE
        + struct.pack(">i", 0)  # BODYCRC
        + struct.pack(">i", 7)  # FLAG
        + struct.pack(">i", 3)  # BODYLEN
        + b"abc"
        + struct.pack(">h", len(props))  # PROPERTIESLEN
        + props
    )
    assert body == expected
    (entry,) = decode_batch(body + b"")
    assert (entry.flag, entry.body, entry.properties) == (7, b"abc", {"KEYS": "k1"})
    with pytest.raises(ConfigError, match="properties take"):
        encode_message_batch([OutgoingMessage(b"", "x" * 40_000)])


def test_rows_of_a_queue_go_in_one_batch_with_derived_uniq_keys() -> None:
    cluster = FakeCluster({"T": [broker("broker-b", B), broker("broker-a", A)]})
    values = [f"v{i}" for i in range(8)]
    send(cluster, rows(values, key=["k"] * 4 + [None] * 4, tags=["t"] * 8), topic="T")
    # "k" hashes to one queue, 4 unkeyed rows go round robin over the 4 queues: one
    # request per queue, a batch where the keyed rows and one unkeyed row meet.
    codes = [cmd.code for _, cmd in cluster.requests]
    assert sorted(codes) == [RequestCode.SEND_MESSAGE_V2] * 3 + [RequestCode.SEND_BATCH_MESSAGE]
    batch_cmd = next(c for _, c in cluster.requests if c.code == RequestCode.SEND_BATCH_MESSAGE)
    assert batch_cmd.ext_fields["m"] == "true" and batch_cmd.ext_fields["i"] == "WAIT\x01true"
    queues = [(0, 0), (0, 1), (1, 0), (1, 1)]  # broker-a first: brokers by name
    keyed = queues[abs(java_string_hash("k")) % 4]
    stored = {s["body"].decode(): s for s in cluster.stored}
    assert len(stored) == 8
    for i in range(4):
        got = stored[f"v{i}"]
        assert (got["address"], got["queue"]) == ((A, B)[keyed[0]], keyed[1])
        assert got["properties"]["KEYS"] == "k" and got["properties"]["TAGS"] == "t"
    for i in range(4, 8):  # round robin from the task's first turn (0)
        got = stored[f"v{i}"]
        assert (got["address"], got["queue"]) == ((A, B)[queues[i - 4][0]], queues[i - 4][1])
    uniq = [s["properties"]["UNIQ_KEY"] for s in cluster.stored]
    assert len(set(uniq)) == 8 and all(len(u) == 32 for u in uniq)
    expected = KeyScope("job", 3, 1234).keys(0, 8).to_pylist()
    assert [stored[f"v{i}"]["properties"]["UNIQ_KEY"] for i in range(8)] == expected


def test_queue_id_column_numbers_the_queues_across_brokers() -> None:
    cluster = FakeCluster({"T": [broker("broker-a", A), broker("broker-b", B)]})
    send(cluster, rows(["x", "y"], queueId=pa.array([3, 0], pa.int32())), topic="T")
    assert sorted((s["body"], s["address"], s["queue"]) for s in cluster.stored) == [
        (b"x", B, 1),
        (b"y", A, 0),
    ]
    with pytest.raises(ConfigError, match=r"queueId is 4 for topic 'T'.*4 write queues"):
        send(cluster, rows(["x"], queueId=pa.array([4], pa.int32())), topic="T")


def test_the_file_sinks_checks_apply() -> None:
    cluster = FakeCluster({"T": [broker("broker-a", A)]})
    with pytest.raises(ConfigError, match="null in row 1"):
        send(cluster, rows(["x", None]), topic="T")  # type: ignore[list-item]
    with pytest.raises(ConfigError, match="separators"):
        send(cluster, rows(["x"], tags=["a\x01b"]), topic="T")
    assert cluster.requests == []
    with pytest.raises(ConfigError, match="path='/s' and namesrv"):
        parse_write_options({"path": "/s", "namesrv": "h:1"}, streaming=False)
    # A stream needs no sink id through name servers (nothing is recorded).
    assert parse_write_options({"namesrv": "h:1"}, streaming=True).network


def test_a_failed_send_retries_on_the_next_broker() -> None:
    def down_a(address: str, cmd: RemotingCommand) -> RemotingCommand | None:
        if address == A:
            raise RemotingClientError(f"request to {address} failed: refused")
        return None

    cluster = FakeCluster({"T": [broker("broker-a", A, 4), broker("broker-b", B, 2)]}, down_a)
    sender = send(cluster, rows(["x"], queueId=pa.array([3], pa.int32())), topic="T")
    assert [a for a, _ in cluster.requests] == [A, B]
    assert cluster.stored[0]["queue"] == 3 % 2  # the queue id modulo b's write queues
    assert sender.sent == {"broker-b": 1}


def test_failures_after_the_retries_name_every_broker() -> None:
    def busy(address: str, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(ResponseCode.SYSTEM_BUSY, f"busy {address}")

    cluster = FakeCluster({"T": [broker("broker-a", A), broker("broker-b", B)]}, busy)
    with pytest.raises(ClusterError, match=r"failed 3 times.*broker-a \(127.0.0.1:1001\)") as e:
        send(cluster, rows(["x"]), topic="T")
    assert "broker-b (127.0.0.1:1002)" in str(e.value)
    assert len(cluster.requests) == 3

    def illegal(address: str, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(ResponseCode.MESSAGE_ILLEGAL, "too big")

    cluster = FakeCluster({"T": [broker("broker-a", A), broker("broker-b", B)]}, illegal)
    with pytest.raises(ClusterError, match=r"refused by broker-a .*code 13, too big"):
        send(cluster, rows(["x"]), topic="T")
    assert len(cluster.requests) == 1  # not a code a producer retries


def test_unknown_topic_uses_tbw102_or_fails_naming_it() -> None:
    cluster = FakeCluster({"TBW102": [broker("broker-a", A, 8, perm=7)]})
    route = write_route(cluster, "New", 3)
    assert route.auto_create and [b.write_queue_nums for b in route.brokers] == [3]
    send(cluster, rows(["x"]), topic="New", queueNums="3")
    fields = cluster.requests[0][1].ext_fields
    assert (fields["b"], fields["c"], fields["d"]) == ("New", "TBW102", "3")
    with pytest.raises(ConfigError, match=r"topic 'New' is unknown.*autoCreateTopicEnable"):
        write_route(FakeCluster({}), "New", 3)
    with pytest.raises(ClusterError, match="no broker of its route takes writes"):
        write_route(FakeCluster({"T": [broker("broker-a", A, perm=4)]}), "T", 3)


def test_chunks_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(network_send, "CHUNK_MESSAGES", 3)
    cluster = FakeCluster({"T": [broker("broker-a", A, 1)]})
    send(cluster, rows([str(i) for i in range(7)]), topic="T")
    sizes = [len(decode_batch(c.body)) if c.code == RequestCode.SEND_BATCH_MESSAGE else 1
             for _, c in cluster.requests]  # fmt: skip
    assert sizes == [3, 3, 1]
    assert [s["body"] for s in cluster.stored] == [str(i).encode() for i in range(7)]


JAVA_ACL_REMARK = (
    "org.apache.rocketmq.acl.common.AclException: Check signature failed for "
    "accessKey=sparkuser, org.apache.rocketmq.acl.plain.PlainPermissionManager.validate("
    "PlainPermissionManager.java:684)"
)


def test_a_java_brokers_acl_refusal_fails_the_send_as_access_denied() -> None:
    """A Java 4.9.8 broker answers an ACL refusal SYSTEM_ERROR naming AclException (its
    RPC hook throws; what a real broker with aclEnable=true answered a wrong secret)."""

    def acl(address: str, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(ResponseCode.SYSTEM_ERROR, JAVA_ACL_REMARK)

    cluster = FakeCluster({"T": [broker("broker-a", A), broker("broker-b", B)]}, acl)
    with pytest.raises(AccessDeniedError, match=r"AclException.*accessKey and secretKey"):
        send(cluster, rows(["x"]), topic="T")
    assert len(cluster.requests) == 3  # retried as a producer retries SYSTEM_ERROR


def test_refusal_tells_an_acl_answer_from_another_system_error() -> None:
    where = "broker broker-a (127.0.0.1:1001)"
    java = refusal("min offset", where, request(1).response(1, JAVA_ACL_REMARK), True)
    assert isinstance(java, AccessDeniedError) and "code 1 SYSTEM_ERROR" in str(java)
    ours = refusal("min offset", where, request(1).response(16, "BAD_SIGNATURE"), True)
    assert isinstance(ours, AccessDeniedError) and "code 16 NO_PERMISSION" in str(ours)
    other = refusal("min offset", where, request(1).response(1, "disk full"), False)
    assert type(other) is ClusterError and "code 1, disk full" in str(other)
