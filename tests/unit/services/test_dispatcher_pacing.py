"""The writer makes way for a lagging dispatcher: past YIELD_LAG_BYTES of lag it hands
over the GIL after each append, so the index keeps up with sustained puts."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.services import dispatcher as dispatcher_module


def test_yields_only_while_the_running_thread_lags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sleeps: list[float] = []
    monkeypatch.setattr(dispatcher_module.time, "sleep", sleeps.append)
    with MessageStore.open(tmp_path, StoreConfig()) as store:
        dispatcher = store.dispatcher
        base = dispatcher.dispatched_offset
        dispatcher.after_append(base + dispatcher_module.YIELD_LAG_BYTES)
        assert sleeps == []  # at the limit: nothing to do
        dispatcher.after_append(base + dispatcher_module.YIELD_LAG_BYTES + 1)
        assert sleeps == [0]
        dispatcher.shutdown()
        dispatcher.after_append(base + dispatcher_module.YIELD_LAG_BYTES + 1)
        assert sleeps == [0]  # no thread to make way for


def test_an_append_wakes_the_sleeping_thread_once(tmp_path: Path) -> None:
    """The writer sets the wake-up event only when the thread has not been woken since its
    last round (the flag saves a lock per put), and a round clears both."""
    config = StoreConfig(dispatch_interval_ms=1)
    with MessageStore.open(tmp_path, config) as store:
        dispatcher = store.dispatcher
        dispatcher.shutdown()  # no thread: the flag and event stay as the writer leaves them
        dispatcher._wake.clear()  # (set by the shutdown, to end the thread's wait)
        assert not dispatcher._woken
        store.put(Message("T", b"a"))
        assert dispatcher._woken and dispatcher._wake.is_set()
        dispatcher._wake.clear()  # as if a round had begun and a put slipped in before the flag
        store.put(Message("T", b"b"))
        assert not dispatcher._wake.is_set()  # the flag said woken: no set
        dispatcher.start()
        store.wait_dispatched()
        assert [m.body for m in store.get_messages("g", "T", 0, 0, 10).messages] == [b"a", b"b"]


def test_every_append_offers_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    with MessageStore.open(tmp_path, StoreConfig()) as store:
        monkeypatch.setattr(store.dispatcher, "after_append", seen.append)
        first = store.put(Message("T", b"x"))
        batch = store.put_batch([Message("T", b"yy")] * 3)
        assert seen == [
            first.commit_log_offset + first.size,
            batch[-1].commit_log_offset + batch[-1].size,
        ]


def test_appends_during_the_pause_after_a_round_go_in_one_round(tmp_path: Path) -> None:
    """After a round that dispatched something the thread pauses ``dispatch_interval_ms``
    (RocketMQ's reput sleeps 1 ms): what is appended meanwhile is dispatched together, in
    the next round, and nothing is left behind."""
    config = StoreConfig(dispatch_interval_ms=300)
    with MessageStore.open(tmp_path, config) as store:
        dispatcher = store.dispatcher
        rounds: list[int] = []
        real = dispatcher.run_once

        def counted() -> int:
            count = real()
            if count:
                rounds.append(count)
            return count

        dispatcher.run_once = counted  # type: ignore[method-assign]
        store.put(Message("T", b"first"))
        deadline = time.monotonic() + 10
        while not rounds and time.monotonic() < deadline:
            time.sleep(0.001)
        for i in range(5):  # well within the 300 ms pause
            store.put(Message("T", f"m{i}".encode()))
        store.wait_dispatched()
        assert rounds == [1, 5]
        assert store.get_messages("g", "T", 0, 0, 10).messages[-1].body == b"m4"
