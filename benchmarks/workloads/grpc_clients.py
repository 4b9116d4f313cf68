"""The ``grpc`` workload (issue #38): RocketMQ 5.x clients through ``serve --grpc-listen``
against the 4.x remoting path, in the same run, on the same broker process.

Layer: benchmark workload. One ``rocketstore serve --grpc-listen`` (ASYNC_FLUSH) serves
both paths. Its store is prepared offline before it starts: the topics the gRPC sends use
(the gRPC path creates no topics, as the proxy does not) and a backlog of 100 B messages
with KEYS, TAGS and UNIQ_KEY, which every consume case reads whole with a group of its own.
The clients run as subprocesses, each timing only its messaging:

- gRPC: the official 5.x Python client, rocketmq-python-client 5.1.2
  (benchmarks/clients/rocketmq5_py.py, run by .venv-rmq5's interpreter: its import name
  ``rocketmq`` is the 0.4.4 client's too). ``send()`` one at a time and ``send_async()``
  with IN_FLIGHT in flight; a SimpleConsumer receiving batches of 32 and acking each
  message (``ack``: 5.1.2's ``ack_async`` returns None); a PushConsumer.
- remoting: the 4.x Python client ``rocketmq`` 0.4.4 (C++ core; benchmarks/clients/
  rocketmq_py.py): ``send_sync`` one at a time; a PushConsumer (2 threads).

Per case and path: msg/s (sends: over the timed loop; push consumers: first message to
last; SimpleConsumer: first receive to last ack), latency p50/p99 per send call (per
``receive`` call for the SimpleConsumer), and the broker process's CPU time per message
(all its threads, read from /proc at the client's start line and at its result; for the
consumers the region includes the consumer's start-up). Every repetition runs every case
on both paths, the order alternating. Skipped with the reason when .venv-rmq5 or the grpc
extra is missing; the remoting rows alone are skipped without the 4.x client.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
from dataclasses import dataclass

from benchmarks.common import DataSet, Row, Scratch, Sizes, row, skipped
from benchmarks.workloads.broker_procs import (
    Broker,
    free_port,
    run_client,
    start_rocketstore,
    wait_port,
)

log = logging.getLogger(__name__)

NAME = "grpc"
GRPC = "gRPC, 5.x Python client"
REMOTING = "remoting, 4.x Python client (C++ core)"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLIENTS = os.path.join(ROOT, "benchmarks", "clients")
CLIENT5 = os.path.join(CLIENTS, "rocketmq5_py.py")
CLIENT4 = os.path.join(CLIENTS, "rocketmq_py.py")
VENV5_PYTHON = os.path.join(ROOT, ".venv-rmq5", "bin", "python")
BACKLOG_TOPIC = "BenchBacklog"
IN_FLIGHT = 16
RECEIVE_BATCH = 32
BACKLOG_BODY_BYTES = 100
QUEUES = 4


@dataclass(frozen=True)
class Case:
    label: str
    kind: str  # send | async | simple | push
    count: int
    body_bytes: int
    paths: tuple[str, ...]

    def topic(self) -> str:
        if self.kind in ("simple", "push"):
            return BACKLOG_TOPIC
        return f"Bench_{self.kind}_{self.body_bytes}"


def cases(quick: bool) -> list[Case]:
    # The SimpleConsumer reads less: one ack() per message makes it the slowest case.
    sync_n, async_n, simple_n, push_n = (
        (100, 400, 300, 500) if quick else (2_000, 10_000, 5_000, 20_000)
    )
    both = (GRPC, REMOTING)
    return [
        Case("sync send, 1 producer, 100 B", "send", sync_n, 100, both),
        Case("sync send, 1 producer, 1 KiB", "send", sync_n, 1024, both),
        Case(f"async send, {IN_FLIGHT} in flight, 100 B", "async", async_n, 100, (GRPC,)),
        Case(f"async send, {IN_FLIGHT} in flight, 1 KiB", "async", async_n, 1024, (GRPC,)),
        Case(
            f"SimpleConsumer receive {RECEIVE_BATCH} + ack, 100 B backlog",
            "simple",
            simple_n,
            BACKLOG_BODY_BYTES,
            (GRPC,),
        ),
        Case("push consume, 100 B backlog", "push", push_n, BACKLOG_BODY_BYTES, both),
    ]


def _missing() -> str | None:
    """Why the workload cannot run at all, or None."""
    if not os.path.exists(VENV5_PYTHON):
        return (
            "skipped: no .venv-rmq5 with the 5.x client "
            "(scripts/setup.sh with the conformance extra makes it)"
        )
    if importlib.util.find_spec("grpc") is None:
        return "skipped: the grpc extra is not installed (pip install -e '.[grpc]')"
    return None


def run(sizes: Sizes, scratch: Scratch) -> list[Row]:
    all_cases = cases(sizes.quick)
    reason = _missing()
    if reason is not None:
        log.warning("grpc: %s", reason)
        return [skipped(NAME, c.label, p, reason) for c in all_cases for p in c.paths]
    have_4x = importlib.util.find_spec("rocketmq") is not None
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    loads: list[tuple[float, ...]] = [os.getloadavg()]
    with scratch.directory("grpc") as work:
        store = os.path.join(work, "store")
        backlog = max(c.count for c in all_cases if c.kind in ("simple", "push"))
        _prepare(store, {c.topic() for c in all_cases}, backlog)
        grpc_port = free_port()
        # serve's default loop (uvloop where installed); the gRPC calls run on grpc.aio's
        # poller either way, the remoting path gains from uvloop.
        loop = "uvloop" if importlib.util.find_spec("uvloop") is not None else "asyncio"
        broker = start_rocketstore(
            store,
            "ASYNC_FLUSH",
            os.path.join(work, "serve.log"),
            event_loop=loop,
            # Plain gRPC straight to grpcio, as the remoting path is plain: the default
            # permissive mode's TLS-sniffing front costs 150-200 us more a call
            # (docs/broker.md, TLS and the ACL on the gRPC port).
            extra_args=("--grpc-listen", f"127.0.0.1:{grpc_port}", "--grpc-tls-mode", "disabled"),
        )
        try:
            wait_port(grpc_port, broker.procs[0])
            endpoint = f"127.0.0.1:{grpc_port}"
            for rep in range(sizes.repeat):
                for case in all_cases:
                    paths = [p for p in case.paths if p == GRPC or have_4x]
                    for path in paths if rep % 2 == 0 else paths[::-1]:
                        args = _command(case, path, endpoint, broker.namesrv, rep)
                        try:
                            result = _run_client(args, broker, work)
                        except RuntimeError as e:
                            # Once in a few quick runs the 4.x client's first send failed
                            # (exit 1): one retry, the failure logged.
                            log.warning("grpc %s, %s: %s; once more", case.label, path, e)
                            result = _run_client(args, broker, work)
                        results.setdefault((case.label, path), []).append(result)
                        _log(case, path, rep, result)
                loads.append(os.getloadavg())
        finally:
            broker.stop()
    rows = _rows(all_cases, results, loads, loop)
    if not have_4x:
        reason = "skipped: Python rocketmq 0.4.4 client not installed ([conformance] extra)"
        rows += [skipped(NAME, c.label, REMOTING, reason) for c in all_cases if REMOTING in c.paths]
    return rows


def _prepare(store_dir: str, topics: set[str], backlog: int) -> None:
    """The topics (4 queues each) and the backlog, written before the broker starts."""
    from rocketstore import Message, MessageStore
    from rocketstore.broker.topic_config import TopicConfig, TopicConfigManager

    with MessageStore.open(store_dir) as store:
        for items in DataSet(BACKLOG_BODY_BYTES).batches(backlog, 1024):
            results = store.put_batch(
                [
                    Message(
                        BACKLOG_TOPIC,
                        item.body,
                        queue_id=item.queue_id,
                        properties={"KEYS": item.key, "TAGS": "bench", "UNIQ_KEY": item.uniq_key},
                    )
                    for item in items
                ]
            )
            if not all(result.ok for result in results):
                raise RuntimeError("filling the backlog failed")
    manager = TopicConfigManager(store_dir)
    for topic in sorted(topics):
        manager.update(TopicConfig(topic, read_queue_nums=QUEUES, write_queue_nums=QUEUES))


def _command(case: Case, path: str, endpoint: str, namesrv: str, rep: int) -> list[str]:
    group = f"bench_{case.kind}_{'grpc' if path == GRPC else 'remoting'}_{rep}"
    topic, count = case.topic(), str(case.count)
    if path == REMOTING:
        if case.kind == "push":
            return [sys.executable, CLIENT4, "consume", namesrv, topic, group, count, "300"]
        return [sys.executable, CLIENT4, "produce", namesrv, topic, count, str(case.body_bytes)]
    if case.kind == "push":
        return [VENV5_PYTHON, CLIENT5, "push", endpoint, group, topic, count]
    if case.kind == "simple":
        return [VENV5_PYTHON, CLIENT5, "simple", endpoint, group, topic, count, str(RECEIVE_BATCH)]
    in_flight = "1" if case.kind == "send" else str(IN_FLIGHT)
    return [VENV5_PYTHON, CLIENT5, "send", endpoint, topic, count, str(case.body_bytes), in_flight]


def _run_client(args: list[str], broker: Broker, work: str) -> dict[str, float]:
    """One client run; its result line (one with messages) and the broker's CPU seconds
    (``cpu_s``) from the client's start line to it."""
    home = os.path.join(work, "home")  # the clients' logs
    os.makedirs(home, exist_ok=True)
    return run_client(
        args,
        broker,
        work,
        is_result=lambda event: bool(event.get("messages")),
        what=f"{args[1:3]}",
        env={**os.environ, "HOME": home},
    )


