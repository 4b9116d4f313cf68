"""The timer store (RocketMQ 5's TimerMessageStore) with an injected clock: the send's
rewrite, not before its time and at it, restarts (clean and with no checkpoint), the
roll of a far time, deletes, many messages in one slot, the files' layout."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.format import properties as props
from rocketstore.format import timer as fmt
from rocketstore.format.message import MessageExt
from rocketstore.status import GetStatus
from rocketstore.store.timer import (
    TIMER_TOPIC,
    TimerMessageStore,
    is_timer_message,
    timer_rewrite,
)

BASE_MS = 1_700_000_000_000
TOPIC = "Orders"
CONFIG = StoreConfig(
    mapped_file_size_commit_log=1024 * 1024,
    mapped_file_size_consume_queue=1000 * 20,
    max_hash_slot_num=64,
    max_index_num=256,
    mapped_file_size_timer_log=64 * 1024,
)


class Clock:
    def __init__(self, now: int = BASE_MS) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MessageStore]:
    opened = MessageStore.open(tmp_path / "store", CONFIG)
    yield opened
    opened.close()


def timer_send(
    store: MessageStore, now: int, deliver_ms: int, body: bytes = b"x", **extra: str
) -> None:
    message = Message(
        topic=TOPIC,
        body=body,
        queue_id=1,
        properties={
            props.UNIQ_KEY: f"U{body.hex()}",
            props.TIMER_DELIVER_MS: str(deliver_ms),
            **extra,
        },
    )
    assert is_timer_message(message.properties, TOPIC)
    stored = timer_rewrite(message, now, precision_ms=1000, max_delay_sec=3 * 86400)
    assert isinstance(stored, Message)
    assert store.put(stored).status.ok
    store.wait_dispatched()


def messages(store: MessageStore) -> list[MessageExt]:
    store.wait_dispatched()
    found: list[MessageExt] = []
    while True:  # a pull returns 32 at most
        got = store.get_messages("g", TOPIC, 1, len(found), 100_000)
        if got.status is not GetStatus.FOUND:
            return found
        found.extend(got.messages)


def delivered(store: MessageStore) -> list[bytes]:
    return [m.body or b"" for m in messages(store)]


def test_rewrite_as_hook_utils(store: MessageStore) -> None:
    message = Message(topic=TOPIC, body=b"a", queue_id=3, properties={props.TIMER_DELAY_SEC: "10"})
    stored = timer_rewrite(message, BASE_MS + 123, precision_ms=1000, max_delay_sec=3600)
    assert isinstance(stored, Message)
    assert stored.topic == TIMER_TOPIC and stored.queue_id == 0
    # 10 s after now, floored to the second.
    assert stored.properties[props.TIMER_OUT_MS] == str(BASE_MS + 10_000)
    assert stored.properties[props.REAL_TOPIC] == TOPIC
    assert stored.properties[props.REAL_QID] == "3"
    # A time exactly on a step goes one step earlier (delivered once that step is over).
    on_step = Message(topic=TOPIC, body=b"a", properties={props.TIMER_DELAY_MS: "5000"})
    stored = timer_rewrite(on_step, BASE_MS, precision_ms=1000, max_delay_sec=3600)
    assert isinstance(stored, Message)
    assert stored.properties[props.TIMER_OUT_MS] == str(BASE_MS + 4000)
    # Past: stored as it is; too far or no number: illegal.
    past = Message(topic=TOPIC, body=b"a", properties={props.TIMER_DELIVER_MS: "5"})
    assert timer_rewrite(past, BASE_MS, precision_ms=1000, max_delay_sec=3600) is past
    far = Message(topic=TOPIC, body=b"a", properties={props.TIMER_DELAY_SEC: "3601"})
    assert "max delay 3600000ms" in str(
        timer_rewrite(far, BASE_MS, precision_ms=1000, max_delay_sec=3600)
    )
    bad = Message(topic=TOPIC, body=b"a", properties={props.TIMER_DELIVER_MS: "soon"})
    assert isinstance(timer_rewrite(bad, BASE_MS, precision_ms=1000, max_delay_sec=3600), str)
    # A DELAY level wins; a rolled one is not a timer send again.
    assert not is_timer_message({props.DELAY: "2", props.TIMER_DELAY_SEC: "1"}, TOPIC)
    assert not is_timer_message({props.TIMER_OUT_MS: "1", props.TIMER_DELAY_SEC: "1"}, TOPIC)


def test_not_before_its_time_then_delivered(store: MessageStore) -> None:
    clock = Clock()
    timer = TimerMessageStore(store, clock=clock)
    try:
        timer_send(store, clock.now, BASE_MS + 2500, b"m1")
        timer.run_once()
        assert delivered(store) == []
        clock.now = BASE_MS + 2999  # its step (2000..2999) is not over yet
        timer.run_once()
        assert delivered(store) == []
        clock.now = BASE_MS + 3000
        assert timer.run_once() == 1
        assert delivered(store) == [b"m1"]
        message = messages(store)[0]
        assert message.queue_id == 1
        assert message.properties[props.TIMER_OUT_MS] == str(BASE_MS + 2000)
        assert message.properties[props.TIMER_ENQUEUE_MS] == str(BASE_MS)
        assert message.properties[props.TIMER_DEQUEUE_MS] == str(BASE_MS + 3000)
        # RocketMQ writes the properties string before clearing the REAL_ names.
        assert message.properties[props.REAL_TOPIC] == TOPIC
        assert timer.run_once() == 0  # once only
    finally:
        timer.shutdown()


def test_files_in_rocketmq_layout(store: MessageStore) -> None:
    clock = Clock()
    timer = TimerMessageStore(store, clock=clock)
    timer_send(store, clock.now, BASE_MS + 5500, b"a")
    timer_send(store, clock.now, BASE_MS + 5700, b"b")
    timer.run_once()
    timer.shutdown()
    root = store.root
    assert os.path.getsize(os.path.join(root, "timerwheel")) == fmt.WHEEL_FILE_SIZE
    assert os.path.getsize(os.path.join(root, "config", "timercheck")) == 4096
    with open(os.path.join(root, "timerlog", "0" * 20), "rb") as f:
        data = f.read(2 * fmt.UNIT_SIZE)
    first = fmt.decode_unit(data, 0)
    second = fmt.decode_unit(data, fmt.UNIT_SIZE)
    assert first is not None and second is not None
    assert first.prev_pos == -1 and second.prev_pos == 0  # one slot's chain
    assert first.delayed_time_ms == BASE_MS + 5000 and first.enqueue_time_ms == BASE_MS
    with open(os.path.join(root, "timerwheel"), "rb") as f:
        wheel = f.read()
    slot = fmt.decode_slot(wheel, fmt.slot_index(BASE_MS + 5000, 1000) * 32, 1000)
    assert slot == fmt.Slot(BASE_MS + 5000, 0, fmt.UNIT_SIZE, 2, 0)
    with open(os.path.join(root, "config", "timercheck"), "rb") as f:
        checkpoint = fmt.decode_timer_checkpoint(f.read())
    assert checkpoint.last_timer_queue_offset == 2
    assert checkpoint.last_timer_log_flush_pos == 2 * fmt.UNIT_SIZE


def test_survives_a_restart(tmp_path: Path) -> None:
    clock = Clock()
    store = MessageStore.open(tmp_path / "s", CONFIG)
    timer = TimerMessageStore(store, clock=clock)
    timer_send(store, clock.now, BASE_MS + 1500, b"early")
    timer_send(store, clock.now, BASE_MS + 60_500, b"late")
    timer.run_once()
    clock.now = BASE_MS + 2000
    timer.run_once()
    timer.shutdown()
    store.close()
    assert os.path.exists(tmp_path / "s" / "config" / "timercheck")

    clock.now = BASE_MS + 30_000
    store = MessageStore.open(tmp_path / "s", CONFIG)
    timer = TimerMessageStore(store, clock=clock)
    try:
        timer.run_once()
        assert delivered(store) == [b"early"]
        clock.now = BASE_MS + 61_000
        timer.run_once()
        assert delivered(store) == [b"early", b"late"]
    finally:
        timer.shutdown()
        store.close()


def test_recovers_without_a_checkpoint(tmp_path: Path) -> None:
    """A kill before the first checkpoint: the timer log's units rebuild the slots and the
    timer queue goes on after the last unit's message."""
    clock = Clock()
    store = MessageStore.open(tmp_path / "s", CONFIG)
    timer = TimerMessageStore(store, clock=clock)
    for i in range(3):
        timer_send(store, clock.now, BASE_MS + 10_500, bytes([65 + i]))
    timer.run_once()
    # No persist and no shutdown: as after a SIGKILL (the page cache keeps the bytes).
    timer.wheel.put(fmt.Slot(BASE_MS + 10_000, -1, -1))  # the wheel lost the slot
    store.close()
    assert not os.path.exists(tmp_path / "s" / "config" / "timercheck")
    store = MessageStore.open(tmp_path / "s", CONFIG)
    timer = TimerMessageStore(store, clock=clock)
    try:
        assert timer.queue_offset == 3
        clock.now = BASE_MS + 11_000
        timer.run_once()
        assert delivered(store) == [b"A", b"B", b"C"]
    finally:
        timer.shutdown()
        store.close()


