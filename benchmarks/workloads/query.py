"""Lookups: by key (hot and cold) on every keyed system; by unique key, by message id and
offset by time on rocketstore (offset by time on sqlite3 too, through its time index).

Layer: benchmark workload. Latency is per call and includes reading and checking the
message (its body must be the one put). "hot": 100 keys looked up again and again after a
warm-up pass; rocketstore's "hot, read-only" does the same through a store opened
read-only beside the open writer (as the CLI and a Spark reader open it). "cold": keys
never looked up before, after the system was closed, its files dropped from the page
cache, and reopened (rocketstore's reopen reads the CommitLog tail back, so its mappings
are dropped again after the reopen).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable

from benchmarks.common import (
    BODY_SIZES,
    QUEUES,
    TOPIC,
    DataSet,
    Row,
    Scratch,
    Sizes,
    evict_page_cache,
    key_of,
    percentile,
    row,
    sample_indexes,
    settle_heap,
    skipped,
)
from benchmarks.systems import KEYED, Adapter, open_system
from benchmarks.systems.base import now_ms
from benchmarks.systems.rocketstore_system import RocketstoreAdapter
from benchmarks.systems.sqlite_system import SqliteAdapter
from benchmarks.workloads.support import load, missing

log = logging.getLogger(__name__)

NAME = "query"
HOT_KEYS = 100


def latencies_us(calls: list[Callable[[], object]]) -> list[float]:
    out = []
    clock = time.perf_counter
    settle_heap()
    for call in calls:
        start = clock()
        call()
        out.append((clock() - start) * 1e6)
    return out


def key_lookup(adapter: Adapter, dataset: DataSet, index: int) -> Callable[[], None]:
    key, expected = key_of(index), dataset.item(index).body

    def call() -> None:
        if adapter.get_by_key(key) != expected:
            raise RuntimeError(f"{adapter.name}: wrong or missing message for {key}")

    return call


def read_only_hot(directory: str, dataset: DataSet, hot: list[int], ops: int) -> list[float]:
    """The hot key lookups through a read-only opener beside the open writer."""
    from rocketstore import MessageStore

    with MessageStore.open(directory, read_only=True) as reader:

        def lookup(index: int) -> Callable[[], None]:
            key, expected = key_of(index), dataset.item(index).body

            def call() -> None:
                found = reader.query_messages(TOPIC, key, max_count=1)
                if not found or found[0].body != expected:
                    raise RuntimeError(f"read-only: wrong or missing message for {key}")

            return call

        calls = [lookup(i) for i in hot]
        latencies_us(calls)  # warm-up
        return latencies_us(calls * (ops // HOT_KEYS))


def reopen_cold(system: str, adapter: Adapter, directory: str) -> Adapter:
    adapter.close()
    evict_page_cache(directory)
    adapter = open_system(system, directory, "ASYNC_FLUSH")
    if isinstance(adapter, RocketstoreAdapter):
        adapter.drop_cache()
    return adapter


class Figures:
    """p50 and p99 per repetition for each (case, system)."""

    def __init__(self) -> None:
        self.samples: dict[tuple[str, str], tuple[list[float], list[float]]] = {}

    def add(self, case: str, system: str, latencies: list[float]) -> None:
        p50s, p99s = self.samples.setdefault((case, system), ([], []))
        p50s.append(percentile(latencies, 50))
        p99s.append(percentile(latencies, 99))

    def rows(self) -> list[Row]:
        out = []
        for (case, system), (p50s, p99s) in self.samples.items():
            out.append(row(NAME, case, system, "p50 latency", "us", p50s, higher_is_better=False))
            out.append(row(NAME, case, system, "p99 latency", "us", p99s, higher_is_better=False))
            log.info("query %s %s: p50 %.1f us", case, system, sorted(p50s)[len(p50s) // 2])
        return out


def rocketstore_extras(
    adapter: RocketstoreAdapter,
    dataset: DataSet,
    count: int,
    ops: int,
    seed: int,
    times: tuple[int, int],
) -> dict[str, list[float]]:
    store = adapter.store
    picks = sample_indexes(ops, count, seed)

    def by_uniq(i: int) -> Callable[[], None]:
        item = dataset.item(i)

        def call() -> None:
            found = store.query_by_unique_key(TOPIC, item.uniq_key)
            if not found or found[0].body != item.body:
                raise RuntimeError(f"unique key {item.uniq_key} not found")

        return call

    def by_id(i: int) -> Callable[[], None]:
        msg_id, expected = adapter.msg_ids[i], dataset.item(i).body

        def call() -> None:
            found = store.view_message(msg_id)
            if found is None or found.body != expected:
                raise RuntimeError(f"message id {msg_id} not found")

        return call

    rng = random.Random(seed)
    moments = [(rng.randrange(QUEUES), rng.randint(*times)) for _ in range(ops)]
    by_time = [(lambda q=q, t=t: store.offset_by_time(TOPIC, q, t, "lower")) for q, t in moments]
    return {
        "unique key": latencies_us([by_uniq(i) for i in picks]),
        "view by msg id": latencies_us([by_id(i) for i in picks]),
        "offset by time": latencies_us(by_time),
    }


def sqlite_offset_by_time(
    adapter: SqliteAdapter, ops: int, seed: int, times: tuple[int, int]
) -> list[float]:
    rng = random.Random(seed)
    moments = [(rng.randrange(QUEUES), rng.randint(*times)) for _ in range(ops)]
    return latencies_us([(lambda q=q, t=t: adapter.offset_by_time(q, t)) for q, t in moments])


def run_system(
    system: str, scratch: Scratch, sizes: Sizes, dataset: DataSet, figures: Figures, tag: str
) -> None:
    count, ops = sizes.data_messages, sizes.query_ops
    hot = sample_indexes(HOT_KEYS, count, 1)
    with scratch.directory(system) as directory:
        adapter = open_system(system, directory, "ASYNC_FLUSH")
        try:
            if isinstance(adapter, RocketstoreAdapter):
                adapter.keep_ids = True
            first_ms = now_ms()
            load(adapter, dataset, count)
            times = (first_ms, now_ms())
            msg_ids = adapter.msg_ids if isinstance(adapter, RocketstoreAdapter) else []
            for repetition in range(sizes.repeat):
                seed = 1000 + repetition
                calls = [key_lookup(adapter, dataset, i) for i in hot]
                latencies_us(calls)  # warm-up
                figures.add(f"{tag}key, hot", system, latencies_us(calls * (ops // HOT_KEYS)))
                if isinstance(adapter, RocketstoreAdapter):
                    values = read_only_hot(directory, dataset, hot, ops)
                    figures.add(f"{tag}key, hot, read-only", system, values)
                adapter = reopen_cold(system, adapter, directory)
                cold = [key_lookup(adapter, dataset, i) for i in sample_indexes(ops, count, seed)]
                figures.add(f"{tag}key, cold", system, latencies_us(cold))
                if isinstance(adapter, RocketstoreAdapter):
                    adapter.msg_ids = msg_ids  # offsetMsgIds stay valid across a reopen
                    for case, values in rocketstore_extras(
                        adapter, dataset, count, ops, seed, times
                    ).items():
                        figures.add(f"{tag}{case}", system, values)
                if isinstance(adapter, SqliteAdapter):
                    values = sqlite_offset_by_time(adapter, ops, seed, times)
                    figures.add(f"{tag}offset by time", system, values)
        finally:
            adapter.close()


def run(sizes: Sizes, scratch: Scratch) -> list[Row]:
    rows: list[Row] = []
    for body in BODY_SIZES:
        dataset = DataSet(body)
        tag = f"{body} B, "
        figures = Figures()
        for system in KEYED:
            if missing(system):
                rows.append(skipped(NAME, f"{tag}key", system, "skipped: not installed"))
                continue
            run_system(system, scratch, sizes, dataset, figures, tag)
        rows.extend(figures.rows())
    return rows
