"""What mqadmin asks a broker about its state, and resetOffsetByTime:
GET_TOPIC_STATS_INFO (202, topicStatus), GET_CONSUME_STATS (208, consumerProgress),
GET_CONSUMER_CONNECTION_LIST (203, consumerConnection), GET_PRODUCER_CONNECTION_LIST
(204, producerConnection), QUERY_TOPIC_CONSUME_BY_WHO (300, statsAll, topicList -c,
message tracks), GET_BROKER_RUNTIME_INFO (28, brokerStatus, clusterList) and
INVOKE_BROKER_TO_RESET_OFFSET (222, resetOffsetByTime: the group's consumers are told the
new offsets with RESET_CONSUMER_CLIENT_OFFSET, 220) and VIEW_BROKER_STATS_DATA (315,
statsAll's and rocketmq-exporter's rates: TOPIC_PUT_NUMS/SIZE, GROUP_GET_NUMS/SIZE/LATENCY,
SNDBCK_PUT_NUMS, BROKER_PUT_NUMS, BROKER_GET_NUMS) and GET_BROKER_CONSUME_STATS (317,
brokerConsumeStats), QUERY_CONSUME_TIME_SPAN (303, the dashboard's consumer page) and
GET_TOPIC_CONFIG (351, RocketMQ 5's examineTopicConfig).

Layer: broker processors. Bodies are written as RocketMQ 4.9.8's AdminBrokerProcessor
writes them with fastjson (:mod:`rocketstore.broker.fastjson_body`: MessageQueue map keys
as unquoted objects).
"""

from __future__ import annotations

import math
import shutil
import time
from typing import Any

from rocketstore.broker.client_registry import ClientChannel, ConsumerGroup
from rocketstore.broker.codes import RequestCode, ResponseCode
from rocketstore.broker.context import BrokerContext, CommandSink
from rocketstore.broker.fastjson_body import MessageQueueKey, dumps
from rocketstore.broker.remoting import FLAG_ONEWAY, RemotingCommand, ext_bool, ext_int, ext_str
from rocketstore.broker.stats import BROKER_GET_NUMS, BROKER_PUT_NUMS
from rocketstore.format.javahash import java_hashmap_order
from rocketstore.remoting.peer import Peer

# MQVersion.CURRENT_VERSION of 4.9.8 (V4_9_8) and its ordinal: what clients compare.
BROKER_VERSION_DESC = "V4_9_8"
BROKER_VERSION = 409
GIB = 1024**3


def _body(value: Any) -> bytes:
    return dumps(value).encode("utf-8")


def _store_time(ctx: BrokerContext, topic: str, queue_id: int, offset: int) -> int:
    """getMessageStoreTimeStamp: the message's store time, 0 when there is none."""
    found = ctx.store.message_store_time(topic, queue_id, offset)
    return found if found > 0 else 0


def topic_stats(ctx: BrokerContext, topic: str) -> dict[str, Any] | None:
    """TopicStatsTable: per write queue its min and max offset and the store time of its
    last message; None for a topic this broker has no config for."""
    config = ctx.topics.get(topic)
    if config is None:
        return None
    table: dict[MessageQueueKey, dict[str, int]] = {}
    for queue_id in range(config.write_queue_nums):
        low = max(ctx.store.min_offset(topic, queue_id), 0)
        high = max(ctx.store.max_offset(topic, queue_id), 0)
        last = _store_time(ctx, topic, queue_id, high - 1) if high > 0 else 0
        table[MessageQueueKey(topic, ctx.broker_name, queue_id)] = {
            "lastUpdateTimestamp": last,
            "maxOffset": high,
            "minOffset": low,
        }
    return {"offsetTable": table}


async def get_topic_stats_info(
    ctx: BrokerContext, cmd: RemotingCommand, conn: Peer
) -> RemotingCommand:
    topic = ext_str(cmd.ext_fields, "topic")
    stats = await ctx.run(topic_stats, ctx, topic)
    if stats is None:
        return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
    return cmd.response(ResponseCode.SUCCESS, body=_body(stats))


