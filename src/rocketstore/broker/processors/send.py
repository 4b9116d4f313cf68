"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320).

Layer: broker processors. Checks the topic (creating it from TBW102 when the client asks
and auto-creation is on), routes retries past their limit to the group's DLQ, stores the
message with the client's address as born host and answers msgId/queueId/queueOffset.
"""

from __future__ import annotations

import os
import random
from collections.abc import Mapping
from dataclasses import dataclass

from rocketstore.broker.codes import ResponseCode
from rocketstore.broker.context import BrokerContext
from rocketstore.broker.perm_name import PERM_READ, PERM_WRITE, is_writeable
from rocketstore.broker.processors.message_batch import BatchColumns, decode_batch_columns
from rocketstore.broker.remoting import (
    RemotingCommand,
    ext_bool,
    ext_int,
    ext_java_int,
    ext_str,
)
from rocketstore.broker.topic_config import (
    MULTI_TAG,
    TopicConfig,
    dlq_topic,
    topic_name_problem,
)
from rocketstore.broker.transaction import half_message, half_message_properties, is_transactional
from rocketstore.config import parse_host
from rocketstore.format import properties as props
from rocketstore.format import sysflag
from rocketstore.format.javahash import java_hashmap_ordered
from rocketstore.format.message import Message
from rocketstore.format.multi_dispatch import is_multi_dispatch
from rocketstore.format.record import END_FILE_MIN_BLANK_LENGTH, MAX_PROPERTIES_LENGTH
from rocketstore.java_ints import JAVA_INT_MAX, JAVA_INT_MIN, fits_java_long
from rocketstore.paths import CONSUME_QUEUE_DIR, NOT_ALLOWED_SEND_TOPICS, RETRY_PREFIX, index_dir
from rocketstore.put_columns import ColumnsResult
from rocketstore.put_path import PutResult, delay_level, is_delayed
from rocketstore.remoting.peer import Peer
from rocketstore.services.retention import disk_usage_ratio
from rocketstore.status import PutStatus
from rocketstore.store import MessageStore
from rocketstore.store.timer import (
    WHEEL_OFF_REMARK,
    TimerRefusal,
    is_timer_message,
    timer_message_to_store,
)

# SendMessageRequestHeaderV2's one-letter names (a compact header for every send).
V2_NAMES = {
    "a": "producerGroup",
    "b": "topic",
    "c": "defaultTopic",
    "d": "defaultTopicQueueNums",
    "e": "queueId",
    "f": "sysFlag",
    "g": "bornTimestamp",
    "h": "flag",
    "i": "properties",
    "j": "reconsumeTimes",
    "k": "unitMode",
    "l": "maxReconsumeTimes",
    "m": "batch",
    "n": "brokerName",
}

_V2_LONG_NAMES = frozenset(V2_NAMES.values())

PUT_STATUS_CODES = {
    PutStatus.PUT_OK: ResponseCode.SUCCESS,
    PutStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    PutStatus.FLUSH_SLAVE_TIMEOUT: ResponseCode.FLUSH_SLAVE_TIMEOUT,
    PutStatus.SLAVE_NOT_AVAILABLE: ResponseCode.SLAVE_NOT_AVAILABLE,
    PutStatus.MESSAGE_ILLEGAL: ResponseCode.MESSAGE_ILLEGAL,
    PutStatus.PROPERTIES_SIZE_EXCEEDED: ResponseCode.MESSAGE_ILLEGAL,
    PutStatus.SERVICE_NOT_AVAILABLE: ResponseCode.SERVICE_NOT_AVAILABLE,
}


@dataclass
class SendHeader:
    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: int
    queue_id: int
    sys_flag: int
    born_timestamp: int
    flag: int
    properties: str
    reconsume_times: int
    unit_mode: bool
    max_reconsume_times: int | None

    @classmethod
    def parse(cls, ext: dict[str, str]) -> SendHeader:
        if ext.keys().isdisjoint(_V2_LONG_NAMES):
            fast = cls._parse_v2_plain(ext)
            if fast is not None:
                return fast
        if "topic" not in ext and "producerGroup" not in ext:  # the V2 header's letters
            ext = {V2_NAMES.get(k, k): v for k, v in ext.items()}
        max_times = ext.get("maxReconsumeTimes")
        # The header's @CFNotNull fields (a to h) have no default: a Java broker refuses a
        # request without one ("the custom field <...> is null") rather than store a
        # message with a made-up born time or flag.
        return cls(
            producer_group=ext_str(ext, "producerGroup"),
            topic=ext_str(ext, "topic"),
            default_topic=ext_str(ext, "defaultTopic"),
            # SendMessageRequestHeader's Integer fields (bornTimestamp is a Long).
            default_topic_queue_nums=ext_java_int(ext, "defaultTopicQueueNums"),
            queue_id=ext_java_int(ext, "queueId"),
            sys_flag=ext_java_int(ext, "sysFlag"),
            born_timestamp=ext_int(ext, "bornTimestamp"),
            flag=ext_java_int(ext, "flag"),
            properties=ext.get("properties", ""),
            reconsume_times=ext_java_int(ext, "reconsumeTimes", 0),
            unit_mode=ext_bool(ext, "unitMode"),
            max_reconsume_times=None if not max_times else ext_java_int(ext, "maxReconsumeTimes"),
        )

    @classmethod
    def _parse_v2_plain(cls, ext: dict[str, str]) -> SendHeader | None:
        """A V2 header whose fields are all there and plain numbers, read by their letters
        without renaming them first (what every Java producer sends); None for anything
        else, which the general path then reads (and refuses with its own words)."""
        try:
            queue_nums, queue_id = int(ext["d"]), int(ext["e"])
            sys_flag, born, flag = int(ext["f"]), int(ext["g"]), int(ext["h"])
            times = ext.get("j")
            reconsume = 0 if times is None or times == "" else int(times)
            max_times = ext.get("l")
            max_reconsume = None if not max_times else int(max_times)
            header = cls(
                producer_group=ext["a"],
                topic=ext["b"],
                default_topic=ext["c"],
                default_topic_queue_nums=queue_nums,
                queue_id=queue_id,
                sys_flag=sys_flag,
                born_timestamp=born,
                flag=flag,
                properties=ext.get("i", ""),
                reconsume_times=reconsume,
                unit_mode=ext.get("k") == "true",
                max_reconsume_times=max_reconsume,
            )
        except (KeyError, ValueError):
            return None
        if ext.get("k") not in (None, "", "true", "false") or not fits_java_long(born):
            return None
        ints = (queue_nums, queue_id, sys_flag, flag, reconsume)
        if not all(JAVA_INT_MIN <= n <= JAVA_INT_MAX for n in ints):
            return None
        if max_reconsume is not None and not JAVA_INT_MIN <= max_reconsume <= JAVA_INT_MAX:
            return None
        return header


def _error(cmd: RemotingCommand, code: int, remark: str) -> RemotingCommand:
    return cmd.response(code, remark)


def check_topic(
    ctx: BrokerContext, cmd: RemotingCommand, header: SendHeader
) -> TopicConfig | RemotingCommand:
    """SendMessageProcessor.msgCheck: the topic's config, or the error response."""
    topic = header.topic
    # A drained broker still takes sends the name servers' routes no longer lead to,
    # except for order topics, whose queues must not move (RocketMQ's msgCheck).
    if not is_writeable(ctx.config.broker_permission) and ctx.topics.is_order_topic(topic):
        return _error(
            cmd,
            ResponseCode.NO_PERMISSION,
            f"the broker[{ctx.broker_host}] sending message is forbidden",
        )
    problem = topic_name_problem(topic)
    if problem is not None:
        return _error(cmd, ResponseCode.SYSTEM_ERROR, problem)
    if topic in NOT_ALLOWED_SEND_TOPICS:
        return _error(
            cmd, ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden."
        )
    config = ctx.topics.peek(topic)
    if config is None:
        created = topic not in ctx.topics
        config = ctx.topics.create_on_send(
            topic, header.default_topic, header.default_topic_queue_nums
        )
        if config is None and topic.startswith(RETRY_PREFIX):
            config = ctx.topics.create_on_send_back(topic, 1, PERM_READ | PERM_WRITE)
        if config is None:
            return _error(
                cmd, ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!"
            )
        if created:
            ctx.topics_changed()
    if not config.writeable:
        return _error(
            cmd,
            ResponseCode.NO_PERMISSION,
            f"the topic[{topic}] sending message is forbidden",
        )
    if header.queue_id >= max(config.read_queue_nums, config.write_queue_nums):
        return _error(
            cmd,
            ResponseCode.SYSTEM_ERROR,
            f"request queueId[{header.queue_id}] is illegal, {config.describe()} "
            f"Producer: {cmd.ext_fields.get('a', cmd.ext_fields.get('producerGroup', ''))}",
        )
    return config


