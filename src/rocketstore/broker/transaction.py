"""Transactional messages: the messages RocketMQ 4.9.8's broker writes for them, as pure
functions (``TransactionalMessageBridge``, ``EndTransactionProcessor``,
``DefaultTransactionalMessageCheckListener``).

Layer: broker, pure (no store, no sockets): :mod:`.transaction_check` and the send and
end-transaction processors put what these build.

The life of a transactional message:

* The producer sends it with the property ``TRAN_MSG=true``. The broker stores a *half*
  message instead: topic ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0, the real topic and queue in
  ``REAL_TOPIC`` / ``REAL_QID``, the transaction bits of the sys flag cleared, so no
  consumer sees it (:func:`half_message_properties`, :func:`half_message`).
* The producer ends it with END_TRANSACTION (commit or rollback). A commit stores the
  message for its real topic and queue with the COMMIT sys-flag type and the half
  message's CommitLog offset as prepared transaction offset (:func:`committed_message`);
  a rollback stores nothing. Either way an *op* message (topic
  ``RMQ_SYS_TRANS_OP_HALF_TOPIC``, tag ``d``, body: the half message's queue offset in
  decimal) marks the half message done (:func:`op_message`).
* A half message with no op message after the transaction timeout is *checked*: stored
  again at the end of the half queue with ``TRANSACTION_CHECK_TIMES`` counted up
  (:func:`renewed_half_message`), and CHECK_TRANSACTION_STATE goes to a producer of its
  group with the renewed copy's offsets (:func:`check_request_fields`,
  :func:`check_request_body`). Past ``transactionCheckMax`` checks, or older than the
  CommitLog retention, it moves to ``TRANS_CHECK_MAX_TIME_TOPIC`` instead
  (:func:`discarded_message`).

Property order: RocketMQ serialises each of these messages from a ``java.util.HashMap``,
so the properties come out in that map's iteration order, computed here by
``java_hashmap_order``. Where RocketMQ writes the properties string and changes the map
afterwards (WAIT, REAL_TOPIC and TRAN_MSG on a committed message; UNIQ_KEY on an op
message), the string is what the record holds, and so it is what these functions give.
"""

from __future__ import annotations

from collections.abc import Mapping

from rocketstore.errors import ConfigError
from rocketstore.format import properties as props
from rocketstore.format import sysflag
from rocketstore.format.hosts import encode_host
from rocketstore.format.javahash import java_hashmap_ordered
from rocketstore.format.message import Message, MessageExt
from rocketstore.format.record import encode_record
from rocketstore.paths import TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC

# MixAll.CID_SYS_RMQ_TRANS: the group whose consumer offsets record the check's progress
# through the half and op queues.
TRANS_GROUP = "CID_RMQ_SYS_TRANS"
# TransactionalMessageUtil.REMOVETAG: the op message's tag for "done".
REMOVE_TAG = "d"
HALF_QUEUE_ID = 0

# BrokerConfig defaults (4.9.8).
TRANSACTION_TIMEOUT_MS = 6_000
TRANSACTION_CHECK_MAX = 15
TRANSACTION_CHECK_INTERVAL_MS = 60_000

# EndTransactionRequestHeader.commitOrRollback values (MessageSysFlag).
COMMIT = sysflag.TRANSACTION_COMMIT_TYPE
ROLLBACK = sysflag.TRANSACTION_ROLLBACK_TYPE
UNKNOWN = sysflag.TRANSACTION_NOT_TYPE


def is_transactional(properties: Mapping[str, str]) -> bool:
    """The broker's test: ``Boolean.parseBoolean(TRAN_MSG)`` (the sys flag is not looked
    at; ``true`` in any letter case counts)."""
    return (properties.get(props.TRAN_MSG) or "").lower() == "true"


def reset_transaction_type(sys_flag: int, kind: int) -> int:
    """``MessageSysFlag.resetTransactionValue``."""
    return (sys_flag & ~sysflag.TRANSACTION_MASK) | kind


def half_message_properties(
    request_properties: Mapping[str, str], cluster_name: str, real_topic: str, real_queue_id: int
) -> dict[str, str]:
    """The properties of the half message for a send whose request carried
    ``request_properties`` (in the request string's order).

    SendMessageProcessor puts CLUSTER into the decoded map, takes WAIT out and puts it
    back (so it moves behind everything else in its bucket), and the bridge adds
    REAL_TOPIC and REAL_QID before it writes the properties string: unlike a plain send,
    the half message keeps WAIT."""
    values = dict(request_properties)
    values[props.CLUSTER] = cluster_name
    keys = list(values)
    if props.WAIT in values:
        keys.remove(props.WAIT)
        keys.append(props.WAIT)
    values[props.REAL_TOPIC] = real_topic
    values[props.REAL_QID] = str(real_queue_id)
    keys += [props.REAL_TOPIC, props.REAL_QID]
    return java_hashmap_ordered(values, keys)


