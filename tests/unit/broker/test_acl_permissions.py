"""Which resource and permission each request needs (PlainAccessValidator.parse, 4.9.8),
the admin-only codes (Permission.ADMIN_CODE) and Permission's bit arithmetic."""

from __future__ import annotations

import json

import pytest

from rocketstore.broker.acl_permissions import (
    ADMIN_CODES,
    ANY,
    DENY,
    EXTRA_ADMIN_CODES,
    PUB,
    SUB,
    check_permission,
    check_resource_perms,
    needs_admin,
    parse_perm,
    parse_resource_perms,
    request_resources,
    resource_text,
)
from rocketstore.broker.codes import RequestCode
from rocketstore.broker.remoting import RequestFieldError
from rocketstore.errors import ConfigError

HEARTBEAT = json.dumps(
    {
        "clientID": "c1",
        "consumerDataSet": [
            {
                "groupName": "G1",
                "subscriptionDataSet": [{"topic": "T1"}, {"topic": "%RETRY%G1"}],
            }
        ],
        "producerDataSet": [{"groupName": "P1"}],
    }
).encode()

# Every request code PlainAccessValidator.parse names, with what it must yield.
CASES = [
    (RequestCode.SEND_MESSAGE, {"topic": "T", "group": "P"}, None, {"T": PUB}),
    (RequestCode.SEND_MESSAGE, {"topic": "%RETRY%G", "group": "G"}, None, {"%RETRY%G": SUB}),
    (RequestCode.SEND_MESSAGE_V2, {"b": "T", "a": "P"}, None, {"T": PUB}),
    (RequestCode.SEND_MESSAGE_V2, {"b": "%RETRY%G", "a": "G"}, None, {"%RETRY%G": SUB}),
    (RequestCode.CONSUMER_SEND_MSG_BACK, {"group": "G", "offset": "1"}, None, {"%RETRY%G": SUB}),
    (
        RequestCode.PULL_MESSAGE,
        {"topic": "T", "consumerGroup": "G"},
        None,
        {"T": SUB, "%RETRY%G": SUB},
    ),
    (RequestCode.QUERY_MESSAGE, {"topic": "T", "key": "k"}, None, {"T": SUB}),
    (
        RequestCode.HEART_BEAT,
        {},
        HEARTBEAT,
        {"%RETRY%G1": SUB, "T1": SUB},  # the producer group needs nothing
    ),
    (
        RequestCode.UNREGISTER_CLIENT,
        {"clientID": "c", "consumerGroup": "G"},
        None,
        {"%RETRY%G": SUB},
    ),
    (RequestCode.UNREGISTER_CLIENT, {"clientID": "c", "producerGroup": "P"}, None, {}),
    (RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G"}, None, {"%RETRY%G": SUB}),
    (
        RequestCode.UPDATE_CONSUMER_OFFSET,
        {"consumerGroup": "G", "topic": "T", "queueId": "0", "commitOffset": "5"},
        None,
        {"%RETRY%G": SUB, "T": SUB},
    ),
    # Everything else needs no resource (only authentication, and admin for admin codes).
    (RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "G", "topic": "T"}, None, {}),
    (RequestCode.LITE_PULL_MESSAGE, {"topic": "T", "consumerGroup": "G"}, None, {}),
    (RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "T"}, None, {}),
]


@pytest.mark.parametrize(("code", "ext", "body", "needed"), CASES)
def test_request_resources(
    code: int, ext: dict[str, str], body: bytes | None, needed: dict[str, int]
) -> None:
    assert request_resources(code, ext, body) == needed


def test_the_heartbeat_retry_subscription_is_a_group() -> None:
    # A consumer subscribes its own %RETRY% topic: SUB on the group, as RocketMQ.
    assert request_resources(RequestCode.HEART_BEAT, {}, HEARTBEAT)["%RETRY%G1"] == SUB


@pytest.mark.parametrize(
    ("code", "ext", "body", "message"),
    [
        (RequestCode.HEART_BEAT, {}, b"{not json", "not JSON"),
        (RequestCode.UNREGISTER_CLIENT, {"consumerGroup": "G"}, None, "<clientID> is null"),
        (RequestCode.GET_CONSUMER_LIST_BY_GROUP, {}, None, "<consumerGroup> is null"),
        (
            RequestCode.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": "G", "topic": "T", "queueId": "0"},
            None,
            "<commitOffset> is null",
        ),
        (
            RequestCode.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": "G", "topic": "T", "queueId": "x", "commitOffset": "1"},
            None,
            'For input string: "x"',
        ),
    ],
)
def test_unreadable_requests_are_refused(
    code: int, ext: dict[str, str], body: bytes | None, message: str
) -> None:
    with pytest.raises(RequestFieldError, match=message):
        request_resources(code, ext, body)


def test_admin_codes_are_rocketmqs_five_plus_ours() -> None:
    assert {int(c) for c in ADMIN_CODES} == {17, 25, 215, 200, 207}  # Permission.ADMIN_CODE
    assert {int(c) for c in EXTRA_ADMIN_CODES} == {329, 306, 316, 222, 50, 51, 52, 53}
    assert needs_admin(RequestCode.DELETE_EXPIRED_COMMITLOG)
    assert needs_admin(RequestCode.REGISTER_BROKER)  # at a name server with an ACL
    assert needs_admin(RequestCode.UPDATE_BROKER_CONFIG)
    assert not needs_admin(RequestCode.SEND_MESSAGE)
    assert not needs_admin(RequestCode.GET_BROKER_CONFIG)


def test_permission_arithmetic() -> None:
    assert (DENY, ANY, PUB, SUB) == (1, 2, 4, 8)
    assert parse_perm("PUB") == PUB and parse_perm(" SUB ") == SUB
    assert parse_perm("PUB|SUB") == parse_perm("SUB|PUB") == PUB | SUB
    assert parse_perm(None) == parse_perm("DENY") == parse_perm("pub") == DENY
    assert check_permission(PUB, PUB | SUB) and check_permission(SUB, SUB)
    assert not check_permission(PUB, SUB) and not check_permission(SUB, DENY | SUB)
    assert check_permission(ANY, SUB) and not check_permission(ANY, DENY)


def test_resource_perms() -> None:
    perms = parse_resource_perms(["topicA=DENY", " topicB = PUB|SUB "], topics=True, where="x")
    assert perms == {"topicA": DENY, "topicB": PUB | SUB}
    assert parse_resource_perms(["g=SUB"], topics=False, where="x") == {"%RETRY%g": SUB}
    assert parse_resource_perms(None, topics=True, where="x") == {}
    with pytest.raises(ConfigError, match="Parse resource permission failed for topic:nope"):
        parse_resource_perms(["nope"], topics=True, where="x")
    check_resource_perms(["a=SUB", "b=DENY"])
    with pytest.raises(ConfigError, match="expected permissions"):
        check_resource_perms(["a=READ"])
    with pytest.raises(ConfigError, match="Res=Perm"):
        check_resource_perms(["a"])
    assert resource_text("%RETRY%G") == "group:G" and resource_text("T") == "topic:T"
