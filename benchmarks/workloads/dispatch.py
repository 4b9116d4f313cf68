"""Dispatch (rocketstore only): how fast the dispatcher turns CommitLog records into
consume-queue units and index entries, and how far it falls behind under load.

Layer: benchmark workload. "build rate": messages are put with the dispatcher stopped,
then one ``wait_dispatched`` is timed. "lag": batches of 1024 are put as fast as one
thread can while the background dispatcher runs; the lag is sampled after every batch.
"visibility lag": SYNC_FLUSH batches are put as fast as one thread can; after every call,
how long ago the oldest put not yet dispatched returned (what a consumer waits beyond
the producer's acknowledgement), with ``max_dispatch_lag_ms`` off and at 5 ms.
The other systems index inside their put, so they have no separate figure.
"""

from __future__ import annotations

import logging
import time
from collections import deque

from benchmarks.common import (
    BODY_SIZES,
    MIB,
    DataSet,
    Row,
    Scratch,
    Sizes,
    percentile,
    row,
    settle_heap,
)
from benchmarks.systems import open_system
from benchmarks.systems.raw_system import record_bytes
from benchmarks.systems.rocketstore_system import RocketstoreAdapter

log = logging.getLogger(__name__)

NAME = "dispatch"
SYSTEM = "rocketstore"
BATCH = 1024


def build_rate(scratch: Scratch, dataset: DataSet, count: int) -> float:
    with scratch.directory(SYSTEM) as directory:
        adapter = open_system(SYSTEM, directory, "ASYNC_FLUSH")
        assert isinstance(adapter, RocketstoreAdapter)
        try:
            adapter.store.dispatcher.shutdown(catch_up=False)
            for items in dataset.batches(count, BATCH):
                adapter.put_batch(adapter.prepare(items))
            adapter.sync()
            settle_heap()
            start = time.perf_counter()
            adapter.store.wait_dispatched()
            seconds = time.perf_counter() - start
        finally:
            adapter.close()
    return count / seconds


def lag_under_load(scratch: Scratch, dataset: DataSet, count: int) -> dict[str, float]:
    with scratch.directory(SYSTEM) as directory:
        adapter = open_system(SYSTEM, directory, "ASYNC_FLUSH")
        assert isinstance(adapter, RocketstoreAdapter)
        store = adapter.store
        try:
            batches = [adapter.prepare(items) for items in dataset.batches(count, BATCH)]
            max_lag = 0
            dispatched_before = store.dispatcher.records_dispatched
            settle_heap()
            start = time.perf_counter()
            for batch in batches:
                adapter.put_batch(batch)
                max_lag = max(max_lag, store.dispatch_lag_bytes())
            put_seconds = time.perf_counter() - start
            end_lag = store.dispatch_lag_bytes()
            dispatched = store.dispatcher.records_dispatched - dispatched_before
            start = time.perf_counter()
            store.wait_dispatched()
            catch_up = time.perf_counter() - start
        finally:
            adapter.close()
    return {
        "put rate": count / put_seconds,
        "dispatch rate during puts": dispatched / put_seconds,
        "max lag": max_lag / MIB,
        "lag when puts stop": end_lag / MIB,
        "catch-up time": catch_up,
    }


SYNC_LAG_BATCHES = (32, 1024)
# max_dispatch_lag_ms: off (the default), and the bound measured against it.
SYNC_LAG_BOUNDS = (0, 5)


