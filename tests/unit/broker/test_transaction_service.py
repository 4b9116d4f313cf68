"""Transactional messages through the broker's processors and the check, with an injected
clock: the half message a send stores, END_TRANSACTION's commit, rollback, "unknown" and
refusals, and the check pass (timeout, re-store and request, check limit, immunity, op
progress, restart)."""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketstore.broker.codes import RequestCode, ResponseCode
from rocketstore.broker.consumer_offsets import ConsumerOffsets
from rocketstore.broker.context import BrokerContext
from rocketstore.broker.remoting import RemotingCommand
from rocketstore.broker.router import BrokerRouter
from rocketstore.broker.transaction import (
    COMMIT,
    ROLLBACK,
    TRANS_GROUP,
    UNKNOWN,
)
from rocketstore.broker.transaction_service import CheckRequest, TransactionService
from rocketstore.format import properties as props
from rocketstore.format import sysflag
from rocketstore.format.message import MessageExt
from rocketstore.format.message_id import offset_msg_id
from rocketstore.paths import TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from tests.unit.broker.broker_helpers import (
    BROKER_ADDR,
    CLIENT_ADDR,
    FakeConnection,
    call,
    decode_records,
    make_context,
    send_v2,
)

GROUP = "TxGroup"
TIMEOUT_MS = 6_000


class Clock:
    def __init__(self) -> None:
        self.now = time.time_ns() // 1_000_000

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def ctx(tmp_path: Path, clock: Clock) -> Iterator[BrokerContext]:
    context = make_context(tmp_path / "store")
    context.transactions = TransactionService(
        context.store, context.offsets, context.topics, BROKER_ADDR, clock=clock
    )
    yield context
    context.store.close()


def tx_properties(uniq: str = "AC11000100002A9F0000000000000001", **extra: str) -> str:
    values = {
        "TRAN_MSG": "true",
        "PGROUP": GROUP,
        "KEYS": "k1",
        "TAGS": "TagA",
        "UNIQ_KEY": uniq,
        "WAIT": "true",
        **extra,
    }
    return props.encode_properties_str(values)


def send_tx(ctx: BrokerContext, clock: Clock, body: bytes = b"tx", **extra: str) -> RemotingCommand:
    ext = send_v2("TopicA", queue_id=2, properties=tx_properties(**extra), born=clock.now)
    answer = call(ctx, RequestCode.SEND_MESSAGE_V2, ext, body)
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    ctx.store.wait_dispatched()
    return answer


def end_tx(
    ctx: BrokerContext,
    kind: int,
    queue_offset: int,
    commit_log_offset: int,
    *,
    group: str = GROUP,
    from_check: bool = False,
) -> RemotingCommand | None:
    ext = {
        "producerGroup": group,
        "tranStateTableOffset": str(queue_offset),
        "commitLogOffset": str(commit_log_offset),
        "commitOrRollback": str(kind),
        "fromTransactionCheck": str(from_check).lower(),
        "msgId": "AC11000100002A9F0000000000000001",
        "transactionId": "AC11000100002A9F0000000000000001",
    }
    command = RemotingCommand(RequestCode.END_TRANSACTION, opaque=5, ext_fields=ext)

    async def go() -> RemotingCommand | None:
        return await BrokerRouter(ctx).handle(command, FakeConnection())  # type: ignore[arg-type]

    answer = asyncio.run(go())
    ctx.store.wait_dispatched()
    return answer


def queue(ctx: BrokerContext, topic: str, queue_id: int = 0) -> list[MessageExt]:
    if (topic, queue_id) not in ctx.store.queues:
        return []
    got = ctx.store.get_messages("check", topic, queue_id, 0, 64)
    return got.messages


def half_offsets(answer: RemotingCommand) -> tuple[int, int]:
    """The half message's queue offset and CommitLog offset, as a client reads them from
    the send answer (queueOffset, and the offset inside msgId)."""
    commit_log_offset = int(answer.ext_fields["msgId"][16:], 16)
    return int(answer.ext_fields["queueOffset"]), commit_log_offset


