"""The machine's own limits, measured on the disk that holds the results.

Layer: benchmark workload (no store). Sequential write + flush bandwidth through mmap and
through write + fdatasync, fsync latency of a 4 KiB append, zlib.crc32 throughput and
page-cache read bandwidth. The targets compare rocketstore with these figures.
"""

from __future__ import annotations

import logging
import mmap
import os
import time
import zlib

from benchmarks.common import MIB, Row, Scratch, Sizes, percentile, row

log = logging.getLogger(__name__)

NAME = "machine"
CHUNK = MIB


def _chunk() -> bytes:
    return os.urandom(CHUNK)


def mmap_write_flush(directory: str, size: int) -> float:
    """MiB/s of copying into a fresh pre-sized mapping plus one msync (MappedFile's way)."""
    path = os.path.join(directory, "mmap.bin")
    data = _chunk()
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.ftruncate(fd, size)
        mm = mmap.mmap(fd, size, access=mmap.ACCESS_WRITE)
    finally:
        os.close(fd)
    start = time.perf_counter()
    for position in range(0, size, CHUNK):
        mm[position : position + CHUNK] = data
    mm.flush()
    seconds = time.perf_counter() - start
    mm.close()
    os.remove(path)
    return size / MIB / seconds


def write_fdatasync(directory: str, size: int) -> float:
    """MiB/s of sequential 1 MiB writes plus one fdatasync."""
    path = os.path.join(directory, "write.bin")
    data = _chunk()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        start = time.perf_counter()
        for _ in range(0, size, CHUNK):
            os.write(fd, data)
        os.fdatasync(fd)
        seconds = time.perf_counter() - start
    finally:
        os.close(fd)
    os.remove(path)
    return size / MIB / seconds


def fsync_latencies_us(directory: str, count: int) -> list[float]:
    """Latency of appending 4 KiB and fsyncing it, ``count`` times."""
    path = os.path.join(directory, "fsync.bin")
    block = os.urandom(4096)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    latencies = []
    try:
        for _ in range(count):
            start = time.perf_counter()
            os.write(fd, block)
            os.fsync(fd)
            latencies.append((time.perf_counter() - start) * 1e6)
    finally:
        os.close(fd)
    os.remove(path)
    return latencies


def crc32_throughput(size: int) -> float:
    """MiB/s of zlib.crc32 over 1 MiB buffers."""
    data = _chunk()
    crc = 0
    start = time.perf_counter()
    for _ in range(0, size, CHUNK):
        crc = zlib.crc32(data, crc)
    return size / MIB / (time.perf_counter() - start)


def page_cache_read(directory: str, size: int) -> float:
    """MiB/s of reading a file already in the page cache into one reused buffer."""
    path = os.path.join(directory, "read.bin")
    data = _chunk()
    with open(path, "wb") as f:
        for _ in range(0, size, CHUNK):
            f.write(data)
    buffer = bytearray(CHUNK)
    with open(path, "rb", buffering=0) as f:
        while f.readinto(buffer):  # warm the cache
            pass
        f.seek(0)
        start = time.perf_counter()
        while f.readinto(buffer):
            pass
        seconds = time.perf_counter() - start
    os.remove(path)
    return size / MIB / seconds


def read_and_crc(paths_and_lengths: list[tuple[str, int]]) -> float:
    """Seconds to read the first ``length`` bytes of each file and CRC them (recovery's
    baseline: the least work that still looks at every byte)."""
    buffer = bytearray(CHUNK)
    view = memoryview(buffer)
    start = time.perf_counter()
    crc = 0
    for path, length in paths_and_lengths:
        with open(path, "rb", buffering=0) as f:
            left = length
            while left > 0:
                got = f.readinto(view[: min(CHUNK, left)])
                if not got:
                    break
                crc = zlib.crc32(view[:got], crc)
                left -= got
    return time.perf_counter() - start


def run(sizes: Sizes, scratch: Scratch) -> list[Row]:
    rows: list[Row] = []
    size = sizes.raw_bytes
    case = f"{size // MIB} MiB"
    # The write bandwidths are the baselines of put targets, and on a VM's disk they swing
    # threefold between repetitions (mmap write+flush: 380, 1,111 and 452 MiB/s in one
    # run): they get as many repetitions as the puts they are compared with.
    bandwidth_repeat = max(sizes.repeat, sizes.put_repeat)
    with scratch.directory("machine") as directory:
        values = [mmap_write_flush(directory, size) for _ in range(bandwidth_repeat)]
        rows.append(row(NAME, case, "mmap write+flush", "bandwidth", "MiB/s", values))
        values = [write_fdatasync(directory, size) for _ in range(bandwidth_repeat)]
        rows.append(row(NAME, case, "write+fdatasync", "bandwidth", "MiB/s", values))
        p50s, p99s = [], []
        for _ in range(sizes.repeat):
            latencies = fsync_latencies_us(directory, sizes.fsync_ops)
            p50s.append(percentile(latencies, 50))
            p99s.append(percentile(latencies, 99))
        ops = f"4 KiB x {sizes.fsync_ops}"
        rows.append(row(NAME, ops, "fsync", "p50 latency", "us", p50s, higher_is_better=False))
        rows.append(row(NAME, ops, "fsync", "p99 latency", "us", p99s, higher_is_better=False))
        values = [crc32_throughput(size) for _ in range(sizes.repeat)]
        rows.append(row(NAME, case, "zlib.crc32", "throughput", "MiB/s", values))
        values = [page_cache_read(directory, size) for _ in range(sizes.repeat)]
        rows.append(row(NAME, case, "page-cache read", "bandwidth", "MiB/s", values))
    for r in rows:
        assert r.stat is not None
        log.info("machine: %s %s %.1f %s", r.system, r.metric, r.stat.median, r.unit)
    return rows