def _queue_for(config: TopicConfig, queue_id: int) -> int | None:
    """The queue a send goes to: the asked one, or a random write queue for a negative
    id; None when the topic has no write queue to pick (a Java broker fails the send on
    its division by zero; a message stored in queue 0 of it could never be pulled)."""
    if queue_id >= 0:
        return queue_id
    if config.write_queue_nums <= 0:
        return None
    return random.randrange(config.write_queue_nums)


def _no_write_queue(cmd: RemotingCommand, config: TopicConfig) -> RemotingCommand:
    return cmd.response(
        ResponseCode.SYSTEM_ERROR,
        f"topic[{config.topic_name}] has no write queue to send to, {config.describe()}",
    )


def _retry_target(
    ctx: BrokerContext, header: SendHeader, topic: str, queue_id: int
) -> tuple[str, int] | str:
    """handleRetryAndDLQ: a retry message past its max reconsume times goes to the DLQ;
    the refusal's remark when the group has no config."""
    if not topic.startswith(RETRY_PREFIX):
        return topic, queue_id
    group = topic[len(RETRY_PREFIX) :]
    group_config = ctx.groups.find(group)
    if group_config is None:
        return f"subscription group not exist, {group}"
    max_times = header.max_reconsume_times
    if max_times is None:
        max_times = group_config.retry_max_times
    if header.reconsume_times < max_times:
        return topic, queue_id
    if dlq_topic(group) not in ctx.topics:
        ctx.topics.create_on_send_back(dlq_topic(group), 1, PERM_READ | PERM_WRITE)
        ctx.topics_changed()
    return dlq_topic(group), 0


