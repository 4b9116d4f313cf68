"""``sendMessage``: put one message into the store as a RocketMQ producer would send it.

Layer: cli. The only message command that writes: it takes the writer lock, so it fails
with one clear line while another writer (or a broker) has the store open.
"""

from __future__ import annotations

import contextlib
import random
import zlib
from dataclasses import dataclass, replace

import click

from rocketstore.broker.broker_config import BrokerConfig
from rocketstore.broker.processors.send import stored_properties
from rocketstore.broker.topic_config import TopicConfigManager
from rocketstore.cli.context import CliContext, CliError
from rocketstore.cli.params import java_int
from rocketstore.cli.render import java_str
from rocketstore.cli.timeparse import now_ms
from rocketstore.cli.trace_data import encode_pub
from rocketstore.config import parse_host
from rocketstore.errors import StoreError
from rocketstore.format import properties as props
from rocketstore.format import sysflag
from rocketstore.format.body_compression import CompressionType
from rocketstore.format.javahash import java_hashmap_order, java_hashmap_ordered
from rocketstore.format.message import Message
from rocketstore.format.selector.java_values import java_trim
from rocketstore.paths import NOT_ALLOWED_SEND_TOPICS, TOPIC_PATTERN, TRACE_TOPIC
from rocketstore.store import MessageStore
from rocketstore.uniq_keys import UniqKeyGenerator

MAX_TOPIC_LENGTH = 127
# DefaultMQProducer's compressMsgBodyOverHowmuch and the client's default zlib level.
COMPRESS_BODY_OVER = 4096
COMPRESS_LEVEL = 5
ZLIB_TYPE_FLAG = CompressionType.ZLIB << 8  # in the sysFlag's compression bits
# The region a broker answers sends with (the trace's regionId).
DEFAULT_REGION = "DefaultRegion"
# The queues a producer sees for a topic the broker does not know yet (defaultTopicQueueNums).
DEFAULT_TOPIC_QUEUE_NUMS = 4


def _producer_properties(tags: str | None, keys: str | None, uniq_key: str) -> dict[str, str]:
    """What a 4.9 client puts (TAGS, KEYS, WAIT, UNIQ_KEY), in the order it sends them:
    the iteration order of the message's ``HashMap``."""
    given: dict[str, str] = {}
    if tags:
        given[props.TAGS] = tags
    if keys:
        given[props.KEYS] = keys
    given[props.WAIT] = "true"
    given[props.UNIQ_KEY] = uniq_key
    return java_hashmap_ordered(given)


def producer_body(body: bytes) -> tuple[bytes, int]:
    """The body and sysFlag a 4.9 producer sends: a body of 4 KiB or more
    (compressMsgBodyOverHowmuch) goes zlib-compressed at level 5, flagged COMPRESSED
    with compression type ZLIB."""
    if len(body) < COMPRESS_BODY_OVER:
        return body, 0
    return zlib.compress(body, COMPRESS_LEVEL), sysflag.COMPRESSED_FLAG | ZLIB_TYPE_FLAG


def queue_id_problem(
    store: MessageStore, topic: str, queue_id: int, broker: BrokerConfig | None = None
) -> str | None:
    """Why a broker would refuse to store into ``topic``'s queue ``queue_id``, or None.

    A configured topic takes queue ids below its larger queue count, as the broker's send
    check does; an unknown one those a producer sees for a new topic (the producer's 4,
    at most the broker's ``defaultTopicQueueNums``: TBW102's queues), or any queue that
    already exists in the store (a copied store may have no topics.json). A topic neither
    configured nor in the store has no route when the broker's ``autoCreateTopicEnable``
    is off.
    """
    broker = broker or BrokerConfig()
    if topic in NOT_ALLOWED_SEND_TOPICS:
        return f"Sending message to topic[{topic}] is forbidden."  # the broker's words
    config = TopicConfigManager(store.root).get(topic)
    if config is not None:
        if not config.writeable:
            return f"topic {topic} is not writeable (perm {config.perm})"
        limit = max(config.read_queue_nums, config.write_queue_nums)
        has = f"has {limit} queues in config/topics.json"
    else:
        known = store.topics().get(topic, [])
        if not known and not broker.auto_create_topic_enable:
            # The producer finds no route (autoCreateTopicEnable=false): mqadmin's words.
            return f"No route info of this topic: {topic} (autoCreateTopicEnable=false)"
        limit = _unconfigured_queue_count(known, broker)
        has = f"has {limit} queues in the store" if known else f"is new and gets {limit} queues"
    if queue_id >= limit:
        return f"queue id {queue_id} is illegal: topic {topic} {has}"
    return None


def _unconfigured_queue_count(known: list[int], broker: BrokerConfig) -> int:
    """The queues of a topic without a config: those a producer sees for a new topic (the
    producer's 4, at most the broker's ``defaultTopicQueueNums``), or more when the store
    already has higher queue ids."""
    new = min(DEFAULT_TOPIC_QUEUE_NUMS, broker.default_topic_queue_nums)
    return max([new, *(q + 1 for q in known)])


