"""A writer for the full-disk test (run as ``python -m tests.crash.disk_full_writer`` from
the project root, never collected by pytest).

Puts single messages, ASYNC_FLUSH, into a store on a small filesystem, printing ``ACK <n>``
for each acknowledged put and ``REFUSED <status>`` for each refused one. After a few
hundred puts it fills the rest of the filesystem with a ballast file, as another program
would: the CommitLog's current file has its blocks, the next index file has none, and with
``new-queue`` the messages after that go to a new queue, whose first file has none either.
It stops after a run of refusals and prints the store's state. Retention is told to leave
the full disk alone, so that the writes meet the full disk rather than a refusal at a
usage threshold. ``index-entries``: the index file's next entries, whose blocks are
reserved ahead of the writer in steps, meet the full disk in the middle of the file.
"""

from __future__ import annotations

import dataclasses
import os
import sys

from rocketstore import MessageStore, index_file
from rocketstore.errors import StoreError
from tests.crash.crash_writer import config, message

REFUSALS_TO_STOP = 200
FILL_AFTER = 300


def fill(path: str) -> None:
    """Write zeros to ``path`` until the filesystem has no block left."""
    chunk = bytes(64 * 1024)
    with open(path, "wb", buffering=0) as f:
        while True:
            try:
                f.write(chunk)
            except OSError:
                break
        while True:
            try:
                f.write(chunk[:512])
            except OSError:
                break


def main() -> None:
    root, case = sys.argv[1:3]
    settings = config("ASYNC_FLUSH").replace(
        disk_max_used_space_ratio=95,
        disk_space_clean_forcibly_ratio=100,
        disk_space_warning_level_ratio=100,
        clean_file_forcibly_enable=False,
    )
    if case == "index":
        # Queue files of 1,200 units (each allocated whole at its first unit, being under
        # the 32 KiB reserved ahead) do not roll before the index does (~340 messages a
        # file): the index meets the full disk first, whatever the timing.
        settings = settings.replace(mapped_file_size_consume_queue=1200 * 20)
    if case == "index-entries":
        # One index file of 100,000 entries, its entries given blocks 64 KiB (3,276
        # entries, about 1,100 messages) ahead of the writer: within a file the next
        # reservation meets the full disk before a CommitLog file (1 MiB, about 4,000
        # messages) or a queue file (1,200 units) rolls.
        index_file.ENTRIES_RESERVE_BYTES = 64 * 1024
        settings = settings.replace(
            mapped_file_size_consume_queue=1200 * 20,
            mapped_file_size_commit_log=1024 * 1024,
            max_index_num=100_000,
        )
    out = sys.stdout
    refused = 0
    n = 0
    store = MessageStore.open(root, settings)
    try:
        while refused < REFUSALS_TO_STOP:
            msg = message(n)
            if case == "new-queue" and n >= FILL_AFTER:
                msg = dataclasses.replace(msg, queue_id=3)
            result = store.put(msg)
            if result.ok:
                out.write(f"ACK {n}\n")
                refused = 0
            else:
                out.write(f"REFUSED {result.status.name}\n")
                refused += 1
            out.flush()
            n += 1
            if n == FILL_AFTER:
                # Files the dispatcher makes for the puts so far exist first (a lagging
                # dispatch would otherwise meet the full disk at a queue's first file).
                store.wait_dispatched()
                fill(os.path.join(os.path.dirname(os.path.abspath(root)), "ballast"))
        error = store.dispatch_error
        out.write(f"DISPATCH_ERROR {type(error).__name__ if error else None}\n")
        out.write(f"FLAGS {store.running_flags!r}\n")
        out.flush()
    finally:
        try:
            store.close()
        except (OSError, StoreError) as e:  # the checkpoint cannot be written on a full disk
            out.write(f"CLOSE_ERROR {e}\n")
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