def half_message(
    *,
    body: bytes,
    flag: int,
    sys_flag: int,
    properties: dict[str, str],
    born_timestamp: int,
    born_host: str,
    reconsume_times: int,
) -> Message:
    """The half message to store (``parseHalfMessageInner``), ``properties`` from
    :func:`half_message_properties`."""
    return Message(
        topic=TRANS_HALF_TOPIC,
        body=body,
        queue_id=HALF_QUEUE_ID,
        flag=flag,
        sys_flag=reset_transaction_type(sys_flag, sysflag.TRANSACTION_NOT_TYPE),
        properties=properties,
        born_timestamp=born_timestamp,
        born_host=born_host,
        reconsume_times=reconsume_times,
    )


def real_destination(half: MessageExt) -> tuple[str, int] | None:
    """The topic and queue a half message was sent to, or None when its REAL_TOPIC or
    REAL_QID is missing or REAL_QID is no Java int (RocketMQ would throw)."""
    topic = half.properties.get(props.REAL_TOPIC)
    queue = half.properties.get(props.REAL_QID)
    if not topic or queue is None:
        return None
    queue_id = parse_java_integer(queue, 32)
    return None if queue_id is None else (topic, queue_id)


def required_destination(half: MessageExt) -> tuple[str, int]:
    """``real_destination``, or ValueError naming the half message."""
    destination = real_destination(half)
    if destination is None:
        raise ValueError(
            f"half message at CommitLog offset {half.commit_log_offset} has no valid "
            f"REAL_TOPIC/REAL_QID"
        )
    return destination


def committed_message(half: MessageExt, commit_log_offset: int) -> Message:
    """The message a commit stores (``endMessageTransaction``): the half message for its
    real topic and queue, COMMIT typed, with the half message's CommitLog offset as its
    prepared transaction offset. Its properties are the half message's, REAL_TOPIC,
    REAL_QID and TRAN_MSG included, in HashMap order (RocketMQ writes the string before
    it clears those entries from the map). The body is the stored one (still compressed
    when the sys flag says so). ValueError when the half message has no real topic."""
    topic, queue_id = required_destination(half)
    return Message(
        topic=topic,
        body=half.body if half.body is not None else b"",
        queue_id=queue_id,
        flag=half.flag,
        sys_flag=reset_transaction_type(half.sys_flag, COMMIT),
        properties=java_hashmap_ordered(half.properties),
        born_timestamp=half.born_timestamp,
        born_host=half.born_host,
        reconsume_times=half.reconsume_times,
        prepared_transaction_offset=commit_log_offset,
    )


def op_message(
    half_queue_offset: int, half_queue_id: int, broker_addr: str, now_ms: int
) -> Message:
    """The op message that marks the half message at ``half_queue_offset`` of half queue
    ``half_queue_id`` done (``addRemoveTagInTransactionOp``), in the op queue of the same
    id: tag ``d``, the offset in decimal as body, born and stored by the broker itself.
    Its properties string is that of ``new Message(topic, "d", body)``: TAGS and
    WAIT=true (the UNIQ_KEY RocketMQ adds to the map afterwards is not written)."""
    values = {props.TAGS: REMOVE_TAG, props.WAIT: "true"}
    return Message(
        topic=TRANS_OP_HALF_TOPIC,
        body=str(half_queue_offset).encode("utf-8"),
        queue_id=half_queue_id,
        flag=0,
        sys_flag=0,
        properties=java_hashmap_ordered(values),
        born_timestamp=now_ms,
        born_host=broker_addr,
    )


