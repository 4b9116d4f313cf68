"""The broker as a real process for the kill tests: ``rocketstore serve`` on free loopback
ports, started and waited for until it says it serves."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve_process(
    store: Path,
    broker: int,
    namesrv: int,
    settings: Path | None = None,
    extra: Sequence[str] = (),
) -> subprocess.Popen[str]:
    """``extra``: more serve options (``--grpc-listen``, ``--flush ASYNC_FLUSH`` ...)."""
    command = [sys.executable, "-m", "rocketstore.cli.main"]
    if settings is not None:
        command += ["-c", str(settings)]
    command += ["serve", "--store", str(store)]
    command += ["--listen", f"127.0.0.1:{broker}", "--namesrv-listen", f"127.0.0.1:{namesrv}"]
    command += ["--flush", "SYNC_FLUSH", "--offset-persist-ms", "500", *extra]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if "Ctrl-C stops" in line:
            return process
        assert line or process.poll() is None, "serve exited early"
    raise AssertionError("serve did not start in time")
