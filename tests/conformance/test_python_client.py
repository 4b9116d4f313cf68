"""Conformance with the Python ``rocketmq`` 0.4.4 client (the C++ client underneath):
produce, push consumers in clustering mode, shared queues, resumed offsets, retry and delay,
with the stored and delivered fields compared, not just counted."""

from __future__ import annotations

import base64
import json
import os
import time
import zlib
from pathlib import Path
from typing import Any

import pytest

from rocketstore.broker.admin_client import topic_route, update_topic
from rocketstore.broker.app import BackgroundServer, BrokerApp
from rocketstore.broker.client import invoke_sync, request
from rocketstore.broker.codes import RequestCode
from rocketstore.broker.topic_config import TopicConfig
from rocketstore.format.message import MessageExt
from rocketstore.format.message_id import offset_msg_id

COUNT = 12
BIG = 5  # the message whose body the client compresses


def _stored(server: BackgroundServer, topic: str) -> dict[str, MessageExt]:
    """Every stored message of ``topic`` by UNIQ_KEY (the client's msg id)."""
    store = server.broker.store
    assert store is not None
    store.wait_dispatched()
    found: dict[str, MessageExt] = {}
    for queue_id in store.topics().get(topic, []):
        offset = 0
        while offset < store.max_offset(topic, queue_id):
            result = store.get_messages("check", topic, queue_id, offset, 32)
            for message in result.messages:
                assert message.uniq_key is not None
                found[message.uniq_key] = message
            offset = result.next_begin_offset
    return found


def _produce(
    py_client: Any, server: BackgroundServer, topic: str, count: int = COUNT, *extra: object
) -> list[dict[str, Any]]:
    run = py_client("produce", server.namesrv_address, topic, count, "--big", BIG, *extra)
    lines = run.finish(60)
    sent = [line for line in lines if line["event"] == "sent"]
    errors = [line for line in lines if line["event"] == "error"]
    assert len(sent) == count, (errors, run.stderr[-10:])
    return sent


def _consumer_offsets(server: BackgroundServer, group: str, topic: str) -> dict[int, int]:
    return server.broker.ctx.offsets.query_queues(group, topic) if server.broker.ctx else {}


def test_produce_stores_every_field(py_client: Any, server: BackgroundServer) -> None:
    sent = _produce(py_client, server, "PyProduce")
    stored = _stored(server, "PyProduce")
    assert set(stored) == {s["msg_id"] for s in sent}
    per_queue: dict[int, list[MessageExt]] = {}
    for s in sent:
        message = stored[s["msg_id"]]
        assert s["status"] == 0 and s["offset"] == message.queue_offset
        body = base64.b64decode(s["body_b64"])
        if s["i"] == BIG:
            assert message.sys_flag & 1, "a large body arrives compressed and is stored so"
            assert message.body != body and zlib.decompress(message.body or b"") == body
        else:
            assert message.body == body and not message.sys_flag & 1
        assert message.tags == f"tag{s['i'] % 3}"
        assert message.key_list == [f"key-{s['i']}", "shared-key"]
        assert message.properties["custom"] == f"v{s['i']}"
        assert message.store_host == server.broker_address
        assert (
            message.born_host.startswith("127.0.0.1:")
            and message.born_host != server.broker_address
        )
        assert message.msg_id == offset_msg_id(server.broker_address, message.commit_log_offset)
        per_queue.setdefault(message.queue_id, []).append(message)
    for messages in per_queue.values():  # sent in order: offsets rise in step
        assert [m.queue_offset for m in messages] == list(range(len(messages)))
        offsets = [m.commit_log_offset for m in messages]
        assert offsets == sorted(offsets)
    assert len(per_queue) > 1  # the producer spread over the auto-created queues


def test_push_consumer_gets_every_field_and_commits(
    py_client: Any, server: BackgroundServer
) -> None:
    sent = _produce(py_client, server, "PyConsume")
    stored = _stored(server, "PyConsume")
    run = py_client(
        "consume", server.namesrv_address, "PyConsume", "GroupA", "--expect", COUNT, "--seconds", 40
    )
    lines = run.finish(70)
    received = [line for line in lines if line["event"] == "recv"]
    by_id = {r["id"]: r for r in received}
    assert set(by_id) == {s["msg_id"] for s in sent}, run.stderr[-10:]
    for s in sent:
        got, message = by_id[s["msg_id"]], stored[s["msg_id"]]
        assert base64.b64decode(got["body_b64"]) == base64.b64decode(s["body_b64"])  # inflated
        assert got["queue_id"] == message.queue_id and got["queue_offset"] == message.queue_offset
        assert got["commit_log_offset"] == message.commit_log_offset
        assert got["store_timestamp"] == message.store_timestamp
        assert got["born_timestamp"] == message.born_timestamp
        assert got["store_size"] == message.size
        assert got["tags"] == message.tags and got["keys"] == message.keys
        assert got["custom"] == f"v{s['i']}" and got["reconsume_times"] == 0
    committed = _consumer_offsets(server, "GroupA", "PyConsume")
    store = server.broker.store
    assert store is not None
    for queue_id in store.topics()["PyConsume"]:
        assert committed.get(queue_id) == store.max_offset("PyConsume", queue_id)
    listed = invoke_sync(
        server.broker_address,
        request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "GroupA"}),
    )
    assert listed.code != 0 or json.loads(listed.body)["consumerIdList"] == []  # it left


