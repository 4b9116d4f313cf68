"""A background pass every interval: RocketMQ's ServiceThread, as the timer and schedule
services run it.

Layer: services. ``PeriodicThread`` calls ``step`` every ``interval_s()`` seconds on one
daemon thread until ``stop``. A pass that fails with a passing error (a closed store, a
full disk: StoreError, OSError) is logged and retried at the next interval; anything else
ends the thread, as a bug should. ``Every`` says when work that runs less often than the
pass (a checkpoint, a clean-up) is due.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from rocketstore.errors import StoreError

log = logging.getLogger(__name__)


class Every:
    """True from ``due()`` at most once per ``seconds()`` (monotonic time), counted from
    construction and then from each True."""

    def __init__(self, seconds: Callable[[], float]) -> None:
        self.seconds = seconds
        self._last = time.monotonic()

    def due(self) -> bool:
        now = time.monotonic()
        if now - self._last < self.seconds():
            return False
        self._last = now
        return True


class PeriodicThread:
    """One daemon thread running ``step`` after every ``interval_s()`` (read each time: the
    settings may change while it runs) until ``stop``."""

    def __init__(
        self,
        name: str,
        interval_s: Callable[[], float],
        step: Callable[[], None],
    ) -> None:
        self.name = name
        self.interval_s = interval_s
        self.step = step
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def stopping(self) -> bool:
        """True once ``stop`` was called: a long pass may end early."""
        return self._stop.is_set()

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s()):
            try:
                self.step()
            except (StoreError, OSError) as e:
                # Passing: the next pass starts from where this one stopped (each service
                # moves its offsets only past what it finished).
                log.error("%s pass failed: %s", self.name, e)

    def stop(self) -> None:
        """Stop after the current pass and wait for it."""
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join()
            self._thread = None
