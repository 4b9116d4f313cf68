"""Sequential consume: read every message once, in log order.

Layer: benchmark workload. rocketstore: ``get_messages`` of each of the 4 queues, 32 per
call; sqlite3: ``SELECT ... ORDER BY seq`` fetched 32 rows at a time; lmdb and diskcache:
iteration; persist-queue: ``get`` until empty (which consumes, so it is reloaded for every
repetition). Every body is touched.
"""

from __future__ import annotations

import logging
import time

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
            rates, bandwidth = [], []
            with scratch.directory(system) as directory:
                adapter = open_system(system, directory, "ASYNC_FLUSH")
                try:
                    load(adapter, dataset, count)
                    for repetition in range(sizes.repeat):
                        if repetition and getattr(adapter, "destructive_scan", False):
                            load(adapter, dataset, count)
                        settle_heap()
                        start = time.perf_counter()
                        read, size = adapter.scan()
                        seconds = time.perf_counter() - start
                        if read != count:
                            raise RuntimeError(f"{system} read {read} of {count} messages")
                        rates.append(count / seconds)
                        bandwidth.append(size / MIB / seconds)
                finally:
                    adapter.close()
            result = row(NAME, case, system, "read rate", "msg/s", rates)
            assert result.stat is not None
            result.extra["body MiB/s"] = round(sorted(bandwidth)[len(bandwidth) // 2], 2)
            rows.append(result)
            log.info("consume %s %s: %.0f msg/s", case, system, result.stat.median)
    return rows
