"""mqadmin's state requests, called on the processors directly: topic stats, consume
stats, consumer and producer connections, who consumes a topic, broker runtime info."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from rocketstore.broker.codes import RequestCode, ResponseCode
from rocketstore.broker.context import BrokerContext
from rocketstore.broker.remoting import RemotingCommand
from rocketstore.broker.router import BrokerRouter
from tests.unit.broker.broker_helpers import CLIENT_ADDR, FakeConnection, call, pull, send_v2


def _fastjson(body: bytes) -> object:
    """Parse a body whose MessageQueue keys are unquoted objects: each becomes the string
    "topic/queueId"."""
    text = body.decode("utf-8")
    keyed = re.sub(
        r'\{"brokerName":"[^"]*","queueId":(\d+),"topic":"([^"]*)"\}:', r'"\2/\1":', text
    )
    return json.loads(keyed)


def _send(ctx: BrokerContext, topic: str, queue_id: int, count: int) -> None:
    for _ in range(count):
        answer = call(ctx, RequestCode.SEND_MESSAGE_V2, send_v2(topic, queue_id=queue_id), b"x")
        assert answer.code == ResponseCode.SUCCESS
    ctx.store.wait_dispatched()


def _heartbeat(ctx: BrokerContext, conn: FakeConnection, *, consumer: bool = True) -> None:
    data: dict[str, object] = {"clientID": "client-1", "producerDataSet": [{"groupName": "PG"}]}
    data["consumerDataSet"] = (
        [
            {
                "groupName": "G",
                "consumeType": "CONSUME_PASSIVELY",
                "messageModel": "CLUSTERING",
                "consumeFromWhere": 4,  # an ordinal: CONSUME_FROM_FIRST_OFFSET
                "subscriptionDataSet": [{"topic": "T", "subString": "*", "subVersion": 7}],
            }
        ]
        if consumer
        else []
    )
    answer = call(ctx, RequestCode.HEART_BEAT, body=json.dumps(data).encode(), conn=conn)
    assert answer.code == ResponseCode.SUCCESS


def test_topic_stats(ctx: BrokerContext) -> None:
    _send(ctx, "T", 1, 3)
    answer = call(ctx, RequestCode.GET_TOPIC_STATS_INFO, {"topic": "T"})
    assert answer.code == ResponseCode.SUCCESS
    table = _fastjson(answer.body)["offsetTable"]  # type: ignore[index]
    assert set(table) == {f"T/{q}" for q in range(4)}  # every write queue
    assert table["T/1"]["maxOffset"] == 3 and table["T/1"]["minOffset"] == 0
    assert table["T/1"]["lastUpdateTimestamp"] == ctx.store.message_store_time("T", 1, 2)
    assert table["T/0"] == {"lastUpdateTimestamp": 0, "maxOffset": 0, "minOffset": 0}
    missing = call(ctx, RequestCode.GET_TOPIC_STATS_INFO, {"topic": "Nope"})
    assert (missing.code, missing.remark) == (ResponseCode.TOPIC_NOT_EXIST, "topic[Nope] not exist")


def test_consume_stats(ctx: BrokerContext) -> None:
    _send(ctx, "T", 0, 4)
    ctx.offsets.commit("G", "T", 0, 3)
    answer = call(ctx, RequestCode.GET_CONSUME_STATS, {"consumerGroup": "G"})
    stats = _fastjson(answer.body)
    table = stats["offsetTable"]  # type: ignore[index]
    assert table["T/0"] == {
        "brokerOffset": 4,
        "consumerOffset": 3,
        "lastTimestamp": ctx.store.message_store_time("T", 0, 2),
    }
    assert table["T/1"] == {"brokerOffset": 0, "consumerOffset": 0, "lastTimestamp": 0}
    assert stats["consumeTps"] == 0.0  # type: ignore[index]
    # Online and subscribed to T only: a topic it has offsets on but no subscription is left out.
    _send(ctx, "Other", 0, 1)
    ctx.offsets.commit("G", "Other", 0, 1)
    _heartbeat(ctx, FakeConnection())
    listed = _fastjson(call(ctx, RequestCode.GET_CONSUME_STATS, {"consumerGroup": "G"}).body)
    assert {key.split("/")[0] for key in listed["offsetTable"]} == {"T"}  # type: ignore[index]
    # Pulls count in the group's rate.
    pull = {"consumerGroup": "G", "topic": "T", "queueId": 0, "queueOffset": 0}
    pull |= {"maxMsgNums": 32, "sysFlag": 0, "commitOffset": 0, "suspendTimeoutMillis": 0}
    pull |= {"subscription": "*", "subVersion": 0}
    assert call(ctx, RequestCode.PULL_MESSAGE, pull).code == ResponseCode.SUCCESS
    again = _fastjson(call(ctx, RequestCode.GET_CONSUME_STATS, {"consumerGroup": "G"}).body)
    assert again["consumeTps"] == pytest.approx(4 / 60)  # type: ignore[index]


def test_connections_and_who_consumes(ctx: BrokerContext) -> None:
    offline = call(ctx, RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "G"})
    assert offline.code == ResponseCode.CONSUMER_NOT_ONLINE
    assert offline.remark == "the consumer group[G] not online"
    nobody = call(ctx, RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "PG"})
    assert nobody.code == ResponseCode.SYSTEM_ERROR
    _heartbeat(ctx, FakeConnection())
    consumer = json.loads(
        call(ctx, RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "G"}).body
    )
    assert consumer["connectionSet"] == [
        {"clientAddr": CLIENT_ADDR, "clientId": "client-1", "language": "JAVA", "version": 0}
    ]
    assert consumer["consumeFromWhere"] == "CONSUME_FROM_FIRST_OFFSET"
    assert consumer["consumeType"] == "CONSUME_PASSIVELY"
    assert consumer["messageModel"] == "CLUSTERING"
    assert consumer["subscriptionTable"]["T"]["subVersion"] == 7
    producer = json.loads(
        call(ctx, RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "PG"}).body
    )
    assert [c["clientId"] for c in producer["connectionSet"]] == ["client-1"]
    ctx.offsets.commit("Old", "T", 0, 1)
    who = json.loads(call(ctx, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "T"}).body)
    assert who == {"groupList": ["G", "Old"]}


def test_broker_runtime_info(ctx: BrokerContext) -> None:
    _send(ctx, "T", 0, 2)
    table = json.loads(call(ctx, RequestCode.GET_BROKER_RUNTIME_INFO).body)["table"]
    assert all(isinstance(v, str) for v in table.values())  # a KVTable of strings
    assert table["brokerVersionDesc"] == "V4_9_8" and table["brokerVersion"] == "409"
    assert table["msgPutTotalTodayNow"] == "2"
    assert re.fullmatch(r"\d+\.\d\d \d+\.\d\d \d+\.\d\d", table["putTps"])
    assert float(table["putTps"].split()[1]) == pytest.approx(2 / 60, abs=0.01)
    assert int(table["commitLogMaxOffset"]) == ctx.store.commitlog.max_offset()
    assert int(table["earliestMessageTimeStamp"]) == ctx.store.message_store_time("T", 0, 0)
    assert 0.0 <= float(table["commitLogDiskRatio"]) <= 1.0
    assert table["commitLogDirCapacity"].startswith("Total : ")


def test_reset_offset_by_time(ctx: BrokerContext) -> None:
    _send(ctx, "T", 0, 3)
    reset = {"topic": "T", "group": "G", "timestamp": "-1", "isForce": "true"}
    no_offsets = call(ctx, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, reset)
    assert no_offsets.code == ResponseCode.SYSTEM_ERROR
    assert no_offsets.remark == "THe consumer group <G> not exist"
    for queue_id in range(4):
        ctx.offsets.commit("G", "T", queue_id, 0)
    offline = call(ctx, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, reset)
    assert offline.code == ResponseCode.CONSUMER_NOT_ONLINE  # mqadmin falls back to 15
    assert offline.remark == (
        "Consumer not online, so can not reset offset, Group: G Topic: T Timestamp: -1"
    )
    java, cpp = FakeConnection(), FakeConnection()
    _heartbeat(ctx, java)
    body: dict[str, object] = {"clientID": "client-2", "producerDataSet": []}
    body["consumerDataSet"] = [{"groupName": "G", "subscriptionDataSet": []}]
    beat = RemotingCommand(RequestCode.HEART_BEAT, body=json.dumps(body).encode(), language="CPP")
    asyncio.run(BrokerRouter(ctx).handle(beat, cpp))  # type: ignore[arg-type]
    java.sent.clear()
    cpp.sent.clear()
    answer = call(ctx, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, reset)
    assert answer.code == ResponseCode.SUCCESS
    assert _fastjson(answer.body) == {"offsetTable": {"T/0": 3, "T/1": 0, "T/2": 0, "T/3": 0}}
    [told] = java.sent
    assert told.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET and told.is_oneway
    assert told.ext_fields == {"topic": "T", "group": "G", "timestamp": "-1"}
    assert told.body == answer.body
    [told_c] = cpp.sent
    assert json.loads(told_c.body)["offsetTable"][0] == {
        "brokerName": "broker-a",
        "offset": 3,
        "queueId": 0,
        "topic": "T",
    }
    # Not forced: a queue only ever moves back; the committed 0 is below the end, so it stays.
    kept = call(ctx, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {**reset, "isForce": "false"})
    assert _fastjson(kept.body) == {"offsetTable": {"T/0": 0, "T/1": 0, "T/2": 0, "T/3": 0}}
    # By time: the first message stored at or after it.
    stored = ctx.store.message_store_time("T", 0, 1)
    by_time = call(ctx, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {**reset, "timestamp": stored})
    assert _fastjson(by_time.body)["offsetTable"]["T/0"] == ctx.store.offset_by_time(  # type: ignore[index]
        "T", 0, stored
    )
    unknown = call(ctx, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {**reset, "topic": "Nope"})
    assert unknown.code == ResponseCode.SYSTEM_ERROR and "no topic" in (unknown.remark or "")


def test_broker_config_as_java_properties(ctx: BrokerContext) -> None:
    answer = call(ctx, RequestCode.GET_BROKER_CONFIG)
    assert answer.code == ResponseCode.SUCCESS
    lines = answer.body.decode().splitlines()
    settings = dict(line.split("=", 1) for line in lines)
    assert settings["brokerName"] == "broker-a" and settings["listenPort"] == "10911"
    assert settings["autoCreateTopicEnable"] == "true"
    assert settings["flushDiskType"] == "ASYNC_FLUSH"
    assert settings["transactionCheckInterval"] == "60000"
    assert settings["storePathRootDir"] == ctx.store.root
    assert lines == sorted(lines)
    version = json.loads(answer.ext_fields["version"])
    assert version["counter"] == 0 and isinstance(version["timestamp"], int)


def test_view_broker_stats_data(ctx: BrokerContext) -> None:
    _send(ctx, "T", 0, 2)
    ask = {"statsName": "TOPIC_PUT_NUMS", "statsKey": "T"}
    data = json.loads(call(ctx, RequestCode.VIEW_BROKER_STATS_DATA, ask).body)
    assert data["statsMinute"]["sum"] == 2 and data["statsDay"]["sum"] == 2
    assert data["statsMinute"]["avgpt"] == 1.0  # two sends of one message
    missing = call(ctx, RequestCode.VIEW_BROKER_STATS_DATA, {**ask, "statsKey": "Nope"})
    assert missing.code == ResponseCode.SYSTEM_ERROR
    assert missing.remark == "The stats <TOPIC_PUT_NUMS> <Nope> not exist"


def test_broker_consume_stats(ctx: BrokerContext) -> None:
    """GET_BROKER_CONSUME_STATS (317, brokerConsumeStats): per subscription group, one
    ConsumeStats per topic it has offsets on, over the topic's write queues."""
    _send(ctx, "T", 1, 3)
    group = {"groupName": "G", "retryQueueNums": 1}
    body = json.dumps(group).encode()
    assert call(ctx, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body).code == 0
    commit = {"consumerGroup": "G", "topic": "T", "queueId": 1, "commitOffset": 1}
    assert call(ctx, RequestCode.UPDATE_CONSUMER_OFFSET, commit).code == 0
    answer = call(ctx, RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": "false"})
    assert answer.code == ResponseCode.SUCCESS
    stats = _fastjson(answer.body)
    assert isinstance(stats, dict)
    assert stats["brokerAddr"] == ctx.broker_addr and stats["totalDiff"] == 2
    by_group = {name: value for entry in stats["consumeStatsList"] for name, value in entry.items()}
    (per_topic,) = by_group["G"]
    assert set(per_topic["offsetTable"]) == {f"T/{q}" for q in range(4)}
    wrapper = per_topic["offsetTable"]["T/1"]
    assert (wrapper["brokerOffset"], wrapper["consumerOffset"]) == (3, 1)
    assert wrapper["lastTimestamp"] == ctx.store.message_store_time("T", 1, 0)
    ordered = _fastjson(call(ctx, RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": "true"}).body)
    assert isinstance(ordered, dict) and ordered["totalDiff"] == 0


def test_system_topics_and_producers(ctx: BrokerContext) -> None:
    """GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305, exportMetadata) and GET_ALL_PRODUCER_INFO
    (328, mqadmin producer)."""
    topics = json.loads(call(ctx, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER).body)
    assert {"TBW102", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRACE_TOPIC", "SELF_TEST_TOPIC"} <= set(
        topics["topicList"]
    )
    assert ctx.config.broker_name in topics["topicList"]
    assert json.loads(call(ctx, RequestCode.GET_ALL_PRODUCER_INFO).body) == {"data": {}}
    _heartbeat(ctx, FakeConnection(), consumer=False)
    info = json.loads(call(ctx, RequestCode.GET_ALL_PRODUCER_INFO).body)
    (producer,) = info["data"]["PG"]
    assert producer["clientId"] == "client-1" and producer["remoteIP"] == f"/{CLIENT_ADDR}"
    assert producer["language"] == "JAVA" and producer["lastUpdateTimestamp"] > 0


def test_delete_expired_commit_log_answers_at_once(ctx: BrokerContext) -> None:
    """DELETE_EXPIRED_COMMITLOG (329): the manual retention runs in the background."""
    _send(ctx, "T", 0, 2)
    answer = call(ctx, RequestCode.DELETE_EXPIRED_COMMITLOG)
    assert (answer.code, answer.remark) == (ResponseCode.SUCCESS, None)


class _AnsweringConnection(FakeConnection):
    """A consumer connection that answers the broker's requests (or never does)."""

    def __init__(self, answer: RemotingCommand | None) -> None:
        super().__init__()
        self.answer = answer
        self.asked: list[RemotingCommand] = []

    async def request(self, cmd: RemotingCommand, timeout_s: float) -> RemotingCommand:
        self.asked.append(cmd)
        if self.answer is None:
            raise TimeoutError
        return self.answer


def test_requests_passed_on_to_a_consumer(ctx: BrokerContext) -> None:
    """GET_CONSUMER_RUNNING_INFO (307, consumerStatus) and CONSUME_MESSAGE_DIRECTLY (309,
    queryMsgById -g -d): the consumer's answer is the answer; RocketMQ's remarks when it
    is not online or does not answer in time."""
    running = RemotingCommand(0, flag=1, body=b'{"properties":{}}', ext_fields={"x": "1"})
    conn = _AnsweringConnection(running)
    _heartbeat(ctx, conn)
    ask = {"consumerGroup": "G", "clientId": "client-1", "jstackEnable": "false"}
    answer = call(ctx, RequestCode.GET_CONSUMER_RUNNING_INFO, ask)
    assert (answer.code, answer.body, answer.ext_fields) == (0, running.body, {"x": "1"})
    assert conn.asked[0].code == RequestCode.GET_CONSUMER_RUNNING_INFO
    assert conn.asked[0].ext_fields == ask
    _send(ctx, "T", 0, 1)
    [stored] = ctx.store.get_messages("g", "T", 0, 0, 1).messages
    direct = {"consumerGroup": "G", "clientId": "client-1", "msgId": stored.msg_id}
    assert call(ctx, RequestCode.CONSUME_MESSAGE_DIRECTLY, direct).code == 0
    passed = conn.asked[1]
    assert passed.ext_fields["brokerName"] == ctx.broker_name
    assert passed.body == ctx.store.commitlog.read(stored.commit_log_offset, stored.size)
    gone = call(ctx, RequestCode.GET_CONSUMER_RUNNING_INFO, {**ask, "clientId": "nobody"})
    assert (gone.code, gone.remark) == (
        ResponseCode.SYSTEM_ERROR,
        "The Consumer <G> <nobody> not online",
    )
    conn.answer = None
    late = call(ctx, RequestCode.GET_CONSUMER_RUNNING_INFO, ask)
    assert late.code == ResponseCode.CONSUME_MSG_TIMEOUT
    assert int(ResponseCode.CONSUME_MSG_TIMEOUT) == 207
    assert late.remark == "consumer <G> <client-1> Timeout: no answer in 10 s"


def _stats(ctx: BrokerContext, name: str, key: str) -> dict[str, dict[str, float]]:
    answer = call(ctx, RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": name, "statsKey": key})
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    data = json.loads(answer.body)
    assert isinstance(data, dict)
    return data


def test_view_broker_stats_data_serves_what_the_exporter_asks(ctx: BrokerContext) -> None:
    """rocketmq-exporter's seven items: TOPIC_PUT_NUMS/SIZE by topic, GROUP_GET_NUMS/SIZE
    and SNDBCK_PUT_NUMS by topic@group, BROKER_PUT_NUMS/GET_NUMS by the cluster's name;
    GROUP_GET_LATENCY beside them (mqadmin's statsAll reads the NUMS)."""
    _send(ctx, "T", 0, 3)
    stored = ctx.store.get_messages("G", "T", 0, 0, 32).messages
    written = sum(m.size for m in stored)
    assert pull(ctx, "T", 0, 0).code == ResponseCode.SUCCESS
    size = _stats(ctx, "TOPIC_PUT_SIZE", "T")
    assert size["statsMinute"]["sum"] == written and size["statsDay"]["avgpt"] == written / 3
    got = _stats(ctx, "GROUP_GET_NUMS", "T@G")
    assert got["statsHour"]["sum"] == 3 and got["statsHour"]["avgpt"] == 3.0  # one pull
    assert _stats(ctx, "GROUP_GET_SIZE", "T@G")["statsMinute"]["sum"] == written
    latency = _stats(ctx, "GROUP_GET_LATENCY", "T@G")["statsMinute"]
    assert latency["sum"] >= 0 and latency["sum"] == latency["avgpt"]  # one pull timed
    cluster = ctx.cluster_name
    put = _stats(ctx, "BROKER_PUT_NUMS", cluster)["statsMinute"]
    assert put["sum"] == 3 and put["avgpt"] == 0.0  # RocketMQ counts no times in these
    assert _stats(ctx, "BROKER_GET_NUMS", cluster)["statsDay"]["sum"] == 3
    other = {"statsName": "BROKER_PUT_NUMS", "statsKey": "OtherCluster"}
    assert call(ctx, RequestCode.VIEW_BROKER_STATS_DATA, other).code == ResponseCode.SYSTEM_ERROR
    group = {"groupName": "G", "retryQueueNums": 1}
    body = json.dumps(group).encode()
    assert call(ctx, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body).code == 0
    back = {"offset": stored[0].commit_log_offset, "group": "G", "delayLevel": 0}
    assert call(ctx, RequestCode.CONSUMER_SEND_MSG_BACK, back).code == ResponseCode.SUCCESS
    assert _stats(ctx, "SNDBCK_PUT_NUMS", "T@G")["statsMinute"]["sum"] == 1
    assert ctx.stats.send_backs() == {("G", "T", False): 1}


def test_query_consume_time_span(ctx: BrokerContext) -> None:
    """QUERY_CONSUME_TIME_SPAN (303): per write queue the first, last and last consumed
    message's store times and the wait of the next; RocketMQ's quirks for a queue with
    no messages (-1) and a group with no offset (its consume time is the first's)."""
    _send(ctx, "T", 1, 3)
    commit = {"consumerGroup": "G", "topic": "T", "queueId": 1, "commitOffset": 1}
    assert call(ctx, RequestCode.UPDATE_CONSUMER_OFFSET, commit).code == 0
    answer = call(ctx, RequestCode.QUERY_CONSUME_TIME_SPAN, {"topic": "T", "group": "G"})
    assert answer.code == ResponseCode.SUCCESS
    spans = json.loads(answer.body)["consumeTimeSpanSet"]
    assert [s["messageQueue"] for s in spans] == [
        {"brokerName": ctx.broker_name, "queueId": q, "topic": "T"} for q in range(4)
    ]
    times = [ctx.store.message_store_time("T", 1, offset) for offset in range(3)]
    one = spans[1]
    assert (one["minTimeStamp"], one["maxTimeStamp"]) == (times[0], times[2])
    assert one["consumeTimeStamp"] == times[0]  # offset 1 committed: message 0 consumed
    assert 0 <= one["delayTime"] < 60_000  # message 1 waits since it was stored
    empty = spans[0]
    assert (empty["minTimeStamp"], empty["maxTimeStamp"], empty["consumeTimeStamp"]) == (-1,) * 3
    # 4.9.8's: no offset (-1) is below max offset 0, so the delay is now - (-1)
    assert empty["delayTime"] > 10**12
    gone = call(ctx, RequestCode.QUERY_CONSUME_TIME_SPAN, {"topic": "Nope", "group": "G"})
    assert (gone.code, gone.remark) == (ResponseCode.TOPIC_NOT_EXIST, "topic[Nope] not exist")


def test_get_topic_config(ctx: BrokerContext) -> None:
    """GET_TOPIC_CONFIG (351, RocketMQ 5's examineTopicConfig)."""
    _send(ctx, "T", 0, 1)
    answer = call(ctx, RequestCode.GET_TOPIC_CONFIG, {"topic": "T", "lo": "false"})
    assert answer.code == ResponseCode.SUCCESS
    config = json.loads(answer.body)
    assert config["topicName"] == "T" and config["writeQueueNums"] == 4
    assert config["perm"] == 6 and "mappingDetail" not in config
    gone = call(ctx, RequestCode.GET_TOPIC_CONFIG, {"topic": "Nope"})
    assert gone.code == ResponseCode.TOPIC_NOT_EXIST
    assert gone.remark == "No topic in this broker. topic: Nope"


# The keys rocketmq-exporter's BrokerRuntimeStats parses without a default, by how.
EXPORTER_LONGS = [
    "msgPutTotalTodayNow",
    "sendThreadPoolQueueHeadWaitTimeMills",
    "queryThreadPoolQueueHeadWaitTimeMills",
    "msgGetTotalTodayNow",
    "queryThreadPoolQueueSize",
    "bootTimestamp",
    "msgPutTotalYesterdayMorning",
    "msgGetTotalYesterdayMorning",
    "pullThreadPoolQueueSize",
    "commitLogMinOffset",
    "pullThreadPoolQueueHeadWaitTimeMills",
    "dispatchMaxBuffer",
    "brokerVersion",
    "pageCacheLockTimeMills",
    "commitLogMaxOffset",
    "getMessageEntireTimeMax",
    "msgPutTotalTodayMorning",
    "putMessageTimesTotal",
    "msgGetTotalTodayMorning",
    "sendThreadPoolQueueSize",
    "startAcceptSendRequestTimeStamp",
    "putMessageEntireTimeMax",
    "earliestMessageTimeStamp",
    "remainTransientStoreBufferNumbs",
    "queryThreadPoolQueueCapacity",
    "dispatchBehindBytes",
    "putMessageSizeTotal",
    "sendThreadPoolQueueCapacity",
    "pullThreadPoolQueueCapacity",
]
EXPORTER_DOUBLES = ["consumeQueueDiskRatio", "commitLogDiskRatio", "putMessageAverageSize"]
EXPORTER_TPS = ["putTps", "getMissTps", "getTransferedTps", "getTotalTps", "getFoundTps"]


def test_broker_runtime_info_has_what_rocketmq_exporter_parses(ctx: BrokerContext) -> None:
    _send(ctx, "T", 0, 2)
    assert pull(ctx, "T", 0, 0).code == ResponseCode.SUCCESS
    table = json.loads(call(ctx, RequestCode.GET_BROKER_RUNTIME_INFO).body)["table"]
    for key in EXPORTER_LONGS:
        int(table[key])
    for key in EXPORTER_DOUBLES:
        float(table[key])
    for key in EXPORTER_TPS:
        assert len([float(x) for x in table[key].split(" ")]) == 3
    float(table["remainHowManyDataToFlush"].split(" ")[0])
    assert table["putMessageDistributeTime"] == "null"  # the exporter skips it so
    assert table["runtime"].startswith("[ ")
    # "Total : 197.4 GiB, Free : 53.2 GiB.": the exporter cuts fields 2-3 and 6-7
    words = table["commitLogDirCapacity"].split(" ")
    assert words[0] == "Total" and words[4] == "Free" and words[7].endswith("B.")
    assert table["putMessageTimesTotal"] == "2" and float(table["getFoundTps"].split()[1]) > 0
    stored = ctx.store.get_messages("G", "T", 0, 0, 32).messages
    assert int(table["putMessageSizeTotal"]) == sum(m.size for m in stored)


def test_human_bytes_as_rocketmq_writes_them() -> None:
    from rocketstore.broker.processors.monitoring import human_bytes

    assert human_bytes(0) == "0 B" and human_bytes(1023) == "1023 B"
    assert human_bytes(1536) == "1.5 KiB" and human_bytes(5 * 1024**3) == "5.0 GiB"


def test_day_totals_roll_at_midnight() -> None:
    from rocketstore.broker.stats import BrokerStats

    stats = BrokerStats()
    stats.stored("T", 5)
    stats.roll_day(400)  # a new day
    assert (stats.put_today_morning, stats.put_yesterday_morning) == (5, 0)
    stats.stored("T", 2)
    stats.roll_day(400)  # the same day: nothing moves
    stats.roll_day(401)
    assert (stats.put_today_morning, stats.put_yesterday_morning) == (7, 5)


def test_pulls_that_find_nothing_count_as_misses(ctx: BrokerContext) -> None:
    _send(ctx, "T", 0, 2)
    assert pull(ctx, "T", 0, 0).code == ResponseCode.SUCCESS
    for _ in range(3):  # past the end: nothing found, no hold (sysFlag without SUSPEND)
        assert pull(ctx, "T", 0, 2).code == ResponseCode.PULL_NOT_FOUND
    assert ctx.stats.missed.total == 3 and ctx.stats.found.total == 1
    table = json.loads(call(ctx, RequestCode.GET_BROKER_RUNTIME_INFO).body)["table"]
    found, missed, total = (
        [float(x) for x in table[key].split(" ")]
        for key in ("getFoundTps", "getMissTps", "getTotalTps")
    )
    # (two decimals, as RocketMQ prints them)
    assert missed[1] == pytest.approx(3 / 60, abs=0.005)
    assert found[1] == pytest.approx(1 / 60, abs=0.005)
    assert total == pytest.approx([f + m for f, m in zip(found, missed, strict=True)], abs=0.011)


def test_a_held_pull_that_times_out_misses_twice(ctx: BrokerContext) -> None:
    _send(ctx, "T", 0, 1)
    answer = pull(ctx, "T", 0, 1, sysFlag=4 | 2, suspendTimeoutMillis=10)  # FLAG_SUSPEND
    assert answer.code == ResponseCode.PULL_NOT_FOUND
    assert ctx.stats.missed.total == 2  # the read before the hold and the one after
