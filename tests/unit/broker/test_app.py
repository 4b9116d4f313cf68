"""Wiring: serve in a background loop, several brokers behind one name server, and the
CLI's clean shutdown on SIGTERM (store closed, no abort file)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from rocketstore.broker.app import BackgroundServer, BrokerApp, BrokerOptions
from rocketstore.broker.broker_config import BrokerConfig, broker_config_from_settings
from rocketstore.broker.client import RemotingClient, invoke_sync, request
from rocketstore.broker.codes import RequestCode, ResponseCode
from rocketstore.broker.registration import register_request_body
from rocketstore.broker.remoting import RemotingCommand
from rocketstore.cli.context import read_settings_file
from rocketstore.cli.main import main
from rocketstore.errors import ConfigError
from rocketstore.paths import ABORT_FILE
from rocketstore.remoting.blocking import RemotingClientError
from rocketstore.store import MessageStore
from tests.cli.cli_helpers import run_cli
from tests.unit.broker.broker_helpers import small_store


def _route(namesrv: str, topic: str) -> dict[str, Any] | None:
    answer = invoke_sync(namesrv, request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))
    return json.loads(answer.body) if answer.code == ResponseCode.SUCCESS else None


def _send(broker: str, topic: str, body: bytes) -> dict[str, str]:
    ext = {"a": "PG", "b": topic, "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1"}
    ext |= {"h": "0", "i": "", "j": "0", "k": "false"}
    answer = invoke_sync(broker, request(RequestCode.SEND_MESSAGE_V2, ext, body))
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    return answer.ext_fields


def test_serve_registers_routes_and_stops_cleanly(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with BackgroundServer(
        BrokerOptions(str(store), listen="127.0.0.1:0", store_config=small_store())
    ) as server:
        route = _route(server.namesrv_address, "TBW102")
        assert route is not None and route["queueDatas"][0]["perm"] == 7
        assert route["brokerDatas"][0]["brokerAddrs"] == {"0": server.broker_address}
        assert _route(server.namesrv_address, "Fresh") is None
        _send(server.broker_address, "Fresh", b"x")  # auto-created, registered at once
        deadline = time.monotonic() + 5
        while _route(server.namesrv_address, "Fresh") is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _route(server.namesrv_address, "Fresh") is not None
        assert (store / ABORT_FILE).exists()  # running
    assert not (store / ABORT_FILE).exists()
    topics = json.loads((store / "config" / "topics.json").read_text())
    assert "Fresh" in topics["topicConfigTable"]


def test_two_brokers_serve_one_topic(tmp_path: Path) -> None:
    server = BackgroundServer(
        BrokerOptions(str(tmp_path / "a"), listen="127.0.0.1:0", store_config=small_store())
    ).start()
    try:
        options = BrokerOptions(
            str(tmp_path / "b"),
            listen="127.0.0.1:0",
            store_config=small_store(),
            namesrv_addrs=[server.namesrv_address],
            broker=BrokerConfig(broker_name="broker-b"),
        )
        second = BrokerApp(options)
        server.call(second.start())
        _send(server.broker_address, "Shared", b"a")
        _send(second.address, "Shared", b"b")
        deadline = time.monotonic() + 5
        route = None
        while time.monotonic() < deadline:
            route = _route(server.namesrv_address, "Shared")
            if route is not None and len(route["queueDatas"]) == 2:
                break
            time.sleep(0.05)
        assert route is not None
        assert sorted(q["brokerName"] for q in route["queueDatas"]) == ["broker-a", "broker-b"]
        addrs = sorted(b["brokerAddrs"]["0"] for b in route["brokerDatas"])
        assert addrs == sorted([server.broker_address, second.address])
        server.call(second.stop())  # unregisters
        route = _route(server.namesrv_address, "Shared")
        assert route is not None and [q["brokerName"] for q in route["queueDatas"]] == ["broker-a"]
    finally:
        server.stop()


def test_cli_serve_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    store = tmp_path / "store"
    command = [sys.executable, "-m", "rocketstore.cli.main", "serve", "--store", str(store)]
    command += ["--listen", "127.0.0.1:0", "--namesrv-listen", "127.0.0.1:0"]
    process = subprocess.Popen(
        command,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        line = ""
        deadline = time.monotonic() + 30
        while "Ctrl-C stops" not in line and time.monotonic() < deadline:
            line = process.stderr.readline()
            assert line or process.poll() is None, "serve exited early"
        namesrv = line.split("name server ")[1].split(",")[0]
        broker = line.split(", broker ")[1].split(" ")[0]
        assert _route(namesrv, "TBW102") is not None
        msg_id = _send(broker, "CliTopic", b"kept")["msgId"]
        assert (store / ABORT_FILE).exists()
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert not (store / ABORT_FILE).exists()
    with MessageStore.open(store, read_only=True) as reopened:
        message = reopened.view_message(msg_id)
        assert message is not None and message.body == b"kept"


def _free_port_pair_10_apart() -> int:
    """A port p with p, p+1, p+10 and p+11 free (serve --brokers 2's two brokers)."""
    for _ in range(100):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        if port + 11 > 65535:
            continue
        try:
            for p in (port, port + 1, port + 10, port + 11):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
        except OSError:
            continue
        return port
    raise AssertionError("no free ports")


def test_cli_serve_brokers_2_runs_a_second_broker_process(tmp_path: Path) -> None:
    store = tmp_path / "store"
    port = _free_port_pair_10_apart()
    command = [sys.executable, "-m", "rocketstore.cli.main", "serve", "--store", str(store)]
    command += ["--listen", f"127.0.0.1:{port}", "--namesrv-listen", "127.0.0.1:0"]
    command += ["--brokers", "2", "--flush", "SYNC_FLUSH", "--broker-name", "bk"]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        line = ""
        deadline = time.monotonic() + 60
        while "name server" not in line and time.monotonic() < deadline:
            line = process.stderr.readline()
            assert line or process.poll() is None, "serve exited early"
        assert "and 1 more broker(s)" in line
        namesrv = line.split("name server ")[1].split(",")[0]
        second = f"127.0.0.1:{port + 10}"
        names: list[str] = []
        deadline = time.monotonic() + 30
        while names != ["bk", "bk-2"] and time.monotonic() < deadline:
            route = _route(namesrv, "TBW102")  # the child registers right after it listens
            names = sorted(b["brokerName"] for b in route["brokerDatas"]) if route else []
            time.sleep(0.1)
        assert names == ["bk", "bk-2"]
        msg_id = _send(second, "ManyTopic", b"on the second")["msgId"]
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)  # (a clean stop; see the SIGKILL test below)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    second_store = tmp_path / "store-2"
    for directory in (store, second_store):
        assert not (directory / ABORT_FILE).exists()  # both shut down cleanly
    with MessageStore.open(second_store, read_only=True) as reopened:
        message = reopened.view_message(msg_id)
        assert message is not None and message.body == b"on the second"