def consume_stats(ctx: BrokerContext, group: str, topic: str | None) -> dict[str, Any]:
    """ConsumeStats: for each topic the group has offsets on (or the one asked), per read
    queue the broker's max offset, the committed offset and the store time of the last
    consumed message; consumeTps is the group's pull rate over the last minute."""
    topics = [topic] if topic else sorted(ctx.offsets.topics_of_group(group))
    online = ctx.clients.consumer_group(group)
    table: dict[MessageQueueKey, dict[str, int]] = {}
    tps = 0.0
    for name in topics:
        config = ctx.topics.get(name)
        if config is None or not _subscribed(online, name):
            continue
        table.update(_offset_table(ctx, group, name, config.read_queue_nums))
        tps += ctx.stats.group_get_tps(group, name)
    return {"consumeTps": tps, "offsetTable": table}


def _subscribed(online: ConsumerGroup | None, topic: str) -> bool:
    """False when the group is online with subscriptions and ``topic`` is not one."""
    return online is None or not online.subscriptions or topic in online.subscriptions


def _offset_table(
    ctx: BrokerContext, group: str, topic: str, queue_count: int
) -> dict[MessageQueueKey, dict[str, int]]:
    """Per queue of ``topic`` (0 .. queue_count - 1): the broker's max offset, the group's
    committed offset (0 for none) and the store time of the last message it consumed."""
    table: dict[MessageQueueKey, dict[str, int]] = {}
    for queue_id in range(queue_count):
        broker_offset = max(ctx.store.max_offset(topic, queue_id), 0)
        committed = ctx.offsets.query(group, topic, queue_id)
        consumer_offset = max(committed if committed is not None else 0, 0)
        last = 0
        if consumer_offset > 0:
            last = _store_time(ctx, topic, queue_id, consumer_offset - 1)
        table[MessageQueueKey(topic, ctx.broker_name, queue_id)] = {
            "brokerOffset": broker_offset,
            "consumerOffset": consumer_offset,
            "lastTimestamp": last,
        }
    return table


async def get_consume_stats(
    ctx: BrokerContext, cmd: RemotingCommand, conn: Peer
) -> RemotingCommand:
    group = ext_str(cmd.ext_fields, "consumerGroup")
    topic = (cmd.ext_fields.get("topic") or "").strip() or None
    stats = await ctx.run(consume_stats, ctx, group, topic)
    return cmd.response(ResponseCode.SUCCESS, body=_body(stats))


def broker_consume_stats(ctx: BrokerContext, order_only: bool) -> dict[str, Any]:
    """ConsumeStatsList (fetchAllConsumeStatsInBroker): for each subscription group, one
    ConsumeStats per topic it has offsets on (configured, ``order`` ones only when asked,
    and subscribed when the group is online with subscriptions), over the topic's write
    queues, and the total of their lag."""
    entries: list[dict[str, list[dict[str, Any]]]] = []
    total = 0
    groups = java_hashmap_order([g.group_name for g in ctx.groups.all()])
    for group in groups:
        online = ctx.clients.consumer_group(group)
        per_topic: list[dict[str, Any]] = []
        for topic in java_hashmap_order(sorted(ctx.offsets.topics_of_group(group))):
            config = ctx.topics.get(topic)
            if config is None or (order_only and not config.order):
                continue
            if not _subscribed(online, topic):
                continue
            table = _offset_table(ctx, group, topic, config.write_queue_nums)
            total += sum(w["brokerOffset"] - w["consumerOffset"] for w in table.values())
            tps = ctx.stats.group_get_tps(group, topic)
            per_topic.append({"consumeTps": tps, "offsetTable": table})
        entries.append({group: per_topic})
    return {"brokerAddr": ctx.broker_addr, "consumeStatsList": entries, "totalDiff": total}


async def get_broker_consume_stats(
    ctx: BrokerContext, cmd: RemotingCommand, conn: Peer
) -> RemotingCommand:
    order_only = ext_bool(cmd.ext_fields, "isOrder", False)
    stats = await ctx.run(broker_consume_stats, ctx, order_only)
    return cmd.response(ResponseCode.SUCCESS, body=_body(stats))


