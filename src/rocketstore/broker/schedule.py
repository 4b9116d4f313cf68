"""Delayed delivery: moves due messages from ``SCHEDULE_TOPIC_XXXX`` to their real topics
(RocketMQ 4.9's ``ScheduleMessageService`` and ``DeliverDelayedMessageTimerTask``).

Layer: broker, on the store's public API. One thread; :meth:`ScheduleService.run_once`
does one pass for tests and tools.

How it works (facts from 4.9.8):

* A put with ``DELAY`` = level L > 0 is stored by the store itself in
  ``SCHEDULE_TOPIC_XXXX`` queue L-1, with the real topic and queue id in the properties
  ``REAL_TOPIC`` / ``REAL_QID``; its consume-queue ``tagsCode`` is the deliver time,
  store time + delay of level L (``computeDeliverTimestamp``).
* Each level's queue is read in order from the level's offset. A unit is due when its
  deliver time is <= now; a deliver time further away than now + the level's delay
  (the clock went back) counts as due now. The first unit not due ends the level's pass:
  the queue is in store-time order, so nothing behind it is due either.
* Delivery rebuilds the message for its real topic and queue (body, flag, sys flag, born
  time and host, store host and reconsume times kept; the properties, ``DELAY``,
  ``REAL_TOPIC`` and ``REAL_QID`` included, in ``java.util.HashMap`` order as RocketMQ
  re-serialises them) and puts it through ``MessageStore.put(..., delay=False)``, so it
  is not delayed again; only then does the level's
  offset move past it. A put refused for a passing reason (disk full) stops the level
  until the next pass; one that can never succeed (MESSAGE_ILLEGAL) skips the message.
* Progress is ``config/delayOffset.json``: ``{"offsetTable": {"<level>": next offset}}``,
  written every ``persist_interval_ms`` and on shutdown, after the delivered messages are
  flushed (so a persisted offset never covers a delivery a crash could lose). A crash
  between a delivery and the next persist delivers that message again on restart
  (at-least-once, as RocketMQ).

The delivered record is byte for byte RocketMQ's: it keeps ``DELAY`` in its properties
string because RocketMQ writes that string before clearing the map entry.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from rocketstore.broker.broker_config import (
    DELAY_OFFSET_FILE,
    config_file_path,
    load_config_file,
    offset_table_of,
    persist_config_file,
)
from rocketstore.config import DEFAULT_DELAY_LEVELS, delay_levels_ms
from rocketstore.errors import ConfigError, StoreError
from rocketstore.format import properties as props
from rocketstore.format.cq_ext import is_ext_address
from rocketstore.format.javahash import java_hashmap_ordered
from rocketstore.format.message import Message, MessageExt
from rocketstore.paths import SCHEDULE_TOPIC, TRANS_HALF_TOPIC
from rocketstore.services.periodic import Every, PeriodicThread
from rocketstore.store import MessageStore

log = logging.getLogger(__name__)

DEFAULT_LEVELS = DEFAULT_DELAY_LEVELS
# RocketMQ's DELAY_FOR_A_WHILE: the pause between passes when nothing more is due.
TICK_MS = 100
# flushDelayOffsetInterval.
PERSIST_INTERVAL_MS = 10_000
# computeDeliverTimestamp's delay for a level it does not know.
UNKNOWN_LEVEL_DELAY_MS = 1000


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def level_to_queue_id(level: int) -> int:
    return level - 1


def queue_id_to_level(queue_id: int) -> int:
    return queue_id + 1


def decode_delay_offset_file(obj: Any) -> dict[int, int]:
    """Validate and convert a parsed delayOffset.json; ValueError says what is wrong."""
    raw = offset_table_of(obj, " of level -> offset")
    table: dict[int, int] = {}
    for level, offset in raw.items():
        try:
            number = int(level)
        except ValueError as e:
            raise ValueError(f"delay level {level!r} is not an integer") from e
        if number < 1:
            raise ValueError(f"delay level {number} is not positive")
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"level {number}: offset {offset!r} is not a non-negative integer")
        table[number] = offset
    return table


def encode_delay_offset_file(table: Mapping[int, int]) -> dict[str, Any]:
    return {"offsetTable": {str(level): offset for level, offset in sorted(table.items())}}


def delivered_message(scheduled: MessageExt) -> Message | None:
    """The message to put into the real topic for a scheduled record (messageTimeup), or
    None when the record cannot be delivered (no REAL_TOPIC/REAL_QID, or a real topic
    that is a transaction half topic or the schedule topic: discarded with a log line)."""
    properties = scheduled.properties
    real_topic = properties.get(props.REAL_TOPIC)
    real_qid = properties.get(props.REAL_QID)
    if not real_topic or real_qid is None or not real_qid.strip().lstrip("-").isdigit():
        log.error(
            "scheduled message at offset %d has no valid REAL_TOPIC/REAL_QID (%r/%r); skipped",
            scheduled.commit_log_offset,
            real_topic,
            real_qid,
        )
        return None
    if real_topic in (TRANS_HALF_TOPIC, SCHEDULE_TOPIC):
        # A half message must not become visible; a "real" topic that is the schedule
        # topic itself would be delivered back into it, again and again.
        log.error(
            "[BUG] the real topic of scheduled message at offset %d is %s; discarded",
            scheduled.commit_log_offset,
            real_topic,
        )
        return None
    # RocketMQ re-serialises the record's properties from a fresh java.util.HashMap, so
    # they come out in that map's iteration order, DELAY included: it clears DELAY from
    # the map only after writing the properties string. The put skips the delay rewrite
    # (store.put(..., delay=False)), so the message is not delayed again.
    return Message(
        topic=real_topic,
        body=scheduled.body if scheduled.body is not None else b"",
        queue_id=int(real_qid),
        flag=scheduled.flag,
        sys_flag=scheduled.sys_flag,
        properties=java_hashmap_ordered(properties),
        born_timestamp=scheduled.born_timestamp,
        born_host=scheduled.born_host,
        reconsume_times=scheduled.reconsume_times,
        prepared_transaction_offset=0,
    )


class ScheduleService:
    """Delivers delayed messages when due and keeps each level's progress."""

    def __init__(
        self,
        store: MessageStore,
        store_root: str | os.PathLike[str] | None = None,
        levels: str | None = None,
        clock: Callable[[], int] = now_ms,
        *,
        persist_interval_ms: int = PERSIST_INTERVAL_MS,
        tick_ms: int = TICK_MS,
    ) -> None:
        if store.read_only:
            raise ConfigError("the schedule service needs a writable store")
        store_levels = store.config.message_delay_level
        spec = store_levels if levels is None else levels
        self._delays_ms = delay_levels_ms(spec)
        if self._delays_ms != delay_levels_ms(store_levels):
            # The store computes each delayed message's deliver time from its own levels.
            raise ConfigError(
                f"delay levels {spec!r} differ from the store's message_delay_level "
                f"{store_levels!r}; configure them in one place (StoreConfig)"
            )
        self.store = store
        self.clock = clock
        self.persist_interval_ms = persist_interval_ms
        self.tick_ms = tick_ms
        self.path = config_file_path(store_root or store.root, DELAY_OFFSET_FILE)
        self.on_delivered: Callable[[], None] | None = None
        self._lock = threading.Lock()  # one pass at a time; guards the table
        self._persist_lock = threading.Lock()
        loaded = load_config_file(self.path, "delay offset", decode_delay_offset_file)
        self._offsets: dict[int, int] = loaded if loaded is not None else {}
        # Highest CommitLog end written by a delivery; flushed before offsets persist.
        self._delivered_end = 0
        self._version = 0
        self._persisted_version = 0
        self._thread: PeriodicThread | None = None
        self._correct_offsets()

    # --- levels -------------------------------------------------------------------------

    @property
    def max_level(self) -> int:
        return len(self._delays_ms)

    def delay_ms(self, level: int) -> int:
        if not 1 <= level <= self.max_level:
            raise ConfigError(f"delay level must be 1..{self.max_level}, got {level}")
        return self._delays_ms[level - 1]

    def compute_deliver_timestamp(self, level: int, store_timestamp: int) -> int:
        """computeDeliverTimestamp (an unknown level delays by 1 s)."""
        if 1 <= level <= self.max_level:
            return store_timestamp + self._delays_ms[level - 1]
        return store_timestamp + UNKNOWN_LEVEL_DELAY_MS

    def offset(self, level: int) -> int:
        """The next queue offset the level will deliver."""
        with self._lock:
            return self._offsets.get(level, 0)

    def offsets(self) -> dict[int, int]:
        with self._lock:
            return dict(self._offsets)

    def running_stats(self) -> dict[str, str]:
        """RocketMQ's ``scheduleMessageOffset_<level>`` = "delayOffset,maxOffset"."""
        stats = {}
        for level, offset in sorted(self.offsets().items()):
            queue = self.store.queue_view(SCHEDULE_TOPIC, level_to_queue_id(level))
            high = queue.max_offset() if queue is not None else 0
            stats[f"scheduleMessageOffset_{level}"] = f"{offset},{high}"
        return stats

    def _correct_offsets(self) -> None:
        """correctDelayOffset: keep each level's offset inside its queue's range."""
        for level in range(1, self.max_level + 1):
            queue = self.store.queue_view(SCHEDULE_TOPIC, level_to_queue_id(level))
            current = self._offsets.get(level)
            if queue is None or current is None:
                continue
            low, high = queue.min_offset(), queue.max_offset()
            corrected = min(max(current, low), high)
            if corrected != current:
                log.error(
                    "delay level %d: offset %d outside the queue's %d..%d; corrected to %d",
                    level,
                    current,
                    low,
                    high,
                    corrected,
                )
                self._offsets[level] = corrected
                self._version += 1

    # --- delivering ---------------------------------------------------------------------

    def run_once(self) -> int:
        """Deliver every due message of every level; the number delivered."""
        with self._lock:
            delivered = 0
            for level in range(1, self.max_level + 1):
                if self._thread is not None and self._thread.stopping:
                    break
                delivered += self._deliver_level(level)
        if delivered and self.on_delivered is not None:
            self.on_delivered()
        return delivered

    def _ext_deliver_time(self, level: int, commit_log_offset: int, address: int) -> int:
        """The delivery time of a unit whose tagsCode is a ConsumeQueueExt address (a
        broker with enableConsumeQueueExt): the extension's tagsCode, else, as RocketMQ,
        the record's store time plus the level's delay."""
        ext = self.store.ext_unit(SCHEDULE_TOPIC, level_to_queue_id(level), address)
        if ext is not None:
            return ext.tags_code
        stored = self.store.commitlog_store_time(commit_log_offset)
        return max(stored, 0) + self._delays_ms[level - 1]

    def _deliver_level(self, level: int) -> int:
        queue = self.store.queue_view(SCHEDULE_TOPIC, level_to_queue_id(level))
        if queue is None:
            return 0
        start = self._offsets.get(level, 0)
        offset = min(max(start, queue.min_offset()), queue.max_offset())
        if offset != start:
            log.warning("delay level %d: offset %d moved to %d (queue range)", level, start, offset)
        high = queue.max_offset()
        delay = self._delays_ms[level - 1]
        delivered = 0
        while offset < high:
            unit = queue.unit(offset)
            if unit is None:
                break  # retention is removing that file; the next pass re-reads the range
            now = self.clock()
            deliver_at = unit.tags_code
            if is_ext_address(deliver_at):
                deliver_at = self._ext_deliver_time(level, unit.commit_log_offset, deliver_at)
            if deliver_at > now + delay:
                deliver_at = now  # correctDeliverTimestamp: the clock went back
            if deliver_at > now:
                break
            if unit.is_blank_fill:
                # The filler before a queue's first real entry: nothing to deliver.
                offset += 1
                self._offsets[level] = offset
                self._version += 1
                continue
            message = self.store.look_message(unit.commit_log_offset) if unit.is_valid else None
            outgoing = None
            if message is None or message.size != unit.size:
                log.error(
                    "delay level %d offset %d: no record of %d bytes at CommitLog offset %d; "
                    "skipped",
                    level,
                    offset,
                    unit.size,
                    unit.commit_log_offset,
                )
            else:
                outgoing = delivered_message(message)
            if outgoing is not None and message is not None:
                try:
                    result = self.store.put(outgoing, store_host=message.store_host, delay=False)
                except StoreError as e:
                    log.error("delay level %d offset %d: delivery failed: %s", level, offset, e)
                    break
                if result.status.never_storable:
                    # Skipped: RocketMQ would retry it forever and hold back every later
                    # message of the level.
                    log.error(
                        "delay level %d offset %d: %s refuses the message for %s; skipped "
                        "(it stays in %s)",
                        level,
                        offset,
                        result.status.name,
                        outgoing.topic,
                        SCHEDULE_TOPIC,
                    )
                elif not result.status.stored:
                    # Not written (disk full, store stopping ...): retry this offset later,
                    # as RocketMQ does.
                    log.warning(
                        "delay level %d offset %d: delivery to %s refused (%s); retrying later",
                        level,
                        offset,
                        outgoing.topic,
                        result.status.name,
                    )
                    break
                else:
                    self._delivered_end = max(
                        self._delivered_end, result.commit_log_offset + result.size
                    )
                    delivered += 1
            offset += 1
            self._offsets[level] = offset
            self._version += 1
        return delivered

    # --- persisting ---------------------------------------------------------------------

    def persist(self, *, force: bool = False) -> bool:
        """Write delayOffset.json if the offsets changed (or ``force``), once the
        deliveries they cover are durable. True when the file was written."""
        with self._persist_lock:
            with self._lock:
                version = self._version
                if not force and version == self._persisted_version:
                    return False
                table = dict(self._offsets)
                delivered_end = self._delivered_end
            if delivered_end and self.store.config.flush_disk_type == "ASYNC_FLUSH":
                status = self.store.sync_to(delivered_end)
                if not status.ok:
                    log.error(
                        "delay offsets not persisted: delivered messages not flushed (%s)",
                        status.name,
                    )
                    return False
            persist_config_file(self.path, encode_delay_offset_file(table))
            with self._lock:
                self._persisted_version = version
            return True

    # --- lifetime -----------------------------------------------------------------------

    def start(self) -> None:
        """Deliver in a background thread every ``tick_ms``, persisting every
        ``persist_interval_ms``."""
        if self._thread is not None:
            return
        persist_due = Every(lambda: self.persist_interval_ms / 1000)

        def step() -> None:
            self.run_once()
            if persist_due.due():
                self.persist()

        self._thread = PeriodicThread("ScheduleService", lambda: self.tick_ms / 1000, step)
        self._thread.start()

    def shutdown(self) -> None:
        """Stop the thread (finishing the current pass) and persist the offsets."""
        if self._thread is not None:
            self._thread.stop()
            self._thread = None
        self.persist()
