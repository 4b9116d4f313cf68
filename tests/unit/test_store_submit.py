"""MessageStore.submit and submit_batch: append now, answer through a future; with
SYNC_FLUSH once the group commit thread's sync made the messages durable."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from concurrent.futures import Future, wait
from pathlib import Path
from typing import Any

import pytest

from rocketstore import Message, MessageStore, PutResult, PutStatus, StoreConfig
from rocketstore.errors import StoreClosedError
from rocketstore.status import RunningFlags


def _sync_store(path: Path) -> MessageStore:
    return MessageStore.open(path, StoreConfig(flush_disk_type="SYNC_FLUSH"))


def test_a_sync_flush_submit_answers_once_durable_with_what_put_answers(tmp_path: Path) -> None:
    with _sync_store(tmp_path) as store:
        future = store.submit(Message("T", b"hello", properties={"KEYS": "k"}))
        result = future.result(timeout=10)
        assert result.status is PutStatus.PUT_OK
        assert store.commitlog.files.flushed_where >= result.commit_log_offset + result.size
        assert store.group_commit.syncs >= 1
        put = store.put(Message("T", b"hello", properties={"KEYS": "k"}))
        assert (put.commit_log_offset, put.queue_offset) == (
            result.commit_log_offset + result.size,
            result.queue_offset + 1,
        )
        store.wait_dispatched()
        found = store.view_message(result.msg_id)
        assert found is not None and found.body == b"hello"


def test_submits_during_a_sync_share_the_next_one(tmp_path: Path) -> None:
    """While a sync holds the flusher's lock, every submit appends and waits; one sync
    then answers all of them."""
    with _sync_store(tmp_path) as store:
        futures: list[Future[list[PutResult]]] = []
        with store.flusher._sync_lock:  # as if a sync were running
            for i in range(20):
                futures.append(store.submit_batch([Message("T", b"m%d" % i)] * 3))
        done, _ = wait(futures, timeout=10)
        assert len(done) == 20
        assert store.group_commit.syncs <= 2  # the one blocked at the lock, then the rest
        offsets = [r.commit_log_offset for f in futures for r in f.result()]
        assert offsets == sorted(offsets) and len(set(offsets)) == 60
        assert all(r.ok for f in futures for r in f.result())


def test_a_failed_sync_answers_flush_disk_timeout_and_keeps_the_offsets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _sync_store(tmp_path) as store:
        monkeypatch.setattr(
            store.flusher, "flush_sync", lambda *a, **k: PutStatus.FLUSH_DISK_TIMEOUT
        )
        results = store.submit_batch([Message("T", b"a"), Message("T", b"b")]).result(10)
        assert [r.status for r in results] == [PutStatus.FLUSH_DISK_TIMEOUT] * 2
        assert not any(r.ok for r in results)
        assert results[1].commit_log_offset == results[0].commit_log_offset + results[0].size
        single = store.submit(Message("T", b"c")).result(10)
        assert single.status is PutStatus.FLUSH_DISK_TIMEOUT and single.size > 0


def test_async_flush_submits_are_complete_on_return(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path, StoreConfig()) as store:
        future = store.submit(Message("T", b"x"))
        batch = store.submit_batch([Message("T", b"y")] * 2)
        assert future.done() and batch.done()
        assert future.result().ok and all(r.ok for r in batch.result())
        assert store.group_commit.requests == 0


def test_refused_submits_answer_at_once_without_a_sync(tmp_path: Path) -> None:
    with _sync_store(tmp_path) as store:
        illegal = store.submit_batch([Message("T", b"x" * (store.config.max_message_size + 1))])
        assert [r.status for r in illegal.result(0)] == [PutStatus.MESSAGE_ILLEGAL]
        assert store.submit_batch([]).result(0) == []
        store.running_flags |= RunningFlags.NOT_WRITEABLE
        refused = store.submit(Message("T", b"x")).result(0)
        assert refused.status is PutStatus.SERVICE_NOT_AVAILABLE
        assert store.group_commit.requests == 0


def test_close_answers_every_submit_first(tmp_path: Path) -> None:
    store = _sync_store(tmp_path)
    futures = [store.submit(Message("T", b"m%d" % i)) for i in range(50)]
    store.close()
    assert all(f.done() and f.result().ok for f in futures)
    with MessageStore.open(tmp_path, StoreConfig()) as reopened:
        assert not reopened.recovery_report.abnormal
        total = sum(reopened.max_offset("T", q) for q in reopened.topics()["T"])
        assert total == 50


def test_a_closed_store_refuses_submits(tmp_path: Path) -> None:
    store = _sync_store(tmp_path)
    store.close()
    with pytest.raises(StoreClosedError, match="closed"):
        store.submit(Message("T", b"x"))
    with pytest.raises(StoreClosedError, match="closed"):
        store.submit_batch([Message("T", b"x")])


def test_a_submitted_put_cannot_be_cancelled(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """It was appended before the future was returned: a cancel (an asyncio task's,
    through wrap_future) does not take it back, and the answer still arrives."""
    with _sync_store(tmp_path) as store:
        with store.flusher._sync_lock:
            future = store.submit(Message("T", b"x"))
            assert not future.cancel()
        assert future.result(10).ok

    async def cancelled_wait(store: MessageStore) -> Future[PutResult]:
        with store.flusher._sync_lock:
            submitted = store.submit(Message("T", b"y"))
            task = asyncio.ensure_future(asyncio.wrap_future(submitted))
            await asyncio.sleep(0)
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return submitted

    with _sync_store(tmp_path) as store:
        submitted = asyncio.run(cancelled_wait(store))
        assert submitted.result(10).ok
    assert "completion failed" not in caplog.text


def test_no_submit_once_close_has_begun(tmp_path: Path) -> None:
    """close() answers the submits already made, then refuses new ones, before the store
    reads as closed: nothing is appended that the caller is told failed."""
    store = _sync_store(tmp_path)
    first = store.submit(Message("T", b"a"))
    store.group_commit.shutdown()  # as close() does first
    with pytest.raises(StoreClosedError, match="closing"):
        store.submit(Message("T", b"b"))
    with pytest.raises(StoreClosedError, match="closing"):
        store.submit_batch([Message("T", b"c")])
    assert first.result(10).ok
    store.close()
    with MessageStore.open(tmp_path, read_only=True) as reader:
        assert reader.max_offset("T", 0) == 1


def test_a_submit_the_group_commit_refuses_is_synced_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store began closing between the append and the request: the submitter syncs
    itself, as put does, and the answer is the sync's."""
    with _sync_store(tmp_path) as store:
        monkeypatch.setattr(store.group_commit, "request", lambda offset, done: False)
        future = store.submit(Message("T", b"x"))
        assert future.done()
        result = future.result()
        assert result.ok
        assert store.commitlog.files.flushed_where >= result.commit_log_offset + result.size


