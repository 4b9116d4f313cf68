"""Fixtures for the conformance tests: a broker and name server on loopback (free ports,
in a background loop), and bounded real-client subprocesses.

Clients: the Python ``rocketmq`` 0.4.4 package (extra ``conformance``) and ali-ons
(``tests/conformance/js``, installed once per session with npm). A test skips, saying why,
only when its client cannot be installed here.
"""

from __future__ import annotations

import asyncio
import fcntl
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from rocketstore.broker.app import BackgroundServer, BrokerApp, BrokerOptions
from rocketstore.broker.broker_config import BrokerConfig
from rocketstore.config import StoreConfig

HERE = Path(__file__).parent
PY_CLIENT = HERE / "py" / "client.py"
JS_DIR = HERE / "js"
JS5_DIR = HERE / "js5"
# Level 1 = 1 s as RocketMQ; the retry levels (3 + reconsumeTimes) shortened to 1-2 s so a
# retried message comes back within the test's time.
DELAY_LEVELS = "1s 1s 1s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s"


@dataclass
class ClientRun:
    """A client subprocess whose JSON stdout lines are collected as they come."""

    process: subprocess.Popen[str]
    lines: list[dict[str, Any]] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)
    pumps: list[threading.Thread] = field(default_factory=list)

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            text = raw.strip()
            if text.startswith("{"):
                try:
                    self.lines.append(json.loads(text))
                except ValueError:
                    self.stderr.append(text)

    def _pump_err(self) -> None:
        assert self.process.stderr is not None
        for raw in self.process.stderr:
            self.stderr.append(raw.rstrip())

    def start_pumps(self) -> ClientRun:
        self.pumps = [
            threading.Thread(target=self._pump, daemon=True),
            threading.Thread(target=self._pump_err, daemon=True),
        ]
        for pump in self.pumps:
            pump.start()
        return self

    def _drained(self, timeout_s: float = 30) -> None:
        """Wait (the process has exited) until the pumps have read its pipes to the end: a
        fixed pause lost the last of 10,000 lines once on a loaded CI machine."""
        deadline = time.monotonic() + timeout_s
        for pump in self.pumps:
            pump.join(max(0.0, deadline - time.monotonic()))

    def events(self, name: str) -> list[dict[str, Any]]:
        return [line for line in list(self.lines) if line.get("event") == name]

    def wait_for(self, name: str, count: int, timeout_s: float) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout_s
        while len(self.events(name)) < count and time.monotonic() < deadline:
            if self.process.poll() is not None:
                self._drained()
                break
            time.sleep(0.05)
        return self.events(name)

    def finish(self, timeout_s: float) -> list[dict[str, Any]]:
        """Wait for the process (killing it past ``timeout_s``); all its lines."""
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            pytest.fail(f"client ran past {timeout_s}s; stderr tail: {self.stderr[-5:]}")
        self._drained()
        return list(self.lines)


@pytest.fixture(scope="session")
def client_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """HOME for the clients: the C++ client writes its logs under it."""
    return tmp_path_factory.mktemp("client-home")


