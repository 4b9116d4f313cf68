"""PULL_MESSAGE (11), with long polling.

Layer: broker processors. Reads through the store's getMessage rules and maps its status to
RocketMQ's response codes; a pull that finds nothing new and allows suspending is held
until a message reaches its queue (``BrokerContext.waiters``) or its suspend time ends, then
answered with what is there.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from rocketstore.broker.codes import ResponseCode
from rocketstore.broker.context import MAX_SUSPEND_MS, BrokerContext
from rocketstore.broker.perm_name import is_readable
from rocketstore.broker.remoting import RemotingCommand, ext_int, ext_str
from rocketstore.broker.request_tasks import parked
from rocketstore.broker.subscription_groups import SubscriptionGroupConfig
from rocketstore.broker.topic_config import retry_topic
from rocketstore.errors import ConfigError, SelectorError
from rocketstore.format import properties as props
from rocketstore.format.selector import SQL92, TAG, compile_selector
from rocketstore.format.subscription import Subscription, build_subscription
from rocketstore.read_path import TOTAL_PHYSICAL_MEMORY, GetResult, PulledRecords
from rocketstore.remoting.peer import Peer
from rocketstore.status import GetStatus

log = logging.getLogger(__name__)

# FAQUrl.suggestTodo(SAME_GROUP_DIFFERENT_TOPIC), which RocketMQ appends to these remarks.
FAQ_TIP = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
# PullSysFlag bits.
FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4
FLAG_CLASS_FILTER = 0x8
MASTER_ID = 0  # MixAll.MASTER_ID

STATUS_CODES = {
    GetStatus.FOUND: ResponseCode.SUCCESS,
    GetStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetStatus.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetStatus.OFFSET_FOUND_NULL: ResponseCode.PULL_NOT_FOUND,
    GetStatus.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    GetStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
    GetStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
    GetStatus.NO_MATCHED_LOGIC_QUEUE: ResponseCode.PULL_NOT_FOUND,
}


@dataclass
class PullHeader:
    group: str
    topic: str
    queue_id: int
    queue_offset: int
    max_msg_nums: int
    sys_flag: int
    commit_offset: int
    suspend_timeout_ms: int
    subscription: str | None
    expression_type: str
    sub_version: int

    @classmethod
    def parse(cls, ext: dict[str, str]) -> PullHeader:
        return cls(
            group=ext_str(ext, "consumerGroup"),
            topic=ext_str(ext, "topic"),
            queue_id=ext_int(ext, "queueId"),
            queue_offset=ext_int(ext, "queueOffset"),
            max_msg_nums=ext_int(ext, "maxMsgNums", 32),
            sys_flag=ext_int(ext, "sysFlag", 0),
            commit_offset=ext_int(ext, "commitOffset", 0),
            suspend_timeout_ms=ext_int(ext, "suspendTimeoutMillis", 15_000),
            subscription=ext.get("subscription"),
            expression_type=ext.get("expressionType", TAG),
            sub_version=ext_int(ext, "subVersion", 0),
        )


def response_code(result: GetResult | PulledRecords, queue_offset: int) -> int:
    if result.status is GetStatus.NO_MESSAGE_IN_QUEUE:
        # An empty queue: "not found" at 0, otherwise the client's offset is wrong.
        return ResponseCode.PULL_NOT_FOUND if queue_offset == 0 else ResponseCode.PULL_OFFSET_MOVED
    return STATUS_CODES[result.status]


@dataclass(frozen=True)
class Refusal:
    code: int
    remark: str


def _registered(ctx: BrokerContext, group: str, topic: str) -> tuple[str | None, str]:
    """The expression and its type the group's heartbeats subscribed ``topic`` with."""
    return _expression(ctx.clients.subscription(group, topic))


def _expression(data: Mapping[str, Any] | None) -> tuple[str | None, str]:
    """A heartbeat's subscription data as (expression, type); (None, TAG) without one."""
    if data is None or not isinstance(data.get("subString"), str):
        return None, TAG
    return str(data["subString"]), str(data.get("expressionType") or TAG)


def _subscription_of(
    ctx: BrokerContext, header: PullHeader
) -> tuple[str | None, str, bool] | Refusal:
    """The expression and type to pull with, and whether they are the heartbeat's: the
    request's when it carries one (sysFlag bit 4: pull consumers; Java push consumers only
    with postSubscriptionWhenPull), else the subscription the group's heartbeats
    registered. Without one, RocketMQ's refusals: no heartbeat of the group yet, no
    subscription of the topic, or an older one than the client pulls with (the client
    tries again a moment later, after its heartbeat)."""
    if header.sys_flag & FLAG_SUBSCRIPTION:
        return header.subscription, header.expression_type or TAG, False
    if ctx.clients.consumer_group(header.group) is None:
        return Refusal(
            ResponseCode.SUBSCRIPTION_NOT_EXIST, "the consumer's group info not exist" + FAQ_TIP
        )
    data = ctx.clients.subscription(header.group, header.topic)
    expression, kind = _expression(data)
    if data is None or expression is None:
        return Refusal(
            ResponseCode.SUBSCRIPTION_NOT_EXIST, "the consumer's subscription not exist" + FAQ_TIP
        )
    registered_version = data.get("subVersion")
    if str(registered_version).lstrip("-").isdigit() and int(str(registered_version)) < (
        header.sub_version
    ):
        return Refusal(
            ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest"
        )
    return expression, kind, True


