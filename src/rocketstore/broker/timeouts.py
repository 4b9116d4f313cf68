"""Waiting with a timeout without losing a cancellation, and the one background task of a
broker service.

Layer: broker (asyncio helpers; imports nothing of the broker). Python 3.11's
``asyncio.wait_for`` returns the awaited result when its task is cancelled just as that
result arrives, and the cancellation is lost (CPython gh-86296, fixed in 3.12). A loop
around it then runs on after its task was cancelled, and whoever awaits that task hangs:
a broker stop waited the full 30 s registration interval when a topic created just before
it had woken the registrar. ``asyncio.timeout`` counts cancellations and lets an outside
one through, so every timed wait in the broker goes through here.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def wait_event(event: asyncio.Event, timeout_s: float) -> bool:
    """Wait until ``event`` is set or ``timeout_s`` passes; whether it is set."""
    try:
        async with asyncio.timeout(timeout_s):
            await event.wait()
    except TimeoutError:
        return event.is_set()
    return True


async def within(awaitable: Awaitable[T], timeout_s: float) -> T:
    """``await awaitable``, raising ``TimeoutError`` after ``timeout_s``."""
    async with asyncio.timeout(timeout_s):
        return await awaitable


class BackgroundLoop:
    """A service whose work is one asyncio task running :meth:`_run` (registration, the
    replication slave, its metadata sync): started once, cancelled and awaited by stop."""

    _task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
