"""The systems under test, one adapter module each, behind one small interface.

Layer: benchmark adapters. Every module has ``NAME``, ``DURABILITY`` (what each flush mode
means for that system) and ``open(directory, durability) -> Adapter``; optional packages
are imported inside ``open`` so that a missing one becomes "skipped: not installed".
"""

from __future__ import annotations

import importlib
from types import ModuleType

from benchmarks.systems.base import Adapter, NotInstalledError

# Order is the order of the tables. "raw-file" is the machine's own limit at the same
# call sizes (write, plus fdatasync where the flush mode asks for it), not a store.
MODULES: dict[str, str] = {
    "rocketstore": "benchmarks.systems.rocketstore_system",
    "sqlite3": "benchmarks.systems.sqlite_system",
    "lmdb": "benchmarks.systems.lmdb_system",
    "diskcache.Index": "benchmarks.systems.diskcache_index_system",
    "diskcache.Deque": "benchmarks.systems.diskcache_deque_system",
    "persist-queue": "benchmarks.systems.persistqueue_system",
    "raw-file": "benchmarks.systems.raw_system",
}
STORES = [name for name in MODULES if name != "raw-file"]
# Systems that can look a message up by key.
KEYED = ("rocketstore", "sqlite3", "lmdb", "diskcache.Index")


def module(name: str) -> ModuleType:
    return importlib.import_module(MODULES[name])


def open_system(name: str, directory: str, durability: str) -> Adapter:
    """Open ``name`` in a fresh ``directory``; NotInstalledError when its package is missing."""
    adapter: Adapter = module(name).open(directory, durability)
    return adapter


def durability_notes() -> dict[str, dict[str, str]]:
    """What ASYNC_FLUSH and SYNC_FLUSH mean for each system (for the report)."""
    return {name: dict(module(name).DURABILITY) for name in MODULES}


__all__ = [
    "KEYED",
    "MODULES",
    "STORES",
    "Adapter",
    "NotInstalledError",
    "durability_notes",
    "open_system",
]
