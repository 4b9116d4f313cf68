"""LMQ multi-dispatch through the store (spec 1.7; RocketMQ's MultiDispatchTest and the
multi-queue ConsumeQueueTest): offsets under the put lock, the wrapped record, the units
in every named queue, and what survives a restart and a rebuild."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.format import properties as props
from rocketstore.format import sysflag
from rocketstore.format.multi_dispatch import INNER_MULTI_DISPATCH, INNER_MULTI_QUEUE_OFFSET
from rocketstore.status import GetStatus, PutStatus

LMQ = StoreConfig(
    mapped_file_size_commit_log=64 * 1024,
    mapped_file_size_consume_queue=20 * 20,
    enable_lmq=True,
    enable_multi_dispatch=True,
)


def _message(queue_id: int, dispatch: str | None, body: bytes = b"m", **extra: str) -> Message:
    properties = {props.TAGS: "TAG1", props.WAIT: "true", **extra}
    if dispatch is not None:
        properties[INNER_MULTI_DISPATCH] = dispatch
    return Message("T", body, queue_id, properties=properties)


def _queue(store: MessageStore, topic: str, queue_id: int = 0) -> list[int]:
    """The CommitLog offsets a queue's units point to, from its first offset."""
    offsets: list[int] = []
    while True:
        found = store.get_messages("g", topic, queue_id, len(offsets), 32)
        if found.status is not GetStatus.FOUND:
            return offsets
        offsets.extend(m.commit_log_offset for m in found.messages)


def test_rocketmq_s_multi_queue_example(tmp_path: Path) -> None:
    """INNER_MULTI_DISPATCH="%LMQ%123,%LMQ%456": both queues exist, at queue 0, holding the
    message; its record carries the offsets and no WAIT."""
    with MessageStore.open(tmp_path, LMQ) as store:
        sent = [store.put(_message(i % 4, "%LMQ%123,%LMQ%456", b"m%d" % i)) for i in range(10)]
        assert all(r.ok for r in sent)
        store.wait_dispatched()
        assert set(store.topics()) == {"T", "%LMQ%123", "%LMQ%456"}
        assert store.topics()["%LMQ%123"] == [0]
        offsets = [r.commit_log_offset for r in sent]
        assert _queue(store, "%LMQ%123") == offsets
        assert _queue(store, "%LMQ%456") == offsets
        stored = store.look_message(offsets[3])
        assert stored is not None
        assert stored.properties[INNER_MULTI_QUEUE_OFFSET] == "3,3"
        assert props.WAIT not in stored.properties
        assert stored.topic == "T" and stored.queue_id == 3 and stored.queue_offset == 0


def test_offsets_per_queue_and_names_in_order(tmp_path: Path) -> None:
    """Each named queue counts on its own; a plain name takes the message's queue id; a
    name given twice gets one offset (the second unit is a repeat)."""
    with MessageStore.open(tmp_path, LMQ) as store:
        a = store.put(_message(1, "%LMQ%a"))
        b = store.put(_message(2, "%LMQ%b,%LMQ%a,Plain"))
        c = store.put(_message(2, "Plain,%LMQ%a,%LMQ%a"))
        d = store.put(_message(0, None))
        store.wait_dispatched()
        for result, expected in ((a, "0"), (b, "0,1,0"), (c, "1,2,2")):
            stored = store.look_message(result.commit_log_offset)
            assert stored is not None
            assert stored.properties[INNER_MULTI_QUEUE_OFFSET] == expected
        plain = store.look_message(d.commit_log_offset)
        assert plain is not None and INNER_MULTI_QUEUE_OFFSET not in plain.properties
        assert props.WAIT in plain.properties  # a plain store put keeps what it is given
        assert _queue(store, "%LMQ%a") == [
            a.commit_log_offset,
            b.commit_log_offset,
            c.commit_log_offset,
        ]
        assert _queue(store, "%LMQ%b") == [b.commit_log_offset]
        assert _queue(store, "Plain", 2) == [b.commit_log_offset, c.commit_log_offset]


