"""Progress of long work: one line per phase, redrawn in place on a terminal's stderr with
the share done, the amount, the rate and the time left ("scanning CommitLog:  42.0 %
1.6 GiB / 3.9 GiB  412.7 MiB/s  ETA 0:06"); silent when stderr is piped or redirected and
with ``--json`` (so scripts and ``--json`` consumers see nothing extra).

Layer: cli. Plain stderr writes; no other dependency.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO

# A line is redrawn at most this often (a scan calls advance per file chunk).
REDRAW_S = 0.2
# --json given: no progress at all (set by the cli group from its option).
_quiet = [False]


def set_quiet(quiet: bool) -> None:
    _quiet[0] = quiet


def format_amount(amount: float, unit: str) -> str:
    """Bytes in B/KiB/MiB/GiB; other units as counts with thousands separators."""
    if unit != "bytes":
        return f"{amount:,.0f}"
    for name, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if amount >= size:
            return f"{amount / size:,.1f} {name}"
    return f"{amount:,.0f} B"


def format_eta(seconds: float) -> str:
    whole = int(seconds + 0.5)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class Progress:
    """Counts work done toward ``total`` (bytes, units, records: the caller's choice) and,
    given a stream, draws the line."""

    def __init__(
        self,
        stream: IO[str] | None,
        total: int,
        label: str = "",
        *,
        unit: str = "bytes",
        clock: Callable[[], float] = time.monotonic,
    ):
        self._stream = stream
        self.total = total
        self.label = label
        self.unit = unit
        self.done = 0
        self._clock = clock
        self._started = clock()
        self._drawn_at: float | None = None

    def advance(self, amount: int) -> None:
        if amount <= 0:
            return
        self.done += amount
        if self._stream is not None:
            now = self._clock()
            if self._drawn_at is None or now - self._drawn_at >= REDRAW_S:
                self._draw(now)

    def move_to(self, done: int) -> None:
        """Set the absolute amount done (never moves backwards)."""
        self.advance(done - self.done)

    def line(self, now: float | None = None) -> str:
        """The progress line: label, share, amount of total, rate, then the time left (or,
        once done, the time taken)."""
        elapsed = max((self._clock() if now is None else now) - self._started, 1e-9)
        share = min(self.done / self.total, 1.0) if self.total > 0 else 1.0
        rate = self.done / elapsed
        amount = f"{format_amount(self.done, self.unit)} / {format_amount(self.total, self.unit)}"
        per_second = format_amount(rate, self.unit) + (
            "/s" if self.unit == "bytes" else f" {self.unit}/s"
        )
        if self.done >= self.total:
            tail = f"in {format_eta(elapsed)}"
        elif rate > 0:
            tail = f"ETA {format_eta((self.total - self.done) / rate)}"
        else:
            tail = "ETA --:--"
        return f"{self.label}: {share * 100:5.1f} %  {amount}  {per_second}  {tail}"

    def _draw(self, now: float) -> None:
        assert self._stream is not None
        self._drawn_at = now
        # \r back to the line's start, \x1b[K clears what a longer line left.
        self._stream.write("\r" + self.line(now) + "\x1b[K")
        self._stream.flush()

    def finish(self) -> None:
        """The last line, kept on screen."""
        if self._stream is not None:
            self._draw(self._clock())
            self._stream.write("\n")
            self._stream.flush()


def _is_terminal(stream: object) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def enabled(*, streams_stdout: bool = False) -> bool:
    """Draw only on a terminal stderr and without --json; a command that prints as it goes
    (``streams_stdout``) draws only when its stdout is redirected, so line and output never
    interleave."""
    if _quiet[0] or not _is_terminal(sys.stderr):
        return False
    return not (streams_stdout and _is_terminal(sys.stdout))


@contextmanager
def progress(
    total: int, label: str, *, streams_stdout: bool = False, unit: str = "bytes"
) -> Iterator[Progress]:
    """``with progress(total_bytes, "checking") as p: ... p.advance(n)``."""
    if total <= 0 or not enabled(streams_stdout=streams_stdout):
        yield Progress(None, total, label, unit=unit)
        return
    bar = Progress(sys.stderr, total, label, unit=unit)
    try:
        yield bar
    finally:
        bar.finish()


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
