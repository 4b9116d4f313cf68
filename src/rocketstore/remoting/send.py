"""Send requests as a RocketMQ 4.9.8 producer builds them: SEND_MESSAGE_V2's one-letter
header and SEND_BATCH_MESSAGE's body (``MessageDecoder.encodeMessages``).

Layer: remoting, pure codec: no sockets, no clock (the caller passes the born time), no
store. Properties arrive as the text a message carries (``name\\x01value\\x02...``,
encoded by the caller: this layer sits beside rocketstore.format, not above it).

A batch body is the messages back to back, each::

    offset  size  field
    0       4     int32 TOTALSIZE   length of this entry, this field included
    4       4     int32 MAGICCODE   0 (unused by the broker)
    8       4     int32 BODYCRC     0 (unused; the store computes it)
    12      4     int32 FLAG        the message's flag
    16      4     int32 BODYLEN
    20      L     body
    20+L    2     int16 PROPERTIESLEN
    22+L    P     properties, UTF-8

The broker's decoder of the same layout is rocketstore.broker.processors.message_batch.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

from rocketstore.errors import ConfigError

AUTO_CREATE_TOPIC = "TBW102"  # the topic a broker with autoCreateTopicEnable registers
_HEAD = struct.Struct(">iiiii")  # TOTALSIZE, MAGICCODE, BODYCRC, FLAG, BODYLEN
_SHORT = struct.Struct(">h")
MAX_PROPERTIES_BYTES = 0x7FFF  # PROPERTIESLEN is a signed short


@dataclass(frozen=True)
class OutgoingMessage:
    """One message to send: its flag, body and properties text."""

    body: bytes
    properties: str
    flag: int = 0


def encode_message_batch(messages: Iterable[OutgoingMessage]) -> bytes:
    """SEND_BATCH_MESSAGE's body; ConfigError for properties a short cannot count."""
    out = bytearray()
    for message in messages:
        props = message.properties.encode("utf-8")
        if len(props) > MAX_PROPERTIES_BYTES:
            raise ConfigError(
                f"a message's properties take {len(props)} bytes; a batch entry holds at "
                f"most {MAX_PROPERTIES_BYTES}"
            )
        total = _HEAD.size + len(message.body) + _SHORT.size + len(props)
        out += _HEAD.pack(total, 0, 0, message.flag, len(message.body))
        out += message.body
        out += _SHORT.pack(len(props))
        out += props
    return bytes(out)


def send_header_v2(
    *,
    producer_group: str,
    topic: str,
    queue_id: int,
    born_timestamp_ms: int,
    properties: str,
    flag: int = 0,
    default_topic: str = AUTO_CREATE_TOPIC,
    default_topic_queue_nums: int = 4,
    batch: bool = False,
) -> dict[str, str]:
    """SendMessageRequestHeaderV2 (its fields a..n as the Java client names them); a
    batch's ``properties`` are the batch's own (the client sends ``WAIT``)."""
    header = {
        "a": producer_group,
        "b": topic,
        "c": default_topic,
        "d": str(default_topic_queue_nums),
        "e": str(queue_id),
        "f": "0",  # sysFlag: no compression, not transactional
        "g": str(born_timestamp_ms),
        "h": str(flag),
        "i": properties,
        "j": "0",  # reconsumeTimes
        "k": "false",  # unitMode
    }
    if batch:
        header["m"] = "true"
    return header
