"""Helpers shared by the workloads: which systems are installed, loading a data set.

Layer: benchmark workloads.
"""

from __future__ import annotations

import functools
import logging
import tempfile

from benchmarks.common import LOAD_BATCH, DataSet
from benchmarks.systems import Adapter, NotInstalledError, open_system

log = logging.getLogger(__name__)


@functools.cache
def missing(name: str) -> bool:
    """True when ``name``'s package is not installed (checked once per run)."""
    with tempfile.TemporaryDirectory() as directory:
        try:
            open_system(name, directory, "ASYNC_FLUSH").close()
        except NotInstalledError:
            log.warning("%s: not installed, skipped", name)
            return True
    return False


def load(adapter: Adapter, dataset: DataSet, count: int, batch: int = LOAD_BATCH) -> None:
    """Put ``count`` messages in batches, make them durable and queryable."""
    for items in dataset.batches(count, batch):
        adapter.put_batch(adapter.prepare(items))
    adapter.sync()
    adapter.wait_queryable()
