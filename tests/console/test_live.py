"""The console live over a running broker: its pages read the broker's own state (sends,
pulls and commits over remoting show at once), its actions change it, an ACL guards it,
and ``serve --http-listen`` starts and stops it as one of serve's services."""

from __future__ import annotations

import base64
import re
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketstore import Message
from rocketstore.broker.acl import AclConfig
from rocketstore.broker.app import BackgroundServer, BrokerOptions
from rocketstore.broker.client import invoke_sync, request
from rocketstore.broker.codes import RequestCode, ResponseCode
from rocketstore.console import ConsoleServer, LiveSource, OfflineSource
from tests.cli.cli_helpers import CLI
from tests.console.console_helpers import get
from tests.console.test_pages import rows
from tests.unit.broker.broker_helpers import small_store


def _send(broker: str, topic: str, body: bytes, keys: str) -> None:
    ext = {"a": "PG", "b": topic, "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1"}
    ext |= {"h": "0", "i": f"KEYS\x01{keys}\x02", "j": "0", "k": "false"}
    answer = invoke_sync(broker, request(RequestCode.SEND_MESSAGE_V2, ext, body))
    assert answer.code == ResponseCode.SUCCESS, answer.remark


def _commit(broker: str, group: str, topic: str, queue_id: int, offset: int) -> None:
    ext = {"consumerGroup": group, "topic": topic, "queueId": str(queue_id)}
    ext |= {"commitOffset": str(offset)}
    answer = invoke_sync(broker, request(RequestCode.UPDATE_CONSUMER_OFFSET, ext))
    assert answer.code == ResponseCode.SUCCESS


@pytest.fixture
def live(tmp_path: Path) -> Iterator[tuple[BackgroundServer, str]]:
    options = BrokerOptions(str(tmp_path / "s"), listen="127.0.0.1:0", store_config=small_store())
    with BackgroundServer(options) as server:
        ctx = server.broker.ctx
        assert ctx is not None
        console = ConsoleServer(LiveSource(ctx), "127.0.0.1:0", actions=True)
        console.console.actions.loop = server.loop
        console.start()
        try:
            yield server, f"http://{console.address}"
        finally:
            console.stop()


def test_live_pages_follow_sends_and_commits(live):
    server, url = live
    broker = server.broker_address
    for i in range(12):
        _send(broker, "Orders", f"order {i}".encode(), f"order-{i}")
    ctx = server.broker.ctx
    assert ctx is not None
    # A send is answered once its record is in the CommitLog; the topic page counts queue
    # entries, which the dispatcher adds after (a loaded CI machine showed '0').
    ctx.store.wait_dispatched()
    _commit(broker, "Billing", "Orders", 0, 1)
    page = get(url, "/")
    assert "live broker" in page.text and "broker-a" in page.text
    assert re.search(r"Messages put / got since start</th><td>12 / 0<", page.text), page.text
    topics = {r[0]: r for r in rows(get(url, "/topics").text, "topics")}
    assert topics["Orders"][3] == "12"
    ends = {q: ctx.store.max_offset("Orders", q) for q in range(4)}
    lag = {int(r[1]): r for r in rows(get(url, "/group", name="Billing").text, "lag")}
    assert lag[0][2:5] == [str(ends[0]), "1", str(ends[0] - 1)]
    # (the sends name queue 0; the topic's other queues are empty, never committed)
    assert lag[1][2:5] == ["0", "-", "0"] and sorted(lag) == [0, 1, 2, 3]
    found = get(url, "/search", by="key", topic="Orders", key="order-7")
    assert "1 message(s)" in found.text
    charts = get(url, "/charts")
    assert charts.text.count("<svg") == 2 and ">put</text>" in charts.text


