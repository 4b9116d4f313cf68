"""The writer makes way for a lagging dispatcher: past YIELD_LAG_BYTES of lag it hands
over the GIL after each append, so the index keeps up with sustained puts; with
``max_dispatch_lag_ms`` it dispatches a backlog that old itself."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.errors import ConfigError
from rocketstore.services import dispatcher as dispatcher_module
from rocketstore.status import PutStatus


def test_yields_only_while_the_running_thread_lags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sleeps: list[float] = []
    writer, real_sleep = threading.get_ident(), time.sleep

    def sleep(seconds: float) -> None:
        # time.sleep is the process's: other threads (left by earlier tests in this
        # process) must keep sleeping, and only the writer's yields are counted.
        if threading.get_ident() == writer:
            sleeps.append(seconds)
        else:
            real_sleep(seconds)

    monkeypatch.setattr("rocketstore.services.dispatcher.time.sleep", sleep)
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


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The dispatcher's monotonic clock, set by the test: ``clock[0]`` seconds."""
    now = [100.0]
    monkeypatch.setattr(dispatcher_module, "monotonic", lambda: now[0])
    return now


def _stopped_sync_store(root: Path, max_dispatch_lag_ms: int = 0) -> MessageStore:
    config = StoreConfig(flush_disk_type="SYNC_FLUSH", max_dispatch_lag_ms=max_dispatch_lag_ms)
    store = MessageStore.open(root, config)
    _stopped(store)
    return store


def _stopped(store: MessageStore) -> None:
    """Stop the store's dispatcher thread, leaving its wake-up state as a writer sees it
    while the thread is starved: woken, no round begun."""
    store.dispatcher.shutdown()
    store.dispatcher._wake.clear()
    store.dispatcher._woken = False


def test_the_writer_dispatches_a_backlog_older_than_max_dispatch_lag_ms(
    tmp_path: Path, clock: list[float]
) -> None:
    """With ``max_dispatch_lag_ms`` the writer dispatches itself, on its own thread, once
    the dispatcher has left an append undispatched that long; sooner, it only wakes it."""
    with _stopped_sync_store(tmp_path, max_dispatch_lag_ms=5) as store:
        dispatcher = store.dispatcher
        threads: list[int] = []
        handle = dispatcher.handle

        def recorded(run: dispatcher_module.DispatchRun) -> None:
            threads.append(threading.get_ident())
            handle(run)

        dispatcher.handle = recorded
        first = store.put_batch([Message("T", b"a")] * 2)
        clock[0] += 0.005  # at the bound: not yet
        store.put(Message("T", b"b"))
        assert dispatcher.dispatched_offset == 0 and dispatcher.writer_rounds == 0
        clock[0] += 0.0001
        last = store.put(Message("T", b"c"))
        assert dispatcher.writer_rounds == 1
        assert threads == [threading.get_ident()]
        assert dispatcher.dispatched_offset == last.commit_log_offset + last.size
        got = store.get_messages("g", "T", 0, 0, 10)
        assert [m.body for m in got.messages] == [b"a", b"a", b"b", b"c"]
        assert got.messages[0].commit_log_offset == first[0].commit_log_offset
        # The bound counts again from the writer's round.
        clock[0] += 0.004
        store.put(Message("T", b"d"))
        assert dispatcher.writer_rounds == 1
        clock[0] += 0.002
        store.put(Message("T", b"e"))
        assert dispatcher.writer_rounds == 2
        assert store.dispatch_lag_bytes() == 0


def test_without_max_dispatch_lag_ms_the_writer_only_wakes_the_thread(
    tmp_path: Path, clock: list[float]
) -> None:
    with _stopped_sync_store(tmp_path) as store:
        for body in (b"a", b"b", b"c"):
            store.put(Message("T", body))
            clock[0] += 60.0
        assert store.dispatcher.writer_rounds == 0
        assert store.dispatch_lag_bytes() > 0
        store.wait_dispatched()
        assert len(store.get_messages("g", "T", 0, 0, 10).messages) == 3


def test_a_failed_dispatch_on_the_writer_is_kept_and_the_put_stands(
    tmp_path: Path, clock: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    """The put was appended (and synced) before the writer's round: it answers PUT_OK, and
    the dispatcher keeps the failure for the store, as its thread does."""
    with _stopped_sync_store(tmp_path, max_dispatch_lag_ms=1) as store:
        dispatcher = store.dispatcher

        def broken(run: dispatcher_module.DispatchRun) -> None:
            raise OSError("no space for the index")

        dispatcher.handle = broken
        store.put(Message("T", b"a"))
        clock[0] += 1.0
        result = store.put(Message("T", b"b"))
        assert result.status is PutStatus.PUT_OK
        assert isinstance(dispatcher.error, OSError)
        assert "dispatch on the writer's thread failed" in caplog.text
        clock[0] += 1.0
        store.put(Message("T", b"c"))
        assert dispatcher.writer_rounds == 1  # no second try after a failure


@pytest.mark.parametrize("value", [-1, 1.5, True, "5"])
def test_max_dispatch_lag_ms_must_be_a_non_negative_integer(value: object) -> None:
    with pytest.raises(ConfigError, match="max_dispatch_lag_ms"):
        StoreConfig(max_dispatch_lag_ms=value).validate()  # type: ignore[arg-type]


def test_writer_and_thread_rounds_together_dispatch_each_record_once(tmp_path: Path) -> None:
    """Sustained SYNC_FLUSH puts with a 1 ms bound, the thread running: whichever thread
    dispatches a record, every queue holds each message once, in order, and every key is
    found."""
    config = StoreConfig(flush_disk_type="SYNC_FLUSH", max_dispatch_lag_ms=1)
    with MessageStore.open(tmp_path, config) as store:
        sent = 0
        for call in range(300):
            batch = [
                Message(
                    "T",
                    f"m{sent + i}".encode(),
                    queue_id=(sent + i) % 4,
                    properties={"KEYS": f"k{sent + i}"},
                )
                for i in range(8)
            ]
            assert all(r.ok for r in store.put_batch(batch))
            sent += len(batch)
            if call % 50 == 0:
                time.sleep(0.002)  # let the thread take some rounds too
        store.wait_dispatched()
        for queue_id in range(4):
            bodies: list[bytes | None] = []
            while got := store.get_messages("g", "T", queue_id, len(bodies), 32).messages:
                bodies.extend(m.body for m in got)
            assert bodies == [f"m{i}".encode() for i in range(queue_id, sent, 4)]
        for i in (0, sent // 2, sent - 1):
            assert [m.body for m in store.query_messages("T", f"k{i}")] == [f"m{i}".encode()]
