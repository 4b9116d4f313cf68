"""How the server runs a request: at once up to its first real wait (``start_eagerly``,
Python 3.12's eager tasks for 3.11), then as a task; and a bulky request's place among its
connection's ``MAX_BULKY_PER_CONNECTION``, which a held pull gives up while it waits
(``parked``).

Layer: broker. asyncio and contextvars only; :mod:`rocketstore.broker.server` uses it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import AsyncIterator, Coroutine, Generator


class BulkyPlace:
    """A bulky request's place among its connection's MAX_BULKY_PER_CONNECTION."""

    def __init__(self, places: asyncio.Semaphore):
        self._places = places
        self.held = True

    def give_up(self) -> None:
        if self.held:
            self.held = False
            self._places.release()

    async def take(self) -> None:
        await self._places.acquire()
        self.held = True


# The place of the request the current task handles (each request runs in its own task).
current_place: contextvars.ContextVar[BulkyPlace | None] = contextvars.ContextVar(
    "rocketstore_bulky_place", default=None
)


class _Yield:
    """Awaiting it yields ``value`` (what a suspended coroutine yielded) to the task."""

    __slots__ = ("value",)

    def __init__(self, value: object):
        self.value = value

    def __await__(self) -> Generator[object, object, object]:
        return (yield self.value)


async def _resume(coro: Coroutine[object, object, None], yielded: object) -> None:
    """The rest of ``coro``, which ran until it first yielded ``yielded``, as a task's
    (the task waits on what the coroutine waits on, and passes results, exceptions and
    cancellation through to it)."""
    while True:
        try:
            sent = await _Yield(yielded)
        except BaseException as e:  # CancelledError included: the coroutine decides
            try:
                yielded = coro.throw(e)
            except StopIteration:
                return
        else:
            try:
                yielded = coro.send(sent)
            except StopIteration:
                return


def start_eagerly(
    coro: Coroutine[object, object, None],
) -> asyncio.Task[None] | None:
    """Run ``coro`` at once, in a copy of the current context, up to its first real wait;
    None if it finished without one (an ASYNC_FLUSH send, a pull of data in memory: no
    task, no loop turn), else the task that runs the rest in that same context. Python
    3.12's eager tasks, for 3.11 (a task per request was a fifth of a send's cost)."""
    context = contextvars.copy_context()
    try:
        yielded = context.run(coro.send, None)
    except StopIteration:
        return None
    return asyncio.get_running_loop().create_task(_resume(coro, yielded), context=context)


@contextlib.asynccontextmanager
async def parked() -> AsyncIterator[None]:
    """Around a wait that is not work (a held pull): the request's connection may have
    another bulky request worked on meanwhile; the place is taken back after."""
    place = current_place.get()
    if place is None:
        yield
        return
    place.give_up()
    # Not in a finally: a pull cancelled while held (its connection closed) must not wait
    # for a place it will never use.
    yield
    await place.take()