def put_failure_remark(result: PutResult, ctx: BrokerContext) -> str:
    """handlePutMessageResult's words for a refused put: an illegal message's name the
    limits (a Java broker names its defaults), then what the store found wrong."""
    why = result.reason or result.status.value
    if result.status in (PutStatus.MESSAGE_ILLEGAL, PutStatus.PROPERTIES_SIZE_EXCEEDED):
        return (
            "the message is illegal, maybe msg body or properties length not matched. "
            f"msg body length limit {ctx.store.config.max_message_size}B, "
            f"msg properties length limit {MAX_PROPERTIES_LENGTH}B. ({why})"
        )
    if result.status is PutStatus.SERVICE_NOT_AVAILABLE:
        return (
            "service not available now. It may be caused by one of the following reasons: "
            f"the broker's disk is full [{disk_util(ctx.store)}], messages are put to the "
            f"slave, message store has been shut down, etc. ({why})"
        )
    words = _REFUSAL_WORDS.get(result.status)
    if words is None:
        return result.reason or f"put message failed: {why}"
    return f"{words} ({result.reason})" if result.reason else words


# handlePutMessageResult's remarks for the other refusals (a store's reason follows).
_REFUSAL_WORDS = {
    PutStatus.CREATE_MAPEDFILE_FAILED: "create mapped file failed, server is busy or broken.",
    PutStatus.OS_PAGECACHE_BUSY: "[PC_SYNCHRONIZED]broker busy, start flow control for a while",
    PutStatus.LMQ_CONSUME_QUEUE_NUM_EXCEEDED: (
        "[LMQ_CONSUME_QUEUE_NUM_EXCEEDED]broker config enableLmq and enableMultiDispatch, lmq "
        "consumeQueue num exceed maxLmqConsumeQueueNum config num, default limit 2w."
    ),
    PutStatus.UNKNOWN_ERROR: "UNKNOWN_ERROR",
}


def disk_util(store: MessageStore) -> str:
    """SendMessageProcessor.diskUtil: the used share of the disks of the CommitLog (the
    least of its directories'), the consume queues and the index files."""
    commit_log = min([100.0, *(disk_usage_ratio(d) for d in store.commitlog_dirs.writable)])
    queues = disk_usage_ratio(os.path.join(store.root, CONSUME_QUEUE_DIR))
    index = disk_usage_ratio(index_dir(store.root))
    return f"CL: {commit_log:5.2f} CQ: {queues:5.2f} INDEX: {index:5.2f}"


