"""Transactional messages on the store: ending a transaction and checking the ones left
open (RocketMQ 4.9.8's ``EndTransactionProcessor``, ``TransactionalMessageServiceImpl``
and ``TransactionalMessageCheckService``).

Layer: broker, on the store's public API; synchronous (the broker calls it from worker
threads). The messages it writes are built by :mod:`rocketstore.broker.transaction`.

**Ending** (:meth:`TransactionService.end`): the half message is looked up by the
CommitLog offset the producer names and checked against the request (same producer
group, queue offset and CommitLog offset, else SYSTEM_ERROR with RocketMQ's remark). A
commit stores the message for its real topic; then, for a commit that was stored and for
every rollback, an op message marks the half message done. RocketMQ keeps no other
record of ended transactions: a second commit of the same half message stores it again,
as RocketMQ's does.

**Checking** (:meth:`TransactionService.check`), one pass over half queue 0 from the
progress recorded for group ``CID_RMQ_SYS_TRANS``:

* op messages from the op queue's progress fill a map "half offset -> op offset"; a half
  message in it is done, and the op queue's progress moves over the op messages so
  accounted for, in order;
* a half message without an op message is left for a later pass while younger than the
  transaction timeout (or its ``CHECK_IMMUNITY_TIME_IN_SECONDS``), and the pass stops
  there: the queue is in store order;
* an older one is stored again at the end of the half queue with
  ``TRANSACTION_CHECK_TIMES`` counted up, and a CHECK_TRANSACTION_STATE for that copy is
  returned for the broker to send to a producer of its group; the producer answers with
  END_TRANSACTION naming the copy;
* one checked ``check_max`` times already, or older than the CommitLog retention
  (``file_reserved_time``), goes to ``TRANS_CHECK_MAX_TIME_TOPIC`` instead;
* the half queue's progress moves past everything handled.

One deviation: when the op messages read so far neither mark a half message done nor
make it due, RocketMQ keeps re-reading the op queue (busily, up to its 60 s pass limit)
until the message's immunity ends; this pass stops instead and looks again at the next
one.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from rocketstore.broker.consumer_offsets import ConsumerOffsets
from rocketstore.broker.perm_name import PERM_READ, PERM_WRITE
from rocketstore.broker.topic_config import TopicConfig, TopicConfigManager
from rocketstore.broker.transaction import (
    COMMIT,
    REMOVE_TAG,
    ROLLBACK,
    TRANS_GROUP,
    TRANSACTION_CHECK_MAX,
    TRANSACTION_TIMEOUT_MS,
    check_request_body,
    check_request_fields,
    committed_message,
    counted_check,
    discarded_message,
    op_half_offset,
    op_message,
    parse_java_integer,
    real_destination,
    renewed_half_message,
)
from rocketstore.errors import StoreError
from rocketstore.format import properties as props
from rocketstore.format.message import Message, MessageExt
from rocketstore.paths import TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from rocketstore.put_path import PutResult
from rocketstore.status import GetStatus, PutStatus
from rocketstore.store import MessageStore
from rocketstore.store.timer import TimerRefusal, is_timer_message, timer_message_to_store

log = logging.getLogger(__name__)

# RocketMQ's MAX_PROCESS_TIME_LIMIT: one queue's pass stops after this long.
MAX_PASS_MS = 60_000
# How many op messages one read takes (fillOpRemoveMap).
OP_BATCH = 32
# MAX_RETRY_COUNT_WHEN_HALF_NULL: half offsets with no message a pass steps over.
MAX_HALF_MISSES = 1


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class EndCode(enum.IntEnum):
    """The response codes an END_TRANSACTION can end with (ResponseCode)."""

    SUCCESS = 0
    SYSTEM_ERROR = 1
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14


@dataclass(frozen=True)
class EndOutcome:
    code: EndCode
    remark: str | None = None


@dataclass(frozen=True)
class EndRequest:
    """EndTransactionRequestHeader."""

    producer_group: str
    tran_state_table_offset: int
    commit_log_offset: int
    commit_or_rollback: int
    from_transaction_check: bool = False
    msg_id: str = ""
    transaction_id: str | None = None


@dataclass(frozen=True)
class CheckRequest:
    """A CHECK_TRANSACTION_STATE for one producer of ``producer_group``."""

    producer_group: str
    fields: dict[str, str]
    body: bytes


class _Pull(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


@dataclass
class _PullResult:
    status: _Pull
    messages: list[MessageExt] = field(default_factory=list)
    next_begin_offset: int = 0


_PULL_STATUS = {
    GetStatus.FOUND: _Pull.FOUND,
    GetStatus.NO_MATCHED_MESSAGE: _Pull.NO_MATCHED_MSG,
    GetStatus.NO_MESSAGE_IN_QUEUE: _Pull.NO_NEW_MSG,
    GetStatus.OFFSET_OVERFLOW_ONE: _Pull.NO_NEW_MSG,
}


def _put_outcome(status: PutStatus, max_message_size: int) -> EndOutcome:
    """sendFinalMessage's answer for a commit's put."""
    if status.stored:
        return EndOutcome(EndCode.SUCCESS)
    if status in (PutStatus.MESSAGE_ILLEGAL, PutStatus.PROPERTIES_SIZE_EXCEEDED):
        return EndOutcome(
            EndCode.MESSAGE_ILLEGAL,
            "The message is illegal, maybe msg body or properties length not matched. "
            f"msg body length limit {max_message_size}B, msg properties length limit 32KB.",
        )
    if status is PutStatus.SERVICE_NOT_AVAILABLE:
        return EndOutcome(EndCode.SERVICE_NOT_AVAILABLE, "Service not available now.")
    return EndOutcome(EndCode.SYSTEM_ERROR, status.name)


class TransactionService:
    """Ends transactions and checks the open ones, for one broker's store."""

    def __init__(
        self,
        store: MessageStore,
        offsets: ConsumerOffsets,
        topics: TopicConfigManager,
        broker_addr: str,
        *,
        timeout_ms: int = TRANSACTION_TIMEOUT_MS,
        check_max: int = TRANSACTION_CHECK_MAX,
        clock: Callable[[], int] = now_ms,
        on_topics_changed: Callable[[], None] | None = None,
    ) -> None:
        self.store = store
        self.offsets = offsets
        self.topics = topics
        self.broker_addr = broker_addr
        self.timeout_ms = timeout_ms
        self.check_max = check_max
        self.clock = clock
        self.on_topics_changed = on_topics_changed
        self._check_lock = threading.Lock()  # one check pass at a time
        # (real topic, committed) -> transactions ended so, for the metrics endpoint
        # (RocketMQ 5's rocketmq_commit_messages_total / rocketmq_rollback_messages_total)
        self._ended: dict[tuple[str, bool], int] = {}
        self._ended_lock = threading.Lock()

    # --- ending -------------------------------------------------------------------------

    def end(self, request: EndRequest) -> EndOutcome | None:
        """Commit or roll back; None for "unknown" (or any other value), which RocketMQ
        leaves for the check and does not answer."""
        kind = request.commit_or_rollback
        if kind not in (COMMIT, ROLLBACK):
            log.warning(
                "producer group %s ended transaction %s as %d (%s): left for the check",
                request.producer_group,
                request.msg_id,
                kind,
                "from a check" if request.from_transaction_check else "while sending",
            )
            return None
        half = self.store.look_message(request.commit_log_offset)
        refused = self._check_half(half, request)
        if refused is not None:
            return refused
        assert half is not None
        if kind == ROLLBACK:
            self._mark_done(half)
            self._count_ended(half, committed=False)
            return EndOutcome(EndCode.SUCCESS)
        message = committed_message(half, request.commit_log_offset)
        timed = self._timer_rewrite(message)
        if isinstance(timed, EndOutcome):
            return timed
        result = self._put(timed, half.store_host)
        outcome = _put_outcome(result.status, self.store.config.max_message_size)
        if outcome.code is EndCode.SUCCESS:
            self._mark_done(half)
            self._count_ended(half, committed=True)
        return outcome

    def _timer_rewrite(self, message: Message) -> Message | EndOutcome:
        """A committed timer message waits in the timer wheel, as RocketMQ 5's put hook
        (HookUtils) sends it there; refused as sendFinalMessage answers when the wheel is
        off or its time is illegal."""
        if not is_timer_message(message.properties, message.topic):
            return message
        timed = timer_message_to_store(self.store.config, message)
        if isinstance(timed, TimerRefusal):
            code = EndCode.SYSTEM_ERROR if timed.wheel_off else EndCode.MESSAGE_ILLEGAL
            return EndOutcome(code, timed.remark)
        return timed

    def _count_ended(self, half: MessageExt, *, committed: bool) -> None:
        destination = real_destination(half)
        key = (destination[0] if destination else half.topic, committed)
        with self._ended_lock:
            self._ended[key] = self._ended.get(key, 0) + 1

    def ended_counts(self) -> dict[tuple[str, bool], int]:
        """(topic, committed) -> transactions committed (True) or rolled back (False) by
        END_TRANSACTION (a producer's, or its checker's), since start."""
        with self._ended_lock:
            return dict(self._ended)

    @staticmethod
    def _check_half(half: MessageExt | None, request: EndRequest) -> EndOutcome | None:
        """checkPrepareMessage, plus: the message must be a half message (RocketMQ would
        fail on its missing REAL_TOPIC with an exception, a SYSTEM_ERROR too)."""
        if half is None:
            return EndOutcome(EndCode.SYSTEM_ERROR, "Find prepared transaction message failed")
        if half.topic != TRANS_HALF_TOPIC or real_destination(half) is None:
            return EndOutcome(
                EndCode.SYSTEM_ERROR,
                f"The message at commit log offset {request.commit_log_offset} is not a "
                "prepared transaction message",
            )
        if half.properties.get(props.PGROUP) != request.producer_group:
            return EndOutcome(EndCode.SYSTEM_ERROR, "The producer group wrong")
        if half.queue_offset != request.tran_state_table_offset:
            return EndOutcome(EndCode.SYSTEM_ERROR, "The transaction state table offset wrong")
        if half.commit_log_offset != request.commit_log_offset:
            return EndOutcome(EndCode.SYSTEM_ERROR, "The commit log offset wrong")
        return None

    def _mark_done(self, half: MessageExt) -> None:
        """deletePrepareMessage: the op message for ``half`` (a failed put is logged;
        the half message is then checked again later, as in RocketMQ)."""
        op = op_message(half.queue_offset, half.queue_id, self.broker_addr, self.clock())
        result = self._put(op, self.broker_addr)
        if not result.status.stored:
            log.error(
                "op message for half offset %d not stored (%s); it will be checked again",
                half.queue_offset,
                result.status.name,
            )

    # --- checking -----------------------------------------------------------------------

    def _progress(self, topic: str, queue_id: int) -> int:
        """fetchConsumeOffset: the recorded progress, else the queue's min offset (0 for a
        queue the store does not have yet)."""
        offset = self.offsets.query(TRANS_GROUP, topic, queue_id)
        return self.store.min_offset(topic, queue_id) if offset is None else offset

    def _pull(self, topic: str, queue_id: int, offset: int, count: int) -> _PullResult:
        """A read as RocketMQ's bridge pulls (a queue the store does not have yet has no
        message in it: NO_NEW_MSG)."""
        got = self.store.get_messages(TRANS_GROUP, topic, queue_id, offset, count)
        status = _PULL_STATUS.get(got.status, _Pull.OFFSET_ILLEGAL)
        messages = got.messages if status is _Pull.FOUND else []
        return _PullResult(status, messages, got.next_begin_offset)

    def _fill_done(
        self,
        done_by_half: dict[int, int],
        op_offset: int,
        min_half_offset: int,
        done_ops: list[int],
        queue_id: int,
    ) -> _PullResult:
        """fillOpRemoveMap: read op messages from ``op_offset``; those for half offsets
        below the half queue's progress are done already (their op offsets go to
        ``done_ops``), the others go to ``done_by_half``."""
        result = self._pull(TRANS_OP_HALF_TOPIC, queue_id, op_offset, OP_BATCH)
        if result.status in (_Pull.OFFSET_ILLEGAL, _Pull.NO_MATCHED_MSG):
            log.warning(
                "op queue offset %d illegal (%s); moved to %d",
                op_offset,
                result.status.name,
                result.next_begin_offset,
            )
            self.offsets.commit(
                TRANS_GROUP, TRANS_OP_HALF_TOPIC, queue_id, result.next_begin_offset
            )
            return result
        for op in result.messages:
            if op.tags != REMOVE_TAG:
                log.error("op message at queue offset %d has tag %r", op.queue_offset, op.tags)
                continue
            half_offset = op_half_offset(op)
            if half_offset < min_half_offset:
                done_ops.append(op.queue_offset)
            else:
                done_by_half[half_offset] = op.queue_offset
        return result

    def check(self) -> list[CheckRequest]:
        """One check pass (see the module's doc); the CHECK_TRANSACTION_STATE requests to
        send."""
        with self._check_lock:
            config = self.topics.get(TRANS_HALF_TOPIC)
            if config is None:
                # fetchMessageQueues creates the half topic's config (one queue).
                config = self._create_topic(TRANS_HALF_TOPIC)
            requests: list[CheckRequest] = []
            for queue_id in range(config.read_queue_nums):
                try:
                    self._check_queue(queue_id, requests)
                except StoreError as e:
                    log.error("transaction check of half queue %d failed: %s", queue_id, e)
            return requests

    def _check_queue(self, queue_id: int, requests: list[CheckRequest]) -> None:
        started = self.clock()
        half_offset = self._progress(TRANS_HALF_TOPIC, queue_id)
        op_offset = self._progress(TRANS_OP_HALF_TOPIC, queue_id)
        done_ops: list[int] = []
        done_by_half: dict[int, int] = {}
        ops = self._fill_done(done_by_half, op_offset, half_offset, done_ops, queue_id)
        misses = 1
        new_offset = offset = half_offset
        while self.clock() - started <= MAX_PASS_MS:
            if offset in done_by_half:
                done_ops.append(done_by_half.pop(offset))
                offset += 1
                new_offset = offset
                continue
            got = self._pull(TRANS_HALF_TOPIC, queue_id, offset, 1)
            half = got.messages[0] if got.messages else None
            if half is None:
                if misses > MAX_HALF_MISSES:
                    break
                misses += 1
                if got.status is _Pull.NO_NEW_MSG:
                    break
                offset = new_offset = got.next_begin_offset
                continue
            properties = dict(half.properties)
            now = self.clock()
            if counted_check(properties, self.check_max) or self._too_old(half, now):
                self._discard(half, properties)
                offset += 1
                new_offset = offset
                continue
            if half.store_timestamp >= started:
                break  # stored during this pass: looked at by the next one
            age = now - half.born_timestamp
            immunity = self.timeout_ms
            immunity_text = properties.get(props.CHECK_IMMUNITY_TIME_IN_SECONDS)
            if immunity_text is not None:
                immunity = self._immunity_ms(immunity_text)
                if age < immunity and self._skip_immune(half, properties, done_by_half, done_ops):
                    offset += 1
                    new_offset = offset
                    continue
            elif 0 <= age < immunity:
                break  # too young to check, and so is everything behind it
            latest_ops = ops.messages if ops.status is _Pull.FOUND else None
            due = (
                (latest_ops is None and age > immunity)
                or (
                    latest_ops is not None
                    and latest_ops[-1].born_timestamp - started > self.timeout_ms
                )
                or age <= -1
            )
            if not due:
                if latest_ops is None:
                    break  # no more op messages: this half message waits for a later pass
                ops = self._fill_done(
                    done_by_half, ops.next_begin_offset, half_offset, done_ops, queue_id
                )
                continue
            request = self._renew_and_request(half, properties)
            if request is None:
                # The copy was not stored: RocketMQ retries the same offset until its pass
                # limit; the next pass retries it here, without hammering a failing store.
                break
            requests.append(request)
            offset += 1
            new_offset = offset
        if new_offset != half_offset:
            self.offsets.commit(TRANS_GROUP, TRANS_HALF_TOPIC, queue_id, new_offset)
        moved_op = self._op_progress(done_ops, op_offset)
        if moved_op != op_offset:
            self.offsets.commit(TRANS_GROUP, TRANS_OP_HALF_TOPIC, queue_id, moved_op)

    def _create_topic(self, topic: str) -> TopicConfig:
        """One read-write queue, as createTopicInSendMessageBackMethod (and the name
        servers hear of it, as RocketMQ registers the broker again)."""
        config = self.topics.create_on_send_back(topic, 1, PERM_READ | PERM_WRITE)
        if self.on_topics_changed is not None:
            self.on_topics_changed()
        return config

    def _immunity_ms(self, text: str) -> int:
        """getImmunityTime: seconds, or the transaction timeout for -1 (or junk)."""
        seconds = parse_java_integer(text, 64)
        if seconds is None or seconds == -1:
            return self.timeout_ms
        return seconds * 1000

    def _too_old(self, half: MessageExt, now: int) -> bool:
        """needSkip: born before the CommitLog's retention began."""
        return now - half.born_timestamp > self.store.config.file_reserved_time * 3600 * 1000

    def _skip_immune(
        self,
        half: MessageExt,
        properties: dict[str, str],
        done_by_half: dict[int, int],
        done_ops: list[int],
    ) -> bool:
        """checkPrepareQueueOffset, for a half message still in its immunity: done when the
        half message it stands for (TRAN_PREPARED_QUEUE_OFFSET) is; otherwise stored
        again carrying that offset. True when it needs nothing more in this pass."""
        text = properties.get(props.TRAN_PREPARED_QUEUE_OFFSET)
        if text is not None:
            prepared = parse_java_integer(text, 64)
            if prepared is None or prepared == -1:
                return False
            if prepared in done_by_half:
                done_ops.append(done_by_half.pop(prepared))
                return True
        else:
            text = str(half.queue_offset)
        copy = renewed_half_message(half, properties, prepared_queue_offset=text)
        return self._put(copy, half.store_host).status is PutStatus.PUT_OK

    def _put(self, message: Message, store_host: str) -> PutResult:
        # Stamped by the service's clock, the one the pass compares store times with (a
        # copy stored during a pass must look fresh to it, as in RocketMQ where both are
        # the system clock).
        return self.store.put(message, store_timestamp=self.clock(), store_host=store_host)

    def _discard(self, half: MessageExt, properties: dict[str, str]) -> None:
        """resolveDiscardMsg: into TRANS_CHECK_MAX_TIME_TOPIC (queue 0, created with one
        queue)."""
        log.error(
            "half message %s (CommitLog offset %d) checked too many times or too old; moved to %s",
            half.uniq_key,
            half.commit_log_offset,
            TRANS_CHECK_MAX_TIME_TOPIC,
        )
        if self.topics.get(TRANS_CHECK_MAX_TIME_TOPIC) is None:
            self._create_topic(TRANS_CHECK_MAX_TIME_TOPIC)
        result = self._put(discarded_message(half, properties), half.store_host)
        if result.status is not PutStatus.PUT_OK:
            log.error("half message %s not moved: %s", half.uniq_key, result.status.name)

    def _renew_and_request(
        self, half: MessageExt, properties: dict[str, str]
    ) -> CheckRequest | None:
        """putBackHalfMsgQueue then the check request naming the copy."""
        group = properties.get(props.PGROUP)
        result = self._put(renewed_half_message(half, properties), half.store_host)
        if result.status is not PutStatus.PUT_OK:
            log.error(
                "half message %s not stored again for its check (%s)",
                half.uniq_key,
                result.status.name,
            )
            return None
        try:
            body = check_request_body(
                half,
                properties,
                queue_offset=result.queue_offset,
                commit_log_offset=result.commit_log_offset,
            )
        except ValueError as e:
            log.error("half message %s cannot be checked: %s", half.uniq_key, e)
            return None
        fields = check_request_fields(
            uniq_key=properties.get(props.UNIQ_KEY),
            queue_offset=result.queue_offset,
            commit_log_offset=result.commit_log_offset,
            offset_msg_id=result.msg_id,
        )
        return CheckRequest(group or "", fields, body)

    @staticmethod
    def _op_progress(done_ops: list[int], old: int) -> int:
        """calculateOpOffset: past the op messages accounted for without a gap."""
        offset = old
        for done in sorted(done_ops):
            if done != offset:
                break
            offset += 1
        return offset
