"""Master/slave replication (issue #36): how fast a slave copies its master's CommitLog over
loopback, against a raw TCP copy of the same bytes, and what a send costs under
SYNC_MASTER, ASYNC_MASTER and SYNC_FLUSH, side by side.

Layer: benchmark workload. Every broker is its own process (``rocketstore serve`` for a
master with its name server, ``rocketstore broker`` for a slave), settings by ``-c``.

- **throughput**: a master store holding ``raw_bytes`` of 1 KiB messages (written before
  the master starts, untimed); a slave with an empty store follows it from the first file.
  Timed from the first byte the slave holds to the master's end, polling the slave's
  GET_BROKER_RUNTIME_INFO (commitLogMaxOffset) every 25 ms (each poll costs the slave
  about 0.9 ms of CPU: at 10 ms that was 0.15 s a GiB, a tenth of what it measured; the
  first and the last poll are each late by half an interval on average, so the two
  delays cancel, and the spread they add is about 10 ms a copy); with the default
  haTransferBatchSize (32 KiB, RocketMQ's) and with 1 MiB transfers. The baseline is two
  processes on the same loopback: one reads the same CommitLog bytes from the page cache
  and sends them in 1 MiB ``sendall`` calls, the other receives them and writes them to a
  file (the slave writes its CommitLog, unsynced, as ASYNC_FLUSH), timed from the connect
  to the receiver's acknowledgement of the last byte. Repetitions alternate. CPU seconds
  per GiB of the slave and the master, and of the raw copy's receiver and sender.
  Before each copy, raw or replicated, the benchmark writes and deletes a scratch file of
  twice the copy's size (``_warm_page_cache``; for a slave, again and again from its
  start to its first byte): on a VM that gives freed memory back to
  its host (virtio-balloon free page reporting, as on this project's Firecracker VMs) the
  first touch of such memory costs a host fault, and a copy into the page cache of memory
  the host took back cost 1.6-2.2 s of CPU a GiB against 0.2 for memory a file just freed
  (measured side by side). Without it, which copy got freshly freed memory depended on
  the order of the steps (the raw copy ran right after the last slave's store was
  deleted; a slave started a second or more after the raw copy's file was): the slave
  paid about 0.8 s a GiB more for the VM, not for its work.
- **send latency**: one client (rocketstore's blocking remoting client, SEND_MESSAGE_V2,
  one 100 B message at a time, the answer awaited) against three setups running at once:
  an ASYNC_MASTER with its slave, a SYNC_MASTER with its slave (a send is answered once the
  slave has it) and a lone broker with SYNC_FLUSH (answered once on disk); each round sends
  to each setup in turn, the order rotating. Per round: p50, p99 and msg/s.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

from benchmarks.common import MIB, Row, Scratch, Sizes, percentile, row
from benchmarks.workloads.broker_procs import _stop, cpu_seconds, free_port, wait_port
from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.remoting.blocking import BlockingConnection, request
from rocketstore.remoting.codes import RequestCode, ResponseCode
from rocketstore.remoting.send import send_header_v2

log = logging.getLogger(__name__)

NAME = "replication"
FILE_SIZE = 64 * MIB  # the master's CommitLog files (several of them for a full run)
BODY_BYTES = 1024  # throughput messages
SEND_BODY_BYTES = 100
RAW_CHUNK = 1024 * 1024
POLL_S = 0.025
TOPIC = "BenchReplication"
THROUGHPUT_CASE = "CommitLog copy over loopback"
RAW = "raw TCP copy (1 MiB sends, written to a file)"
REPLICATION = "replication, haTransferBatchSize {}"
LATENCY_CASE = "sync send, 1 producer, 100 B"
SETUPS = ("ASYNC_MASTER + slave", "SYNC_MASTER + slave", "SYNC_FLUSH, one broker")

# The receiving end of the raw copy: listens, prints its port, takes ``total`` bytes into
# a file with os.write, answers one byte, then prints the CPU seconds it spent from the
# connect on.
_RECEIVER = r"""
import os, socket, sys
path, total = sys.argv[1], int(sys.argv[2])
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen(1)
print(server.getsockname()[1], flush=True)
conn, _ = server.accept()
before = os.times()
buf = bytearray(1024 * 1024)
view = memoryview(buf)
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
got = 0
while got < total:
    n = conn.recv_into(buf)
    if not n:
        break
    os.write(fd, view[:n])
    got += n
