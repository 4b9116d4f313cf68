"""Topic and consumer-group administration through a running broker:
UPDATE_AND_CREATE_TOPIC (17), DELETE_TOPIC_IN_BROKER (215), GET_ALL_TOPIC_CONFIG (21),
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200), GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201),
DELETE_SUBSCRIPTIONGROUP (207), GET_BROKER_CONFIG (26), UPDATE_BROKER_CONFIG (25),
GET_ALL_CONSUMER_OFFSET (43), GET_ALL_DELAY_OFFSET (45). The four GET_ALL requests are what
a slave copies its master's metadata with (``broker.ha_metadata``).

Layer: broker processors. Changes reach the name servers at once (``topics_changed``).
"""

from __future__ import annotations

import json
import logging

from rocketstore.broker import config_update, fastjson_body
from rocketstore.broker.broker_config import (
    BROKER_ALIASES,
    DELAY_OFFSET_FILE,
    config_file_path,
    load_config_file,
    parse_fastjson,
)
from rocketstore.broker.codes import ResponseCode
from rocketstore.broker.config_update import black_listed, java_text
from rocketstore.broker.consumer_offsets import table_key
from rocketstore.broker.context import BrokerContext
from rocketstore.broker.processors.queue_admin import log_deleted_queues
from rocketstore.broker.remoting import RemotingCommand, ext_bool, ext_java_int, ext_str
from rocketstore.broker.schedule import decode_delay_offset_file
from rocketstore.broker.subscription_groups import SubscriptionGroupConfig
from rocketstore.broker.topic_config import SINGLE_TAG, TopicConfig, encode_topics_file
from rocketstore.config import parse_host
from rocketstore.errors import ConfigError, CorruptDataError
from rocketstore.remoting.peer import Peer
from rocketstore.settings_file import STORE_KEYS, camel_keys, parse_java_properties

log = logging.getLogger(__name__)


def _too_many_queues(ctx: BrokerContext, name: str, nums: int) -> str | None:
    """Why a queue count is refused, or None. Every topicStatus, QUERY_ASSIGNMENT and
    rebalance works per queue, so 2^31 queues would stall the broker and its clients."""
    limit = ctx.config.max_queue_nums
    if nums <= limit:
        return None
    return f"{name} {nums} is more than this broker's maxQueueNums {limit}"


async def update_and_create_topic(
    ctx: BrokerContext, cmd: RemotingCommand, conn: Peer
) -> RemotingCommand:
    ext = cmd.ext_fields
    topic = ext_str(ext, "topic")
    if topic == ctx.cluster_name:
        return cmd.response(
            ResponseCode.SYSTEM_ERROR, f"the topic[{topic}] is conflict with system reserved words."
        )
    try:
        # CreateTopicRequestHeader's fields are Integers: past an int is refused naming it.
        config = TopicConfig(
            topic_name=topic,
            read_queue_nums=ext_java_int(ext, "readQueueNums", 4),
            write_queue_nums=ext_java_int(ext, "writeQueueNums", 4),
            perm=ext_java_int(ext, "perm", 6),
            topic_sys_flag=ext_java_int(ext, "topicSysFlag", 0),
            order=ext_bool(ext, "order"),
            topic_filter_type=ext.get("topicFilterType", SINGLE_TAG),
        )
        for name, nums in (
            ("readQueueNums", config.read_queue_nums),
            ("writeQueueNums", config.write_queue_nums),
        ):
            too_many = _too_many_queues(ctx, name, nums)
            if too_many is not None:
                return cmd.response(ResponseCode.SYSTEM_ERROR, f"topic {topic}: {too_many}")
        ctx.topics.update(config)
    except ConfigError as e:
        return cmd.response(ResponseCode.SYSTEM_ERROR, str(e))
    ctx.topics_changed()
    return cmd.response(ResponseCode.SUCCESS)


