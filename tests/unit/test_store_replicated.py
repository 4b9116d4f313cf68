"""MessageStore.append_replicated: a slave's CommitLog fed the master's bytes in arbitrary
cuts ends byte-identical to it, with the same queues and index; bad bytes append nothing."""

from __future__ import annotations

import itertools
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.errors import ConfigError, CorruptDataError
from rocketstore.format import record as rec
from rocketstore.format.native import native
from rocketstore.paths import COMMITLOG_DIR

FILE_SIZE = 8 * 1024
TOPIC = "Replicated"


def _config() -> StoreConfig:
    return StoreConfig(
        mapped_file_size_commit_log=FILE_SIZE,
        mapped_file_size_consume_queue=20 * 64,
        max_hash_slot_num=100,
        max_index_num=400,
    )


def _fill(store: MessageStore, count: int) -> None:
    for i in range(count):
        body = bytes([65 + i % 26]) * (i * 37 % 700)
        message = Message(
            topic=TOPIC,
            queue_id=i % 3,
            body=body,
            properties={"KEYS": f"k{i}", "TAGS": "a" if i % 2 else "b"},
            born_timestamp=1_700_000_000_000 + i,
            born_host="127.0.0.1:5000",
        )
        assert store.put(message).ok


def _master_bytes(master: MessageStore, start: int = 0) -> list[tuple[int, bytes]]:
    """The master's written CommitLog from ``start``, one piece per file (what
    HAConnection reads)."""
    pieces = []
    offset = start
    end = master.max_commit_log_offset()
    while offset < end:
        with master.commitlog.view_to_file_end(offset, 1 << 30) as view:
            assert view is not None
            pieces.append((offset, bytes(view)))
            offset += len(view)
    return pieces


def _commitlog_files(store: MessageStore) -> dict[str, bytes]:
    """The CommitLog files that hold data, by name. The spare the prefaulter makes ahead
    of the writer (under its real name, or ``*.creating`` while being made) holds none,
    and whether it exists yet is the background thread's timing, so it is left out."""
    directory = os.path.join(store.root, COMMITLOG_DIR)
    end = store.max_commit_log_offset()
    return {
        name: open(os.path.join(directory, name), "rb").read()
        for name in os.listdir(directory)
        if not name.endswith(".creating") and int(name) < end
    }


def _queue_contents(store: MessageStore) -> list[tuple[int, int, bytes | None, str | None]]:
    store.wait_dispatched()
    out = []
    for queue_id in range(3):
        offset = 0
        while offset < store.max_offset(TOPIC, queue_id):
            result = store.get_messages("g", TOPIC, queue_id, offset, 32)
            out += [(queue_id, m.queue_offset, m.body, m.keys) for m in result.messages]
            offset = result.next_begin_offset
    return out


def _record_size(data: bytes, at: int) -> int:
    return int.from_bytes(data[at : at + 4], "big")


def _body_length(data: bytes, at: int) -> int:
    view = rec.read_record(data, at)
    assert isinstance(view, rec.RecordView)
    return view.body_length


def _body_position(data: bytes, at: int) -> int:
    view = rec.read_record(data, at)
    assert isinstance(view, rec.RecordView)
    return view.body_position


@pytest.fixture
def master(tmp_path):
    store = MessageStore.open(tmp_path / "master", _config())
    _fill(store, 60)  # several files, each closed by an END_OF_FILE blank
    yield store
    store.close()


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    cuts=st.lists(
        st.integers(min_value=1, max_value=3000).map(lambda n: n if n > 20 else n * 97),
        min_size=1,
        max_size=40,
    )
)
def test_cut_anywhere_gives_identical_files_and_queues(master, tmp_path_factory, cuts):
    slave = MessageStore.open(tmp_path_factory.mktemp("slave"), _config())
    try:
        step = itertools.cycle(cuts)
        for offset, data in _master_bytes(master):
            at = 0
            while at < len(data):
                size = next(step)
                assert slave.append_replicated(offset + at, data[at : at + size]) == min(
                    offset + len(data), offset + at + size
                )
                at += size
        assert slave.max_commit_log_offset() == master.max_commit_log_offset()
        master.flush()
        slave.flush()
        assert _commitlog_files(slave) == _commitlog_files(master)
        assert _queue_contents(slave) == _queue_contents(master)
        found = slave.query_messages(TOPIC, "k7")
        assert [m.body for m in found] == [m.body for m in master.query_messages(TOPIC, "k7")]
        assert len(found) == 1
    finally:
        slave.close()


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    cuts=st.lists(
        st.integers(min_value=1, max_value=3000).map(lambda n: n if n > 20 else n * 97),
        min_size=1,
        max_size=20,
    )
)
def test_the_dispatcher_takes_the_checks_records_and_builds_the_same_queues(
    master, tmp_path_factory, cuts
):
    # A dispatcher caught up after every append always finds the check's records where
    # it is: each one is dispatched from them, none decoded twice, queues and index as
    # the master's.
    slave = MessageStore.open(tmp_path_factory.mktemp("slave"), _config())
    try:
        slave.dispatcher.shutdown(catch_up=False)  # rounds only when this test asks
        step = itertools.cycle(cuts)
        for offset, data in _master_bytes(master):
            at = 0
            while at < len(data):
                size = next(step)
                slave.append_replicated(offset + at, data[at : at + size])
                slave.dispatcher.run_once()
                at += size
        dispatcher = slave.dispatcher
        assert dispatcher.records_handed == dispatcher.records_dispatched > 0
        master.flush()
        slave.flush()
        assert _queue_contents(slave) == _queue_contents(master)
        found = slave.query_messages(TOPIC, "k7")
        assert [m.body for m in found] == [m.body for m in master.query_messages(TOPIC, "k7")]
    finally:
        slave.close()


