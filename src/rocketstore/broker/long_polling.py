"""Held pulls (PullRequestHoldService): a pull that finds nothing waits until a message
reaches its queue or its suspend time runs out.

Layer: broker. Held pulls are kept per queue (RocketMQ's ``topic@queueId`` table). The
store's dispatcher thread reports the queues each dispatched run reached
(:meth:`PullWaiters.watch`), and only the pulls held on those queues are checked and woken:
waking every held pull on every dispatch made 10,000 idle long-polls of one topic cut
another topic's producer to a few messages a second. :meth:`PullWaiters.check_held`, run
every few seconds as RocketMQ's hold service does, catches anything a report missed.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from rocketstore.format.multi_dispatch import extra_units
from rocketstore.store import DispatchRun, MessageStore

QueueKey = tuple[str, int]  # (topic, queue id)

# PullRequestHoldService's pass over every held pull while long polling is on.
HOLD_CHECK_INTERVAL_MS = 5_000


@dataclass(eq=False)
class _HeldPull:
    has_new: Callable[[], bool]
    woken: bool = False
    # What the pull awaits while held: a future, not asyncio.timeout around an Event,
    # because a pull may be running in its connection's read loop task when it is held
    # (server.start_eagerly), and asyncio.timeout would cancel that task on expiry.
    waiter: asyncio.Future[None] | None = None

    def wake(self) -> None:
        self.woken = True
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    async def woken_within(self, timeout_s: float) -> bool:
        """Wait until woken or ``timeout_s``; whether it was woken. A cancellation of the
        awaiting task reaches it (the future it awaits is cancelled)."""
        if self.woken:
            return True
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self.waiter = waiter
        expiry = loop.call_later(timeout_s, _expire, waiter)
        try:
            await waiter
        finally:
            expiry.cancel()
            self.waiter = None
        return self.woken


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class PullWaiters:
    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._held: dict[QueueKey, set[_HeldPull]] = {}
        # Queues the dispatcher thread reported since the loop last looked; the lock and
        # the flag make one loop callback serve any number of reports.
        self._arrived: set[QueueKey] = set()
        self._arrived_lock = threading.Lock()
        self._wake_scheduled = False
        self._watched: MessageStore | None = None
        self.closed = False

    @property
    def held(self) -> int:
        """Pulls waiting right now (observability and tests)."""
        return sum(len(pulls) for pulls in self._held.values())

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        with self._arrived_lock:
            self._wake_scheduled = False  # a callback scheduled in an earlier loop is gone

    def arrived(self, keys: Iterable[QueueKey]) -> None:
        """Thread-safe: messages reached these queues; their held pulls re-check."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        with self._arrived_lock:
            self._arrived.update(keys)
            if self._wake_scheduled or not self._arrived:
                return
            self._wake_scheduled = True
        with contextlib.suppress(RuntimeError):  # the loop closed since the check
            loop.call_soon_threadsafe(self._wake_arrived)

    def _wake_arrived(self) -> None:
        with self._arrived_lock:
            keys, self._arrived = self._arrived, set()
            self._wake_scheduled = False
        for key in keys:
            self._wake(self._held.get(key, ()))

    def check_held(self) -> None:
        """Wake every held pull whose queue has grown (RocketMQ's checkHoldRequest)."""
        for pulls in list(self._held.values()):
            self._wake(pulls)

    @staticmethod
    def _wake(pulls: Iterable[_HeldPull]) -> None:
        # The check here, not in the pull's task: a queue with 1,000 pulls held at its end
        # costs 1,000 offset lookups, not 1,000 task switches, when nothing new is there.
        for pull in list(pulls):
            if not pull.woken and pull.has_new():
                pull.wake()

    def watch(self, store: MessageStore) -> None:
        """Have the store's dispatcher report the queues of every run it dispatches (once
        per store, however often it is called)."""
        if self._watched is store:
            return
        self._watched = store
        config = store.config

        def report(run: DispatchRun) -> None:
            # (Called once the units are written, so a woken pull finds its message.)
            if not self._held:
                # No pull held (a slave being filled, a producer-only broker): nothing to
                # wake, and a pull held from now on checks after these units are there.
                return
            self.arrived(
                arrived_queues(
                    run, multi_dispatch=config.enable_multi_dispatch, enable_lmq=config.enable_lmq
                )
            )

        store.add_dispatch_listener(report)

    def close(self) -> None:
        """Shutting down: answer every held pull now, hold no new one (call in the loop)."""
        self.closed = True
        for pulls in self._held.values():
            for pull in pulls:
                pull.wake()

    async def wait(self, key: QueueKey, has_new: Callable[[], bool], timeout_s: float) -> bool:
        """Wait until ``has_new()`` (checked when ``key``'s queue gets messages) or
        ``timeout_s``; its last value."""
        pull = _HeldPull(has_new)
        # Held before the first check: a report landing after it finds this pull.
        self._held.setdefault(key, set()).add(pull)
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                if has_new():
                    return True
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.closed:
                    return False
                if not await pull.woken_within(remaining):
                    return has_new()
                pull.woken = False
        finally:
            pulls = self._held.get(key)
            if pulls is not None:
                pulls.discard(pull)
                if not pulls:
                    del self._held[key]


def arrived_queues(run: DispatchRun, *, multi_dispatch: bool, enable_lmq: bool) -> set[QueueKey]:
    """The queues a dispatched run adds units to: each record's own, and with multi-dispatch
    the ones its INNER_MULTI_DISPATCH names (RocketMQ's notifyMessageArrive4MultiQueue)."""
    records = run.records
    # One (topic id, queue id) pair per int64, so numpy finds the few distinct queues of a
    # run of thousands of records without a Python step per record.
    packed = np.unique((records.topic_id << 32) | (records.queue_id & 0xFFFFFFFF))
    names = run.topics.names
    keys: set[QueueKey] = set()
    for value in packed.tolist():
        topic_id, queue_id = value >> 32, value & 0xFFFFFFFF
        if 0 <= topic_id < len(names):
            keys.add((names[topic_id], queue_id - (1 << 32) if queue_id >> 31 else queue_id))
    if multi_dispatch:
        keys.update(extra_units(run.data, records, enable_lmq=enable_lmq)[0])
    return keys
