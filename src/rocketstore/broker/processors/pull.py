"""PULL_MESSAGE (11), with long polling.

Layer: broker processors. Reads through the store's getMessage rules and maps its status to
RocketMQ's response codes; a pull that finds nothing new and allows suspending is held
until a message reaches its queue (``BrokerContext.waiters``) or its suspend time ends, then
answered with what is there.
"""

from __future__ import annotations

from dataclasses import dataclass

from rocketstore.broker.codes import ResponseCode
from rocketstore.broker.context import MAX_SUSPEND_MS, BrokerContext
from rocketstore.broker.remoting import RemotingCommand, ext_int, ext_str
from rocketstore.broker.server import Connection
from rocketstore.read_path import GetResult
from rocketstore.status import GetStatus

# PullSysFlag bits.
FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4
FLAG_CLASS_FILTER = 0x8

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
            expression_type=ext.get("expressionType", "TAG"),
        )


def response_code(result: GetResult, queue_offset: int) -> int:
    if result.status is GetStatus.NO_MESSAGE_IN_QUEUE:
        # An empty queue: "not found" at 0, otherwise the client's offset is wrong.
        return ResponseCode.PULL_NOT_FOUND if queue_offset == 0 else ResponseCode.PULL_OFFSET_MOVED
    return STATUS_CODES[result.status]


def pulled_records(ctx: BrokerContext, result: GetResult) -> bytes:
    """The found messages' CommitLog records, back to back (the pull response body)."""
    chunks = []
    for message in result.messages:
        raw = ctx.store.commitlog.read(message.commit_log_offset, message.size)
        if raw is not None:
            chunks.append(raw)
    return b"".join(chunks)


def _subscription(ctx: BrokerContext, header: PullHeader) -> str | None:
    """The tag expression: from the request when it carries one, else the group's
    registered subscription (a client sends it only until the broker knows it)."""
    if header.sys_flag & FLAG_SUBSCRIPTION and header.subscription is not None:
        return header.subscription
    data = ctx.clients.subscription(header.group, header.topic)
    if data is not None and isinstance(data.get("subString"), str):
        return str(data["subString"])
    return header.subscription


def _read(ctx: BrokerContext, header: PullHeader, tags: str | None) -> tuple[GetResult, bytes]:
    max_count = max(1, header.max_msg_nums)
    result = ctx.store.get_messages(
        header.group, header.topic, header.queue_id, header.queue_offset, max_count, tags
    )
    body = pulled_records(ctx, result) if result.found else b""
    return result, body


async def pull_message(
    ctx: BrokerContext, cmd: RemotingCommand, conn: Connection
) -> RemotingCommand:
    header = PullHeader.parse(cmd.ext_fields)
    config = ctx.topics.get(header.topic)
    if config is None:
        return cmd.response(
            ResponseCode.TOPIC_NOT_EXIST,
            f"topic[{header.topic}] not exist, apply first please!",
        )
    if not config.readable:
        return cmd.response(
            ResponseCode.NO_PERMISSION, f"the topic[{header.topic}] pulling message is forbidden"
        )
    if not 0 <= header.queue_id < config.read_queue_nums:
        return cmd.response(
            ResponseCode.SYSTEM_ERROR,
            f"queueId[{header.queue_id}] is illegal, topic:[{header.topic}] "
            f"topicConfig.readQueueNums:[{config.read_queue_nums}] consumer:[{conn.peer}]",
        )
    # The consumer's progress rides on the pull; stored before any hold, as RocketMQ does.
    if header.sys_flag & FLAG_COMMIT_OFFSET and header.commit_offset >= 0:
        ctx.offsets.commit(header.group, header.topic, header.queue_id, header.commit_offset)
    if header.expression_type.upper() not in ("", "TAG"):
        # SQL92 (or class) filters need the broker to evaluate properties: not supported.
        return cmd.response(
            ResponseCode.SUBSCRIPTION_PARSE_FAILED,
            f"expression type {header.expression_type} is not supported, only TAG",
        )
    tags = _subscription(ctx, header)
    result, body = await ctx.run(_read, ctx, header, tags)
    code = response_code(result, header.queue_offset)
    if code == ResponseCode.PULL_NOT_FOUND and header.sys_flag & FLAG_SUSPEND:
        # Hold the pull; answer as soon as the queue grows past the asked offset.
        timeout_ms = header.suspend_timeout_ms if ctx.long_polling_enable else ctx.short_polling_ms
        timeout_ms = max(0, min(timeout_ms, MAX_SUSPEND_MS))

        def has_new() -> bool:
            return ctx.store.max_offset(header.topic, header.queue_id) > header.queue_offset

        if await ctx.waiters.wait(has_new, timeout_ms / 1000):
            result, body = await ctx.run(_read, ctx, header, tags)
            code = response_code(result, header.queue_offset)
    ext: dict[str, object] = {
        "nextBeginOffset": result.next_begin_offset,
        "minOffset": result.min_offset,
        "maxOffset": result.max_offset,
        "suggestWhichBrokerId": 0,
    }
    if code != ResponseCode.SUCCESS:
        remark = result.status.value
        return cmd.response(code, remark, ext)
    return cmd.response(code, "FOUND", ext, body)
