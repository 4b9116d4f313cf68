from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("grpc")

from rocketstore.broker.grpc.pop import AckStatus, PopState, ReceiptHandle


def test_receipt_handle_has_rocketmq_layout():
    handle = ReceiptHandle(5, 1000, 30000, 0, "0", "broker-a", 2, 5, 4096)
    # ReceiptHandle.decode's order: startOffset retrieveTime invisibleTime reviveQueueId
    # topicType brokerName queueId offset commitLogOffset
    assert handle.encode() == "5 1000 30000 0 0 broker-a 2 5 4096"
    assert ReceiptHandle.decode(handle.encode()) == handle
    assert handle.expires_ms == 31000


@given(
    st.integers(0, 2**62),
    st.integers(0, 2**62),
    st.integers(0, 2**31),
    st.integers(0, 64),
    st.integers(0, 2**62),
)
def test_receipt_handle_round_trips(offset, pop_ms, invisible_ms, queue_id, commit_log_offset):
    handle = ReceiptHandle(
        offset, pop_ms, invisible_ms, 0, "0", "b", queue_id, offset, commit_log_offset
    )
    assert ReceiptHandle.decode(handle.encode()) == handle


@given(st.text())
def test_decoding_anything_gives_a_handle_or_none(text):
    found = ReceiptHandle.decode(text)
    assert found is None or isinstance(found, ReceiptHandle)


def test_short_handles_are_not_handles():
    assert ReceiptHandle.decode("1 2 3") is None
    assert ReceiptHandle.decode("a b c d e f g h") is None
    # The commit log offset is optional (RocketMQ's older handles).
    old = ReceiptHandle.decode("1 2 3 0 0 b 1 1")
    assert old is not None and old.commit_log_offset == -1


def _state_with_one(now=1000, invisible=10_000):
    state = PopState("broker-a")
    cursor = state.cursor("g", "t", 1, lambda: 7)
    assert cursor.next_offset == 7
    handle = state.hand_out(cursor, 1, 7, 700, 1, now, invisible)
    cursor.next_offset = 8
    return state, cursor, handle


def test_ack_removes_the_message_and_moves_the_lowest_unacked():
    state, cursor, handle = _state_with_one()
    assert cursor.lowest_unacked == 7
    assert state.ack("g", "t", handle) is AckStatus.OK
    assert cursor.lowest_unacked == 8
    assert state.ack("g", "t", handle) is AckStatus.INVALID  # acknowledged already


def test_handles_of_another_group_broker_or_delivery_are_invalid():
    state, cursor, handle = _state_with_one()
    assert state.ack("other", "t", handle) is AckStatus.INVALID
    forged = ReceiptHandle(7, handle.pop_ms + 1, 10_000, 0, "0", "broker-a", 1, 7, 700)
    assert state.ack("g", "t", forged) is AckStatus.INVALID
    elsewhere = ReceiptHandle(7, handle.pop_ms, 10_000, 0, "0", "broker-b", 1, 7, 700)
    assert state.ack("g", "t", elsewhere) is AckStatus.INVALID
    assert cursor.in_flight  # still held


def test_overdue_messages_come_back_and_old_handles_die():
    state, cursor, handle = _state_with_one(now=1000, invisible=10_000)
    assert cursor.overdue(10_999) == []
    (due,) = cursor.overdue(11_000)
    assert due.offset == 7 and due.attempt == 1
    again = state.hand_out(cursor, 1, 7, 700, due.attempt + 1, 11_000, 10_000)
    assert cursor.in_flight[7].attempt == 2
    assert state.ack("g", "t", handle) is AckStatus.INVALID
    assert state.ack("g", "t", again) is AckStatus.OK


def test_change_invisible_gives_a_new_handle():
    state, cursor, handle = _state_with_one(now=1000, invisible=10_000)
    renewed = state.change_invisible("g", "t", handle, 30_000, 5000)
    assert renewed is not None
    assert renewed.pop_ms == 5000 and renewed.invisible_ms == 30_000
    assert cursor.next_visible_ms() == 35_000
    assert state.change_invisible("g", "t", handle, 30_000, 6000) is None  # the old one
    assert state.ack("g", "t", renewed) is AckStatus.OK


