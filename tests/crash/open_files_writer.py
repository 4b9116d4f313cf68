"""A writer under a small open-file limit (run as a script, never collected by pytest).

Sets RLIMIT_NOFILE to ``limit``, then puts messages into a store of 64 KiB CommitLog
files until ``files`` of them exist, closes it, reopens it (recovery maps every file) and
opens it read-only beside nothing, printing ``FILES <n>``, ``OPEN_FDS <n>`` and ``DONE``.
An EMFILE anywhere (the put, the dispatcher, the reopen) fails the run.
"""

from __future__ import annotations

import os
import resource
import sys

from rocketstore import GetStatus, Message, MessageStore, StoreConfig

TOPIC = "Fds"
BODY = bytes(8 * 1024)  # 7 messages to a 64 KiB file


def config(flush_disk_type: str) -> StoreConfig:
    return StoreConfig(
        mapped_file_size_commit_log=64 * 1024,
        mapped_file_size_consume_queue=20 * 1000,
        flush_disk_type=flush_disk_type,
    )


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else -1


def main() -> None:
    root, flush_disk_type, limit, files = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:5])
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
    settings = config(flush_disk_type)
    n = 0
    commitlog = os.path.join(root, "commitlog")
    with MessageStore.open(root, settings) as store:
        # (commitlog/ appears with the first file, which the prefaulter may make a little
        # after the open returns)
        while not os.path.isdir(commitlog) or len(os.listdir(commitlog)) < files:
            for _ in range(70):
                assert store.put(Message(TOPIC, BODY, queue_id=n % 2)).ok, n
                n += 1
        store.wait_dispatched()
        assert store.dispatch_error is None, store.dispatch_error
        print(f"FILES {len(os.listdir(os.path.join(root, 'commitlog')))}", flush=True)
        print(f"OPEN_FDS {open_fds()}", flush=True)
    with MessageStore.open(root, settings) as store:  # recovery maps them all
        assert store.put(Message(TOPIC, BODY, queue_id=0)).ok
        n += 1
        print(f"OPEN_FDS {open_fds()}", flush=True)
    with MessageStore.open(root, settings, read_only=True) as store:
        got = store.get_messages("reader", TOPIC, 1, 0, 32)
        assert got.status is GetStatus.FOUND, got.status
        print(f"OPEN_FDS {open_fds()}", flush=True)
    print(f"PUT {n}", flush=True)
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