def test_cli_serve_brokers_needs_a_fixed_port(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "rocketstore.cli.main", "serve", "--store", str(tmp_path)]
    command += ["--listen", "127.0.0.1:0", "--namesrv-listen", "127.0.0.1:0", "--brokers", "2"]
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "--brokers needs a fixed --listen port" in done.stderr


def test_shutdown_answers_held_pulls_and_finishes_in_flight_work(tmp_path: Path) -> None:
    server = BackgroundServer(
        BrokerOptions(str(tmp_path / "s"), listen="127.0.0.1:0", store_config=small_store())
    ).start()
    answers: list[int] = []
    try:
        _send(server.broker_address, "Held", b"x")
        # The send returns once the CommitLog holds the message; its queue unit comes with
        # the dispatcher. Pulled before that, offset 1 is "moved" (21), not "held" (19).
        server.broker.ctx.store.wait_dispatched()  # type: ignore[union-attr]
        ext = {"consumerGroup": "G", "topic": "Held", "queueId": "0", "queueOffset": "1"}
        ext |= {"maxMsgNums": "32", "sysFlag": "6", "suspendTimeoutMillis": "30000"}  # held, "*"

        def pull() -> None:
            cmd = request(RequestCode.PULL_MESSAGE, ext)
            answers.append(invoke_sync(server.broker_address, cmd, 40).code)

        held = threading.Thread(target=pull)
        held.start()
        deadline = time.monotonic() + 5
        while server.broker.ctx.waiters.held == 0 and time.monotonic() < deadline:  # type: ignore[union-attr]
            time.sleep(0.01)
        started = time.monotonic()
    finally:
        server.stop()
    held.join(10)
    assert answers == [ResponseCode.PULL_NOT_FOUND]
    assert time.monotonic() - started < 10  # not the 30 s suspend time