def test_live_actions_create_topic_reset_offsets_and_resend_from_the_dlq(live):
    server, url = live
    broker = server.broker_address
    ctx = server.broker.ctx
    assert ctx is not None
    # create a topic
    answer = get(url, "/action/create-topic", data={"topic": "Fresh", "read": "2", "write": "2"})
    assert answer.status == 303 and answer.headers["Location"] == "/topic?name=Fresh"
    config = ctx.topics.get("Fresh")
    assert config is not None and config.read_queue_nums == 2
    assert get(url, "/action/create-topic", data={"topic": "Fresh"}).status == 409
    assert get(url, "/action/create-topic", data={"topic": "bad topic!"}).status == 409
    # reset a group's offsets to a time: before everything = each queue's start
    for i in range(8):
        _send(broker, "Orders", b"x", f"k{i}")
    for queue_id in range(4):
        _commit(broker, "Billing", "Orders", queue_id, ctx.store.max_offset("Orders", queue_id))
    answer = get(
        url, "/action/reset-offset", data={"group": "Billing", "topic": "Orders", "time": "0"}
    )
    assert answer.status == 303, answer.text
    assert all(ctx.offsets.query("Billing", "Orders", q) == 0 for q in range(4))
    # resend a dead-lettered message to the group's retry topic
    dead = Message("%DLQ%Billing", b"poison", properties={"KEYS": "dead-1", "UNIQ_KEY": "AB12"})
    put = server.call(ctx.put(dead, len(dead.body)))
    assert put.ok
    answer = get(url, "/action/resend", data={"offset": str(put.commit_log_offset)})
    assert answer.status == 303, answer.text
    resent = get(url, answer.headers["Location"])
    assert "%RETRY%Billing" in resent.text and "poison" in resent.text
    assert "AB12" in resent.text and "RETRY_TOPIC" in resent.text
    # only DLQ messages are resent
    first = ctx.store.get_messages("t", "Orders", 0, 0).messages[0]
    answer = get(url, "/action/resend", data={"offset": str(first.commit_log_offset)})
    assert answer.status == 409 and "only messages of a %DLQ% topic" in answer.text


def _basic(user: str, secret: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode()


def _get_as(url: str, auth: str | None, data: bytes | None = None) -> int:
    req = urllib.request.Request(url, data=data)
    if auth is not None:
        req.add_header("Authorization", auth)

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: object, **kwargs: object) -> None:
            return None

    try:
        with urllib.request.build_opener(NoRedirect).open(req, timeout=30) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as e:
        return e.code


def test_with_an_acl_pages_need_an_account_and_actions_its_permission(live):
    server, url = live
    ctx = server.broker.ctx
    assert ctx is not None
    ctx.acl = AclConfig.from_entries(
        [
            {"accessKey": "adminKey1", "secretKey": "adminSecret1", "admin": True},
            {"accessKey": "readerKey1", "secretKey": "readerSecret1", "defaultTopicPerm": "SUB"},
        ]
    )
    admin, reader = _basic("adminKey1", "adminSecret1"), _basic("readerKey1", "readerSecret1")
    assert _get_as(url + "/topics", None) == 401
    assert _get_as(url + "/topics", _basic("adminKey1", "wrong")) == 401
    assert _get_as(url + "/topics", reader) == 200
    create = b"topic=Guarded"
    assert _get_as(url + "/action/create-topic", reader, create) == 403
    assert ctx.topics.get("Guarded") is None
    assert _get_as(url + "/action/create-topic", admin, create) == 303
    assert ctx.topics.get("Guarded") is not None
    dead = Message("%DLQ%G1", b"poison")
    put = server.call(ctx.put(dead, len(dead.body)))
    resend = f"offset={put.commit_log_offset}".encode()
    assert _get_as(url + "/action/resend", reader, resend) == 403
    assert _get_as(url + "/action/resend", admin, resend) == 303


def test_actions_are_off_unless_asked(live, tmp_path):
    server, _url = live
    ctx = server.broker.ctx
    assert ctx is not None
    console = ConsoleServer(LiveSource(ctx), "127.0.0.1:0")
    console.start()
    try:
        answer = get(f"http://{console.address}", "/action/create-topic", data={"topic": "X"})
        assert answer.status == 403 and "--console-actions" in answer.text
    finally:
        console.stop()


