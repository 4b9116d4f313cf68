"""PeriodicThread and Every: the pass loop the timer and schedule services share."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import pytest

from rocketstore.errors import StoreError
from rocketstore.services.periodic import Every, PeriodicThread


def _wait_for(predicate: Callable[[], object], seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_runs_the_step_every_interval_until_stopped() -> None:
    passes: list[float] = []
    thread = PeriodicThread("t", lambda: 0.01, lambda: passes.append(time.monotonic()))
    thread.start()
    thread.start()  # a second start is a no-op, not a second thread
    _wait_for(lambda: len(passes) >= 3)
    thread.stop()
    count = len(passes)
    time.sleep(0.05)
    assert len(passes) == count
    assert [n for n in threading.enumerate() if n.name == "t"] == []


def test_a_passing_error_is_logged_and_the_next_pass_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[int] = []

    def step() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise StoreError("store closed")
        if len(calls) == 2:
            raise OSError(28, "No space left on device")

    thread = PeriodicThread("svc", lambda: 0.005, step)
    with caplog.at_level(logging.ERROR, logger="rocketstore.services.periodic"):
        thread.start()
        _wait_for(lambda: len(calls) >= 3)
        thread.stop()
    messages = [r.getMessage() for r in caplog.records]
    assert messages[:2] == [
        "svc pass failed: store closed",
        "svc pass failed: [Errno 28] No space left on device",
    ]


def test_a_bug_ends_the_thread() -> None:
    calls: list[int] = []

    def step() -> None:
        calls.append(1)
        raise ValueError("bug")

    thread = PeriodicThread("buggy", lambda: 0.005, step)
    hook_seen: list[BaseException | None] = []
    old_hook = threading.excepthook
    threading.excepthook = lambda args: hook_seen.append(args.exc_value)
    try:
        thread.start()
        _wait_for(lambda: hook_seen)
    finally:
        threading.excepthook = old_hook
    time.sleep(0.03)
    assert len(calls) == 1
    assert isinstance(hook_seen[0], ValueError)
    thread.stop()


def test_stopping_is_seen_by_a_long_pass() -> None:
    seen: list[bool] = []
    started = threading.Event()
    holder: list[PeriodicThread] = []

    def step() -> None:
        started.set()
        while not holder[0].stopping:
            time.sleep(0.001)
        seen.append(True)

    thread = PeriodicThread("long", lambda: 0.001, step)
    holder.append(thread)
    thread.start()
    assert started.wait(5)
    thread.stop()  # returns only once the pass has seen it and ended
    assert seen == [True]


def test_every_is_due_once_per_period() -> None:
    period = [0.05]
    every = Every(lambda: period[0])
    assert not every.due()
    time.sleep(0.06)
    assert every.due()
    assert not every.due()  # counted again from the last True
    period[0] = 0.0  # read each time
    assert every.due()