# --- sending ----------------------------------------------------------------------------


def test_a_transactional_send_stores_a_half_message(ctx: BrokerContext, clock: Clock) -> None:
    answer = send_tx(ctx, clock, b"payload")
    [half] = queue(ctx, TRANS_HALF_TOPIC)
    assert answer.ext_fields["queueId"] == "2"  # the queue the producer asked for
    assert answer.ext_fields["queueOffset"] == "0"  # the half message's
    assert answer.ext_fields["msgId"] == offset_msg_id(BROKER_ADDR, half.commit_log_offset)
    assert (half.topic, half.queue_id, half.body) == (TRANS_HALF_TOPIC, 0, b"payload")
    assert sysflag.transaction_type(half.sys_flag) == sysflag.TRANSACTION_NOT_TYPE
    assert half.properties["REAL_TOPIC"] == "TopicA" and half.properties["REAL_QID"] == "2"
    assert half.properties["WAIT"] == "true"  # kept: RocketMQ re-serialises after re-adding it
    assert half.properties["CLUSTER"] == ctx.cluster_name
    assert half.born_host == CLIENT_ADDR
    assert queue(ctx, "TopicA", 2) == []  # invisible until committed


def test_a_prepared_sys_flag_without_tran_msg_is_no_transaction(ctx: BrokerContext) -> None:
    """RocketMQ decides by the TRAN_MSG property: such a send is stored as it came (a
    PREPARED record, which gets no queue entry)."""
    ext = send_v2("TopicA", sys_flag=sysflag.TRANSACTION_PREPARED_TYPE)
    answer = call(ctx, RequestCode.SEND_MESSAGE_V2, ext, b"x")
    assert answer.code == ResponseCode.SUCCESS
    ctx.store.wait_dispatched()
    assert queue(ctx, TRANS_HALF_TOPIC) == [] and queue(ctx, "TopicA") == []


def test_reject_transaction_message_refuses_the_send(ctx: BrokerContext, clock: Clock) -> None:
    ctx.config.reject_transaction_message = True
    ext = send_v2("TopicA", properties=tx_properties(), born=clock.now)
    answer = call(ctx, RequestCode.SEND_MESSAGE_V2, ext, b"x")
    assert answer.code == ResponseCode.NO_PERMISSION
    assert answer.remark == "the broker[127.0.0.1] sending transaction message is forbidden"


# --- ending -----------------------------------------------------------------------------


def test_commit_stores_the_message_for_its_topic(ctx: BrokerContext, clock: Clock) -> None:
    queue_offset, commit_log_offset = half_offsets(send_tx(ctx, clock, b"payload"))
    answer = end_tx(ctx, COMMIT, queue_offset, commit_log_offset)
    assert answer is not None and answer.code == ResponseCode.SUCCESS
    [half] = queue(ctx, TRANS_HALF_TOPIC)
    [message] = queue(ctx, "TopicA", 2)
    assert sysflag.transaction_type(message.sys_flag) == sysflag.TRANSACTION_COMMIT_TYPE
    assert message.prepared_transaction_offset == commit_log_offset
    assert (message.body, message.queue_offset, message.born_host) == (b"payload", 0, CLIENT_ADDR)
    # The properties string is the half message's, re-serialised in HashMap order.
    assert list(message.properties.items()) == list(half.properties.items())
    [op] = queue(ctx, TRANS_OP_HALF_TOPIC)
    assert (op.body, op.tags, op.queue_id, op.born_host) == (b"0", "d", 0, BROKER_ADDR)
    assert list(op.properties) == ["WAIT", "TAGS"]
    # A consumer pulls it like any message.
    pulled = call(
        ctx,
        RequestCode.PULL_MESSAGE,
        {"consumerGroup": "G", "topic": "TopicA", "queueId": 2, "queueOffset": 0}
        | {"maxMsgNums": 32, "sysFlag": 4, "commitOffset": 0, "suspendTimeoutMillis": 0}
        | {"subscription": "TagA", "subVersion": 0},
    )
    assert pulled.code == ResponseCode.SUCCESS
    assert [m.body for m in decode_records(pulled.body)] == [b"payload"]


