"""Checks and encoding of messages before they reach the CommitLog (spec 1.6, 1.7).

Layer: engine paths (above the structures). Turns a Message into a PreparedMessage or a
Refusal (an expected-failure PutStatus and the reason in words); applies the 4.9 delay
rewrite.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from rocketstore.commitlog import (
    AppendedBatch,
    CommitLog,
    EncodedBatch,
    PreparedMessage,
    now_ms,
)
from rocketstore.config import StoreConfig, delay_levels_ms
from rocketstore.errors import ConfigError
from rocketstore.format import native, sysflag
from rocketstore.format import properties as props
from rocketstore.format.crc import masked_crc32
from rocketstore.format.hosts import encode_host
from rocketstore.format.javahash import java_hashmap_order
from rocketstore.format.message import Message, message_problem
from rocketstore.format.record import MAX_PROPERTIES_LENGTH, record_length
from rocketstore.java_ints import JAVA_INT_MAX, JAVA_INT_MIN, JAVA_LONG_MAX, JAVA_LONG_MIN
from rocketstore.paths import SCHEDULE_TOPIC, TOPIC_PATTERN
from rocketstore.status import PutStatus

MAX_RECORD_EXTRA = 64 * 1024


@dataclass(frozen=True, slots=True)
class PutResult:
    """Outcome of one put. On failure only ``status`` (and ``reason``) is meaningful."""

    status: PutStatus
    commit_log_offset: int = 0
    queue_offset: int = 0
    msg_id: str = ""
    store_timestamp: int = 0
    size: int = 0
    # Why a put was refused, in words, when the status alone does not say (e.g. the disk
    # is full behind SERVICE_NOT_AVAILABLE).
    reason: str = ""
    # Whether the status is PUT_OK: a field, not a property, because callers check it per
    # message (a property call was 0.1 ms of a 1,024-message put, a seventh of one).
    ok: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "ok", self.status is PutStatus.PUT_OK)


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why ``prepare`` will not write a message: the status its put answers and what was
    wrong, in words that name the field and the limit."""

    status: PutStatus
    reason: str

    def result(self) -> PutResult:
        return PutResult(self.status, reason=self.reason)


def _illegal(reason: str) -> Refusal:
    return Refusal(PutStatus.MESSAGE_ILLEGAL, reason)


# What Java's Integer.parseInt takes: no spaces, "_" or other scripts' digits, as int() does.
_JAVA_INT_TEXT = re.compile(r"[+-]?[0-9]+")


def delay_level(properties: dict[str, str]) -> int | None:
    """The DELAY property as an int (0 when absent); None when it is not a number that
    Integer.parseInt reads (a Java broker fails such a put)."""
    value = properties.get(props.DELAY)
    if value is None:
        return 0
    if not isinstance(value, str) or _JAVA_INT_TEXT.fullmatch(value) is None:
        return None
    level = int(value)
    return level if JAVA_INT_MIN <= level <= JAVA_INT_MAX else None


def is_delayed(properties: dict[str, str], sys_flag: int) -> bool:
    """Whether the store sends a message with these properties and sys flag to
    SCHEDULE_TOPIC_XXXX: a DELAY level above 0 on a NOT or COMMIT message, as
    CommitLog.asyncPutMessage decides."""
    level = delay_level(properties)
    return (
        level is not None
        and level > 0
        and sysflag.transaction_type(sys_flag)
        in (sysflag.TRANSACTION_NOT_TYPE, sysflag.TRANSACTION_COMMIT_TYPE)
    )


def apply_delay_rewrite(message: Message, max_level: int) -> Message:
    """4.9's CommitLog rewrite of a delayed message: the real topic and queue go into
    REAL_TOPIC/REAL_QID, the message into SCHEDULE_TOPIC_XXXX queue level-1, and the
    properties are re-serialised in Java HashMap order.

    The properties' insertion order is the caller's, as DefaultMessageStore.putMessage
    keeps the map it is given (CommitLog.asyncPutMessage only puts the two REAL_ entries
    into it). Moving WAIT last is the broker's doing, not the store's: SendMessageProcessor
    removes WAIT and puts it back before the store sees the map (broker.processors.send),
    which changes the order when WAIT shares its bucket with another name (DELAY does,
    in tables of 16 and 32)."""
    level = min(delay_level(message.properties) or 0, max_level)
    values = dict(message.properties)
    values[props.REAL_TOPIC] = message.topic
    values[props.REAL_QID] = str(message.queue_id)
    # A REAL_ name the caller already set keeps its place: putProperty replaces the value.
    ordered = java_hashmap_order([*message.properties, props.REAL_TOPIC, props.REAL_QID])
    return Message(
        topic=SCHEDULE_TOPIC,
        body=message.body,
        queue_id=level - 1,
        flag=message.flag,
        sys_flag=message.sys_flag,
        properties={k: values[k] for k in ordered},
        born_timestamp=message.born_timestamp,
        born_host=message.born_host,
        reconsume_times=message.reconsume_times,
        prepared_transaction_offset=message.prepared_transaction_offset,
    )


