"""``serve --grpc-listen``: the option reaches the broker, the ready line names the
endpoint, and SIGTERM stops it cleanly (POP state and store written and closed)."""

from __future__ import annotations

import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.cli.cli_helpers import CLI

pytest.importorskip("grpc", reason="the grpc extra is not installed")


def test_serve_with_grpc_listen_starts_and_stops_cleanly(tmp_path: Path) -> None:
    store = tmp_path / "store"
    process = subprocess.Popen(
        [*CLI, "--store", str(store), "serve", "--listen", "127.0.0.1:0",
         "--namesrv-listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stderr is not None
    ready = ""
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            line = process.stderr.readline()
            if not line:
                break
            if "Ctrl-C stops" in line:
                ready = line
                break
        assert re.search(r", gRPC 127\.0\.0\.1:\d+ over ", ready), ready
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=60)
    assert process.returncode == 0
    assert not (store / "abort").exists()
    assert (store / "config" / "grpcPopState.json").exists()


def test_a_bad_grpc_address_is_refused_before_the_store_opens(tmp_path: Path) -> None:
    store = tmp_path / "store"
    done = subprocess.run(
        [*CLI, "--store", str(store), "serve", "--listen", "127.0.0.1:0",
         "--namesrv-listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:70000"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    assert "--grpc-listen: port 70000 is past 65535" in done.stderr
    assert not (store / "abort").exists()