@dataclass(frozen=True)
class RetrySelector:
    """RocketMQ's ExpressionForRetryMessageFilter (``filterSupportRetry``): a message in a
    group's %RETRY% topic passes only if the group's SQL92 selector for the topic it was
    first sent to (its RETRY_TOPIC property) selects it; without one it passes."""

    ctx: BrokerContext
    group: str

    def matches(self, properties: Mapping[str, str]) -> bool:
        topic = properties.get(props.RETRY_TOPIC)
        if topic is None:
            return True
        expression, kind = _registered(self.ctx, self.group, topic)
        if expression is None or kind.upper() != SQL92:
            return True
        try:
            selector = compile_selector(expression)
        except SelectorError:
            return True  # RocketMQ keeps no filter for an expression that did not parse
        return selector.matches(properties)


def _build(ctx: BrokerContext, header: PullHeader, conn: Peer | None) -> Subscription | Refusal:
    """The subscription this pull reads with, or the error reply (RocketMQ's order: a
    non-TAG type on a broker without enablePropertyFilter is refused before parsing).
    ``conn`` None: a refused expression is not logged (pull_fast's try, which leaves the
    frame to this path, which logs it)."""
    chosen = _subscription_of(ctx, header)
    if isinstance(chosen, Refusal):
        return chosen
    expression, kind, registered = chosen
    if kind.upper() not in ("", TAG) and not ctx.config.enable_property_filter:
        return Refusal(
            ResponseCode.SYSTEM_ERROR,
            f"The broker does not support consumer to filter message by {kind}",
        )
    try:
        subscription = build_subscription(expression, kind)
    except ConfigError as e:
        if conn is None:
            return Refusal(ResponseCode.SYSTEM_ERROR, str(e))
        log.warning(
            "consumer %s of group %s: subscription %r (%s) of topic %s refused: %s",
            conn.peer,
            header.group,
            expression,
            kind,
            header.topic,
            e,
        )
        if registered:
            # RocketMQ kept no filter for the heartbeat's selector: its own words.
            return Refusal(
                ResponseCode.FILTER_DATA_NOT_EXIST,
                "The broker's consumer filter data is not exist!Your expression may be wrong!",
            )
        return Refusal(
            ResponseCode.SUBSCRIPTION_PARSE_FAILED,
            f"parse the consumer's subscription[{expression}] failed, group: {header.group}: {e}",
        )
    if ctx.config.filter_support_retry and header.topic == retry_topic(header.group):
        # The retry topic's own subscription keeps its tag check on the queue units; the
        # records are judged by the original topic's selector instead, as RocketMQ does.
        return replace(subscription, selector=RetrySelector(ctx, header.group))
    return subscription


def _read(ctx: BrokerContext, header: PullHeader, subscription: Subscription) -> PulledRecords:
    """The answer's status, offsets and body: the found records' stored bytes back to back,
    as RocketMQ's broker sends them (a pull for every tag decodes no message)."""
    max_count = max(1, header.max_msg_nums)
    return ctx.store.get_matching_records(
        header.group, header.topic, header.queue_id, header.queue_offset, max_count, subscription
    )


def _in_memory(ctx: BrokerContext) -> bool:
    """Whether every record counts as in memory by RocketMQ's rule (within
    accessMessageInMemoryMaxRatio % of RAM of the CommitLog's end): such a pull reads on
    the event loop, as cheap as a send's copy, instead of hopping to a worker thread and
    back (about 30 % of a pull). A bigger CommitLog's reads may wait for the disk, so
    they stay off the loop."""
    memory = TOTAL_PHYSICAL_MEMORY * ctx.store.config.access_message_in_memory_max_ratio / 100
    return ctx.store.max_commit_log_offset() - ctx.store.min_commit_log_offset() <= memory


async def _read_pulled(
    ctx: BrokerContext, header: PullHeader, subscription: Subscription
) -> PulledRecords:
    if _in_memory(ctx):
        return _read(ctx, header, subscription)
    return await ctx.run(_read, ctx, header, subscription)


def suggested_broker_id(
    ctx: BrokerContext, group_config: SubscriptionGroupConfig, result: PulledRecords
) -> int:
    """Where the consumer should pull next, PullMessageProcessor's last word (4.9.8): with
    slaveReadEnable, the group's whichBrokerWhenConsumeSlowly when the store's verdict
    says the pulled messages are past accessMessageInMemoryMaxRatio of RAM behind the
    CommitLog end, else the group's brokerId; without it, the master (0), on a slave too
    (its PULL_RETRY_IMMEDIATELY there is overwritten by the status's code)."""
    if not ctx.config.slave_read_enable:
        return MASTER_ID
    if result.suggest_pulling_from_slave:
        return group_config.which_broker_when_consume_slowly
    return group_config.broker_id


