"""ConsumeQueue, after RocketMQ's ConsumeQueueTest and spec section 3: putting units
(duplicates, first-file blank fill), recover, truncate, correct_min_offset, reads, time search."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.consume_queue import ConsumeQueue, PutOutcome
from rocketstore.files.mapped_file import MappedFile
from rocketstore.format.native import native
from rocketstore.format.queue_unit import BLANK_UNIT, QueueUnit, decode_unit, encode_unit
from rocketstore.format.record_scan import QueueRun
from rocketstore.status import Boundary

UNIT = 20
FILE_SIZE = 10 * UNIT  # 10 units per file, as RocketMQ's test geometry (200 bytes)
TAG1_CODE = 2567159  # "TAG1".hashCode()
BASE_MS = 1_700_000_000_000


def _queue(tmp_path, file_size: int = FILE_SIZE) -> ConsumeQueue:
    return ConsumeQueue(str(tmp_path), "abc", 0, file_size, writable=True)


def _reopen(tmp_path, file_size: int = FILE_SIZE) -> ConsumeQueue:
    queue = _queue(tmp_path, file_size)
    queue.load()
    return queue


def _fill(queue: ConsumeQueue, count: int, start: int = 0) -> None:
    """Units for records at CommitLog offset 100*i, size 100."""
    for i in range(start, start + count):
        assert queue.put(100 * i, 100, TAG1_CODE, i) == PutOutcome.WRITTEN


def _files(tmp_path) -> list[str]:
    return sorted(os.listdir(tmp_path / "consumequeue" / "abc" / "0"))


# --- put ---------------------------------------------------------------------------------------


def test_put_writes_units_across_files(tmp_path):
    queue = _queue(tmp_path)
    _fill(queue, 25)

    assert queue.max_offset() == 25
    assert queue.min_offset() == 0
    assert queue.max_physic_offset == 2500
    assert _files(tmp_path) == [f"{0:020d}", f"{200:020d}", f"{400:020d}"]
    assert queue.unit(0) == QueueUnit(0, 100, TAG1_CODE)
    assert queue.unit(24) == QueueUnit(2400, 100, TAG1_CODE)
    assert queue.unit(25) is None
    assert queue.last_unit() == QueueUnit(2400, 100, TAG1_CODE)
    with open(tmp_path / "consumequeue" / "abc" / "0" / f"{200:020d}", "rb") as f:
        assert f.read(UNIT) == encode_unit(1000, 100, TAG1_CODE)
    queue.close()


def test_put_of_the_same_record_again_is_a_duplicate(tmp_path):
    queue = _queue(tmp_path)
    assert queue.put(0, 100, TAG1_CODE, 0) == PutOutcome.WRITTEN
    assert queue.put(100, 100, TAG1_CODE, 1) == PutOutcome.WRITTEN

    # Re-dispatching the record at CommitLog offset 0 is accepted silently.
    assert queue.put(0, 100, TAG1_CODE, 0) == PutOutcome.DUPLICATE
    assert queue.put(100, 100, TAG1_CODE, 1) == PutOutcome.DUPLICATE
    assert queue.max_offset() == 2
    queue.close()


def test_put_of_an_already_written_queue_offset_is_a_duplicate(tmp_path):
    queue = _queue(tmp_path)
    _fill(queue, 3)
    # A newer record claiming queue offset 1 ("repeatedly" in RocketMQ) is not written.
    assert queue.put(5000, 100, TAG1_CODE, 1) == PutOutcome.DUPLICATE
    assert queue.max_offset() == 3
    queue.close()


def test_put_ahead_of_the_queue_end_appends_at_the_end(tmp_path):
    queue = _queue(tmp_path)
    _fill(queue, 3)
    # RocketMQ logs "[BUG]logic queue order maybe wrong" and still appends at the end.
    assert queue.put(300, 100, TAG1_CODE, 7) == PutOutcome.WRITTEN
    assert queue.max_offset() == 4
    assert queue.unit(3) == QueueUnit(300, 100, TAG1_CODE)
    queue.close()


@pytest.mark.parametrize("queue_offset", [-1, 2**63 - 1, 2**62])
def test_a_queue_offset_no_queue_can_reach_is_left_out(tmp_path, queue_offset):
    """Only a damaged record carries one: its unit is not written (its byte position
    would overflow a long), and the queue goes on from the next record."""
    queue = _queue(tmp_path)
    assert queue.put(0, 100, TAG1_CODE, queue_offset) == PutOutcome.IMPOSSIBLE
    assert not (tmp_path / "consumequeue" / "abc" / "0").exists()  # no file was made
    assert queue.put(100, 100, TAG1_CODE, 0) == PutOutcome.WRITTEN
    assert (queue.min_offset(), queue.max_offset()) == (0, 1)
    assert queue.unit(0) == QueueUnit(100, 100, TAG1_CODE)
    queue.close()


def test_first_file_is_blank_filled_before_a_non_zero_first_offset(tmp_path):
    queue = _queue(tmp_path)

    assert queue.put(0, 100, TAG1_CODE, 5) == PutOutcome.WRITTEN

    assert queue.min_offset() == 5
    assert queue.max_offset() == 6
    with open(tmp_path / "consumequeue" / "abc" / "0" / f"{0:020d}", "rb") as f:
        data = f.read(6 * UNIT)
    assert bytes.fromhex("00000000000000007FFFFFFF0000000000000000") == BLANK_UNIT
    assert data[: 5 * UNIT] == BLANK_UNIT * 5
    assert decode_unit(data, 5 * UNIT) == QueueUnit(0, 100, TAG1_CODE)
    assert queue.unit(4) is None  # below the min offset
    assert queue.unit(5) == QueueUnit(0, 100, TAG1_CODE)
    queue.close()


def test_first_file_starts_at_the_boundary_of_a_far_first_offset(tmp_path):
    queue = _queue(tmp_path)

    assert queue.put(0, 100, TAG1_CODE, 23) == PutOutcome.WRITTEN

    # The first file is the one holding offset 23 (file 400), filled with 3 blanks.
    assert _files(tmp_path) == [f"{400:020d}"]
    assert queue.min_offset() == 23
    assert queue.max_offset() == 24
    assert (first := queue.files.first) is not None
    assert first.read(0, 3 * UNIT) == BLANK_UNIT * 3
    queue.close()


def test_later_files_are_not_blank_filled(tmp_path):
    queue = _queue(tmp_path)
    _fill(queue, 10)  # file 0 full
    # A gap after the first file: no filling, the unit lands at the current end.
    assert queue.put(1000, 100, TAG1_CODE, 15) == PutOutcome.WRITTEN
    assert queue.max_offset() == 11
    queue.close()


# --- recover -------------------------------------------------------------------------------


def test_recover_finds_the_end_of_units(tmp_path):
    queue = _queue(tmp_path)
    _fill(queue, 25)
    queue.close()

    again = _reopen(tmp_path)
    assert again.max_offset() == 3 * 10  # loaded files count as full
    again.recover()

    assert again.max_offset() == 25
    assert again.max_physic_offset == 2500
    assert again.files.flushed_where == 25 * UNIT
    assert again.put(2500, 100, TAG1_CODE, 25) == PutOutcome.WRITTEN
    assert again.unit(25) == QueueUnit(2500, 100, TAG1_CODE)
    again.close()


def test_recover_with_full_files_continues_into_a_new_file(tmp_path):
    queue = _queue(tmp_path)
    _fill(queue, 20)
    queue.close()

    again = _reopen(tmp_path)
    again.recover()
    assert again.max_offset() == 20
    _fill(again, 1, start=20)
    assert _files(tmp_path)[-1] == f"{400:020d}"
    again.close()


def test_recover_drops_files_after_an_invalid_unit(tmp_path):
    queue = _queue(tmp_path)
    _fill(queue, 25)
    queue.files.files[1].write_at(3 * UNIT, encode_unit(-1, 100, 0))  # unit 13 invalid
    queue.close()

    again = _reopen(tmp_path)
    again.recover()
    assert again.max_offset() == 13
    assert again.max_physic_offset == 1300
    assert _files(tmp_path) == [f"{0:020d}", f"{200:020d}"]
    again.close()


def test_recover_keeps_blank_fill_units(tmp_path):
    queue = _queue(tmp_path)
    queue.put(0, 100, TAG1_CODE, 5)
    queue.close()

    again = _reopen(tmp_path)
    again.recover()
    assert again.max_offset() == 6
    again.close()


def test_recover_of_an_empty_queue(tmp_path):
    queue = _queue(tmp_path)
    queue.load()
    queue.recover()
    assert queue.max_offset() == 0
    assert queue.max_physic_offset == -1


# --- truncate_dirty -----------------------------------------------------------------------


def test_truncate_dirty_drops_units_at_or_after_the_commitlog_end(tmp_path):
    queue = _queue(tmp_path)
    _fill(queue, 25)

    queue.truncate_dirty(1000)

    # File 200 starts with a unit at 1000 and file 400 at 2000: both go.
    assert queue.max_offset() == 10
    assert queue.max_physic_offset == 1000
    assert _files(tmp_path) == [f"{0:020d}"]

    queue.truncate_dirty(550)
    assert queue.max_offset() == 6  # units at 0..500
    assert queue.max_physic_offset == 600
    _fill(queue, 1, start=6)
    assert queue.max_offset() == 7
    queue.close()


def test_truncate_dirty_beyond_the_last_unit_changes_nothing(tmp_path):
    queue = _queue(tmp_path)
    _fill(queue, 25)
    queue.truncate_dirty(10_000)
    assert queue.max_offset() == 25
    assert queue.max_physic_offset == 2500
    queue.close()


def test_truncate_dirty_looks_past_an_empty_last_file(tmp_path):
    """A crash after a full file's successor was made but before its first unit: the
    empty file hides nothing, and the units of the full one past the CommitLog end must
    still go (they would point at whatever is written there next)."""
    queue = _queue(tmp_path)
    _fill(queue, 10)  # one full file
    queue.close()
    (tmp_path / "consumequeue" / "abc" / "0" / f"{FILE_SIZE:020d}").write_bytes(bytes(FILE_SIZE))
    queue = _reopen(tmp_path)
    queue.truncate_dirty(550)
    assert queue.max_offset() == 6  # units at 0..500
    assert queue.max_physic_offset == 600
    assert _files(tmp_path) == [f"{0:020d}"]
    _fill(queue, 1, start=6)
    assert queue.max_offset() == 7
    queue.close()


def test_truncate_dirty_to_zero_empties_the_queue(tmp_path):
    queue = _queue(tmp_path)
    _fill(queue, 5)
    queue.truncate_dirty(0)
    assert queue.max_offset() == 0
    assert queue.max_physic_offset == -1
    queue.close()


# --- correct_min_offset ---------------------------------------------------------------------


def _big_queue(tmp_path) -> ConsumeQueue:
    queue = _queue(tmp_path, file_size=300_000 * UNIT)
    for i in range(10_000):
        queue.put(100 * i, 100, TAG1_CODE, i)
    return queue


def test_correct_min_offset(tmp_path):
    queue = _big_queue(tmp_path)
    assert queue.max_offset() == 10_000

    queue.correct_min_offset(0)
    assert queue.min_offset() == 0

    queue.min_logic_offset = 5 * UNIT
    queue.correct_min_offset(2000)
    assert queue.min_offset() == 20

    queue.correct_min_offset(1_000_000)  # past the last unit
    assert queue.min_offset() == queue.max_offset() == 10_000
    assert queue.min_logic_offset == 200_000
    queue.close()


def test_correct_min_offset_never_moves_back(tmp_path):
    queue = _big_queue(tmp_path)
    queue.correct_min_offset(5000)
    assert queue.min_offset() == 50
    queue.correct_min_offset(100)
    assert queue.min_offset() == 50
    queue.close()


def test_correct_min_offset_skips_blank_fill_units(tmp_path):
    queue = _queue(tmp_path)
    queue.put(0, 100, TAG1_CODE, 5)
    queue.put(100, 100, TAG1_CODE, 6)
    queue.correct_min_offset(0)
    assert queue.min_offset() == 5
    queue.close()


# --- reads -------------------------------------------------------------------------------


def test_units_from(tmp_path):
    queue = _queue(tmp_path)
    _fill(queue, 25)

    rest_of_first = queue.units_from(3)
    assert rest_of_first is not None
    assert len(rest_of_first) == 7 * UNIT  # only to the end of the file holding offset 3
    assert decode_unit(rest_of_first, 0) == QueueUnit(300, 100, TAG1_CODE)
    assert len(queue.units_from(20) or b"") == 5 * UNIT
    assert len(queue.units_from(3, max_bytes=2 * UNIT) or b"") == 2 * UNIT
    assert queue.units_from(25) is None  # at the end
    assert queue.units_from(30) is None  # no file
    assert queue.next_file_offset(3) == 10
    assert queue.next_file_offset(10) == 20
    queue.close()


# --- offset_by_time ---------------------------------------------------------------------------


def _time_queue(tmp_path) -> ConsumeQueue:
    queue = _queue(tmp_path)
    _fill(queue, 25)  # unit i -> record at 100*i
    return queue


def _store_time(offset: int, _size: int) -> int:
    return BASE_MS + offset  # unit i stored at BASE_MS + 100*i


def test_offset_by_time_exact(tmp_path):
    queue = _time_queue(tmp_path)
    for i in (0, 7, 13, 24):
        ts = BASE_MS + 100 * i
        assert queue.offset_by_time(ts, Boundary.LOWER, _store_time, 0) == i
        assert queue.offset_by_time(ts, Boundary.UPPER, _store_time, 0) == i
    queue.close()


def test_offset_by_time_between_entries(tmp_path):
    queue = _time_queue(tmp_path)
    ts = BASE_MS + 100 * 7 + 50
    assert queue.offset_by_time(ts, Boundary.LOWER, _store_time, 0) == 8
    assert queue.offset_by_time(ts, Boundary.UPPER, _store_time, 0) == 7
    queue.close()


def test_offset_by_time_outside_the_queue(tmp_path):
    queue = _time_queue(tmp_path)
    future, past = BASE_MS + 10**9, BASE_MS - 10**9
    assert queue.offset_by_time(future, Boundary.LOWER, _store_time, 0) == 25  # max offset
    assert queue.offset_by_time(future, Boundary.UPPER, _store_time, 0) == 24  # last entry
    assert queue.offset_by_time(past, Boundary.LOWER, _store_time, 0) == 0
    assert queue.offset_by_time(past, Boundary.UPPER, _store_time, 0) == 0
    queue.close()


def test_offset_by_time_with_equal_times(tmp_path):
    queue = _queue(tmp_path)
    for i in range(10):
        queue.put(100 * i, 100, 0, i)

    def store_time(offset: int, _size: int) -> int:
        return BASE_MS + (offset // 300) * 10  # units 0-2, 3-5, 6-8 and 9 share a time

    assert queue.offset_by_time(BASE_MS + 10, Boundary.LOWER, store_time, 0) == 3
    assert queue.offset_by_time(BASE_MS + 10, Boundary.UPPER, store_time, 0) == 5
    queue.close()


def test_offset_by_time_skips_units_below_the_commitlog_min(tmp_path):
    queue = _time_queue(tmp_path)
    past = BASE_MS - 10**9
    assert queue.offset_by_time(past, Boundary.LOWER, _store_time, 500) == 5
    assert queue.offset_by_time(BASE_MS + 100, Boundary.LOWER, _store_time, 500) == 5
    assert queue.offset_by_time(BASE_MS + 900, Boundary.LOWER, _store_time, 500) == 9
    queue.close()


def test_offset_by_time_of_an_empty_queue(tmp_path):
    queue = _queue(tmp_path)
    assert queue.offset_by_time(BASE_MS, Boundary.LOWER, _store_time, 0) == 0
    assert queue.offset_by_time(BASE_MS, Boundary.UPPER, _store_time, 0) == 0


_TIMES = st.lists(st.integers(-5, 40), min_size=1, max_size=40)


@pytest.mark.skipif(native is None, reason="the C extension is not built")
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=_TIMES, probes=st.lists(st.integers(-10, 50), min_size=1, max_size=8))
def test_the_c_time_search_probes_as_python_does(tmp_path_factory, steps, probes):
    """Store times in any order (a clock stepped back, equal times): the C search and the
    Python one answer the same for every time and boundary, across file rollovers."""
    root = tmp_path_factory.mktemp("time-search")
    config = StoreConfig(mapped_file_size_commit_log=4096, mapped_file_size_consume_queue=100)
    with MessageStore.open(root, config) as store:
        for i, step in enumerate(steps):
            body = b"x" * (i % 7 * 50)
            assert store.put(Message("T", body), store_timestamp=BASE_MS + step * 10).ok
        store.wait_dispatched()
        queue = store.queues[("T", 0)]
        low = max(store.commitlog.min_offset(), 0)
        for probe in probes:
            ts = BASE_MS + probe * 5
            for boundary in (Boundary.LOWER, Boundary.UPPER):
                in_c = store.offset_by_time("T", 0, ts, boundary)
                in_python = queue.offset_by_time(ts, boundary, store.commitlog.store_time_at, low)
                assert in_c == in_python, (ts, boundary)


@pytest.mark.skipif(native is None, reason="the C extension is not built")
def test_the_c_time_search_leaves_a_closed_file_to_python(tmp_path):
    assert native is not None
    with MessageStore.open(tmp_path, StoreConfig(mapped_file_size_consume_queue=100)) as store:
        for i in range(12):
            assert store.put(Message("T", b"x"), store_timestamp=BASE_MS + i).ok
        store.wait_dispatched()
        queue = store.queues[("T", 0)]
        log_files = store.commitlog.files
        found = native.time_search(
            queue.files.files, 100, 0, 12, log_files.files, log_files.file_size, BASE_MS + 7, False
        )
        assert found == 7
        closed = MappedFile(queue.files.files[0].path, 100, writable=False)
        closed.close()
        files = [closed, *queue.files.files[1:]]  # a search for unit 2 probes file 0
        assert (
            native.time_search(
                files, 100, 0, 12, log_files.files, log_files.file_size, BASE_MS + 2, False
            )
            is None
        )
        assert native.time_search([], 100, 0, 12, [], 1, BASE_MS, True) == 12  # nothing: -1s
        with pytest.raises(ValueError, match="lo <= hi"):
            native.time_search([], 100, 5, 2, [], 1, BASE_MS, True)


# --- delete_expired_files -----------------------------------------------------------------


def test_delete_expired_files_keeps_the_last_file(tmp_path):
    queue = _time_queue(tmp_path)
    assert queue.delete_expired_files(1500) == 1  # file 0's last unit is at 900
    assert queue.min_offset() == 15
    assert queue.delete_expired_files(10**9) == 1  # file 200 goes, file 400 is the last
    assert _files(tmp_path) == [f"{400:020d}"]
    queue.close()


# --- append_run: a dispatcher's run of encoded units ----------------------------------------


def _run(first: int, count: int, *, step: int = 1) -> QueueRun:
    """Units for the records at CommitLog offsets 100*q, size 100, queue offsets q."""
    offsets = [first + i * step for i in range(count)]
    return QueueRun(
        topic_id=0,
        queue_id=0,
        units=b"".join(encode_unit(100 * q, 100, TAG1_CODE) for q in offsets),
        rows=bytes(8 * count),
        first_queue_offset=first,
        consecutive=step == 1,
        first_end=100 * first + 100,
        last_end=100 * offsets[-1] + 100,
    )


def test_append_run_writes_what_put_would_when_the_queue_continues(tmp_path):
    by_run, by_put = _queue(tmp_path / "run"), _queue(tmp_path / "put")
    _fill(by_run, 2)
    _fill(by_put, 2)
    assert by_run.append_run(_run(2, 5))
    _fill(by_put, 5, start=2)
    assert by_run.max_physic_offset == by_put.max_physic_offset == 700
    assert by_run.max_offset() == by_put.max_offset() == 7
    assert by_run.files.files[-1].wrote_position == by_put.files.files[-1].wrote_position
    data = [q.files.files[0].read(0, FILE_SIZE) for q in (by_run, by_put)]
    assert data[0] == data[1]


def test_append_run_leaves_the_rules_to_put_many(tmp_path):
    """Nothing is written (False) whenever a rule of put could apply."""
    queue = _queue(tmp_path)
    assert not queue.append_run(_run(0, 3))  # no file yet: the first unit's rules
    _fill(queue, 2)
    before = queue.files.files[0].read(0, FILE_SIZE)
    assert not queue.append_run(_run(3, 3))  # a gap after queue offset 1
    assert not queue.append_run(_run(1, 3))  # starts with a duplicate queue offset
    assert not queue.append_run(_run(2, 3, step=2))  # offsets that skip
    assert not queue.append_run(_run(2, 9))  # more than the file's room (8 units)
    stale = _run(2, 3)._replace(first_end=200)  # a record at or below max_physic_offset
    assert not queue.append_run(stale)
    assert queue.files.files[0].read(0, FILE_SIZE) == before
    assert queue.append_run(_run(2, 8))  # exactly the room left
    assert queue.max_offset() == 10
