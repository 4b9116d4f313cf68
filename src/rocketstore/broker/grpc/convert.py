"""Conversions between the gRPC protocol's messages and the store's records.

Layer: broker.grpc. Pure (no I/O): a producer's ``apache.rocketmq.v2.Message`` becomes the
properties a RocketMQ 5 proxy hands its broker (SendMessageActivity.buildMessageProperty),
so the record is the one the remoting path writes for the same message; a stored
``MessageExt`` becomes what the proxy answers a receive with (GrpcConverter).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

from google.protobuf.timestamp_pb2 import Timestamp

from rocketstore.broker.grpc.protocol import rocketmq_v2_types_pb2 as pb
from rocketstore.format import properties as props
from rocketstore.format import sysflag
from rocketstore.format.message import MessageExt

# The proxy's defaults (ProxyConfig): limits of what a gRPC producer may send.
MAX_USER_PROPERTY_BYTES = 16 * 1024
MAX_USER_PROPERTIES = 128
MAX_MESSAGE_GROUP_BYTES = 64
MAX_DELAY_MS = 24 * 3600 * 1000
# TopicValidator / GrpcValidator: a tag may not hold these.
_TAG_FORBIDDEN = ("|",)


class RequestError(Exception):
    """A request the proxy refuses: the status code and its message."""

    def __init__(self, code: pb.Code, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def status(code: pb.Code, message: str | None = None) -> pb.Status:
    return pb.Status(code=code, message=message if message is not None else pb.Code.Name(code))


def _has_control_character(text: str) -> bool:
    # GrpcValidator.containControlCharacter: any char below 0x20 but tab, CR and LF.
    return any(ord(c) < 0x20 and c not in "\t\r\n" for c in text)


def timestamp_ms(value: Timestamp) -> int:
    return int(value.seconds) * 1000 + int(value.nanos) // 1_000_000


def timestamp_of(ms: int) -> Timestamp:
    return Timestamp(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


@dataclass(frozen=True)
class SendFields:
    """What a send turns one protocol message into: the properties (before the broker's
    CLUSTER) in the proxy's insertion order, the sys flag and the born time."""

    properties: dict[str, str]
    sys_flag: int
    born_timestamp: int
    transactional: bool
    delivery_timestamp_ms: int | None


def _validate_tag(tag: str) -> None:
    if tag.strip() == "" and tag != "":
        raise RequestError(
            pb.Code.ILLEGAL_MESSAGE_TAG, "tag cannot be the char sequence of whitespace"
        )
    if any(c in tag for c in _TAG_FORBIDDEN):
        raise RequestError(pb.Code.ILLEGAL_MESSAGE_TAG, "tag cannot contain '|'")
    if _has_control_character(tag):
        raise RequestError(pb.Code.ILLEGAL_MESSAGE_TAG, "tag cannot contain control character")


def _validate_key(key: str) -> None:
    if key and not key.strip():
        raise RequestError(
            pb.Code.ILLEGAL_MESSAGE_KEY, "key cannot be the char sequence of whitespace"
        )
    if _has_control_character(key):
        raise RequestError(pb.Code.ILLEGAL_MESSAGE_KEY, "key cannot contain control character")


def _validate_group(group: str) -> None:
    if not group.strip():
        raise RequestError(
            pb.Code.ILLEGAL_MESSAGE_GROUP, "message group cannot be the char sequence of whitespace"
        )
    if len(group.encode()) >= MAX_MESSAGE_GROUP_BYTES:
        raise RequestError(
            pb.Code.ILLEGAL_MESSAGE_GROUP,
            f"message group exceed the max size {MAX_MESSAGE_GROUP_BYTES}",
        )
    if _has_control_character(group):
        raise RequestError(
            pb.Code.ILLEGAL_MESSAGE_GROUP, "message group cannot contain control character"
        )


