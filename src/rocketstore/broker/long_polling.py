"""Held pulls (PullRequestHoldService): a pull that finds nothing waits until a message
reaches its queue or its suspend time runs out.

Layer: broker. The store's dispatcher thread calls :meth:`PullWaiters.notify` after every
dispatched batch; that wakes every held pull in the event loop, and each one checks its own
queue's max offset, so a held pull is answered as soon as its message is dispatched.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from rocketstore.broker.timeouts import wait_event


class PullWaiters:
    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._event = asyncio.Event()
        self.held = 0  # pulls waiting right now (observability and tests)
        self.closed = False

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def notify(self, _dispatched_offset: int = 0) -> None:
        """Thread-safe: wake every held pull so it re-checks its queue."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # the loop closed since the check
            loop.call_soon_threadsafe(self._wake)

    def close(self) -> None:
        """Shutting down: answer every held pull now, hold no new one (call in the loop)."""
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        event, self._event = self._event, asyncio.Event()
        event.set()

    async def wait(self, has_new: Callable[[], bool], timeout_s: float) -> bool:
        """Wait until ``has_new()`` or ``timeout_s``; its last value."""
        deadline = time.monotonic() + timeout_s
        self.held += 1
        try:
            while True:
                event = self._event  # taken before the check: a wake in between is seen
                if has_new():
                    return True
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.closed:
                    return False
                if not await wait_event(event, remaining):
                    return has_new()
        finally:
            self.held -= 1
