"""Child process for the recovery workload: put 1 KiB messages in batches of 256 until the
CommitLog holds the target bytes, say so on stdout, and keep putting until killed.

Run as ``python -m benchmarks.workloads.recovery_writer DIR TARGET_BYTES BODY_BYTES``.
"""

from __future__ import annotations

import sys

from benchmarks.common import DataSet
from benchmarks.systems.rocketstore_system import RocketstoreAdapter

BATCH = 256


def main(argv: list[str]) -> None:
    directory, target, body = argv[0], int(argv[1]), int(argv[2])
    dataset = DataSet(body)
    adapter = RocketstoreAdapter(directory, "ASYNC_FLUSH")
    store = adapter.store
    told = False
    start = 0
    while True:  # until SIGKILL
        adapter.put_batch(adapter.prepare(dataset.items(start, start + BATCH)))
        start += BATCH
        if not told and store.max_commit_log_offset() >= target:
            sys.stdout.write(f"ready {store.max_commit_log_offset()}\n")
            sys.stdout.flush()
            told = True


if __name__ == "__main__":
    main(sys.argv[1:])
