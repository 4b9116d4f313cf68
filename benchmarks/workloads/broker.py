"""``rocketstore serve`` side by side with a real RocketMQ 4.9.8 broker, under the same load
from the real 4.9.8 Java client (issue #37).

Layer: benchmark workload. The load is BrokerBench.java (benchmarks/clients/java) run against
the client built by tests/conformance/java/build.sh, named by ROCKETSTORE_BENCH_JAVA_CLIENT.
The Java broker, when ROCKETSTORE_BENCH_JAVA_BROKER names a build of
tests/conformance/java/real_broker/build_broker.sh, runs beside ``rocketstore serve`` (each
behind its own name server, both up during the runs), and every repetition of every case
runs against both, the order alternating, so a busy machine weighs on both alike. Without
it, rocketstore alone with absolute figures; without the Java client, the older
measurement through the Python client (broker_python_client).

Per case and broker: msg/s, send latency p50/p99 (per call: per batch for batches), and the
broker process's CPU time per message over the timed region (all its threads; the Java
name server is a separate process and not counted, rocketstore's runs in the broker's
process and is). ASYNC_FLUSH unless the case says SYNC_FLUSH; each flush mode gets fresh
stores. The consume case reads a backlog written once per broker (batches, untimed), with
a new consumer group per repetition, from the consumer's start to the last message.
"""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import dataclass

from benchmarks.common import Row, Scratch, Sizes, row, skipped
from benchmarks.workloads import broker_python_client
from benchmarks.workloads.broker_procs import (
    JAVA_BROKER_ENV,
    JAVA_CLIENT_ENV,
    Broker,
    JavaLoad,
    start_java,
    start_rocketstore,
)
from rocketstore.cli.serve import DEFAULT_EVENT_LOOP

log = logging.getLogger(__name__)

NAME = "broker"
ROCKETSTORE = "rocketstore serve"
JAVA = "RocketMQ 4.9.8 (Java)"
# More repetitions than the other workloads: the brokers share 2 cores with the client.
REPEAT_ENV = "ROCKETSTORE_BENCH_BROKER_REPEAT"
BROKERS_ENV = "ROCKETSTORE_BENCH_BROKERS"  # rocketstore serve --brokers N
# rocketstore serve --event-loop NAME[,NAME] (default: serve's default, uvloop if installed)
EVENT_LOOP_ENV = "ROCKETSTORE_BENCH_EVENT_LOOP"


@dataclass(frozen=True)
class Case:
    label: str
    flush: str
    mode: str  # BrokerBench mode
    count: int
    args: tuple[object, ...]


def cases(quick: bool) -> list[Case]:
    scale = 0.05 if quick else 1.0

    def n(count: int) -> int:
        return max(256, int(count * scale))

    a, s = "ASYNC_FLUSH", "SYNC_FLUSH"
    return [
        Case("sync send, 1 producer, 100 B", a, "sync", n(3_000), (100, 1)),
        Case("sync send, 8 producers, 100 B", a, "sync", n(12_000), (100, 8)),
        Case("async send, 256 in flight, 100 B", a, "async", n(20_000), (100, 256)),
        Case("batch send 4 x 64, 100 B", a, "batch", n(128_000), (100, 4, 64)),
        Case("batch send 4 x 64, 1 KiB", a, "batch", n(64_000), (1024, 4, 64)),
        Case("push consume, 500k backlog, 100 B", a, "consume", n(500_000), ()),
        Case("mixed: 4 sync producers + push consumer, 100 B", a, "mixed", n(20_000), (100, 4)),
        Case("SYNC_FLUSH sync send, 1 producer, 100 B", s, "sync", n(1_500), (100, 1)),
        Case("SYNC_FLUSH sync send, 8 producers, 100 B", s, "sync", n(6_000), (100, 8)),
    ]