def test_two_consumers_share_the_queues(
    py_client: Any, server: BackgroundServer, tmp_path: Any
) -> None:
    _produce(py_client, server, "PyShared", 1)  # create the topic (4 queues)
    stop = tmp_path / "stop"
    consumers = [
        py_client(
            "consume",
            server.namesrv_address,
            "PyShared",
            "GroupS",
            "--expect",
            10_000,
            "--seconds",
            60,
            "--stop-file",
            stop,
        )
        for _ in range(2)
    ]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        answer = invoke_sync(
            server.broker_address,
            request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "GroupS"}),
        )
        if answer.code == 0 and len(json.loads(answer.body)["consumerIdList"]) == 2:
            break
        time.sleep(0.2)
    else:
        raise AssertionError("both consumers never joined the group")
    time.sleep(3)  # the NOTIFY_CONSUMER_IDS_CHANGED rebalance settles
    sent = _produce(py_client, server, "PyShared", 40, "--keys", "shared-")
    wanted = {s["msg_id"] for s in sent}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        got = {r["id"] for c in consumers for r in c.events("recv")}
        if wanted <= got:
            break
        time.sleep(0.2)
    stop.write_text("stop")
    results = [c.finish(40) for c in consumers]
    received = [
        [r for r in lines if r["event"] == "recv" and r["id"] in wanted] for lines in results
    ]
    assert {r["id"] for part in received for r in part} == wanted
    queues = [{r["queue_id"] for r in part} for part in received]
    assert all(queues), f"each consumer gets some queues: {queues}"
    assert not queues[0] & queues[1], f"a queue belongs to one consumer: {queues}"


def test_committed_offsets_resume_in_a_new_process(
    py_client: Any, server: BackgroundServer
) -> None:
    first = _produce(py_client, server, "PyResume", 8)
    run = py_client(
        "consume", server.namesrv_address, "PyResume", "GroupR", "--expect", 8, "--seconds", 40
    )
    assert {r["id"] for r in run.finish(70) if r["event"] == "recv"} == {s["msg_id"] for s in first}
    before = _consumer_offsets(server, "GroupR", "PyResume")
    assert sum(before.values()) == 8
    second = _produce(py_client, server, "PyResume", 5, "--keys", "later-")
    run = py_client(
        "consume",
        server.namesrv_address,
        "PyResume",
        "GroupR",
        "--expect",
        5,
        "--seconds",
        40,
        "--linger-s",
        1,
    )
    again = [r for r in run.finish(70) if r["event"] == "recv"]
    assert {r["id"] for r in again} == {s["msg_id"] for s in second}  # nothing re-delivered
    after = _consumer_offsets(server, "GroupR", "PyResume")
    assert all(after[q] >= before.get(q, 0) for q in after) and sum(after.values()) == 13


def test_failed_message_comes_back_as_a_retry(py_client: Any, server: BackgroundServer) -> None:
    sent = _produce(py_client, server, "PyRetry", 3)
    target = next(s for s in sent if s["i"] == 1)
    run = py_client(
        "consume",
        server.namesrv_address,
        "PyRetry",
        "GroupT",
        "--expect",
        3,
        "--seconds",
        40,
        "--fail-key",
        "key-1",
    )
    received = [r for r in run.finish(70) if r["event"] == "recv"]
    deliveries = [r for r in received if r["id"] == target["msg_id"]]
    assert [r["reconsume_times"] for r in deliveries] == [0, 1], received
    first, retry = deliveries
    assert first["failing"] and not retry["failing"]
    assert retry["topic"] == "PyRetry"  # the client restores the original topic
    assert retry["retry_topic"] == "PyRetry"
    assert base64.b64decode(retry["body_b64"]) == base64.b64decode(target["body_b64"])
    assert retry["born_timestamp"] == first["born_timestamp"]
    store = server.broker.store
    assert store is not None
    origin = store.look_message(first["commit_log_offset"])
    assert origin is not None and retry["origin_id"] == origin.msg_id
    assert retry["at"] - first["at"] >= 900  # level 3 + 0, one second in this broker


def test_delayed_message_arrives_after_its_delay(py_client: Any, server: BackgroundServer) -> None:
    sent = _produce(py_client, server, "PyDelay", 2, "--delay-level", 1)
    run = py_client(
        "consume", server.namesrv_address, "PyDelay", "GroupD", "--expect", 2, "--seconds", 40
    )
    received = [r for r in run.finish(70) if r["event"] == "recv"]
    assert {r["id"] for r in received} == {s["msg_id"] for s in sent}
    for r in received:
        assert r["topic"] == "PyDelay"
        assert r["store_timestamp"] - r["born_timestamp"] >= 1000  # redelivered when due
        assert r["at"] - r["born_timestamp"] >= 1000


