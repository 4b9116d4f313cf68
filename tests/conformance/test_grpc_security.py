"""TLS and the ACL on the gRPC port with the official 5.x clients (rocketmq-python-client
and rocketmq-client-nodejs): TLS and plain on one port (permissive, the default, with the
self-signed certificate made at start), and plain_acl.yml's accounts (the right key, a
wrong secret, a topic the account may only read).

Both clients verify the server's certificate against grpc's default roots when TLS is on;
GRPC_DEFAULT_SSL_ROOTS_FILE_PATH points them at the broker's certificate (the Java
client trusts any certificate by default)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("grpc", reason="the grpc extra is not installed (pip install -e '.[grpc]')")

from rocketstore.broker.app import BackgroundServer
from rocketstore.broker.topic_config import TopicConfig
from tests.conformance.conftest import ACL_RULES_YML, ClientRun, broker_options

TOPIC = "TopicTls"


def _endpoint(server: BackgroundServer) -> str:
    assert server.broker.grpc_server is not None
    return server.broker.grpc_server.address


def _finish(run: ClientRun, timeout_s: float = 110) -> list[dict[str, Any]]:
    lines = run.finish(timeout_s)
    assert run.process.returncode == 0, "\n".join(run.stderr[-40:])
    return lines


def _events(lines: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e for e in lines if e["event"] == name]


@pytest.fixture
def tls_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[BackgroundServer]:
    """A broker serving gRPC as it does by default (permissive, self-signed), the
    clients set to TLS and to trust its certificate."""
    options = broker_options(tmp_path / "store")
    options.grpc_listen = "127.0.0.1:0"
    with BackgroundServer(options) as running:
        assert running.broker.ctx is not None and running.broker.grpc_server is not None
        running.broker.ctx.topics.update(TopicConfig(TOPIC))
        ca = tmp_path / "grpc-ca.pem"
        ca.write_bytes(running.broker.grpc_server.tls.cert_chain)
        monkeypatch.setenv("GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", str(ca))
        monkeypatch.setenv("RMQ5_TLS", "1")
        yield running


def test_python_client_over_tls_and_plain_on_one_port(py5_client, tls_server, monkeypatch):
    endpoint = _endpoint(tls_server)
    sent = _events(_finish(py5_client("send", endpoint, TOPIC, 2)), "sent")
    assert len(sent) == 2
    lines = _finish(py5_client("receive", endpoint, "GroupTls", TOPIC, 2, 20, "ack"))
    assert {e["id"] for e in _events(lines, "received")} == {e["id"] for e in sent}
    monkeypatch.setenv("RMQ5_TLS", "0")  # the same port, plain
    assert len(_events(_finish(py5_client("send", endpoint, TOPIC, 1)), "sent")) == 1


def test_nodejs_client_over_tls(js5_client, tls_server):
    endpoint = _endpoint(tls_server)
    sent = _events(_finish(js5_client("send", endpoint, TOPIC, 2)), "sent")
    assert len(sent) == 2
    lines = _finish(js5_client("receive", endpoint, "GroupTlsNode", TOPIC, 2, 40))
    assert {e["id"] for e in _events(lines, "received")} == {e["id"] for e in sent}


@pytest.fixture
def acl_grpc_server(tmp_path: Path) -> Iterator[BackgroundServer]:
    """A broker with the conformance ACL (limited1: AclOpen PUB|SUB, AclReadOnly SUB,
    GroupOpen SUB; nothing else)."""
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL_RULES_YML)
    acl.chmod(0o600)
    options = broker_options(tmp_path / "store")
    options.grpc_listen = "127.0.0.1:0"
    options.acl_file = str(acl)
    with BackgroundServer(options) as running:
        assert running.broker.ctx is not None
        for topic in ("AclOpen", "AclReadOnly"):
            running.broker.ctx.topics.update(TopicConfig(topic))
        yield running


def _account(monkeypatch: pytest.MonkeyPatch, access_key: str, secret_key: str) -> None:
    monkeypatch.setenv("RMQ5_ACCESS_KEY", access_key)
    monkeypatch.setenv("RMQ5_SECRET_KEY", secret_key)


def _stored(server: BackgroundServer, topic: str) -> int:
    store = server.broker.store
    assert store is not None
    return sum(store.max_offset(topic, queue_id) for queue_id in range(8))


def test_python_client_with_credentials(py5_client, acl_grpc_server, monkeypatch):
    endpoint = _endpoint(acl_grpc_server)
    _account(monkeypatch, "limited1", "limited-secret")
    sent = _events(_finish(py5_client("send", endpoint, "AclOpen", 2)), "sent")
    assert len(sent) == 2
    lines = _finish(py5_client("receive", endpoint, "GroupOpen", "AclOpen", 2, 20, "ack"))
    assert {e["id"] for e in _events(lines, "received")} == {e["id"] for e in sent}
    # a group it has no permission for: the proxy's code and the ACL's words
    lines = _finish(
        py5_client("receive", endpoint, "GroupOther", "AclOpen", 1, 20, "ack", "--wait-s", 8)
    )
    (error,) = _events(lines, "error")
    assert error["code"] == 40100
    assert "No default permission for group:GroupOther" in error["text"]
    # a topic it may only subscribe to: the route is given (ANY), the send refused
    refused = _finish(py5_client("send", endpoint, "AclReadOnly", 1))
    assert _events(refused, "error") and not _events(refused, "sent")
    assert _stored(acl_grpc_server, "AclReadOnly") == 0
    # a wrong secret: refused from the first call (the route)
    _account(monkeypatch, "limited1", "not-the-secret")
    refused = _finish(py5_client("send", endpoint, "AclOpen", 1))
    assert _events(refused, "error") and not _events(refused, "sent")
    assert _stored(acl_grpc_server, "AclOpen") == 2


def test_nodejs_client_with_credentials(js5_client, acl_grpc_server, monkeypatch):
    endpoint = _endpoint(acl_grpc_server)
    _account(monkeypatch, "limited1", "limited-secret")
    assert len(_events(_finish(js5_client("send", endpoint, "AclOpen", 1)), "sent")) == 1
    # a PushConsumer: its telemetry settings (SUB on the group and topic), auto-renewed receives
    lines = _finish(js5_client("push", endpoint, "GroupOpen", "AclOpen", 1, 40))
    assert len(_events(lines, "consumed")) == 1
    _account(monkeypatch, "limited1", "not-the-secret")
    # (refused at the producer's startup: the client exits with a 'fatal' line)
    refused = js5_client("send", endpoint, "AclOpen", 1).finish(110)
    assert _events(refused, "fatal") or _events(refused, "error"), refused
    assert not _events(refused, "sent")
    assert _stored(acl_grpc_server, "AclOpen") == 1
