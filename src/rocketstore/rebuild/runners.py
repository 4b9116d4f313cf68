"""Where the tasks run: in this process, or on a pool of local processes. (Spark's runner
lives in :mod:`rocketstore.spark.rebuild`, the only place that may import pyspark.)

Layer: rebuild. A runner maps a pass function over tasks and returns the results in task
order; ``on_done(i)`` is called as task ``i`` finishes (progress bars).
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, BrokenExecutor, Future, ProcessPoolExecutor, wait
from types import TracebackType
from typing import Any, Protocol, TypeVar

from rocketstore.errors import StoreError

T = TypeVar("T")
R = TypeVar("R")

OnDone = Callable[[int], None]


class RebuildFailedError(StoreError):
    """A rebuild task failed (or its worker died); the store's queues and index were left
    as they were."""


class TaskRunner(Protocol):
    name: str
    workers: int
    # Every task runs on this machine: intermediate files may stay in local scratch and
    # short steps run in the caller. Optional: a runner without it counts as not local.
    local: bool

    def map(
        self, fn: Callable[[T], R], tasks: Sequence[T], on_done: OnDone | None = None
    ) -> list[R]: ...


class SerialRunner:
    """Runs every task in the calling process (tests, tiny stores, debugging)."""

    name = "serial"
    workers = 1
    local = True

    def map(
        self, fn: Callable[[T], R], tasks: Sequence[T], on_done: OnDone | None = None
    ) -> list[R]:
        results = []
        for i, task in enumerate(tasks):
            results.append(fn(task))
            if on_done is not None:
                on_done(i)
        return results


class ProcessRunner:
    """A ``ProcessPoolExecutor`` with one worker per core, kept for the whole job so the
    workers' imports are paid once. Use as a context manager; as with any process pool, a
    script using it needs an ``if __name__ == "__main__":`` guard (workers re-import it)."""

    name = "local"
    local = True

    def __init__(self, workers: int | None = None):
        self.workers = workers or os.cpu_count() or 1
        self._pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> ProcessRunner:
        # forkserver: workers never inherit the caller's threads, sockets or locks (a
        # plain fork of a process holding, say, a py4j connection breaks that connection).
        context = multiprocessing.get_context("forkserver")
        self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=context)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def map(
        self, fn: Callable[[T], R], tasks: Sequence[T], on_done: OnDone | None = None
    ) -> list[R]:
        if self._pool is None:
            raise RuntimeError("ProcessRunner is used outside its `with` block")
        futures: dict[Future[Any], int] = {
            self._pool.submit(fn, task): i for i, task in enumerate(tasks)
        }
        results: list[Any] = [None] * len(tasks)
        pending = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                i = futures[future]
                try:
                    results[i] = future.result()
                except BrokenExecutor as e:
                    raise RebuildFailedError(f"a worker process died: {e}") from e
                if on_done is not None:
                    on_done(i)
        return results
