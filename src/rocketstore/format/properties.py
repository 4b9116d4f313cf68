"""Message properties string: ``name \\x01 value \\x02 ...`` (pure codec).

Writing follows RocketMQ 4.9.1+: entries in the order given, no trailing 0x02. Reading
accepts both trailing forms and drops malformed segments exactly as RocketMQ's
``MessageDecoder.string2messageProperties`` does (4.9.1+ rules).
"""

from __future__ import annotations

from collections.abc import Mapping

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"

# Property names (MessageConst, 4.9.8).
KEYS = "KEYS"
TAGS = "TAGS"
WAIT = "WAIT"
DELAY = "DELAY"
UNIQ_KEY = "UNIQ_KEY"
REAL_TOPIC = "REAL_TOPIC"
REAL_QID = "REAL_QID"
CLUSTER = "CLUSTER"
RETRY_TOPIC = "RETRY_TOPIC"
TRAN_MSG = "TRAN_MSG"
TRAN_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
PGROUP = "PGROUP"
MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
RECONSUME_TIME = "RECONSUME_TIME"
CRC32_PROPERTY = "__CRC32#"
# RocketMQ 5.x timer messages (a delivery time, or a delay in ms or s), and the mark of
# one the timer wheel has already rolled.
TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
TIMER_DELAY_MS = "TIMER_DELAY_MS"
TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
TIMER_OUT_MS = "TIMER_OUT_MS"
TIMER_TOPIC = "rmq_sys_wheel_timer"
# What the timer wheel adds when it delivers (enqueue and dequeue times, rolls), and the
# key of a message a delete (recall) message drops.
TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"
TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
TIMER_ROLL_TIMES = "TIMER_ROLL_TIMES"
TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"
# What a RocketMQ 5 proxy adds to a gRPC producer's message: its message group (FIFO), its
# trace context, and the born host and time the client reported.
SHARDING_KEY = "__SHARDINGKEY"
TRACE_CONTEXT = "TRACE_CONTEXT"
BORN_HOST = "__BORNHOST"
BORN_TIMESTAMP = "BORN_TIMESTAMP"
# Added by the client to every pulled message (PullAPIWrapper), never stored.
MIN_OFFSET = "MIN_OFFSET"
MAX_OFFSET = "MAX_OFFSET"
KEY_SEPARATOR = " "


class VerbatimProperties(dict[str, str]):
    """Properties that are stored as the given string, byte for byte, rather than
    re-serialised: RocketMQ's broker keeps the property bytes of each message of a batch as
    the client encoded them (a trailing 0x02, repeated names and all) and appends the
    batch's own properties (``CommitLog.MessageExtEncoder.encode(MessageExtBatch)``).

    The mapping is the string's decoding (a later repeated name wins, as in RocketMQ) and
    serves everything that reads properties (tags, keys, checks); ``text`` is what the
    record holds. Changing the mapping does not change ``text``.
    """

    __slots__ = ("text",)

    def __init__(self, text: str):
        super().__init__(decode_properties_str(text))
        self.text = text


def stored_properties_str(properties: Mapping[str, str]) -> str:
    """The properties string a record of ``properties`` holds: the verbatim text of
    VerbatimProperties, else the 4.9.1+ serialisation."""
    if isinstance(properties, VerbatimProperties):
        return properties.text
    return encode_properties_str(properties)


def property_problem(properties: Mapping[str, object]) -> str | None:
    """What in ``properties`` a record could not give back as it was put, or None: an empty
    name or value (a reader drops the entry) or one holding a separator (it splits the
    entry). VerbatimProperties are a record's own text: nothing to check."""
    if isinstance(properties, VerbatimProperties):
        return None
    for name, value in properties.items():
        if value is None:  # skipped, as Java skips it
            continue
        if not name:
            return "a property has an empty name"
        text = str(value)
        if not text:
            return f"property {name!r} is empty (a record cannot keep an empty value)"
        for part in (str(name), text):
            if NAME_VALUE_SEPARATOR in part or PROPERTY_SEPARATOR in part:
                return (
                    f"property {name!r}: {part!r} holds a separator (\\x01 or \\x02) of the "
                    "properties string"
                )
    return None


def join_batch_properties(inner: str, batch: str) -> str:
    """A batch record's properties (RocketMQ 4.9.2+): the message's own string, then one
    0x02 unless either part is empty or the message's already ends in one, then the
    batch's properties string."""
    if inner and batch and not inner.endswith(PROPERTY_SEPARATOR):
        return inner + PROPERTY_SEPARATOR + batch
    return inner + batch


