"""Request shapes that only a shifted signature produces, refused when ACL is on.

Layer: broker; pure.

RocketMQ's signature covers the concatenation of the ext field values in key order, not
the fields themselves: a captured request stays verified when characters move from the
end of one value to the start of the next (or back), when a field that became empty is
dropped, and when an empty-named or empty-valued field is added. ``_UNIQUE_KEY_QUERY`` is
left out of the content altogether. No signature check can tell such a request from the
one the client signed; what can be refused is the shape a shift leaves behind and no
client sends:

- an ext field with an empty name;
- an integer header field (queueId, queueOffset, commitOffset, sysFlag, bornTimestamp...)
  that is not a canonical decimal (empty, ``+1``, ``01``, spaces): moving its leading
  digit to a neighbour, or the neighbour's trailing characters into it, mostly leaves
  one of these;
- a boolean header field (unitMode, batch...) that is not ``true``/``false`` (or ``0``/``1``,
  as the C++ client writes them): SEND_MESSAGE's
  topic ``Pub`` followed by unitMode ``false`` signs as ``Pubfalse``, so topic
  ``Pubfalse`` with unitMode ``""`` verified;
- an empty topic, group or key where the request needs one;
- ``_UNIQUE_KEY_QUERY`` other than ``true``/``false``.

What stays possible (see docs/broker.md, Security): a shift that leaves every field
well-formed (queueOffset ``1`` + subVersion ``1700000000000`` -> ``11`` +
``700000000000``), dropping a field that had become empty where the field is optional,
adding ``_UNIQUE_KEY_QUERY=true`` to a QUERY_MESSAGE, and replaying a captured request
unchanged. TLS closes these for a network attacker.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from rocketstore.broker.codes import RequestCode
from rocketstore.remoting.acl_signing import UNIQUE_MSG_QUERY_FLAG

__all__ = ["shifted_shape"]

_CANONICAL_INT = re.compile(r"-?(0|[1-9][0-9]*)\Z")
_BOOLEANS = ("true", "false")
# The C++ client (rocketmq 0.4.4 for Python) writes SEND_MESSAGE's booleans as 0 and 1.
_BOOLEAN_FIELDS = ("true", "false", "0", "1")

# Typed fields of the request headers (4.9.8's *RequestHeader classes).
_INTS: dict[int, tuple[str, ...]] = {
    RequestCode.SEND_MESSAGE: (
        "defaultTopicQueueNums",
        "queueId",
        "sysFlag",
        "bornTimestamp",
        "flag",
        "reconsumeTimes",
        "maxReconsumeTimes",
    ),
    RequestCode.SEND_MESSAGE_V2: ("d", "e", "f", "g", "h", "j", "l"),
    RequestCode.PULL_MESSAGE: (
        "queueId",
        "queueOffset",
        "maxMsgNums",
        "sysFlag",
        "commitOffset",
        "suspendTimeoutMillis",
        "subVersion",
    ),
    RequestCode.QUERY_MESSAGE: ("maxNum", "beginTimestamp", "endTimestamp"),
    RequestCode.UPDATE_CONSUMER_OFFSET: ("queueId", "commitOffset"),
    RequestCode.QUERY_CONSUMER_OFFSET: ("queueId",),
    RequestCode.CONSUMER_SEND_MSG_BACK: ("offset", "delayLevel", "maxReconsumeTimes"),
    RequestCode.GET_MAX_OFFSET: ("queueId",),
    RequestCode.GET_MIN_OFFSET: ("queueId",),
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: ("queueId", "timestamp"),
    RequestCode.VIEW_MESSAGE_BY_ID: ("offset",),
    RequestCode.END_TRANSACTION: ("tranStateTableOffset", "commitLogOffset", "commitOrRollback"),
}
_BOOLS: dict[int, tuple[str, ...]] = {
    RequestCode.SEND_MESSAGE: ("unitMode", "batch"),
    RequestCode.SEND_MESSAGE_V2: ("k", "m"),
    RequestCode.CONSUMER_SEND_MSG_BACK: ("unitMode",),
    RequestCode.END_TRANSACTION: ("fromTransactionCheck",),
}
_NON_EMPTY: dict[int, tuple[str, ...]] = {
    RequestCode.SEND_MESSAGE: ("topic", "producerGroup"),
    RequestCode.SEND_MESSAGE_V2: ("a", "b"),
    RequestCode.PULL_MESSAGE: ("topic", "consumerGroup"),
    RequestCode.QUERY_MESSAGE: ("topic", "key"),
    RequestCode.UPDATE_CONSUMER_OFFSET: ("topic", "consumerGroup"),
    RequestCode.CONSUMER_SEND_MSG_BACK: ("group",),
}


def shifted_shape(code: int, ext: Mapping[str, str]) -> str | None:
    """Why this request looks like a shifted signature, or None."""
    if "" in ext:
        return "an ext field has an empty name"
    flag = ext.get(UNIQUE_MSG_QUERY_FLAG)
    if flag is not None and flag not in _BOOLEANS:
        return f"{UNIQUE_MSG_QUERY_FLAG} is {flag!r}, not true or false"
    for name in _INTS.get(code, ()):
        value = ext.get(name)
        if value is not None and not _CANONICAL_INT.match(value):
            return f"field {name} is {value!r}, not a number as clients write one"
    for name in _BOOLS.get(code, ()):
        value = ext.get(name)
        if value is not None and value not in _BOOLEAN_FIELDS:
            return f"field {name} is {value!r}, not true or false"
    for name in _NON_EMPTY.get(code, ()):
        if ext.get(name) == "":
            return f"field {name} is empty"
    return None
