"""updateBrokerConfig (25): planning a change (all keys or none), writing it into the
broker's -c file in place, making it live, and the request's answers; brokerPermission's
effect on pulls, sends and what the name servers are told."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from rocketstore.broker import config_update
from rocketstore.broker.broker_config import BrokerConfig
from rocketstore.broker.codes import RequestCode, ResponseCode
from rocketstore.broker.context import BrokerContext
from rocketstore.broker.registration import register_request_body
from rocketstore.broker.remoting import RemotingCommand
from rocketstore.broker.topic_config import TopicConfig
from rocketstore.config import StoreConfig
from rocketstore.errors import ConfigError
from rocketstore.settings_file import parse_java_properties
from tests.unit.broker.broker_helpers import call, pull, send_v2


def _send(ctx: BrokerContext, topic: str) -> RemotingCommand:
    return call(ctx, RequestCode.SEND_MESSAGE_V2, send_v2(topic), b"x")


def _settings(ctx: BrokerContext) -> dict[str, str]:
    answer = call(ctx, RequestCode.GET_BROKER_CONFIG)
    return parse_java_properties(answer.body.decode())


def _update(ctx: BrokerContext, text: str) -> tuple[int, str | None]:
    answer = call(ctx, RequestCode.UPDATE_BROKER_CONFIG, body=text.encode())
    return answer.code, answer.remark


# --- plan ---------------------------------------------------------------------------------


def test_plan_converts_each_key_to_its_field() -> None:
    change = config_update.plan(
        {"fileReservedTime": "24", "brokerPermission": "4", "autoCreateTopicEnable": "FALSE"},
        BrokerConfig(),
        StoreConfig(),
    )
    assert change.store == {"file_reserved_time": 24}
    assert change.broker == {"broker_permission": 4, "auto_create_topic_enable": False}
    # broker.conf gets Java's spelling of each value, in the request's order.
    assert change.text == {
        "fileReservedTime": "24",
        "brokerPermission": "4",
        "autoCreateTopicEnable": "false",
    }


@pytest.mark.parametrize(
    ("properties", "named"),
    [
        ({"sendMessageThreadPoolNums": "32"}, "no setting sendMessageThreadPoolNums"),
        ({"fileReservedTime": "1", "brokerPermision": "4"}, "no setting brokerPermision"),
        ({"brokerName": "b"}, "brokerName cannot change while the broker runs"),
        ({"mappedFileSizeCommitLog": "1024"}, "mappedFileSizeCommitLog cannot change"),
        ({"flushDiskType": "SYNC_FLUSH"}, "flushDiskType cannot change"),
        ({"listenPort": "10912"}, "listenPort cannot change"),
        ({"fileReservedTime": "lots"}, "fileReservedTime must be a Java int, got 'lots'"),
        ({"fileReservedTime": "-1"}, "file_reserved_time must be a non-negative integer"),
        ({"brokerPermission": "16"}, "brokerPermission) must be PermName bits 0..15"),
        ({"deleteWhen": "25"}, "delete_when"),
        ({"cleanFileForciblyEnable": "yes"}, "must be true or false"),
    ],
)
def test_plan_refuses_what_it_cannot_take(properties: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=r"nothing was changed|must be") as caught:
        config_update.plan(properties, BrokerConfig(), StoreConfig())
    assert named in str(caught.value)


def test_black_list_has_its_own_and_the_fixed_keys() -> None:
    keys = {"fileReservedTime": "1", "brokerConfigPath": "/x", "rocketmqHome": "/y"}
    assert config_update.black_listed(keys, "configBlackList;brokerConfigPath") == [
        "brokerConfigPath",
        "rocketmqHome",
    ]
    assert config_update.black_listed(keys, "fileReservedTime") == list(keys)


# --- persist ------------------------------------------------------------------------------


def test_persist_rewrites_the_entry_in_place_and_keeps_the_rest(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    original = "# the cluster\nbrokerName = broker-a\nfileReservedTime=48\n\n# end\n"
    conf.write_text(original)
    conf.chmod(0o640)
    link = tmp_path / "current.conf"
    link.symlink_to(conf)
    change = config_update.plan(
        {"fileReservedTime": "24", "deleteWhen": "01;13"}, BrokerConfig(), StoreConfig()
    )
    config_update.persist(str(link), change)
    assert link.is_symlink()  # the link's target was rewritten, not the link
    assert conf.read_text() == (
        "# the cluster\nbrokerName = broker-a\nfileReservedTime=24\n\n# end\ndeleteWhen=01;13\n"
    )
    assert stat.S_IMODE(conf.stat().st_mode) == 0o640
    assert (tmp_path / "broker.conf.bak").read_text() == original


# --- the request --------------------------------------------------------------------------


def test_update_takes_effect_at_once_and_bumps_the_version(ctx: BrokerContext) -> None:
    assert _update(ctx, "fileReservedTime=24\ntransactionTimeOut=3000\n") == (
        ResponseCode.SUCCESS,
        None,
    )
    settings = _settings(ctx)
    assert settings["fileReservedTime"] == "24" and settings["transactionTimeOut"] == "3000"
    assert ctx.store.config.file_reserved_time == 24
    assert ctx.store.retention.config.file_reserved_time == 24  # the service reads it
    assert ctx.transactions is None or ctx.transactions.timeout_ms == 3000
    version = json.loads(call(ctx, RequestCode.GET_BROKER_CONFIG).ext_fields["version"])
    assert version["counter"] == 1


def test_update_is_all_or_nothing(ctx: BrokerContext) -> None:
    code, remark = _update(ctx, "fileReservedTime=24\nmaxIndexNum=10\n")
    assert code == ResponseCode.SYSTEM_ERROR
    assert remark is not None and "maxIndexNum cannot change while the broker runs" in remark
    assert ctx.store.config.file_reserved_time == 72
    code, remark = _update(ctx, "fileReservedTime=24\ndiskMaxUsedSpaceRatio=x\n")
    assert code == ResponseCode.SYSTEM_ERROR and "diskMaxUsedSpaceRatio" in (remark or "")
    assert ctx.store.config.file_reserved_time == 72
    assert (
        json.loads(call(ctx, RequestCode.GET_BROKER_CONFIG).ext_fields["version"])["counter"] == 0
    )


def test_black_listed_keys_are_refused_with_rocketmqs_words(ctx: BrokerContext) -> None:
    assert _update(ctx, "brokerConfigPath=/tmp/x\n") == (
        ResponseCode.NO_PERMISSION,
        "Can not update config in black list.",
    )
    assert _update(ctx, "configBlackList=\n") == (
        ResponseCode.NO_PERMISSION,
        "Can not update config in black list.",
    )


def test_an_empty_body_changes_nothing(ctx: BrokerContext) -> None:
    assert _update(ctx, "")[0] == ResponseCode.SUCCESS
    assert _update(ctx, "# only a comment\n")[0] == ResponseCode.SUCCESS
    assert ctx.store.config.file_reserved_time == 72


def test_the_change_is_written_to_the_broker_conf(ctx: BrokerContext, tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerClusterName=DefaultCluster\r\nfileReservedTime=72\r\n")
    ctx.settings_path = str(conf)
    assert _update(ctx, "fileReservedTime=12\nbrokerPermission=4\n")[0] == ResponseCode.SUCCESS
    assert conf.read_bytes() == (
        b"brokerClusterName=DefaultCluster\r\nfileReservedTime=12\r\nbrokerPermission=4\r\n"
    )


def test_a_failed_write_changes_nothing(ctx: BrokerContext, tmp_path: Path) -> None:
    ctx.settings_path = str(tmp_path / "gone" / "broker.conf")
    code, remark = _update(ctx, "fileReservedTime=12\n")
    assert code == ResponseCode.SYSTEM_ERROR
    assert remark is not None and "gone/broker.conf" in remark and "nothing was changed" in remark
    assert ctx.store.config.file_reserved_time == 72


def test_auto_create_settings_reach_the_managers(ctx: BrokerContext) -> None:
    assert _update(ctx, "autoCreateTopicEnable=false\nautoCreateSubscriptionGroup=false\n")[0] == (
        ResponseCode.SUCCESS
    )
    assert ctx.topics.auto_create_topic_enable is False and ctx.groups.auto_create is False
    answer = _send(ctx, "NeverSeen")
    assert answer.code == ResponseCode.TOPIC_NOT_EXIST


# --- brokerPermission -----------------------------------------------------------------------


def _pull(ctx: BrokerContext, topic: str) -> tuple[int, str | None]:
    answer = pull(ctx, topic)
    return answer.code, answer.remark


def test_a_write_only_broker_refuses_pulls(ctx: BrokerContext) -> None:
    assert _send(ctx, "T").code == ResponseCode.SUCCESS
    ctx.store.wait_dispatched()  # (the unit comes with the dispatcher, not with the send)
    assert _update(ctx, "brokerPermission=2\n")[0] == ResponseCode.SUCCESS
    assert _pull(ctx, "T") == (
        ResponseCode.NO_PERMISSION,
        "the broker[127.0.0.1] pulling message is forbidden",
    )
    assert _update(ctx, "brokerPermission=6\n")[0] == ResponseCode.SUCCESS
    assert _pull(ctx, "T")[0] == ResponseCode.SUCCESS


def test_a_read_only_broker_refuses_sends_to_order_topics_only(ctx: BrokerContext) -> None:
    ctx.topics.update(TopicConfig("Ordered", 4, 4, 6, order=True))
    assert _update(ctx, "brokerPermission=4\n")[0] == ResponseCode.SUCCESS
    refused = _send(ctx, "Ordered")
    assert refused.code == ResponseCode.NO_PERMISSION
    assert refused.remark == "the broker[127.0.0.1] sending message is forbidden"
    # Others are still taken (a producer with an old route): RocketMQ's msgCheck.
    assert _send(ctx, "Plain").code == ResponseCode.SUCCESS


def test_a_drained_broker_registers_every_topic_with_its_permission(ctx: BrokerContext) -> None:
    ctx.topics.update(TopicConfig("Ordered", 2, 3, 6, topic_sys_flag=1, order=True))
    triggered: list[bool] = []
    ctx.on_topics_changed = lambda: triggered.append(True)
    version = ctx.topics.data_version.counter
    assert _update(ctx, "brokerPermission=4\n")[0] == ResponseCode.SUCCESS
    assert triggered and ctx.topics.data_version.counter == version + 1
    table = json.loads(register_request_body(ctx))["topicConfigSerializeWrapper"]
    ordered = table["topicConfigTable"]["Ordered"]
    assert ordered["perm"] == 4 and ordered["order"] is False and ordered["topicSysFlag"] == 0
    assert (ordered["readQueueNums"], ordered["writeQueueNums"]) == (2, 3)
    assert {t["perm"] for t in table["topicConfigTable"].values()} == {4}
    # The broker's own table keeps each topic's perm.
    own = json.loads(call(ctx, RequestCode.GET_ALL_TOPIC_CONFIG).body)["topicConfigTable"]
    assert own["Ordered"]["perm"] == 6 and own["Ordered"]["order"] is True


def test_unchanged_permission_does_not_reregister(ctx: BrokerContext) -> None:
    triggered: list[bool] = []
    ctx.on_topics_changed = lambda: triggered.append(True)
    assert _update(ctx, "brokerPermission=6\nfileReservedTime=10\n")[0] == ResponseCode.SUCCESS
    assert not triggered


def test_store_update_config_refuses_fixed_settings(ctx: BrokerContext) -> None:
    with pytest.raises(ConfigError, match="max_index_num cannot change while the store is open"):
        ctx.store.update_config(max_index_num=10)
    with pytest.raises(ConfigError, match="not a store setting"):
        ctx.store.update_config(nonsense=1)
    assert ctx.store.update_config(delete_when="01;02").delete_when == "01;02"
    assert ctx.store.flusher.config.delete_when == "01;02"