def test_a_committed_timer_message_waits_in_the_timer_topic(
    ctx: BrokerContext, clock: Clock
) -> None:
    """RocketMQ 5's put hook sends a committed message with a delivery time to the timer
    wheel, as any timer send: rmq_sys_wheel_timer, its real topic and queue in REAL_*."""
    queue_offset, commit_log_offset = half_offsets(
        send_tx(ctx, clock, b"later", TIMER_DELAY_SEC="30")
    )
    answer = end_tx(ctx, COMMIT, queue_offset, commit_log_offset)
    assert answer is not None and answer.code == ResponseCode.SUCCESS, answer
    assert queue(ctx, "TopicA", 2) == []
    [waiting] = queue(ctx, "rmq_sys_wheel_timer")
    assert (waiting.body, waiting.properties["REAL_TOPIC"]) == (b"later", "TopicA")
    assert waiting.properties["REAL_QID"] == "2" and "TIMER_OUT_MS" in waiting.properties
    assert sysflag.transaction_type(waiting.sys_flag) == sysflag.TRANSACTION_COMMIT_TYPE
    [_op] = queue(ctx, TRANS_OP_HALF_TOPIC)  # the transaction is done


def test_rollback_stores_only_the_op_message(ctx: BrokerContext, clock: Clock) -> None:
    queue_offset, commit_log_offset = half_offsets(send_tx(ctx, clock))
    answer = end_tx(ctx, ROLLBACK, queue_offset, commit_log_offset)
    assert answer is not None and answer.code == ResponseCode.SUCCESS
    assert queue(ctx, "TopicA", 2) == []
    assert [op.body for op in queue(ctx, TRANS_OP_HALF_TOPIC)] == [b"0"]


def test_unknown_is_left_for_the_check_and_not_answered(ctx: BrokerContext, clock: Clock) -> None:
    queue_offset, commit_log_offset = half_offsets(send_tx(ctx, clock))
    assert end_tx(ctx, UNKNOWN, queue_offset, commit_log_offset) is None
    assert end_tx(ctx, 5, queue_offset, commit_log_offset, from_check=True) is None
    assert queue(ctx, "TopicA", 2) == [] and queue(ctx, TRANS_OP_HALF_TOPIC) == []


def test_end_transaction_refusals(ctx: BrokerContext, clock: Clock) -> None:
    queue_offset, commit_log_offset = half_offsets(send_tx(ctx, clock))
    plain = call(ctx, RequestCode.SEND_MESSAGE_V2, send_v2("TopicA"), b"plain")
    plain_offset = int(plain.ext_fields["msgId"][16:], 16)
    cases = [
        (dict(group="Other"), queue_offset, commit_log_offset, "The producer group wrong"),
        ({}, queue_offset + 1, commit_log_offset, "The transaction state table offset wrong"),
        ({}, queue_offset, 10**9, "Find prepared transaction message failed"),
        ({}, 0, plain_offset, "is not a prepared transaction message"),
    ]
    for extra, offset, log_offset, remark in cases:
        answer = end_tx(ctx, COMMIT, offset, log_offset, **extra)  # type: ignore[arg-type]
        assert answer is not None and answer.code == ResponseCode.SYSTEM_ERROR
        assert remark in (answer.remark or "")
    missing = call(ctx, RequestCode.END_TRANSACTION, {"producerGroup": GROUP})
    assert missing.code == ResponseCode.SYSTEM_ERROR and "tranStateTableOffset" in (
        missing.remark or ""
    )
    assert queue(ctx, "TopicA", 2) == [] and queue(ctx, TRANS_OP_HALF_TOPIC) == []


# --- checking ---------------------------------------------------------------------------


def service(ctx: BrokerContext) -> TransactionService:
    assert ctx.transactions is not None
    return ctx.transactions