def visibility_lag(
    scratch: Scratch, dataset: DataSet, batch: int, calls: int, bound_ms: int
) -> dict[str, float]:
    with scratch.directory(SYSTEM) as directory:
        adapter = RocketstoreAdapter(
            directory, "SYNC_FLUSH", store_options={"max_dispatch_lag_ms": bound_ms}
        )
        store = adapter.store
        try:
            batches = [adapter.prepare(items) for items in dataset.batches(batch * calls, batch)]
            pending: deque[tuple[int, float]] = deque()  # (end offset, time acknowledged)
            lags: list[float] = []
            settle_heap()
            start = time.perf_counter()
            for items in batches:
                results = store.put_batch(items)
                now = time.perf_counter()
                last = results[-1]
                if not last.ok:
                    raise RuntimeError(f"put_batch failed: {last.status}")
                pending.append((last.commit_log_offset + last.size, now))
                dispatched = store.dispatcher.dispatched_offset
                while pending and pending[0][0] <= dispatched:
                    pending.popleft()
                lags.append((now - pending[0][1]) * 1000 if pending else 0.0)
            seconds = time.perf_counter() - start
        finally:
            adapter.close()
    return {
        "put rate": batch * calls / seconds,
        "visibility lag p50": percentile(lags, 50),
        "visibility lag p99": percentile(lags, 99),
        "visibility lag max": max(lags),
    }


SYNC_LAG_UNITS = {
    "put rate": ("msg/s", True),
    "visibility lag p50": ("ms", False),
    "visibility lag p99": ("ms", False),
    "visibility lag max": ("ms", False),
}


LAG_UNITS = {
    "put rate": ("msg/s", True),
    "dispatch rate during puts": ("msg/s", True),
    "max lag": ("MiB", False),
    "lag when puts stop": ("MiB", False),
    "catch-up time": ("s", False),
}


def run(sizes: Sizes, scratch: Scratch) -> list[Row]:
    rows: list[Row] = []
    for body in BODY_SIZES:
        dataset = DataSet(body)
        count = sizes.dispatch_messages
        rates = [build_rate(scratch, dataset, count) for _ in range(sizes.repeat)]
        built = row(
            NAME, f"{body} B, build", SYSTEM, "dispatch rate", "msg/s", rates, messages=count
        )
        assert built.stat is not None
        built.extra["MiB/s"] = round(built.stat.median * record_bytes(body) / MIB, 2)
        rows.append(built)
        log.info("dispatch %d B: %.0f msg/s", body, built.stat.median)
        samples = [
            lag_under_load(scratch, dataset, sizes.lag_messages) for _ in range(sizes.repeat)
        ]
        case = f"{body} B, sustained batch-{BATCH} puts"
        for metric, (unit, higher) in LAG_UNITS.items():
            values = [sample[metric] for sample in samples]
            rows.append(
                row(
                    NAME,
                    case,
                    SYSTEM,
                    metric,
                    unit,
                    values,
                    higher_is_better=higher,
                    messages=sizes.lag_messages,
                )
            )
        rows.extend(sync_lag_rows(sizes, scratch, dataset))
    return rows


def sync_lag_calls(sizes: Sizes, batch: int) -> int:
    """put_batch calls per visibility-lag measurement: a quarter as many for the largest
    batches, which still write 256,000 messages (67 MiB of records at 100 B, long past the
    writer's first yield): 1,000 of them took 175 s of the full run's 15 minutes."""
    return sizes.sync_lag_calls if batch < max(SYNC_LAG_BATCHES) else sizes.sync_lag_calls // 4


def sync_lag_rows(sizes: Sizes, scratch: Scratch, dataset: DataSet) -> list[Row]:
    rows: list[Row] = []
    for batch in SYNC_LAG_BATCHES:
        case = f"{dataset.body_size} B, SYNC_FLUSH batch-{batch} puts"
        calls = sync_lag_calls(sizes, batch)
        for bound in SYNC_LAG_BOUNDS:
            system = f"{SYSTEM} (max_dispatch_lag_ms={bound})"
            samples = [
                visibility_lag(scratch, dataset, batch, calls, bound) for _ in range(sizes.repeat)
            ]
            for metric, (unit, higher) in SYNC_LAG_UNITS.items():
                values = [sample[metric] for sample in samples]
                rows.append(
                    row(
                        NAME,
                        case,
                        system,
                        metric,
                        unit,
                        values,
                        higher_is_better=higher,
                        messages=batch * calls,
                    )
                )
            log.info(
                "dispatch %s, bound %d ms: max lag %.1f ms",
                case,
                bound,
                max(sample["visibility lag max"] for sample in samples),
            )
    return rows