def producer_queue_choice(store: MessageStore, topic: str, broker: BrokerConfig) -> int:
    """The queue a producer's ``send(msg)`` picks: one of the topic's write queues from
    its route, the first chosen at random (the client's ThreadLocalIndex starts at a
    random number). Call after ``queue_id_problem`` said the topic takes messages."""
    config = TopicConfigManager(store.root).get(topic)
    if config is None:
        count = _unconfigured_queue_count(store.topics().get(topic, []), broker)
    else:
        count = config.write_queue_nums
    if count <= 0:
        raise CliError(f"topic {topic} has no write queues (writeQueueNums={count})")
    return random.randrange(count)


def _is_utf8_text(text: str) -> bool:
    """False for arguments holding bytes that were not UTF-8 (surrogate escapes)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _born_host(store_host: str) -> str:
    """The born host of a send from this host: the broker sees the client's end of the
    connection, which for a client beside the broker is an address of the broker's own
    family and host (mqadmin to a broker on 127.0.0.1 is born at 127.0.0.1); the port
    is the client's, unknown offline."""
    ip = parse_host(store_host, what="store host")[0]
    return f"[{ip}]:0" if ":" in ip else f"{ip}:0"


@click.command("sendMessage", short_help="Append one message (takes the writer lock).")
@click.option("-t", "--topic", required=True, help="Topic. Example: -t OrderEvents")
@click.option("-p", "--body", required=True, help="Body (UTF-8 text). Example: -p '{\"id\": 7}'")
@click.option("-k", "--keys", default=None, help="KEYS, space separated. Example: -k order-7")
@click.option("-c", "--tags", default=None, help="TAGS. Example: -c created")
@click.option(
    "-i",
    "--qid",
    "queue_id",
    type=java_int(-1),
    default=-1,
    help="Queue id. Without it (or -1) a write queue is picked as a producer picks one, "
    "at random. mqadmin takes -i only with -b; offline -i alone is enough. Example: -i 3",
)
@click.option(
    "-b",
    "--broker",
    default=None,
    help="Accepted for mqadmin compatibility, ignored offline. Example: -b broker-a",
)
@click.option(
    "-m",
    "--msgTraceEnable",
    "trace",
    type=click.BOOL,
    default=False,
    show_default=True,
    help="Also write the send's trace (a Pub entry in RMQ_SYS_TRACE_TOPIC), as a producer "
    "with message trace on does (true|false). Example: -m true",
)
@click.pass_obj
def send_message(
    ctx: CliContext,
    topic: str,
    body: str,
    keys: str | None,
    tags: str | None,
    queue_id: int,
    broker: str | None,
    trace: bool,
) -> None:
    """Append one message (takes the writer lock; creates the store if DIR does not exist).

    The record is the one a broker stores for mqadmin's send: -t, -p, -k and -c trimmed,
    a body of 4 KiB or more zlib-compressed as the producer does, the broker's CLUSTER
    property. A UNIQ_KEY is generated as a RocketMQ client does (ip, pid, time, counter);
    it is the #MsgId printed, and queryMsgByUniqueKey finds the message by it.

    \b
    Example:
      rocketstore sendMessage -t OrderEvents -p '{"id": 7}' -k order-7 -c created -i 1
    """
    topic, body = java_trim(topic), java_trim(body)  # mqadmin trims every value
    keys = None if keys is None else java_trim(keys)
    tags = None if tags is None else java_trim(tags)
    if not body:
        raise CliError("-p: the message body length is zero")  # the client's check
    for flag, text in (("-k", keys), ("-c", tags)):
        if text and any(c in text for c in "\x01\x02"):
            # They separate names and values in the properties string.
            raise CliError(f"{flag} {text!r} holds a control character 0x01 or 0x02")
        if text is not None and not _is_utf8_text(text):
            raise CliError(f"{flag} {text!r} is not valid UTF-8 text (properties are UTF-8)")
    _check_topic(topic)
    broker_settings = ctx.broker_config()
    uniq_keys = UniqKeyGenerator()
    uniq_key = uniq_keys.next()
    # Bytes of the argument that were not UTF-8 reach the body unchanged.
    sent_body, sys_flag = producer_body(body.encode("utf-8", errors="surrogateescape"))
    started = now_ms()
    message = Message(
        topic,
        sent_body,
        queue_id=max(queue_id, 0),
        sys_flag=sys_flag,
        properties=stored_properties(
            _producer_properties(tags, keys, uniq_key), broker_settings.broker_cluster_name
        ),
        born_timestamp=started,
        born_host=_born_host(ctx.config.store_host),
    )
    with ctx.open_writer() as store:
        problem = queue_id_problem(store, topic, max(queue_id, 0), broker_settings)
        if problem is not None:
            raise CliError(problem)
        if queue_id < 0:  # none chosen: mqadmin's producer.send(msg)
            queue_id = producer_queue_choice(store, topic, broker_settings)
            message = replace(message, queue_id=queue_id)
        result = store.put(message)
        if not result.status.ok:
            raise CliError(f"send failed: {result.status.name}")
        if trace:
            pub = SentMessage(ctx, started, uniq_key, result.msg_id, tags, keys, len(sent_body))
            _put_trace(store, pub, topic, uniq_keys, broker_settings)
        with contextlib.suppress(OSError, StoreError):  # kept as store.dispatch_error
            store.wait_dispatched()
        unqueued = store.dispatch_error
    if ctx.as_json:
        ctx.emit(
            {
                "brokerName": ctx.broker_name,
                "queueId": queue_id,
                "sendStatus": "SEND_OK",
                "putStatus": result.status.name,
                "msgId": uniq_key,
                "offsetMsgId": result.msg_id,
                "queueOffset": result.queue_offset,
                "commitLogOffset": result.commit_log_offset,
                "storeTimestamp": result.store_timestamp,
            }
        )
        _report_unqueued(unqueued)
        return
    row = "{:<32}  {:<4}  {:<20}    {}"  # mqadmin's table (--json adds the offsetMsgId)
    click.echo(row.format("#Broker Name", "#QID", "#Send Result", "#MsgId"))
    click.echo(row.format(ctx.broker_name, queue_id, "SEND_OK", uniq_key))
    _report_unqueued(unqueued)


