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
        dispatcher.make_way(base + dispatcher_module.YIELD_LAG_BYTES)
        assert sleeps == []  # at the limit: nothing to do
        dispatcher.make_way(base + dispatcher_module.YIELD_LAG_BYTES + 1)
        assert sleeps == [0]
        dispatcher.shutdown()
        dispatcher.make_way(base + dispatcher_module.YIELD_LAG_BYTES + 1)
        assert sleeps == [0]  # no thread to make way for


def test_every_append_offers_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    with MessageStore.open(tmp_path, StoreConfig()) as store:
        monkeypatch.setattr(store.dispatcher, "make_way", seen.append)
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