def progress(ctx: BrokerContext) -> tuple[int | None, int | None]:
    return (
        ctx.offsets.query(TRANS_GROUP, TRANS_HALF_TOPIC, 0),
        ctx.offsets.query(TRANS_GROUP, TRANS_OP_HALF_TOPIC, 0),
    )


def check(ctx: BrokerContext, clock: Clock, after_ms: int) -> list[CheckRequest]:
    clock.now += after_ms
    requests = service(ctx).check()
    ctx.store.wait_dispatched()
    return requests


def test_a_young_half_message_is_not_checked(ctx: BrokerContext, clock: Clock) -> None:
    send_tx(ctx, clock)
    assert check(ctx, clock, TIMEOUT_MS - 100) == []
    assert progress(ctx) == (None, None)
    assert len(queue(ctx, TRANS_HALF_TOPIC)) == 1


def test_an_open_transaction_is_checked_then_committed(ctx: BrokerContext, clock: Clock) -> None:
    send_tx(ctx, clock, b"payload")
    [request] = check(ctx, clock, TIMEOUT_MS + 1)
    original, copy = queue(ctx, TRANS_HALF_TOPIC)
    assert copy.queue_offset == 1 and copy.properties[props.TRANSACTION_CHECK_TIMES] == "1"
    assert copy.flag == 0 and copy.body == b"payload"
    assert request.producer_group == GROUP
    assert request.fields == {
        "tranStateTableOffset": "1",
        "commitLogOffset": str(copy.commit_log_offset),
        "offsetMsgId": offset_msg_id(BROKER_ADDR, copy.commit_log_offset),
        "msgId": "AC11000100002A9F0000000000000001",
        "transactionId": "AC11000100002A9F0000000000000001",
    }
    [sent] = decode_records(request.body)
    assert (sent.topic, sent.queue_id, sent.queue_offset) == ("TopicA", 2, 1)
    assert sent.commit_log_offset == copy.commit_log_offset
    assert sent.properties == copy.properties and sent.body == b"payload"
    assert progress(ctx) == (1, None)
    # The producer answers the check for the copy.
    answer = end_tx(ctx, COMMIT, 1, copy.commit_log_offset, from_check=True)
    assert answer is not None and answer.code == ResponseCode.SUCCESS
    assert [m.body for m in queue(ctx, "TopicA", 2)] == [b"payload"]
    assert check(ctx, clock, TIMEOUT_MS + 1) == []
    assert progress(ctx) == (2, 1)
    assert original.queue_offset == 0


def test_ended_transactions_are_passed_over(ctx: BrokerContext, clock: Clock) -> None:
    for index in range(3):
        queue_offset, commit_log_offset = half_offsets(
            send_tx(ctx, clock, uniq=f"AC11000100002A9F000000000000000{index}")
        )
        end_tx(ctx, (COMMIT, ROLLBACK, COMMIT)[index], queue_offset, commit_log_offset)
    assert check(ctx, clock, TIMEOUT_MS + 1) == []
    assert progress(ctx) == (3, 3)
    assert len(queue(ctx, TRANS_HALF_TOPIC)) == 3  # nothing stored again


def test_a_half_message_checked_too_often_is_moved_aside(ctx: BrokerContext, clock: Clock) -> None:
    service(ctx).check_max = 2
    send_tx(ctx, clock, b"payload")
    assert len(check(ctx, clock, TIMEOUT_MS + 1)) == 1
    assert len(check(ctx, clock, TIMEOUT_MS + 1)) == 1
    assert check(ctx, clock, TIMEOUT_MS + 1) == []  # the third time: discarded
    [discarded] = queue(ctx, TRANS_CHECK_MAX_TIME_TOPIC)
    assert discarded.body == b"payload" and discarded.properties["TRANSACTION_CHECK_TIMES"] == "2"
    assert ctx.topics.get(TRANS_CHECK_MAX_TIME_TOPIC) is not None
    assert progress(ctx)[0] == 3 and len(queue(ctx, TRANS_HALF_TOPIC)) == 3