async def get_system_topic_list_from_broker(
    ctx: BrokerContext, cmd: RemotingCommand, conn: Peer
) -> RemotingCommand:
    """TopicList of the system topics (mqadmin exportMetadata leaves them out)."""
    topics = java_hashmap_order(ctx.topics.system_topics())
    return cmd.response(ResponseCode.SUCCESS, body=_body({"topicList": topics}))


async def get_all_producer_info(
    ctx: BrokerContext, cmd: RemotingCommand, conn: Peer
) -> RemotingCommand:
    """ProducerTableInfo (mqadmin producer): every registered producer, by group; the
    remote address as Netty prints it (``/ip:port``)."""
    table: dict[str, list[dict[str, Any]]] = {}
    for group in java_hashmap_order(sorted(ctx.clients.producer_groups())):
        table[group] = [
            {
                "clientId": channel.client_id,
                "language": channel.language,
                "lastUpdateTimestamp": channel.last_update_ms,
                "remoteIP": f"/{channel.addr}",
                "version": channel.version,
            }
            for channel in ctx.clients.producer_channels(group)
        ]
    return cmd.response(ResponseCode.SUCCESS, body=_body({"data": table}))


def _connection(channel: ClientChannel) -> dict[str, Any]:
    return {
        "clientAddr": channel.addr,
        "clientId": channel.client_id,
        "language": channel.language,
        "version": channel.version,
    }


async def get_consumer_connection_list(
    ctx: BrokerContext, cmd: RemotingCommand, conn: Peer
) -> RemotingCommand:
    group = ext_str(cmd.ext_fields, "consumerGroup")
    info = ctx.clients.consumer_group(group)
    # 5.x consumers over gRPC, registered as RocketMQ 5's proxy registers them
    # (ClientActivity.registerConsumer: CLUSTERING, CONSUME_FROM_LAST_OFFSET).
    others = ctx.other_consumers(group) if ctx.other_consumers is not None else []
    if info is None and not others:
        return cmd.response(
            ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online"
        )
    connections = [_connection(c) for c in info.clients.values()] if info is not None else []
    subscriptions: dict[str, Any] = {}
    for other in others:
        connections.append(
            {
                "clientAddr": other.address,
                "clientId": other.client_id,
                "language": other.language,
                "version": other.version,
            }
        )
        subscriptions.update(other.subscriptions)
    if info is not None:
        subscriptions.update(info.subscriptions)
    body = {
        "connectionSet": connections,
        "consumeFromWhere": (
            info.consume_from_where if info is not None else "CONSUME_FROM_LAST_OFFSET"
        ),
        "consumeType": info.consume_type if info is not None else others[-1].consume_type,
        "messageModel": info.message_model if info is not None else "CLUSTERING",
        "subscriptionTable": subscriptions,
    }
    return cmd.response(ResponseCode.SUCCESS, body=_body(body))


async def get_producer_connection_list(
    ctx: BrokerContext, cmd: RemotingCommand, conn: Peer
) -> RemotingCommand:
    group = ext_str(cmd.ext_fields, "producerGroup")
    channels = ctx.clients.producer_channels(group)
    if not channels:
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"the producer group[{group}] not exist")
    body = {"connectionSet": [_connection(c) for c in channels]}
    return cmd.response(ResponseCode.SUCCESS, body=_body(body))


async def query_topic_consume_by_who(
    ctx: BrokerContext, cmd: RemotingCommand, conn: Peer
) -> RemotingCommand:
    """The groups online with a subscription to the topic and those with offsets on it."""
    topic = ext_str(cmd.ext_fields, "topic")
    groups = ctx.clients.groups_subscribed_to(topic) | ctx.offsets.groups_of_topic(topic)
    return cmd.response(ResponseCode.SUCCESS, body=_body({"groupList": set(groups)}))


