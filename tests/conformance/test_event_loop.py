"""``serve --event-loop`` (issue #37): the broker on either loop -- uvloop, the default
where it is installed, and asyncio's own -- takes a real client's sends (the inline
answers included) and serves its pulls (the inline answers too), and stops cleanly."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from rocketstore.cli.serve_options import DEFAULT_EVENT_LOOP
from tests.conformance.broker_process import free_port, serve_process


@pytest.mark.parametrize("event_loop", ["uvloop", "asyncio"])
def test_serve_takes_sends_and_serves_pulls_on_each_loop(
    event_loop: str, py_client: Any, tmp_path: Path
) -> None:
    if event_loop == "uvloop":
        pytest.importorskip("uvloop", reason="uvloop is not installed")
    store = tmp_path / "store"
    namesrv = free_port()
    extra = ("--event-loop", event_loop, "--flush", "ASYNC_FLUSH")
    process = serve_process(store, free_port(), namesrv, extra=extra)
    address = f"127.0.0.1:{namesrv}"
    topic, group = f"PyLoop_{event_loop}", f"GroupLoop_{event_loop}"
    try:
        lines = py_client("produce", address, topic, 10, "--big", 5).finish(60)
        sent = [line for line in lines if line["event"] == "sent"]
        assert len(sent) == 10, lines[-5:]
        run = py_client("consume", address, topic, group, "--expect", 10, "--seconds", 40)
        received = [r for r in run.finish(70) if r["event"] == "recv"]
        assert {r["id"] for r in received} == {s["msg_id"] for s in sent}
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=60)
    assert process.returncode == 0
    assert not (store / "abort").exists()


def test_the_default_loop_is_uvloop_where_it_is_installed() -> None:
    try:
        import uvloop  # noqa: F401
    except ImportError:
        assert DEFAULT_EVENT_LOOP == "asyncio"
    else:
        assert DEFAULT_EVENT_LOOP == "uvloop"
