"""Recovery on open, after RocketMQ's DefaultMessageStoreTest.testRecover (spec section 11)
and the rules of section 6: clean restart, a corrupt last message with normal and abnormal
recovery, and a garbage tail."""

from __future__ import annotations

import os

import pytest

from rocketstore import GetStatus, Message, MessageStore, StoreConfig

TOPIC = "FooBar"
GROUP = "GROUP_A"
BASE_MS = 1_700_000_000_000
FILE_SIZE = 64 * 1024


def _config() -> StoreConfig:
    return StoreConfig(
        mapped_file_size_commit_log=FILE_SIZE,
        mapped_file_size_consume_queue=100 * 20,
        max_hash_slot_num=10_000,
        max_index_num=10_000,
    )


def _message(i: int) -> Message:
    return Message(
        topic=TOPIC,
        body=f"Once, there was a chance for me! offset {i}".encode(),
        properties={"TAGS": "TAG1", "KEYS": f"Hello{i}"},
        born_timestamp=BASE_MS,
        born_host="127.0.0.1:50000",
    )


def _write(root, count: int, start: int = 0):
    """Open, put ``count`` messages, close cleanly; return the put results."""
    with MessageStore.open(root, _config()) as store:
        results = [store.put(_message(i), BASE_MS + i) for i in range(start, start + count)]
        assert all(r.ok for r in results)
        store.wait_dispatched()
    return results


def _commitlog_file(root, offset: int) -> str:
    start = offset - offset % FILE_SIZE
    return os.path.join(root, "commitlog", f"{start:020d}")


def _overwrite(root, offset: int, data: bytes) -> None:
    with open(_commitlog_file(root, offset), "r+b") as f:
        f.seek(offset % FILE_SIZE)
        f.write(data)


def _corrupt_topic_of(root, result, body_length: int) -> None:
    # Zero 16 bytes from the topic-length byte: record start + 84 + 4 + bodyLen (IPv4 hosts).
    _overwrite(root, result.commit_log_offset + 84 + 4 + body_length, bytes(16))


@pytest.fixture
def root(tmp_path):
    return tmp_path / "store"


def test_clean_restart_keeps_everything(root):
    results = _write(root, 10)
    end = results[-1].commit_log_offset + results[-1].size

    with MessageStore.open(root, _config()) as store:
        assert store.max_commit_log_offset() == end
        assert store.max_offset(TOPIC, 0) == 10
        report = store.recovery_report
        assert not report.abnormal
        assert report.commit_log_end == end
        assert report.truncated_bytes == 0
        assert len(store.get_messages(GROUP, TOPIC, 0, 0).messages) == 10


def test_clean_restart_reports_no_truncated_queue(root):
    _write(root, 10)
    with MessageStore.open(root, _config()) as store:
        report = store.recovery_report
        assert report.queues_truncated == []
        assert report.queue_units_dropped == 0


@pytest.mark.parametrize("abnormal", [False, True])
def test_corrupt_last_message_is_rolled_back(root, abnormal):
    results = _write(root, 10)
    last = results[-1]
    body_length = len(_message(9).body)
    _corrupt_topic_of(root, last, body_length)
    if abnormal:
        (root / "abort").touch()

    with MessageStore.open(root, _config()) as store:
        report = store.recovery_report
        assert report.abnormal is abnormal
        assert store.max_commit_log_offset() == last.commit_log_offset
        assert store.max_offset(TOPIC, 0) == 9
        assert report.commit_log_end == last.commit_log_offset
        assert report.stop_offset == last.commit_log_offset
        assert f"{TOPIC}-0" in report.queues_truncated
        assert store.look_message(last.commit_log_offset) is None
        assert store.look_message(results[8].commit_log_offset) is not None
        assert store.get_messages(GROUP, TOPIC, 0, 9).status is GetStatus.OFFSET_OVERFLOW_ONE
        assert store.query_messages(TOPIC, "Hello9") == []

        # Writes continue: the next message takes the freed queue offset and position.
        again = store.put(_message(10), BASE_MS + 100)
        assert again.ok
        assert again.queue_offset == 9
        assert again.commit_log_offset == last.commit_log_offset
        store.wait_dispatched()
        pulled = store.get_messages(GROUP, TOPIC, 0, 9)
        assert pulled.status is GetStatus.FOUND
        assert pulled.messages[0].body == _message(10).body
        assert len(store.query_messages(TOPIC, "Hello10")) == 1

    with MessageStore.open(root, _config()) as store:
        assert store.max_offset(TOPIC, 0) == 10
        assert not store.recovery_report.abnormal


def test_abort_file_marks_an_abnormal_recovery_and_is_recreated(root):
    results = _write(root, 3)
    (root / "abort").touch()
    with MessageStore.open(root, _config()) as store:
        assert store.recovery_report.abnormal
        assert (root / "abort").exists()  # held while the store is open
        assert store.max_commit_log_offset() == results[-1].commit_log_offset + results[-1].size
        assert store.max_offset(TOPIC, 0) == 3
    assert not (root / "abort").exists()