def test_a_half_message_born_before_the_retention_is_moved_aside(
    ctx: BrokerContext, clock: Clock
) -> None:
    send_tx(ctx, clock)
    retention_ms = ctx.store.config.file_reserved_time * 3600 * 1000
    assert check(ctx, clock, retention_ms + 1) == []
    assert len(queue(ctx, TRANS_CHECK_MAX_TIME_TOPIC)) == 1


def test_check_immunity_stores_stand_ins_until_it_is_over(ctx: BrokerContext, clock: Clock) -> None:
    """As in RocketMQ 4.9.8: inside its immunity a half message is stored again as a
    stand-in naming it (TRAN_PREPARED_QUEUE_OFFSET). A stand-in is passed over only when
    the op message for the original is read in the same pass at or above the progress;
    an op message for the original (offset 0) read once the progress is past it only
    advances the op progress, so the stand-in is stored again, and checked once the
    immunity is over (the producer is then asked about a transaction it may have ended
    already; a commit then stores the message a second time, as with RocketMQ)."""
    queue_offset, commit_log_offset = half_offsets(
        send_tx(ctx, clock, CHECK_IMMUNITY_TIME_IN_SECONDS="60")
    )
    # Past the timeout but inside its 60 s: a stand-in copy, no request.
    assert check(ctx, clock, TIMEOUT_MS + 1) == []
    _, stand_in = queue(ctx, TRANS_HALF_TOPIC)
    assert stand_in.properties[props.TRAN_PREPARED_QUEUE_OFFSET] == "0"
    assert progress(ctx)[0] == 1
    end_tx(ctx, COMMIT, queue_offset, commit_log_offset)
    assert check(ctx, clock, 1000) == []
    assert progress(ctx) == (2, 1)
    assert queue(ctx, TRANS_HALF_TOPIC)[2].properties[props.TRAN_PREPARED_QUEUE_OFFSET] == "0"
    [request] = check(ctx, clock, 60_000)
    assert request.fields["tranStateTableOffset"] == "3"


def test_immunity_over_means_a_check(ctx: BrokerContext, clock: Clock) -> None:
    send_tx(ctx, clock, CHECK_IMMUNITY_TIME_IN_SECONDS="10")
    [request] = check(ctx, clock, 10_001)
    assert request.fields["tranStateTableOffset"] == "1"


def test_a_message_stored_during_the_pass_waits(ctx: BrokerContext, clock: Clock) -> None:
    clock.now -= 60_000  # the pass starts before the half message was stored
    send_tx(ctx, clock)
    clock.now -= TIMEOUT_MS + 1
    assert check(ctx, clock, 0) == []
    assert progress(ctx) == (None, None)


def test_progress_survives_a_restart(ctx: BrokerContext, clock: Clock, tmp_path: Path) -> None:
    send_tx(ctx, clock)
    assert len(check(ctx, clock, TIMEOUT_MS + 1)) == 1
    ctx.offsets.persist(force=True)
    reloaded = ConsumerOffsets(tmp_path / "store")
    assert reloaded.query(TRANS_GROUP, TRANS_HALF_TOPIC, 0) == 1
    again = TransactionService(ctx.store, reloaded, ctx.topics, BROKER_ADDR, clock=clock)
    clock.now += TIMEOUT_MS + 1
    [request] = again.check()  # the copy at offset 1, checked a second time
    assert request.fields["tranStateTableOffset"] == "2"


