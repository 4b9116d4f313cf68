"""TLS on the broker and name server listeners (tls.server.mode, issue #40), checked with
Python's ssl: permissive mode serves plain and TLS on one port (first-byte sniffing),
enforcing refuses plain, client certificates when required; rocketstore's own clients
(invoke_sync, the broker's registration) speak TLS."""

from __future__ import annotations

import shutil
import socket
import ssl
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketstore.broker.app import BackgroundServer, BrokerOptions
from rocketstore.broker.client import invoke_sync, request
from rocketstore.broker.codes import RequestCode, ResponseCode
from rocketstore.broker.remoting import decode_command, encode_command
from rocketstore.broker.tls import ServerTls, TlsMode
from rocketstore.config import parse_host
from rocketstore.remoting.blocking import RemotingClientError
from rocketstore.remoting.tls import TLS_CA_ENV, TLS_ENABLE_ENV
from tests.unit.broker.broker_helpers import small_store


def _cert(where: Path, name: str) -> tuple[str, str]:
    cert, key = where / f"{name}.pem", where / f"{name}.key"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2"),
            *("-keyout", str(key), "-out", str(cert), "-subj", f"/CN={name}"),
        ],
        check=True,
        capture_output=True,
    )
    return str(cert), str(key)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, str]]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed: no certificate to test with")
    where = tmp_path_factory.mktemp("certs")
    return {name: _cert(where, name) for name in ("server", "client", "stranger")}


def _server(tmp_path: Path, tls: ServerTls) -> BackgroundServer:
    options = BrokerOptions(
        str(tmp_path / "store"), listen="127.0.0.1:0", store_config=small_store()
    )
    options.tls = tls
    return BackgroundServer(options)


def _over_tls(address: str, context: ssl.SSLContext) -> int:
    """GET_BROKER_CLUSTER_INFO / GET_BROKER_CONFIG over a TLS socket made by hand."""
    host, port = parse_host(address)
    cmd = request(RequestCode.GET_BROKER_CONFIG)
    with (
        socket.create_connection((host, port), timeout=10) as raw,
        context.wrap_socket(raw) as sock,
    ):
        sock.sendall(encode_command(cmd))
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">I", data[:4])[0]:
            chunk = sock.recv(65536)
            assert chunk, "closed"
            data += chunk
    return decode_command(data[4:]).code


def _client_context(ca: str | None = None, cert: tuple[str, str] | None = None) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    if ca is not None:
        context.load_verify_locations(ca)
        context.verify_mode = ssl.CERT_REQUIRED
    if cert is not None:
        context.load_cert_chain(*cert)
    return context


@pytest.fixture
def permissive(tmp_path: Path, certs: dict[str, tuple[str, str]]) -> Iterator[BackgroundServer]:
    with _server(tmp_path, ServerTls(*certs["server"], TlsMode.PERMISSIVE)) as server:
        yield server


def test_permissive_serves_plain_and_tls_on_one_port(
    permissive: BackgroundServer, certs: dict[str, tuple[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    address = permissive.broker_address
    plain = invoke_sync(address, request(RequestCode.GET_BROKER_CONFIG))
    assert plain.code == ResponseCode.SUCCESS
    assert _over_tls(address, _client_context(ca=certs["server"][0])) == ResponseCode.SUCCESS
    # rocketstore's own blocking client, switched on as RocketMQ's (a process setting)
    monkeypatch.setenv(TLS_ENABLE_ENV, "true")
    monkeypatch.setenv(TLS_CA_ENV, certs["server"][0])
    assert invoke_sync(address, request(RequestCode.GET_BROKER_CONFIG)).code == ResponseCode.SUCCESS
    # the name server of the same serve listens in the same mode
    answer = invoke_sync(permissive.namesrv_address, request(RequestCode.GET_BROKER_CLUSTER_INFO))
    assert answer.code == ResponseCode.SUCCESS
    # a certificate the client does not trust is refused by the client
    monkeypatch.setenv(TLS_CA_ENV, certs["stranger"][0])
    with pytest.raises(RemotingClientError, match="CERTIFICATE_VERIFY_FAILED"):
        invoke_sync(address, request(RequestCode.GET_BROKER_CONFIG))


def test_enforcing_refuses_plain(tmp_path: Path, certs: dict[str, tuple[str, str]]) -> None:
    # The broker registers with its enforcing name server over TLS (start waits for it).
    with _server(tmp_path, ServerTls(*certs["server"], TlsMode.ENFORCING)) as server:
        with pytest.raises(RemotingClientError):
            invoke_sync(server.broker_address, request(RequestCode.GET_BROKER_CONFIG), 3.0)
        assert _over_tls(server.broker_address, _client_context()) == ResponseCode.SUCCESS


def test_client_certificates_when_required(
    tmp_path: Path, certs: dict[str, tuple[str, str]]
) -> None:
    tls = ServerTls(*certs["server"], TlsMode.PERMISSIVE, client_ca_file=certs["client"][0])
    with _server(tmp_path, tls) as server:
        address = server.broker_address
        with pytest.raises((ssl.SSLError, OSError, AssertionError)):
            _over_tls(address, _client_context())
        good = _client_context(cert=certs["client"])
        assert _over_tls(address, good) == ResponseCode.SUCCESS
        with pytest.raises((ssl.SSLError, OSError, AssertionError)):
            _over_tls(address, _client_context(cert=certs["stranger"]))


def test_a_broker_registers_beside_a_name_server_that_requires_client_certificates(
    tmp_path: Path, certs: dict[str, tuple[str, str]]
) -> None:
    # serve --tls-mode enforcing --tls-client-ca: the broker's registration presents the
    # listeners' own certificate (here self-signed, so the CA file is that certificate);
    # before, start timed out waiting for a registration the name server refused.
    tls = ServerTls(*certs["server"], TlsMode.ENFORCING, client_ca_file=certs["server"][0])
    with _server(tmp_path, tls) as server:
        with pytest.raises((ssl.SSLError, OSError, AssertionError)):
            _over_tls(server.broker_address, _client_context())
        good = _client_context(cert=certs["server"])
        assert _over_tls(server.broker_address, good) == ResponseCode.SUCCESS
