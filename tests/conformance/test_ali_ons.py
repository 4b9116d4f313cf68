"""Conformance with ali-ons 3.12.0 (pure JavaScript): produce, push consumers in clustering
mode, shared queues, resumed offsets, retry, delay, query by key and view by id (through
ali-ons's own command and decoder classes), and ACL-signed requests."""

from __future__ import annotations

import base64
import json
import time
import zlib
from typing import Any

from rocketstore.broker.acl import sign
from rocketstore.broker.app import BackgroundServer
from rocketstore.broker.client import invoke_sync, request
from rocketstore.broker.codes import RequestCode, ResponseCode
from rocketstore.format.message_id import offset_msg_id

COUNT = 8
BIG = 3


def _create_topic(server: BackgroundServer, topic: str, queues: int = 4) -> None:
    """ali-ons never auto-creates topics: create it first, as with RocketMQ (mqadmin)."""
    ext = {"topic": topic, "readQueueNums": str(queues), "writeQueueNums": str(queues)}
    answer = invoke_sync(
        server.broker_address, request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext | {"perm": "6"})
    )
    assert answer.code == ResponseCode.SUCCESS
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        route = invoke_sync(
            server.namesrv_address, request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        )
        if route.code == ResponseCode.SUCCESS:
            return
        time.sleep(0.05)
    raise AssertionError(f"topic {topic} never reached the name server")


def _produce(
    js_client: Any,
    server: BackgroundServer,
    topic: str,
    count: int = COUNT,
    *extra: object,
    env_extra: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    args = extra or (BIG,)
    run = js_client(
        "client.js", "produce", server.namesrv_address, topic, count, *args, env_extra=env_extra
    )
    lines = run.finish(60)
    sent = [line for line in lines if line["event"] == "sent"]
    assert len(sent) == count, (lines, run.stderr[-10:])
    return sent


def _consume(
    js_client: Any,
    server: BackgroundServer,
    topic: str,
    group: str,
    expect: int,
    *extra: object,
    env_extra: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    namesrv = server.namesrv_address
    run = js_client(
        "client.js", "consume", namesrv, topic, group, expect, 30, *extra, env_extra=env_extra
    )
    lines = run.finish(60)
    assert not [line for line in lines if line["event"] == "fatal"], lines
    return [line for line in lines if line["event"] == "recv"]


def test_produce_and_consume_every_field(js_client: Any, server: BackgroundServer) -> None:
    _create_topic(server, "OnsFields")
    sent = _produce(js_client, server, "OnsFields")
    received = _consume(js_client, server, "OnsFields", "OnsGroupF", COUNT)
    by_id = {r["msg_id"]: r for r in received}
    assert set(by_id) == {s["msg_id"] for s in sent}  # send reply msgId == id of the record
    store = server.broker.store
    assert store is not None
    per_queue: dict[int, list[dict[str, Any]]] = {}
    for s in sent:
        got = by_id[s["msg_id"]]
        stored = store.view_message(s["msg_id"])
        assert stored is not None
        assert s["status"] == "SEND_OK" and int(s["queue_id"]) == got["queue_id"] == stored.queue_id
        assert s["queue_offset"] == got["queue_offset"] == stored.queue_offset
        assert got["commit_log_offset"] == stored.commit_log_offset
        assert offset_msg_id(got["store_host"], got["commit_log_offset"]) == s["msg_id"]
        assert got["store_host"] == server.broker_address == stored.store_host
        assert got["born_host"] == stored.born_host and got["born_host"].startswith("127.0.0.1:")
        assert got["born_host"] != server.broker_address
        body = base64.b64decode(s["body_b64"])
        assert base64.b64decode(got["body_b64"]) == body  # the client inflated it
        if s["i"] == BIG:
            assert stored.sys_flag & 1 and zlib.decompress(stored.body or b"") == body
        else:
            assert stored.body == body
        assert got["tags"] == stored.tags == f"tag{s['i'] % 2}"
        assert got["keys"] == f"ons-key-{s['i']} ons-shared" == stored.keys
        assert got["born_timestamp"] == stored.born_timestamp
        assert got["store_timestamp"] == stored.store_timestamp
        per_queue.setdefault(got["queue_id"], []).append(got)
    for items in per_queue.values():
        items.sort(key=lambda r: r["queue_offset"])
        assert [r["queue_offset"] for r in items] == list(range(len(items)))
        offsets = [r["commit_log_offset"] for r in items]
        assert offsets == sorted(offsets)
    committed = (
        server.broker.ctx.offsets.query_queues("OnsGroupF", "OnsFields")
        if server.broker.ctx
        else {}
    )
    assert sum(committed.values()) == COUNT


def test_two_consumers_share_the_queues(js_client: Any, server: BackgroundServer) -> None:
    _create_topic(server, "OnsShared")
    runs = [
        js_client(
            "client.js", "consume", server.namesrv_address, "OnsShared", "OnsGroupS", 10_000, 25
        )
        for _ in range(2)
    ]
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not all(r.events("started") for r in runs):
        time.sleep(0.1)
    time.sleep(3)  # both heartbeats in, one rebalance round (1 s here) done
    sent = _produce(js_client, server, "OnsShared", 24, -1)
    wanted = {s["msg_id"] for s in sent}
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not wanted <= {
        r["msg_id"] for run in runs for r in run.events("recv")
    }:
        time.sleep(0.1)
    parts = [[r for r in run.events("recv") if r["msg_id"] in wanted] for run in runs]
    for run in runs:
        run.process.terminate()
        run.process.wait(10)
    assert {r["msg_id"] for part in parts for r in part} == wanted
    queues = [{r["queue_id"] for r in part} for part in parts]
    assert all(queues) and not queues[0] & queues[1], queues


def test_offsets_resume_retry_and_delay(js_client: Any, server: BackgroundServer) -> None:
    _create_topic(server, "OnsResume")
    first = _produce(js_client, server, "OnsResume", 4, -1)
    received = _consume(js_client, server, "OnsResume", "OnsGroupR", 4, "ons-key-2")
    target = next(s for s in first if s["i"] == 2)
    deliveries = [r for r in received if r["keys"].startswith("ons-key-2 ")]
    assert [r["reconsume_times"] for r in deliveries] == [0, 1]
    retry = deliveries[1]
    assert retry["topic"] == "OnsResume" and retry["retry_topic"] == "OnsResume"
    assert retry["origin_id"] == target["msg_id"]
    assert base64.b64decode(retry["body_b64"]) == base64.b64decode(target["body_b64"])
    assert retry["at"] - deliveries[0]["at"] >= 900
    # A new process of the group resumes after the committed offsets; a delayed message
    # (level 1 = 1 s) arrives no sooner than its delay.
    later = _produce(js_client, server, "OnsResume", 2, -1, 1)
    again = _consume(js_client, server, "OnsResume", "OnsGroupR", 2)
    assert {r["keys"] for r in again} == {"ons-key-0 ons-shared", "ons-key-1 ons-shared"}
    assert not {r["msg_id"] for r in again} & {s["msg_id"] for s in first}
    assert len(later) == 2
    for r in again:
        assert r["store_timestamp"] - r["born_timestamp"] >= 1000


def test_query_by_key_and_view_by_id(js_client: Any, server: BackgroundServer) -> None:
    _create_topic(server, "OnsQuery")
    sent = _produce(js_client, server, "OnsQuery", 3, -1)
    server.broker.store.wait_dispatched()  # type: ignore[union-attr]
    target = sent[1]
    run = js_client(
        "client.js", "query", server.namesrv_address, "OnsQuery", "ons-key-1", target["msg_id"]
    )
    lines = {line["event"]: line for line in run.finish(60)}
    assert lines["query"]["code"] == 0
    [found] = lines["query"]["messages"]
    assert found["msg_id"] == target["msg_id"] and found["keys"] == "ons-key-1 ons-shared"
    assert lines["view"]["code"] == 0
    viewed = lines["view"]["message"]
    assert viewed["msg_id"] == target["msg_id"]
    assert base64.b64decode(viewed["body_b64"]) == base64.b64decode(target["body_b64"])


def test_acl_signed_client_works_and_others_are_refused(
    js_client: Any, acl_server: BackgroundServer
) -> None:
    server = acl_server
    ext = {"topic": "OnsAcl", "readQueueNums": "2", "writeQueueNums": "2", "perm": "6"}
    create = request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext)
    assert invoke_sync(server.broker_address, create).code == ResponseCode.NO_PERMISSION
    signed = request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext | {"AccessKey": "RocketMQ"})
    signed.ext_fields["Signature"] = sign(signed.ext_fields, b"", "12345678")
    assert invoke_sync(server.broker_address, signed).code == ResponseCode.SUCCESS
    time.sleep(0.3)  # the new topic reaches the name server
    keys = {"ACCESS_KEY": "RocketMQ", "SECRET_KEY": "12345678"}
    sent = _produce(js_client, server, "OnsAcl", 2, -1, env_extra=keys)
    received = _consume(js_client, server, "OnsAcl", "OnsGroupAcl", 2, env_extra=keys)
    assert {r["msg_id"] for r in received} == {s["msg_id"] for s in sent}
    wrong = {"ACCESS_KEY": "RocketMQ", "SECRET_KEY": "wrong-secret"}
    run = js_client(
        "client.js", "produce", server.namesrv_address, "OnsAcl", 1, -1, env_extra=wrong
    )
    assert not [line for line in run.finish(60) if line["event"] == "sent"]
    store = server.broker.store
    assert store is not None
    assert store.max_offset("OnsAcl", 0) + store.max_offset("OnsAcl", 1) == 2