def put_response(
    cmd: RemotingCommand,
    results: list[PutResult],
    queue_id: int,
    ctx: BrokerContext,
    topic: str,
    transaction_id: str | None = None,
) -> RemotingCommand:
    """The send's answer; a stored send counts in ``topic``'s put statistics.
    ``transaction_id``: the message's UNIQ_KEY, which a 5.x broker returns on every send
    (``SendResult.getTransactionId``; 4.9 clients read the same header field)."""
    first = results[0]
    code = PUT_STATUS_CODES.get(first.status, ResponseCode.SYSTEM_ERROR)
    if not first.status.stored:
        remark = put_failure_remark(first, ctx)
        return cmd.response(code, remark)
    last = results[-1]  # a batch is written in one piece: its bytes end at its last's end
    ctx.stats.stored(
        topic, len(results), last.commit_log_offset + last.size - first.commit_log_offset
    )
    ext = stored_answer_fields(
        ",".join(r.msg_id for r in results), queue_id, first.queue_offset, transaction_id
    )
    return cmd.response(code, None, ext)


def stored_answer_fields(
    msg_id: str, queue_id: int, queue_offset: int, transaction_id: str | None
) -> dict[str, str]:
    """The extFields of a stored send's answer (SendMessageResponseHeader, in the order
    RocketMQ's answers carry them)."""
    ext = {  # strings already: the answer takes them as they are
        "msgId": msg_id,
        "queueId": str(queue_id),
        "queueOffset": str(queue_offset),
        "MSG_REGION": "DefaultRegion",
        "TRACE_ON": "true",
    }
    if transaction_id:
        ext["transactionId"] = transaction_id
    return ext


def asks_for_timer(properties: dict[str, str], topic: str) -> bool:
    """A RocketMQ 5.x timer message (HookUtils.checkIfTimerMessage): a delivery time or
    delay without a delay level, not one the timer has rolled already."""
    if (delay_level(properties) or 0) > 0:
        return False  # the level wins (5.x drops the timer properties)
    return is_timer_message(properties, topic)


# The answer of a 5.x broker whose timer wheel is off (timerWheelEnable=false): storing
# such a message as a plain one would deliver it at once, against what was asked.
TIMER_REFUSED = WHEEL_OFF_REMARK


def timer_stored(ctx: BrokerContext, message: Message) -> Message | TimerRefusal:
    """A timer send as the store keeps it (HookUtils.transformTimerMessage): into
    rmq_sys_wheel_timer for the timer store (``rocketstore.store.timer``) to deliver when
    due, as it is when its time has passed, or refused."""
    return timer_message_to_store(ctx.store.config, message)


def stored_properties(
    request_properties: Mapping[str, str], cluster_name: str, *, keep_wait: bool = False
) -> dict[str, str]:
    """The properties a plain send hands the store, from the request's (in the request
    string's order): SendMessageProcessor puts CLUSTER into the decoded HashMap and
    writes its properties string without WAIT (WAIT=true only asks for an answer after
    storing), so in the iteration order of that map, sized by its peak.

    It then puts WAIT back into the map, last: a store that re-serialises the map (the
    delay rewrite, the multi-dispatch wrap) sees WAIT there. ``keep_wait`` is for those
    messages: WAIT stays, moved behind every other name, which decides its place among
    names of its bucket (DELAY shares it in tables of 16 and 32 slots)."""
    properties = {**request_properties, props.CLUSTER: cluster_name}
    peak = len(properties)
    wait = properties.pop(props.WAIT, None)
    if keep_wait and wait is not None:
        properties[props.WAIT] = wait  # origProps.put(WAIT, value) after the remove
    return java_hashmap_ordered(properties, peak_size=peak)


