"""The body of a message-trace message (``RMQ_SYS_TRACE_TOPIC``), as RocketMQ clients
write it (``TraceDataEncoder``). Pure codec.

A body holds trace entries, each ended by 0x02 (FIELD_SPLITOR), their fields separated by
0x01 (CONTENT_SPLITOR), the first field naming the kind. Fields by kind (5.x; 4.9 writes the
same, without Recall):

* ``Pub``: timestamp, regionId, groupName, topic, msgId, tags, keys, storeHost, bodyLength,
  costTime, msgType (ordinal), then offsetMsgId and success (older clients: success alone
  at 12; some add clientHost at 14);
* ``SubBefore``: timestamp, regionId, groupName, requestId, msgId, retryTimes, keys;
* ``SubAfter``: requestId, msgId, costTime, success, keys, then contextCode, timestamp and
  groupName when the client wrote them (not on the CLOUD access channel);
* ``EndTransaction``: timestamp, regionId, groupName, topic, msgId, tags, keys, storeHost,
  msgType, transactionId, transactionState, fromTransactionCheck;
* ``Recall``: timestamp, regionId, groupName, topic, msgId, success.

Splitting follows Java's ``String.split``, which drops trailing empty strings. Java's
decoder throws on an entry whose numbers do not parse (and so fails the whole query); this
one leaves such an entry out.
"""

from __future__ import annotations

from dataclasses import dataclass

CONTENT_SPLITOR = "\x01"
FIELD_SPLITOR = "\x02"
KINDS = ("Pub", "Recall", "SubBefore", "SubAfter", "EndTransaction")


@dataclass(frozen=True)
class TraceEntry:
    """One decoded entry: what ``TraceView`` keeps of it (absent fields are defaults)."""

    kind: str
    msg_id: str
    group_name: str | None = None
    timestamp: int = 0
    cost_time: int = 0
    success: bool = True
    topic: str | None = None
    tags: str | None = None
    keys: str | None = None
    store_host: str | None = None
    offset_msg_id: str | None = None


def java_split(text: str, separator: str) -> list[str]:
    """``String.split`` for a one-character separator: trailing empty strings dropped."""
    parts = text.split(separator)
    while parts and parts[-1] == "":
        parts.pop()
    return parts or [""]


def _must_parse(*numbers: str) -> None:
    """ValueError unless each is an integer: numbers Java's decoder parses but a view
    does not keep."""
    for number in numbers:
        int(number)


def _java_bool(text: str) -> bool:
    return text.lower() == "true"  # Boolean.parseBoolean


def decode_trace_data(body: str) -> list[TraceEntry]:
    """Every entry of a trace message body that decodes, in order."""
    if not body:
        return []
    entries = []
    for raw in java_split(body, FIELD_SPLITOR):
        try:
            entry = _decode_entry(java_split(raw, CONTENT_SPLITOR))
        except (IndexError, ValueError):
            continue
        if entry is not None:
            entries.append(entry)
    return entries


def _decode_entry(f: list[str]) -> TraceEntry | None:
    kind = f[0]
    if kind == "Pub":
        success = True
        offset_msg_id = None
        if len(f) == 13:
            success = _java_bool(f[12])
        elif len(f) >= 14:
            offset_msg_id, success = f[12], _java_bool(f[13])
        _must_parse(f[9], f[11])  # bodyLength and msgType
        return TraceEntry(
            kind, f[5], f[3], int(f[1]), int(f[10]), success, f[4], f[6], f[7], f[8],
            offset_msg_id,
        )  # fmt: skip
    if kind == "SubBefore":
        _must_parse(f[6])  # retryTimes
        return TraceEntry(kind, f[5], f[3], int(f[1]), keys=f[7])
    if kind == "SubAfter":
        cost, success, keys = int(f[3]), _java_bool(f[4]), f[5]
        if len(f) >= 7:
            _must_parse(f[6])  # contextCode
        timestamp, group = (int(f[7]), f[8]) if len(f) >= 9 else (0, None)
        return TraceEntry(kind, f[2], group, timestamp, cost, success, keys=keys)
    if kind == "EndTransaction":
        _must_parse(f[9])  # msgType
        return TraceEntry(
            kind, f[5], f[3], int(f[1]), topic=f[4], tags=f[6], keys=f[7], store_host=f[8]
        )
    if kind == "Recall":
        return TraceEntry(kind, f[5], f[3], int(f[1]), success=_java_bool(f[6]), topic=f[4])
    return None


def encode_pub(
    *,
    timestamp: int,
    region_id: str,
    group_name: str,
    topic: str,
    msg_id: str,
    tags: str,
    keys: str,
    store_host: str,
    body_length: int,
    cost_time: int,
    msg_type: int,
    offset_msg_id: str,
    success: bool,
) -> str:
    """A ``Pub`` entry as a producer's trace hook writes it."""
    fields = (
        "Pub", timestamp, region_id, group_name, topic, msg_id, tags, keys, store_host,
        body_length, cost_time, msg_type, offset_msg_id, _java_str(success),
    )  # fmt: skip
    return CONTENT_SPLITOR.join(map(str, fields)) + FIELD_SPLITOR


def encode_sub_after(
    *,
    request_id: str,
    msg_id: str,
    cost_time: int,
    success: bool,
    keys: str,
    context_code: int,
    timestamp: int | None,
    group_name: str | None,
) -> str:
    """A ``SubAfter`` entry as a consumer's trace hook writes it (``timestamp`` and
    ``group_name`` None: the CLOUD access channel, which leaves them out)."""
    fields = ["SubAfter", request_id, msg_id, str(cost_time), _java_str(success), keys]
    text = CONTENT_SPLITOR.join(fields) + CONTENT_SPLITOR + str(context_code) + CONTENT_SPLITOR
    if timestamp is not None and group_name is not None:
        text += f"{timestamp}{CONTENT_SPLITOR}{group_name}"
    return text + FIELD_SPLITOR


def _java_str(value: bool) -> str:
    return "true" if value else "false"