_INT32 = (JAVA_INT_MIN, JAVA_INT_MAX)
_INT64 = (JAVA_LONG_MIN, JAVA_LONG_MAX)


def _java_field_misfit(message: Message) -> str | None:
    """Why an int field does not fit the Java int/long it is stored as (a record cannot
    hold anything else), or None when all fit. A queue id is never negative either."""
    fields = (
        ("queue_id", message.queue_id, (0, JAVA_INT_MAX)),
        ("flag", message.flag, _INT32),
        ("sys_flag", message.sys_flag, _INT32),
        ("reconsume_times", message.reconsume_times, _INT32),
        ("prepared_transaction_offset", message.prepared_transaction_offset, _INT64),
        ("born_timestamp", 0 if message.born_timestamp is None else message.born_timestamp, _INT64),
    )
    for name, value, (lo, hi) in fields:
        if not isinstance(value, int):
            return f"{name} must be an int, got {type(value).__name__}"
        if not lo <= value <= hi:
            return f"{name} {value} is outside {lo}..{hi}"
    return None


class MessagePreparer:
    """Validates and encodes messages; one per store (holds parsed config)."""

    def __init__(self, config: StoreConfig):
        self.config = config
        self.max_delay_level = len(delay_levels_ms(config.message_delay_level))
        # Topics that passed the name checks, with their UTF-8 bytes: a store sees few
        # topics and every put would check and encode its topic again.
        self._topics: dict[str, bytes] = {}
        # Born and store hosts that encoded, and "topic-queueId" keys by (topic, queue id):
        # the C encoder takes these tables and leaves anything not in them to prepare().
        self._hosts: dict[str, bytes] = {}
        self._queue_keys: dict[tuple[str, int], str] = {}
        self._max_record = config.max_message_size + MAX_RECORD_EXTRA

    @property
    def queue_keys(self) -> dict[tuple[str, int], str]:
        """ "topic-queueId" strings by (topic, queue id), shared with the C encoders."""
        return self._queue_keys

    @property
    def max_record(self) -> int:
        """The largest record a put may write (max_message_size + MAX_RECORD_EXTRA)."""
        return self._max_record

    def host_bytes(self, host: object) -> bytes:
        """A born or store host as a record holds it (ConfigError if it is none)."""
        if not isinstance(host, str):
            raise ConfigError(f"host must be a str 'ip:port', got {type(host).__name__}")
        return self._host_bytes(host)

    def topic_bytes(self, topic: object) -> bytes | None:
        """A topic's UTF-8 bytes, or None when it is not a legal topic name."""
        return self._topic_bytes(topic)

    @staticmethod
    def now_ms() -> int:
        return now_ms()

    def _host_bytes(self, host: str) -> bytes:
        """``encode_host``, remembered for hosts that encode (ConfigError otherwise)."""
        known = self._hosts.get(host)
        if known is None:
            known = encode_host(host)
            if len(self._hosts) < 65536:
                self._hosts[host] = known
        return known

    def encode(
        self, messages: Sequence[Message], store_host: str | None, *, in_batch: bool
    ) -> EncodedBatch | None:
        """All of ``messages`` checked and encoded by the C extension, or None when it is
        not built or some message is not the common case (no DELAY, a known topic and born
        host, ints in range...): then ``prepare`` each, whose checks define the outcome."""
        if native.encode_batch is None or native.append_encoded is None:
            return None  # (encode_batch, append_encoded and put_results work as one)
        if native.put_results is None:
            return None
        try:
            stored_by = self._host_bytes(store_host or self.config.store_host)
        except ConfigError:
            return None
        encoded = self._native_encode(messages, stored_by, in_batch)
        if encoded is None and self._learn(messages):
            # The first batch of a topic or host: the C encoder only knows the names
            # Python has checked, and would otherwise leave the whole batch to prepare().
            encoded = self._native_encode(messages, stored_by, in_batch)
        if encoded is None:
            return None
        blob, meta, keys, body_bytes = encoded
        return EncodedBatch(blob, meta, keys, body_bytes, stored_by)

    def put_one(
        self, commitlog: CommitLog, message: Message, store_timestamp: int | None
    ) -> PutResult | None:
        """A single put in one C call (``_native.put_one``: encode, append into the last
        file under the put lock, result), or None to leave ``message`` to the general path:
        no C extension, no file yet, a message that is not the common case or does not
        fit in the last file. The caller rules out SYNC_FLUSH and armed crash points, which
        need the general path's steps after the append."""
        config = self.config
        stored_by = self._hosts.get(config.store_host)  # (known after the first put)
        if native.put_one is None or stored_by is None:
            return None
        with commitlog.put_lock:
            mapped = commitlog.files.last
            if mapped is None:  # (a full one: put_one declines, as nothing fits)
                return None
            now = now_ms()
            stamp = now if store_timestamp is None else store_timestamp
            position = mapped.wrote_position
            result: PutResult | None = native.put_one(
                message,
                Message,
                self._topics,
                self._hosts,
                self._queue_keys,
                stored_by,
                config.max_message_size,
                self._max_record,
                config.mapped_file_size_commit_log,
                now,
                mapped.mm,
                position,
                mapped.file_from_offset,
                commitlog.topic_queue_table,
                stamp,
                PutResult,
                PutStatus.PUT_OK,
                True,
            )
            if result is None:
                return None
            # In-process readers go by the write position: moved once all is in.
            mapped.wrote_position = position + result.size
            mapped.store_timestamp = stamp
        if commitlog.on_append is not None:
            commitlog.on_append(mapped.file_from_offset + position + result.size)
        return result

    def _native_encode(
        self, messages: Sequence[Message], stored_by: bytes, in_batch: bool
    ) -> tuple[bytearray, bytes, list[str], int] | None:
        assert native.encode_batch is not None
        encoded: tuple[bytearray, bytes, list[str], int] | None = native.encode_batch(
            messages,
            Message,
            self._topics,
            self._hosts,
            self._queue_keys,
            stored_by,
            self.config.max_message_size,
            self._max_record,
            self.config.mapped_file_size_commit_log,
            in_batch,
            now_ms(),
        )
        return encoded

    def _learn(self, messages: Sequence[Message]) -> bool:
        """Checks the topics and born hosts of ``messages`` that are not known yet, as
        ``prepare`` would; True when some legal one was added to the tables."""
        before = len(self._topics) + len(self._hosts)
        for message in messages:
            if not isinstance(message, Message):
                return False
            topic, host = message.topic, message.born_host
            if isinstance(topic, str) and topic not in self._topics:
                self._topic_bytes(topic)
            if isinstance(host, str) and host not in self._hosts:
                with contextlib.suppress(ConfigError):  # prepare() reports it
                    self._host_bytes(host)
        return len(self._topics) + len(self._hosts) > before

    def _topic_bytes(self, topic: object) -> bytes | None:
        """The topic's UTF-8 bytes, or None when it is not a legal topic name."""
        if isinstance(topic, str):
            known = self._topics.get(topic)
            if known is not None:
                return known
        if (
            not isinstance(topic, str)
            or not topic
            or len(topic) > self.config.max_topic_length
            or not TOPIC_PATTERN.match(topic)
        ):
            return None
        encoded = topic.encode("utf-8")
        if len(self._topics) < 65536:
            self._topics[topic] = encoded
        return encoded

    def _topic_problem(self, topic: object) -> str:
        """What is wrong with a topic ``_topic_bytes`` refused."""
        if not isinstance(topic, str):
            return f"topic must be a str, got {type(topic).__name__}"
        if not topic:
            return "topic is empty"
        if len(topic) > self.config.max_topic_length:
            return f"topic of {len(topic)} characters is over {self.config.max_topic_length}"
        return f"topic {topic!r} has characters outside [%|a-zA-Z0-9_-]"

    def rewrite_delay(self, message: Message, *, delay: bool = True) -> Message:
        """``message`` as stored: a NOT or COMMIT message with a DELAY level goes to
        SCHEDULE_TOPIC_XXXX (``apply_delay_rewrite``), unless ``delay`` is False; anything
        else (a DELAY that is no number included: ``prepare`` refuses it) unchanged."""
        if delay and is_delayed(message.properties, message.sys_flag):
            return apply_delay_rewrite(message, self.max_delay_level)
        return message

    def prepare(
        self,
        message: Message,
        store_host: str | None,
        *,
        in_batch: bool = False,
        delay: bool = True,
    ) -> PreparedMessage | Refusal:
        """Check and encode one message. ``delay=False`` stores a message carrying DELAY
        in its own topic as it is: RocketMQ's delivery of a due delayed message keeps DELAY
        in the properties string (it serialises them before clearing the map entry)."""
        if not isinstance(message, Message):
            raise ConfigError(f"expected a rocketstore.Message, got {type(message).__name__}")
        problem = message_problem(message)
        if problem is not None:
            return _illegal(problem)
        if self._topic_bytes(message.topic) is None:
            return _illegal(self._topic_problem(message.topic))
        misfit = _java_field_misfit(message)
        if misfit is not None:
            return _illegal(misfit)
        level = delay_level(message.properties)
        if level is None:
            return _illegal(f"{props.DELAY} {message.properties[props.DELAY]!r} is not a number")
        transaction = sysflag.transaction_type(message.sys_flag)
        if in_batch and (transaction != sysflag.TRANSACTION_NOT_TYPE or level > 0):
            return _illegal("a batch cannot hold a transactional or a delayed message")
        if delay:
            message = self.rewrite_delay(message)
        body = bytes(message.body)
        if len(body) > self.config.max_message_size:
            return _illegal(
                f"body of {len(body)} bytes is over max_message_size "
                f"({self.config.max_message_size})"
            )
        problem = props.property_problem(message.properties)
        if problem is not None:
            return _illegal(problem)
        properties_text = props.stored_properties_str(message.properties)
        try:
            properties_bytes = properties_text.encode("utf-8")
        except UnicodeEncodeError as e:
            # A lone surrogate: Java would store "?" for it; the API refuses, so that what
            # comes back is what was put.
            bad = repr(properties_text[e.start : e.end])
            return _illegal(f"properties hold {bad}, which UTF-8 cannot encode")
        if len(properties_text) > MAX_PROPERTIES_LENGTH or (
            len(properties_bytes) > MAX_PROPERTIES_LENGTH
        ):
            return Refusal(
                PutStatus.PROPERTIES_SIZE_EXCEEDED,
                f"properties take {len(properties_bytes)} bytes, over {MAX_PROPERTIES_LENGTH}",
            )
        try:
            born_host = self._host_bytes(message.born_host)
        except ConfigError as e:
            return _illegal(f"born_host: {str(e).removeprefix('host: ')}")
        try:
            stored_by = self._host_bytes(store_host or self.config.store_host)
        except ConfigError as e:
            return _illegal(f"store_host: {str(e).removeprefix('host: ')}")
        topic_bytes = self._topic_bytes(message.topic)
        if topic_bytes is None:  # the delay rewrite's topic is always legal
            return _illegal(self._topic_problem(message.topic))
        length = record_length(
            len(body),
            len(topic_bytes),
            len(properties_bytes),
            born_host_length=len(born_host),
            store_host_length=len(stored_by),
        )
        if length > self._max_record:
            return _illegal(
                f"record of {length} bytes is over the largest record ({self._max_record}: "
                f"max_message_size + {MAX_RECORD_EXTRA})"
            )
        if length + 8 > self.config.mapped_file_size_commit_log:
            return _illegal(
                f"record of {length} bytes could never fit in a CommitLog file of "
                f"{self.config.mapped_file_size_commit_log} bytes"
            )
        born = message.born_timestamp
        if born is None:
            born = now_ms()
        return PreparedMessage.encode(
            topic=message.topic,
            topic_bytes=topic_bytes,
            queue_id=message.queue_id,
            body=body,
            body_crc=masked_crc32(body),
            properties_bytes=properties_bytes,
            flag=message.flag,
            sys_flag=message.sys_flag,
            born_timestamp=born,
            born_host=born_host,
            store_host=stored_by,
            reconsume_times=message.reconsume_times,
            prepared_transaction_offset=message.prepared_transaction_offset,
        )


def encoded_results(
    batch: EncodedBatch, appended: AppendedBatch, status: PutStatus
) -> list[PutResult]:
    """One PutResult per record of an appended encoded batch (made in C)."""
    assert native.put_results is not None
    results: list[PutResult] = native.put_results(
        PutResult,
        status,
        status is PutStatus.PUT_OK,
        batch.meta,
        appended.queue_offsets,
        appended.commit_log_offset,
        appended.store_timestamp,
        batch.store_host,
    )
    return results