async def send_message(ctx: BrokerContext, cmd: RemotingCommand, conn: Peer) -> RemotingCommand:
    header = SendHeader.parse(cmd.ext_fields)
    checked = check_topic(ctx, cmd, header)
    if isinstance(checked, RemotingCommand):
        return checked
    config = checked
    queue_id = _queue_for(config, header.queue_id)
    if queue_id is None:
        return _no_write_queue(cmd, config)
    target = _retry_target(ctx, header, header.topic, queue_id)
    if isinstance(target, str):
        return cmd.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, target)
    topic, queue_id = target
    # A DELAY the producer sent stays even on the way to the DLQ: RocketMQ 4.9.8's
    # handleRetryAndDLQ clears the level on a properties map that the request's own
    # properties then replace, so the store's delay rewrite schedules the message and the
    # schedule service delivers it to the DLQ when due.
    properties = props.decode_properties_str(header.properties)
    sys_flag = header.sys_flag
    if config.topic_filter_type == MULTI_TAG:
        sys_flag |= sysflag.MULTI_TAGS_FLAG
    if is_transactional(properties):
        # RocketMQ goes by the TRAN_MSG property, not by the sys flag.
        return await _send_half(ctx, cmd, conn, header, properties, sys_flag, topic, queue_id)
    timer = asks_for_timer(properties, topic)
    if timer and not ctx.store.config.timer_wheel_enable:
        return cmd.response(ResponseCode.SYSTEM_ERROR, TIMER_REFUSED)
    # A multi-dispatch message keeps WAIT in its map: the store's wrap adds the queue
    # offsets to that map (WAIT counts in its size) and leaves WAIT out. A delayed one
    # keeps it too: the store's delay rewrite writes the whole map, WAIT included.
    keep_wait = (
        ctx.store.config.enable_multi_dispatch and is_multi_dispatch(properties)
    ) or is_delayed(properties, sys_flag)
    # A timer message too: the broker's rewrite writes the map, WAIT included.
    keep_wait = keep_wait or timer
    message = Message(
        topic=topic,
        body=cmd.body,
        queue_id=queue_id,
        flag=header.flag,
        sys_flag=sys_flag,
        properties=stored_properties(properties, ctx.cluster_name, keep_wait=keep_wait),
        born_timestamp=header.born_timestamp,
        born_host=conn.peer,
        reconsume_times=header.reconsume_times,
    )
    if timer:
        stored = timer_stored(ctx, message)
        if isinstance(stored, TimerRefusal):
            code = ResponseCode.SYSTEM_ERROR if stored.wheel_off else ResponseCode.MESSAGE_ILLEGAL
            return cmd.response(code, stored.remark)
        message = stored
    result = await ctx.put(message, len(message.body))
    uniq_key = properties.get(props.UNIQ_KEY)
    return put_response(cmd, [result], queue_id, ctx, topic, uniq_key)


async def _send_half(
    ctx: BrokerContext,
    cmd: RemotingCommand,
    conn: Peer,
    header: SendHeader,
    properties: dict[str, str],
    sys_flag: int,
    topic: str,
    queue_id: int,
) -> RemotingCommand:
    """A transactional message: stored as a half message until the producer ends it
    (TransactionalMessageBridge.parseHalfMessageInner). The answer names the half
    message (its offset msgId and its queue offset in the half queue, which the producer
    sends back in END_TRANSACTION) and the queue the producer asked for."""
    if ctx.config.reject_transaction_message:
        host, _port = parse_host(ctx.broker_addr)
        return cmd.response(
            ResponseCode.NO_PERMISSION,
            f"the broker[{host}] sending transaction message is forbidden",
        )
    half = half_message(
        body=cmd.body,
        flag=header.flag,
        sys_flag=sys_flag,
        properties=half_message_properties(properties, ctx.cluster_name, topic, queue_id),
        born_timestamp=header.born_timestamp,
        born_host=conn.peer,
        reconsume_times=header.reconsume_times,
    )
    result = await ctx.put(half, len(half.body))
    uniq_key = properties.get(props.UNIQ_KEY)
    return put_response(cmd, [result], queue_id, ctx, half.topic, uniq_key)