def test_far_time_rolls(store: MessageStore) -> None:
    clock = Clock()
    timer = TimerMessageStore(store, clock=clock)
    timer.roll_window_slots = 10  # 10 s of steps instead of two days
    try:
        timer_send(store, clock.now, BASE_MS + 25_500, b"far")
        timer.run_once()
        clock.now = BASE_MS + 12_000
        timer.run_once()  # the roll: back into the timer topic
        assert delivered(store) == []
        assert store.max_offset(TIMER_TOPIC, 0) == 2
        clock.now = BASE_MS + 25_999
        timer.run_once()
        assert delivered(store) == []
        clock.now = BASE_MS + 26_000
        timer.run_once()
        got = messages(store)
        assert [m.body for m in got] == [b"far"]
        assert got[0].properties[props.TIMER_ROLL_TIMES] == "1"
    finally:
        timer.shutdown()


def test_delete_drops_the_message(store: MessageStore) -> None:
    clock = Clock()
    timer = TimerMessageStore(store, clock=clock)
    try:
        timer_send(store, clock.now, BASE_MS + 3500, b"k")
        timer_send(store, clock.now, BASE_MS + 3500, b"j")
        timer_send(
            store, clock.now, BASE_MS + 3500, b"d", **{props.TIMER_DEL_UNIQKEY: f"{TOPIC}+U6b"}
        )
        timer.run_once()
        clock.now = BASE_MS + 4000
        timer.run_once()
        assert delivered(store) == [b"j"]
    finally:
        timer.shutdown()


