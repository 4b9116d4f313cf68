"""MessageStore's methods for the layers above (issue #34): raw CommitLog reads, read-only
queue views, dispatch listeners, a sync to an offset and message preparation."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketstore import Message, MessageStore, PutStatus, ReadOnlyStoreError, StoreConfig
from rocketstore.format import record as rec
from rocketstore.put_columns import Columns
from rocketstore.put_path import Refusal
from rocketstore.store import DispatchRun

FILE_SIZE = 64 * 1024


def _store(tmp_path: Path) -> MessageStore:
    return MessageStore.open(tmp_path, StoreConfig(mapped_file_size_commit_log=FILE_SIZE))


def test_commitlog_reads(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        first = store.put(Message("T", b"one", properties={"KEYS": "k"}))
        second = store.put(Message("T", b"two"))
        raw = store.read_commitlog(first.commit_log_offset, first.size)
        assert raw is not None and len(raw) == first.size
        assert raw == store.commitlog.read(first.commit_log_offset, first.size)
        assert store.read_commitlog(second.commit_log_offset, second.size + 1) is None
        found = store.commitlog_record(second.commit_log_offset)
        assert found is not None
        assert rec.to_message_ext(*found).body == b"two"
        assert store.commitlog_record(second.commit_log_offset, size=second.size + 1) is None
        stamp = store.commitlog_store_time(first.commit_log_offset)
        assert stamp == first.store_timestamp
        assert store.commitlog_store_time(FILE_SIZE * 5) == -1
        assert store.commitlog_files() == [(0, store.commitlog.files.files[0].path)]
        assert store.commitlog_dirs is store.commitlog.dirs


def test_commitlog_view_is_held_and_bounded(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        done = store.put(Message("T", b"body"))
        end = done.commit_log_offset + done.size
        with store.commitlog_view(0, end) as view:
            assert view is not None and bytes(view) == store.read_commitlog(0, end)
        with store.commitlog_view(0, end + 1) as view:
            assert view is None  # past the written part
        with store.commitlog_view(0, FILE_SIZE, written=False) as view:
            assert view is not None and len(view) == FILE_SIZE
        with store.commitlog_view(FILE_SIZE - 4, 8, written=False) as view:
            assert view is None  # not within one file
        with store.commitlog_view(FILE_SIZE * 3, 1) as view:
            assert view is None  # no file there


def test_queue_views(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        done = store.put(Message("T", b"x", queue_id=2))
        store.wait_dispatched()
        view = store.queue_view("T", 2)
        assert view is not None
        assert (view.min_offset(), view.max_offset()) == (0, 1)
        unit = view.unit(0)
        assert unit is not None and unit.commit_log_offset == done.commit_log_offset
        assert view.unit_on_disk(0) == unit
        assert (past := view.unit_on_disk(1)) is not None and not past.is_valid
        assert store.queue_view("T", 3) is None
        assert list(store.queue_views()) == [("T", 2)]


def test_dispatch_listeners_see_each_run_after_it_is_written(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        seen: list[tuple[int, int]] = []

        def listener(run: DispatchRun) -> None:
            # The run's units are already in their queue.
            seen.append((run.base, store.queue_view("T", 0).max_offset()))  # type: ignore[union-attr]

        store.add_dispatch_listener(listener)
        store.put(Message("T", b"a"))
        store.wait_dispatched()
        assert seen == [(0, 1)]
        store.remove_dispatch_listener(listener)
        store.remove_dispatch_listener(listener)  # (not there: nothing happens)
        store.put(Message("T", b"b"))
        store.wait_dispatched()
        assert len(seen) == 1


def test_sync_to(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        done = store.put(Message("T", b"a"))
        assert store.sync_to(done.commit_log_offset + done.size) is PutStatus.PUT_OK
    with MessageStore.open(tmp_path, read_only=True) as reader, pytest.raises(ReadOnlyStoreError):
        reader.sync_to(0)


def test_message_preparation_appends_nothing(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        prepared = store.prepare_message(Message("T", b"abc"))
        assert not isinstance(prepared, Refusal)
        refused = store.prepare_message(Message("T", b"x" * (4 * 1024 * 1024 + 1)))
        assert isinstance(refused, Refusal)
        assert refused.status is PutStatus.MESSAGE_ILLEGAL
        checked = store.check_columns(Columns.of("T", [b"a", b"bb"]))
        assert checked.refused_row is None
        assert list(checked.lengths) == [prepared.length - 2, prepared.length - 1]
        assert store.max_commit_log_offset() == 0


def test_readable_record_after(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        first = store.put(Message("T", b"a"))
        second = store.put(Message("T", b"b"))
        assert store.readable_record_after(first.commit_log_offset + 1) == (
            second.commit_log_offset
        )
        assert store.readable_record_after(second.commit_log_offset + 1) is None


def test_index_files_and_last_update(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        assert store.index_files() == () and store.index_last_update() == (0, 0)
        put = store.put(Message("T", b"one", properties={"KEYS": "k"}))
        store.wait_dispatched()
        (only,) = store.index_files()
        assert only.entry_count == 1  # the key (no UNIQ_KEY given)
        assert store.index_last_update() == (put.store_timestamp, put.commit_log_offset)
        assert store.damaged_records_skipped == 0