class _HeldGate:
    """A replication gate that answers when the test says (``release``)."""

    def __init__(self) -> None:
        self.requests: list[tuple[int, Callable[[PutStatus], None]]] = []

    def request(self, end_offset: int, done: Callable[[PutStatus], None]) -> None:
        self.requests.append((end_offset, done))

    def release(self, status: PutStatus) -> None:
        for _, done in self.requests:
            done(status)
        self.requests = []


class _AnsweringGate:
    """A replication gate that answers at once, on the submitting thread."""

    def __init__(self, status: PutStatus) -> None:
        self.status = status

    def request(self, end_offset: int, done: Callable[[PutStatus], None]) -> None:
        done(self.status)


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_a_gated_submit_answers_after_the_flush_and_the_gate(tmp_path: Path, flush: str) -> None:
    with MessageStore.open(tmp_path, StoreConfig(flush_disk_type=flush)) as store:
        gate = _HeldGate()
        store.set_replication_gate(gate)
        single = store.submit(Message("T", b"x"))
        batch = store.submit_batch([Message("T", b"y"), Message("T", b"z")])
        ends = [end for end, _ in gate.requests]
        assert ends[1] == store.max_commit_log_offset()
        both: list[Future[Any]] = [single, batch]
        wait(both, timeout=0.5)  # the flush alone does not answer them
        assert not single.done() and not batch.done()
        # put is not gated (a broker's put on the gate's own thread could never finish).
        assert store.put(Message("T", b"p")).ok
        assert len(gate.requests) == 2
        gate.release(PutStatus.PUT_OK)
        result = single.result(10)
        assert result.ok and ends[0] == result.commit_log_offset + result.size
        assert all(r.ok for r in batch.result(10))
        if flush == "SYNC_FLUSH":
            assert store.commitlog.files.flushed_where >= ends[1]


def test_a_gated_submit_takes_the_gates_failure_and_stays_stored(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path, StoreConfig(flush_disk_type="SYNC_FLUSH")) as store:
        gate = _HeldGate()
        store.set_replication_gate(gate)
        single = store.submit(Message("T", b"x"))
        batch = store.submit_batch([Message("T", b"y"), Message("T", b"z")])
        gate.release(PutStatus.FLUSH_SLAVE_TIMEOUT)
        result = single.result(10)
        assert result.status is PutStatus.FLUSH_SLAVE_TIMEOUT and result.msg_id
        assert [r.status for r in batch.result(10)] == [PutStatus.FLUSH_SLAVE_TIMEOUT] * 2
        store.wait_dispatched()
        assert store.max_offset("T", 0) == 3  # stored all the same, as RocketMQ answers
        # The gate's own answer may come first, on the submitting thread: one answer.
        store.set_replication_gate(_AnsweringGate(PutStatus.SLAVE_NOT_AVAILABLE))
        assert store.submit(Message("T", b"w")).result(10).status is PutStatus.SLAVE_NOT_AVAILABLE
        store.set_replication_gate(None)
        assert store.submit(Message("T", b"v")).result(10).ok


def test_a_refused_submit_asks_the_gate_nothing(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path, StoreConfig()) as store:
        gate = _HeldGate()
        store.set_replication_gate(gate)
        refused = store.submit(Message("T", b"x" * (store.config.max_message_size + 1)))
        assert refused.done() and not refused.result().ok
        assert not gate.requests