def test_state_document_round_trips_and_drops_what_was_acknowledged_since():
    state, _cursor, handle = _state_with_one(now=1000, invisible=10_000)
    later = state.cursor("g", "t", 2, lambda: 0)
    state.hand_out(later, 2, 0, 10, 1, 1000, 10_000)
    state.hand_out(later, 2, 1, 20, 3, 1000, 10_000)
    later.next_offset = 2
    document = state.to_document()
    assert document["version"] == 1 and len(document["queues"]) == 2

    restored = PopState("broker-a")
    # Queue 2's offset was committed at 1 after the file was written: offset 0 was
    # acknowledged since.
    committed = {("g", "t", 1): 7, ("g", "t", 2): 1}
    held = restored.load_document(document, lambda g, t, q: committed.get((g, t, q)))
    assert held == 2
    assert restored.ack("g", "t", handle) is AckStatus.OK  # a handle from before
    queue2 = restored.find("g", "t", 2)
    assert queue2 is not None and list(queue2.in_flight) == [1]
    assert queue2.in_flight[1].attempt == 3 and queue2.next_offset == 2


@pytest.mark.parametrize(
    "document",
    [None, {}, {"version": 2, "queues": []}, {"version": 1, "queues": [{"group": "g"}]}],
)
def test_bad_state_documents_are_refused(document):
    with pytest.raises(ValueError):
        PopState("b").load_document(document, lambda g, t, q: None)


def test_renewal_extends_only_a_live_clients_auto_renewed_messages():
    state = PopState("broker-a")
    cursor = state.cursor("G", "T", 0, lambda: 0)
    kept = state.hand_out(cursor, 0, 0, 100, 1, 1_000, 60_000, "client-1")
    state.hand_out(cursor, 0, 1, 200, 1, 1_000, 60_000)  # a SimpleConsumer's: never renewed
    state.hand_out(cursor, 0, 2, 300, 1, 1_000, 60_000, "gone")
    live = {"client-1"}.__contains__
    # Not yet within 10 s of its end: nothing to do.
    assert state.renew(40_000, live, 10_000, 60_000, 3 * 3600_000) == 0
    assert state.renew(55_000, live, 10_000, 60_000, 3 * 3600_000) == 1
    assert cursor.in_flight[0].visible_at_ms == 115_000
    assert cursor.in_flight[1].visible_at_ms == cursor.in_flight[2].visible_at_ms == 61_000
    assert state.ack("G", "T", kept) is AckStatus.OK  # the handle still acknowledges
    # Past renewMaxTimeMillis since it was taken: no more.
    state.hand_out(cursor, 0, 3, 400, 1, 1_000, 60_000, "client-1")
    assert state.renew(3 * 3600_000 + 2_000, live, 10**12, 60_000, 3 * 3600_000) == 0


def _replayed(state: PopState, committed=lambda g, t, q: None) -> PopState:
    """A new state from ``state``'s journal records alone."""
    again = PopState("broker-a")
    again.replay(state.take_changes(), committed)
    return again


def test_every_change_is_a_journal_record_and_replays_to_the_same_state():
    state = PopState("broker-a")
    cursor = state.cursor("g", "t", 1, lambda: 7)
    first = state.hand_out(cursor, 1, 7, 700, 1, 1000, 10_000)
    state.hand_out(cursor, 1, 8, 800, 1, 1000, 10_000)
    state.hand_out(cursor, 1, 9, 900, 1, 1000, 10_000)
    state.advance(cursor, 12)  # (10 and 11 filtered out)
    assert state.ack("g", "t", first) is AckStatus.OK
    second = ReceiptHandle(8, 1000, 10_000, 0, "0", "broker-a", 1, 8, 800)
    state.change_invisible("g", "t", second, 5_000, 2_000)
    state.hand_out(cursor, 1, 9, 900, 2, 11_000, 10_000)  # came again: attempt 2
    state.drop(cursor, 8)  # to the DLQ
    expected = state.to_document()
    assert _replayed(state).to_document() == expected
    assert state.take_changes() == []  # taken once


