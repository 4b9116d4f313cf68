"""MessageStore given arguments of the wrong type or range: a ConfigError naming the
argument, or MESSAGE_ILLEGAL naming the message's field, never a TypeError from deep down,
a silently wrong answer or a store that no longer opens; and what was acknowledged before
stays readable, after a reopen too."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rocketstore import GetStatus, Message, MessageStore, PutStatus, StoreConfig
from rocketstore.errors import ConfigError, NotAStoreError
from rocketstore.java_ints import JAVA_LONG_MAX
from rocketstore.status import RunningFlags


def _config(**changes: object) -> StoreConfig:
    return StoreConfig(
        mapped_file_size_commit_log=1 << 20,
        mapped_file_size_consume_queue=20 * 1000,
        max_hash_slot_num=100,
        max_index_num=400,
        commit_log_prefault_bytes=0,
    ).replace(**changes)


def _bodies(store: MessageStore, topic: str = "T") -> list[bytes | None]:
    return [m.body for m in store.get_messages("g", topic, 0, 0).messages]


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (Message("T", 5), "body must be bytes"),  # type: ignore[arg-type]  # was 5 zero bytes
        (Message("T", [1, 2]), "body must be bytes"),  # type: ignore[arg-type]
        (Message("T", "text"), "body must be bytes"),  # type: ignore[arg-type]  # TypeError
        (Message("T", b"x", properties=None), "properties must be a dict"),  # type: ignore[arg-type]
        (Message("T", b"x", properties={"a": b"b"}), "property 'a' must be a str"),  # type: ignore[dict-item]
        (Message("T", b"x", properties={"KEYS": 5}), "property 'KEYS' must be a str"),  # type: ignore[dict-item]
        (Message("T", b"x", born_host=None), "born_host must be a str"),  # type: ignore[arg-type]
        (Message("T", b"x", queue_id=True), "queue_id must be an int, got bool"),
    ],
)
def test_a_message_field_of_the_wrong_type_is_refused_by_name(
    tmp_path: Path, message: Message, reason: str
) -> None:
    with MessageStore.open(tmp_path, _config()) as store:
        before = store.put(Message("T", b"before"))
        assert before.ok
        refused = store.put(message)
        assert refused.status is PutStatus.MESSAGE_ILLEGAL and reason in refused.reason
        (in_batch,) = store.put_batch([message])
        assert in_batch.status is PutStatus.MESSAGE_ILLEGAL
        assert in_batch.reason.startswith("message 0 of the batch: ") and reason in in_batch.reason
        assert store.submit(message).result(5).status is PutStatus.MESSAGE_ILLEGAL
        assert store.put(Message("T", b"after")).ok
    with MessageStore.open(tmp_path, _config()) as store:
        assert _bodies(store) == [b"before", b"after"]


def test_multi_dispatch_with_a_value_that_is_no_str_is_refused(tmp_path: Path) -> None:
    config = _config(enable_multi_dispatch=True, enable_lmq=True)
    with MessageStore.open(tmp_path, config) as store:
        message = Message("T", b"x", properties={"INNER_MULTI_DISPATCH": 5})  # type: ignore[dict-item]
        refused = store.put(message)  # was a TypeError from java_is_blank
        assert refused.status is PutStatus.MESSAGE_ILLEGAL
        assert "INNER_MULTI_DISPATCH" in refused.reason


@pytest.mark.parametrize("stamp", ["5", 1.5, True, -1, JAVA_LONG_MAX, JAVA_LONG_MAX + 1])
def test_a_store_timestamp_no_record_can_take_is_a_config_error(
    tmp_path: Path, stamp: object
) -> None:
    with MessageStore.open(tmp_path, _config()) as store:
        for put in (store.put, store.submit):
            with pytest.raises(ConfigError, match="store_timestamp"):
                put(Message("T", b"x"), store_timestamp=stamp)  # type: ignore[arg-type]  # on purpose
        for put_batch in (store.put_batch, store.submit_batch):
            with pytest.raises(ConfigError, match="store_timestamp"):
                put_batch([Message("T", b"x")], store_timestamp=stamp)  # type: ignore[arg-type]  # on purpose
        assert store.put(Message("T", b"ok"), store_timestamp=0).ok


def test_a_delayed_message_stored_late_does_not_break_the_store(tmp_path: Path) -> None:
    """A delivery time (store time + delay) past a Java long killed the dispatcher while
    puts went on being acknowledged, and every later open raised OverflowError."""
    with MessageStore.open(tmp_path, _config()) as store:
        assert store.put(Message("T", b"before")).ok
        delayed = Message("T", b"x", properties={"DELAY": "1"})
        with pytest.raises(ConfigError, match="store_timestamp"):
            store.put(delayed, store_timestamp=JAVA_LONG_MAX - 500)
        latest = JAVA_LONG_MAX - 2 * 3_600_000  # the longest default level is 2h
        assert store.put(delayed, store_timestamp=latest).ok
        store.wait_dispatched()
        assert store.dispatch_error is None
    with MessageStore.open(tmp_path, _config()) as store:
        assert _bodies(store) == [b"before"]
        assert store.max_offset("SCHEDULE_TOPIC_XXXX", 0) == 1


def test_a_store_host_that_is_no_str_is_a_config_error(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path, _config()) as store:
        with pytest.raises(ConfigError, match="store_host must be a str"):
            store.put(Message("T", b"x"), store_host=5)  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="store_host must be a str"):
            store.put_batch([Message("T", b"x")], store_host=["1.2.3.4:5"])  # type: ignore[arg-type]


def test_a_batch_from_a_generator_of_new_topics_is_put_whole(tmp_path: Path) -> None:
    """The first encoding attempt read the generator to learn its topics, leaving nothing
    for the next: put_batch answered [] and wrote nothing."""
    with MessageStore.open(tmp_path, _config()) as store:
        results = store.put_batch(Message(f"N{i}", b"x") for i in range(3))  # type: ignore[arg-type]
        assert [r.status for r in results] == [PutStatus.PUT_OK] * 3
        store.wait_dispatched()
        assert _bodies(store, "N2") == [b"x"]


@pytest.mark.parametrize("batch", [None, Message("T", b"x"), "abc"])
def test_a_batch_that_is_no_list_of_messages_is_a_config_error(
    tmp_path: Path, batch: object
) -> None:
    with (
        MessageStore.open(tmp_path, _config()) as store,
        pytest.raises(ConfigError, match="a batch must be a list of Messages"),
    ):
        store.put_batch(batch)  # type: ignore[arg-type]  # None was answered []


def test_read_arguments_of_the_wrong_type_are_named(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path, _config()) as store:
        put = store.put(Message("T", b"x"))
        store.wait_dispatched()
        # A queue id "0" answered NO_MESSAGE_IN_QUEUE, a silently wrong answer.
        with pytest.raises(ConfigError, match="queue_id must be an int, got str"):
            store.get_messages("g", "T", "0", 0)  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="topic must be a str"):
            store.max_offset(None, 0)  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="queue_id must be an int, got bool"):
            store.min_offset("T", True)
        with pytest.raises(ConfigError, match="queue_offset must be an int, got float"):
            store.get_messages("g", "T", 0, 1.0)  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="max_count must be an int, got str"):
            store.get_messages("g", "T", 0, 0, "3")  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="tags must be a str or None"):
            store.get_messages("g", "T", 0, 0, 32, 5)  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="commit_log_offset must be an int"):
            store.look_message("0")  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="msg_id must be a str"):
            store.view_message(5)  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="timestamp_ms must be an int"):
            store.offset_by_time("T", 0, 1.5)  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="boundary must be"):
            store.offset_by_time("T", 0, 0, None)  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="queue_offset must be an int"):
            store.message_store_time("T", 0, "0")  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="address must be an int"):
            store.ext_unit("T", 0, "x")  # type: ignore[arg-type]
        # Past a Java int a count changes no answer (it was an OverflowError).
        got = store.get_messages("g", "T", 0, 0, 1 << 70)
        assert got.status is GetStatus.FOUND and len(got.messages) == 1
        # numpy-style ints are ints.
        assert store.look_message(_Index(put.commit_log_offset)) is not None  # type: ignore[arg-type]


class _Index:
    """An int-like that is no int (numpy's integers are such)."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __index__(self) -> int:
        return self.value


def test_a_str_to_keep_is_refused_not_read_as_its_characters(tmp_path: Path) -> None:
    """clean_unused_topics("Topic") kept topics "T", "o", "p", "i" and "c", and deleted
    the queues of "Topic"."""
    with MessageStore.open(tmp_path, _config()) as store:
        assert store.put(Message("Topic", b"x")).ok
        store.wait_dispatched()
        with pytest.raises(ConfigError, match="keep must be a collection of topic names"):
            store.clean_unused_topics("Topic")
        assert store.topics() == {"Topic": [0]}
        with pytest.raises(ConfigError, match="topic must be a str"):
            store.delete_topic_queues(None)  # type: ignore[arg-type]


def test_retention_flags_must_be_bools(tmp_path: Path) -> None:
    """force="no" is true to Python: unexpired CommitLog files would go."""
    with MessageStore.open(tmp_path, _config()) as store:
        with pytest.raises(ConfigError, match="force must be True or False"):
            store.delete_expired_files(force="no")  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="dry_run must be True or False"):
            store.delete_expired_files(dry_run="yes")  # type: ignore[arg-type]