def _check_topic(topic: str) -> None:
    if len(topic) > MAX_TOPIC_LENGTH or not TOPIC_PATTERN.match(topic):
        raise CliError(
            f"illegal topic {topic!r}: use up to {MAX_TOPIC_LENGTH} of the characters "
            "a-z A-Z 0-9 _ - % |"
        )


@dataclass(frozen=True)
class SentMessage:
    """What a producer's trace hook records of one send."""

    ctx: CliContext
    started_ms: int
    uniq_key: str
    offset_msg_id: str
    tags: str | None
    keys: str | None
    body_length: int  # as sent (compressed)


def trace_keys(uniq_key: str, keys: str | None) -> str:
    """The trace message's KEYS: the sent message's msgId and each of its keys, as the
    trace dispatcher joins its HashSet of them."""
    wanted = [uniq_key, *(keys.split(props.KEY_SEPARATOR) if keys else [])]
    return props.KEY_SEPARATOR.join(java_hashmap_order(list(dict.fromkeys(wanted))))


def _put_trace(
    store: MessageStore,
    sent: SentMessage,
    topic: str,
    uniq_keys: UniqKeyGenerator,
    broker: BrokerConfig,
) -> None:
    """The trace message a 4.9 producer with message trace on sends after the message: one
    Pub entry (TraceDataEncoder) in RMQ_SYS_TRACE_TOPIC (its queue 0), keyed by the
    message's msgId and keys, so queryMsgTraceById finds it."""
    cost = max(now_ms() - sent.started_ms, 0)
    data = encode_pub(
        timestamp=sent.started_ms,
        region_id=DEFAULT_REGION,
        # mqadmin's producer is named by its start time (ms).
        group_name=str(sent.started_ms),
        topic=topic,
        msg_id=sent.uniq_key,
        tags=java_str(sent.tags or None),
        keys=java_str(sent.keys or None),
        store_host=sent.ctx.config.store_host,
        body_length=sent.body_length,
        cost_time=cost,
        msg_type=0,  # MessageType.Normal_Msg
        offset_msg_id=sent.offset_msg_id,
        success=True,
    )
    problem = queue_id_problem(store, TRACE_TOPIC, 0, broker)
    if problem is not None:
        raise CliError(f"the message is sent, but not its trace: {problem}")
    body, sys_flag = producer_body(data.encode("utf-8"))
    client = {
        props.WAIT: "true",
        props.KEYS: trace_keys(sent.uniq_key, sent.keys),
        props.UNIQ_KEY: uniq_keys.next(),
    }
    record = Message(
        TRACE_TOPIC,
        body,
        queue_id=0,
        sys_flag=sys_flag,
        properties=stored_properties(java_hashmap_ordered(client), broker.broker_cluster_name),
        born_timestamp=now_ms(),
        born_host=_born_host(store.config.store_host),
    )
    result = store.put(record)
    if not result.status.ok:
        raise CliError(f"the message is sent, but not its trace: {result.status.name}")


def _report_unqueued(error: BaseException | None) -> None:
    """The message is durable in the CommitLog whatever the dispatcher did; say so, and
    why its queue or index entry is missing (exit status 1)."""
    if error is not None:
        raise CliError(
            f"the message is stored in the CommitLog, but the store could not queue or "
            f"index it: {error}"
        )


def register(group: click.Group) -> None:
    group.add_command(send_message)