def test_bad_addresses_are_refused_with_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = str(tmp_path / "s")
    assert main(["--store", store, "serve", "--listen", "localhost"]) == 1
    assert "--listen: expected 'ip:port'" in capsys.readouterr().err
    assert main(["broker", "--namesrv", "1.2.3:9876"]) == 1
    assert "--namesrv" in capsys.readouterr().err
    wildcard = BrokerOptions(store, listen="0.0.0.0:0")
    with pytest.raises(ConfigError, match="--advertise"):
        asyncio.run(BrokerApp(wildcard).start())
    assert not (tmp_path / "s" / ABORT_FILE).exists()


def test_registration_body_carries_the_topic_table(tmp_path: Path) -> None:
    with BackgroundServer(
        BrokerOptions(str(tmp_path / "s"), listen="127.0.0.1:0", store_config=small_store())
    ) as server:
        assert server.broker.ctx is not None
        body = json.loads(register_request_body(server.broker.ctx))
        wrapper = body["topicConfigSerializeWrapper"]
        assert wrapper["topicConfigTable"]["TBW102"]["perm"] == 7
        assert set(wrapper["dataVersion"]) >= {"counter", "timestamp"}
        assert body["filterServerList"] == []


def test_a_busy_port_is_named(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        address = f"127.0.0.1:{busy.getsockname()[1]}"
        # run_cli: serve's logging levels are put back (they leaked into later CLI tests).
        run = run_cli("--store", tmp_path / "s", "namesrv", "--listen", address)
    assert run.code == 1
    assert f"cannot listen on {address}" in run.err


def test_a_delayed_message_survives_a_restart(tmp_path: Path) -> None:
    config = dataclasses.replace(small_store(), message_delay_level="1s 2s 3s")
    options = BrokerOptions(str(tmp_path / "s"), listen="127.0.0.1:0", store_config=config)
    born = str(int(time.time() * 1000))
    ext = {"a": "PG", "b": "Later", "c": "TBW102", "d": "1", "e": "0", "f": "0", "g": born}
    ext |= {"h": "0", "i": "DELAY\x011", "j": "0", "k": "false"}
    with BackgroundServer(options) as server:
        answer = invoke_sync(server.broker_address, request(RequestCode.SEND_MESSAGE_V2, ext, b"z"))
        assert answer.code == ResponseCode.SUCCESS
        store = server.broker.store
        assert store is not None and store.max_offset("Later", 0) == 0  # not due yet
    options = dataclasses.replace(options, namesrv_addrs=[])
    with BackgroundServer(options) as server:
        store = server.broker.store
        assert store is not None
        deadline = time.monotonic() + 10
        while store.max_offset("Later", 0) == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        delivered = store.get_messages("g", "Later", 0, 0, 1).messages
        assert [m.body for m in delivered] == [b"z"]
        assert delivered[0].store_timestamp - delivered[0].born_timestamp >= 1000


def test_an_open_transaction_is_checked_over_the_producers_connection(tmp_path: Path) -> None:
    """A producer that never ends its transaction gets CHECK_TRANSACTION_STATE on its own
    connection once the timeout passes, answers it with a one-way END_TRANSACTION, and
    the message is then in its topic."""
    options = BrokerOptions(
        str(tmp_path / "store"),
        listen="127.0.0.1:0",
        store_config=small_store(),
        broker=BrokerConfig(transaction_check_interval_ms=100, transaction_timeout_ms=300),
    )
    with BackgroundServer(options) as server:
        address = server.broker_address

        async def producer() -> RemotingCommand:
            checks: asyncio.Queue[RemotingCommand] = asyncio.Queue()
            client = RemotingClient(address, on_request=checks.put_nowait)
            heartbeat: dict[str, object] = {"clientID": "tx-client", "consumerDataSet": []}
            heartbeat["producerDataSet"] = [{"groupName": "TxGroup"}]
            beat = await client.invoke(
                request(RequestCode.HEART_BEAT, {}, json.dumps(heartbeat).encode())
            )
            assert beat.code == ResponseCode.SUCCESS
            properties = "TRAN_MSG\x01true\x02PGROUP\x01TxGroup\x02UNIQ_KEY\x01AB12\x02WAIT\x01true"
            ext = {"a": "TxGroup", "b": "TxTopic", "c": "TBW102", "d": "4", "e": "1", "f": "4"}
            ext |= {"g": str(int(time.time() * 1000)), "h": "0", "i": properties}
            ext |= {"j": "0", "k": "false"}
            sent = await client.invoke(request(RequestCode.SEND_MESSAGE_V2, ext, b"later"))
            assert sent.code == ResponseCode.SUCCESS, sent.remark
            check = await asyncio.wait_for(checks.get(), 10)
            assert check.code == RequestCode.CHECK_TRANSACTION_STATE
            fields = check.ext_fields
            end = {
                "producerGroup": "TxGroup",
                "tranStateTableOffset": fields["tranStateTableOffset"],
                "commitLogOffset": fields["commitLogOffset"],
                "commitOrRollback": "8",
                "fromTransactionCheck": "true",
                "msgId": fields["msgId"],
                "transactionId": fields["transactionId"],
            }
            await client.invoke_oneway(request(RequestCode.END_TRANSACTION, end))
            await client.close()
            return check

        check = asyncio.run(producer())
        assert (
            check.ext_fields["msgId"] == "AB12" and check.ext_fields["tranStateTableOffset"] == "1"
        )
        pull = {"consumerGroup": "G", "topic": "TxTopic", "queueId": "1", "queueOffset": "0"}
        pull |= {"maxMsgNums": "32", "sysFlag": "4", "commitOffset": "0"}  # with "*"
        pull |= {"suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0"}
        deadline = time.monotonic() + 10
        while True:
            answer = invoke_sync(address, request(RequestCode.PULL_MESSAGE, pull))
            if answer.code == ResponseCode.SUCCESS or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert answer.code == ResponseCode.SUCCESS and b"later" in answer.body


def test_update_broker_config_drains_the_broker_in_the_routes(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("# ours\nbrokerName=broker-a\n")
    options = BrokerOptions(
        str(tmp_path / "s"),
        listen="127.0.0.1:0",
        store_config=small_store(),
        settings_path=str(conf),
    )

    def perm_of(server: BackgroundServer, topic: str) -> int | None:
        route = _route(server.namesrv_address, topic)
        return None if route is None else int(route["queueDatas"][0]["perm"])

    def wait_for_perm(server: BackgroundServer, topic: str, perm: int) -> None:
        deadline = time.monotonic() + 5
        while perm_of(server, topic) != perm and time.monotonic() < deadline:
            time.sleep(0.05)
        assert perm_of(server, topic) == perm

    with BackgroundServer(options) as server:
        _send(server.broker_address, "Drain", b"x")
        wait_for_perm(server, "Drain", 6)
        update = request(RequestCode.UPDATE_BROKER_CONFIG, {}, b"brokerPermission=4\n")
        answer = invoke_sync(server.broker_address, update)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        wait_for_perm(server, "Drain", 4)  # registered at once, not at the next 30 s round
        assert conf.read_text() == "# ours\nbrokerName=broker-a\nbrokerPermission=4\n"
    # The next start reads the file: the broker comes back drained.

    assert broker_config_from_settings(read_settings_file(str(conf))).broker_permission == 4


def _port_with_vip_free() -> int:
    """A free port P whose P - 2 (the VIP channel) and P + 1 (HA) are free too."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        try:
            for other in (port - 2, port + 1):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", other))
        except OSError:
            continue
        return port
    raise AssertionError("no port with its VIP and HA ports free")


def test_a_broker_serves_its_requests_on_the_vip_channel_too(tmp_path: Path) -> None:
    """Listen port - 2, as a Java broker's fastRemotingServer: a Java slave asks its
    master GET_ALL_TOPIC_CONFIG there (BrokerOuterAPI.getAllTopicConfig)."""
    port = _port_with_vip_free()
    options = BrokerOptions(
        str(tmp_path / "b"), listen=f"127.0.0.1:{port}", store_config=small_store()
    )
    with BackgroundServer(options) as server:
        _send(server.broker_address, "OnMain", b"x")
        vip = f"127.0.0.1:{port - 2}"
        answer = invoke_sync(vip, request(RequestCode.GET_ALL_TOPIC_CONFIG))
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        assert "OnMain" in json.loads(answer.body)["topicConfigTable"]
        _send(vip, "OnVip", b"y")  # a client with vipChannelEnabled
    with pytest.raises(RemotingClientError, match="refused"):
        invoke_sync(vip, request(RequestCode.GET_ALL_TOPIC_CONFIG))  # closed at stop


def _pids_running(needle: str) -> list[int]:
    """Processes whose command line holds ``needle`` (Linux /proc)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if needle.encode() in cmdline.split(b"\0"):
            pids.append(int(entry.name))
    return pids


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_cli_serve_brokers_children_stop_when_serve_is_sigkilled(tmp_path: Path) -> None:
    """A SIGKILLed serve cannot stop its children; the kernel does (PR_SET_PDEATHSIG):
    each gets SIGTERM and shuts down cleanly (no abort file left)."""
    store = tmp_path / "store"
    second_store = tmp_path / "store-2"
    port = _free_port_pair_10_apart()
    command = [sys.executable, "-m", "rocketstore.cli.main", "serve", "--store", str(store)]
    command += ["--listen", f"127.0.0.1:{port}", "--namesrv-listen", "127.0.0.1:0"]
    command += ["--brokers", "2"]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        line = ""
        deadline = time.monotonic() + 60
        while "name server" not in line and time.monotonic() < deadline:
            line = process.stderr.readline()
            assert line or process.poll() is None, "serve exited early"
        deadline = time.monotonic() + 60  # (the child opens its store and listens)
        while not (second_store / ABORT_FILE).exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert (second_store / ABORT_FILE).exists()
        assert len(_pids_running(str(second_store))) == 1
        process.kill()
        process.wait()
        deadline = time.monotonic() + 60
        while _pids_running(str(second_store)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _pids_running(str(second_store)), "the child outlived a SIGKILLed serve"
        assert not (second_store / ABORT_FILE).exists()  # a clean shutdown
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for pid in _pids_running(str(second_store)):  # (only if the test failed)
            os.kill(pid, signal.SIGKILL)


def test_serve_names_why_its_broker_could_not_register(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An ACL file with no admin account: the embedded name server refuses the broker's
    unsigned registration. The start fails naming the refusal and the fix, not with a
    bare TimeoutError."""
    import rocketstore.broker.app as app_module

    monkeypatch.setattr(app_module, "REGISTER_WAIT_S", 1)
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(
        "accounts:\n  - accessKey: user1234\n    secretKey: secret12345\n    admin: false\n"
    )
    options = BrokerOptions(
        str(tmp_path / "s"), listen="127.0.0.1:0", store_config=small_store(), acl_file=str(acl)
    )
    with pytest.raises(ConfigError) as caught:
        BackgroundServer(options).start()
    text = str(caught.value)
    assert "did not register with its name server within 1 s" in text
    assert "NO_ACCESS_KEY" in text
    assert f"{acl} has no admin account" in text
