"""Flush policies: group commit under SYNC_FLUSH, timeouts, write faults, the async policy
and the checkpoint values it vouches for."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from rocketstore import Message, MessageStore, PutStatus, StoreConfig
from rocketstore.files.mapped_file import MappedFile
from rocketstore.format.checkpoint import decode_checkpoint
from rocketstore.status import RunningFlags


def _config(**changes: object) -> StoreConfig:
    base = StoreConfig(
        mapped_file_size_commit_log=64 * 1024,
        mapped_file_size_consume_queue=100 * 20,
        max_hash_slot_num=64,
        max_index_num=256,
    )
    return base.replace(**changes)


def test_sync_flush_put_is_durable_before_it_returns(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path, _config(flush_disk_type="SYNC_FLUSH")) as store:
        result = store.put(Message("T", b"durable"))
        assert result.status is PutStatus.PUT_OK
        assert store.commitlog.files.flushed_where >= result.commit_log_offset + result.size


def test_sync_flush_group_commit_shares_msyncs(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path, _config(flush_disk_type="SYNC_FLUSH")) as store:
        real_flush = MappedFile.flush

        def slow_flush(self: MappedFile, least_pages: int = 0, *, background: bool = False) -> int:
            time.sleep(0.01)  # a slow disk, so producers pile up behind one msync
            return real_flush(self, least_pages, background=background)

        MappedFile.flush = slow_flush  # type: ignore[method-assign]
        try:
            results: list[PutStatus] = []

            def produce(i: int) -> None:
                for j in range(10):
                    results.append(store.put(Message("T", b"%d-%d" % (i, j))).status)

            threads = [threading.Thread(target=produce, args=(i,)) for i in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            MappedFile.flush = real_flush  # type: ignore[method-assign]
        assert results == [PutStatus.PUT_OK] * 80
        assert store.flusher.flush_count < 80  # producers shared msyncs


@pytest.mark.parametrize("batch", [1, 3])
def test_sync_flush_timeout(tmp_path: Path, batch: int) -> None:
    config = _config(flush_disk_type="SYNC_FLUSH", sync_flush_timeout=50)
    with MessageStore.open(tmp_path, config) as store:
        real_flush = MappedFile.flush

        def stuck_flush(self: MappedFile, least_pages: int = 0, *, background: bool = False) -> int:
            time.sleep(0.06)
            return self.flushed_position  # never gets the bytes down

        MappedFile.flush = stuck_flush  # type: ignore[method-assign]
        try:
            if batch == 1:
                results = [store.put(Message("T", b"late"))]
            else:
                results = store.put_batch([Message("T", b"late")] * batch)
        finally:
            MappedFile.flush = real_flush  # type: ignore[method-assign]
        assert [r.status for r in results] == [PutStatus.FLUSH_DISK_TIMEOUT] * batch
        assert not any(r.ok for r in results)  # (a field the C results set too)
        # Appended all the same, as RocketMQ does: the results still say where.
        assert [r.queue_offset for r in results] == list(range(batch))
        assert results[0].commit_log_offset == 0
        assert all(r.size > 0 and r.msg_id for r in results)


def test_flush_failure_makes_the_store_refuse_writes(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path, _config(flush_disk_type="SYNC_FLUSH")) as store:
        assert store.put(Message("T", b"before")).ok
        real_flush = MappedFile.flush

        def failing_flush(
            self: MappedFile, least_pages: int = 0, *, background: bool = False
        ) -> int:
            raise OSError(5, "Input/output error")

        MappedFile.flush = failing_flush  # type: ignore[method-assign]
        try:
            failed = store.put(Message("T", b"during"))
        finally:
            MappedFile.flush = real_flush  # type: ignore[method-assign]
        assert failed.status is PutStatus.FLUSH_DISK_TIMEOUT and not failed.ok
        assert store.running_flags & RunningFlags.NOT_WRITEABLE
        assert store.put(Message("T", b"after")).status is PutStatus.SERVICE_NOT_AVAILABLE
        store.wait_dispatched()
        # What was acknowledged is still readable.
        assert store.get_messages("g", "T", 0, 0).messages[0].body == b"before"
    assert (tmp_path / "abort").exists(), "a store closed after a write fault is not clean"


def test_an_unexpected_async_flush_failure_makes_the_store_refuse_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not only OSError: whatever stops the background flusher stops the writes, instead
    of a dead thread behind a store that goes on acknowledging puts nothing flushes."""
    config = _config(flush_disk_type="ASYNC_FLUSH", flush_interval_commit_log=10)
    with MessageStore.open(tmp_path, config) as store:
        assert store.put(Message("T", b"before")).ok

        def broken(self: object, least_pages: int = 0, *, background: bool = False) -> int:
            raise ValueError("mmap closed or invalid")

        monkeypatch.setattr(MappedFile, "flush", broken)
        assert store.put(Message("T", b"during")).ok
        deadline = time.monotonic() + 10
        while not store.running_flags & RunningFlags.NOT_WRITEABLE:
            assert time.monotonic() < deadline, "the flusher's failure went unnoticed"
            time.sleep(0.01)
        assert store.put(Message("T", b"after")).status is PutStatus.SERVICE_NOT_AVAILABLE
        monkeypatch.undo()
        store.wait_dispatched()
        assert [m.body for m in store.get_messages("g", "T", 0, 0, 8).messages] == [
            b"before",
            b"during",
        ]