def runtime_info(ctx: BrokerContext) -> dict[str, str]:
    """The KVTable of GET_BROKER_RUNTIME_INFO: the keys whose facts rocketstore has
    (rates since start, offsets, disk, earliest message, delay levels). Thread-pool queue
    sizes and waits are 0: requests are not queued in pools here."""
    store = ctx.store
    stats = ctx.stats
    commitlog_dir = store.commitlog_dirs.writable[0]
    usage = shutil.disk_usage(commitlog_dir)
    queues_usage = shutil.disk_usage(store.root)
    low, high = store.min_commit_log_offset(), store.max_commit_log_offset()
    earliest = store.commitlog_store_time(low) if high > low else 0
    now = int(time.time() * 1000)
    store_stats = store.stats()
    put_times = stats.put.total or 1  # StoreStatsService: 1 before the first put
    put_bytes = sum(t.bytes for t in stats.topic_traffic().values())
    table = {
        "brokerVersionDesc": BROKER_VERSION_DESC,
        "brokerVersion": str(BROKER_VERSION),
        "bootTimestamp": str(stats.boot_ms),
        "runtime": _runtime(now - stats.boot_ms),
        "putTps": stats.put.tps_text(),
        "getTransferedTps": stats.get.tps_text(),
        "msgPutTotalTodayNow": str(stats.put.total),
        "msgGetTotalTodayNow": str(stats.get.total),
        "commitLogMinOffset": str(low),
        "commitLogMaxOffset": str(high),
        "commitLogDiskRatio": str(_ratio(usage)),
        "commitLogDirCapacity": (
            f"Total : {human_bytes(usage.total)}, Free : {human_bytes(usage.free)}."
        ),
        "consumeQueueDiskRatio": str(_ratio(queues_usage)),
        # rocketmq-exporter reads every key below (a missing one fails its whole scrape).
        "msgPutTotalTodayMorning": str(stats.put_today_morning),
        "msgPutTotalYesterdayMorning": str(stats.put_yesterday_morning),
        "msgGetTotalTodayMorning": str(stats.get_today_morning),
        "msgGetTotalYesterdayMorning": str(stats.get_yesterday_morning),
        "putMessageTimesTotal": str(put_times),
        "putMessageSizeTotal": str(put_bytes),
        "putMessageAverageSize": str(put_bytes / put_times),
        # Puts and gets are not timed one by one here (rocketmq_rpc_latency times whole
        # requests): what a Java broker reports before its first minute's sample.
        "putMessageDistributeTime": "null",
        "putMessageEntireTimeMax": "0",
        "getMessageEntireTimeMax": "0",
        "dispatchMaxBuffer": "0",
        "getFoundTps": stats.found.tps_text(),
        "getMissTps": stats.missed.tps_text(),
        "getTotalTps": stats.found.tps_text(stats.missed),
        "remainHowManyDataToFlush": human_bytes(
            max(0, store_stats.commit_log_max_offset - store_stats.commit_log_flushed_offset)
        ),
        # TransientStorePool.availableBufferNums without the pool (transientStorePoolEnable
        # is not supported): Integer.MAX_VALUE.
        "remainTransientStoreBufferNumbs": str(2**31 - 1),
        "startAcceptSendRequestTimeStamp": "0",
        "queryThreadPoolQueueSize": "0",
        "queryThreadPoolQueueHeadWaitTimeMills": "0",
        "EndTransactionQueueSize": "0",
        # BrokerConfig's 4.9.8 defaults (no thread pools here: nothing queues in them).
        "sendThreadPoolQueueCapacity": "10000",
        "pullThreadPoolQueueCapacity": "100000",
        "queryThreadPoolQueueCapacity": "20000",
        "EndTransactionThreadPoolQueueCapacity": "100000",
        "dispatchBehindBytes": str(store.dispatch_lag_bytes()),
        # Not RocketMQ's: damaged CommitLog records pulls stepped over (read_path).
        "pullSkippedDamagedMsgs": str(store.damaged_records_skipped),
        "earliestMessageTimeStamp": str(max(earliest, 0)),
        "sendThreadPoolQueueSize": "0",
        "pullThreadPoolQueueSize": "0",
        "sendThreadPoolQueueHeadWaitTimeMills": "0",
        "pullThreadPoolQueueHeadWaitTimeMills": "0",
        "pageCacheLockTimeMills": "0",
    }
    if ctx.schedule is not None:
        table.update(ctx.schedule.running_stats())
    if ctx.timer is not None:  # RocketMQ 5's timer wheel entries
        table.update(ctx.timer.runtime_info())
    # Replication figures (rocketstore's names; 4.9.8's brokerStatus has none).
    if ctx.replication is not None:
        table.update(ctx.replication.runtime_info())
    if ctx.replication_slave is not None:
        table.update(ctx.replication_slave.runtime_info())
    return table