def test_due_at_enqueue_is_put_at_once(store: MessageStore) -> None:
    clock = Clock()
    timer = TimerMessageStore(store, clock=clock)
    try:
        timer_send(store, clock.now, BASE_MS + 1500, b"x")
        clock.now = BASE_MS + 5000  # the wheel saw nothing until now
        timer.run_once()
        message = messages(store)[0]
        assert message.properties[props.TIMER_ENQUEUE_MS] == str(2**63 - 1)
    finally:
        timer.shutdown()


def test_many_in_one_slot_in_order(tmp_path: Path) -> None:
    config = CONFIG.replace(mapped_file_size_commit_log=8 * 1024 * 1024)
    store = MessageStore.open(tmp_path / "s", config)
    clock = Clock()
    timer = TimerMessageStore(store, clock=clock)
    try:
        count = 3000  # over 2 timer log files of 64 KiB
        for i in range(count):
            timer_send(store, clock.now, BASE_MS + 2500, i.to_bytes(2, "big"))
        timer.run_once()
        clock.now = BASE_MS + 3000
        assert timer.run_once() == count
        assert delivered(store) == [i.to_bytes(2, "big") for i in range(count)]
    finally:
        timer.shutdown()
        store.close()


def test_timer_log_files_go_with_their_messages(tmp_path: Path) -> None:
    """A timer log file whose last unit names a message below the CommitLog's first
    offset is deleted (never the last file); one whose messages are there stays."""
    config = CONFIG.replace(mapped_file_size_timer_log=4096)  # 78 units a file
    store = MessageStore.open(tmp_path / "s", config)
    clock = Clock()
    timer = TimerMessageStore(store, clock=clock)
    try:
        for i in range(200):
            timer_send(store, clock.now, BASE_MS + 60_500, i.to_bytes(2, "big"))
        timer.run_once()
        files = timer.timer_log.files
        assert len(files.files) == 3
        assert timer.timer_log.last_unit_position() == 77 * fmt.UNIT_SIZE
        assert timer.delete_expired_files() == 0  # the CommitLog still has them all
        last_of_first = timer.timer_log.read(77 * fmt.UNIT_SIZE)
        assert last_of_first is not None
        assert timer.timer_log.delete_expired(last_of_first.commit_log_offset) == 0
        assert timer.timer_log.delete_expired(last_of_first.commit_log_offset + 1) == 1
        assert timer.timer_log.delete_expired(2**62) == 1  # the last file stays
        assert [m.file_from_offset for m in files.files] == [8192]
    finally:
        timer.shutdown()
        store.close()


