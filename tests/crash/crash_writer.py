"""A writer process for crash tests (run as a script, never collected by pytest).

Puts messages numbered from ``start`` and prints ``ACK <n>`` after each acknowledged put
(flushed to the pipe at once), until killed or until ``count`` messages were put. Modes:
``single`` (put), ``batch`` (put_batch) and ``submit`` (up to 8 submits in flight, each
acknowledged when its future completes, from the group commit thread with SYNC_FLUSH).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

from rocketstore import Message, MessageStore, PutResult, StoreConfig

TOPIC = "Crash"
# storePathCommitLog for the writer and the checks (a CommitLog over several paths).
PATHS_ENV = "ROCKETSTORE_CRASH_COMMITLOG_PATHS"
# The writers that import this module run as ``python -m tests.crash.<name>`` from here.
PROJECT_ROOT = Path(__file__).parents[2]


def config(flush_disk_type: str) -> StoreConfig:
    return StoreConfig(
        store_path_commit_log=os.environ.get(PATHS_ENV, ""),
        # Small enough that files roll over often, large enough that a few hundred kill
        # rounds stay well below the open-file limit (every mapping holds a descriptor).
        mapped_file_size_commit_log=256 * 1024,
        mapped_file_size_consume_queue=200 * 20,
        max_hash_slot_num=64,
        max_index_num=1024,
        flush_disk_type=flush_disk_type,
        flush_interval_commit_log=5,
        flush_interval_consume_queue=5,
        flush_consume_queue_thorough_interval=20,
        flush_commit_log_thorough_interval=20,
    )


def message(n: int) -> Message:
    body = (b"%d;" % n) * (n % 40 + 1)
    return Message(
        TOPIC,
        body,
        queue_id=n % 3,
        properties={"KEYS": f"key-{n} all", "UNIQ_KEY": f"{n:032X}", "N": str(n), "TAGS": "T"},
    )


def main() -> None:
    root, flush_disk_type, mode, start, count = sys.argv[1:6]
    n = int(start)
    end = n + int(count)
    out = sys.stdout
    in_flight = threading.Semaphore(8)
    printing = threading.Lock()

    def acknowledge(number: int) -> Callable[[Future[PutResult]], None]:
        def done(future: Future[PutResult]) -> None:
            if future.result().ok:
                with printing:
                    out.write(f"ACK {number}\n")
                    out.flush()
            in_flight.release()

        return done

    with MessageStore.open(root, config(flush_disk_type)) as store:
        print("READY", flush=True)
        while n < end:
            if mode == "batch":
                group = [message(i) for i in range(n, min(end, n + 1 + n % 7))]
                results = store.put_batch(group)
                acked = [m.properties["N"] for m, r in zip(group, results, strict=True) if r.ok]
                out.write("".join(f"ACK {a}\n" for a in acked))
                out.flush()
                n += len(group)
            elif mode == "submit":
                in_flight.acquire()
                store.submit(message(n)).add_done_callback(acknowledge(n))
                n += 1
            else:
                if store.put(message(n)).ok:
                    out.write(f"ACK {n}\n")
                    out.flush()
                n += 1
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
