"""The brokers the ``broker`` workload measures, as processes: ``rocketstore serve`` and a real
RocketMQ 4.9.8 name server + broker built by tests/conformance/java/real_broker/build_broker.sh,
and the Java load client (BrokerBench.java against the 4.9.8 client of
tests/conformance/java/build.sh).

Layer: benchmark support. Each broker is started on free loopback ports over a fresh store
directory and stopped with SIGTERM (SIGKILL after 30 s); its CPU time is read from
/proc (the process and all its threads; for ``--brokers N``, its children too).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH_SOURCE = os.path.join(os.path.dirname(HERE), "clients", "java", "BrokerBench.java")
# Outputs of tests/conformance/java/build.sh and real_broker/build_broker.sh.
JAVA_CLIENT_ENV = "ROCKETSTORE_BENCH_JAVA_CLIENT"
JAVA_BROKER_ENV = "ROCKETSTORE_BENCH_JAVA_BROKER"
# The real broker's JVM, as tests/conformance/java/real_broker/common.sh runs it.
JAVA_OPTS = [
    "-server",
    "-Xms512m",
    "-Xmx512m",
    "-Xmn256m",
    "-XX:MaxDirectMemorySize=256m",
    "-XX:+UseG1GC",
    "--add-exports",
    "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-exports",
    "java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens",
    "java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.nio=ALL-UNNAMED",
    "--add-opens",
    "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.lang=ALL-UNNAMED",
]
_RMQ = "org.apache.rocketmq"
_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def free_port(span: int = 1) -> int:
    """A loopback port p with p-2 .. p+span free as far as a bind tells (the Java broker
    also takes listenPort-2 and listenPort+1)."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port: int = s.getsockname()[1]
        if port < 1100 or port + span > 65000:
            continue
        ok = True
        for p in range(port - 2, port + span + 1):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", p))
                except OSError:
                    ok = False
                    break
        if ok:
            return port
    raise RuntimeError("no free port range")


