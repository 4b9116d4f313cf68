"""Timer messages (RIP-43) with real clients and ``rocketstore serve`` as a real process:
the official 5.x Python client's delivery timestamp over gRPC and the 4.x C++-core
client's TIMER_DELIVER_MS over remoting, each with the broker stopped and restarted (and
killed) between the send and the delivery time; and 10,000 messages due at one time.

"Not early" is read from the store: the record in the real topic is written by the
delivery, so its store time is when the message became visible there.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from rocketstore.status import GetStatus
from rocketstore.store import MessageStore
from tests.cli.cli_helpers import CLI
from tests.conformance.broker_process import free_port, serve_process

TOPIC = "TopicTimer"
# The default timerPrecisionMs: a message comes once the step holding its time is over.
PRECISION_MS = 1000


def _stored(store: Path, topic: str) -> list[Any]:
    found: list[Any] = []
    with MessageStore.open(store, read_only=True) as live:  # takes no lock
        for queue_id in live.topics().get(topic, []):
            offset = 0
            while True:
                got = live.get_messages("check", topic, queue_id, offset, 32)
                if got.status is not GetStatus.FOUND:
                    break
                found.extend(got.messages)
                offset = got.next_begin_offset
    return found


def _stop(process: subprocess.Popen[str], sig: int) -> None:
    process.send_signal(sig)
    process.communicate(timeout=60)


def test_grpc_delivery_timestamp_survives_a_restart(py5_client: Any, tmp_path: Path) -> None:
    pytest.importorskip("grpc", reason="the grpc extra is not installed")
    store = tmp_path / "store"
    subprocess.run(
        [*CLI, "--store", str(store), "updateTopic", "-t", TOPIC, "-r", "4", "-w", "4"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    ports = (free_port(), free_port(), free_port())
    grpc = ["--grpc-listen", f"127.0.0.1:{ports[2]}"]
    endpoint = f"127.0.0.1:{ports[2]}"
    server = serve_process(store, ports[0], ports[1], extra=grpc)
    try:
        sent = [
            line
            for line in py5_client("send", endpoint, TOPIC, 3, "--delay-ms", 25_000).finish(90)
            if line["event"] == "sent"
        ]
        assert len(sent) == 3, sent
        _stop(server, signal.SIGTERM)
        assert (store / "timerwheel").exists() and (store / "config" / "timercheck").exists()
        assert _stored(store, TOPIC) == []  # waiting in rmq_sys_wheel_timer
        assert len(_stored(store, "rmq_sys_wheel_timer")) == 3
        server = serve_process(store, ports[0], ports[1], extra=grpc)
        started_ms = int(time.time() * 1000)
        got = py5_client("receive", endpoint, "GroupTimer", TOPIC, 3, 30, "ack", "--wait-s", 60)
        lines = got.finish(90)
    finally:
        if server.poll() is None:
            _stop(server, signal.SIGTERM)
    received = {line["id"]: line for line in lines if line["event"] == "received"}
    assert set(received) == {line["id"] for line in sent}, got.stderr[-20:]
    deliver = {line["id"]: line["deliver_ms"] for line in sent}
    for record in _stored(store, TOPIC):
        uniq = record.properties["UNIQ_KEY"]
        # Visible in the topic only from its time on, and within the step after it.
        assert record.store_timestamp >= deliver[uniq], (record.store_timestamp, deliver[uniq])
        assert received[uniq]["received_ms"] >= deliver[uniq]
    # The consumer was there before the time (else "not early" would prove nothing).
    assert started_ms < min(deliver.values()), (started_ms, deliver)


def test_remoting_timer_message_survives_a_kill(py_client: Any, tmp_path: Path) -> None:
    """A 4.x producer sets TIMER_DELIVER_MS as a 5.x producer's setDeliverTimeMs does; a
    kill -9 of the broker before the time; the restarted broker delivers it on time."""
    store = tmp_path / "store"
    ports = (free_port(), free_port())
    namesrv = f"127.0.0.1:{ports[1]}"
    server = serve_process(store, *ports)
    try:
        run = py_client("produce", namesrv, TOPIC, 3, "--timer-delay-ms", 20_000)
        sent = [line for line in run.finish(60) if line["event"] == "sent"]
        assert len(sent) == 3, run.stderr[-10:]
        time.sleep(1.5)  # a timer checkpoint or not: recovery reads the timer log either way
        _stop(server, signal.SIGKILL)
        assert _stored(store, TOPIC) == []
        server = serve_process(store, *ports)
        started_ms = int(time.time() * 1000)
        consumer = py_client(
            "consume", namesrv, TOPIC, "GroupTimer4", "--expect", 3, "--seconds", 45
        )
        lines = consumer.finish(70)
    finally:
        if server.poll() is None:
            _stop(server, signal.SIGTERM)
    received = {line["id"]: line for line in lines if line["event"] == "recv"}
    assert set(received) == {line["msg_id"] for line in sent}, consumer.stderr[-10:]
    for line in sent:
        got = received[line["msg_id"]]
        assert got["store_timestamp"] >= line["deliver_ms"]
        assert got["at"] >= line["deliver_ms"]
        assert got["custom"] == f"v{line['i']}"
    assert started_ms < min(line["deliver_ms"] for line in sent)


def test_ten_thousand_due_at_one_time(py_client: Any, tmp_path: Path) -> None:
    """10,000 messages for one delivery time: all come, none before it; the spread of
    their store times after it is printed (a measure, not asserted)."""
    store = tmp_path / "store"
    ports = (free_port(), free_port())
    namesrv = f"127.0.0.1:{ports[1]}"
    total = 10_000
    server = serve_process(store, *ports, extra=["--flush", "ASYNC_FLUSH"])
    try:
        at_ms = int(time.time() * 1000) + 60_000
        run = py_client("produce", namesrv, TOPIC, total, "--timer-at-ms", at_ms)
        sent = [line for line in run.finish(300) if line["event"] == "sent"]
        assert len(sent) == total, run.stderr[-10:]
        # (A send after the time is stored at once: its store time is past it too.)
        consumer = py_client(
            "consume", namesrv, TOPIC, "GroupMany", "--expect", total, "--seconds", 240
        )
        lines = consumer.finish(300)
    finally:
        _stop(server, signal.SIGTERM)
    received = [line for line in lines if line["event"] == "recv"]
    assert {line["id"] for line in received} == {line["msg_id"] for line in sent}
    stored = sorted(line["store_timestamp"] for line in received)
    assert stored[0] >= at_ms
    print(
        f"10,000 timer messages due at one time: first stored {stored[0] - at_ms} ms after "
        f"it, last {stored[-1] - at_ms} ms after"
    )