async def delete_topic(ctx: BrokerContext, cmd: RemotingCommand, conn: Peer) -> RemotingCommand:
    topic = ext_str(cmd.ext_fields, "topic")
    if ctx.topics.is_system_topic(topic):
        return cmd.response(
            ResponseCode.SYSTEM_ERROR, f"The topic[{topic}] is conflict with system topic."
        )
    ctx.topics.delete(topic)
    ctx.offsets.remove_topic(topic)
    ctx.topics_changed()
    # RocketMQ then deletes the queues of every topic it has no config for
    # (cleanUnusedTopic); only the deleted topic's go here: a store written without a
    # broker (rocketstore's engine, a Spark job) has topics no config names.
    removed = await ctx.run(ctx.store.delete_topic_queues, topic)
    log.info("topic %s deleted with its %d consume queues", topic, len(removed))
    return cmd.response(ResponseCode.SUCCESS)


async def clean_unused_topic(
    ctx: BrokerContext, cmd: RemotingCommand, conn: Peer
) -> RemotingCommand:
    """mqadmin cleanUnusedTopic: the consume queues of every topic the broker has no
    config for go (not the schedule, transaction op or LMQ ones), as in RocketMQ."""
    configured = [config.topic_name for config in ctx.topics.all()]
    removed = await ctx.run(ctx.store.clean_unused_topics, configured)
    log_deleted_queues("cleanUnusedTopic", conn, removed)
    return cmd.response(ResponseCode.SUCCESS)


def topic_config_wrapper(ctx: BrokerContext) -> bytes:
    """TopicConfigSerializeWrapper: the topic table and its data version."""
    document = encode_topics_file(ctx.topics.all(), ctx.topics.data_version)
    return json.dumps(document, separators=(",", ":")).encode("utf-8")


async def get_all_topic_config(
    ctx: BrokerContext, cmd: RemotingCommand, conn: Peer
) -> RemotingCommand:
    return cmd.response(ResponseCode.SUCCESS, body=topic_config_wrapper(ctx))


async def update_and_create_subscription_group(
    ctx: BrokerContext, cmd: RemotingCommand, conn: Peer
) -> RemotingCommand:
    try:
        config = SubscriptionGroupConfig.from_json(parse_fastjson(cmd.body.decode("utf-8")))
        too_many = _too_many_queues(ctx, "retryQueueNums", config.retry_queue_nums)
        if too_many is not None:
            return cmd.response(
                ResponseCode.SYSTEM_ERROR, f"bad subscription group config: {too_many}"
            )
        ctx.groups.update(config)
    except (UnicodeDecodeError, ValueError, ConfigError) as e:
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"bad subscription group config: {e}")
    return cmd.response(ResponseCode.SUCCESS)


async def get_all_subscription_group_config(
    ctx: BrokerContext, cmd: RemotingCommand, conn: Peer
) -> RemotingCommand:
    body = json.dumps(ctx.groups.document(), separators=(",", ":")).encode("utf-8")
    return cmd.response(ResponseCode.SUCCESS, body=body)


def consumer_offset_body(ctx: BrokerContext) -> bytes:
    """ConsumerOffsetManager.encode(): ``{"offsetTable":{"TOPIC@GROUP":{0:12}}}``, the
    queue ids unquoted as fastjson writes Integer keys."""
    table = {
        table_key(topic, group): dict(queues)
        for (topic, group), queues in ctx.offsets.table().items()
    }
    return fastjson_body.dumps({"offsetTable": table}).encode("utf-8")


def delay_offsets(ctx: BrokerContext) -> dict[int, int]:
    """Each delay level's next queue offset: the schedule service's, or on a broker that
    runs none (a slave, ``schedule_enable=False``) what delayOffset.json holds, as a Java
    broker's idle ScheduleMessageService loaded it."""
    if ctx.schedule is not None:
        return ctx.schedule.offsets()
    path = config_file_path(ctx.store.root, DELAY_OFFSET_FILE)
    loaded = load_config_file(path, "delay offset", decode_delay_offset_file)
    return loaded if loaded is not None else {}


def delay_offset_body(ctx: BrokerContext) -> bytes:
    """ScheduleMessageService.encode(): ``{"offsetTable":{1:0,2:5}}`` (level -> offset)."""
    return fastjson_body.dumps({"offsetTable": delay_offsets(ctx)}).encode("utf-8")


