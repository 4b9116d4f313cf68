"""kill -9 of ``rocketstore serve --grpc-listen`` while the official 5.x Python client's
SimpleConsumer is acknowledging a stream of messages: after a restart every message
whose send was acknowledged is delivered (the ones in flight at the kill after their
invisible time), and what was acknowledged before the last POP
state write is not delivered again (config/grpcPopState.json and the consumer offsets)."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.cli.cli_helpers import CLI
from tests.conformance.broker_process import free_port, serve_process

pytest.importorskip("grpc", reason="the grpc extra is not installed")

TOPIC = "TopicKill5"
GROUP = "GroupKill5"
TOTAL = 200


def test_kill_9_mid_stream_loses_nothing_acknowledged(py5_client: Any, tmp_path: Path) -> None:
    store = tmp_path / "store"
    subprocess.run(
        [*CLI, "--store", str(store), "updateTopic", "-t", TOPIC, "-r", "2", "-w", "2"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    ports = (free_port(), free_port(), free_port())
    endpoint = f"127.0.0.1:{ports[2]}"
    grpc = ["--grpc-listen", endpoint]
    server = serve_process(store, ports[0], ports[1], extra=grpc)
    consumer = None
    try:
        run = py5_client("send", endpoint, TOPIC, TOTAL)
        sent = {e["id"] for e in run.finish(120) if e["event"] == "sent"}
        assert len(sent) == TOTAL, run.stderr[-10:]
        consumer = py5_client(
            "receive", endpoint, GROUP, TOPIC, TOTAL, 10, "ack",
            "--batch", 8, "--pause-ms", 30, "--wait-s", 60,
        )  # fmt: skip
        consumer.wait_for("acked", 60, 60)
        server.send_signal(signal.SIGKILL)  # mid-stream: a batch in flight, more to come
        server.wait(timeout=30)
        consumer.process.kill()
        before = consumer.finish(30)
        acked = {e["id"] for e in before if e["event"] == "acked"}
        held = {e["id"] for e in before if e["event"] == "received"} - acked
        assert (store / "config" / "grpcPopState.json").exists()
        server = serve_process(store, ports[0], ports[1], extra=grpc)
        left = TOTAL - len(acked)
        drain = py5_client("receive", endpoint, GROUP, TOPIC, left, 10, "ack", "--wait-s", 60)
        after = drain.finish(100)
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
            server.communicate(timeout=60)
    received_after = [e for e in after if e["event"] == "received"]
    again = {e["id"] for e in received_after} & acked
    # Nothing lost: every message whose send was acknowledged came, before or after.
    assert acked | {e["id"] for e in received_after} == sent
    # In flight at the kill: delivered again (with its attempt counted when the POP
    # state written before the kill had it in flight).
    assert held <= {e["id"] for e in received_after} | acked
    redelivered = [e["attempt"] for e in received_after if e["id"] in held]
    # Acknowledged ones come again only if acknowledged after the last state write
    # (every 500 ms here, offsets and POP state alike): a handful at most.
    assert len(again) <= 40, (len(again), len(acked))
    print(
        f"kill -9 mid-stream: {len(acked)} acknowledged before, {len(held)} in flight, "
        f"{len(received_after)} received after the restart, {len(again)} of them again; "
        f"attempts of those in flight: {sorted(redelivered)}"
    )