def send_fields(
    message: pb.Message,
    born_host: str,
    *,
    max_body_bytes: int,
    delay_levels_ms: list[int],
    now_ms: int | None = None,
    timer_wheel: bool = False,
) -> SendFields:
    """The properties a RocketMQ 5 proxy builds for ``message`` (buildMessageProperty), in
    its order: user properties, TAGS, KEYS, UNIQ_KEY, the transaction and delivery-time
    properties, RECONSUME_TIME, PGROUP (the topic, as the proxy names the producer
    group), __SHARDINGKEY, TRACE_CONTEXT, __BORNHOST, BORN_TIMESTAMP. RequestError with
    the proxy's code for what it refuses.

    A delivery time becomes TIMER_DELIVER_MS, for the timer wheel (``timer_wheel``); with
    the wheel off, the store's delay level that first reaches it beside TIMER_DELIVER_MS
    (the proxy's useDelayLevel mode): delivered at that level's time, not to the step."""
    body = message.body
    if not body:
        raise RequestError(pb.Code.MESSAGE_BODY_EMPTY, "message body cannot be empty")
    if len(body) > max_body_bytes:
        raise RequestError(
            pb.Code.MESSAGE_BODY_TOO_LARGE, f"message body cannot exceed the max {max_body_bytes}"
        )
    system = message.system_properties
    user = dict(message.user_properties)
    if len(user) > MAX_USER_PROPERTIES:
        raise RequestError(
            pb.Code.MESSAGE_PROPERTIES_TOO_LARGE,
            f"too many user properties, max is {MAX_USER_PROPERTIES}",
        )
    user_bytes = 0
    for name, value in user.items():
        if name in props.SYSTEM_PROPERTY_NAMES:
            raise RequestError(
                pb.Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property is used by system: {name}"
            )
        if _has_control_character(name):
            raise RequestError(
                pb.Code.ILLEGAL_MESSAGE_PROPERTY_KEY,
                "the key of property cannot contain control character",
            )
        if _has_control_character(value):
            raise RequestError(
                pb.Code.ILLEGAL_MESSAGE_PROPERTY_KEY,
                "the value of property cannot contain control character",
            )
        user_bytes += len(name.encode()) + len(value.encode())
    properties = dict(user)
    tag = system.tag
    _validate_tag(tag)
    if system.HasField("tag"):
        properties[props.TAGS] = tag
    user_bytes += len(tag.encode())
    keys = list(system.keys)
    for key in keys:
        _validate_key(key)
        user_bytes += len(key.encode())
    if keys:
        properties[props.KEYS] = props.KEY_SEPARATOR.join(keys)
    if user_bytes > MAX_USER_PROPERTY_BYTES:
        raise RequestError(
            pb.Code.MESSAGE_PROPERTIES_TOO_LARGE,
            f"the total size of user property is too large, max is {MAX_USER_PROPERTY_BYTES}",
        )
    if not system.message_id.strip():
        raise RequestError(pb.Code.ILLEGAL_MESSAGE_ID, "message id cannot be empty")
    properties[props.UNIQ_KEY] = system.message_id
    transactional = system.message_type == pb.MessageType.TRANSACTION
    if transactional:
        properties[props.TRAN_MSG] = "true"
        if system.HasField("orphaned_transaction_recovery_duration"):
            seconds = system.orphaned_transaction_recovery_duration.seconds
            properties[props.CHECK_IMMUNITY_TIME_IN_SECONDS] = str(seconds)
    delivery_ms: int | None = None
    now = int(time.time() * 1000) if now_ms is None else now_ms
    if system.HasField("delivery_timestamp"):
        delivery_ms = timestamp_ms(system.delivery_timestamp)
        if delivery_ms - now > MAX_DELAY_MS:
            raise RequestError(
                pb.Code.ILLEGAL_DELIVERY_TIME,
                f"the max delay time of message is too large, max is {MAX_DELAY_MS}",
            )
        if not timer_wheel:
            properties[props.DELAY] = str(delay_level_for(delivery_ms, delay_levels_ms, now))
        properties[props.TIMER_DELIVER_MS] = str(delivery_ms)
    properties[props.RECONSUME_TIME] = str(system.delivery_attempt)
    properties[props.PGROUP] = message.topic.name
    if system.message_group:
        _validate_group(system.message_group)
        properties[props.SHARDING_KEY] = system.message_group
    if system.trace_context:
        properties[props.TRACE_CONTEXT] = system.trace_context
    if system.born_host.strip():
        born_host = system.born_host
    if born_host.strip():
        properties[props.BORN_HOST] = born_host
    born_ms = now
    if system.HasField("born_timestamp"):
        born_ms = timestamp_ms(system.born_timestamp)
        properties[props.BORN_TIMESTAMP] = str(born_ms)
    flag = 0
    if system.body_encoding == pb.Encoding.GZIP:
        flag |= sysflag.COMPRESSED_FLAG
    if transactional:
        flag |= sysflag.TRANSACTION_PREPARED_TYPE
    return SendFields(properties, flag, born_ms, transactional, delivery_ms)


