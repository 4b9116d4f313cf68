"""The ``broker`` workload without a Java client: produce and consume rates through the
Python RocketMQ client against ``rocketstore serve`` (benchmarks/workloads/broker.py runs
this when ROCKETSTORE_BENCH_JAVA_CLIENT names no built 4.9.8 Java client).

Layer: benchmark workload. A name server and broker run in this process (a background
event loop, as ``rocketstore serve`` runs them); the Python ``rocketmq`` 0.4.4 client runs
in a subprocess: a producer calling ``send_sync`` one message at a time, then a push
consumer (clustering) reading everything back; then PRODUCERS producer processes at once
(each one ``send_sync`` at a time, all starting at the same moment), whose sends a
SYNC_FLUSH broker can share syncs between (group commit). The client's own start-up is
outside the timing. Skipped when the client is not installed
(``pip install -e '.[conformance]'``).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import subprocess
import sys
import tempfile
import time

from benchmarks.common import FLUSH_MODES, Row, Scratch, Sizes, row, skipped

log = logging.getLogger(__name__)

NAME = "broker"  # the same workload; the fallback without a Java client
SYSTEM = "rocketstore serve"
CLIENT = os.path.join(os.path.dirname(os.path.dirname(__file__)), "clients", "rocketmq_py.py")
BODY_BYTES = 100
PRODUCERS = 4
# Seconds for the concurrent producers to start (interpreter, client, route) before they
# all begin sending.
START_MARGIN_S = 4.0


def _start(home: str, *args: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, CLIENT, *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HOME": home},
    )


def _result(proc: subprocess.Popen[str], what: object) -> dict[str, float]:
    stdout, stderr = proc.communicate(timeout=900)
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"client {what} failed ({proc.returncode}): {stderr[-500:]}")
    result: dict[str, float] = json.loads(lines[-1])
    return result


def _client(home: str, *args: object) -> dict[str, float]:
    return _result(_start(home, *args), args[0])


def _concurrent_produce(home: str, namesrv: str, count: int) -> float:
    """PRODUCERS producers of ``count`` messages each, sending from one moment on: the
    messages of all over the time until the last finished."""
    start_at = time.time() + START_MARGIN_S
    procs = [
        _start(home, "produce", namesrv, "BenchConcurrent", count, BODY_BYTES, start_at)
        for _ in range(PRODUCERS)
    ]
    results = [_result(proc, "produce") for proc in procs]
    return PRODUCERS * count / max(result["seconds"] for result in results)


def run(sizes: Sizes, scratch: Scratch) -> list[Row]:
    count = max(200, sizes.put_messages // 4)
    cases = [f"{BODY_BYTES} B, {mode}, Python rocketmq 0.4.4 client" for mode in FLUSH_MODES]
    if importlib.util.find_spec("rocketmq") is None:
        reason = "skipped: Python rocketmq client not installed ([conformance] extra)"
        return [skipped(NAME, case, SYSTEM, reason) for case in cases]
    from rocketstore.broker.app import BackgroundServer, BrokerOptions
    from rocketstore.config import StoreConfig

    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as home:
        for mode, case in zip(FLUSH_MODES, cases, strict=True):
            produce_rates, consume_rates, concurrent_rates = [], [], []
            for repetition in range(sizes.repeat):
                with scratch.directory("broker") as directory:
                    options = BrokerOptions(
                        directory,
                        listen="127.0.0.1:0",
                        store_config=StoreConfig(flush_disk_type=mode),
                    )
                    with BackgroundServer(options) as server:
                        namesrv = server.namesrv_address
                        sent = _client(home, "produce", namesrv, "BenchTopic", count, BODY_BYTES)
                        produce_rates.append(sent["messages"] / sent["seconds"])
                        got = _client(
                            home, "consume", namesrv, "BenchTopic", "bench", count + 1, 300
                        )
                        if got["messages"] < count + 1:
                            raise RuntimeError(f"consumed {got['messages']} of {count + 1}")
                        consume_rates.append(got["messages"] / got["seconds"])
                        concurrent_rates.append(
                            _concurrent_produce(home, namesrv, max(50, count // PRODUCERS))
                        )
                log.info(
                    "broker %s run %d: produce %.0f msg/s, consume %.0f msg/s, "
                    "%d producers %.0f msg/s",
                    mode,
                    repetition,
                    produce_rates[-1],
                    consume_rates[-1],
                    PRODUCERS,
                    concurrent_rates[-1],
                )
            rows.append(row(NAME, case, SYSTEM, "produce rate (send_sync)", "msg/s", produce_rates))
            rows.append(row(NAME, case, SYSTEM, "consume rate (push)", "msg/s", consume_rates))
            rows.append(
                row(
                    NAME,
                    case,
                    SYSTEM,
                    f"produce rate, {PRODUCERS} producers at once (send_sync)",
                    "msg/s",
                    concurrent_rates,
                )
            )
    return rows