def test_replay_over_a_snapshot_and_the_committed_offset_floor():
    state = PopState("broker-a")
    cursor = state.cursor("g", "t", 0, lambda: 0)
    for offset in range(3):
        state.hand_out(cursor, 0, offset, offset * 100, 1, 1000, 10_000)
    state.advance(cursor, 3)
    snapshot = state.to_document(journal=4)
    state.take_changes()
    handle = ReceiptHandle(1, 1000, 10_000, 0, "0", "broker-a", 0, 1, 100)
    assert state.ack("g", "t", handle) is AckStatus.OK
    state.hand_out(cursor, 0, 2, 200, 2, 11_000, 10_000)
    records = state.take_changes()
    again = PopState("broker-a")
    again.load_document(snapshot, lambda g, t, q: None)
    assert again.replay(records, lambda g, t, q: None) == 2
    assert again.to_document(journal=4) == state.to_document(journal=4)
    # Records that are not records are skipped; the committed offset drops what is below.
    floored = PopState("broker-a")
    floored.load_document(snapshot, lambda g, t, q: None)
    junk: list[Any] = [["x"], 5, ["h", "g"]]
    assert floored.replay(junk + records, lambda g, t, q: 1) == 1
    only = floored.find("g", "t", 0)
    assert only is not None and list(only.in_flight) == [2]
    assert only.in_flight[2].attempt == 2


@given(
    st.lists(
        st.tuples(st.sampled_from(["hand", "ack", "change", "advance", "drop"]), st.integers(0, 5)),
        max_size=40,
    )
)
def test_any_sequence_of_changes_replays_to_the_same_state(steps):
    state = PopState("broker-a")
    cursor = state.cursor("g", "t", 0, lambda: 0)
    now = 1000
    for kind, offset in steps:
        now += 10
        held = cursor.in_flight.get(offset)
        if kind == "hand":
            state.hand_out(cursor, 0, offset, offset * 10, held.attempt + 1 if held else 1, now, 50)
            state.advance(cursor, offset + 1)
        elif kind == "advance":
            state.advance(cursor, offset)
        elif kind == "drop":
            state.drop(cursor, offset)
        elif held is not None:
            handle = ReceiptHandle(offset, held.pop_ms, 50, 0, "0", "broker-a", 0, offset, 0)
            if kind == "ack":
                state.ack("g", "t", handle)
            else:
                state.change_invisible("g", "t", handle, 70, now)
    assert _replayed(state).to_document() == state.to_document()


def test_a_changed_invisible_time_is_no_longer_renewed():
    """A PushConsumer answers a failed message with ChangeInvisibleDuration (its retry
    backoff, 10 s at first); the proxy then stops renewing it (ChangeInvisibleDuration-
    Activity removes the receipt handle), so it comes again. Renewed, it never came back
    while the client lived (found with the Java 5.x client)."""
    state = PopState("broker-a")
    cursor = state.cursor("G", "T", 0, lambda: 0)
    handle = state.hand_out(cursor, 0, 0, 100, 1, 1_000, 60_000, "client-1")
    changed = state.change_invisible("G", "T", handle, 10_000, 2_000)
    assert changed is not None
    live = {"client-1"}.__contains__
    assert state.renew(3_000, live, 10_000, 60_000, 3 * 3600_000) == 0
    assert cursor.in_flight[0].visible_at_ms == 12_000
    assert [m.offset for m in cursor.overdue(12_000)] == [0]


def test_a_dlq_move_begun_survives_the_journal_and_the_snapshot_until_it_is_done():
    state, cursor, _handle = _state_with_one()
    state.begin_dlq_move(cursor, 7, 42)
    state.begin_dlq_move(cursor, 99, 43)  # not in flight: nothing to record
    assert [(c.key, h.offset, h.dlq_from) for c, h in state.dlq_moves()] == [(("g", "t", 1), 7, 42)]
    records = state.take_changes()
    assert records[-1] == ["d", "g", "t", 1, 7, 42]
    again = PopState("broker-a")
    again.replay(records, lambda g, t, q: None)
    assert [h.dlq_from for _c, h in again.dlq_moves()] == [42]
    document = state.to_document()
    assert document["queues"][0]["inFlight"][0]["dlqFrom"] == 42
    loaded = PopState("broker-a")
    loaded.load_document(document, lambda g, t, q: None)
    assert [h.dlq_from for _c, h in loaded.dlq_moves()] == [42]
    state.drop(cursor, 7)  # the move done
    assert state.dlq_moves() == []
    assert "dlqFrom" not in str(PopState("broker-a").to_document())
