"""What a directory that should be a store lacks (layer: files; it lists the directory)."""

from __future__ import annotations

import os

from rocketstore.paths import CommitLogDirs, no_commitlog


def missing_commitlog(root: str, dirs: CommitLogDirs) -> str:
    """Why ``root`` has no CommitLog to read, for an error message (paths.no_commitlog,
    with the root's names, so a DLedger store is named as one)."""
    try:
        entries = os.listdir(root)
    except OSError:
        entries = []
    return no_commitlog(dirs, entries)
