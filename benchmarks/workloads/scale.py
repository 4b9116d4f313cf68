"""Scale: put and key-query figures as the store grows (10^5, 10^6, 10^7 messages), and
the peak memory (RSS) of each system.

Layer: benchmark workload. Each (system, size) runs in a child process of its own
(``python -m benchmarks.workloads.scale CHILD-ARGS``), so its ``ru_maxrss`` is its own:
it includes the interpreter (about 20-40 MiB) and every page of a memory-mapped file the
process has touched (rocketstore and lmdb map their files). Bodies of 100 B, batches of
1024, ASYNC_FLUSH; only the put calls and the final sync are timed (generating the
messages is not). Sizes of 10^6 and more run once, for ``SCALE_BIG_SYSTEMS`` only
unless ``--scale-all-systems`` (the others would take a good part of the 15-minute
budget; see docs/benchmarks.md), and the others run once at 10^5 too. Objects alive
once the system is open are frozen out of the cycle collector (``gc.freeze``), so the
collection before each batch scans only that batch's objects.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import resource
import subprocess
import sys
import time

from benchmarks.common import (
    SCALE_BIG_COUNT,
    SCALE_BIG_SYSTEMS,
    DataSet,
    Row,
    Scratch,
    Sizes,
    percentile,
    row,
    settle_heap,
    skipped,
)
from benchmarks.systems import STORES, open_system
from benchmarks.systems.raw_system import record_bytes
from benchmarks.workloads.support import missing

log = logging.getLogger(__name__)

NAME = "scale"
BODY = 100
BATCH = 1024
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def child(system: str, directory: str, count: int, query_ops: int) -> dict[str, float]:
    """The measurement itself (runs in the child)."""
    from benchmarks.common import sample_indexes
    from benchmarks.workloads.query import key_lookup, latencies_us

    dataset = DataSet(BODY)
    adapter = open_system(system, directory, "ASYNC_FLUSH")
    # What lives now (modules, the open system) is left out of every later collection:
    # settle_heap() before each batch then scans one batch's objects, not the whole heap
    # (9 ms a call with rocketstore's modules loaded: 90 s of a 10^7 run's 170 s).
    gc.collect()
    gc.freeze()
    result: dict[str, float] = {}
    try:
        put_seconds = 0.0
        clock = time.perf_counter
        for items in dataset.batches(count, BATCH):
            prepared = adapter.prepare(items)
            settle_heap()
            start = clock()
            adapter.put_batch(prepared)
            put_seconds += clock() - start
        start = clock()
        adapter.sync()
        put_seconds += clock() - start
        result["put rate"] = count / put_seconds
        start = clock()
        adapter.wait_queryable()
        result["put rate until queryable"] = count / (put_seconds + clock() - start)
        if adapter.has_keys:
            calls = [key_lookup(adapter, dataset, i) for i in sample_indexes(query_ops, count, 5)]
            latencies = latencies_us(calls)
            result["key query p50"] = percentile(latencies, 50)
            result["key query p99"] = percentile(latencies, 99)
    finally:
        adapter.close()
    result["peak RSS"] = peak_rss_mib()
    return result


def peak_rss_mib() -> float:
    """This process's peak RSS. ``VmHWM`` rather than ``ru_maxrss``: on Linux a child's
    ``ru_maxrss`` starts from its parent's RSS at fork and survives exec."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def spawn(system: str, directory: str, count: int, query_ops: int) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=REPO_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    args = json.dumps([system, directory, count, query_ops])
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.workloads.scale", args],
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"scale child {system} {count} failed:\n{done.stderr[-2000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


GIB = 1024**3


def rocketstore_footprint(count: int) -> int:
    """Bytes a rocketstore run of ``count`` messages reserves on disk: its CommitLog files
    (1 GiB each, preallocated) and the next one made ahead, and two index files (the
    second made ahead of need), with room for its consume queues."""
    from rocketstore.config import StoreConfig
    from rocketstore.format.index_layout import file_size

    config = StoreConfig()
    commitlog_files = -(-count * record_bytes(BODY) // config.mapped_file_size_commit_log) + 1
    index = 2 * file_size(config.max_hash_slot_num, config.max_index_num)
    return commitlog_files * config.mapped_file_size_commit_log + index + GIB


def disk_too_full(directory: str, count: int) -> str | None:
    """Why a rocketstore run of ``count`` messages could not keep its files here, or None.
    Above ``disk_space_clean_forcibly_ratio`` (85 %) the store's retention deletes CommitLog
    files however new they are, as RocketMQ's does: the run's queries would then find
    nothing (a run on a 89 %-full disk failed with "wrong or missing message")."""
    from rocketstore.config import StoreConfig
    from rocketstore.services.retention import disk_usage_ratio

    ratio = disk_usage_ratio(directory, rocketstore_footprint(count))
    limit = StoreConfig().disk_space_clean_forcibly_ratio
    if ratio * 100 <= limit:  # (-1.0, unmeasurable: the store would not delete either)
        return None
    return (
        f"skipped: the disk would be {ratio * 100:.0f} % full, above the {limit} % at which "
        "the store's retention deletes CommitLog files"
    )


METRICS = {
    "put rate": ("msg/s", True),
    "put rate until queryable": ("msg/s", True),
    "key query p50": ("us", False),
    "key query p99": ("us", False),
    "peak RSS": ("MiB", False),
}


def run(sizes: Sizes, scratch: Scratch) -> list[Row]:
    rows: list[Row] = []
    for count in sizes.scale_counts:
        case = f"{count:,} messages"
        for system in STORES:
            # The other systems (15-30 k msg/s) run once at every size: three runs of
            # them at 10^5 took 60 s of the 15 minutes.
            big = system in SCALE_BIG_SYSTEMS
            repeat = sizes.repeat if count < SCALE_BIG_COUNT and big else 1
            if missing(system):
                rows.append(skipped(NAME, case, system, "skipped: not installed"))
                continue
            if count >= SCALE_BIG_COUNT and not big and not sizes.scale_all_systems:
                rows.append(skipped(NAME, case, system, "skipped: time budget "
                                    "(--scale-all-systems runs it)"))  # fmt: skip
                continue
            too_full = disk_too_full(scratch.base, count) if system == "rocketstore" else None
            if too_full is not None:
                log.warning("scale %s %s: %s", case, system, too_full)
                rows.append(skipped(NAME, case, system, too_full))
                continue
            samples = []
            for _ in range(repeat):
                with scratch.directory(system) as directory:
                    samples.append(spawn(system, directory, count, sizes.scale_query_ops))
            for metric, (unit, higher) in METRICS.items():
                if metric not in samples[0]:
                    continue
                if metric == "put rate until queryable" and system != "rocketstore":
                    continue
                values = [sample[metric] for sample in samples]
                rows.append(row(NAME, case, system, metric, unit, values, higher_is_better=higher))
            log.info(
                "scale %s %s: %.0f msg/s, p50 %s us, RSS %.0f MiB",
                case,
                system,
                samples[0]["put rate"],
                round(samples[0].get("key query p50", float("nan")), 1),
                samples[0]["peak RSS"],
            )
    return rows


if __name__ == "__main__":
    system_name, directory_name, messages, ops = json.loads(sys.argv[1])
    sys.stdout.write(json.dumps(child(system_name, directory_name, messages, ops)) + "\n")
