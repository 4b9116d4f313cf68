"""A progress bar for long scans: drawn on stderr when stderr is a terminal, silent when
it is piped or redirected (so scripts and ``--json`` consumers see nothing extra).

Layer: cli. Wraps ``click.progressbar``; no other dependency.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click


class Progress:
    """Counts work done toward ``total`` (bytes, units, records: the caller's choice)."""

    def __init__(self, bar: Any | None, total: int):
        self._bar = bar
        self.total = total
        self.done = 0

    def advance(self, amount: int) -> None:
        if amount <= 0:
            return
        self.done += amount
        if self._bar is not None:
            self._bar.update(amount)

    def move_to(self, done: int) -> None:
        """Set the absolute amount done (never moves backwards)."""
        self.advance(done - self.done)


def _is_terminal(stream: object) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def enabled(*, streams_stdout: bool = False) -> bool:
    """Draw only on a terminal stderr; a command that prints as it goes (``streams_stdout``)
    draws only when its stdout is redirected, so bar and output never interleave."""
    if not _is_terminal(sys.stderr):
        return False
    return not (streams_stdout and _is_terminal(sys.stdout))


@contextmanager
def progress(total: int, label: str, *, streams_stdout: bool = False) -> Iterator[Progress]:
    """``with progress(total_bytes, "checking") as p: ... p.advance(n)``."""
    if total <= 0 or not enabled(streams_stdout=streams_stdout):
        yield Progress(None, total)
        return
    with click.progressbar(
        length=total, label=label, file=sys.stderr, show_eta=True, show_percent=True
    ) as bar:
        yield Progress(bar, total)


# The store's recovery reports its slow phases here (rocketstore.store.opening).
RECOVERY_PROGRESS_LOGGER = "rocketstore.store.opening.progress"


def show_recovery_progress(*, as_json: bool) -> None:
    """On a terminal (and without ``--json``), print the phase lines of a slow recovery
    when a command opens a store as its writer: "rocketstore: recovery: ... in 12.3 s
    (410 MiB/s)"."""
    if as_json or not enabled():
        return
    logger = logging.getLogger(RECOVERY_PROGRESS_LOGGER)
    if logger.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("rocketstore: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