def run(sizes: Sizes, scratch: Scratch) -> list[Row]:
    client_dir = os.environ.get(JAVA_CLIENT_ENV)
    if not client_dir or not os.path.exists(os.path.join(client_dir, "classpath.txt")):
        log.info("broker: %s not set: the Python client instead", JAVA_CLIENT_ENV)
        return broker_python_client.run(sizes, scratch)
    if shutil.which("java") is None or shutil.which("javac") is None:
        return [skipped(NAME, c.label, ROCKETSTORE, "skipped: no JDK") for c in cases(sizes.quick)]
    java_build = os.environ.get(JAVA_BROKER_ENV)
    if java_build and not os.path.exists(os.path.join(java_build, "classpath.txt")):
        log.warning("broker: %s=%s holds no build; rocketstore alone", JAVA_BROKER_ENV, java_build)
        java_build = None
    repeat = int(os.environ.get(REPEAT_ENV, "1" if sizes.quick else "3"))
    brokers = int(os.environ.get(BROKERS_ENV, "1"))
    # "asyncio,uvloop": a rocketstore serve on each, measured side by side.
    chosen = os.environ.get(EVENT_LOOP_ENV, DEFAULT_EVENT_LOOP)
    event_loops = [n.strip() for n in chosen.split(",")]
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    loads: list[tuple[float, ...]] = [os.getloadavg()]
    with scratch.directory("broker") as work:
        load = JavaLoad(client_dir, work)
        for flush in ("ASYNC_FLUSH", "SYNC_FLUSH"):
            flush_cases = [c for c in cases(sizes.quick) if c.flush == flush]
            running: list[Broker] = []
            try:
                if java_build:
                    java_dir = os.path.join(work, f"java-{flush}")
                    os.makedirs(java_dir)
                    running.append(start_java(java_build, java_dir, flush, java_dir))
                for loop in event_loops:
                    ours = os.path.join(work, f"rocketstore-{flush}-{loop}")
                    log_path = os.path.join(work, f"{flush}-{loop}.log")
                    started = start_rocketstore(ours, flush, log_path, brokers, loop)
                    started.system = _ours(brokers, loop)
                    running.append(started)
                _run_cases(load, running, flush_cases, repeat, results)
                loads.append(os.getloadavg())
            finally:
                for broker in running:
                    broker.stop()
                for name in os.listdir(work):
                    if name.startswith(("java-", "rocketstore-")):
                        shutil.rmtree(os.path.join(work, name), ignore_errors=True)
    return _rows(cases(sizes.quick), results, loads, [_ours(brokers, n) for n in event_loops])


def _run_cases(
    load: JavaLoad,
    brokers: list[Broker],
    flush_cases: list[Case],
    repeat: int,
    results: dict[tuple[str, str], list[dict[str, float]]],
) -> None:
    for case in flush_cases:
        filled = case.count
        if case.mode == "consume":
            for broker in brokers:  # the backlog, once per broker (whole batches of 4 x 64)
                filled = int(load.run(broker, "fill", "BenchBacklog", case.count, 100)["messages"])
        for rep in range(repeat):
            args: tuple[object, ...]
            if case.mode == "consume":
                args = ("BenchBacklog", filled, f"bench_consume_{rep}")
            elif case.mode == "mixed":
                args = (f"BenchMixed{rep}", case.count, *case.args, f"bench_mixed_{rep}")
            else:
                args = (f"Bench_{case.mode}_{case.args[0]}", case.count, *case.args)
            order = brokers if rep % 2 == 0 else brokers[::-1]
            for broker in order:
                result = load.run(broker, case.mode, *args)
                results.setdefault((case.label, broker.system), []).append(result)
                log.info(
                    "broker %s, %s, run %d: %.0f msg/s, p50 %s us, p99 %s us, CPU %.1f us/msg, "
                    "%d failed",
                    case.label,
                    broker.system,
                    rep,
                    result["messages"] / result["seconds"],
                    result["p50_us"],
                    result["p99_us"],
                    1e6 * result["cpu_s"] / max(1, result["messages"]),
                    result["failures"],
                )


def _ours(brokers: int, event_loop: str) -> str:
    """A rocketstore serve's system name in the rows: its options past the defaults, and
    its event loop always (the default one depends on whether uvloop is installed)."""
    name = ROCKETSTORE if brokers == 1 else f"{ROCKETSTORE} --brokers {brokers}"
    return f"{name} --event-loop {event_loop}"


def _rows(
    all_cases: list[Case],
    results: dict[tuple[str, str], list[dict[str, float]]],
    loads: list[tuple[float, ...]],
    ours: list[str],
) -> list[Row]:
    load_note = "load average (1 min) " + ", ".join(f"{one[0]:.2f}" for one in loads)
    rows: list[Row] = []
    for case in all_cases:
        for name in (JAVA, *ours):
            runs = results.get((case.label, name))
            if not runs:
                continue
            rates = [r["messages"] / r["seconds"] for r in runs]
            cpu = [1e6 * r["cpu_s"] / max(1, r["messages"]) for r in runs]
            failures = sum(int(r["failures"]) for r in runs)
            note = f"{load_note}; {failures} failed send(s)" if failures else load_note
            rows.append(row(NAME, case.label, name, "rate", "msg/s", rates, note=note))
            p50 = [r["p50_us"] for r in runs if r["p50_us"] >= 0]
            p99 = [r["p99_us"] for r in runs if r["p99_us"] >= 0]
            if case.mode == "mixed":
                p50 = [r["e2e_p50_us"] for r in runs if r["e2e_p50_us"] >= 0]
                p99 = [r["e2e_p99_us"] for r in runs if r["e2e_p99_us"] >= 0]
            if p50:
                rows.append(
                    row(NAME, case.label, name, "p50 latency", "us", p50, higher_is_better=False)
                )
            if p99:
                rows.append(
                    row(NAME, case.label, name, "p99 latency", "us", p99, higher_is_better=False)
                )
            rows.append(
                row(
                    NAME,
                    case.label,
                    name,
                    "broker CPU per message",
                    "us",
                    cpu,
                    higher_is_better=False,
                )
            )
    return rows
