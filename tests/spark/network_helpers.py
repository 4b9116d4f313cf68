"""A real cluster for the network-mode Spark tests: ``rocketstore namesrv`` and two
``rocketstore broker`` processes on free loopback ports, a topic created on both through
the name server, messages sent to each broker with the project's own remoting client."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocketstore.broker import admin_client
from rocketstore.broker.topic_config import TopicConfig
from rocketstore.format.properties import encode_properties_str
from rocketstore.remoting.blocking import invoke_sync, request
from rocketstore.remoting.codes import RequestCode, ResponseCode
from rocketstore.spark.network_cluster import READER_GROUP

START_TIMEOUT_S = 30
TOPIC = "Orders"
QUEUES = 3
PER_QUEUE = 8
SMALL_COMMITLOG_BYTES = 4 * 1024 * 1024


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start(command: list[str], ready: str) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "rocketstore.cli.main", *command],
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if ready in line:
            return process
        if not line and process.poll() is not None:
            raise AssertionError(f"{command} exited early ({process.returncode})")
    process.kill()
    raise AssertionError(f"{command} did not start in time")


@dataclass
class Cluster:
    namesrv: str
    brokers: dict[str, str]  # broker name -> address
    stores: dict[str, Path]
    sent: list[dict[str, Any]] = field(default_factory=list)
    # broker name -> its process and the command that started it (kill_broker,
    # restart_broker); "namesrv" too
    processes: dict[str, subprocess.Popen[str]] = field(default_factory=dict)
    commands: dict[str, list[str]] = field(default_factory=dict)


def kill_broker(cluster: Cluster, name: str) -> None:
    """SIGKILL one broker (its store keeps what SYNC_FLUSH acknowledged)."""
    process = cluster.processes[name]
    process.kill()
    process.wait(timeout=15)
    if process.stderr is not None:
        process.stderr.close()


def restart_broker(cluster: Cluster, name: str) -> None:
    """Start a killed broker again: same name, address and store."""
    cluster.processes[name] = _start(cluster.commands[name], "Ctrl-C stops")
    wait_registered(cluster)


def wait_registered(cluster: Cluster) -> None:
    """Wait (bounded) until the name server knows every broker: a broker prints that it
    is ready before its first registration is through."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while admin_client.master_addresses(cluster.namesrv) != cluster.brokers:
        if time.monotonic() > deadline:
            raise AssertionError(f"the brokers did not all register with {cluster.namesrv}")
        time.sleep(0.1)


@contextlib.contextmanager
def running_cluster(root: Path) -> Iterator[Cluster]:
    """Name server + broker-a + broker-b; stopped (SIGTERM, then SIGKILL) at the end."""
    namesrv = f"127.0.0.1:{free_port()}"
    cluster = Cluster(namesrv, {}, {})
    try:
        cluster.processes["namesrv"] = _start(
            ["namesrv", "--listen", namesrv, "--kv-config", str(root / "kv.json")],
            "Ctrl-C stops",
        )
        # Small files: a broker's default 1 GiB CommitLog file and 400 MB index file would
        # cost each test module gigabytes of disk.
        settings = root / "broker.conf"
        settings.write_text(
            f"mappedFileSizeCommitLog={SMALL_COMMITLOG_BYTES}\n"
            "mappedFileSizeConsumeQueue=60000\nmaxHashSlotNum=5000\nmaxIndexNum=20000\n"
        )
        for name in ("broker-a", "broker-b"):
            address = f"127.0.0.1:{free_port()}"
            cluster.stores[name] = root / name
            command = ["-c", str(settings), "broker", "--namesrv", namesrv, "--broker-name", name]
            command += ["--listen", address, "--store", str(cluster.stores[name])]
            command += ["--flush", "SYNC_FLUSH"]
            cluster.commands[name] = command
            cluster.processes[name] = _start(command, "Ctrl-C stops")
            cluster.brokers[name] = address
        wait_registered(cluster)
        yield cluster
    finally:
        processes = list(cluster.processes.values())
        for process in processes:
            if process.poll() is None:
                process.terminate()
        for process in processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
            if process.stderr is not None and not process.stderr.closed:
                process.stderr.close()


def create_topic(cluster: Cluster, topic: str, queues: int) -> None:
    """The topic on every master, then wait (bounded) until the name server routes it to
    both brokers."""
    config = TopicConfig(topic, read_queue_nums=queues, write_queue_nums=queues)
    # On each broker by address: a broker that has not registered yet (it is still
    # starting) would be left out of "every master the name server knows".
    for address in cluster.brokers.values():
        admin_client.update_topic(cluster.namesrv, config, broker_addr=address)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        route = admin_client.topic_route(cluster.namesrv, topic)
        if route and len(route.get("queueDatas", [])) == len(cluster.brokers):
            return
        time.sleep(0.1)
    raise AssertionError(f"{topic} is not routed to every broker")


def send(cluster: Cluster, broker: str, topic: str, queue_id: int, i: int) -> dict[str, Any]:
    """One message with keys, tags, a unique key and a user property (SEND_MESSAGE_V2)."""
    properties = {
        "KEYS": f"{broker}-{queue_id}-{i}" + (" shared" if i % 4 == 0 else ""),
        "TAGS": "TagA" if i % 2 else "TagB",
        "UNIQ_KEY": f"U-{broker}-{queue_id}-{i:03d}",
        "WAIT": "true",
        "color": ("red", "blue")[i % 2],
    }
    body = f"body {broker} {queue_id} {i}".encode() * (1 + i % 3)
    ext = {
        "a": "test_producer",
        "b": topic,
        "c": "TBW102",
        "d": "4",
        "e": str(queue_id),
        "f": "0",
        "g": str(int(time.time() * 1000)),
        "h": str(i % 4),
        "i": encode_properties_str(properties),
        "j": "0",
        "k": "false",
    }
    answer = invoke_sync(cluster.brokers[broker], request(RequestCode.SEND_MESSAGE_V2, ext, body))
    assert answer.code == ResponseCode.SUCCESS, (answer.code, answer.remark)
    sent = {
        "broker": broker,
        "topic": topic,
        "partition": queue_id,
        "offset": int(answer.ext_fields["queueOffset"]),
        "value": body,
        "key": properties["KEYS"],
        "tags": properties["TAGS"],
        "uniqKey": properties["UNIQ_KEY"],
        "flag": i % 4,
        "color": properties["color"],
    }
    cluster.sent.append(sent)
    return sent


def load(cluster: Cluster) -> None:
    create_topic(cluster, TOPIC, QUEUES)
    for i in range(PER_QUEUE):
        for broker in sorted(cluster.brokers):
            for qid in range(QUEUES):
                send(cluster, broker, TOPIC, qid, i)


def pulled_count(cluster: Cluster, broker: str, topic: str) -> int:
    """Messages the broker has handed out to the reader's group for ``topic`` today (its
    GROUP_GET_NUMS stats item: what mqadmin statsAll reads); 0 before any pull."""
    ext = {"statsName": "GROUP_GET_NUMS", "statsKey": f"{topic}@{READER_GROUP}"}
    answer = invoke_sync(cluster.brokers[broker], request(RequestCode.VIEW_BROKER_STATS_DATA, ext))
    if answer.code != ResponseCode.SUCCESS:
        return 0
    return int(json.loads(answer.body)["statsDay"]["sum"])