def _ratio(usage: Any) -> float:
    """UtilAll.getDiskPartitionSpaceUsedPercent: the share of the partition in use."""
    return float((usage.total - usage.free) / usage.total) if usage.total else 0.0


def human_bytes(count: int) -> str:
    """MixAll.humanReadableByteCount(bytes, false): "512 B", "1.5 KiB", "197.4 GiB"."""
    if count < 1024:
        return f"{count} B"
    exp = min(int(math.log(count) / math.log(1024)), 6)
    return f"{count / 1024**exp:.1f} {'KMGTPE'[exp - 1]}iB"


def _runtime(ms: int) -> str:
    """StoreStatsService's "[ D days, H hours, M minutes, S seconds ]"."""
    seconds = ms // 1000
    days, seconds = divmod(seconds, 86400)
    hours, seconds = divmod(seconds, 3600)
    minutes, seconds = divmod(seconds, 60)
    return f"[ {days} days, {hours} hours, {minutes} minutes, {seconds} seconds ]"


async def get_broker_runtime_info(
    ctx: BrokerContext, cmd: RemotingCommand, conn: Peer
) -> RemotingCommand:
    table = await ctx.run(runtime_info, ctx)
    return cmd.response(ResponseCode.SUCCESS, body=_body({"table": table}))


def reset_offsets(
    ctx: BrokerContext, topic: str, group: str, timestamp: int, force: bool
) -> dict[MessageQueueKey, int] | str:
    """Broker2Client.resetOffset's table: per write queue the offset at ``timestamp`` (the
    max offset for -1), or the committed one when that is lower and ``force`` is off; the
    refusal's remark when the topic or the group's offsets are missing."""
    config = ctx.topics.get(topic)
    if config is None:
        return f"[reset-offset] reset offset failed, no topic in this broker. topic={topic}"
    table: dict[MessageQueueKey, int] = {}
    for queue_id in range(config.write_queue_nums):
        committed = ctx.offsets.query(group, topic, queue_id)
        if committed is None:
            return f"THe consumer group <{group}> not exist"
        if timestamp == -1:
            target = ctx.store.max_offset(topic, queue_id)
        else:
            target = ctx.store.offset_by_time(topic, queue_id, timestamp)
        target = max(target, 0)
        key = MessageQueueKey(topic, ctx.broker_name, queue_id)
        table[key] = target if force or target < committed else committed
    return table


async def invoke_broker_to_reset_offset(
    ctx: BrokerContext, cmd: RemotingCommand, conn: Peer
) -> RemotingCommand:
    ext = cmd.ext_fields
    topic, group = ext_str(ext, "topic"), ext_str(ext, "group")
    timestamp = ext_int(ext, "timestamp")
    table = await ctx.run(reset_offsets, ctx, topic, group, timestamp, ext_bool(ext, "isForce"))
    if isinstance(table, str):
        return cmd.response(ResponseCode.SYSTEM_ERROR, table)
    online = ctx.clients.consumer_group(group)
    if online is None:
        # mqadmin then falls back to committing the offsets itself (UPDATE_CONSUMER_OFFSET).
        return cmd.response(
            ResponseCode.CONSUMER_NOT_ONLINE,
            f"Consumer not online, so can not reset offset, Group: {group} Topic: {topic} "
            f"Timestamp: {timestamp}",
        )
    header = {"topic": topic, "group": group, "timestamp": str(timestamp)}
    # The C++ clients read a list of MessageQueueForC; the others a map keyed by queue.
    body = _body({"offsetTable": table})
    body_for_c = _body(
        {
            "offsetTable": [
                {**key.as_bean(), "offset": offset} for key, offset in sorted(table.items())
            ]
        }
    )
    for channel in online.clients.values():
        if isinstance(channel.connection, CommandSink):
            channel.connection.send(
                RemotingCommand(
                    code=RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
                    flag=FLAG_ONEWAY,
                    ext_fields=dict(header),
                    body=body_for_c if channel.language == "CPP" else body,
                )
            )
    return cmd.response(ResponseCode.SUCCESS, body=body)