def test_two_brokers_share_one_topic(
    py_client: Any, server: BackgroundServer, second_broker: BrokerApp
) -> None:
    addresses = sorted([server.broker_address, second_broker.address])
    assert update_topic(server.namesrv_address, TopicConfig("PyTwo", 2, 2)) == addresses
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        route = topic_route(server.namesrv_address, "PyTwo")
        if route is not None and len(route["queueDatas"]) == 2:
            break
        time.sleep(0.05)
    sent = _produce(py_client, server, "PyTwo", 20)
    stores = [server.broker.store, second_broker.store]
    counts = [sum(s.max_offset("PyTwo", q) for q in (0, 1)) for s in stores if s is not None]
    assert sum(counts) == 20 and all(counts), counts  # both brokers took messages
    run = py_client(
        "consume", server.namesrv_address, "PyTwo", "GroupTwo", "--expect", 20, "--seconds", 40
    )
    received = [r for r in run.finish(70) if r["event"] == "recv"]
    assert {r["id"] for r in received} == {s["msg_id"] for s in sent}


def test_acl_signed_requests(
    py_client: Any, acl_server: BackgroundServer, caplog: pytest.LogCaptureFixture
) -> None:
    keys = ("--access-key", "RocketMQ", "--secret-key", "12345678")
    sent = _produce(py_client, acl_server, "PyAcl", 3, *keys)
    run = py_client(
        "consume",
        acl_server.namesrv_address,
        "PyAcl",
        "GroupAcl",
        "--expect",
        3,
        "--seconds",
        40,
        *keys,
    )
    received = [r for r in run.finish(70) if r["event"] == "recv"]
    assert {r["id"] for r in received} == {s["msg_id"] for s in sent}
    wrong = ("--access-key", "RocketMQ", "--secret-key", "not-the-secret")
    run = py_client("produce", acl_server.namesrv_address, "PyAcl", 1, *wrong)
    lines = run.finish(60)
    assert not [line for line in lines if line["event"] == "sent"]
    refused = [r.getMessage() for r in caplog.records if "refused by ACL" in r.getMessage()]
    assert any("BAD_SIGNATURE: Check signature failed" in m for m in refused), refused


def test_orderly_consumer_locks_its_queue_and_reads_in_order(
    py_client: Any, server: BackgroundServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = server.broker.ctx
    assert ctx is not None
    granted: list[Any] = []
    try_lock = ctx.locks.try_lock

    def spy(group: str, queues: list[Any], client_id: str, now_ms: int | None = None) -> Any:
        locked = try_lock(group, queues, client_id, now_ms)
        granted.extend(locked)
        return locked

    monkeypatch.setattr(ctx.locks, "try_lock", spy)
    sent = _produce(py_client, server, "PyOrder", 10, "--orderly")
    assert len({stored.queue_id for stored in _stored(server, "PyOrder").values()}) == 1
    run = py_client(
        "consume",
        server.namesrv_address,
        "PyOrder",
        "GroupO",
        "--expect",
        10,
        "--seconds",
        40,
        "--orderly",
    )
    received = [r for r in run.finish(70) if r["event"] == "recv"]
    assert [r["id"] for r in received] == [s["msg_id"] for s in sent]  # in send order
    queue = ("PyOrder", "broker-a", received[0]["queue_id"])
    assert queue in granted  # locked through LOCK_BATCH_MQ while consuming
    assert ctx.locks.holder("GroupO", queue) is None  # and unlocked at shutdown


def test_a_broker_over_a_two_path_commitlog(
    py_client: Any, two_path_server: BackgroundServer, tmp_path: Path
) -> None:
    """storePathCommitLog with two paths (RocketMQ's MultiPathMappedFileQueue): the real
    client produces and consumes across file rolls, and the files alternate between the
    sorted paths."""
    server = two_path_server
    sent = _produce(py_client, server, "TwoPaths", 240)
    run = py_client(
        "consume", server.namesrv_address, "TwoPaths", "G2", "--expect", 240, "--seconds", 40
    )
    got = [e for e in run.finish(60) if e["event"] == "recv"]
    assert {e["id"] for e in got} == {s["msg_id"] for s in sent}
    assert set(_stored(server, "TwoPaths")) == {s["msg_id"] for s in sent}
    store = server.broker.store
    assert store is not None
    placed = [os.path.dirname(f.path) for f in store.commitlog.files.files]
    assert len(placed) >= 3
    disks = [str(tmp_path / "disk-a"), str(tmp_path / "disk-b")]
    assert placed == [disks[i % 2] for i in range(len(placed))]
