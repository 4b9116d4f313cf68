"""Timer messages (RIP-43): a message with a delivery time is stored in
``rmq_sys_wheel_timer`` and put into its real topic when that time comes, as RocketMQ
5.3.3's TimerMessageStore does, in its files (``timerlog/``, ``timerwheel``,
``config/timercheck``: :mod:`rocketstore.store.timer_files`).

Layer: store, on the MessageStore's public API (a reader of the timer topic's queue and a
writer of puts), below the broker, which rewrites a timer send (:func:`timer_rewrite`,
RocketMQ 5's HookUtils.transformTimerMessage) and runs this service.

How it works (facts from 5.3.3):

* A send with TIMER_DELIVER_MS, TIMER_DELAY_MS or TIMER_DELAY_SEC (and no DELAY level)
  whose time is in the future is stored in ``rmq_sys_wheel_timer`` queue 0 with
  TIMER_OUT_MS (the time floored to the precision; one exactly on a step one step
  earlier), REAL_TOPIC and REAL_QID. A time already past stores the message as it is.
* Enqueue: each new unit of that queue becomes a 52-byte unit appended to the timer
  log, chained (prev pos) to the last unit of its slot in the wheel, the slot of
  TIMER_OUT_MS; a time already behind the wheel's write time is put at once. A time more
  than ``timer_roll_window_slot`` steps away goes to a nearer slot marked roll: when it
  comes the message is put into the timer topic again, to be enqueued anew.
* Dequeue: the read time walks the slots up to the write time (now, floored), so a
  message comes once its step is over: never before its time, at most one step (the
  precision, 1 s by default) plus a tick after. A slot's chain is read from its last unit
  back and delivered in append order: the record for the real topic and queue,
  TIMER_ENQUEUE_MS and TIMER_DEQUEUE_MS added, the properties string re-serialised in
  java.util.HashMap order (REAL_TOPIC and REAL_QID stay in it, as RocketMQ writes the
  string before clearing them). A delete unit (TIMER_DEL_UNIQKEY: RecallMessage) drops
  the message of its slot with that real topic + "+" + UNIQ_KEY.
* The checkpoint (read time, timer log flush position, timer queue offset) is written
  every ``timer_flush_interval_ms`` and at shutdown, after the timer log, the wheel and
  (ASYNC_FLUSH) the delivered messages are flushed. Recovery walks the timer log from
  the file before the flushed position, revises the wheel's slots with what it finds,
  and goes on with the timer queue after the last unit's message. Delivery is
  at-least-once: what was delivered after the last checkpoint is delivered again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from rocketstore.config import StoreConfig
from rocketstore.errors import ConfigError, StoreError
from rocketstore.format import properties as props
from rocketstore.format import timer as fmt
from rocketstore.format.javahash import java_hashmap_ordered, java_string_hash
from rocketstore.format.message import Message, MessageExt
from rocketstore.java_ints import JAVA_LONG_MAX
from rocketstore.services.periodic import Every, PeriodicThread
from rocketstore.store.message_store import MessageStore
from rocketstore.store.timer_files import TimerCheckpointFile, TimerLog, TimerWheel

log = logging.getLogger(__name__)

TIMER_TOPIC = props.TIMER_TOPIC
# A pass's pause when nothing is due (the dequeue thread's poll).
TICK_MS = 100
# How often timer log files whose messages retention removed are deleted (30 s in 5.3.3).
CLEAN_INTERVAL_S = 30
# Units of the timer queue one pass enqueues at most (the rest the next pass).
ENQUEUE_BATCH = 65_536
TIMER_KEYS = (props.TIMER_DELIVER_MS, props.TIMER_DELAY_MS, props.TIMER_DELAY_SEC)
# SendMessageProcessor's words for WHEEL_TIMER_MSG_ILLEGAL ({} is the max delay in ms).
ILLEGAL_REMARK = (
    "timer message illegal, the delay time should not be bigger than the max delay {}ms; "
    "or if set del msg, the delay time should be bigger than the current time"
)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def is_timer_message(properties: dict[str, str], topic: str) -> bool:
    """HookUtils.checkIfTimerMessage: a delivery time or delay, no DELAY level (which wins:
    the broker drops the timer properties then), not one the timer has handled already."""
    level = properties.get(props.DELAY)
    if level is not None and level.strip().lstrip("+").isdigit() and int(level) > 0:
        return False
    if topic == TIMER_TOPIC or props.TIMER_OUT_MS in properties:
        return False
    return any(key in properties for key in TIMER_KEYS)


def deliver_time_ms(properties: dict[str, str], now: int) -> int | None:
    """The delivery time a timer message asks (TIMER_DELAY_SEC, else TIMER_DELAY_MS, else
    TIMER_DELIVER_MS); None when the value is no number Long.parseLong reads."""
    try:
        if props.TIMER_DELAY_SEC in properties:
            return now + int(properties[props.TIMER_DELAY_SEC].strip()) * 1000
        if props.TIMER_DELAY_MS in properties:
            return now + int(properties[props.TIMER_DELAY_MS].strip())
        return int(properties[props.TIMER_DELIVER_MS].strip())
    except (KeyError, ValueError):
        return None


def timer_rewrite(
    message: Message, now: int, *, precision_ms: int, max_delay_sec: int
) -> Message | str:
    """HookUtils.transformTimerMessage for a timer message (``is_timer_message``): the
    message as stored in rmq_sys_wheel_timer, ``message`` itself when its time is not in
    the future (stored as a plain message), or why it is illegal (the send is refused
    with MESSAGE_ILLEGAL)."""
    illegal = ILLEGAL_REMARK.format(max_delay_sec * 1000)
    deliver = deliver_time_ms(message.properties, now)
    if deliver is None:
        return illegal
    if deliver <= now:
        if props.TIMER_DEL_UNIQKEY in message.properties:
            return illegal
        return message
    if deliver - now > max_delay_sec * 1000:
        return illegal
    if deliver % precision_ms == 0:
        deliver -= precision_ms
    else:
        deliver = deliver // precision_ms * precision_ms
    values = dict(message.properties)
    values[props.TIMER_OUT_MS] = str(deliver)
    values[props.REAL_TOPIC] = message.topic
    values[props.REAL_QID] = str(message.queue_id)
    return Message(
        topic=TIMER_TOPIC,
        body=message.body,
        queue_id=0,
        flag=message.flag,
        sys_flag=message.sys_flag,
        properties=java_hashmap_ordered(values),
        born_timestamp=message.born_timestamp,
        born_host=message.born_host,
        reconsume_times=message.reconsume_times,
        prepared_transaction_offset=message.prepared_transaction_offset,
    )


# SendMessageProcessor's words when the wheel is off (answered as SYSTEM_ERROR).
WHEEL_OFF_REMARK = "accurate timer message is not enabled, timerWheelEnable is false"


@dataclass(frozen=True)
class TimerRefusal:
    """Why a timer message is refused: the wheel is off (SYSTEM_ERROR), or the time is
    illegal (MESSAGE_ILLEGAL), in SendMessageProcessor's words."""

    wheel_off: bool
    remark: str


