"""Sequential consume: read every message once, in log order.

Layer: benchmark workload. rocketstore: ``get_messages`` of each of the 4 queues, 32 per
call; sqlite3: ``SELECT ... ORDER BY seq`` fetched 32 rows at a time; lmdb and diskcache:
iteration; persist-queue: ``get`` until empty (which consumes, so it is reloaded for every
repetition). Every body is touched. rocketstore is also read as a consumer subscribed with
a SQL92 selector that selects every message (``SELECTOR``): the cost of evaluating it on
each record's properties.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any

from benchmarks.common import (
    BODY_SIZES,
    MIB,
    DataSet,
    Row,
    Scratch,
    Sizes,
    row,
    settle_heap,
    skipped,
)
from benchmarks.systems import STORES, open_system
from benchmarks.workloads.support import load, missing

log = logging.getLogger(__name__)

NAME = "consume"
# Two conditions on properties every message has: true for all, so the count is checked.
SELECTOR = "KEYS IS NOT NULL AND UNIQ_KEY <> ''"
SELECTOR_SYSTEM = "rocketstore, SQL92"


MAX_SCANS = 15


def _timed_scans(
    adapter: Any,
    count: int,
    repeat: int,
    reload: Callable[[], None] | None = None,
    min_seconds: float = 0.0,
    **scan: str,
) -> tuple[list[float], list[float]]:
    """Timed scans of all ``count`` messages: ``repeat`` of them, more (up to MAX_SCANS)
    while less than ``min_seconds`` was measured, unless a scan consumes (``reload``
    before each but the first): read rates (msg/s) and body bandwidths (MiB/s)."""
    rates: list[float] = []
    bandwidth: list[float] = []
    measured = 0.0
    while len(rates) < repeat or (
        reload is None and measured < min_seconds and len(rates) < MAX_SCANS
    ):
        if rates and reload is not None:
            reload()
        settle_heap()
        start = time.perf_counter()
        read, size = adapter.scan(**scan)
        seconds = time.perf_counter() - start
        if read != count:
            raise RuntimeError(f"{adapter.name} read {read} of {count} messages")
        measured += seconds
        rates.append(count / seconds)
        bandwidth.append(size / MIB / seconds)
    return rates, bandwidth


def run(sizes: Sizes, scratch: Scratch) -> list[Row]:
    rows: list[Row] = []
    count = sizes.data_messages
    for body in BODY_SIZES:
        dataset = DataSet(body)
        case = f"{body} B, {count:,} messages"
        for system in STORES:
            if missing(system):
                rows.append(skipped(NAME, case, system, "skipped: not installed"))
                continue
            selected: tuple[list[float], list[float]] | None = None
            with scratch.directory(system) as directory:
                adapter = open_system(system, directory, "ASYNC_FLUSH")
                try:
                    load(adapter, dataset, count)
                    reload = None
                    if getattr(adapter, "destructive_scan", False):
                        reload = functools.partial(load, adapter, dataset, count)
                    rates, bandwidth = _timed_scans(
                        adapter, count, sizes.repeat, reload, sizes.scan_seconds
                    )
                    if system == "rocketstore":
                        selected = _timed_scans(
                            adapter, count, sizes.repeat, None, sizes.scan_seconds, sql92=SELECTOR
                        )
                finally:
                    adapter.close()
            measured = [(system, rates, bandwidth)]
            if selected is not None:
                measured.append((SELECTOR_SYSTEM, *selected))
            for name, name_rates, name_bandwidth in measured:
                result = row(NAME, case, name, "read rate", "msg/s", name_rates)
                assert result.stat is not None
                median_bandwidth = sorted(name_bandwidth)[len(name_bandwidth) // 2]
                result.extra["body MiB/s"] = round(median_bandwidth, 2)
                rows.append(result)
                log.info("consume %s %s: %.0f msg/s", case, name, result.stat.median)
    return rows
