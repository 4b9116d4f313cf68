"""``sendMessage``: put one message into the store as a RocketMQ producer would send it.

Layer: cli. The only message command that writes: it takes the writer lock, so it fails
with one clear line while another writer (or a broker) has the store open.
"""

from __future__ import annotations

import contextlib
import time

import click

from rocketstore.broker.broker_config import BrokerConfig, broker_config_from_settings
from rocketstore.broker.topic_config import NOT_ALLOWED_SEND_TOPICS, TopicConfigManager
from rocketstore.cli.context import CliContext, CliError
from rocketstore.cli.params import java_int
from rocketstore.errors import ConfigError, StoreError
from rocketstore.format import properties as props
from rocketstore.format.javahash import java_hashmap_ordered
from rocketstore.format.message import Message
from rocketstore.paths import TOPIC_PATTERN
from rocketstore.store import MessageStore
from rocketstore.uniq_keys import UniqKeyGenerator, local_ip

MAX_TOPIC_LENGTH = 127
# The queues a producer sees for a topic the broker does not know yet (defaultTopicQueueNums).
DEFAULT_TOPIC_QUEUE_NUMS = 4


def _producer_properties(tags: str | None, keys: str | None, uniq_key: str) -> dict[str, str]:
    """What a 4.9 client puts (TAGS, KEYS, WAIT, UNIQ_KEY), in the order the broker writes
    them: the iteration order of the ``HashMap`` it decodes them into."""
    given: dict[str, str] = {}
    if tags:
        given[props.TAGS] = tags
    if keys:
        given[props.KEYS] = keys
    given[props.WAIT] = "true"
    given[props.UNIQ_KEY] = uniq_key
    return java_hashmap_ordered(given)


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
        new = min(DEFAULT_TOPIC_QUEUE_NUMS, broker.default_topic_queue_nums)
        limit = max([new, *(q + 1 for q in known)])
        has = f"has {limit} queues in the store" if known else f"is new and gets {limit} queues"
    if queue_id >= limit:
        return f"queue id {queue_id} is illegal: topic {topic} {has}"
    return None


def _broker_settings(ctx: CliContext) -> BrokerConfig:
    """The broker settings of the -c file (defaults without one)."""
    try:
        return broker_config_from_settings(ctx.settings, source=ctx.settings_path)
    except ConfigError as e:
        raise CliError(str(e)) from e


def _is_utf8_text(text: str) -> bool:
    """False for arguments holding bytes that were not UTF-8 (surrogate escapes)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _born_host() -> str:
    ip = local_ip()
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
    default=0,
    show_default=True,
    help="Queue id (-1: none chosen, as mqadmin takes it; the default queue). Example: -i 3",
)
@click.option(
    "-b",
    "--broker",
    default=None,
    help="Accepted for mqadmin compatibility, ignored offline. Example: -b broker-a",
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
) -> None:
    """Append one message (takes the writer lock; creates the store if DIR does not exist).

    A UNIQ_KEY is generated as a RocketMQ client does (ip, pid, time, counter); it is the
    #MsgId printed, and queryMsgByUniqueKey finds the message by it.

    \b
    Example:
      rocketstore sendMessage -t OrderEvents -p '{"id": 7}' -k order-7 -c created -i 1
    """
    queue_id = max(queue_id, 0)  # mqadmin sends to a chosen queue only when -i > -1
    if not body:
        raise CliError("-p: the message body length is zero")  # the client's check
    for flag, text in (("-k", keys), ("-c", tags)):
        if text and any(c in text for c in "\x01\x02"):
            # They separate names and values in the properties string.
            raise CliError(f"{flag} {text!r} holds a control character 0x01 or 0x02")
        if text is not None and not _is_utf8_text(text):
            raise CliError(f"{flag} {text!r} is not valid UTF-8 text (properties are UTF-8)")
    if len(topic) > MAX_TOPIC_LENGTH or not TOPIC_PATTERN.match(topic):
        raise CliError(
            f"illegal topic {topic!r}: use up to {MAX_TOPIC_LENGTH} of the characters "
            "a-z A-Z 0-9 _ - % |"
        )
    uniq_key = UniqKeyGenerator().next()
    message = Message(
        topic,
        # Bytes of the argument that were not UTF-8 reach the body unchanged.
        body.encode("utf-8", errors="surrogateescape"),
        queue_id=queue_id,
        properties=_producer_properties(tags, keys, uniq_key),
        born_timestamp=time.time_ns() // 1_000_000,
        born_host=_born_host(),
    )
    with ctx.open_writer() as store:
        problem = queue_id_problem(store, topic, queue_id, _broker_settings(ctx))
        if problem is not None:
            raise CliError(problem)
        result = store.put(message)
        if not result.status.ok:
            raise CliError(f"send failed: {result.status.name}")
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
    row = "{:<32}  {:<4}  {:<20}    {:<32}  {}"
    click.echo(row.format("#Broker Name", "#QID", "#Send Result", "#MsgId", "#OffsetMsgId"))
    click.echo(row.format(ctx.broker_name, queue_id, "SEND_OK", uniq_key, result.msg_id))
    _report_unqueued(unqueued)


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
