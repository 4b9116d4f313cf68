"""Shared pieces of the benchmark suite: run sizes, the data set, timing, result rows.

Layer: benchmark support. No system-specific code here (that is ``systems/``), no
workload logic (``workloads/``), no output formats (``report.py``). Benchmarks are
scripts: they measure and write results; they never assert timings.
"""

from __future__ import annotations

import contextlib
import gc
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

TOPIC = "BenchTopic"
QUEUES = 4
BODY_SIZES = (100, 1024)
BATCH_SIZES = (32, 256, 1024)
FLUSH_MODES = ("ASYNC_FLUSH", "SYNC_FLUSH")
# Scale counts from this one up run only for these systems, unless --scale-all-systems:
# the others put 15-30 k msg/s, and their 10^6 step alone took 165 s of a 948 s full run
# (2026-11-27, 2-core EPYC) against the 15 minutes.
SCALE_BIG_COUNT = 1_000_000
SCALE_BIG_SYSTEMS = ("rocketstore", "sqlite3", "lmdb")
# Batch used to load data sets for the read workloads (not itself measured).
LOAD_BATCH = 1024
MIB = 1024 * 1024
GIB = 1024 * MIB


@dataclass(frozen=True)
class Sizes:
    """How much work each workload does; ``QUICK`` is the CI smoke test."""

    quick: bool
    repeat: int
    put_messages: int  # messages per put measurement
    put_repeat: int  # repetitions of each put case (most of its cases last well under 0.1 s)
    put_sync_calls: int  # put calls per SYNC_FLUSH measurement (one flush each)...
    put_sync_messages: int  # ...up to this many messages
    data_messages: int  # data set for consume and query
    # A consume scan that does not consume is repeated (beyond ``repeat``, at most 15
    # times) until this many seconds were measured: a scan of the data set takes 35-70 ms
    # for rocketstore, sqlite3 and lmdb, and three of them moved the ratio by 2x here.
    scan_seconds: float
    query_ops: int  # lookups per query measurement
    dispatch_messages: int
    lag_messages: int
    sync_lag_calls: int  # SYNC_FLUSH put_batch calls per visibility-lag measurement
    recovery_bytes: int  # CommitLog bytes written before the crash
    raw_bytes: int  # file size for the raw bandwidth figures
    fsync_ops: int
    scale_counts: tuple[int, ...]
    scale_query_ops: int
    rebuild_bytes: tuple[int, ...] = (2 * GIB,)  # CommitLog sizes for the rebuild workload
    scale_all_systems: bool = False  # every system at every scale count


FULL = Sizes(
    quick=False,
    repeat=3,
    # Five: a put case lasts 10-100 ms, and a median of three moved a ratio by 20 %.
    put_repeat=5,
    put_messages=20_000,
    # 200 syncs: at 100 they took 20-60 ms, of which a fresh store's start-up (its first
    # index and queue files, ~15 ms) was a third, and one of the VM disk's millisecond
    # stalls moved a ratio by 10 %. Batch 1024 was also cut to 20 calls by put_messages.
    put_sync_calls=200,
    put_sync_messages=100_000,
    data_messages=50_000,
    scan_seconds=1.0,
    query_ops=2_000,
    dispatch_messages=50_000,
    lag_messages=400_000,  # > 64 MiB at 100 B: long enough for the writer to yield
    sync_lag_calls=1_000,
    recovery_bytes=256 * MIB,
    raw_bytes=256 * MIB,
    fsync_ops=200,
    # 10^6 and 10^7 run once, for SCALE_BIG_SYSTEMS only: 10^7 takes about 185 s on 2
    # cores (it was opt-in while rocketstore's put ran in Python, 7 minutes on its own).
    scale_counts=(100_000, 1_000_000, 10_000_000),
    scale_query_ops=2_000,
)

QUICK = Sizes(
    quick=True,
    repeat=1,
    put_repeat=1,
    put_messages=1_000,
    put_sync_calls=10,
    put_sync_messages=1_000,
    data_messages=2_000,
    scan_seconds=0.0,
    query_ops=100,
    dispatch_messages=5_000,
    lag_messages=5_000,
    sync_lag_calls=20,
    recovery_bytes=4 * MIB,
    raw_bytes=8 * MIB,
    fsync_ops=10,
    scale_counts=(1_000, 4_000),
    scale_query_ops=50,
    rebuild_bytes=(8 * MIB,),
)


# --- the data set -----------------------------------------------------------------------


class Item(NamedTuple):
    """One message, the same for every system: a unique key, a queue and a body. A tuple:
    a frozen dataclass took 4.7 us a message to make, 140 s of a full run's 10^7 steps."""

    seq: int
    key: str
    uniq_key: str
    queue_id: int
    body: bytes