def encode_properties_str(
    properties: Mapping[str, str], *, trailing_separator: bool = False
) -> str:
    """Serialise in mapping order; entries whose value is None are skipped as in Java."""
    parts = []
    for name, value in properties.items():
        if value is None:
            continue
        parts.append(f"{name}{NAME_VALUE_SEPARATOR}{value}{PROPERTY_SEPARATOR}")
    text = "".join(parts)
    if text and not trailing_separator:
        text = text[:-1]
    return text


def encode_properties(properties: Mapping[str, str], *, trailing_separator: bool = False) -> bytes:
    return encode_properties_str(properties, trailing_separator=trailing_separator).encode("utf-8")


def decode_properties_str(text: str) -> dict[str, str]:
    """Parse a properties string; malformed segments are dropped silently (RocketMQ's rule).

    A segment between 0x02 separators is kept only if it has at least 3 characters and its
    first 0x01 (searched from the segment start) lies after the first character and before
    the last one, so key and value are both non-empty.
    """
    result: dict[str, str] = {}
    length = len(text)
    index = 0
    while index < length:
        end = text.find(PROPERTY_SEPARATOR, index)
        if end < 0:
            end = length
        if end - index >= 3:
            sep = text.find(NAME_VALUE_SEPARATOR, index)
            if index < sep < end - 1:
                result[text[index:sep]] = text[sep + 1 : end]
        index = end + 1
    return result


def decode_properties(data: bytes | bytearray | memoryview) -> dict[str, str]:
    return decode_properties_str(bytes(data).decode("utf-8", errors="replace"))


def split_keys(keys: str | None) -> list[str]:
    """The KEYS property's tokens (space separated; empty tokens dropped as the index does)."""
    if not keys:
        return []
    return [k for k in keys.split(KEY_SEPARATOR) if k]


# The names RocketMQ's MessageConst defines for its own properties (PROPERTY_* of 5.3,
# which holds 4.9.8's, and DUP_INFO): what is not one of these is a user property, the
# ``headers`` of a Spark read. 4.9.8's Message.putUserProperty refuses a subset of them.
SYSTEM_PROPERTY_NAMES = frozenset(
    (
        "1ST_POP_TIME", "ARRIVE_TIME", "BORN_TIMESTAMP", "BUYER_ID",
        "CHECK_IMMUNITY_TIME_IN_SECONDS", "CLUSTER", "CONSUME_START_TIME", "CORRECTION_FLAG",
        "CORRELATION_ID", "DELAY", "DLQ_ORIGIN_MESSAGE_ID", "DLQ_ORIGIN_TOPIC", "DUP_INFO",
        "EXTEND_UNIQ_INFO", "INNER_BASE", "INNER_MULTI_DISPATCH", "INNER_MULTI_QUEUE_OFFSET",
        "INNER_NUM", "INSTANCE_ID", "KEYS", "MAX_OFFSET", "MAX_RECONSUME_TIMES", "MIN_OFFSET",
        "MQ2_FLAG", "MSG_REGION", "MSG_TYPE", "ORIGIN_MESSAGE_ID", "PGROUP", "POP_CK",
        "POP_CK_OFFSET", "PROPERTY_FORWARD_QUEUE_ID", "PUSH_REPLY_TIME", "REAL_QID",
        "REAL_TOPIC", "RECONSUME_TIME", "REDIRECT", "REPLY_TO_CLIENT", "RETRY_TOPIC", "TAGS",
        "TIMER_DELAY_LEVEL", "TIMER_DELAY_MS", "TIMER_DELAY_SEC", "TIMER_DELIVER_MS",
        "TIMER_DEL_UNIQKEY", "TIMER_DEQUEUE_MS", "TIMER_ENQUEUE_MS", "TIMER_OUT_MS",
        "TIMER_ROLL_TIMES", "TRACE_CONTEXT", "TRACE_ON", "TRANSACTION_CHECK_TIMES",
        "TRANSFER_FLAG", "TRAN_MSG", "TRAN_PREPARED_QUEUE_OFFSET", "TTL", "UNIQ_KEY", "WAIT",
        "__BORNHOST", "__CRC32#", "__SHARDINGKEY", "__transactionId__",
    )
)  # fmt: skip


def user_properties(properties: Mapping[str, str]) -> dict[str, str]:
    """The properties a producer set itself (names not in SYSTEM_PROPERTY_NAMES)."""
    return {k: v for k, v in properties.items() if k not in SYSTEM_PROPERTY_NAMES}