def check_pull(
    ctx: BrokerContext, header: PullHeader, peer: str
) -> SubscriptionGroupConfig | Refusal:
    """The pull's group config, or RocketMQ's refusal of it (in PullMessageProcessor's
    order): a broker not readable, an unknown or disabled group, an unknown or unreadable
    topic, a queue id out of range."""
    if not is_readable(ctx.config.broker_permission):
        return Refusal(
            ResponseCode.NO_PERMISSION,
            f"the broker[{ctx.broker_host}] pulling message is forbidden",
        )
    group_config = ctx.groups.find(header.group)
    if group_config is None:
        return Refusal(
            ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
            f"subscription group [{header.group}] does not exist",
        )
    if not group_config.consume_enable:
        return Refusal(
            ResponseCode.NO_PERMISSION, f"subscription group no permission, {header.group}"
        )
    config = ctx.topics.peek(header.topic)
    if config is None:
        return Refusal(
            ResponseCode.TOPIC_NOT_EXIST,
            f"topic[{header.topic}] not exist, apply first please!",
        )
    if not config.readable:
        return Refusal(
            ResponseCode.NO_PERMISSION, f"the topic[{header.topic}] pulling message is forbidden"
        )
    if not 0 <= header.queue_id < config.read_queue_nums:
        return Refusal(
            ResponseCode.SYSTEM_ERROR,
            f"queueId[{header.queue_id}] is illegal, topic:[{header.topic}] "
            f"topicConfig.readQueueNums:[{config.read_queue_nums}] consumer:[{peer}]",
        )
    return group_config


def commit_carried_offset(ctx: BrokerContext, header: PullHeader) -> None:
    """The consumer's progress that rides on the pull (sysFlag bit 1), stored."""
    if header.sys_flag & FLAG_COMMIT_OFFSET and header.commit_offset >= 0:
        ctx.offsets.commit(header.group, header.topic, header.queue_id, header.commit_offset)


def answer_fields(
    ctx: BrokerContext, group_config: SubscriptionGroupConfig, result: PulledRecords
) -> dict[str, object]:
    """The answer's extFields, in RocketMQ's order."""
    return {
        "nextBeginOffset": result.next_begin_offset,
        "minOffset": result.min_offset,
        "maxOffset": result.max_offset,
        "suggestWhichBrokerId": suggested_broker_id(ctx, group_config, result),
    }


def record_found(
    ctx: BrokerContext, header: PullHeader, result: PulledRecords, begin_ns: int
) -> None:
    """A found pull counted in the stats (GROUP_GET_NUMS, _SIZE, _LATENCY...)."""
    took_ms = (time.monotonic_ns() - begin_ns) // 1_000_000
    ctx.stats.pulled(
        header.group,
        header.topic,
        result.count,
        len(result.body),
        header.queue_id,
        result.next_begin_offset,
        took_ms,
    )


async def pull_message(ctx: BrokerContext, cmd: RemotingCommand, conn: Peer) -> RemotingCommand:
    begin_ns = time.monotonic_ns()  # GROUP_GET_LATENCY's start (a woken pull's: its wakeup)
    header = PullHeader.parse(cmd.ext_fields)
    group_config = check_pull(ctx, header, conn.peer)
    if isinstance(group_config, Refusal):
        return cmd.response(group_config.code, group_config.remark)
    # The consumer's progress rides on the pull; stored before any hold, as RocketMQ does.
    commit_carried_offset(ctx, header)
    subscription = _build(ctx, header, conn)
    if isinstance(subscription, Refusal):
        return cmd.response(subscription.code, subscription.remark)
    result = await _read_pulled(ctx, header, subscription)
    code = response_code(result, header.queue_offset)
    if code != ResponseCode.SUCCESS:
        ctx.stats.missed.add(1)
    if code == ResponseCode.PULL_NOT_FOUND and header.sys_flag & FLAG_SUSPEND:
        # Hold the pull; answer as soon as the queue grows past the asked offset.
        timeout_ms = header.suspend_timeout_ms if ctx.long_polling_enable else ctx.short_polling_ms
        timeout_ms = max(0, min(timeout_ms, MAX_SUSPEND_MS))

        def has_new() -> bool:
            return ctx.store.max_offset(header.topic, header.queue_id) > header.queue_offset

        async with parked():  # held, the pull lets its connection's other reads run
            found_new = await ctx.waiters.wait(
                (header.topic, header.queue_id), has_new, timeout_ms / 1000
            )
        if found_new:
            begin_ns = time.monotonic_ns()
            result = await _read_pulled(ctx, header, subscription)
            code = response_code(result, header.queue_offset)
        # RocketMQ reads again after a hold, woken or timed out: a second miss if empty.
        if code != ResponseCode.SUCCESS:
            ctx.stats.missed.add(1)
    ext = answer_fields(ctx, group_config, result)
    if code != ResponseCode.SUCCESS:
        remark = result.status.value
        return cmd.response(code, remark, ext)
    record_found(ctx, header, result, begin_ns)
    return cmd.response(code, "FOUND", ext, result.body)