os.close(fd)
conn.sendall(b"k")
conn.close()
after = os.times()
print(after.user + after.system - before.user - before.system, flush=True)
"""


@dataclass
class Node:
    """A broker process: its remoting address and, for a master, its name server's."""

    address: str
    namesrv: str
    proc: subprocess.Popen[bytes]


def _exe() -> str:
    return os.path.join(os.path.dirname(sys.executable), "rocketstore")


def _conf(path: str, **settings: object) -> str:
    with open(path, "w") as f:
        f.write("".join(f"{k}={v}\n" for k, v in settings.items()))
    return path


def _start_master(work: str, name: str, store: str, **settings: object) -> Node:
    port, ns_port = free_port(2), free_port()
    conf = _conf(
        os.path.join(work, f"{name}.conf"),
        brokerName=name,
        mappedFileSizeCommitLog=FILE_SIZE,
        **settings,
    )
    args = [_exe(), "-c", conf, "--store", store, "serve", "--listen", f"127.0.0.1:{port}"]
    args += ["--namesrv-listen", f"127.0.0.1:{ns_port}"]
    log_path = os.path.join(work, f"{name}.log")
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    _waited(port, proc, log_path)
    _waited(port + 1, proc, log_path)  # haListenPort
    return Node(f"127.0.0.1:{port}", f"127.0.0.1:{ns_port}", proc)


def _waited(port: int, proc: subprocess.Popen[bytes], log_path: str) -> None:
    """``wait_port``, with the end of the process's log in the error when it failed."""
    try:
        wait_port(port, proc)
    except Exception as e:
        _stop(proc)
        with open(log_path, "rb") as f:
            tail = f.read()[-2000:].decode("utf-8", "replace")
        raise RuntimeError(f"{e}; its log ends:\n{tail}") from e


def _start_slave(work: str, name: str, store: str, master: Node) -> Node:
    port = free_port()
    host, master_port = master.address.rsplit(":", 1)
    conf = _conf(
        os.path.join(work, f"{name}-slave.conf"),
        brokerName=name,
        brokerRole="SLAVE",
        brokerId=1,
        haMasterAddress=f"{host}:{int(master_port) + 1}",
        mappedFileSizeCommitLog=FILE_SIZE,
    )
    args = [_exe(), "-c", conf, "--store", store, "broker", "--namesrv", master.namesrv]
    args += ["--listen", f"127.0.0.1:{port}"]
    log_path = os.path.join(work, f"{name}-slave.log")
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    _waited(port, proc, log_path)
    return Node(f"127.0.0.1:{port}", master.namesrv, proc)


@contextmanager
def _running(node: Node) -> Iterator[Node]:
    try:
        yield node
    finally:
        _stop(node.proc)


def _runtime(conn: BlockingConnection) -> dict[str, str]:
    answer = conn.invoke(request(RequestCode.GET_BROKER_RUNTIME_INFO))
    if answer.code != ResponseCode.SUCCESS:
        raise RuntimeError(f"GET_BROKER_RUNTIME_INFO answered {answer.code}: {answer.remark}")
    table: dict[str, str] = json.loads(answer.body)["table"]
    return table