class DataSet:
    """Deterministic messages of one body size; item ``i`` is the same in every run."""

    def __init__(self, body_size: int, seed: int = 7):
        self.body_size = body_size
        # Bodies are windows into one random block: distinct, incompressible, cheap.
        self._pool = random.Random(seed).randbytes(body_size + 4096)

    def item(self, i: int) -> Item:
        return self.items(i, i + 1)[0]

    def items(self, start: int, stop: int) -> list[Item]:
        pool, size = self._pool, self.body_size
        # key_of(i) inline: the calls were a third of the cost.
        return [
            Item(i, f"key-{i:010d}", f"{i:032X}", i % QUEUES, pool[w : w + size])
            for i in range(start, stop)
            for w in ((i * 131) % 4096,)
        ]

    def batches(self, count: int, batch: int, start: int = 0) -> Iterator[list[Item]]:
        for first in range(start, start + count, batch):
            yield self.items(first, min(first + batch, start + count))


def key_of(i: int) -> str:
    return f"key-{i:010d}"


def sample_indexes(count: int, population: int, seed: int) -> list[int]:
    """``count`` indexes into ``population`` (distinct when possible)."""
    rng = random.Random(seed)
    if count <= population:
        return rng.sample(range(population), count)
    return [rng.randrange(population) for _ in range(count)]


# --- statistics -------------------------------------------------------------------------


@dataclass
class Stat:
    """Median, min and max over repetitions (values kept for the JSON)."""

    median: float
    min: float
    max: float
    values: list[float]

    @classmethod
    def of(cls, values: list[float]) -> Stat:
        if not values:
            raise ValueError("no values")
        return cls(statistics.median(values), min(values), max(values), list(values))


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..100) of unsorted values."""
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1))))
    return ordered[rank]


def settle_heap() -> None:
    """Run the cycle collector now, before a timed region.

    Preparing a run's items (tens of thousands of objects) leaves a full collection of
    the whole heap due; without this, the first system in the timed region to allocate
    a tracked object pays for it (25 ms, a third of a 1,024-message put run), and a
    system that allocates nothing never does."""
    gc.collect()


def timed(fn: Callable[[], object]) -> float:
    """Seconds taken by ``fn()``."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


# --- results ----------------------------------------------------------------------------

OK = "ok"
NOT_INSTALLED = "skipped: not installed"


@dataclass
class Row:
    """One figure: a workload's case for one system (or a skip with its reason)."""

    workload: str
    case: str
    system: str
    metric: str
    unit: str
    stat: Stat | None = None
    status: str = OK
    note: str = ""
    higher_is_better: bool = True
    extra: dict[str, float | int | str] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        data = asdict(self)
        return data


def row(
    workload: str,
    case: str,
    system: str,
    metric: str,
    unit: str,
    values: list[float],
    *,
    higher_is_better: bool = True,
    note: str = "",
    **extra: float | int | str,
) -> Row:
    return Row(
        workload,
        case,
        system,
        metric,
        unit,
        Stat.of(values),
        higher_is_better=higher_is_better,
        note=note,
        extra=dict(extra),
    )


def skipped(workload: str, case: str, system: str, reason: str) -> Row:
    return Row(workload, case, system, "-", "-", None, status=reason)


# --- scratch directories ----------------------------------------------------------------


class Scratch:
    """Fresh directories on the same disk as the results, removed after use."""

    def __init__(self, out_dir: str):
        self.base = os.path.join(os.path.abspath(out_dir), ".scratch")
        os.makedirs(self.base, exist_ok=True)

    @contextlib.contextmanager
    def directory(self, label: str) -> Iterator[str]:
        path = tempfile.mkdtemp(prefix=f"{label}-", dir=self.base)
        try:
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)

    def cleanup(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)


def evict_page_cache(directory: str) -> None:
    """Ask the kernel to drop the cached pages of every file under ``directory``.

    Best effort and unprivileged: ``posix_fadvise(DONTNEED)`` drops clean pages that no
    process has mapped; the caller closes or unmaps first.
    """
    for parent, _dirs, names in os.walk(directory):
        for name in names:
            path = os.path.join(parent, name)
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                continue
            try:
                os.fdatasync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            except OSError:
                pass
            finally:
                os.close(fd)


def directory_bytes(directory: str) -> int:
    """Bytes allocated on disk under ``directory`` (sparse files count what they use)."""
    total = 0
    for parent, _dirs, names in os.walk(directory):
        for name in names:
            with contextlib.suppress(OSError):
                total += os.stat(os.path.join(parent, name)).st_blocks * 512
    return total


def local_spark(app_name: str, driver_memory: str, **conf: str) -> Any:
    """A Spark ``local[2]`` session on loopback whose Python workers run this interpreter,
    with the rocketstore source registered; ``conf`` adds settings (dotted names)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from rocketstore.spark import register

    builder = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", driver_memory)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark
