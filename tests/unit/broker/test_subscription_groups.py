"""Consumer groups' settings (SubscriptionGroupManager): the built-in groups,
auto-creation, config/subscriptionGroup.json, the admin requests (200, 201, 207) and what
a group's config changes: pulls of a disabled group, retries, the retry topic's queues and
membership notifications."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocketstore.broker.codes import RequestCode, ResponseCode
from rocketstore.broker.context import BrokerContext
from rocketstore.broker.remoting import RemotingCommand
from rocketstore.broker.subscription_groups import (
    SubscriptionGroupConfig,
    SubscriptionGroupManager,
)
from rocketstore.errors import ConfigError, CorruptDataError
from tests.unit.broker.broker_helpers import FakeConnection, call, pull, send_v2

# What the real 4.9.8 mqadmin updateSubGroup sent.
JAVA_BODY = (
    '{"brokerId":0,"consumeBroadcastEnable":false,"consumeEnable":true,'
    '"consumeFromMinEnable":false,"groupName":"GroupNew","notifyConsumerIdsChangedEnable":true,'
    '"retryMaxTimes":16,"retryQueueNums":1,"whichBrokerWhenConsumeSlowly":1}'
)


def test_builtin_groups_auto_creation_and_the_file(tmp_path: Path) -> None:
    manager = SubscriptionGroupManager(tmp_path)
    assert manager.get("TOOLS_CONSUMER") == SubscriptionGroupConfig("TOOLS_CONSUMER")
    assert manager.get("G") is None
    assert manager.find("G") == SubscriptionGroupConfig("G")  # created with the defaults
    document = json.loads((tmp_path / "config" / "subscriptionGroup.json").read_text())
    assert document["subscriptionGroupTable"]["G"] == json.loads(
        JAVA_BODY.replace("GroupNew", "G")
        .replace('"consumeBroadcastEnable":false', '"consumeBroadcastEnable":true')
        .replace('"consumeFromMinEnable":false', '"consumeFromMinEnable":true')
    )
    manager.update(SubscriptionGroupConfig("G", consume_enable=False, retry_max_times=3))
    reloaded = SubscriptionGroupManager(tmp_path, auto_create=False)
    assert reloaded.get("G") == SubscriptionGroupConfig(
        "G", consume_enable=False, retry_max_times=3
    )
    assert reloaded.data_version.counter == manager.data_version.counter
    assert reloaded.find("Unknown") is None  # no auto-creation
    assert reloaded.find("CID_RMQ_SYS_TRANS") is not None  # a system group always is
    assert reloaded.delete("G") and not reloaded.delete("G")
    with pytest.raises(ConfigError, match="negative"):
        reloaded.update(SubscriptionGroupConfig("X", retry_queue_nums=-1))


def test_a_damaged_file_is_an_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "config" / "subscriptionGroup.json"
    path.parent.mkdir()
    path.write_text('{"subscriptionGroupTable":{"G":{"retryMaxTimes":"many"}}}')
    with pytest.raises(CorruptDataError, match=r"subscriptionGroup\.json"):
        SubscriptionGroupManager(tmp_path)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"groupName": ""}, "groupName"),
        ({"groupName": "G", "consumeEnable": "yes"}, "consumeEnable"),
        ({"groupName": "G", "retryQueueNums": 1.5}, "retryQueueNums"),
        ([], "expected an object"),
    ],
)
def test_bad_entries_name_the_field(entry: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SubscriptionGroupConfig.from_json(entry)


def test_admin_requests(ctx: BrokerContext) -> None:
    answer = call(ctx, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=JAVA_BODY.encode())
    assert answer.code == ResponseCode.SUCCESS
    listed = json.loads(call(ctx, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG).body)
    assert listed["subscriptionGroupTable"]["GroupNew"] == json.loads(JAVA_BODY)
    bad = call(ctx, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=b"{nope")
    assert bad.code == ResponseCode.SYSTEM_ERROR
    ctx.offsets.commit("GroupNew", "T", 0, 5)
    removed = call(
        ctx,
        RequestCode.DELETE_SUBSCRIPTIONGROUP,
        {"groupName": "GroupNew", "removeOffset": "true"},
    )
    assert removed.code == ResponseCode.SUCCESS
    assert ctx.groups is not None and ctx.groups.get("GroupNew") is None
    assert ctx.offsets.query("GroupNew", "T", 0) is None


def _pull(ctx: BrokerContext, group: str) -> RemotingCommand:
    return pull(ctx, "T", consumerGroup=group)


def test_a_disabled_or_unknown_group_cannot_pull(ctx: BrokerContext) -> None:
    call(ctx, RequestCode.SEND_MESSAGE_V2, send_v2("T"), b"x")
    ctx.store.wait_dispatched()
    assert ctx.groups is not None
    ctx.groups.update(SubscriptionGroupConfig("Off", consume_enable=False))
    refused = _pull(ctx, "Off")
    assert refused.code == ResponseCode.NO_PERMISSION
    assert refused.remark == "subscription group no permission, Off"
    ctx.groups.auto_create = False
    unknown = _pull(ctx, "Nobody")
    assert unknown.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST


def test_the_groups_retry_settings(ctx: BrokerContext) -> None:
    assert ctx.groups is not None
    call(ctx, RequestCode.SEND_MESSAGE_V2, send_v2("T"), b"payload")
    ctx.store.wait_dispatched()
    [original] = ctx.store.get_messages("x", "T", 0, 0, 1).messages
    back = {"offset": original.commit_log_offset, "group": "Once", "delayLevel": 0}
    # Without maxReconsumeTimes (clients before 3.4.9) the group's retryMaxTimes decides.
    ctx.groups.update(SubscriptionGroupConfig("Once", retry_max_times=0))
    assert call(ctx, RequestCode.CONSUMER_SEND_MSG_BACK, back).code == ResponseCode.SUCCESS
    ctx.store.wait_dispatched()
    assert [m.topic for m in ctx.store.get_messages("x", "%DLQ%Once", 0, 0, 8).messages] == [
        "%DLQ%Once"
    ]
    # retryQueueNums 0: the group keeps no retries, the send-back is answered and dropped.
    ctx.groups.update(SubscriptionGroupConfig("None", retry_queue_nums=0))
    dropped = call(ctx, RequestCode.CONSUMER_SEND_MSG_BACK, {**back, "group": "None"})
    assert dropped.code == ResponseCode.SUCCESS
    assert "%RETRY%None" not in ctx.topics and "%DLQ%None" not in ctx.topics


def test_heartbeat_uses_the_groups_retry_queues_and_notify_setting(ctx: BrokerContext) -> None:
    assert ctx.groups is not None
    ctx.groups.update(
        SubscriptionGroupConfig(
            "Quiet", retry_queue_nums=3, notify_consumer_ids_changed_enable=False
        )
    )

    def beat(client: str, conn: FakeConnection) -> None:
        body: dict[str, object] = {"clientID": client, "producerDataSet": []}
        body["consumerDataSet"] = [{"groupName": "Quiet", "subscriptionDataSet": []}]
        answer = call(ctx, RequestCode.HEART_BEAT, body=json.dumps(body).encode(), conn=conn)
        assert answer.code == ResponseCode.SUCCESS

    first, second = FakeConnection(), FakeConnection()
    beat("c1", first)
    beat("c2", second)
    retry = ctx.topics.get("%RETRY%Quiet")
    assert retry is not None and retry.read_queue_nums == 3
    assert first.sent == [] and second.sent == []  # no NOTIFY_CONSUMER_IDS_CHANGED