def _fill(store_dir: str, total: int) -> int:
    """Write ``total`` bytes of 1 KiB messages (untimed); the CommitLog end."""
    body = os.urandom(BODY_BYTES)
    config = StoreConfig(mapped_file_size_commit_log=FILE_SIZE)
    with MessageStore.open(store_dir, config) as store:
        i = 0
        while store.max_commit_log_offset() < total:
            batch = [
                Message(
                    topic=TOPIC,
                    queue_id=(i + n) % 4,
                    body=body,
                    properties={"KEYS": f"key-{i + n:010d}"},
                    born_host="127.0.0.1:5000",
                )
                for n in range(256)
            ]
            store.put_batch(batch)
            i += 256
        store.flush()
        return store.max_commit_log_offset()


@dataclass
class Copy:
    """One replication: seconds from the slave's first byte to the master's end, and the
    CPU seconds the slave and the master spent meanwhile."""

    seconds: float
    slave_cpu_s: float
    master_cpu_s: float


def _replicate_once(work: str, master: Node, end: int, label: str) -> Copy:
    """A fresh slave following ``master`` from its first byte to ``end``."""
    store = os.path.join(work, f"slave-{label}")
    with (
        _kept_warm(work, end) as warmed,
        _running(_start_slave(work, f"tput-{label}", store, master)) as slave,
    ):
        deadline = time.monotonic() + 600
        first: tuple[float, int, float, float] | None = None
        with BlockingConnection(slave.address) as conn:
            while time.monotonic() < deadline:
                now = time.perf_counter()
                held = int(_runtime(conn).get("commitLogMaxOffset", "0"))
                if first is None and held > 0:
                    warmed.set()  # (the thread stops within one 1 MiB write)
                    first = (now, held, cpu_seconds(slave.proc.pid), cpu_seconds(master.proc.pid))
                if held >= end:
                    break
                time.sleep(POLL_S)
            else:
                raise RuntimeError(f"the slave did not reach {end} in 600 s")
        assert first is not None
        seconds = time.perf_counter() - first[0]
        slave_cpu = cpu_seconds(slave.proc.pid) - first[2]
        master_cpu = cpu_seconds(master.proc.pid) - first[3]
        # Scaled to the whole copy: the bytes before the first poll saw the slave move.
        scale = end / (end - first[1]) if end > first[1] else 1.0
    shutil.rmtree(store, ignore_errors=True)
    return Copy(seconds * scale, slave_cpu * scale, master_cpu * scale)


