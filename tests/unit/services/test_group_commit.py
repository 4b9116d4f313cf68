"""GroupCommit: requests made while a sync runs share the next one; every request is
answered once, with the sync's status, also on failures and at shutdown."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from rocketstore.services.group_commit import GroupCommit
from rocketstore.status import PutStatus


class GatedFlush:
    """A flush that records its offsets and, while ``gate`` is clear, waits for it."""

    def __init__(self, status: PutStatus = PutStatus.PUT_OK):
        self.status = status
        self.offsets: list[int] = []
        self.entered = threading.Event()
        self.gate = threading.Event()

    def __call__(self, offset: int) -> PutStatus:
        self.offsets.append(offset)
        self.entered.set()
        assert self.gate.wait(10)
        return self.status


class Answers:
    """Completions as (request number, status), in the order they came."""

    def __init__(self) -> None:
        self.got: list[tuple[int, PutStatus]] = []
        self.arrived = threading.Semaphore(0)

    def done_for(self, number: int) -> Callable[[PutStatus], None]:
        def done(status: PutStatus) -> None:
            self.got.append((number, status))
            self.arrived.release()

        return done


def test_requests_during_a_sync_share_the_next_one() -> None:
    flush = GatedFlush()
    commit = GroupCommit(flush)
    answers = Answers()
    got, arrived, done_for = answers.got, answers.arrived, answers.done_for
    commit.request(100, done_for(0))
    assert flush.entered.wait(10)  # the first sync runs (and waits at the gate)
    for number, offset in enumerate((250, 180, 300), start=1):
        commit.request(offset, done_for(number))
    flush.gate.set()
    for _ in range(4):
        assert arrived.acquire(timeout=10)
    commit.shutdown()
    assert flush.offsets == [100, 300]  # one sync to the furthest offset of the three
    assert commit.syncs == 2 and commit.requests == 4
    assert sorted(got) == [(n, PutStatus.PUT_OK) for n in range(4)]


def test_a_failed_sync_answers_each_of_its_requests_with_its_status() -> None:
    flush = GatedFlush(PutStatus.FLUSH_DISK_TIMEOUT)
    flush.gate.set()
    commit = GroupCommit(flush)
    answers = Answers()
    got, arrived, done_for = answers.got, answers.arrived, answers.done_for
    commit.request(10, done_for(0))
    assert arrived.acquire(timeout=10)
    commit.shutdown()
    assert got == [(0, PutStatus.FLUSH_DISK_TIMEOUT)]


def test_a_sync_that_raises_answers_flush_disk_timeout_and_the_thread_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[int] = []

    def flaky(offset: int) -> PutStatus:
        calls.append(offset)
        if len(calls) == 1:
            raise ValueError("a bug")
        return PutStatus.PUT_OK

    commit = GroupCommit(flaky)
    answers = Answers()
    got, arrived, done_for = answers.got, answers.arrived, answers.done_for

    def broken_done(status: PutStatus) -> None:
        arrived.release()
        raise RuntimeError("a caller's callback failed")

    commit.request(10, done_for(0))
    assert arrived.acquire(timeout=10)
    commit.request(20, broken_done)
    assert arrived.acquire(timeout=10)
    commit.request(30, done_for(2))
    assert arrived.acquire(timeout=10)
    commit.shutdown()
    assert got == [(0, PutStatus.FLUSH_DISK_TIMEOUT), (2, PutStatus.PUT_OK)]
    assert "group commit sync failed" in caplog.text
    assert "a put's completion failed" in caplog.text


def test_shutdown_answers_what_is_pending_then_refuses_requests() -> None:
    flush = GatedFlush()
    commit = GroupCommit(flush)
    answers = Answers()
    got, done_for = answers.got, answers.done_for
    commit.request(5, done_for(0))
    assert flush.entered.wait(10)
    commit.request(9, done_for(1))
    stopper = threading.Thread(target=commit.shutdown)
    stopper.start()
    flush.gate.set()
    stopper.join(10)
    assert not stopper.is_alive()
    assert sorted(got) == [(0, PutStatus.PUT_OK), (1, PutStatus.PUT_OK)]
    assert flush.offsets == [5, 9]
    assert commit.stopping
    assert not commit.request(11, done_for(2))  # refused: the caller syncs itself
    assert sorted(got) == [(0, PutStatus.PUT_OK), (1, PutStatus.PUT_OK)]


def test_no_thread_until_the_first_request() -> None:
    commit = GroupCommit(GatedFlush())
    assert not any(t.name == "rocketstore-group-commit" for t in threading.enumerate())
    commit.shutdown()  # nothing started: returns at once
