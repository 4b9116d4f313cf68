"""Recovery (rocketstore): time to reopen after a crash, per GiB of CommitLog.

Layer: benchmark workload. A child process puts 1 KiB messages under sustained load and
is SIGKILLed once the CommitLog holds the target bytes (no clean shutdown: the abort file
stays, the checkpoint is stale, queues and index lag). The parent times
``MessageStore.open`` (CRC-checking scan, truncation, re-dispatch) and, as the baseline,
reading and CRC-ing the same CommitLog bytes with ``zlib.crc32``. Both run with the bytes
in the page cache, as after a process crash.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time

from benchmarks.common import GIB, MIB, Row, Scratch, Sizes, row
from benchmarks.machine import read_and_crc

log = logging.getLogger(__name__)

NAME = "recovery"
SYSTEM = "rocketstore"
BODY = 1024
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def crash_writer(directory: str, target: int) -> int:
    """Run the writer until ``target`` bytes, SIGKILL it; return the offset it reported."""
    env = dict(os.environ, PYTHONPATH=REPO_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "benchmarks.workloads.recovery_writer",
            directory,
            str(target),
            str(BODY),
        ],
        stdout=subprocess.PIPE,
        env=env,
        cwd=REPO_ROOT,
    )
    assert child.stdout is not None
    line = child.stdout.readline().decode()
    child.send_signal(signal.SIGKILL)
    child.wait()
    if not line.startswith("ready"):
        raise RuntimeError(f"recovery writer failed (exit {child.returncode})")
    return int(line.split()[1])


def one_crash(scratch: Scratch, target: int) -> dict[str, float]:
    from rocketstore import MessageStore, StoreConfig
    from rocketstore.paths import ABORT_FILE, commitlog_dir

    with scratch.directory(SYSTEM) as directory:
        crash_writer(directory, target)
        if not os.path.exists(os.path.join(directory, ABORT_FILE)):
            raise RuntimeError("the writer left no abort file: not a crash")
        start = time.perf_counter()
        store = MessageStore.open(directory, StoreConfig())
        seconds = time.perf_counter() - start
        report = store.recovery_report
        end = report.commit_log_end
        redispatched = report.redispatched_records
        file_size = store.commitlog.file_size
        store.close()
        files = sorted(os.listdir(commitlog_dir(directory)))
        spans = []
        for name in files:
            begin = int(name)
            if begin < end:
                path = os.path.join(commitlog_dir(directory), name)
                spans.append((path, min(file_size, end - begin)))
        baseline = sorted(read_and_crc(spans) for _ in range(3))[1]  # median of 3
    gib = end / GIB
    return {
        "reopen time": seconds,
        "reopen time per GiB": seconds / gib,
        "read+CRC time per GiB": baseline / gib,
        "CommitLog": end / MIB,
        "re-dispatched": redispatched,
    }


UNITS = {
    "reopen time": "s",
    "reopen time per GiB": "s/GiB",
    "read+CRC time per GiB": "s/GiB",
}


def run(sizes: Sizes, scratch: Scratch) -> list[Row]:
    samples = [one_crash(scratch, sizes.recovery_bytes) for _ in range(sizes.repeat)]
    case = f"{BODY} B messages, ~{sizes.recovery_bytes // MIB} MiB CommitLog, SIGKILL"
    rows = []
    for metric, unit in UNITS.items():
        system = "read+CRC (zlib)" if metric.startswith("read") else SYSTEM
        values = [sample[metric] for sample in samples]
        rows.append(
            row(
                NAME,
                case,
                system,
                metric,
                unit,
                values,
                higher_is_better=False,
                commit_log_mib=round(samples[0]["CommitLog"], 1),
                redispatched_records=int(samples[0]["re-dispatched"]),
            )
        )
    log.info(
        "recovery: %.2f s/GiB (read+CRC %.2f s/GiB)",
        samples[0]["reopen time per GiB"],
        samples[0]["read+CRC time per GiB"],
    )
    return rows