def _log(case: Case, path: str, rep: int, result: dict[str, float]) -> None:
    log.info(
        "grpc %s, %s, run %d: %.0f msg/s, p50 %s us, p99 %s us, broker CPU %.1f us/msg",
        case.label,
        path,
        rep,
        result["messages"] / result["seconds"],
        result.get("p50_us", -1),
        result.get("p99_us", -1),
        1e6 * result["cpu_s"] / max(1, result["messages"]),
    )


def _rows(
    all_cases: list[Case],
    results: dict[tuple[str, str], list[dict[str, float]]],
    loads: list[tuple[float, ...]],
    loop: str,
) -> list[Row]:
    note = f"serve --event-loop {loop}; load average (1 min) " + ", ".join(
        f"{one[0]:.2f}" for one in loads
    )
    rows: list[Row] = []
    for case in all_cases:
        for path in case.paths:
            runs = results.get((case.label, path))
            if not runs:
                continue
            failures = sum(int(r.get("failures", 0)) for r in runs)
            why = f"{note}; {failures} failed" if failures else note
            rates = [r["messages"] / r["seconds"] for r in runs]
            rows.append(row(NAME, case.label, path, "rate", "msg/s", rates, note=why))
            for q in ("p50", "p99"):
                values = [r[f"{q}_us"] for r in runs if r.get(f"{q}_us", -1) >= 0]
                if values:
                    rows.append(
                        row(
                            NAME,
                            case.label,
                            path,
                            f"{q} latency",
                            "us",
                            values,
                            higher_is_better=False,
                        )
                    )
            cpu = [1e6 * r["cpu_s"] / max(1, r["messages"]) for r in runs]
            rows.append(
                row(
                    NAME,
                    case.label,
                    path,
                    "broker CPU per message",
                    "us",
                    cpu,
                    higher_is_better=False,
                )
            )
    return rows
