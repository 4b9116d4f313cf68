"""CI's check of the metrics endpoint (issue #39): a real ``rocketstore serve
--metrics-listen`` process, the Python ``rocketmq`` client (C++ core) producing and then
consuming, /metrics scraped before and after: the counters move as sent and consumed."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.conformance.broker_process import free_port
from tests.unit.broker.test_metrics import scrape, value

COUNT = 30


def _serve(store: Path, broker: int, namesrv: int, metrics: int) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "rocketstore.cli.main", "serve", "--store", str(store)]
    command += ["--listen", f"127.0.0.1:{broker}", "--namesrv-listen", f"127.0.0.1:{namesrv}"]
    command += ["--metrics-listen", f"127.0.0.1:{metrics}", "--offset-persist-ms", "500"]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if "Ctrl-C stops" in line:
            assert f"metrics at http://127.0.0.1:{metrics}/metrics" in line
            return process
        assert line or process.poll() is None, "serve exited early"
    raise AssertionError("serve did not start in time")


def test_counters_move_under_a_real_clients_load(py_client: Any, tmp_path: Path) -> None:
    broker, namesrv, metrics = free_port(), free_port(), free_port()
    process = _serve(tmp_path / "store", broker, namesrv, metrics)
    address = f"127.0.0.1:{metrics}"
    namesrv_address = f"127.0.0.1:{namesrv}"
    try:
        topic = {"topic": "PyMetrics", "is_system": "false"}
        assert value(scrape(address), "rocketmq_messages_in_total", **topic) == 0
        lines = py_client("produce", namesrv_address, "PyMetrics", COUNT).finish(60)
        assert len([line for line in lines if line["event"] == "sent"]) == COUNT
        sent = scrape(address)
        assert value(sent, "rocketmq_messages_in_total", **topic) == COUNT
        assert value(sent, "rocketmq_throughput_in_total", **topic) > COUNT * 100
        sends = {"request_code": "send_message", "response_code": "success"}  # the C++ core's
        assert value(sent, "rocketmq_rpc_latency_count", **sends) == COUNT
        run = py_client(
            "consume", namesrv_address, "PyMetrics", "GroupMetrics", "--expect", COUNT,
            "--seconds", 40, "--linger-s", 2,
        )  # fmt: skip
        received = run.wait_for("recv", COUNT, 45)
        assert len({r["id"] for r in received}) == COUNT
        group = {"topic": "PyMetrics", "consumer_group": "GroupMetrics"}
        deadline = time.monotonic() + 20
        while True:  # the client commits its offsets every 5 s (and at shutdown)
            consumed = scrape(address)
            if value(consumed, "rocketmq_consumer_lag_messages", **group) == 0 or (
                time.monotonic() > deadline
            ):
                break
            time.sleep(0.5)
        run.finish(60)
        assert value(consumed, "rocketmq_messages_out_total", **group) == COUNT
        assert value(consumed, "rocketmq_throughput_out_total", **group) == value(
            sent, "rocketmq_throughput_in_total", **topic
        )
        assert value(consumed, "rocketmq_consumer_lag_messages", **group) == 0
        assert value(consumed, "rocketmq_consumer_inflight_messages", **group) == 0
        pulls = {"request_code": "pull_message", "response_code": "success"}
        assert value(consumed, "rocketmq_rpc_latency_count", **pulls) >= 1
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