def delay_level_for(delivery_ms: int, levels_ms: list[int], now_ms: int) -> int:
    """The proxy's computeDelayLevel (useDelayLevel): the first level longer than the
    wait asked, else the longest; levels are 1-based."""
    wait_ms = delivery_ms - now_ms
    ranked = sorted(range(len(levels_ms)), key=lambda i: levels_ms[i])
    for index in ranked:
        if levels_ms[index] > wait_ms:
            return index + 1
    return ranked[-1] + 1


def message_type_of(properties: dict[str, str]) -> pb.MessageType:
    if properties.get(props.TRAN_MSG) == "true":
        return pb.MessageType.TRANSACTION
    if any(
        name in properties for name in (props.DELAY, props.TIMER_DELIVER_MS, props.TIMER_DELAY_SEC)
    ):
        return pb.MessageType.DELAY
    if props.SHARDING_KEY in properties:
        return pb.MessageType.FIFO
    return pb.MessageType.NORMAL


def proto_message(
    ext: MessageExt,
    *,
    receipt_handle: str | None = None,
    delivery_attempt: int | None = None,
    invisible_ms: int | None = None,
) -> pb.Message:
    """A stored message as the proxy answers it (GrpcConverter.buildMessage): user
    properties apart, the system ones mapped, an MD5 digest of the body as stored."""
    properties = dict(ext.properties)
    body = ext.body or b""
    system = pb.SystemProperties(
        message_id=properties.get(props.UNIQ_KEY) or ext.msg_id,
        body_digest=pb.Digest(
            type=pb.DigestType.MD5, checksum=hashlib.md5(body).hexdigest().upper()
        ),
        body_encoding=(
            pb.Encoding.GZIP if ext.sys_flag & sysflag.COMPRESSED_FLAG else pb.Encoding.IDENTITY
        ),
        message_type=message_type_of(properties),
        born_timestamp=timestamp_of(ext.born_timestamp),
        born_host=properties.get(props.BORN_HOST) or ext.born_host,
        store_timestamp=timestamp_of(ext.store_timestamp),
        store_host=ext.store_host,
        queue_id=ext.queue_id,
        queue_offset=ext.queue_offset,
        delivery_attempt=(
            delivery_attempt if delivery_attempt is not None else ext.reconsume_times + 1
        ),
    )
    if props.TAGS in properties:
        system.tag = properties[props.TAGS]
    keys = properties.get(props.KEYS)
    if keys is not None:
        system.keys.extend(keys.split(props.KEY_SEPARATOR))
    deliver = properties.get(props.TIMER_DELIVER_MS)
    if deliver is not None and deliver.lstrip("-").isdigit():
        system.delivery_timestamp.CopyFrom(timestamp_of(int(deliver)))
    if props.SHARDING_KEY in properties:
        system.message_group = properties[props.SHARDING_KEY]
    if receipt_handle is not None:
        system.receipt_handle = receipt_handle
    if invisible_ms is not None:
        system.invisible_duration.seconds = invisible_ms // 1000
        system.invisible_duration.nanos = (invisible_ms % 1000) * 1_000_000
    if props.TRACE_CONTEXT in properties:
        system.trace_context = properties[props.TRACE_CONTEXT]
    origin_topic = properties.get("DLQ_ORIGIN_TOPIC")
    origin_id = properties.get("DLQ_ORIGIN_MESSAGE_ID")
    if origin_topic is not None and origin_id is not None:
        system.dead_letter_queue.topic = origin_topic
        system.dead_letter_queue.message_id = origin_id
    return pb.Message(
        topic=pb.Resource(name=ext.topic),
        user_properties=props.user_properties(properties),
        system_properties=system,
        body=body,
    )
