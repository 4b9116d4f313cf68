"""A slave's copy of its master's metadata (SlaveSynchronize) and the master's GET_ALL
answers: the bodies in fastjson's form (golden bytes), Java-shaped bodies decoded, and a
master and a slave in one event loop with a name server: topics, consumer offsets, delay
offsets and subscription groups made on the master appear on the slave and in its files;
brokerStatus carries the replication figures on both."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from rocketstore.broker import ha_slave
from rocketstore.broker.app import BrokerApp, BrokerOptions, NamesrvApp
from rocketstore.broker.broker_config import (
    CONSUMER_OFFSET_FILE,
    DELAY_OFFSET_FILE,
    TOPICS_FILE,
    BrokerConfig,
    config_file_path,
    persist_config_file,
)
from rocketstore.broker.codes import RequestCode, ResponseCode
from rocketstore.broker.context import BrokerContext
from rocketstore.broker.ha_metadata import (
    decode_consumer_offset_body,
    decode_delay_offset_body,
    decode_subscription_group_body,
    decode_topic_config_body,
)
from rocketstore.broker.processors.monitoring import runtime_info
from rocketstore.broker.remoting import RemotingCommand
from rocketstore.broker.router import BrokerRouter
from rocketstore.broker.schedule import encode_delay_offset_file
from rocketstore.broker.subscription_groups import (
    SUBSCRIPTION_GROUP_FILE,
    SubscriptionGroupConfig,
)
from rocketstore.broker.topic_config import DataVersion, TopicConfig
from rocketstore.config import StoreConfig
from rocketstore.errors import ConfigError
from rocketstore.format.message import Message
from tests.unit.broker.broker_helpers import FakeConnection, call, until

# --- the master's answers -----------------------------------------------------------------


def test_all_consumer_offset_body_is_fastjson(ctx: BrokerContext) -> None:
    assert call(ctx, RequestCode.GET_ALL_CONSUMER_OFFSET).body == b'{"offsetTable":{}}'
    ctx.offsets.commit("G", "T", 1, 40)
    ctx.offsets.commit("G", "T", 0, 12)
    ctx.offsets.commit("A", "T", 10, 3)
    answer = call(ctx, RequestCode.GET_ALL_CONSUMER_OFFSET)
    assert answer.code == ResponseCode.SUCCESS
    # Integer keys unquoted, as fastjson writes a ConcurrentMap<Integer, Long>.
    assert answer.body == b'{"offsetTable":{"T@A":{10:3},"T@G":{0:12,1:40}}}'


def test_all_delay_offset_body_is_fastjson(ctx: BrokerContext) -> None:
    # No schedule service (a slave, or schedule off): what delayOffset.json holds.
    assert call(ctx, RequestCode.GET_ALL_DELAY_OFFSET).body == b'{"offsetTable":{}}'
    path = config_file_path(ctx.store.root, DELAY_OFFSET_FILE)
    persist_config_file(path, encode_delay_offset_file({3: 7, 1: 2, 18: 0}))
    answer = call(ctx, RequestCode.GET_ALL_DELAY_OFFSET)
    assert answer.code == ResponseCode.SUCCESS
    assert answer.body == b'{"offsetTable":{1:2,3:7,18:0}}'
    Path(path).write_text("{not json")
    Path(path + ".bak").unlink(missing_ok=True)
    broken = call(ctx, RequestCode.GET_ALL_DELAY_OFFSET)
    assert broken.code == ResponseCode.SYSTEM_ERROR and "delay offsets" in (broken.remark or "")


def test_all_topic_and_group_bodies_are_wrappers(ctx: BrokerContext) -> None:
    ctx.topics.update(TopicConfig("T", 2, 3, 6))
    topics = call(ctx, RequestCode.GET_ALL_TOPIC_CONFIG).body.decode()
    assert topics.startswith('{"dataVersion":{"counter":')
    assert (
        '"T":{"order":false,"perm":6,"readQueueNums":2,"topicFilterType":"SINGLE_TAG",'
        '"topicName":"T","topicSysFlag":0,"writeQueueNums":3}' in topics
    )
    groups = json.loads(call(ctx, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG).body)
    assert list(groups) == ["dataVersion", "subscriptionGroupTable"]


# --- what a slave reads -------------------------------------------------------------------


def test_java_bodies_decode() -> None:
    """The bodies as a Java 4.9.8 master writes them (fastjson, unquoted integer keys,
    AtomicLong counter as a number)."""
    offsets = decode_consumer_offset_body(b'{"offsetTable":{"T@G":{0:12,1:40},"%RETRY%G@G":{0:0}}}')
    assert offsets == {("T", "G"): {0: 12, 1: 40}, ("%RETRY%G", "G"): {0: 0}}
    assert decode_delay_offset_body(b'{"offsetTable":{1:5,2:0}}') == {1: 5, 2: 0}
    topics = decode_topic_config_body(
        b'{"dataVersion":{"counter":3,"timestamp":1700000000000},"topicConfigTable":'
        b'{"T":{"order":false,"perm":6,"readQueueNums":8,"topicFilterType":"SINGLE_TAG",'
        b'"topicName":"T","topicSysFlag":0,"writeQueueNums":8}}}'
    )
    assert topics.data_version == DataVersion(3, 1700000000000)
    assert topics.topics["T"].read_queue_nums == 8
    groups, version = decode_subscription_group_body(
        b'{"dataVersion":{"counter":1,"timestamp":5},"subscriptionGroupTable":{"G":'
        b'{"brokerId":0,"consumeBroadcastEnable":true,"consumeEnable":true,'
        b'"consumeFromMinEnable":true,"groupName":"G","notifyConsumerIdsChangedEnable":true,'
        b'"retryMaxTimes":5,"retryQueueNums":1,"whichBrokerWhenConsumeSlowly":1}}}'
    )
    assert version == DataVersion(1, 5) and groups["G"].retry_max_times == 5
    for decode in (decode_consumer_offset_body, decode_delay_offset_body):
        with pytest.raises(ValueError):
            decode(b'{"offsetTable":{"x":"y"}}')
        with pytest.raises(ValueError):
            decode(b"\xff")


# --- a master and a slave -----------------------------------------------------------------


@pytest.fixture(autouse=True)
def _quick_reconnect(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ha_slave, "RECONNECT_PAUSE_S", 0.05)


def _options(root: Path, namesrv: str, sync_ms: int, **broker: object) -> BrokerOptions:
    return BrokerOptions(
        store_dir=str(root),
        listen="127.0.0.1:0",
        namesrv_addrs=[namesrv],
        broker=BrokerConfig(**broker),  # type: ignore[arg-type]
        store_config=StoreConfig(mapped_file_size_commit_log=64 * 1024),
        schedule_enable=False,
        register_interval_ms=200,
        metadata_sync_interval_ms=sync_ms,
    )


def _file(root: Path, name: str) -> dict[str, object]:
    loaded = json.loads(Path(config_file_path(root, name)).read_text())
    assert isinstance(loaded, dict)
    return loaded


def test_slave_copies_the_masters_metadata(tmp_path: Path) -> None:
    async def main() -> None:
        namesrv = NamesrvApp("127.0.0.1:0")
        await namesrv.start()
        # Rounds only when asked (sync_once) or on learning the master: a long interval.
        master = BrokerApp(_options(tmp_path / "m", namesrv.address, 600_000))
        slave = BrokerApp(
            _options(tmp_path / "s", namesrv.address, 600_000, broker_role="SLAVE", broker_id=1)
        )
        try:
            await master.start()
            m = master.ctx
            assert m is not None
            m.topics.update(TopicConfig("Orders", 3, 3, 6))
            m.offsets.commit("G", "Orders", 2, 17)
            m.groups.update(SubscriptionGroupConfig("G", retry_max_times=3))
            delay_path = config_file_path(tmp_path / "m", DELAY_OFFSET_FILE)
            persist_config_file(delay_path, encode_delay_offset_file({1: 4, 2: 9}))
            await slave.start()
            s, sync = slave.ctx, slave.metadata_sync
            assert s is not None and sync is not None
            s.offsets.commit("OnlySlave", "Orders", 0, 1)
            # The registration answer names the master; that first round runs at once.
            await until(lambda: sync.rounds >= 1, "the first round")
            assert sync.master_address == master.address and sync.failures == 0
            orders = s.topics.get("Orders")
            assert orders is not None and orders.read_queue_nums == 3
            assert s.topics.data_version == m.topics.data_version
            assert s.offsets.query("G", "Orders", 2) == 17
            assert s.offsets.query("OnlySlave", "Orders", 0) == 1  # putAll keeps it
            group = s.groups.get("G")
            assert group is not None and group.retry_max_times == 3
            assert s.groups.data_version == m.groups.data_version
            # ... and in the slave's files, with the master's data versions.
            slave_root = tmp_path / "s"
            topics_file = _file(slave_root, TOPICS_FILE)
            assert topics_file["dataVersion"] == m.topics.data_version.to_json()
            assert "Orders" in topics_file["topicConfigTable"]  # type: ignore[operator]
            offsets_file = _file(slave_root, CONSUMER_OFFSET_FILE)
            assert offsets_file["offsetTable"]["Orders@G"] == {"2": 17}  # type: ignore[index]
            assert _file(slave_root, DELAY_OFFSET_FILE) == {"offsetTable": {"1": 4, "2": 9}}
            groups_file = _file(slave_root, SUBSCRIPTION_GROUP_FILE)
            assert groups_file["dataVersion"] == m.groups.data_version.to_json()

            # Later changes arrive with the next round; a deleted topic goes.
            m.topics.update(TopicConfig("Refunds", 1, 1, 6))
            m.topics.delete("Orders")
            m.offsets.commit("G", "Orders", 2, 30)
            assert await sync.sync_once()
            assert s.topics.get("Refunds") is not None and s.topics.get("Orders") is None
            assert s.offsets.query("G", "Orders", 2) == 30
            # Unchanged data versions: the tables are left as they are.
            version = s.topics.data_version
            assert await sync.sync_once()
            assert s.topics.data_version is version
        finally:
            await slave.stop()
            await master.stop()
            await namesrv.stop()

    asyncio.run(main())


def test_slave_syncs_every_interval_and_reports_figures(tmp_path: Path) -> None:
    async def main() -> None:
        namesrv = NamesrvApp("127.0.0.1:0")
        await namesrv.start()
        master = BrokerApp(
            _options(tmp_path / "m", namesrv.address, 100, broker_role="SYNC_MASTER")
        )
        slave = BrokerApp(
            _options(tmp_path / "s", namesrv.address, 100, broker_role="SLAVE", broker_id=1)
        )
        try:
            await master.start()
            await slave.start()
            m, s = master.ctx, slave.ctx
            assert m is not None and s is not None and slave.replication_slave is not None
            await asyncio.wait_for(slave.replication_slave.connected.wait(), 10)
            m.topics.update(TopicConfig("Later", 2, 2, 6))
            await until(lambda: s.topics.get("Later") is not None, "the topic on the slave")
            m.offsets.commit("G", "Later", 1, 5)
            await until(lambda: s.offsets.query("G", "Later", 1) == 5, "the offset")

            message = Message(topic="Later", queue_id=0, body=b"x" * 100)
            put = await m.put(message, 100)
            assert put.ok
            end = put.commit_log_offset + put.size
            master_table = runtime_info(m)
            assert master_table["haConnections"] == "1"
            assert master_table["haPush2SlaveMaxOffset"] == str(end)  # SYNC_MASTER: acked
            assert master_table["haSlaveFallBehindBytes"] == "0"
            await until(
                lambda: runtime_info(s)["haReportedOffset"] == str(end), "the slave's report"
            )
            slave_table = runtime_info(s)
            assert slave_table["haConnectedToMaster"] == "true"
            assert slave_table["haMasterAddress"] == master.replication_master.address  # type: ignore[union-attr]
            request = RemotingCommand(RequestCode.GET_BROKER_RUNTIME_INFO, opaque=1)
            answer = await BrokerRouter(s).handle(request, FakeConnection())  # type: ignore[arg-type]
            assert answer is not None
            body = json.loads(answer.body)
            assert body["table"]["haReportedOffset"] == str(end)
        finally:
            await slave.stop()
            await master.stop()
            await namesrv.stop()

    asyncio.run(main())


def test_no_master_known_no_round(tmp_path: Path) -> None:
    async def main() -> None:
        namesrv = NamesrvApp("127.0.0.1:0")
        await namesrv.start()
        slave = BrokerApp(
            _options(tmp_path / "s", namesrv.address, 600_000, broker_role="SLAVE", broker_id=1)
        )
        try:
            await slave.start()
            sync = slave.metadata_sync
            assert sync is not None and slave.registrar is not None
            await asyncio.wait_for(slave.registrar.registered.wait(), 10)
            assert sync.master_address == "" and not await sync.sync_once()
            sync.update_master_address(slave.address)  # never itself
            assert not await sync.sync_once()
        finally:
            await slave.stop()
            await namesrv.stop()

    asyncio.run(main())


def test_slave_signs_its_requests_to_a_master_with_acl(tmp_path: Path) -> None:
    acl = tmp_path / "acl.json"
    acl.write_text(json.dumps({"accounts": [{"accessKey": "rocketmq2", "secretKey": "12345678"}]}))
    credentials = json.dumps({"accessKey": "rocketmq2", "secretKey": "12345678"})

    async def main() -> None:
        namesrv = NamesrvApp("127.0.0.1:0")
        await namesrv.start()
        options = _options(tmp_path / "m", namesrv.address, 600_000)
        options.acl_file = str(acl)
        master = BrokerApp(options)
        # Unsigned first, as a 4.9.8 slave asks (its master must white-list it).
        slave = BrokerApp(
            _options(tmp_path / "s", namesrv.address, 600_000, broker_role="SLAVE", broker_id=1)
        )
        try:
            await master.start()
            m = master.ctx
            assert m is not None
            m.topics.update(TopicConfig("Orders", 3, 3, 6))
            put = await m.put(Message(topic="Orders", queue_id=0, body=b"x" * 10), 10)
            assert put.ok
            await slave.start()
            s, sync, follower = slave.ctx, slave.metadata_sync, slave.replication_slave
            assert s is not None and sync is not None and follower is not None
            await until(lambda: sync.rounds >= 1, "the first round")
            assert sync.failures == 4 and s.topics.get("Orders") is None
            assert await follower._master_end() is None  # refused too
            # Signed with innerClientAuthenticationCredentials (RocketMQ 5's setting).
            s.config.inner_client_authentication_credentials = credentials
            assert await sync.sync_once()
            assert sync.failures == 4  # no new failure
            assert s.topics.get("Orders") is not None
            assert await follower._master_end() == m.store.max_commit_log_offset()
            # A wrong secret is refused as before.
            s.config.inner_client_authentication_credentials = credentials.replace("1234", "9999")
            assert await sync.sync_once()
            assert sync.failures == 8
        finally:
            await slave.stop()
            await master.stop()
            await namesrv.stop()

    asyncio.run(main())


def test_inner_client_credentials_setting() -> None:
    assert BrokerConfig().inner_client_credentials() is None
    config = BrokerConfig(
        inner_client_authentication_credentials='{"accessKey":"ak12345","secretKey":"sk12345"}'
    )
    credentials = config.validate().inner_client_credentials()
    assert credentials is not None and credentials.access_key == "ak12345"
    assert "sk12345" not in repr(credentials)
    for bad in ("not json", "[1]", '{"accessKey":"ak12345"}', '{"accessKey":1,"secretKey":"s"}'):
        with pytest.raises(ConfigError, match="innerClientAuthenticationCredentials") as info:
            BrokerConfig(inner_client_authentication_credentials=bad).validate()
        assert "sk12345" not in str(info.value)