@pytest.fixture(scope="session")
def py_client(client_home: Path) -> Any:
    if importlib.util.find_spec("rocketmq") is None:
        pytest.skip(
            "the Python rocketmq 0.4.4 client is not installed (pip install -e '.[conformance]')"
        )

    def start(*args: object) -> ClientRun:
        env = {**os.environ, "HOME": str(client_home)}
        process = subprocess.Popen(
            [sys.executable, str(PY_CLIENT), *map(str, args)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        return ClientRun(process).start_pumps()

    return start


@pytest.fixture(scope="session")
def js_client(client_home: Path) -> Any:
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None:
        pytest.skip("npm/node are not installed: the ali-ons client cannot run")
    # Test processes (pytest-xdist) each have this fixture: one installs, the others wait
    # on the lock and find the install done (two npm runs in one folder would clash).
    with open(JS_DIR / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (JS_DIR / "node_modules" / "ali-ons").is_dir():
            command = "ci" if (JS_DIR / "package-lock.json").exists() else "install"
            done = subprocess.run(
                [npm, command, "--no-audit", "--no-fund"],
                check=False,
                cwd=JS_DIR,
                capture_output=True,
                text=True,
                timeout=600,
            )
            if done.returncode != 0:
                pytest.fail(f"npm {command} failed in {JS_DIR}: {done.stderr[-2000:]}")

    def start(script: str, *args: object, env_extra: dict[str, str] | None = None) -> ClientRun:
        env = {**os.environ, "HOME": str(client_home), **(env_extra or {})}
        process = subprocess.Popen(
            [node, str(JS_DIR / script), *map(str, args)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=JS_DIR,
        )
        return ClientRun(process).start_pumps()

    return start


@pytest.fixture(scope="session")
def js5_client(client_home: Path) -> Any:
    """The official 5.x Node.js client (rocketmq-client-nodejs, gRPC): js5/client5.js,
    its packages installed once by ``npm ci`` from js5/package-lock.json."""
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None:
        pytest.skip("npm/node are not installed: the 5.x Node.js client cannot run")
    with open(JS5_DIR / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (JS5_DIR / "node_modules" / "rocketmq-client-nodejs").is_dir():
            done = subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund"],
                check=False,
                cwd=JS5_DIR,
                capture_output=True,
                text=True,
                timeout=600,
            )
            if done.returncode != 0:
                pytest.fail(f"npm ci failed in {JS5_DIR}: {done.stderr[-2000:]}")

    def start(*args: object) -> ClientRun:
        env = {**os.environ, "HOME": str(client_home)}
        process = subprocess.Popen(
            [node, str(JS5_DIR / "client5.js"), *map(str, args)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=JS5_DIR,
        )
        return ClientRun(process).start_pumps()

    return start


# The official 5.x Python client (gRPC): its import name ``rocketmq`` is also the 0.4.4
# C++ client's, so it runs from a venv of its own (``.venv-rmq5`` in the checkout), in
# subprocesses (py5/client5.py). scripts/setup.sh makes it with the conformance extra (so
# the suite's time goes to tests); else it is made here once, under a lock for xdist.
PY5_VENV = Path(__file__).resolve().parents[2] / ".venv-rmq5"
PY5_CLIENT = Path(__file__).parent / "py5" / "client5.py"
PY5_REQUIREMENTS = Path(__file__).parent / "py5" / "requirements.txt"
PY5_PACKAGE = PY5_REQUIREMENTS.read_text().strip()


@pytest.fixture(scope="session")
def py5_client(client_home: Path) -> Any:
    python = PY5_VENV / "bin" / "python"
    installed = PY5_VENV / ".installed"
    with open(PY5_VENV.parent / ".venv-rmq5.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not installed.exists() or installed.read_text().strip() != PY5_PACKAGE:
            subprocess.run([sys.executable, "-m", "venv", str(PY5_VENV)], check=True, timeout=300)
            done = subprocess.run(
                [str(python), "-m", "pip", "install", "-q", "-r", str(PY5_REQUIREMENTS)],
                check=False,
                capture_output=True,
                text=True,
                timeout=900,
            )
            if done.returncode != 0:
                pytest.fail(f"installing {PY5_PACKAGE} failed: {done.stderr[-2000:]}")
            installed.write_text(PY5_PACKAGE + "\n")

    def start(*args: object) -> ClientRun:
        env = {**os.environ, "HOME": str(client_home)}
        process = subprocess.Popen(
            [str(python), str(PY5_CLIENT), *map(str, args)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        return ClientRun(process).start_pumps()

    return start


def broker_options(store: Path, **broker: Any) -> BrokerOptions:
    return BrokerOptions(
        str(store),
        listen="127.0.0.1:0",
        broker=BrokerConfig(**broker),
        store_config=StoreConfig(
            message_delay_level=DELAY_LEVELS,
            flush_disk_type="SYNC_FLUSH",
            # The default 1 GiB CommitLog file is preallocated: keep test stores small.
            mapped_file_size_commit_log=64 * 1024 * 1024,
        ),
    )


def ask_about_grpc_consumer(
    server: BackgroundServer, code: int, group: str, client_id: str, **fields: str
) -> Any:
    """What mqadmin's consumerStatus -s (GET_CONSUMER_RUNNING_INFO) or queryMsgById -d
    (CONSUME_MESSAGE_DIRECTLY) gets from the broker about a 5.x client, asked once its
    telemetry stream has told the broker its group."""
    from rocketstore.remoting.blocking import invoke_sync, request

    grpc_server = server.broker.grpc_server
    assert grpc_server is not None and grpc_server.service is not None
    streams = grpc_server.service._streams
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if any(s.client == client_id and s.group == group for s in streams):
            break
        time.sleep(0.05)
    asked = {"consumerGroup": group, "clientId": client_id, **fields}
    return invoke_sync(server.broker_address, request(code, asked), 20)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[BackgroundServer]:
    with BackgroundServer(broker_options(tmp_path / "store")) as running:
        yield running


@pytest.fixture
def sql_server(tmp_path: Path) -> Iterator[BackgroundServer]:
    """A broker that serves SQL92 subscriptions (enablePropertyFilter)."""
    with BackgroundServer(
        broker_options(tmp_path / "store", enable_property_filter=True)
    ) as running:
        yield running


@pytest.fixture
def two_path_server(tmp_path: Path) -> Iterator[BackgroundServer]:
    """A broker whose CommitLog spreads over disk-b and disk-a (storePathCommitLog with
    two paths) in 16 KiB files, so a few messages roll it over."""
    options = broker_options(tmp_path / "store")
    assert options.store_config is not None
    options.store_config = options.store_config.replace(
        mapped_file_size_commit_log=16 * 1024,
        store_path_commit_log=f"{tmp_path / 'disk-b'},{tmp_path / 'disk-a'}",
    )
    with BackgroundServer(options) as running:
        yield running


@pytest.fixture
def second_broker(server: BackgroundServer, tmp_path: Path) -> Iterator[BrokerApp]:
    """A second broker (broker-b, its own store) registered with ``server``'s name server."""
    options = broker_options(tmp_path / "store-b", broker_name="broker-b")
    options.namesrv_addrs = [server.namesrv_address]
    broker = BrokerApp(options)
    server.call(broker.start())
    assert broker.registrar is not None
    server.call(asyncio.wait_for(broker.registrar.registered.wait(), 10))
    try:
        yield broker
    finally:
        server.call(broker.stop())


# RocketMQ's semantics (issue #40): an admin, a limited account, an account trusted from
# loopback (its white list), and a global white list that loopback is outside of.
ACL_RULES_YML = """globalWhiteRemoteAddresses:
- 10.10.103.*
accounts:
- accessKey: RocketMQ
  secretKey: 12345678
  admin: true
- accessKey: limited1
  secretKey: limited-secret
  defaultTopicPerm: DENY
  defaultGroupPerm: DENY
  topicPerms:
  - AclOpen=PUB|SUB
  - AclReadOnly=SUB
  groupPerms:
  - GroupOpen=SUB
- accessKey: trusted1
  secretKey: trusted-secret
  whiteRemoteAddress: 127.0.0.1
  defaultTopicPerm: PUB|SUB
  defaultGroupPerm: SUB
"""


@pytest.fixture
def acl_rules_server(tmp_path: Path) -> Iterator[BackgroundServer]:
    """A broker with :data:`ACL_RULES_YML` as its plain_acl.yml."""
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL_RULES_YML)
    options = broker_options(tmp_path / "store")
    options.acl_file = str(acl)
    options.acl_watch_interval_ms = 100  # edits are seen at once
    with BackgroundServer(options) as running:
        yield running


@pytest.fixture
def acl_server(tmp_path: Path) -> Iterator[BackgroundServer]:
    """A broker that checks every request's signature (account RocketMQ / 12345678)."""
    acl = tmp_path / "plain_acl.yml"
    acl.write_text("accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    admin: true\n")
    options = broker_options(tmp_path / "store")
    options.acl_file = str(acl)
    with BackgroundServer(options) as running:
        yield running