SELECTOR = "region IN ('eu', 'us') AND amount BETWEEN 10 AND 100"
ORDERS = [
    {"region": region, "amount": amount}
    for region in ("eu", "us", "asia")
    for amount in ("5", "10", "55", "100", "101", "lots")
] + [{"amount": "50"}, {"region": "eu"}]


def test_a_sql92_consumer_gets_just_what_its_selector_selects(
    js_client: Any, sql_server: BackgroundServer
) -> None:
    """ali-ons subscribes with {expressionType: 'SQL92'}; the broker (enablePropertyFilter)
    delivers the selected messages only (the client does no filtering of its own)."""
    _create_topic(sql_server, "OnsSql")
    run = js_client(
        "client.js", "produce_props", sql_server.namesrv_address, "OnsSql", json.dumps(ORDERS)
    )
    sent = [line for line in run.finish(60) if line["event"] == "sent"]
    assert len(sent) == len(ORDERS), run.stderr[-10:]
    wanted = {
        s["msg_id"]
        for s, order in zip(sent, ORDERS, strict=True)
        if order.get("region") in ("eu", "us") and order.get("amount") in ("10", "55", "100")
    }
    assert len(wanted) == 6
    # Waiting for more than will come: the run lasts its full 8 s, so extras would show.
    consumer = js_client(
        "client.js",
        "consume",
        sql_server.namesrv_address,
        "OnsSql",
        "OnsGroupSql",
        len(ORDERS),
        8,
        env_extra={"SUBSCRIBE_SQL92": SELECTOR},
    )
    lines = consumer.finish(60)
    assert not [line for line in lines if line["event"] in ("fatal", "error")], lines
    received = [line for line in lines if line["event"] == "recv"]
    assert {r["msg_id"] for r in received} == wanted
    assert all(r["properties"]["region"] in ("eu", "us") for r in received)
