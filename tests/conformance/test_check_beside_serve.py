"""``check`` beside a running broker (issue #33 item 9, as the attack ran it): a real
RocketMQ client sends through ``rocketstore serve`` while ``rocketstore check`` runs again
and again on the same store directory. Judged as of the CommitLog end each check read, the
live store has no problem: every check exits 0 and says OK."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conformance.broker_process import free_port, serve_process

TOPIC = "CheckLive"
TOTAL = 400


def _check(store: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rocketstore.cli.main", "--store", str(store), "check",
         "--max-problems", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )  # fmt: skip


def test_check_beside_serve_and_a_real_producer(py_client: Any, tmp_path: Path) -> None:
    store = tmp_path / "store"
    broker_port, namesrv_port = free_port(), free_port()
    server = serve_process(store, broker_port, namesrv_port)
    producer = None
    try:
        # 25 ms between sends: the producer runs 10 s or more, long enough for two checks
        # (a check's process takes 1-3 s); at 5 ms a fast broker (uvloop) finished it in
        # about 2 s, before the second check began.
        producer = py_client(
            "produce", f"127.0.0.1:{namesrv_port}", TOPIC, TOTAL, "--pause-ms", 25, "--attempts", 30
        )
        producer.wait_for("sent", 20, 30)
        checks = 0
        while producer.process.poll() is None and checks < 6:
            done = _check(store)
            assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-2000:])
            assert done.stdout.splitlines()[-1].endswith(": OK"), done.stdout[-2000:]
            assert "abort file present" in done.stdout  # judged while the broker runs
            checks += 1
        assert checks >= 2, "the producer finished before two checks ran beside it"
        sent = producer.finish(120)
        assert sum(1 for line in sent if line.get("event") == "sent") == TOTAL
    finally:
        if producer is not None and producer.process.poll() is None:
            producer.process.kill()
        server.send_signal(signal.SIGTERM)
        server.wait(30)
    final = _check(store)
    assert final.returncode == 0 and "abort file present" not in final.stdout, final.stdout