def parse_java_integer(text: str, bits: int) -> int | None:
    """``Integer.parseInt`` (bits 32) or ``Long.parseLong`` (64): an optional sign and
    ASCII digits that fit; None otherwise (no spaces or underscores, which Python's int
    would take)."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits or not digits.isascii() or not digits.isdigit():
        return None
    value = int(text, 10)
    limit = 2 ** (bits - 1)
    return value if -limit <= value < limit else None


def op_half_offset(op: MessageExt) -> int:
    """The half queue offset an op message marks done; -1 when its body is no Java long
    (RocketMQ's ``getLong`` logs and answers -1)."""
    value = parse_java_integer((op.body or b"").decode("utf-8", errors="replace"), 64)
    return -1 if value is None else value


def counted_check(properties: dict[str, str], check_max: int) -> bool:
    """``needDiscard``: True when the half message was checked ``check_max`` times
    already; otherwise counts this check in ``properties`` (TRANSACTION_CHECK_TIMES, 1
    the first time) and answers False."""
    current = properties.get(props.TRANSACTION_CHECK_TIMES)
    times = 1
    if current is not None:
        parsed = parse_java_integer(current, 32)
        times = -1 if parsed is None else parsed  # RocketMQ's getInt: -1 when unparsable
        if times >= check_max:
            return True
        times += 1
    # A dict keeps a replaced key where it was, as a HashMap keeps its bucket entry.
    properties[props.TRANSACTION_CHECK_TIMES] = str(times)
    return False


def renewed_half_message(
    half: MessageExt, properties: Mapping[str, str], *, prepared_queue_offset: str | None = None
) -> Message:
    """A half message stored again at the end of its queue (``renewHalfMessageInner``):
    topic, queue, body, sys flag, born time and host as the half message; flag and
    reconsume times are not carried (RocketMQ leaves them 0). ``properties`` is the half
    message's map as the check changed it, in insertion order. With
    ``prepared_queue_offset`` (``renewImmunityHalfMessageInner``) the copy also carries
    TRAN_PREPARED_QUEUE_OFFSET: the offset of the half message it stands for."""
    keys = list(properties)
    values = dict(properties)
    if prepared_queue_offset is not None:
        values[props.TRAN_PREPARED_QUEUE_OFFSET] = prepared_queue_offset
        if props.TRAN_PREPARED_QUEUE_OFFSET not in keys:
            keys.append(props.TRAN_PREPARED_QUEUE_OFFSET)
    return Message(
        topic=half.topic,
        body=half.body if half.body is not None else b"",
        queue_id=half.queue_id,
        flag=0,
        sys_flag=half.sys_flag,
        properties=java_hashmap_ordered(values, keys),
        born_timestamp=half.born_timestamp,
        born_host=half.born_host,
    )


def discarded_message(half: MessageExt, properties: Mapping[str, str]) -> Message:
    """A half message checked too often, as stored in TRANS_CHECK_MAX_TIME_TOPIC queue 0
    (``toMessageExtBrokerInner``)."""
    return Message(
        topic=TRANS_CHECK_MAX_TIME_TOPIC,
        body=half.body if half.body is not None else b"",
        queue_id=0,
        flag=half.flag,
        sys_flag=half.sys_flag,
        properties=java_hashmap_ordered(properties),
        born_timestamp=half.born_timestamp,
        born_host=half.born_host,
        reconsume_times=half.reconsume_times,
    )


def check_request_fields(
    *, uniq_key: str | None, queue_offset: int, commit_log_offset: int, offset_msg_id: str
) -> dict[str, str]:
    """CheckTransactionStateRequestHeader for the renewed copy of a half message: the
    producer answers with END_TRANSACTION naming these offsets. ``msgId`` and
    ``transactionId`` are the message's UNIQ_KEY (left out when it has none, as a null
    field is)."""
    fields = {
        "tranStateTableOffset": str(queue_offset),
        "commitLogOffset": str(commit_log_offset),
        "offsetMsgId": offset_msg_id,
    }
    if uniq_key is not None:
        fields["msgId"] = uniq_key
        fields["transactionId"] = uniq_key
    return fields


def check_request_body(
    half: MessageExt,
    properties: Mapping[str, str],
    *,
    queue_offset: int,
    commit_log_offset: int,
) -> bytes:
    """The body of CHECK_TRANSACTION_STATE: the half message encoded as a record
    (``MessageDecoder.encode``) for its real topic and queue, with the renewed copy's
    queue and CommitLog offsets, ``properties`` (the map as the check changed it) in
    HashMap order, and its stored body and sys flag. ValueError when it has no real
    topic or the topic does not fit a record."""
    topic, queue_id = required_destination(half)
    ordered = java_hashmap_ordered(properties)
    try:
        return encode_record(
            topic=topic.encode("utf-8"),
            body=half.body if half.body is not None else b"",
            properties=props.encode_properties(ordered),
            queue_id=queue_id,
            flag=half.flag,
            queue_offset=queue_offset,
            physical_offset=commit_log_offset,
            sys_flag=half.sys_flag,
            born_timestamp=half.born_timestamp,
            born_host=encode_host(half.born_host),
            store_timestamp=half.store_timestamp,
            store_host=encode_host(half.store_host),
            reconsume_times=half.reconsume_times,
            prepared_transaction_offset=half.prepared_transaction_offset,
            body_crc=half.body_crc,
        )
    except ConfigError as e:  # a topic or properties the record codec cannot hold
        raise ValueError(f"cannot encode the check request for topic {topic!r}: {e}") from e
