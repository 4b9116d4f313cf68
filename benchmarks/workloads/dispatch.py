"""Dispatch (rocketstore only): how fast the dispatcher turns CommitLog records into
consume-queue units and index entries, and how far it falls behind under load.

Layer: benchmark workload. "build rate": messages are put with the dispatcher stopped,
then one ``wait_dispatched`` is timed. "lag": batches of 1024 are put as fast as one
thread can while the background dispatcher runs; the lag is sampled after every batch.
The other systems index inside their put, so they have no separate figure.
"""

from __future__ import annotations

import logging
import time

from benchmarks.common import BODY_SIZES, MIB, DataSet, Row, Scratch, Sizes, row, settle_heap
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
    return rows