def test_offsets_continue_after_a_restart_and_a_crash(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path, LMQ) as store:
        for _ in range(5):
            assert store.put(_message(0, "%LMQ%a,%LMQ%b")).ok
    with MessageStore.open(tmp_path, LMQ) as store:
        sent = store.put(_message(0, "%LMQ%b,%LMQ%a"))
        stored = store.look_message(sent.commit_log_offset)
        assert stored is not None and stored.properties[INNER_MULTI_QUEUE_OFFSET] == "5,5"
    # A crash before the last message's units reached the queue files: recovery
    # dispatches that record again, its own unit and the ones it gives the LMQ queues.
    (tmp_path / "abort").touch()
    for queue in ("T", "%LMQ%a", "%LMQ%b"):
        with open(tmp_path / "consumequeue" / queue / "0" / f"{0:020d}", "r+b") as f:
            f.seek(5 * 20)
            f.write(bytes(20))
    with MessageStore.open(tmp_path, LMQ) as store:
        assert len(_queue(store, "%LMQ%a")) == 6 and len(_queue(store, "%LMQ%b")) == 6
        assert store.put(_message(0, "%LMQ%a")).ok
        store.wait_dispatched()
        assert len(_queue(store, "%LMQ%a")) == 7


def test_prepared_messages_take_offsets_but_do_not_advance_them(tmp_path: Path) -> None:
    """A PREPARED half is wrapped (its record says the offsets it would have) but gets no
    units and leaves the queues' next offsets alone; a COMMIT record does both."""
    prepared = sysflag.TRANSACTION_PREPARED_TYPE
    commit = sysflag.TRANSACTION_COMMIT_TYPE
    with MessageStore.open(tmp_path, LMQ) as store:
        half = store.put(Message("T", b"half", 0, sys_flag=prepared,
                                 properties={INNER_MULTI_DISPATCH: "%LMQ%a"}))  # fmt: skip
        done = store.put(Message("T", b"done", 0, sys_flag=commit,
                                 properties={INNER_MULTI_DISPATCH: "%LMQ%a"}))  # fmt: skip
        store.wait_dispatched()
        for result in (half, done):
            stored = store.look_message(result.commit_log_offset)
            assert stored is not None and stored.properties[INNER_MULTI_QUEUE_OFFSET] == "0"
        assert _queue(store, "%LMQ%a") == [done.commit_log_offset]


def test_a_delayed_message_is_rewritten_then_wrapped(tmp_path: Path) -> None:
    """As in doAppend: the delay rewrite first (SCHEDULE_TOPIC_XXXX, REAL_TOPIC), then the
    wrap, whose plain names take the schedule queue's id."""
    with MessageStore.open(tmp_path, LMQ) as store:
        sent = store.put(_message(3, "%LMQ%a,Plain", DELAY="2"))
        store.wait_dispatched()
        stored = store.look_message(sent.commit_log_offset)
        assert stored is not None
        assert stored.topic == "SCHEDULE_TOPIC_XXXX" and stored.queue_id == 1
        assert stored.properties[props.REAL_TOPIC] == "T"
        assert stored.properties[INNER_MULTI_QUEUE_OFFSET] == "0,0"
        assert _queue(store, "%LMQ%a") == [sent.commit_log_offset]
        assert _queue(store, "Plain", 1) == [sent.commit_log_offset]


@pytest.mark.parametrize("value", ["", " ", "\t"])
def test_a_blank_list_is_no_multi_dispatch(tmp_path: Path, value: str) -> None:
    with MessageStore.open(tmp_path, LMQ) as store:
        sent = store.put(Message("T", b"m", properties={INNER_MULTI_DISPATCH: value} if value
                                 else {INNER_MULTI_DISPATCH: "x", props.TAGS: "t"}))  # fmt: skip
        store.wait_dispatched()
        stored = store.look_message(sent.commit_log_offset)
        assert stored is not None
        assert (INNER_MULTI_QUEUE_OFFSET in stored.properties) is (value == "")