def test_runtime_info_as_rocketmq_5(store: MessageStore) -> None:
    clock = Clock()
    timer = TimerMessageStore(store, clock=clock)
    try:
        for i in range(3):
            timer_send(store, clock.now, BASE_MS + 5500 + i * 1000, bytes([i]))
        info = timer.runtime_info()
        assert info["timerOffsetBehind"] == "3" and info["timerCongestNum"] == "0"
        timer.run_once()
        info = timer.runtime_info()
        assert info["timerOffsetBehind"] == "0"
        assert info["timerCongestNum"] == "3"  # in the wheel, not yet due
        assert float(info["timerEnqueueTps"]) > 0
        clock.now = BASE_MS + 7000
        timer.run_once()  # two slots over
        assert timer.runtime_info()["timerCongestNum"] == "1"
        clock.now = BASE_MS + 20_000
        assert timer.runtime_info()["timerReadBehind"] == "13"
    finally:
        timer.shutdown()


def test_the_metrics_endpoint_shows_the_timer(tmp_path: Path) -> None:
    from rocketstore.broker.metrics import BrokerCollector
    from tests.unit.broker.broker_helpers import make_context

    ctx = make_context(tmp_path / "broker", mapped_file_size_timer_log=64 * 1024)
    clock = Clock()
    try:
        ctx.timer = TimerMessageStore(ctx.store, clock=clock)

        def samples() -> dict[str, float]:
            return {
                sample.name: sample.value
                for family in BrokerCollector(ctx).collect()
                if "timer" in family.name
                for sample in family.samples
            }

        timer_send(ctx.store, clock.now, BASE_MS + 10_000)
        timer_send(ctx.store, clock.now, BASE_MS + 10_000, body=b"y")
        before = samples()
        assert before["rocketmq_timer_enqueue_lag"] == 2
        assert before["rocketstore_timer_enqueued_total"] == 0
        ctx.timer.run_once()
        assert samples()["rocketmq_timer_enqueue_lag"] == 0
        assert samples()["rocketstore_timer_enqueued_total"] == 2
        clock.now += 11_000
        ctx.timer.run_once()
        after = samples()
        assert after["rocketstore_timer_delivered_total"] == 2
        assert 0 <= after["rocketmq_timer_dequeue_latency"] <= 11_000
    finally:
        if ctx.timer is not None:
            ctx.timer.shutdown()
        ctx.store.close()
