"""SQL92 subscriptions at the broker: PULL_MESSAGE with expressionType SQL92 (from the
request or the group's heartbeat), CHECK_CLIENT_CONFIG, enablePropertyFilter and
filterSupportRetry."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path

import pytest

from rocketstore.broker.codes import RequestCode, ResponseCode
from rocketstore.broker.context import BrokerContext
from rocketstore.broker.remoting import RemotingCommand
from tests.unit.broker.broker_helpers import (
    call,
    decode_records,
    heartbeat,
    make_context,
    pull,
    send_v2,
)


@pytest.fixture
def ctx(tmp_path: Path) -> Iterator[BrokerContext]:
    context = make_context(tmp_path / "store")
    context.config = replace(context.config, enable_property_filter=True)
    yield context
    context.store.close()


def _props(**values: str) -> str:
    return "\x02".join(f"{k}\x01{v}" for k, v in values.items())


def _send(ctx: BrokerContext, topic: str, **properties: str) -> None:
    answer = call(
        ctx, RequestCode.SEND_MESSAGE_V2, send_v2(topic, properties=_props(**properties)), b"m"
    )
    assert answer.code == ResponseCode.SUCCESS, answer.remark


def _pull(ctx: BrokerContext, topic: str, offset: int = 0, **extra: object) -> RemotingCommand:
    return pull(ctx, topic, 0, offset, **{"sysFlag": 4, **extra})


def _heartbeat(ctx: BrokerContext, *subscriptions: dict[str, object]) -> None:
    heartbeat(ctx, *subscriptions)


def _orders(ctx: BrokerContext) -> None:
    for i, (region, amount) in enumerate([("eu", "5"), ("us", "50"), ("eu", "500"), ("eu", "x")]):
        _send(ctx, "Orders", region=region, amount=amount, TAGS=f"t{i}")
    ctx.store.wait_dispatched()


def test_a_sql92_pull_gets_only_what_the_selector_selects(ctx: BrokerContext) -> None:
    _orders(ctx)
    answer = _pull(
        ctx, "Orders", subscription="region = 'eu' AND amount > 10", expressionType="SQL92"
    )
    assert answer.code == ResponseCode.SUCCESS
    [message] = decode_records(answer.body)
    assert message.properties["amount"] == "500"  # "x" > 10 throws in Java: not delivered
    assert answer.ext_fields["nextBeginOffset"] == "4"


def test_a_pull_where_nothing_matches_asks_to_retry_at_the_next_offset(ctx: BrokerContext) -> None:
    _orders(ctx)
    answer = _pull(ctx, "Orders", subscription="region = 'asia'", expressionType="SQL92")
    assert answer.code == ResponseCode.PULL_RETRY_IMMEDIATELY
    assert answer.ext_fields["nextBeginOffset"] == "4"


def test_without_the_subscription_flag_the_heartbeat_subscription_is_used(
    ctx: BrokerContext,
) -> None:
    _orders(ctx)
    _heartbeat(ctx, {"topic": "Orders", "subString": "region = 'us'", "expressionType": "SQL92"})
    answer = _pull(ctx, "Orders", sysFlag=0, subscription=None, expressionType="TAG")
    assert [m.properties["amount"] for m in decode_records(answer.body)] == ["50"]


def test_without_the_flag_a_pull_needs_the_groups_current_subscription(
    ctx: BrokerContext,
) -> None:
    """RocketMQ's refusals of a pull that carries no subscription (a push consumer's):
    before the group's first heartbeat, for a topic the group did not subscribe, and
    when the heartbeat's subVersion is older than the pull's (the client retries)."""
    _orders(ctx)
    faq = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
    first = _pull(ctx, "Orders", sysFlag=0, subscription=None, subVersion=7)
    assert int(ResponseCode.SUBSCRIPTION_NOT_EXIST) == 24
    assert int(ResponseCode.SUBSCRIPTION_NOT_LATEST) == 25
    assert (first.code, first.remark) == (24, "the consumer's group info not exist" + faq)
    _heartbeat(ctx, {"topic": "Other", "subString": "*", "subVersion": 7})
    other = _pull(ctx, "Orders", sysFlag=0, subscription=None, subVersion=7)
    assert (other.code, other.remark) == (24, "the consumer's subscription not exist" + faq)
    _heartbeat(ctx, {"topic": "Orders", "subString": "t1", "subVersion": 7})
    newer = _pull(ctx, "Orders", sysFlag=0, subscription=None, subVersion=8)
    assert (newer.code, newer.remark) == (25, "the consumer's subscription not latest")
    served = _pull(ctx, "Orders", sysFlag=0, subscription=None, subVersion=7)
    assert served.code == ResponseCode.SUCCESS
    assert [m.tags for m in decode_records(served.body)] == ["t1"]
    # With the flag the request's own subscription is used, heartbeat or not.
    flagged = _pull(ctx, "Orders", consumerGroup="H", sysFlag=4, subscription="*")
    assert len(decode_records(flagged.body)) == 4


def test_refusals(ctx: BrokerContext) -> None:
    _orders(ctx)
    bad = _pull(ctx, "Orders", subscription="region = ", expressionType="SQL92")
    assert bad.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert "region = " in (bad.remark or "") and "G" in (bad.remark or "")
    unknown = _pull(ctx, "Orders", subscription="x", expressionType="CLASS")
    assert unknown.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and "CLASS" in (
        unknown.remark or ""
    )
    ctx.config = replace(ctx.config, enable_property_filter=False)
    off = _pull(ctx, "Orders", subscription="region = 'eu'", expressionType="SQL92")
    assert off.code == ResponseCode.SYSTEM_ERROR
    assert off.remark == "The broker does not support consumer to filter message by SQL92"
    # A TAG pull is served either way.
    assert _pull(ctx, "Orders", subscription="t1").code == ResponseCode.SUCCESS


def test_a_heartbeat_selector_that_does_not_parse_has_no_filter_data(ctx: BrokerContext) -> None:
    _orders(ctx)
    _heartbeat(ctx, {"topic": "Orders", "subString": "region = ", "expressionType": "SQL92"})
    answer = _pull(ctx, "Orders", sysFlag=0, subscription=None, expressionType="TAG")
    assert answer.code == ResponseCode.FILTER_DATA_NOT_EXIST
    assert int(ResponseCode.FILTER_DATA_NOT_EXIST) == 27
    assert answer.remark == (
        "The broker's consumer filter data is not exist!Your expression may be wrong!"
    )


def _check(ctx: BrokerContext, subscription: Mapping[str, object] | None) -> RemotingCommand:
    body = (
        b""
        if subscription is None
        else json.dumps({"clientId": "c1", "group": "G", "subscriptionData": subscription}).encode()
    )
    return call(ctx, RequestCode.CHECK_CLIENT_CONFIG, body=body)


def test_check_client_config(ctx: BrokerContext) -> None:
    sql = {"topic": "T", "subString": "a BETWEEN 1 AND 3", "expressionType": "SQL92"}
    assert _check(ctx, sql).code == ResponseCode.SUCCESS
    assert _check(ctx, None).code == ResponseCode.SUCCESS
    assert _check(ctx, {"topic": "T", "subString": "*", "expressionType": "TAG"}).code == 0
    broken = _check(ctx, {**sql, "subString": "a BETWEEN 3 AND 1"})
    assert broken.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and "BETWEEN" in (
        broken.remark or ""
    )
    ctx.config = replace(ctx.config, enable_property_filter=False)
    off = _check(ctx, sql)
    assert off.code == ResponseCode.SYSTEM_ERROR and "SQL92" in (off.remark or "")
    assert _check(ctx, {"topic": "T", "subString": "*"}).code == ResponseCode.SUCCESS
    assert (
        call(ctx, RequestCode.CHECK_CLIENT_CONFIG, body=b"{nope").code == ResponseCode.SYSTEM_ERROR
    )


def _retry_messages(ctx: BrokerContext) -> list[str]:
    for amount in ("5", "50"):
        _send(ctx, "%RETRY%G", RETRY_TOPIC="Orders", amount=amount)
    _send(ctx, "%RETRY%G", RETRY_TOPIC="Other", amount="7")
    ctx.store.wait_dispatched()
    answer = _pull(ctx, "%RETRY%G")
    return [m.properties["amount"] for m in decode_records(answer.body)]


def test_filter_support_retry_filters_retry_messages_by_their_topics_selector(
    ctx: BrokerContext,
) -> None:
    _heartbeat(
        ctx,
        {"topic": "Orders", "subString": "amount > 10", "expressionType": "SQL92"},
        {"topic": "%RETRY%G", "subString": "*", "expressionType": "TAG"},
    )
    # As in RocketMQ, the retry topic's pull (a TAG one) needs no enablePropertyFilter.
    ctx.config = replace(ctx.config, filter_support_retry=True, enable_property_filter=False)
    assert _retry_messages(ctx) == ["50", "7"]  # "Other" has no selector: it passes


def test_without_filter_support_retry_every_retry_message_is_delivered(ctx: BrokerContext) -> None:
    _heartbeat(ctx, {"topic": "Orders", "subString": "amount > 10", "expressionType": "SQL92"})
    assert _retry_messages(ctx) == ["5", "50", "7"]