async def send_batch(ctx: BrokerContext, cmd: RemotingCommand, conn: Peer) -> RemotingCommand:
    header = SendHeader.parse(cmd.ext_fields)
    checked = check_topic(ctx, cmd, header)
    if isinstance(checked, RemotingCommand):
        return checked
    if header.topic.startswith(RETRY_PREFIX):
        return cmd.response(
            ResponseCode.MESSAGE_ILLEGAL, "batch request does not support retry group"
        )
    queue_id = _queue_for(checked, header.queue_id)
    if queue_id is None:
        return _no_write_queue(cmd, checked)
    batch_text = batch_properties_text(header.properties, ctx.cluster_name)
    sys_flag = header.sys_flag
    if checked.topic_filter_type == MULTI_TAG:
        sys_flag |= sysflag.MULTI_TAGS_FLAG
    columns = decode_batch_columns(cmd.body, batch_text)
    if not columns:
        return cmd.response(ResponseCode.MESSAGE_ILLEGAL, "the batch holds no message")
    if _one_columns_batch(ctx, len(cmd.body), columns, header.topic, batch_text):
        put = await ctx.put_batch_columns(
            header.topic,
            columns.bodies,
            flags=columns.flags,
            property_texts=columns.texts,
            queue_id=queue_id,
            sys_flag=sys_flag,
            born_timestamp=header.born_timestamp,
            born_host=conn.peer,
            reconsume_times=header.reconsume_times,
            body_bytes=columns.body_bytes,
        )
        if put is not None:
            return _columns_response(cmd, *put, queue_id, ctx, header.topic)
    # The general path (and the definition of the one above): a Message per entry.
    messages = [
        Message(
            topic=header.topic,
            body=body,
            queue_id=queue_id,
            flag=flag,
            sys_flag=sys_flag,
            properties=props.VerbatimProperties(text),
            born_timestamp=header.born_timestamp,
            born_host=conn.peer,
            reconsume_times=header.reconsume_times,
        )
        for body, flag, text in zip(columns.bodies, columns.flags, columns.texts, strict=True)
    ]
    results = await ctx.put_batch(messages, columns.body_bytes)
    return put_response(cmd, results, queue_id, ctx, header.topic)


def batch_properties_text(header_properties: str, cluster_name: str) -> str:
    """What a batch record stores after each entry's own properties: RocketMQ 4.9.8 stores
    each message's property bytes as the client encoded them, then the batch's own
    properties (the header's and CLUSTER, WAIT kept, in HashMap order)."""
    shared = props.decode_properties_str(header_properties)
    shared[props.CLUSTER] = cluster_name
    # Except the batch's own UNIQ_KEY (a 5.x client gives the batch one): after each
    # entry's, it would be every entry's message id once decoded, the last value winning
    # (RocketMQ issue #9416; docs/format.md section 13).
    shared.pop(props.UNIQ_KEY, None)
    return props.encode_properties_str(java_hashmap_ordered(shared))


# A record's bytes besides its body, topic and properties, with IPv6 hosts (the most).
_RECORD_OVERHEAD = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 20 + 8 + 20 + 4 + 8 + 4 + 1 + 2


def _one_columns_batch(
    ctx: BrokerContext, body_length: int, columns: BatchColumns, topic: str, batch_text: str
) -> bool:
    """Whether put_columns takes the batch as one batch, which is what put_batch stores
    whole: its bodies within max_message_size and its records (bounded from above by the
    request's body, which holds every entry's body and own properties) within half a
    CommitLog file. A batch past those is put_batch's to refuse, in its words."""
    config = ctx.store.config
    if columns.body_bytes > config.max_message_size:
        return False
    per_record = _RECORD_OVERHEAD + len(topic.encode()) + 1 + len(batch_text.encode())
    records = body_length + len(columns) * per_record
    return records + END_FILE_MIN_BLANK_LENGTH <= config.mapped_file_size_commit_log // 2


def _columns_response(
    cmd: RemotingCommand,
    result: ColumnsResult,
    status: PutStatus,
    queue_id: int,
    ctx: BrokerContext,
    topic: str,
) -> RemotingCommand:
    """``put_response`` of a batch put as columns: the same answer as for its PutResults."""
    code = PUT_STATUS_CODES.get(status, ResponseCode.SYSTEM_ERROR)
    if not status.stored:  # (a refusal is put_batch's to word: only a broken batch)
        return cmd.response(code, result.reason or f"put message failed: {status.value}")
    last = result.stored - 1  # (the batch's records are contiguous: their bytes end here)
    ctx.stats.stored(
        topic,
        result.stored,
        int(result.commit_log_offsets[last] + result.sizes[last] - result.commit_log_offsets[0]),
    )
    ext = {
        "msgId": result.joined_msg_ids(),
        "queueId": str(queue_id),
        "queueOffset": str(int(result.queue_offsets[0])),
        "MSG_REGION": "DefaultRegion",
        "TRACE_ON": "true",
    }
    return cmd.response(code, None, ext)