async def get_all_consumer_offset(
    ctx: BrokerContext, cmd: RemotingCommand, conn: Peer
) -> RemotingCommand:
    return cmd.response(ResponseCode.SUCCESS, body=consumer_offset_body(ctx))


async def get_all_delay_offset(
    ctx: BrokerContext, cmd: RemotingCommand, conn: Peer
) -> RemotingCommand:
    try:
        body = await ctx.run(delay_offset_body, ctx)
    except CorruptDataError as e:
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"delay offsets unreadable: {e}")
    return cmd.response(ResponseCode.SUCCESS, body=body)


async def delete_subscription_group(
    ctx: BrokerContext, cmd: RemotingCommand, conn: Peer
) -> RemotingCommand:
    """The group's config goes; with removeOffset its committed offsets too."""
    group = ext_str(cmd.ext_fields, "groupName")
    ctx.groups.delete(group)
    if ext_bool(cmd.ext_fields, "removeOffset"):
        ctx.offsets.remove_group(group)
    return cmd.response(ResponseCode.SUCCESS)


def broker_settings(ctx: BrokerContext) -> dict[str, str]:
    """The settings this broker runs with, by RocketMQ's names (the BrokerConfig and
    MessageStoreConfig keys rocketstore has, the address and the store root)."""
    host, port = parse_host(ctx.broker_addr)
    settings = {"brokerIP1": host, "listenPort": str(port), "storePathRootDir": ctx.store.root}
    for key, name in camel_keys(ctx.config, BROKER_ALIASES).items():
        settings[key] = java_text(getattr(ctx.config, name))
    if ctx.config.inner_client_authentication_credentials:
        settings["innerClientAuthenticationCredentials"] = "******"  # a secret
    for key, name in STORE_KEYS.items():
        settings[key] = java_text(getattr(ctx.store.config, name))
    return settings


async def get_broker_config(
    ctx: BrokerContext, cmd: RemotingCommand, conn: Peer
) -> RemotingCommand:
    """The settings as Java properties text (``key=value`` lines, as MixAll.properties2String
    writes them); the ``version`` field is the configuration's data version, bumped by
    each updateBrokerConfig."""
    text = "".join(f"{key}={value}\n" for key, value in sorted(broker_settings(ctx).items()))
    version = json.dumps(ctx.config_version.to_json(), separators=(",", ":"))
    return cmd.response(ResponseCode.SUCCESS, None, {"version": version}, text.encode("utf-8"))


async def update_broker_config(
    ctx: BrokerContext, cmd: RemotingCommand, conn: Peer
) -> RemotingCommand:
    """Change settings of the running broker (module ``config_update``): all the request's
    keys or none; written into the -c broker.conf first."""
    if not cmd.body:
        return cmd.response(ResponseCode.SUCCESS)
    try:
        properties = parse_java_properties(cmd.body.decode("utf-8"))
    except (UnicodeDecodeError, ConfigError) as e:
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"string2Properties error: {e}")
    listed = black_listed(properties, ctx.config.config_black_list)
    if listed:
        log.warning("updateBrokerConfig from %s refused: black-listed %s", conn.peer, listed)
        return cmd.response(ResponseCode.NO_PERMISSION, "Can not update config in black list.")
    change = config_update.plan(properties, ctx.config, ctx.store.config)
    if ctx.settings_path:
        try:
            config_update.persist(ctx.settings_path, change)
        except OSError as e:
            return cmd.response(
                ResponseCode.SYSTEM_ERROR,
                f"cannot write {ctx.settings_path}: {e.strerror or e}; nothing was changed",
            )
    config_update.apply(ctx, change)
    log.info(
        "updateBrokerConfig from %s: %s%s",
        conn.peer,
        ", ".join(f"{k}={v}" for k, v in change.text.items()),
        "" if ctx.settings_path else " (not written to a file: the broker was started without -c)",
    )
    return cmd.response(ResponseCode.SUCCESS)
