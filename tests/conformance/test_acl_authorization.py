"""Authorization as RocketMQ 4.9's plain ACL does it (issue #40), with real clients: the
Python ``rocketmq`` 0.4.4 client (C++ core) and ali-ons, against a broker whose
plain_acl.yml has an admin, a limited account, an account trusted from loopback and a
global white list loopback is outside of (tests/conformance/conftest.py ACL_RULES_YML)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from rocketstore.broker.acl import sign
from rocketstore.broker.app import BackgroundServer
from rocketstore.broker.client import invoke_sync, request
from rocketstore.broker.codes import RequestCode, ResponseCode

LIMITED = ("--access-key", "limited1", "--secret-key", "limited-secret")


def _refusals(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "refused by ACL" in r.getMessage()]


def _sent(py_client: Any, server: BackgroundServer, topic: str, *keys: str) -> list[Any]:
    run = py_client("produce", server.namesrv_address, topic, 2, *keys)
    return [line for line in run.finish(60) if line["event"] == "sent"]


def test_topic_permissions(
    py_client: Any, acl_rules_server: BackgroundServer, caplog: pytest.LogCaptureFixture
) -> None:
    assert len(_sent(py_client, acl_rules_server, "AclOpen", *LIMITED)) == 2
    assert _sent(py_client, acl_rules_server, "AclReadOnly", *LIMITED) == []
    assert _sent(py_client, acl_rules_server, "AclOther", *LIMITED) == []
    refused = _refusals(caplog)
    assert any("DENIED: No default permission for topic:AclReadOnly" in m for m in refused)
    assert any("No default permission for topic:AclOther" in m for m in refused)


def test_group_permissions(
    py_client: Any, acl_rules_server: BackgroundServer, caplog: pytest.LogCaptureFixture
) -> None:
    server = acl_rules_server
    assert len(_sent(py_client, server, "AclOpen", *LIMITED)) == 2
    run = py_client(
        "consume", server.namesrv_address, "AclOpen", "GroupOpen", "--expect", 2,
        "--seconds", 40, *LIMITED,
    )  # fmt: skip
    assert len([r for r in run.finish(70) if r["event"] == "recv"]) == 2
    run = py_client(
        "consume", server.namesrv_address, "AclOpen", "GroupShut", "--expect", 1,
        "--seconds", 8, *LIMITED,
    )  # fmt: skip
    assert [r for r in run.finish(40) if r["event"] == "recv"] == []
    assert any("No default permission for group:GroupShut" in m for m in _refusals(caplog))


def _signed(server: BackgroundServer, code: int, ext: dict[str, str], key: str, secret: str) -> Any:
    cmd = request(code, {**ext, "AccessKey": key})
    cmd.ext_fields["Signature"] = sign(cmd.ext_fields, b"", secret)
    return invoke_sync(server.broker_address, cmd)


def test_admin_requests_need_an_admin_account(acl_rules_server: BackgroundServer) -> None:
    def signed(code: int, ext: dict[str, str], key: str, secret: str) -> Any:
        return _signed(acl_rules_server, code, ext, key, secret)

    topic = {"topic": "AclMade", "readQueueNums": "2", "writeQueueNums": "2", "perm": "6"}
    config = {"fileReservedTime": "1"}
    for code, ext in (
        (RequestCode.UPDATE_AND_CREATE_TOPIC, topic),
        (RequestCode.UPDATE_BROKER_CONFIG, config),
        (RequestCode.DELETE_EXPIRED_COMMITLOG, {}),
    ):
        answer = signed(code, ext, "limited1", "limited-secret")
        assert answer.code == ResponseCode.NO_PERMISSION
        assert f"Need admin permission for request code={int(code)}" in (answer.remark or "")
    made = signed(RequestCode.UPDATE_AND_CREATE_TOPIC, topic, "RocketMQ", "12345678")
    assert made.code == ResponseCode.SUCCESS


def test_white_lists(
    py_client: Any, acl_rules_server: BackgroundServer, caplog: pytest.LogCaptureFixture
) -> None:
    server = acl_rules_server
    # Loopback is outside the global white list: an unsigned client is refused.
    assert _sent(py_client, server, "AclOpen") == []
    assert any("NO_ACCESS_KEY: No accessKey is configured" in m for m in _refusals(caplog))
    # trusted1's white list holds 127.0.0.1: its requests pass without a right secret.
    trusted = ("--access-key", "trusted1", "--secret-key", "not-its-secret")
    assert len(_sent(py_client, server, "AclAny", *trusted)) == 2
    # A wrong secret from an address outside the account's white list is refused.
    wrong = ("--access-key", "limited1", "--secret-key", "not-its-secret")
    assert _sent(py_client, server, "AclOpen", *wrong) == []
    assert any(
        "BAD_SIGNATURE: Check signature failed for accessKey=limited1" in m
        for m in _refusals(caplog)
    )


def test_ali_ons_topic_permissions(js_client: Any, acl_rules_server: BackgroundServer) -> None:
    server = acl_rules_server
    keys = {"ACCESS_KEY": "limited1", "SECRET_KEY": "limited-secret"}
    for topic in ("AclOpen", "AclReadOnly"):  # ali-ons sends to topics the routes hold
        ext = {"topic": topic, "readQueueNums": "2", "writeQueueNums": "2", "perm": "6"}
        made = _signed(server, RequestCode.UPDATE_AND_CREATE_TOPIC, ext, "RocketMQ", "12345678")
        assert made.code == ResponseCode.SUCCESS
    time.sleep(0.3)  # the new topics reach the name server

    def sent(topic: str) -> list[Any]:
        run = js_client(
            "client.js", "produce", server.namesrv_address, topic, 1, -1, env_extra=keys
        )
        return [line for line in run.finish(60) if line["event"] == "sent"]

    assert len(sent("AclOpen")) == 1
    assert sent("AclReadOnly") == []


def _until(check: Any, what: str, timeout_s: float = 10) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_the_acl_file_edited_while_the_broker_runs(
    py_client: Any, acl_rules_server: BackgroundServer
) -> None:
    server = acl_rules_server
    acl_file = server.broker.options.acl_file
    assert acl_file is not None
    path = Path(acl_file)
    assert _sent(py_client, server, "AclOpen") == []  # unsigned, outside the white list
    path.write_text(path.read_text().replace("- 10.10.103.*", "- 10.10.103.*\n- 127.0.0.1"))
    ctx = server.broker.ctx
    assert ctx is not None
    _until(lambda: ctx.acl is not None and "127.0.0.1" in ctx.acl.global_white_addresses, "reload")
    assert len(_sent(py_client, server, "AclOpen")) == 2


def test_acl_admin_requests(py_client: Any, acl_rules_server: BackgroundServer) -> None:
    """updateAclConfig / deleteAclConfig / clusterAclConfigVersion / updateGlobalWhiteAddr
    as mqadmin sends them (headers of 4.9.8), by the admin account."""
    server = acl_rules_server

    def admin(code: int, ext: dict[str, str]) -> Any:
        return _signed(server, code, ext, "RocketMQ", "12345678")

    new = {"accessKey": "made-at-runtime", "secretKey": "runtime-secret", "admin": "false"}
    new |= {"defaultTopicPerm": "DENY", "topicPerms": "AclRuntime=PUB,AclOther=SUB"}
    refused = _signed(
        server, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, new, "limited1", "limited-secret"
    )
    assert refused.code == ResponseCode.NO_PERMISSION  # not an admin
    assert admin(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, new).code == ResponseCode.SUCCESS
    keys = ("--access-key", "made-at-runtime", "--secret-key", "runtime-secret")
    assert len(_sent(py_client, server, "AclRuntime", *keys)) == 2
    assert _sent(py_client, server, "AclOther", *keys) == []
    info = admin(RequestCode.GET_BROKER_CLUSTER_ACL_INFO, {})
    assert info.code == ResponseCode.SUCCESS
    assert json.loads(info.ext_fields["version"])["counter"] == 1
    assert info.ext_fields["brokerName"] == server.broker.options.broker.broker_name
    white = admin(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, {"globalWhiteAddrs": "10.1.1.*"})
    assert white.code == ResponseCode.SUCCESS
    gone = admin(RequestCode.DELETE_ACL_CONFIG, {"accessKey": "made-at-runtime"})
    assert gone.code == ResponseCode.SUCCESS
    assert _sent(py_client, server, "AclRuntime", *keys) == []
    again = admin(RequestCode.DELETE_ACL_CONFIG, {"accessKey": "made-at-runtime"})
    assert again.code == ResponseCode.DELETE_ACL_CONFIG_FAILED
    assert (
        json.loads(admin(RequestCode.GET_BROKER_CLUSTER_ACL_INFO, {}).ext_fields["version"])[
            "counter"
        ]
        == 3
    )
