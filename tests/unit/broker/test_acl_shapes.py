"""Shapes only a shifted signature produces (issue #40's attacks), refused with ACL on:
each attack built from a genuinely signed request, its signature still verifying."""

from __future__ import annotations

import pytest

from rocketstore.broker.acl import AclCheck, AclConfig, authorize, sign, verify
from rocketstore.broker.acl_shapes import shifted_shape
from rocketstore.broker.codes import RequestCode

SECRET = "12345678"
ACL = AclConfig(accounts={"RocketMQ": SECRET})


def _signed(fields: dict[str, str]) -> dict[str, str]:
    ext = {**fields, "AccessKey": "RocketMQ"}
    return {**ext, "Signature": sign(ext, None, SECRET)}


SEND = {
    "producerGroup": "P",
    "topic": "Pub",
    "defaultTopic": "TBW102",
    "defaultTopicQueueNums": "4",
    "queueId": "0",
    "sysFlag": "0",
    "bornTimestamp": "1700000000000",
    "flag": "0",
    "reconsumeTimes": "0",
    "unitMode": "false",
    "batch": "false",
}
PULL = {
    "consumerGroup": "G",
    "topic": "T",
    "queueId": "0",
    "queueOffset": "1",
    "maxMsgNums": "32",
    "sysFlag": "2",
    "commitOffset": "0",
    "suspendTimeoutMillis": "15000",
    "subscription": "*",
    "subVersion": "0",
}


def _shifted(signed: dict[str, str], changes: dict[str, str | None]) -> dict[str, str]:
    out = dict(signed)
    for key, value in changes.items():
        if value is None:
            del out[key]
        else:
            out[key] = value
    return out


@pytest.mark.parametrize(
    ("code", "fields", "changes", "reason"),
    [
        # topic "Pub" + unitMode "false" -> topic "Pubfalse", unitMode ""
        (RequestCode.SEND_MESSAGE, SEND, {"topic": "Pubfalse", "unitMode": ""}, "unitMode"),
        # queueOffset "1" + subVersion "0" -> "10" + ""
        (RequestCode.PULL_MESSAGE, PULL, {"queueOffset": "10", "subVersion": ""}, "subVersion"),
        # an empty-named field added (its value "" changes nothing signed)
        (RequestCode.PULL_MESSAGE, PULL, {"": ""}, "empty name"),
    ],
)
def test_shifted_requests_still_verify_but_are_refused(
    code: int, fields: dict[str, str], changes: dict[str, str | None], reason: str
) -> None:
    signed = _signed(fields)
    attack = _shifted(signed, changes)
    assert verify(attack, None, ACL) is AclCheck.OK  # the signature cannot tell
    verdict = authorize(code, attack, None, "127.0.0.1", ACL)
    assert verdict.check is AclCheck.BAD_REQUEST
    assert reason in verdict.message
    assert authorize(code, signed, None, "127.0.0.1", ACL).ok  # the genuine request passes


def test_shapes() -> None:
    assert shifted_shape(RequestCode.SEND_MESSAGE_V2, {"k": "false", "m": "true", "e": "3"}) is None
    assert shifted_shape(RequestCode.SEND_MESSAGE_V2, {"e": "03"}) is not None
    assert shifted_shape(RequestCode.SEND_MESSAGE_V2, {"e": "+3"}) is not None
    assert shifted_shape(RequestCode.SEND_MESSAGE_V2, {"b": ""}) == "field b is empty"
    assert shifted_shape(RequestCode.QUERY_MESSAGE, {"_UNIQUE_KEY_QUERY": "truex"}) is not None
    assert shifted_shape(RequestCode.QUERY_MESSAGE, {"_UNIQUE_KEY_QUERY": "true"}) is None
    assert shifted_shape(RequestCode.HEART_BEAT, {"x": ""}) is None  # untyped: not judged


def test_a_well_formed_shift_is_not_caught() -> None:
    """The limit, documented: queueOffset 1 + subVersion 1700000000000 -> 11 + 7000..."""
    signed = _signed({**PULL, "subVersion": "1700000000000"})
    attack = _shifted(signed, {"queueOffset": "11", "subVersion": "700000000000"})
    assert authorize(RequestCode.PULL_MESSAGE, attack, None, "127.0.0.1", ACL).ok