def timer_message_to_store(config: StoreConfig, message: Message) -> Message | TimerRefusal:
    """The one verdict on a timer message (``is_timer_message``) about to be stored, for
    every path that stores one (remoting and gRPC sends, a committed transaction): as
    ``timer_rewrite`` makes it under ``config``, or refused."""
    if not config.timer_wheel_enable:
        return TimerRefusal(True, WHEEL_OFF_REMARK)
    stored = timer_rewrite(
        message,
        now_ms(),
        precision_ms=config.timer_precision_ms,
        max_delay_sec=config.timer_max_delay_sec,
    )
    return TimerRefusal(False, stored) if isinstance(stored, str) else stored


def _deliver_key(message: MessageExt) -> str | None:
    """buildDeleteKey(real topic, UNIQ_KEY): what a delete unit names."""
    uniq = message.properties.get(props.UNIQ_KEY)
    real = message.properties.get(props.REAL_TOPIC)
    if uniq is None or real is None:
        return None
    return f"{real}+{uniq}"


class _RetryError(Exception):
    """A put refused for a passing reason: the pass stops and retries from there."""


class TimerMessageStore:
    """The timer wheel over a writable store: ``run_once`` enqueues and delivers,
    ``start`` does it on a thread, ``persist`` writes the checkpoint."""

    def __init__(
        self,
        store: MessageStore,
        *,
        clock: Callable[[], int] = now_ms,
        tick_ms: int = TICK_MS,
        flush_interval_ms: int | None = None,
    ) -> None:
        if store.read_only:
            raise ConfigError("the timer store needs a writable store")
        config = store.config
        self.store = store
        self.clock = clock
        self.tick_ms = tick_ms
        self.precision_ms = config.timer_precision_ms
        self.flush_interval_ms = (
            config.timer_flush_interval_ms if flush_interval_ms is None else flush_interval_ms
        )
        window = config.timer_roll_window_slot
        if window > fmt.SLOTS_TOTAL - fmt.TIMER_BLANK_SLOTS or window < 2:
            window = fmt.SLOTS_TOTAL - fmt.TIMER_BLANK_SLOTS
        self.roll_window_slots = window
        self.timer_log = TimerLog(store.root, config.mapped_file_size_timer_log)
        self.wheel = TimerWheel(store.root, self.precision_ms)
        self.checkpoint = TimerCheckpointFile(store.root)
        self._lock = threading.Lock()
        self._thread: PeriodicThread | None = None
        self._delivered_end = 0
        # A slot half delivered when a put failed: (its time, units done).
        self._slot_progress: tuple[int, int] = (-1, 0)
        self.queue_offset = 0
        self.read_time_ms = 0
        self.write_time_ms = self._floor(self.clock())
        self.enqueued = 0
        self.delivered = 0
        self._rates_mark = (time.monotonic(), 0, 0)
        self._recover()

    def _floor(self, ms: int) -> int:
        return ms // self.precision_ms * self.precision_ms

    # --- recovery -----------------------------------------------------------------------

    def _recover(self) -> None:
        cp = self.checkpoint.value
        begin = max(cp.last_timer_log_flush_pos - self.timer_log.file_size, 0)
        units = self.timer_log.units_from(begin)
        for position, unit in units:
            self.wheel.revise(unit.delayed_time_ms, position)
        end = self.timer_log.end_after(units, begin)
        self.timer_log.truncate(end)
        queue_offset = cp.last_timer_queue_offset
        if units:
            last = self.store.look_message(units[-1][1].commit_log_offset)
            if last is not None and last.topic == TIMER_TOPIC:
                queue_offset = max(queue_offset, last.queue_offset + 1)
        queue = self.store.queue_view(TIMER_TOPIC, 0)
        if queue is not None:
            queue_offset = min(max(queue_offset, queue.min_offset()), queue.max_offset())
        self.queue_offset = queue_offset
        now = self._floor(self.clock())
        read = cp.last_read_time_ms if self.checkpoint.existed and cp.last_read_time_ms else now
        oldest = now - (fmt.SLOTS_TOTAL - fmt.TIMER_BLANK_SLOTS) * self.precision_ms
        self.read_time_ms = self._floor(max(read, oldest))
        log.info(
            "timer store recovered: read time %d, timer queue offset %d, timer log end %d "
            "(%d units walked)",
            self.read_time_ms,
            self.queue_offset,
            end,
            len(units),
        )

    # --- one pass -----------------------------------------------------------------------

    def run_once(self) -> int:
        """Enqueue what the timer queue has new, deliver every slot now over; the number of
        messages put (delivered, rolled, or put at once)."""
        with self._lock:
            self.write_time_ms = max(self.write_time_ms, self._floor(self.clock()))
            done = 0
            try:
                done += self._enqueue()
                done += self._dequeue()
            except _RetryError:
                pass
            return done

    def _enqueue(self) -> int:
        queue = self.store.queue_view(TIMER_TOPIC, 0)
        if queue is None:
            return 0
        offset = max(self.queue_offset, queue.min_offset())
        high = min(queue.max_offset(), offset + ENQUEUE_BATCH)
        put = 0
        while offset < high:
            unit = queue.unit(offset)
            if unit is None:
                break  # retention is removing that file; the next pass reads on
            message = None
            if unit.is_valid and not unit.is_blank_fill:
                message = self.store.look_message(unit.commit_log_offset)
                if message is None or message.size != unit.size:
                    log.error(
                        "timer queue offset %d: no record of %d bytes at CommitLog offset "
                        "%d; skipped",
                        offset,
                        unit.size,
                        unit.commit_log_offset,
                    )
                    message = None
            if message is not None:
                put += self._enqueue_one(message)
            offset += 1
            self.queue_offset = offset
        return put

    def _enqueue_one(self, message: MessageExt) -> int:
        try:
            delayed = int(message.properties.get(props.TIMER_OUT_MS, "").strip())
        except ValueError:
            log.error(
                "timer message at CommitLog offset %d has no TIMER_OUT_MS; skipped",
                message.commit_log_offset,
            )
            return 0
        self.enqueued += 1
        if delayed < self.write_time_ms:
            # Due already (the wheel was behind): put at once, marked never enqueued.
            self._put(message, enqueue_ms=JAVA_LONG_MAX, roll=False)
            return 1
        write = self.write_time_ms
        window_ms = self.roll_window_slots * self.precision_ms
        magic = fmt.MAGIC_DEFAULT
        if delayed - write >= window_ms:
            magic |= fmt.MAGIC_ROLL
            if delayed - write - window_ms < self.roll_window_slots // 3 * self.precision_ms:
                delayed = write + self.roll_window_slots // 2 * self.precision_ms
            else:
                delayed = write + window_ms
        if props.TIMER_DEL_UNIQKEY in message.properties:
            magic |= fmt.MAGIC_DELETE
        slot = self.wheel.slot(delayed)
        real_topic = message.properties.get(props.REAL_TOPIC)
        position = self.timer_log.append(
            fmt.TimerLogUnit(
                prev_pos=slot.last_pos,
                magic=magic,
                enqueue_time_ms=write,
                delay_ms=delayed - write,
                commit_log_offset=message.commit_log_offset,
                size=message.size,
                topic_hash=java_string_hash(real_topic) if real_topic is not None else 0,
            )
        )
        num = slot.num - 1 if magic & fmt.MAGIC_DELETE else slot.num + 1
        first = position if slot.first_pos == -1 else slot.first_pos
        self.wheel.put(fmt.Slot(self._floor(delayed), first, position, num, slot.magic))
        return 0

    def _dequeue(self) -> int:
        put = 0
        while self.read_time_ms < self.write_time_ms:
            slot = self.wheel.slot(self.read_time_ms)
            if slot.time_ms != -1:
                put += self._dequeue_slot(slot)
            self.read_time_ms += self.precision_ms
            self._slot_progress = (-1, 0)
        return put

    def _chain(self, slot: fmt.Slot) -> list[fmt.TimerLogUnit]:
        """The slot's units in append order (its chain read from the last one back)."""
        units: list[fmt.TimerLogUnit] = []
        position = slot.last_pos
        while position != -1:
            unit = self.timer_log.read(position)
            if unit is None:
                log.error("timer slot %d: no unit at timer log %d", slot.time_ms, position)
                break
            if unit.prev_pos >= position:
                log.error("timer slot %d: chain loops at %d", slot.time_ms, position)
                break
            units.append(unit)
            position = unit.prev_pos
        units.reverse()
        return units

    def _dequeue_slot(self, slot: fmt.Slot) -> int:
        units = self._chain(slot)
        deleted: set[str] = set()
        normal: list[tuple[fmt.TimerLogUnit, MessageExt]] = []
        for unit in units:
            message = self.store.look_message(unit.commit_log_offset)
            if message is None or message.size != unit.size:
                log.error(
                    "timer slot %d: no record of %d bytes at CommitLog offset %d; skipped",
                    slot.time_ms,
                    unit.size,
                    unit.commit_log_offset,
                )
                continue
            if unit.deletes and not unit.rolls:
                key = message.properties.get(props.TIMER_DEL_UNIQKEY)
                if key is not None:
                    deleted.add(key)
            else:
                normal.append((unit, message))
        done_time, done = self._slot_progress
        start = done if done_time == slot.time_ms else 0
        put = 0
        for index in range(start, len(normal)):
            unit, message = normal[index]
            key = _deliver_key(message)
            if not unit.rolls and key is not None and key in deleted:
                continue
            try:
                self._put(message, enqueue_ms=unit.enqueue_time_ms, roll=unit.rolls)
            except _RetryError:
                self._slot_progress = (slot.time_ms, index)
                raise
            put += 1
        return put

    def _put(self, message: MessageExt, *, enqueue_ms: int, roll: bool) -> None:
        """TimerMessageStore.convert + doPut: the message for its real topic (or, rolled,
        for the timer topic again). _RetryError when the store refuses for a passing reason."""
        values = dict(message.properties)
        if enqueue_ms != -1:
            values[props.TIMER_ENQUEUE_MS] = str(enqueue_ms)
        if roll:
            try:
                rolled = int(values.get(props.TIMER_ROLL_TIMES, "0")) + 1
            except ValueError:
                rolled = 1
            values[props.TIMER_ROLL_TIMES] = str(rolled)
        values[props.TIMER_DEQUEUE_MS] = str(self.clock())
        if roll:
            topic, queue_id = message.topic, message.queue_id
        else:
            topic = values.get(props.REAL_TOPIC, "")
            try:
                queue_id = int(values.get(props.REAL_QID, "").strip())
            except ValueError:
                topic = ""
            if not topic or topic == TIMER_TOPIC:
                log.error(
                    "timer message at CommitLog offset %d has no valid REAL_TOPIC/REAL_QID; "
                    "skipped",
                    message.commit_log_offset,
                )
                return
        outgoing = Message(
            topic=topic,
            body=message.body if message.body is not None else b"",
            queue_id=queue_id,
            flag=message.flag,
            sys_flag=message.sys_flag,
            properties=java_hashmap_ordered(values),
            born_timestamp=message.born_timestamp,
            born_host=message.born_host,
            reconsume_times=message.reconsume_times,
            prepared_transaction_offset=0,
        )
        try:
            result = self.store.put(outgoing, store_host=message.store_host, delay=False)
        except StoreError as e:
            log.error("timer delivery to %s failed: %s; retrying", topic, e)
            raise _RetryError from e
        if result.status.never_storable:
            log.error(
                "timer message at CommitLog offset %d: %s refuses it for %s; skipped",
                message.commit_log_offset,
                result.status.name,
                topic,
            )
        elif not result.status.stored:
            log.warning("timer delivery to %s refused (%s); retrying", topic, result.status.name)
            raise _RetryError
        else:
            self._delivered_end = max(self._delivered_end, result.commit_log_offset + result.size)
            self.delivered += 1

    # --- persisting ---------------------------------------------------------------------

    def persist(self) -> bool:
        """Flush the timer log, the wheel and the delivered messages, then write the
        checkpoint (TimerFlushService). False when the deliveries could not be flushed."""
        with self._lock:
            flushed = self.timer_log.flush()
            self.wheel.flush()
            if self._delivered_end and self.store.config.flush_disk_type == "ASYNC_FLUSH":
                status = self.store.sync_to(self._delivered_end)
                if not status.ok:
                    log.error("timer checkpoint not written: deliveries not flushed (%s)", status)
                    return False
            previous = self.checkpoint.value
            self.checkpoint.write(
                fmt.TimerCheckpoint(
                    last_read_time_ms=self.read_time_ms,
                    last_timer_log_flush_pos=flushed,
                    last_timer_queue_offset=self.queue_offset,
                    master_timer_queue_offset=self.queue_offset,
                    state_version=previous.state_version,
                    timestamp=previous.timestamp,
                    counter=previous.counter,
                )
            )
            return True

    def runtime_info(self) -> dict[str, str]:
        """RocketMQ 5's GET_BROKER_RUNTIME_INFO timer entries: seconds the wheel's read
        time is behind now, units of the timer queue not yet enqueued, messages in the
        wheel, and the enqueue and dequeue rates since the previous call."""
        queue = self.store.queue_view(TIMER_TOPIC, 0)
        high = queue.max_offset() if queue is not None else 0
        now = time.monotonic()
        with self._lock:
            read, offset = self.read_time_ms, self.queue_offset
            congested = self.wheel.messages_from(read)
            enqueued, delivered = self.enqueued, self.delivered
        then, enqueued_then, delivered_then = self._rates_mark
        self._rates_mark = (now, enqueued, delivered)
        seconds = max(now - then, 1e-3)
        return {
            "timerReadBehind": str(max(self.clock() - read, 0) // 1000),
            "timerOffsetBehind": str(max(high - offset, 0)),
            "timerCongestNum": str(congested),
            "timerEnqueueTps": str(round((enqueued - enqueued_then) / seconds, 2)),
            "timerDequeueTps": str(round((delivered - delivered_then) / seconds, 2)),
        }

    # --- lifetime -----------------------------------------------------------------------

    def start(self) -> None:
        """Enqueue and deliver every ``tick_ms`` on a thread, writing the checkpoint every
        ``flush_interval_ms`` and deleting expired timer log files every CLEAN_INTERVAL_S."""
        if self._thread is not None:
            return
        persist_due = Every(lambda: self.flush_interval_ms / 1000)
        clean_due = Every(lambda: CLEAN_INTERVAL_S)

        def step() -> None:
            self.run_once()
            if persist_due.due():
                self.persist()
            if clean_due.due():
                self.delete_expired_files()

        self._thread = PeriodicThread("TimerMessageStore", lambda: self.tick_ms / 1000, step)
        self._thread.start()

    def delete_expired_files(self) -> int:
        """Delete timer log files whose messages are all below the CommitLog's first offset."""
        with self._lock:
            return self.timer_log.delete_expired(self.store.min_commit_log_offset())

    def shutdown(self) -> None:
        """Stop the thread, write the checkpoint, close the files."""
        if self._thread is not None:
            self._thread.stop()
            self._thread = None
        try:
            self.persist()
        finally:
            self.timer_log.close()
            self.wheel.close()