def test_garbage_tail_is_dropped_and_reported(root):
    results = _write(root, 5)
    end = results[-1].commit_log_offset + results[-1].size
    garbage = b"\xde\xad\xbe\xef" * 8
    _overwrite(root, end, garbage)

    with MessageStore.open(root, _config()) as store:
        report = store.recovery_report
        assert store.max_commit_log_offset() == end
        assert store.max_offset(TOPIC, 0) == 5
        assert report.commit_log_end == end
        assert report.truncated_bytes == len(garbage)
        assert report.stop_offset == end
        assert report.stop_reason
        assert report.stop_reason != "end of data"
        assert "32 bytes dropped" in report.summary()

        following = store.put(_message(5), BASE_MS + 100)
        assert following.commit_log_offset == end
        assert following.queue_offset == 5


def test_garbage_tail_with_an_abort_file(root):
    results = _write(root, 5)
    end = results[-1].commit_log_offset + results[-1].size
    _overwrite(root, end, b"\x01" * 50)
    (root / "abort").touch()

    with MessageStore.open(root, _config()) as store:
        assert store.recovery_report.abnormal
        assert store.max_commit_log_offset() == end
        assert store.recovery_report.truncated_bytes == 50
        assert store.max_offset(TOPIC, 0) == 5


def test_zeros_after_the_last_record_are_not_reported_as_dropped(root):
    results = _write(root, 5)
    with MessageStore.open(root, _config()) as store:
        report = store.recovery_report
        assert report.truncated_bytes == 0
        assert report.stop_reason == "end of data"
        assert report.stop_offset == results[-1].commit_log_offset + results[-1].size


def test_body_crc_mismatch_ends_the_valid_data(root):
    results = _write(root, 5)
    victim = results[3]
    _overwrite(root, victim.commit_log_offset + 84 + 4, b"X")  # first body byte

    with MessageStore.open(root, _config()) as store:
        assert store.max_commit_log_offset() == victim.commit_log_offset
        assert store.max_offset(TOPIC, 0) == 3
        assert "CRC" in store.recovery_report.stop_reason


def test_recovery_across_files(root):
    body = b"x" * 4000
    with MessageStore.open(root, _config()) as store:
        results = [
            store.put(Message(TOPIC, body, born_timestamp=BASE_MS), BASE_MS + i) for i in range(40)
        ]
        assert all(r.ok for r in results)
        store.wait_dispatched()
    assert len(os.listdir(root / "commitlog")) == 3  # about 16 records per 64 KiB file
    end = results[-1].commit_log_offset + results[-1].size

    with MessageStore.open(root, _config()) as store:
        assert store.max_commit_log_offset() == end
        assert store.max_offset(TOPIC, 0) == 40
        assert (looked := store.look_message(results[16].commit_log_offset)) is not None
        assert looked.body == body


def test_corruption_in_the_last_file_keeps_earlier_files(root):
    body = b"y" * 4000
    with MessageStore.open(root, _config()) as store:
        results = [
            store.put(Message(TOPIC, body, born_timestamp=BASE_MS), BASE_MS + i) for i in range(40)
        ]
        store.wait_dispatched()
    victim = next(r for r in results if r.commit_log_offset >= 2 * FILE_SIZE)
    _corrupt_topic_of(root, victim, len(body))

    with MessageStore.open(root, _config()) as store:
        assert store.max_commit_log_offset() == victim.commit_log_offset
        assert store.max_offset(TOPIC, 0) == victim.queue_offset
        assert store.look_message(results[0].commit_log_offset) is not None


def test_queue_units_lost_while_closed_are_rebuilt(root):
    results = _write(root, 6)
    queue_file = root / "consumequeue" / TOPIC / "0" / f"{0:020d}"
    with open(queue_file, "r+b") as f:  # the last two units never reached the disk
        f.seek(4 * 20)
        f.write(bytes(2 * 20))

    with MessageStore.open(root, _config()) as store:
        assert store.max_offset(TOPIC, 0) == 6
        result = store.get_messages(GROUP, TOPIC, 0, 4)
        assert [m.commit_log_offset for m in result.messages] == [
            results[4].commit_log_offset,
            results[5].commit_log_offset,
        ]


def test_slow_recovery_phases_are_reported_with_their_rates(tmp_path, caplog, monkeypatch):
    """Each phase of a writer's recovery past SLOW_PHASE_S says what it did and how fast
    (rocketstore.store.opening.progress: the CLI prints these on a terminal); the open
    records how long its recovery took."""
    from rocketstore.store import opening

    root = tmp_path / "store"
    _write(root, 50)
    for path in (root / "consumequeue" / TOPIC).rglob("*"):
        if path.is_file():
            path.unlink()  # the queue re-dispatched from the CommitLog on open
    monkeypatch.setattr(opening, "SLOW_PHASE_S", 0.0)
    with (
        caplog.at_level("INFO", logger=opening.progress_log.name),
        MessageStore.open(root, _config()) as store,
    ):
        assert store.max_offset(TOPIC, 0) == 50
        assert store.stats().recovery_seconds > 0
    lines = [r.getMessage() for r in caplog.records if r.name == opening.progress_log.name]
    assert any(line.startswith("recovery: 1 CommitLog files, ") for line in lines), lines
    assert any("re-dispatched" in line and "MiB/s" in line for line in lines), lines
    assert any("CommitLog records" in line and "checked" in line for line in lines), lines