def test_file_creation_failure_writes_nothing(tmp_path: Path) -> None:
    config = _config(mapped_file_size_commit_log=4096)
    with MessageStore.open(tmp_path, config) as store:
        body = b"x" * 1000
        while store.max_commit_log_offset() < 3000:
            assert store.put(Message("T", body)).ok
        before = store.max_commit_log_offset()
        real_init = MappedFile.__init__

        def no_space(self: MappedFile, path: str, *args: object, **kwargs: object) -> None:
            # Only the CommitLog's next file: the dispatcher thread may be creating queue
            # files at the same moment, and those must not fail here.
            if kwargs.get("create") and f"{os.sep}commitlog{os.sep}" in path:
                raise OSError(28, "No space left on device")
            real_init(self, path, *args, **kwargs)  # type: ignore[arg-type]

        MappedFile.__init__ = no_space  # type: ignore[method-assign]
        try:
            statuses = [store.put(Message("T", body)).status for _ in range(3)]
        finally:
            MappedFile.__init__ = real_init  # type: ignore[method-assign]
        assert PutStatus.CREATE_MAPEDFILE_FAILED in statuses
        assert store.put(Message("T", body)).ok  # space is back: writes resume
        store.wait_dispatched()
        queue = [m.body for m in store.get_messages("g", "T", 0, 0).messages]
        assert len(queue) == store.max_offset("T", 0)
        assert store.max_commit_log_offset() > before
    with MessageStore.open(tmp_path, config) as store:
        assert not store.recovery_report.truncated_bytes


def test_async_flusher_round_updates_checkpoint(tmp_path: Path) -> None:
    config = _config(flush_commit_log_thorough_interval=0, flush_consume_queue_thorough_interval=0)
    with MessageStore.open(tmp_path, config) as store:
        store.flusher.shutdown()  # drive it by hand
        result = store.put(Message("T", b"x"), store_timestamp=1_700_000_000_123)
        store.wait_dispatched()
        store.flusher.run_once(now=time.monotonic() + 100)
        assert store.commitlog.files.flushed_where == result.commit_log_offset + result.size
        with open(os.path.join(tmp_path, "checkpoint"), "rb") as f:
            checkpoint = decode_checkpoint(f.read())
        assert checkpoint.physic_msg_timestamp == 1_700_000_000_123
        assert checkpoint.logics_msg_timestamp == 1_700_000_000_123


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_clean_close_removes_abort_and_writes_checkpoint(tmp_path: Path, flush: str) -> None:
    with MessageStore.open(tmp_path, _config(flush_disk_type=flush)) as store:
        assert (tmp_path / "abort").exists()
        store.put(Message("T", b"x", properties={"KEYS": "k"}), store_timestamp=1_700_000_000_000)
    assert not (tmp_path / "abort").exists()
    with open(os.path.join(tmp_path, "checkpoint"), "rb") as f:
        data = f.read()
    assert len(data) == 4096
    checkpoint = decode_checkpoint(data)
    assert checkpoint.physic_msg_timestamp == 1_700_000_000_000
    assert checkpoint.logics_msg_timestamp == 1_700_000_000_000
    assert checkpoint.index_msg_timestamp == 1_700_000_000_000


def test_sync_flush_writes_through_and_tracks_its_sync_sizes(tmp_path: Path) -> None:
    """Under SYNC_FLUSH the CommitLog is written with pwrite, and the flusher's mean sync
    size says whether zeroing ahead pays (small syncs) or not (large ones)."""
    config = _config(flush_disk_type="SYNC_FLUSH", mapped_file_size_commit_log=4 * 1024 * 1024)
    with MessageStore.open(tmp_path, config) as store:
        flusher = store.flusher
        assert store.commitlog.write_through
        assert flusher.mean_sync_flush_bytes is None and flusher.small_sync_flushes()
        for _ in range(3):
            store.put_batch([Message("T", b"s" * 100)] * 4)
        assert flusher.small_sync_flushes()
        for _ in range(40):
            assert all(r.ok for r in store.put_batch([Message("T", b"L" * 60_000)] * 4))
        assert flusher.mean_sync_flush_bytes is not None
        assert flusher.mean_sync_flush_bytes > 128 * 1024
        assert not flusher.small_sync_flushes()
        # Queues are built in the background: a put returns before its record is
        # dispatched (a CI run read here before the dispatcher's round and got nothing).
        store.wait_dispatched()
        got = store.get_messages("g", "T", 0, 0, 8)
        assert [m.body for m in got.messages[:3]] == [b"s" * 100] * 3
    with MessageStore.open(tmp_path, _config()) as store:
        assert not store.commitlog.write_through  # ASYNC_FLUSH stores through the mapping


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_only_the_async_rounds_let_other_threads_run_during_the_sync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flush: str
) -> None:
    """The async flusher's CommitLog syncs are background ones (the other threads run
    meanwhile: see MappedFile.flush); a SYNC_FLUSH put, which waits for its sync, and the
    final flush keep the GIL."""
    seen: list[bool] = []
    real_flush = MappedFile.flush

    def spy(self: MappedFile, least_pages: int = 0, *, background: bool = False) -> int:
        seen.append(background)
        return real_flush(self, least_pages, background=background)

    with MessageStore.open(tmp_path, _config(flush_disk_type=flush)) as store:
        monkeypatch.setattr(MappedFile, "flush", spy)
        store.put_batch([Message("T", b"x" * 1000)] * 20)  # 5 pages: due for a round
        put_syncs = list(seen)
        store.flusher.run_once(time.monotonic() + 3600)  # a thorough round
        round_syncs = seen[len(put_syncs) :]
    if flush == "SYNC_FLUSH":
        assert put_syncs and not any(put_syncs)
    else:
        assert put_syncs == []
        assert round_syncs[0] is True  # the CommitLog first; the queues after it
