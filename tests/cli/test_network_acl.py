"""The CLI's network commands against a real ``rocketstore serve --acl --tls-mode enforcing``
(issue #40): they speak TLS with ROCKETSTORE_TLS_ENABLE, sign with --access-key/--secret-key
(or ROCKETSTORE_ACCESS_KEY/ROCKETSTORE_SECRET_KEY) as mqadmin's AclClientRPCHook signs, never
print a secret, and manage the broker's plain_acl.yml with mqadmin's ACL commands."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli.cli_helpers import CLI, Run, run_cli

ADMIN_KEY, ADMIN_SECRET = "RocketMQ", "admin-secret-1234"
USER_KEY, USER_SECRET = "rocketmq2", "user-secret-5678"
ADMIN = ("--access-key", ADMIN_KEY, "--secret-key", ADMIN_SECRET)
USER = ("--access-key", USER_KEY, "--secret-key", USER_SECRET)
SECRETS = (ADMIN_SECRET, USER_SECRET, "app-secret-9999")


@dataclass
class Served:
    namesrv: str
    broker: str
    acl: Path
    tls_env: dict[str, str]

    def cli(self, *args: str, env: dict[str, str] | None = None, tls: bool = True) -> Run:
        run = run_cli(*args, extra_env={**(self.tls_env if tls else {}), **(env or {})})
        for secret in SECRETS:  # never echoed, whatever happened
            assert secret not in run.out and secret not in run.err
        return run


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed: no certificate to test with")
    root = tmp_path_factory.mktemp("network-acl")
    cert, key = root / "server.pem", root / "server.key"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2"),
            *("-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1"),
        ],
        check=True,
        capture_output=True,
    )
    acl = root / "plain_acl.yml"
    acl.write_text(
        "accounts:\n"
        f"  - accessKey: {ADMIN_KEY}\n    secretKey: {ADMIN_SECRET}\n    admin: true\n"
        f"  - accessKey: {USER_KEY}\n    secretKey: {USER_SECRET}\n"
        "    defaultTopicPerm: PUB|SUB\n    defaultGroupPerm: PUB|SUB\n"
    )
    process = subprocess.Popen(
        [*CLI, "--store", str(root / "store"), "serve", "--listen", "127.0.0.1:0",
         "--namesrv-listen", "127.0.0.1:0", "--acl", str(acl), "--tls-cert", str(cert),
         "--tls-key", str(key), "--tls-mode", "enforcing"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stderr is not None
    try:
        ready = ""
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not ready:
            line = process.stderr.readline()
            if not line:
                break
            if "Ctrl-C stops" in line:
                ready = line
        found = re.search(r"name server (\S+), broker (\S+) over", ready)
        assert found, f"serve did not start: {ready!r}"
        yield Served(
            found.group(1),
            found.group(2),
            acl,
            {"ROCKETSTORE_TLS_ENABLE": "true", "ROCKETSTORE_TLS_CA": str(cert)},
        )
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate(timeout=10)


def test_serve_tls_enforcing_refuses_a_plain_client_and_serves_a_tls_one(served: Served) -> None:
    plain = served.cli("topicList", "-n", served.namesrv, tls=False)
    assert plain.code == 1 and "topicList through" in plain.err
    assert served.cli("topicList", "-n", served.namesrv, *ADMIN).code == 0


def test_admin_requests_are_signed_and_need_an_admin_account(served: Served) -> None:
    create = ("updateTopic", "-n", served.namesrv, "-t", "Signed", "-r", "2", "-w", "2")
    unsigned = served.cli(*create)
    assert unsigned.code == 1 and "refused request 17" in unsigned.err
    assert "NO_ACCESS_KEY" in unsigned.err or "AccessKey" in unsigned.err
    not_admin = served.cli(*create, *USER)
    assert not_admin.code == 1 and "refused request 17" in not_admin.err
    wrong = served.cli(*create, "--access-key", ADMIN_KEY, "--secret-key", "app-secret-9999")
    assert wrong.code == 1 and "refused request 17" in wrong.err
    done = served.cli(*create, *ADMIN)
    assert done.code == 0, done.err
    assert f"create topic to {served.broker} success." in done.out
    route = served.cli("topicRoute", "-n", served.namesrv, "-t", "Signed", *ADMIN)
    assert route.code == 0 and '"readQueueNums":2' in route.out
    assert "Signed" in served.cli("topicList", "-n", served.namesrv, *ADMIN).out.split()
    clean = served.cli("cleanExpiredCQ", "-b", served.broker, *USER)
    assert clean.code == 1 and "refused request 306" in clean.err
    assert served.cli("cleanExpiredCQ", "-b", served.broker, *ADMIN).out == "success\n"


def test_keys_come_from_the_environment_and_go_together(served: Served) -> None:
    env = {"ROCKETSTORE_ACCESS_KEY": ADMIN_KEY, "ROCKETSTORE_SECRET_KEY": ADMIN_SECRET}
    made = served.cli("updateTopic", "-n", served.namesrv, "-t", "FromEnv", env=env)
    assert made.code == 0, made.err
    gone = served.cli("deleteTopic", "-n", served.namesrv, "-t", "FromEnv", env=env)
    assert gone.code == 0, gone.err
    half = served.cli("topicList", "-n", served.namesrv, "--access-key", ADMIN_KEY)
    assert half.code == 1
    assert "--access-key needs --secret-key (or $ROCKETSTORE_SECRET_KEY)" in half.err
    other = served.cli("topicList", "-n", served.namesrv, "--secret-key", ADMIN_SECRET)
    assert other.code == 1 and "--secret-key needs --access-key" in other.err
    helped = served.cli("updateTopic", "--help")
    assert "--access-key KEY" in helped.out and "--secret-key SECRET" in helped.out


def _acl_text(served: Served) -> str:
    return served.acl.read_text()


def test_acl_commands_manage_the_brokers_acl_file(served: Served) -> None:
    before = served.cli("--json", "clusterAclConfigVersion", "-b", served.broker, *ADMIN)
    assert before.code == 0, before.err
    (version,) = before.json_lines()
    assert version["aclFilePath"] == str(served.acl) and version["brokerAddr"] == served.broker

    update = ("updateAclConfig", "-b", served.broker, "-a", "appkey1", "-s", "app-secret-9999",
              "-i", "DENY", "-t", "Orders=PUB,Audit=SUB", "-w", "10.0.0.*")  # fmt: skip
    refused = served.cli(*update, *USER)
    assert refused.code == 1 and "refused request 50" in refused.err
    assert "appkey1" not in _acl_text(served)
    done = served.cli(*update, *ADMIN)
    assert done.code == 0, done.err
    assert done.out == f"create or update plain access config to {served.broker} success.\n"
    text = _acl_text(served)
    assert "appkey1" in text and "Orders=PUB" in text and "10.0.0.*" in text

    table = served.cli(
        "clusterAclConfigVersion", "-n", served.namesrv, "-c", "DefaultCluster", *ADMIN
    )
    assert table.code == 0, table.err
    lines = table.out.splitlines()
    assert lines[0].startswith("#Cluster Name") and "#AclConfigVersionNum" in lines[0]
    assert lines[-1] == "get cluster's plain access config version success."
    row = lines[1].split()
    assert row[:4] == ["DefaultCluster", "broker-a", served.broker, str(served.acl)]
    assert int(row[4]) > version["version"]
    alias = served.cli("getAclConfig", "-b", served.broker, *ADMIN)
    assert alias.out.endswith("get broker's plain access config version success.\n")

    white = served.cli(
        "updateGlobalWhiteAddr", "-b", served.broker, "-g", "10.10.103.*,192.168.0.*", *ADMIN
    )
    assert white.code == 0, white.err
    assert "10.10.103.*" in _acl_text(served)

    deleted = served.cli("deleteAclConfig", "-b", served.broker, "-a", "appkey1", *ADMIN)
    assert deleted.code == 0, deleted.err
    assert deleted.out.endswith("account's accesskey is:appkey1\n")
    assert "appkey1" not in _acl_text(served)
    again = served.cli("deleteAclConfig", "-b", served.broker, "-a", "appkey1", *ADMIN)
    assert again.code == 1 and "has been deleted failed" in again.err


def test_acl_commands_need_one_target(served: Served) -> None:
    neither = served.cli("deleteAclConfig", "-a", "x", *ADMIN)
    assert neither.code == 1 and "give one of -b BROKER_ADDR or -c CLUSTER_NAME" in neither.err
    no_namesrv = served.cli("deleteAclConfig", "-c", "DefaultCluster", "-a", "x", *ADMIN)
    assert no_namesrv.code == 1 and "-c needs -n NAMESRV" in no_namesrv.err
