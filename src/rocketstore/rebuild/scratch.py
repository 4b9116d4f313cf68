"""Scratch space for the scan's spills when every task runs on this machine.

Layer: rebuild. The spills (queue units and index entries, about 0.1-0.6 bytes per
CommitLog byte) are written once and read once within the job. When the runner's tasks all
run here (a process pool, a local Spark master) they go to RAM-backed ``/dev/shm`` if it
has room to spare, which saves the filesystem's block allocation and journaling of files
deleted seconds later; otherwise (a cluster, or no room) they stay in the work directory
inside the store, which every executor must see anyway.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile

SCRATCH_ROOT = "/dev/shm"
PREFIX = "rocketstore-rebuild-"
# Spill bytes per CommitLog byte, at most: a 32-byte unit per record and 24 bytes per
# index key, over records of about 150 bytes or more.
SPILL_SHARE = 0.6


def make_scratch(commitlog_bytes: int, root: str | None = None) -> str | None:
    """A new scratch directory under ``root``, or None when ``root`` is missing, not
    writable or has less than twice the spills' worst-case size free. Scratch left by
    rebuilds whose process is gone is removed first."""
    root = root or SCRATCH_ROOT
    if not os.path.isdir(root) or not os.access(root, os.W_OK):
        return None
    clear_dead_scratch(root)
    if commitlog_bytes * SPILL_SHARE * 2 > shutil.disk_usage(root).free:
        return None
    return tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=root)


def clear_dead_scratch(root: str) -> list[str]:
    """Remove scratch directories of rebuilds whose process no longer runs (killed, so
    their ``finally`` never ran): RAM is not given back otherwise."""
    removed = []
    with contextlib.suppress(OSError):
        for name in os.listdir(root):
            if not name.startswith(PREFIX):
                continue
            pid = name[len(PREFIX) :].split("-", 1)[0]
            if pid.isdigit() and not _alive(int(pid)):
                shutil.rmtree(os.path.join(root, name), ignore_errors=True)
                removed.append(name)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True
