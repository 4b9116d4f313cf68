"""The writer makes way for a lagging dispatcher: past YIELD_LAG_BYTES of lag it hands
over the GIL after each append, so the index keeps up with sustained puts."""

from __future__ import annotations

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
