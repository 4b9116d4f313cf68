"""MessageStore.clean_expired_queues: RocketMQ's cleanExpiredConsumerQueue."""

from __future__ import annotations

from pathlib import Path

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.paths import SCHEDULE_TOPIC

CONFIG = StoreConfig(mapped_file_size_commit_log=4096)


def _store_with_expired_queues(root: Path) -> None:
    """Queues A-1, Old-0 and the schedule topic's queue hold only records of the first
    CommitLog files; A-0 goes on in the newest ones."""
    with MessageStore.open(root, CONFIG) as store:
        for topic, queue_id in (("A", 1), ("Old", 0), (SCHEDULE_TOPIC, 2)):
            for _ in range(5):
                assert store.put(Message(topic, b"old", queue_id=queue_id)).ok
        for i in range(150):
            assert store.put(Message("A", b"x%d" % i, queue_id=0)).ok
        store.wait_dispatched()
        store.delete_expired_files(force=True)
        assert store.commitlog.min_offset() > 0


def test_queues_whose_messages_are_all_gone_are_deleted(tmp_path: Path) -> None:
    root = tmp_path / "s"
    _store_with_expired_queues(root)
    with MessageStore.open(root, CONFIG) as store:
        live_min = store.min_offset("A", 0)
        assert store.clean_expired_queues() == [("A", 1), ("Old", 0)]
        assert set(store.topics()) == {"A", SCHEDULE_TOPIC}
        assert store.topics()["A"] == [0]
        assert not (root / "consumequeue" / "A" / "1").exists()
        assert not (root / "consumequeue" / "Old").exists()
        assert (root / "consumequeue" / SCHEDULE_TOPIC / "2").is_dir()
        assert store.min_offset("A", 0) == live_min
        # A deleted queue starts again at offset 0, as RocketMQ's does.
        again = store.put(Message("A", b"new", queue_id=1))
        assert again.ok and again.queue_offset == 0
        store.wait_dispatched()
        assert store.get_messages("g", "A", 1, 0, 32).messages[0].body == b"new"
        assert store.clean_expired_queues() == []  # its new record is in the CommitLog
    with MessageStore.open(root, CONFIG) as reopened:  # recovery agrees
        assert reopened.max_offset("A", 1) == 1
        assert ("Old", 0) not in reopened.queues


def test_nothing_to_clean_in_a_store_that_kept_everything(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path / "s", CONFIG) as store:
        for i in range(20):
            assert store.put(Message("T", b"m%d" % i, queue_id=i % 3)).ok
        store.wait_dispatched()
        assert store.clean_expired_queues() == []
        assert store.topics() == {"T": [0, 1, 2]}


def test_unused_topics_and_a_deleted_topics_queues(tmp_path: Path) -> None:
    """clean_unused_topics keeps the named topics, the schedule and transaction op
    topics and light queues; delete_topic_queues takes one topic's queues."""
    from rocketstore.paths import TRANS_OP_HALF_TOPIC

    with MessageStore.open(tmp_path / "s", CONFIG) as store:
        for topic in ("Kept", "Unused", "Gone", SCHEDULE_TOPIC, TRANS_OP_HALF_TOPIC, "%LMQ%x"):
            assert store.put(Message(topic, b"m", queue_id=1)).ok
        store.wait_dispatched()
        assert store.clean_unused_topics({"Kept", "Gone"}) == [("Unused", 1)]
        assert store.delete_topic_queues("Gone") == [("Gone", 1)]
        assert set(store.topics()) == {"Kept", SCHEDULE_TOPIC, TRANS_OP_HALF_TOPIC, "%LMQ%x"}
        assert not (tmp_path / "s" / "consumequeue" / "Gone").exists()
        # The messages stay in the CommitLog (by offsetMsgId, say).
        assert store.commitlog.max_offset() > 0 and store.delete_topic_queues("Gone") == []


def test_a_deleted_queue_stays_deleted_across_restarts(tmp_path: Path) -> None:
    """Recovery rebuilds a queue whose directory is lost, but not one deleted on purpose:
    its records below the CommitLog end at deletion are recorded as no queue's. A new
    message starts the queue again at 0; the record goes once retention took them all."""
    from rocketstore.files.deleted_queues import deleted_queues_path, load_deleted_queues

    root = tmp_path / "s"
    with MessageStore.open(root, CONFIG) as store:
        for i in range(60):
            assert store.put(Message("Gone" if i % 2 else "Keep", b"x" * 40)).ok
        store.wait_dispatched()
        end = store.commitlog.max_offset()
        assert store.delete_topic_queues("Gone") == [("Gone", 0)]
    assert load_deleted_queues(str(root)) == {"Gone-0": end}
    with MessageStore.open(root, CONFIG) as store:  # a clean restart
        assert "Gone" not in store.topics()
        assert store.put(Message("Gone", b"new")).queue_offset == 0
        store.wait_dispatched()
    (root / "abort").touch()  # a crash: recovery re-scans the newest files
    with MessageStore.open(root, CONFIG) as store:
        assert store.max_offset("Gone", 0) == 1
        [message] = store.get_messages("g", "Gone", 0, 0, 32).messages
        assert message.body == b"new"
        # A lost directory (not a deletion) is still rebuilt.
        store.close()
    import shutil

    shutil.rmtree(root / "consumequeue" / "Keep")
    with MessageStore.open(root, CONFIG) as store:
        assert store.max_offset("Keep", 0) == 30
        # The re-dispatch from the CommitLog start passed Gone's old records: still none
        # of them is in Gone's queue.
        assert store.max_offset("Gone", 0) == 1
        assert store.get_messages("g", "Gone", 0, 0, 32).messages[0].body == b"new"
        for _ in range(200):  # roll the CommitLog past every deleted record
            assert store.put(Message("Keep", b"y" * 40)).ok
        store.wait_dispatched()
        store.delete_expired_files(force=True)
    with MessageStore.open(root, CONFIG):
        pass
    assert load_deleted_queues(str(root)) == {}
    assert Path(deleted_queues_path(str(root))).exists()


def test_a_damaged_deletion_record_is_refused(tmp_path: Path) -> None:
    import pytest

    from rocketstore.errors import ConfigError
    from rocketstore.files.deleted_queues import deleted_queues_path

    root = tmp_path / "s"
    with MessageStore.open(root, CONFIG) as store:
        assert store.put(Message("T", b"m")).ok
    path = Path(deleted_queues_path(str(root)))
    path.parent.mkdir(exist_ok=True)
    path.write_text('{"deletedQueues": {"T-0": "x"}}')
    with pytest.raises(ConfigError, match="no deletedQueues table of offsets"):
        MessageStore.open(root, CONFIG)