def test_serve_http_listen_serves_the_console_and_stops_with_serve(tmp_path: Path) -> None:
    store = tmp_path / "store"
    process = subprocess.Popen(
        [*CLI, "--store", str(store), "serve", "--listen", "127.0.0.1:0",
         "--namesrv-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stderr is not None
    ready = ""
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            line = process.stderr.readline()
            if not line or "Ctrl-C stops" in line:
                ready = line
                break
        found = re.search(r", console at (http://127\.0\.0\.1:\d+/) ", ready)
        assert found, ready
        page = get(found.group(1).rstrip("/"), "/")
        assert page.status == 200 and "live broker" in page.text
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=60)
    assert process.returncode == 0
    assert not (store / "abort").exists()


def test_console_actions_need_http_listen(tmp_path: Path) -> None:
    done = subprocess.run(
        [*CLI, "--store", str(tmp_path / "s"), "serve", "--listen", "127.0.0.1:0",
         "--namesrv-listen", "127.0.0.1:0", "--console-actions"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 1 and "--console-actions needs --http-listen" in done.stderr


def test_offline_source_has_no_acl_and_closes(tmp_path: Path, console_store):
    source = OfflineSource(str(console_store[0]))
    try:
        assert source.acl is None and not source.live
    finally:
        source.close()


def test_child_endpoints_sit_beside_serve_s():
    from rocketstore.cli.serve import _child_endpoints

    kwargs = {"metrics_listen": "127.0.0.1:5557", "http_listen": "[::1]:8080"}
    assert _child_endpoints(kwargs, 2) == ["--metrics-listen", "127.0.0.1:5558",
                                           "--http-listen", "[::1]:8081"]  # fmt: skip
    assert _child_endpoints({"http_listen": "127.0.0.1:0"}, 3) == ["--http-listen", "127.0.0.1:0"]
    assert _child_endpoints({}, 2) == []


def test_serve_brokers_2_gives_each_broker_its_console(tmp_path: Path) -> None:
    from tests.unit.broker.test_app import _free_port_pair_10_apart

    port = _free_port_pair_10_apart()
    process = subprocess.Popen(
        [*CLI, "--store", str(tmp_path / "store"), "serve", "--listen", f"127.0.0.1:{port}",
         "--namesrv-listen", "127.0.0.1:0", "--brokers", "2", "--broker-name", "bk",
         "--http-listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stderr is not None
    consoles: dict[str, str] = {}
    deadline = time.monotonic() + 120
    try:
        while len(consoles) < 2 and time.monotonic() < deadline:
            line = process.stderr.readline()
            if not line:
                break
            found = re.search(r"console at (http://127\.0\.0\.1:\d+)/", line)
            if found:
                consoles["bk-2" if "broker bk-2 " in line else "bk"] = found.group(1)
        assert sorted(consoles) == ["bk", "bk-2"], consoles
        for name, url in consoles.items():
            page = get(url, "/")
            assert page.status == 200 and f"<h1>DefaultCluster / {name}</h1>" in page.text
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=90)
    assert process.returncode == 0


def test_an_action_posted_by_another_site_is_refused(live):
    server, url = live
    ctx = server.broker.ctx
    assert ctx is not None
    host = url.removeprefix("http://")
    for headers in (
        {"Origin": "http://evil.example"},
        {"Referer": "http://evil.example/page"},
        {"Sec-Fetch-Site": "cross-site"},
    ):
        req = urllib.request.Request(url + "/action/create-topic", data=b"topic=Csrf")
        for name, value in headers.items():
            req.add_header(name, value)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(req, timeout=30)
        assert refused.value.code == 403, headers
    assert ctx.topics.get("Csrf") is None
    req = urllib.request.Request(url + "/action/create-topic", data=b"topic=Csrf")
    req.add_header("Origin", f"http://{host}")
    req.add_header("Sec-Fetch-Site", "same-origin")
    assert _status(req) == 303
    assert ctx.topics.get("Csrf") is not None


def _status(req: urllib.request.Request) -> int:
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: object, **kwargs: object) -> None:
            return None

    try:
        with urllib.request.build_opener(NoRedirect).open(req, timeout=30) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as e:
        return e.code


def test_the_live_charts_page_refreshes_itself(live):
    _server, url = live
    assert '<meta http-equiv="refresh" content="10">' in get(url, "/charts").text


def test_a_message_s_track_names_online_subscribers_too(tmp_path: Path) -> None:
    import json

    from tests.unit.broker.broker_helpers import FakeConnection, call, make_context, send_v2

    ctx = make_context(tmp_path / "store")
    console = ConsoleServer(LiveSource(ctx), "127.0.0.1:0")
    console.start()
    try:
        answer = call(ctx, RequestCode.SEND_MESSAGE_V2, send_v2("T", queue_id=0), b"hello")
        assert answer.code == ResponseCode.SUCCESS
        ctx.store.wait_dispatched()
        ctx.offsets.commit("Committed", "T", 0, 1)
        heartbeat = {
            "clientID": "client-1",
            "producerDataSet": [],
            "consumerDataSet": [
                {
                    "groupName": "Watching",
                    "consumeType": "CONSUME_PASSIVELY",
                    "messageModel": "CLUSTERING",
                    "consumeFromWhere": 4,
                    "subscriptionDataSet": [{"topic": "T", "subString": "*", "subVersion": 1}],
                }
            ],
        }
        conn = FakeConnection()
        answer = call(ctx, RequestCode.HEART_BEAT, body=json.dumps(heartbeat).encode(), conn=conn)
        assert answer.code == ResponseCode.SUCCESS
        offset = ctx.store.get_messages("x", "T", 0, 0).messages[0].commit_log_offset
        page = get(f"http://{console.address}", "/message", offset=offset)
        assert rows(page.text, "tracks") == [
            ["Committed", "CONSUMED", "1", "no"],
            ["Watching", "NOT_CONSUME_YET", "-", "yes"],
        ]
        groups = {r[0]: r for r in rows(get(f"http://{console.address}", "/groups").text, "groups")}
        assert groups["Watching"][3] == "yes" and groups["Committed"][3] == "no"
    finally:
        console.stop()
        ctx.store.close()
