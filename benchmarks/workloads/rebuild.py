"""Rebuild (rocketstore only): consume queues and index files rebuilt from a CommitLog of a
given size by the single-process dispatcher (``rebuild --engine single``), the parallel
rebuild on local processes (``--engine local``) and on Spark (``--engine spark --master
local[2]``), all in the same run on the same CommitLog.

Layer: benchmark workload. The store is written with the dispatcher stopped (1 KiB bodies,
TAGS, KEYS and UNIQ_KEY on every message, two topics of four queues), then closed, which
dispatches it: those queue and index files are the reference every engine's output is
compared with (index files in order, names aside). Spark is timed per job on a running
session whose Python workers have started, and once more for its first job plus the
session's start and the workers' start (about what ``rocketstore rebuild --engine spark``
costs from a shell). The machine's page cache holds the CommitLog for every engine (the
store was just written). Size: ``--rebuild-mib``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import sys
import time
from typing import Any

from benchmarks.common import MIB, DataSet, Row, Scratch, Sizes, row, skipped

log = logging.getLogger(__name__)

NAME = "rebuild"
SYSTEM = "rocketstore"
BODY = 1024
BATCH = 1024
TOPICS = ("BenchOrders", "BenchPayments")
QUEUES = 4
SPARK_MASTER = "local[2]"


def build(directory: str, total_bytes: int) -> tuple[int, int]:
    """Write about ``total_bytes`` of records; the close dispatches them (the reference).
    Returns (records, bytes of records)."""
    from rocketstore import Message, MessageStore, StoreConfig

    dataset = DataSet(BODY)
    config = StoreConfig(flush_disk_type="ASYNC_FLUSH")
    written = count = 0
    with MessageStore.open(directory, config) as store:
        store.dispatcher.shutdown(catch_up=False)
        while written < total_bytes:
            batch = []
            for item in dataset.items(count, count + BATCH):
                batch.append(
                    Message(
                        topic=TOPICS[item.seq % len(TOPICS)],
                        body=item.body,
                        queue_id=item.queue_id,
                        properties={
                            "TAGS": f"Tag{item.seq % 5}",
                            "KEYS": item.key,
                            "UNIQ_KEY": item.uniq_key,
                        },
                    )
                )
            for result in store.put_batch(batch):
                assert result.ok, result
                written += result.size
            count += len(batch)
        store.dispatcher.start()
    return count, written


def digest(root: str) -> str:
    """One hash over every consume-queue file (by path) and every index file (in order)."""
    h = hashlib.sha256()
    for part in ("consumequeue", "index"):
        base = os.path.join(root, part)
        paths = []
        for directory, _dirs, names in os.walk(base):
            paths.extend(os.path.join(directory, n) for n in names)
        for path in sorted(paths):
            if part == "consumequeue":
                h.update(os.path.relpath(path, base).encode())
            with open(path, "rb") as f:
                while chunk := f.read(8 * MIB):
                    h.update(chunk)
    return h.hexdigest()


def single(root: str) -> None:
    from rocketstore.check.store_rebuild import held_lock, rebuild

    rebuild(root, queues=True, index=True, lock=held_lock(root))


def local(root: str) -> None:
    from rocketstore.rebuild.driver import rebuild_store
    from rocketstore.rebuild.runners import ProcessRunner

    with ProcessRunner() as runner:
        _log_phases("local", rebuild_store(root, runner))


def _log_phases(name: str, report: Any) -> None:
    phases = ", ".join(
        f"{phase} {seconds:.2f} s" for phase, seconds in report.phase_seconds.items()
    )
    log.info("rebuild %s phases: %s (%d ranges)", name, phases, report.ranges)


def _warm(_: int) -> int:
    """Runs on the Spark workers: import what the rebuild tasks import."""
    import rocketstore.rebuild.passes  # noqa: F401

    return 0


def spark_session() -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master(SPARK_MASTER)
        .appName("rocketstore-bench-rebuild")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )


def spark_job(session: Any, root: str) -> float:
    from rocketstore.rebuild.driver import rebuild_store
    from rocketstore.spark.rebuild import SparkRunner

    start = time.perf_counter()
    report = rebuild_store(root, SparkRunner(session.sparkContext))
    seconds = time.perf_counter() - start
    _log_phases("spark", report)
    return seconds


def _have_spark() -> bool:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return False
    return shutil.which("java") is not None or "JAVA_HOME" in os.environ


def check(name: str, root: str, reference: str, seconds: float) -> None:
    """Every engine must write the dispatcher's bytes (a benchmark of wrong output is
    worthless); this checks correctness, never a time."""
    log.info("rebuild %s: %.2f s", name, seconds)
    if digest(root) != reference:
        raise RuntimeError(f"rebuild engine {name} wrote different bytes from the dispatcher")


def run(sizes: Sizes, scratch: Scratch) -> list[Row]:
    rows: list[Row] = []
    for total in sizes.rebuild_bytes:
        with scratch.directory(SYSTEM) as root:
            began = time.perf_counter()
            records, commitlog = build(root, total)
            reference = digest(root)
            log.info("rebuild: %d records, %.0f MiB of records written in %.0f s", records,
                     commitlog / MIB, time.perf_counter() - began)  # fmt: skip
            case = f"{total // MIB} MiB CommitLog, {BODY} B bodies"
            times: dict[str, list[float]] = {}
            # One Spark session for every repetition (pyspark does not restart cleanly in
            # one process); its start is timed and added to the first job for the figure
            # a shell user sees.
            session = None
            session_seconds = 0.0
            if _have_spark():
                start = time.perf_counter()
                session = spark_session()
                # Start the Python workers (and their imports) before any timed job: the
                # "job" figures are then a running cluster's; the cold figure adds this.
                workers = session.sparkContext.defaultParallelism
                session.sparkContext.parallelize(range(workers), workers).map(_warm).collect()
                session_seconds = time.perf_counter() - start
            try:
                # Every size is repeated (the engines interleaved): one run of each was
                # too noisy for a ratio (the first rebuild after the writes ran slowest).
                for repetition in range(sizes.repeat):
                    for name, fn in (("single", single), ("local", local)):
                        start = time.perf_counter()
                        fn(root)
                        times.setdefault(name, []).append(time.perf_counter() - start)
                        check(name, root, reference, times[name][-1])
                    if session is not None:
                        job = spark_job(session, root)
                        check("spark", root, reference, job)
                        times.setdefault(f"spark {SPARK_MASTER}, job", []).append(job)
                        if repetition == 0:
                            cold = f"spark {SPARK_MASTER}, first job + session start"
                            times[cold] = [job + session_seconds]
                            log.info("spark session start and warm-up: %.2f s", session_seconds)
            finally:
                if session is not None:
                    session.stop()
            base = sorted(times["single"])[len(times["single"]) // 2]
            for name, values in times.items():
                median = sorted(values)[len(values) // 2]
                rows.append(
                    row(
                        NAME,
                        case,
                        f"{SYSTEM} ({name})",
                        "rebuild time",
                        "s",
                        values,
                        higher_is_better=False,
                        records=records,
                        **{
                            "MiB/s": round(commitlog / MIB / median, 1),
                            "speed-up vs single": round(base / median, 2),
                        },
                    )
                )
            if session is None:
                rows.append(skipped(NAME, case, f"{SYSTEM} (spark)", "skipped: no pyspark/Java"))
    return rows