async def view_broker_stats_data(
    ctx: BrokerContext, cmd: RemotingCommand, conn: Peer
) -> RemotingCommand:
    """BrokerStatsData of one stats item: the last minute's, hour's and day's sums. The
    broker-wide items are keyed by the cluster's name, as BrokerStatsManager keeps them."""
    name = ext_str(cmd.ext_fields, "statsName")
    key = ext_str(cmd.ext_fields, "statsKey")
    item = ctx.stats.stats_item(name, key)
    if name in (BROKER_PUT_NUMS, BROKER_GET_NUMS) and key != ctx.cluster_name:
        item = None
    if item is None:
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"The stats <{name}> <{key}> not exist")
    body = {
        "statsDay": item.snapshot(24 * 60).to_json(),
        "statsHour": item.snapshot(60).to_json(),
        "statsMinute": item.snapshot(1).to_json(),
    }
    return cmd.response(ResponseCode.SUCCESS, body=_body(body))


def consume_time_span(ctx: BrokerContext, topic: str, group: str) -> list[dict[str, Any]] | None:
    """QueryConsumeTimeSpanBody's spans (queryConsumeTimeSpan, mqadmin and the dashboard's
    consumer page), per write queue: the store times of its first and last message and
    of the group's last consumed one, and how long its next has waited. As 4.9.8: a
    group with no offset has the first message's time as its consume time, and its
    delay is measured from the store time of offset -1 (none: now + 1 ms)."""
    config = ctx.topics.get(topic)
    if config is None:
        return None
    store = ctx.store
    spans: list[dict[str, Any]] = []
    for queue_id in range(config.write_queue_nums):
        low = max(store.min_offset(topic, queue_id), 0)
        high = max(store.max_offset(topic, queue_id), 0)
        min_time = store.message_store_time(topic, queue_id, low)
        max_time = store.message_store_time(topic, queue_id, high - 1) if high > 0 else -1
        committed = ctx.offsets.query(group, topic, queue_id)
        consumer_offset = committed if committed is not None else -1
        if consumer_offset > 0:
            consume_time = store.message_store_time(topic, queue_id, consumer_offset - 1)
        else:
            consume_time = min_time
        delay = 0
        if consumer_offset < high:
            next_time = (
                store.message_store_time(topic, queue_id, consumer_offset)
                if consumer_offset >= 0
                else -1
            )
            delay = int(time.time() * 1000) - next_time
        spans.append(
            {
                "consumeTimeStamp": consume_time,
                "delayTime": delay,
                "maxTimeStamp": max_time,
                "messageQueue": MessageQueueKey(topic, ctx.broker_name, queue_id).as_bean(),
                "minTimeStamp": min_time,
            }
        )
    return spans


async def query_consume_time_span(
    ctx: BrokerContext, cmd: RemotingCommand, conn: Peer
) -> RemotingCommand:
    topic = ext_str(cmd.ext_fields, "topic")
    spans = await ctx.run(consume_time_span, ctx, topic, ext_str(cmd.ext_fields, "group"))
    if spans is None:
        return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
    return cmd.response(ResponseCode.SUCCESS, body=_body({"consumeTimeSpanSet": spans}))


async def get_topic_config(ctx: BrokerContext, cmd: RemotingCommand, conn: Peer) -> RemotingCommand:
    """GET_TOPIC_CONFIG (351, RocketMQ 5: examineTopicConfig): the topic's config as a
    TopicConfigAndQueueMapping; no static topic mapping here (its ``mappingDetail`` is
    null, so left out)."""
    topic = ext_str(cmd.ext_fields, "topic")
    config = ctx.topics.get(topic)
    if config is None:
        return cmd.response(
            ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {topic}"
        )
    return cmd.response(ResponseCode.SUCCESS, body=_body(config.to_json()))
