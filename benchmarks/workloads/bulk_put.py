"""Bulk put with building the inputs included: rocketstore's ``put_columns`` (columns
built from the data set) and ``put_batch`` (a Message per row, batches of 1,024) against
lmdb's batch put, 100 B bodies, ASYNC_FLUSH, in the same run (issue #32, item 5).

Layer: benchmark workload. Unlike ``put``, the timed region starts from the data set's
items: what a bulk writer holds before calling the store. rocketstore's rows carry KEYS
and UNIQ_KEY and go to four queues, as in ``put``. lmdb's rows are timed twice: with its
inputs built in the region (its key bytes, as its adapter's ``prepare`` makes them) and,
as the ``put`` table has it, from inputs made before. Every run ends with the system's
sync; each figure is the median of ``put_repeat`` runs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks.common import (
    TOPIC,
    DataSet,
    Item,
    Row,
    Scratch,
    Sizes,
    row,
    settle_heap,
    skipped,
)
from benchmarks.systems import open_system
from benchmarks.workloads.support import missing

log = logging.getLogger(__name__)

NAME = "bulk_put"
BODY = 100
BATCH = 1024
CASE = f"{BODY} B, ASYNC_FLUSH, building included"
COLUMNS = "rocketstore put_columns"
BATCHES = "rocketstore put_batch (Message per row)"
LMDB_BUILT = "lmdb (inputs built in the timed region)"
LMDB = "lmdb (inputs built before, as in put)"


def _put_columns(adapter: Any, items: Sequence[Item]) -> None:
    result = adapter.store.put_columns(
        TOPIC,
        [item.body for item in items],
        queue_ids=[item.queue_id for item in items],
        keys=[item.key for item in items],
        property_columns={"UNIQ_KEY": [item.uniq_key for item in items]},
    )
    if not result.ok:
        raise RuntimeError(f"put_columns failed: {result.status} {result.reason}")


def _put_batches(adapter: Any, items: Sequence[Item]) -> None:
    for first in range(0, len(items), BATCH):
        adapter.put_batch(adapter.prepare(items[first : first + BATCH]))


def _lmdb_built(adapter: Any, items: Sequence[Item]) -> None:
    for first in range(0, len(items), BATCH):
        adapter.put_batch(adapter.prepare(items[first : first + BATCH]))


def _measure(
    system: str, scratch: Scratch, items: list[Item], put: Callable[[Any, Sequence[Item]], None]
) -> float:
    """Seconds for ``put(adapter, items)`` and the final sync, on a fresh store."""
    with scratch.directory(system) as directory:
        adapter = open_system(system, directory, "ASYNC_FLUSH")
        try:
            settle_heap()
            start = time.perf_counter()
            put(adapter, items)
            adapter.sync()
            return time.perf_counter() - start
        finally:
            adapter.close()


def _measure_lmdb_prepared(scratch: Scratch, items: list[Item]) -> float:
    with scratch.directory("lmdb") as directory:
        adapter = open_system("lmdb", directory, "ASYNC_FLUSH")
        try:
            prepared = adapter.prepare(items)
            chunks = [prepared[i : i + BATCH] for i in range(0, len(prepared), BATCH)]
            settle_heap()
            start = time.perf_counter()
            for chunk in chunks:
                adapter.put_batch(chunk)
            adapter.sync()
            return time.perf_counter() - start
        finally:
            adapter.close()


def run(sizes: Sizes, scratch: Scratch) -> list[Row]:
    # 200,000 rows as in the issue (20,000 in the quick run).
    count = 20_000 if sizes.quick else 200_000
    items = DataSet(BODY).items(0, count)
    timings: dict[str, list[float]] = {COLUMNS: [], BATCHES: [], LMDB_BUILT: [], LMDB: []}
    have_lmdb = not missing("lmdb")
    # Interleaved repetitions: a slow moment of the VM falls on every system alike.
    for _ in range(sizes.put_repeat):
        timings[COLUMNS].append(_measure("rocketstore", scratch, items, _put_columns))
        timings[BATCHES].append(_measure("rocketstore", scratch, items, _put_batches))
        if have_lmdb:
            timings[LMDB_BUILT].append(_measure("lmdb", scratch, items, _lmdb_built))
            timings[LMDB].append(_measure_lmdb_prepared(scratch, items))
    rows = []
    for system, seconds in timings.items():
        if not seconds:
            rows.append(skipped(NAME, CASE, system, "skipped: not installed"))
            continue
        rates = [count / s for s in seconds]
        rows.append(row(NAME, CASE, system, "put rate", "msg/s", rates, messages=count))
        log.info("bulk put %s: %.0f msg/s", system, sorted(rates)[len(rates) // 2])
    return rows