def test_the_check_goes_to_a_producer_of_the_group(ctx: BrokerContext) -> None:
    request = CheckRequest(GROUP, {"tranStateTableOffset": "1"}, b"body")
    assert ctx.send_transaction_check(request) is False  # nobody to ask
    first, second = FakeConnection(), FakeConnection()
    ctx.clients.register_producer(GROUP, "c1", first)
    ctx.clients.register_producer(GROUP, "c2", second)
    for _ in range(4):
        assert ctx.send_transaction_check(request) is True
    assert len(first.sent) == 2 and len(second.sent) == 2  # in turn
    command = first.sent[0]
    assert command.code == RequestCode.CHECK_TRANSACTION_STATE and command.is_oneway
    assert command.ext_fields == {"tranStateTableOffset": "1"} and command.body == b"body"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.sampled_from(["commit", "rollback", "open"]), min_size=1, max_size=6),
    st.lists(st.booleans(), min_size=6, max_size=6),
)
def test_every_transaction_ends_exactly_once(outcomes: list[str], answers: list[bool]) -> None:
    """Transactions ended by their producer are never checked; each open one is checked
    once, and once the producer answers the check nothing is left: the topic holds
    exactly the committed messages, and both progress offsets reach the ends."""
    with tempfile.TemporaryDirectory() as scratch:
        clock = Clock()
        context = make_context(Path(scratch) / "store")
        context.transactions = TransactionService(
            context.store, context.offsets, context.topics, BROKER_ADDR, clock=clock
        )
        try:
            committed: set[str] = set()
            open_keys: set[str] = set()
            for index, outcome in enumerate(outcomes):
                uniq = f"AC11000100002A9F00000000000000{index:02X}"
                sent = send_tx(context, clock, body=uniq.encode(), uniq=uniq)
                queue_offset, commit_log_offset = half_offsets(sent)
                if outcome == "open":
                    open_keys.add(uniq)
                    continue
                kind = COMMIT if outcome == "commit" else ROLLBACK
                end_tx(context, kind, queue_offset, commit_log_offset)
                if kind == COMMIT:
                    committed.add(uniq)
            requests = check(context, clock, TIMEOUT_MS + 1)
            assert {r.fields["msgId"] for r in requests} == open_keys
            assert len(requests) == len(open_keys)
            for request, commit in zip(requests, answers, strict=False):
                answer = end_tx(
                    context,
                    COMMIT if commit else ROLLBACK,
                    int(request.fields["tranStateTableOffset"]),
                    int(request.fields["commitLogOffset"]),
                    from_check=True,
                )
                assert answer is not None and answer.code == ResponseCode.SUCCESS
                if commit:
                    committed.add(request.fields["msgId"])
            assert check(context, clock, TIMEOUT_MS + 1) == []
            stored = [m.uniq_key or "" for m in queue(context, "TopicA", 2)]
            assert sorted(stored) == sorted(committed)  # each exactly once
            assert progress(context) == (len(outcomes) + len(open_keys), len(outcomes))
        finally:
            context.store.close()


def test_ended_transactions_are_counted_by_their_topic(ctx: BrokerContext, clock: Clock) -> None:
    from rocketstore.broker.metrics import BrokerCollector

    committed = half_offsets(send_tx(ctx, clock, uniq="AC11000100002A9F0000000000000011"))
    rolled_back = half_offsets(send_tx(ctx, clock, uniq="AC11000100002A9F0000000000000012"))
    answer = end_tx(ctx, sysflag.TRANSACTION_COMMIT_TYPE, *committed)
    assert answer is not None and answer.code == ResponseCode.SUCCESS
    answer = end_tx(ctx, sysflag.TRANSACTION_ROLLBACK_TYPE, *rolled_back)
    assert answer is not None and answer.code == ResponseCode.SUCCESS
    # a refused end counts nothing
    answer = end_tx(ctx, sysflag.TRANSACTION_COMMIT_TYPE, committed[0] + 7, committed[1])
    assert answer is not None and answer.code != ResponseCode.SUCCESS
    assert ctx.transactions is not None
    assert ctx.transactions.ended_counts() == {("TopicA", True): 1, ("TopicA", False): 1}
    samples = {
        (sample.name, sample.labels.get("topic")): sample.value
        for family in BrokerCollector(ctx).collect()
        for sample in family.samples
        if family.name in ("rocketmq_commit_messages", "rocketmq_rollback_messages")
    }
    assert samples == {
        ("rocketmq_commit_messages_total", "TopicA"): 1,
        ("rocketmq_rollback_messages_total", "TopicA"): 1,
    }
