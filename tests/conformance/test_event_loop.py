"""``serve --event-loop uvloop`` (issue #37): the broker on uvloop takes a real client's
sends (the inline answers included) and serves its pulls, and stops cleanly."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from tests.conformance.broker_process import free_port, serve_process


def test_serve_on_uvloop_takes_sends_and_serves_pulls(py_client: Any, tmp_path: Path) -> None:
    pytest.importorskip("uvloop", reason="the uvloop extra is not installed")
    store = tmp_path / "store"
    namesrv = free_port()
    extra = ("--event-loop", "uvloop", "--flush", "ASYNC_FLUSH")
    process = serve_process(store, free_port(), namesrv, extra=extra)
    address = f"127.0.0.1:{namesrv}"
    try:
        lines = py_client("produce", address, "PyUvloop", 10, "--big", 5).finish(60)
        sent = [line for line in lines if line["event"] == "sent"]
        assert len(sent) == 10, lines[-5:]
        run = py_client("consume", address, "PyUvloop", "GroupUv", "--expect", 10, "--seconds", 40)
        received = [r for r in run.finish(70) if r["event"] == "recv"]
        assert {r["id"] for r in received} == {s["msg_id"] for s in sent}
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=60)
    assert process.returncode == 0
    assert not (store / "abort").exists()