def test_new_slave_starts_at_a_file_boundary_of_the_master(master, tmp_path):
    pieces = _master_bytes(master)
    offset, data = pieces[-1]
    slave = MessageStore.open(tmp_path / "slave", _config())
    with slave:
        with pytest.raises(ConfigError, match="file boundary"):
            slave.append_replicated(offset + 1, data[1:])
        assert slave.append_replicated(offset, data) == master.max_commit_log_offset()
        assert slave.min_commit_log_offset() == offset
        slave.wait_dispatched()
        assert slave.max_offset(TOPIC, 0) == master.max_offset(TOPIC, 0)


def test_bytes_that_do_not_follow_or_are_corrupt_append_nothing(master, tmp_path):
    (_, data), *_ = _master_bytes(master)
    slave = MessageStore.open(tmp_path / "slave", _config())
    with slave:
        slave.append_replicated(0, data[:500])
        with pytest.raises(ConfigError, match="do not follow"):
            slave.append_replicated(501, data[501:600])
        bad = bytearray(data[500:])
        at = 0
        while at < 500 or not _body_length(data, at):  # a record wholly past 500, with a body
            at += _record_size(data, at)
        bad[_body_position(data, at) - 500] ^= 0xFF  # the body CRC no longer matches
        with pytest.raises(CorruptDataError):
            slave.append_replicated(500, bytes(bad), check_crc=True)
        assert slave.max_commit_log_offset() == 500
        broken = bytearray(data[500:])
        broken[at - 500 + 4] ^= 0xFF  # its magic code
        with pytest.raises(CorruptDataError):
            slave.append_replicated(500, bytes(broken))  # (without check_crc too)
        assert slave.max_commit_log_offset() == 500
        first = slave.commitlog.files.first
        assert first is not None and not any(first.read(500, len(data) - 500))  # zeroed again
        assert slave.append_replicated(500, data[500:]) == len(data)


def test_the_body_crc_is_checked_only_when_asked_as_a_java_slave_does(master, tmp_path):
    (_, data), *_ = _master_bytes(master)
    at = 0
    while not _body_length(data, at):
        at += _record_size(data, at)
    bad = bytearray(data)
    bad[_body_position(data, at)] ^= 0xFF
    with MessageStore.open(tmp_path / "slave", _config()) as slave:
        with pytest.raises(CorruptDataError, match="CRC"):
            slave.append_replicated(0, bytes(bad), check_crc=True)
        assert slave.max_commit_log_offset() == 0
        assert slave.append_replicated(0, bytes(bad)) == len(data)  # appended as it is