def test_batches_are_not_wrapped(tmp_path: Path) -> None:
    """4.9.8 wraps single puts only: a batch's records keep their properties and give no
    units to the queues they name."""
    with MessageStore.open(tmp_path, LMQ) as store:
        sent = store.put_batch([_message(0, "%LMQ%a") for _ in range(3)])
        store.wait_dispatched()
        stored = store.look_message(sent[0].commit_log_offset)
        assert stored is not None and INNER_MULTI_QUEUE_OFFSET not in stored.properties
        assert _queue(store, "%LMQ%a") == []


def test_without_multi_dispatch_the_property_is_just_a_property(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path, StoreConfig(mapped_file_size_commit_log=1 << 20)) as store:
        sent = store.put(_message(0, "%LMQ%a"))
        store.wait_dispatched()
        stored = store.look_message(sent.commit_log_offset)
        assert stored is not None and INNER_MULTI_QUEUE_OFFSET not in stored.properties
        assert list(store.topics()) == ["T"]


def test_many_puts_across_files_match_a_model(tmp_path: Path) -> None:
    """Thousands of puts over several CommitLog and queue files, lists drawn at random:
    every queue holds exactly the messages that named it, in order, and each record's
    offsets are its positions there."""
    import random

    rng = random.Random(7)
    names = ["%LMQ%a", "%LMQ%b", "%LMQ%c", "Plain"]
    model: dict[tuple[str, int], list[int]] = {}
    with MessageStore.open(tmp_path, LMQ) as store:
        for _ in range(1500):
            chosen = rng.sample(names, rng.randint(0, 3))
            queue_id = rng.randrange(4)
            sent = store.put(
                _message(queue_id, ",".join(chosen) or None, b"x" * rng.randint(0, 80))
            )
            assert sent.status is PutStatus.PUT_OK
            model.setdefault(("T", queue_id), []).append(sent.commit_log_offset)
            for name in chosen:
                key = (name, 0 if name.startswith("%LMQ%") else queue_id)
                model.setdefault(key, []).append(sent.commit_log_offset)
        store.wait_dispatched()
        for (topic, queue_id), expected in model.items():
            assert _queue(store, topic, queue_id) == expected, (topic, queue_id)
    assert len(list((tmp_path / "commitlog").iterdir())) > 2


@pytest.mark.parametrize("loss", ["tail_unit", "whole_queue"])
def test_recovery_gives_an_lmq_queue_back_what_it_lost(tmp_path: Path, loss: str) -> None:
    """The LMQ queue lost units its records' own queue kept (a crash between the two
    writes; a deleted directory): recovery dispatches those records again."""
    with MessageStore.open(tmp_path, LMQ) as store:
        sent = [store.put(_message(i % 2, "%LMQ%a")).commit_log_offset for i in range(6)]
    lmq = tmp_path / "consumequeue" / "%LMQ%a" / "0"
    if loss == "tail_unit":
        with open(lmq / f"{0:020d}", "r+b") as f:
            f.seek(5 * 20)
            f.write(bytes(20))
        (tmp_path / "abort").touch()
    else:
        for path in lmq.iterdir():
            path.unlink()
        lmq.rmdir()
        lmq.parent.rmdir()
    with MessageStore.open(tmp_path, LMQ) as store:
        assert _queue(store, "%LMQ%a") == sent
        assert _queue(store, "T", 0) == sent[0::2]


@pytest.mark.parametrize("name", ["%LMQ%" + "a" * 300, "a/b", "..", ",a", "x\0y"])
def test_a_queue_that_can_be_no_directory_is_refused_at_put(tmp_path: Path, name: str) -> None:
    """RocketMQ would take it and then fail to dispatch (a name past 255 bytes) or write
    outside consumequeue/; the put is refused and the store stays writable."""
    with MessageStore.open(tmp_path, LMQ) as store:
        refused = store.put(_message(0, name))
        assert refused.status is PutStatus.MESSAGE_ILLEGAL
        assert "can be no queue directory" in refused.reason
        assert store.put(_message(0, "%LMQ%a")).ok
        store.wait_dispatched()
        assert store.dispatch_error is None
        assert sorted(store.topics()) == ["%LMQ%a", "T"]