def _warm_page_cache(work: str, nbytes: int, stop: threading.Event | None = None) -> None:
    """Write a scratch file of twice ``nbytes`` and delete it (untimed), so that the next
    copy's page cache comes from memory just freed, not from memory the VM's host took
    back (see the module's docstring). With ``stop``, again and again until it is set:
    memory freed 1.5-4 s before a copy was already dearer (0.25-0.54 s a GiB, measured),
    and a slave takes 0.6-3 s to start on a loaded machine."""
    path = os.path.join(work, "warm-up.bin")
    chunk = bytes(RAW_CHUNK)
    while True:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for _ in range(2 * nbytes // RAW_CHUNK + 1):
                if stop is not None and stop.is_set():
                    return
                os.write(fd, chunk)
        finally:
            os.close(fd)
            os.remove(path)
        if stop is None:
            return


@contextmanager
def _kept_warm(work: str, nbytes: int) -> Iterator[threading.Event]:
    """``_warm_page_cache`` on a thread until the event it yields is set (or the block
    ends)."""
    stop = threading.Event()
    thread = threading.Thread(target=_warm_page_cache, args=(work, nbytes, stop), daemon=True)
    thread.start()
    try:
        yield stop
    finally:
        stop.set()
        thread.join()


@dataclass
class RawCopy:
    """One raw copy: seconds from the connect to the receiver's answer, and the CPU
    seconds of the receiving and the sending process meanwhile."""

    seconds: float
    receiver_cpu_s: float
    sender_cpu_s: float


def _raw_copy_once(work: str, store_dir: str, end: int) -> RawCopy:
    target = os.path.join(work, "raw-copy.bin")
    receiver = subprocess.Popen(
        [sys.executable, "-c", _RECEIVER, target, str(end)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert receiver.stdout is not None
        port = int(receiver.stdout.readline())
        directory = os.path.join(store_dir, "commitlog")
        _warm_page_cache(work, end)
        started = time.perf_counter()
        cpu_before = time.process_time()  # (the benchmark's process: only this runs now)
        with socket.create_connection(("127.0.0.1", port)) as sock:
            for name in sorted(os.listdir(directory)):
                left = min(FILE_SIZE, end - int(name))
                with open(os.path.join(directory, name), "rb", buffering=0) as f:
                    while left > 0:
                        chunk = f.read(min(RAW_CHUNK, left))
                        sock.sendall(chunk)
                        left -= len(chunk)
            sock.recv(1)
        seconds = time.perf_counter() - started
        sender_cpu = time.process_time() - cpu_before
        receiver_cpu = float(receiver.stdout.readline())
        receiver.wait(60)
    finally:
        if receiver.poll() is None:
            receiver.kill()
            receiver.wait()
        if os.path.exists(target):
            os.remove(target)
    return RawCopy(seconds, receiver_cpu, sender_cpu)


def _throughput(sizes: Sizes, work: str) -> list[Row]:
    master_store = os.path.join(work, "master")
    end = _fill(master_store, sizes.raw_bytes)
    mib = end / MIB
    raw: list[RawCopy] = []
    copies: dict[str, list[Copy]] = {}
    for batch in (32 * 1024, 1024 * 1024):
        system = REPLICATION.format(f"{batch // 1024} KiB")
        copies[system] = []
        with _running(
            _start_master(work, f"tput{batch}", master_store, haTransferBatchSize=batch)
        ) as master:
            for rep in range(sizes.repeat):
                # The raw copy before and after the replication in turn.
                if rep % 2 == 0:
                    raw.append(_raw_copy_once(work, master_store, end))
                copies[system].append(_replicate_once(work, master, end, f"{batch}-{rep}"))
                if rep % 2 == 1:
                    raw.append(_raw_copy_once(work, master_store, end))
                log.info("%s: %.2f s for %.0f MiB", system, copies[system][-1].seconds, mib)
    gib = end / (1024 * MIB)
    rows = [
        row(NAME, THROUGHPUT_CASE, RAW, "copy rate", "MiB/s", [mib / c.seconds for c in raw],
            bytes=end)
    ]  # fmt: skip
    # The raw copy's receiver in the slave's table, its sender in the master's: what a
    # copy of these bytes costs without replication.
    for side, values in (
        ("slave", [c.receiver_cpu_s / gib for c in raw]),
        ("master", [c.sender_cpu_s / gib for c in raw]),
    ):
        rows.append(
            row(NAME, THROUGHPUT_CASE, RAW, f"{side} CPU per GiB", "s", values,
                higher_is_better=False)
        )  # fmt: skip
    for system, done in copies.items():
        rows.append(
            row(NAME, THROUGHPUT_CASE, system, "copy rate", "MiB/s",
                [mib / c.seconds for c in done], bytes=end)
        )  # fmt: skip
        for side, values in (
            ("slave", [c.slave_cpu_s / gib for c in done]),
            ("master", [c.master_cpu_s / gib for c in done]),
        ):
            rows.append(
                row(NAME, THROUGHPUT_CASE, system, f"{side} CPU per GiB", "s", values,
                    higher_is_better=False)
            )  # fmt: skip
    return rows


def _properties(uniq_key: str) -> str:
    return f"UNIQ_KEY\x01{uniq_key}\x02WAIT\x01true\x02"


def _send_round(
    conn: BlockingConnection, count: int, body: bytes
) -> tuple[list[float], float, int]:
    """``count`` sends one at a time: latencies (us), seconds, sends not answered SUCCESS."""
    latencies = []
    failed = 0
    prefix = uuid.uuid4().hex[:16].upper()
    began = time.perf_counter()
    for i in range(count):
        header = send_header_v2(
            producer_group="BenchReplicationProducer",
            topic=TOPIC,
            queue_id=i % 4,
            born_timestamp_ms=int(time.time() * 1000),
            properties=_properties(f"{prefix}{i:016X}"),
        )
        t0 = time.perf_counter()
        answer = conn.invoke(request(RequestCode.SEND_MESSAGE_V2, header, body))
        latencies.append((time.perf_counter() - t0) * 1e6)
        if answer.code != ResponseCode.SUCCESS:
            failed += 1
    return latencies, time.perf_counter() - began, failed


def _latency(sizes: Sizes, work: str) -> list[Row]:
    count = 100 if sizes.quick else 2_000
    rounds = max(1, sizes.repeat)
    body = os.urandom(SEND_BODY_BYTES)
    with ExitStack() as stack:
        masters = {
            SETUPS[0]: _start_master(work, "async", os.path.join(work, "async-m")),
            SETUPS[1]: _start_master(
                work, "sync", os.path.join(work, "sync-m"), brokerRole="SYNC_MASTER"
            ),
            SETUPS[2]: _start_master(
                work, "flush", os.path.join(work, "flush-m"), flushDiskType="SYNC_FLUSH"
            ),
        }
        for node in masters.values():
            stack.enter_context(_running(node))
        for setup, name in ((SETUPS[0], "async"), (SETUPS[1], "sync")):
            slave = _start_slave(work, name, os.path.join(work, f"{name}-s"), masters[setup])
            stack.enter_context(_running(slave))
        conns = {
            setup: stack.enter_context(BlockingConnection(n.address))
            for setup, n in masters.items()
        }
        for setup in SETUPS[:2]:
            deadline = time.monotonic() + 60
            while _runtime(conns[setup]).get("haConnections") != "1":
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{setup}: no slave connected in 60 s")
                time.sleep(0.1)
        for conn in conns.values():
            _send_round(conn, 50, body)  # the topic made, the connections warm
        p50: dict[str, list[float]] = {s: [] for s in SETUPS}
        p99: dict[str, list[float]] = {s: [] for s in SETUPS}
        rates: dict[str, list[float]] = {s: [] for s in SETUPS}
        failures = dict.fromkeys(SETUPS, 0)
        for r in range(rounds):
            order = SETUPS[r % 3 :] + SETUPS[: r % 3]
            for setup in order:
                latencies, seconds, failed = _send_round(conns[setup], count, body)
                p50[setup].append(percentile(latencies, 50))
                p99[setup].append(percentile(latencies, 99))
                rates[setup].append(count / seconds)
                failures[setup] += failed
                log.info(
                    "%s: p50 %.0f us, p99 %.0f us, %.0f msg/s",
                    setup, p50[setup][-1], p99[setup][-1], rates[setup][-1],
                )  # fmt: skip
    rows = []
    for setup in SETUPS:
        note = f"{failures[setup]} sends not SEND_OK" if failures[setup] else ""
        sends = count * rounds
        rows.append(
            row(NAME, LATENCY_CASE, setup, "p50 latency", "us", p50[setup],
                higher_is_better=False, note=note, sends=sends)
        )  # fmt: skip
        rows.append(
            row(NAME, LATENCY_CASE, setup, "p99 latency", "us", p99[setup],
                higher_is_better=False, note=note, sends=sends)
        )  # fmt: skip
        rows.append(row(NAME, LATENCY_CASE, setup, "send rate", "msg/s", rates[setup], sends=sends))
    return rows


def run(sizes: Sizes, scratch: Scratch) -> list[Row]:
    rows: list[Row] = []
    with scratch.directory("replication-tput") as work:
        rows += _throughput(sizes, work)
    with scratch.directory("replication-latency") as work:
        rows += _latency(sizes, work)
    return rows
