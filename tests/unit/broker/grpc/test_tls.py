"""TLS on the gRPC port (the 5.x proxy's tls.server.mode) through grpcio's own channels:
permissive (the default) takes plain and TLS on one port through the relay and reports
the client's own address; enforcing refuses plain; disabled refuses TLS; the listeners'
certificate (--tls-cert) and client certificates (--tls-client-ca) are used."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("grpc")

import grpc

from rocketstore.broker.app import BackgroundServer, BrokerOptions
from rocketstore.broker.grpc.protocol import rocketmq_v2_service_pb2 as spb
from rocketstore.broker.grpc.protocol import rocketmq_v2_service_pb2_grpc as spb_grpc
from rocketstore.broker.grpc.protocol import rocketmq_v2_types_pb2 as pb
from rocketstore.broker.grpc.server import GrpcServer, GrpcTls
from rocketstore.broker.tls import ServerTls, TlsMode
from rocketstore.broker.topic_config import TopicConfig
from rocketstore.config import StoreConfig
from rocketstore.errors import ConfigError
from rocketstore.status import GetStatus

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl command")


def _cert(where: Path, name: str) -> tuple[str, str]:
    cert, key = where / f"{name}.pem", where / f"{name}.key"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2"),
            *("-keyout", str(key), "-out", str(cert), "-subj", f"/CN={name}"),
            *("-addext", "subjectAltName=IP:127.0.0.1"),
        ],
        check=True,
        capture_output=True,
    )
    return str(cert), str(key)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, str]]:
    where = tmp_path_factory.mktemp("certs")
    return {name: _cert(where, name) for name in ("server", "client")}


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Any]:
    servers: list[BackgroundServer] = []

    def start(mode: TlsMode | None, tls: ServerTls | None = None) -> GrpcServer:
        options = BrokerOptions(
            str(tmp_path / f"store{len(servers)}"),
            listen="127.0.0.1:0",
            store_config=StoreConfig(mapped_file_size_commit_log=16 * 1024 * 1024),
            grpc_listen="127.0.0.1:0",
            grpc_tls_mode=mode,
            tls=tls,
        )
        server = BackgroundServer(options).__enter__()
        servers.append(server)
        assert server.broker.ctx is not None and server.broker.grpc_server is not None
        server.broker.ctx.topics.update(TopicConfig("T", read_queue_nums=1, write_queue_nums=1))
        return server.broker.grpc_server

    yield start
    for server in servers:
        server.__exit__(None, None, None)


def _route(channel: grpc.Channel) -> int:
    stub = spb_grpc.MessagingServiceStub(channel)
    answer = stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name="T")), timeout=5)
    return int(answer.status.code)


def _tls(address: str, ca: bytes, client: tuple[bytes, bytes] | None = None) -> grpc.Channel:
    key, cert = client if client is not None else (None, None)
    credentials = grpc.ssl_channel_credentials(ca, private_key=key, certificate_chain=cert)
    return grpc.secure_channel(address, credentials)


def _refused(channel: grpc.Channel) -> None:
    with channel, pytest.raises(grpc.RpcError) as failed:
        _route(channel)
    assert failed.value.code() is grpc.StatusCode.UNAVAILABLE


def test_permissive_by_default_with_a_self_signed_certificate(serve):
    server = serve(None)
    assert server.tls.mode is TlsMode.PERMISSIVE
    assert server.tls.cert_chain.startswith(b"-----BEGIN CERTIFICATE-----")
    with grpc.insecure_channel(server.address) as channel:
        assert _route(channel) == pb.Code.OK
    with _tls(server.address, server.tls.cert_chain) as channel:
        assert _route(channel) == pb.Code.OK


def test_permissive_records_the_clients_address_not_the_relays(serve, tmp_path):
    server = serve(TlsMode.PERMISSIVE)
    assert server.front is not None
    with _tls(server.address, server.tls.cert_chain) as channel:
        message = pb.Message(
            topic=pb.Resource(name="T"),
            body=b"b",
            system_properties=pb.SystemProperties(message_id="01AB", tag="t"),
        )
        stub = spb_grpc.MessagingServiceStub(channel)
        answer = stub.SendMessage(spb.SendMessageRequest(messages=[message]), timeout=5)
        assert answer.status.code == pb.Code.OK
        clients = set(server.front.peers.values())
        deadline = time.monotonic() + 10  # (the dispatch to the queue is asynchronous)
        while server.ctx.store.max_offset("T", 0) < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        result = server.ctx.store.get_messages("check", "T", 0, 0, 1)
    assert result.status is GetStatus.FOUND
    (record,) = result.messages
    # the client's own ip:port (the relay's upstream ports are the map's keys)
    assert record.born_host in clients


def test_enforcing_refuses_plain(serve, certs):
    cert, key = certs["server"]
    server = serve(None, ServerTls(cert, key, TlsMode.ENFORCING))
    assert server.tls.mode is TlsMode.ENFORCING and server.front is None
    _refused(grpc.insecure_channel(server.address))
    with _tls(server.address, Path(cert).read_bytes()) as channel:
        assert _route(channel) == pb.Code.OK


def test_disabled_refuses_tls(serve, certs):
    cert, key = certs["server"]
    # (the listeners' TLS stays on; the gRPC port alone is plain)
    server = serve(TlsMode.DISABLED, ServerTls(cert, key, TlsMode.PERMISSIVE))
    assert server.front is None
    _refused(_tls(server.address, Path(cert).read_bytes()))
    with grpc.insecure_channel(server.address) as channel:
        assert _route(channel) == pb.Code.OK


def test_client_certificates_when_required(serve, certs):
    cert, key = certs["server"]
    client_cert, client_key = certs["client"]
    server = serve(TlsMode.ENFORCING, ServerTls(cert, key, TlsMode.PERMISSIVE, client_cert))
    ca = Path(cert).read_bytes()
    _refused(_tls(server.address, ca))
    mine = (Path(client_key).read_bytes(), Path(client_cert).read_bytes())
    with _tls(server.address, ca, mine) as channel:
        assert _route(channel) == pb.Code.OK


def test_a_client_gone_mid_handshake_leaves_the_front_serving(serve):
    server = serve(TlsMode.PERMISSIVE)
    host, port = server.address.rsplit(":", 1)
    for first in (b"\x16\x03\x01", b"PRI * HTTP/2.0", b""):
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            sock.sendall(first)
    with grpc.insecure_channel(server.address) as channel:
        assert _route(channel) == pb.Code.OK


def test_permissive_on_uvloop(tmp_path, monkeypatch):
    """serve's default loop: its transports are no asyncio.Transport subclasses."""
    uvloop = pytest.importorskip("uvloop")
    monkeypatch.setattr(asyncio, "new_event_loop", uvloop.new_event_loop)
    options = BrokerOptions(
        str(tmp_path / "store"),
        listen="127.0.0.1:0",
        store_config=StoreConfig(mapped_file_size_commit_log=16 * 1024 * 1024),
        grpc_listen="127.0.0.1:0",
    )
    with BackgroundServer(options) as server:
        grpc_server = server.broker.grpc_server
        assert grpc_server is not None and grpc_server.front is not None
        assert type(server.loop).__module__.startswith("uvloop")
        with grpc.insecure_channel(grpc_server.address) as channel:
            assert _route(channel) == pb.Code.TOPIC_NOT_FOUND
        with _tls(grpc_server.address, grpc_server.tls.cert_chain) as channel:
            assert _route(channel) == pb.Code.TOPIC_NOT_FOUND


def test_without_openssl_the_default_is_plain(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert GrpcTls.configure(None, None).mode is TlsMode.DISABLED
    with pytest.raises(ConfigError, match="openssl"):
        GrpcTls.configure(None, TlsMode.ENFORCING)
