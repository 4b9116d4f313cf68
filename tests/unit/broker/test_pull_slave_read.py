"""slaveReadEnable (issue #36): a pull answer's suggestWhichBrokerId, RocketMQ 4.9.8's
rule. A ratio of 0 % of RAM makes every pulled message "behind" (any lag is past the
threshold); the default 40 % keeps a small store's pulls in memory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketstore.broker.broker_config import broker_config_from_settings
from rocketstore.broker.codes import RequestCode, ResponseCode
from rocketstore.broker.context import BrokerContext
from rocketstore.broker.subscription_groups import SubscriptionGroupConfig
from tests.unit.broker.broker_helpers import call, make_context, pull, send_v2


def _filled(root: Path, ratio: int) -> BrokerContext:
    ctx = make_context(root, access_message_in_memory_max_ratio=ratio)
    for i in range(3):
        sent = call(ctx, RequestCode.SEND_MESSAGE_V2, send_v2("T"), b"m%d" % i * 64)
        assert sent.code == ResponseCode.SUCCESS
    ctx.store.wait_dispatched()
    return ctx


@pytest.fixture
def lagging(tmp_path: Path) -> Iterator[BrokerContext]:
    ctx = _filled(tmp_path / "store", 0)
    yield ctx
    ctx.store.close()


@pytest.fixture
def in_memory(tmp_path: Path) -> Iterator[BrokerContext]:
    ctx = _filled(tmp_path / "store", 40)
    yield ctx
    ctx.store.close()


def _suggested(ctx: BrokerContext, **extra: object) -> int:
    answer = pull(ctx, "T", 0, 0, maxMsgNums=1, **extra)
    assert answer.code == ResponseCode.SUCCESS
    return int(answer.ext_fields["suggestWhichBrokerId"])


def test_off_by_default_the_answer_names_the_master_even_when_behind(
    lagging: BrokerContext,
) -> None:
    assert lagging.config.slave_read_enable is False
    assert _suggested(lagging) == 0


def test_on_and_behind_the_answer_names_which_broker_when_consume_slowly(
    lagging: BrokerContext,
) -> None:
    lagging.config.slave_read_enable = True
    assert _suggested(lagging) == 1  # the group's default whichBrokerWhenConsumeSlowly
    lagging.groups.update(SubscriptionGroupConfig("G", which_broker_when_consume_slowly=2))
    assert _suggested(lagging) == 2


def test_on_and_in_memory_the_answer_names_the_groups_broker_id(
    in_memory: BrokerContext,
) -> None:
    in_memory.config.slave_read_enable = True
    assert _suggested(in_memory) == 0
    in_memory.groups.update(SubscriptionGroupConfig("G", broker_id=3))
    assert _suggested(in_memory) == 3


def test_on_a_slave_without_slave_read_the_answer_names_the_master(
    lagging: BrokerContext,
) -> None:
    lagging.config.broker_role, lagging.config.broker_id = "SLAVE", 1
    assert _suggested(lagging) == 0


def test_not_found_answers_carry_it_too(lagging: BrokerContext) -> None:
    lagging.config.slave_read_enable = True
    answer = pull(lagging, "T", 0, 3)
    assert answer.code == ResponseCode.PULL_NOT_FOUND
    assert answer.ext_fields["suggestWhichBrokerId"] == "0"


def test_broker_conf_key() -> None:
    assert broker_config_from_settings({}).slave_read_enable is False
    assert broker_config_from_settings({"slaveReadEnable": "true"}).slave_read_enable is True