def test_open_arguments_of_the_wrong_type_are_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="non-empty"):
        MessageStore.open("", _config())  # was a store in the current directory
    assert os.listdir(tmp_path) == []
    with pytest.raises(ConfigError, match=r"path must be a str or os\.PathLike"):
        MessageStore.open(None, _config())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="config must be a StoreConfig"):
        MessageStore.open(tmp_path / "s", {"a": 1})  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="read_only must be True or False"):
        MessageStore.open(tmp_path / "s", _config(), read_only="no")  # type: ignore[arg-type]


def test_a_store_or_commitlog_path_under_a_file_is_refused_at_open(tmp_path: Path) -> None:
    (tmp_path / "file").write_bytes(b"x")
    with pytest.raises(NotAStoreError, match="is a file"):
        MessageStore.open(tmp_path / "file" / "store", _config())  # was NotADirectoryError
    # This one opened, and then every put failed CREATE_MAPEDFILE_FAILED.
    config = _config(store_path_commit_log=str(tmp_path / "file" / "commitlog"))
    with pytest.raises(ConfigError, match=r"CommitLog path .* is a file"):
        MessageStore.open(tmp_path / "store", config)


def test_any_dispatch_failure_stops_acknowledging_puts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure other than OSError or StoreError (an OverflowError, say) stopped the
    dispatcher but left the store writable: puts went on being acknowledged where no queue
    would show them."""
    store = MessageStore.open(tmp_path, _config())
    try:
        store.dispatcher.shutdown(catch_up=False)  # this thread dispatches, to see it fail

        def overflow(*_args: object, **_kwargs: object) -> None:
            raise OverflowError("Python int too large to convert to C long")

        monkeypatch.setattr("rocketstore.store.sinks.dispatch_facts", overflow)
        assert store.put(Message("T", b"x")).ok
        with pytest.raises(OverflowError):
            store.wait_dispatched()
        assert store.running_flags & RunningFlags.WRITE_LOGICS_QUEUE_ERROR
        assert store.put(Message("T", b"y")).status is PutStatus.SERVICE_NOT_AVAILABLE
    finally:
        store.close()
    monkeypatch.undo()
    with MessageStore.open(tmp_path, _config()) as reopened:
        assert _bodies(reopened) == [b"x"]