def test_parts_are_appended_as_their_join_is(master, tmp_path):
    pieces = _master_bytes(master)
    joined = b"".join(data for _, data in pieces)
    cuts = [0, 7, 100, 4000, 4001, len(joined) // 2, len(joined) - 3, len(joined)]
    parts = [joined[a:b] for a, b in itertools.pairwise(cuts)]
    with MessageStore.open(tmp_path / "slave", _config()) as slave:
        assert slave.append_replicated_parts(0, [*parts[:3], b""]) == 4000
        assert slave.append_replicated_parts(4000, parts[3:]) == len(joined)
        slave.flush()
        master.flush()
        assert _commitlog_files(slave) == _commitlog_files(master)


def test_bad_bytes_past_a_file_end_leave_the_files_before_them_appended(master, tmp_path):
    (_, first), (second_offset, second), *_ = _master_bytes(master)
    broken = bytearray(second)
    broken[4] ^= 0xFF  # the second file's first magic code
    with MessageStore.open(tmp_path / "slave", _config()) as slave:
        with pytest.raises(CorruptDataError):
            slave.append_replicated_parts(0, [first[:100], first[100:] + bytes(broken)])
        assert slave.max_commit_log_offset() == second_offset == len(first)
        assert slave.append_replicated(second_offset, second) == second_offset + len(second)


def test_restart_mid_record_recovers_to_the_last_whole_record(master, tmp_path):
    (_, data), *_ = _master_bytes(master)
    slave = MessageStore.open(tmp_path / "slave", _config())
    slave.append_replicated(0, data[:1000])
    slave.close()
    with MessageStore.open(tmp_path / "slave", _config()) as reopened:
        end = reopened.max_commit_log_offset()
        assert 0 < end < 1000
        assert reopened.append_replicated(end, data[end:]) == len(data)


def test_commitlog_data_view_is_commitlog_data_without_the_copy(tmp_path: os.PathLike[str]) -> None:
    with MessageStore.open(tmp_path, _config()) as master:
        _fill(master, 60)
        end = master.max_commit_log_offset()
        assert end > FILE_SIZE  # a file end on the way
        offset = 0
        while offset < end:
            data = master.commitlog_data(offset, 3000)
            with master.commitlog_data_view(offset, 3000) as view:
                assert view is not None and bytes(view) == data
            assert data
            offset += len(data)
        with master.commitlog_data_view(end, 3000) as view:
            assert view is not None and len(view) == 0  # nothing written there yet
        assert master.commitlog_data(end, 3000) == b""
        first = master.commitlog.files.first
        assert first is not None
        master.commitlog.files.files.remove(first)  # as if retention had deleted it
        with master.commitlog_data_view(0, 3000) as view:
            assert view is None
        assert master.commitlog_data(0, 3000) is None
        master.commitlog.files.files.insert(0, first)


# Without the extension the prefaulter turns its faults off by itself, at any moment.
@pytest.mark.skipif(native is None, reason="the C extension is not built")
def test_a_replica_is_not_prefaulted_once_it_takes_replicated_bytes(master, tmp_path):
    # Its bytes go in with pwrite: faulting the pages in first would only zero them.
    (_, data), *_ = _master_bytes(master)
    with MessageStore.open(tmp_path / "slave", _config()) as slave:
        assert slave.prefaulter.faults_enabled == slave.prefaulter.enabled
        slave.append_replicated(0, data[:1000])
        assert not slave.prefaulter.faults_enabled
        assert slave.append_replicated(1000, data[1000:]) == len(data)
        slave.flush()
        first = slave.commitlog.files.first
        assert first is not None and first.read(0, len(data)) == data


def _write_through_window(slave: MessageStore, data: bytes, check_crc: bool = False) -> int:
    """``data`` (from the slave's end on) written as a slave's native receive writes it:
    pwrite into the replica window's file, then take_replicated; a window at a time."""
    while data:
        window = slave.replica_window()
        assert window is not None
        piece = data[: window.room]
        os.pwrite(window.fd, piece, window.position)
        end = slave.take_replicated(window.offset, len(piece), check_crc=check_crc)
        assert end == window.offset + len(piece)
        data = data[len(piece) :]
    return slave.max_commit_log_offset()


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(cuts=st.lists(st.integers(min_value=1, max_value=5000), min_size=1, max_size=20))
def test_bytes_written_through_the_window_are_appended_as_append_replicated_appends(
    master, tmp_path_factory, cuts
):
    joined = b"".join(data for _, data in _master_bytes(master))
    root = tmp_path_factory.mktemp("slave")
    with MessageStore.open(root, _config()) as slave:
        assert slave.replica_window() is None  # empty: the first bytes make the first file
        first = min(cuts[0], len(joined))
        slave.append_replicated(0, joined[:first])
        at = first
        for cut in cuts[1:]:
            step = joined[at : at + cut]
            assert _write_through_window(slave, step) == at + len(step)
            at += len(step)
        assert _write_through_window(slave, joined[at:]) == len(joined)
        slave.flush()
        master.flush()
        assert _commitlog_files(slave) == _commitlog_files(master)
        assert _queue_contents(slave) == _queue_contents(master)


def test_bad_bytes_written_through_the_window_are_zeroed_and_refused(master, tmp_path):
    (_, data), *_ = _master_bytes(master)
    with MessageStore.open(tmp_path / "slave", _config()) as slave:
        slave.append_replicated(0, data[:500])
        window = slave.replica_window()
        assert window is not None and (window.offset, window.position) == (500, 500)
        assert window.room == FILE_SIZE - 500
        broken = bytearray(data[500:])
        at = 0
        while at < 500:
            at += _record_size(data, at)
        broken[at - 500 + 4] ^= 0xFF  # a magic code
        os.pwrite(window.fd, bytes(broken), window.position)
        with pytest.raises(CorruptDataError):
            slave.take_replicated(500, len(broken))
        assert slave.max_commit_log_offset() == 500
        mapped = slave.commitlog.files.first
        assert mapped is not None and not any(mapped.read(500, len(broken)))  # zeroed again
        with pytest.raises(ConfigError, match="do not follow"):
            slave.take_replicated(501, 10)
        with pytest.raises(ConfigError, match="past their file"):
            slave.take_replicated(500, window.room + 1)
        with pytest.raises(ConfigError, match="negative"):
            slave.take_replicated(500, -1)
        assert _write_through_window(slave, data[500:]) == len(data)