def wait_port(port: int, proc: subprocess.Popen[bytes], timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process {proc.args!r} exited with {proc.returncode}")
        with socket.socket() as s:
            s.settimeout(1)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"port {port} not open after {timeout_s} s")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of process ``pid`` (all threads) and of its live children."""
    total = 0.0
    pids = [pid]
    with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{pid}/children") as f:
        pids += [int(p) for p in f.read().split()]
    for p in pids:
        with contextlib.suppress(OSError):
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) * _TICK_S
    return total


def _stop(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@dataclass
class Broker:
    """A running broker behind its own name server."""

    system: str
    namesrv: str
    pid: int
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.pid)

    def stop(self) -> None:
        for proc in self.procs:
            _stop(proc)


def start_rocketstore(
    store: str,
    flush: str,
    log_path: str,
    brokers: int = 1,
    event_loop: str = "asyncio",
    extra_args: tuple[str, ...] = (),
) -> Broker:
    exe = os.path.join(os.path.dirname(sys.executable), "rocketstore")
    ns_port, port = free_port(), free_port(10 * brokers + 1)
    args = [
        exe,
        "--store",
        store,
        "serve",
        "--listen",
        f"127.0.0.1:{port}",
        "--namesrv-listen",
        f"127.0.0.1:{ns_port}",
        "--flush",
        flush,
    ]
    if brokers > 1:
        args += ["--brokers", str(brokers)]
    args += ["--event-loop", event_loop]  # (named always: serve's default is uvloop's)
    args += extra_args
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_port(port, proc)
        wait_port(ns_port, proc)
        time.sleep(1.0)  # its registration with the name server
    except Exception:
        _stop(proc)
        raise
    return Broker("rocketstore serve", f"127.0.0.1:{ns_port}", proc.pid, [proc])


def start_java(build: str, store: str, flush: str, log_dir: str) -> Broker:
    """The real 4.9.8 name server and broker of ``build`` (build_broker.sh's output), with
    RocketMQ's default store sizes (1 GiB CommitLog files)."""
    with open(os.path.join(build, "classpath.txt")) as f:
        classpath = f.read().strip()
    ns_port, port = free_port(), free_port()
    os.makedirs(store, exist_ok=True)
    home = os.path.join(store, "home-user")
    env = {**os.environ, "ROCKETMQ_HOME": os.path.join(build, "home")}
    opts = [*JAVA_OPTS, f"-Drmq.log.dir={log_dir}", f"-Duser.home={home}"]
    ns_conf = os.path.join(store, "namesrv.conf")
    with open(ns_conf, "w") as f:
        f.write(
            f"listenPort={ns_port}\nkvConfigPath={store}/kv.json\n"
            f"configStorePath={store}/namesrv.properties\n"
        )
    conf = os.path.join(store, "broker.conf")
    with open(conf, "w") as f:
        f.write(
            "brokerClusterName=DefaultCluster\nbrokerName=broker-java\nbrokerId=0\n"
            f"namesrvAddr=127.0.0.1:{ns_port}\nbrokerIP1=127.0.0.1\nlistenPort={port}\n"
            f"storePathRootDir={store}/store\nstorePathCommitLog={store}/store/commitlog\n"
            f"autoCreateTopicEnable=true\nflushDiskType={flush}\nbrokerRole=ASYNC_MASTER\n"
            # A send that waited 200 ms (the default) in the queue is refused as "broker
            # busy"; on a 2-core machine shared with the load that happens while it keeps up.
            "waitTimeMillsInSendQueue=1000\n"
        )
    procs: list[subprocess.Popen[bytes]] = []
    try:
        with open(os.path.join(log_dir, "namesrv.out"), "ab") as log:
            procs.append(
                subprocess.Popen(
                    [
                        "java",
                        *opts,
                        "-cp",
                        classpath,
                        f"{_RMQ}.namesrv.NamesrvStartup",
                        "-c",
                        ns_conf,
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                )
            )
        wait_port(ns_port, procs[0])
        with open(os.path.join(log_dir, "broker.out"), "ab") as log:
            procs.append(
                subprocess.Popen(
                    ["java", *opts, "-cp", classpath, f"{_RMQ}.broker.BrokerStartup", "-c", conf],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                )
            )
        wait_port(port, procs[1])
        time.sleep(3.0)  # its registration with the name server
    except Exception:
        for proc in reversed(procs):
            _stop(proc)
        raise
    broker = Broker("RocketMQ 4.9.8 (Java)", f"127.0.0.1:{ns_port}", procs[1].pid, procs)
    broker.procs.reverse()  # the broker stops first
    return broker


class JavaLoad:
    """BrokerBench.java compiled against the 4.9.8 client of ``client_dir``."""

    def __init__(self, client_dir: str, work_dir: str):
        with open(os.path.join(client_dir, "classpath.txt")) as f:
            client_cp = f.read().strip()
        classes = os.path.join(work_dir, "bench-classes")
        os.makedirs(classes, exist_ok=True)
        subprocess.run(
            ["javac", "-nowarn", "-cp", client_cp, "-d", classes, BENCH_SOURCE],
            check=True,
            capture_output=True,
        )
        self.classpath = f"{classes}:{client_cp}"
        self.work_dir = work_dir

    def run(
        self,
        broker: Broker,
        mode: str,
        *args: object,
        on_start: Callable[[], None] | None = None,
    ) -> dict[str, float]:
        """One BrokerBench run; ``on_start`` is called at its start line. Its result line,
        with ``cpu_s``: the broker's CPU seconds from the start line to the result."""
        cmd = [
            "java",
            "-Xms256m",
            "-Xmx1g",
            "-Drocketmq.client.logUseSlf4j=false",
            f"-Drocketmq.client.logRoot={self.work_dir}/client-logs",
            f"-Duser.home={self.work_dir}",
            "-cp",
            self.classpath,
            "BrokerBench",
            mode,
            broker.namesrv,
            *map(str, args),
        ]
        return run_client(
            cmd,
            broker,
            self.work_dir,
            is_result=lambda event: event.get("event") == "done",
            what=f"BrokerBench {mode} against {broker.system}",
            on_start=on_start,
        )


def run_client(
    args: Sequence[str],
    broker: Broker,
    work: str,
    *,
    is_result: Callable[[dict[str, Any]], bool],
    what: str,
    on_start: Callable[[], None] | None = None,
    env: Mapping[str, str] | None = None,
) -> dict[str, float]:
    """Run one load client process (in ``work``) that prints JSON lines; its result line
    (the last one ``is_result`` takes), with ``cpu_s``: the broker's CPU seconds from the
    client's ``{"event": "start"}`` line (``on_start`` is called there) to its result
    line. RuntimeError, with the end of its stderr, when no result line came."""
    # stderr to a file: the 5.x client logs to stderr from its I/O thread, which a full
    # pipe nobody reads until the end stopped (a SimpleConsumer hung for minutes).
    err_path = os.path.join(work, "client.err")
    with open(err_path, "w") as err:
        proc = subprocess.Popen(
            list(args), stdout=subprocess.PIPE, stderr=err, text=True, env=env, cwd=work
        )
    assert proc.stdout is not None
    cpu_start = broker.cpu_seconds()
    result: dict[str, float] | None = None
    for line in proc.stdout:
        if not line.startswith("{"):
            continue
        event = json.loads(line)
        if event.get("event") == "start":
            cpu_start = broker.cpu_seconds()
            if on_start is not None:
                on_start()
        elif is_result(event):
            event["cpu_s"] = broker.cpu_seconds() - cpu_start
            result = event
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if result is None:
        with open(err_path) as err:
            stderr = err.read()
        raise RuntimeError(f"{what} failed ({proc.returncode}): {stderr[-1500:]}")
    return result
