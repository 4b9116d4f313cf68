"""Put throughput: one message per call and batches of 32, 256 and 1024, with
ASYNC_FLUSH and SYNC_FLUSH, bodies of 100 B and 1 KiB, for every system.

Layer: benchmark workload. The timed region is the put calls plus the system's ``sync``
(so every run ends durable); preparing inputs is outside it. rocketstore's puts return
once the CommitLog holds the messages; "rocketstore (until queryable)" also waits for the
dispatcher to finish the consume queues and the index.
"""

from __future__ import annotations

import logging
import time

from benchmarks.common import (
    BATCH_SIZES,
    BODY_SIZES,
    FLUSH_MODES,
    MIB,
    DataSet,
    Row,
    Scratch,
    Sizes,
    row,
    settle_heap,
    skipped,
)
from benchmarks.systems import MODULES, module, open_system
from benchmarks.systems.raw_system import record_bytes
from benchmarks.workloads.support import missing

log = logging.getLogger(__name__)

NAME = "put"
QUERYABLE = "rocketstore (until queryable)"


def case_name(body: int, mode: str, batch: int) -> str:
    calls = "single" if batch == 1 else f"batch {batch}"
    return f"{body} B, {mode}, {calls}"


def message_count(sizes: Sizes, mode: str, batch: int, per_message: bool, share: int = 1) -> int:
    """SYNC_FLUSH runs are capped in flushes: each one waits for the disk.

    A system with ``PUT_SHARE`` puts that fraction of the messages (at least one call's
    worth). diskcache and persist-queue run at 5-30 k msg/s: with every system's count they
    took 420 s of a 1,793 s full run (2026-11-27, 2-core EPYC), against the issue's 15
    minutes; a quarter still took 120 s of a 1,079 s run, and an eighth lasts 0.1 s or
    more a repetition but for ASYNC batch puts (0.05 s and up), far above the timer's
    noise. Each row records its ``messages``."""
    if mode == "SYNC_FLUSH":
        calls = (1 if per_message else batch) * sizes.put_sync_calls
        count = min(sizes.put_sync_messages, calls)
    else:
        count = sizes.put_messages
    return max(min(count, batch), count // share)


def measure(
    system: str, scratch: Scratch, dataset: DataSet, mode: str, batch: int, count: int
) -> tuple[float, float | None]:
    """One run: (seconds to put and sync, seconds more until queryable or None)."""
    with scratch.directory(system) as directory:
        adapter = open_system(system, directory, mode)
        try:
            prepared = adapter.prepare(dataset.items(0, count))
            chunks = [prepared[i : i + batch] for i in range(0, count, batch)]
            settle_heap()
            start = time.perf_counter()
            if batch == 1:
                for item in prepared:
                    adapter.put_one(item)
            else:
                for chunk in chunks:
                    adapter.put_batch(chunk)
            adapter.sync()
            seconds = time.perf_counter() - start
            extra = None
            if system == "rocketstore":
                start = time.perf_counter()
                adapter.wait_queryable()
                extra = time.perf_counter() - start
        finally:
            adapter.close()
    return seconds, extra


def run(sizes: Sizes, scratch: Scratch) -> list[Row]:
    rows: list[Row] = []
    for body in BODY_SIZES:
        dataset = DataSet(body)
        record_size = record_bytes(body)
        for mode in FLUSH_MODES:
            for batch in (1, *BATCH_SIZES):
                case = case_name(body, mode, batch)
                for system in MODULES:
                    if missing(system):
                        rows.append(skipped(NAME, case, system, "skipped: not installed"))
                        continue
                    per_message = bool(getattr(module(system), "FLUSHES_PER_MESSAGE", False))
                    share = int(getattr(module(system), "PUT_SHARE", 1))
                    count = message_count(sizes, mode, batch, per_message, share)
                    rates, queryable = [], []
                    for _ in range(sizes.put_repeat):
                        seconds, extra = measure(system, scratch, dataset, mode, batch, count)
                        rates.append(count / seconds)
                        if extra is not None:
                            queryable.append(count / (seconds + extra))
                    note = f"{count:,} messages a run" if share > 1 else ""
                    put_row = row(
                        NAME, case, system, "put rate", "msg/s", rates, note=note, messages=count
                    )
                    assert put_row.stat is not None
                    put_row.extra["MiB/s"] = round(put_row.stat.median * record_size / MIB, 2)
                    rows.append(put_row)
                    log.info("put %s %s: %.0f msg/s", case, system, put_row.stat.median)
                    if queryable:
                        rows.append(row(NAME, case, QUERYABLE, "put rate", "msg/s", queryable))
    return rows
