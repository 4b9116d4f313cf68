"""Topic and queue commands with mqadmin's names: topicList, topicStatus, queryCq.

Layer: cli. Read-only: never takes the writer lock (topicList also reads
config/topics.json, as a broker keeps it).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable

import click

from rocketstore.broker import admin_client
from rocketstore.broker.consumer_offsets import ConsumerOffsets
from rocketstore.broker.topic_config import TopicConfigManager, read_topics_file
from rocketstore.cli.context import (
    CliContext,
    CliError,
    queue_bounds,
    require_queue,
    require_topic,
    through_namesrv,
    unit_store_time,
)
from rocketstore.cli.credentials import credential_options
from rocketstore.cli.messages import consuming_groups
from rocketstore.cli.params import java_int, java_long
from rocketstore.cli.timeparse import format_time
from rocketstore.format import record as rec
from rocketstore.format.cq_ext import bitmap_text, ext_unit_json, is_ext_address
from rocketstore.format.javahash import java_hashmap_order
from rocketstore.paths import DLQ_PREFIX, RETRY_PREFIX
from rocketstore.remoting.acl_signing import SessionCredentials


@click.command("topicList", short_help="The topics in the store.")
@click.option(
    "-n",
    "--namesrvAddr",
    "namesrv",
    help="List the topics a running name server knows instead. Example: -n 127.0.0.1:9876",
)
@click.option(
    "-c",
    "--clusterModel",
    "cluster_model",
    is_flag=True,
    help="mqadmin's cluster table: each topic (not retry or DLQ) with its cluster and the "
    "groups with offsets on it. Example: -c",
)
@credential_options
@click.pass_obj
def topic_list(
    ctx: CliContext,
    namesrv: str | None,
    cluster_model: bool,
    credentials: SessionCredentials | None,
) -> None:
    """Every topic that has a consume queue or an entry in config/topics.json, one per
    line (--json adds the queue ids, and the queue counts and perm when configured).
    With -n, the topics of a running name server.

    \b
    Example:
      rocketstore --store /var/rocketmq/store topicList
      rocketstore topicList -n 127.0.0.1:9876
    """
    if namesrv:
        with through_namesrv("topicList", namesrv):
            names = admin_client.topic_list(namesrv, credentials=credentials)
        for name in names:
            if ctx.as_json:
                ctx.emit({"topic": name})
            else:
                click.echo(name)
        return
    root = ctx.store_dir
    configured = read_topics_file(root) if os.path.isdir(root) else None
    queues: dict[str, list[int]] = {}
    if configured is None or any(os.path.isdir(d) for d in ctx.commitlog_dirs.all):
        # A store whose topics were created before its first message has only config/.
        with ctx.open_read_only() as store:
            queues = store.topics()
    configs = configured.topics if configured is not None else {}
    # mqadmin lists what the name server knows: the broker's configured topics, in the
    # order of the sets they pass through. A store without a topic config gets the topics
    # it has queues for, sorted.
    names = name_server_order(configs) if configs else sorted(queues)
    if cluster_model:
        _print_cluster_model(ctx, names)
        return
    if not ctx.as_json:
        for topic in names:
            click.echo(topic)
        return
    for topic in sorted(set(queues) | set(configs)):
        row: dict[str, object] = {
            "topic": topic,
            "queueIds": queues.get(topic, []),
            "configured": topic in configs,
        }
        config = configs.get(topic)
        if config is not None:
            row.update(
                readQueueNums=config.read_queue_nums,
                writeQueueNums=config.write_queue_nums,
                perm=config.perm,
            )
        ctx.emit(row)


def _print_cluster_model(ctx: CliContext, topics: list[str]) -> None:
    """topicList -c: per topic (retry and DLQ topics left out) the broker's cluster and
    each group the broker says consumes it (QUERY_TOPIC_CONSUME_BY_WHO: those with
    committed offsets offline, in the HashSet's order), or one row with no group."""
    cluster = ctx.broker_config().broker_cluster_name
    offsets = ConsumerOffsets(ctx.store_dir)
    header = "{:<20}  {:<48}  {:<48}"  # (mqadmin's rows are wider than its header)
    row = "{:<20}  {:<64}  {:<64}"
    if not ctx.as_json:
        click.echo(header.format("#Cluster Name", "#Topic", "#Consumer Group"))
    for topic in topics:
        if topic.startswith((RETRY_PREFIX, DLQ_PREFIX)):
            continue
        groups = consuming_groups(offsets, topic)
        if ctx.as_json:
            ctx.emit({"clusterName": cluster, "topic": topic, "consumerGroups": groups})
            continue
        for group in groups or [""]:
            click.echo(row.format(cluster[:20], topic[:64], group[:64]))


def name_server_order(topics: Iterable[str]) -> list[str]:
    """The order mqadmin's topic list comes in: the name server's topic table (a
    HashMap(1024)) copied into the TopicList's HashSet, which the client reads into
    another of the same size."""
    return java_hashmap_order(java_hashmap_order(sorted(topics), initial_capacity=1024))


@click.command("topicStatus", short_help="Min and max offset and last update of each queue.")
@click.option("-t", "--topic", required=True, help="Topic. Example: -t OrderEvents")
@click.pass_obj
def topic_status(ctx: CliContext, topic: str) -> None:
    """Per queue of TOPIC: min offset, max offset and the store time of the newest message.
    The queues are the broker's for the topic: its write queues in config/topics.json
    (one without a consume queue shows 0 and 0), or the store's for a topic without a
    config.

    \b
    Example:
      rocketstore topicStatus -t OrderEvents
    """
    with ctx.open_read_only() as store:
        present = store.topics().get(topic, [])
        config = TopicConfigManager(store.root).get(topic)
        # GET_TOPIC_STATS_INFO goes through the config's write queues.
        queue_ids = (
            require_topic(store, topic) if config is None else range(config.write_queue_nums)
        )
        rows = []
        for queue_id in queue_ids:
            if queue_id not in present:
                rows.append((queue_id, 0, 0, 0))
                continue
            low, high = queue_bounds(store, topic, queue_id)
            last = unit_store_time(store, topic, queue_id, high - 1) if high > low else -1
            rows.append((queue_id, low, high, max(last, 0)))
    if ctx.as_json:
        for queue_id, low, high, last in rows:
            ctx.emit(
                {
                    "brokerName": ctx.broker_name,
                    "topic": topic,
                    "queueId": queue_id,
                    "minOffset": low,
                    "maxOffset": high,
                    "lastUpdateTimestamp": last,
                }
            )
        return
    line = "{:<32}  {:<4}  {:<20}  {:<20}    {}"
    click.echo(line.format("#Broker Name", "#QID", "#Min Offset", "#Max Offset", "#Last Updated"))
    for queue_id, low, high, last in rows:
        shown = format_time(last) if last else ""
        click.echo(line.format(ctx.broker_name, queue_id, low, high, shown))


# What mqadmin's queryCq prints after the queue's bounds and after each unit.
SEPARATOR = "=" * 38


@click.command("queryCq", short_help="Raw consume-queue units and the records they point to.")
@click.option("-t", "--topic", required=True, help="Topic. Example: -t OrderEvents")
@click.option(
    "-q", "--queue", "queue_id", type=java_int(), required=True, help="Queue id. Example: -q 0"
)
@click.option(
    "-i",
    "--index",
    "start",
    type=java_long(),
    default=None,
    help="First queue offset to show [default: the queue's min offset]. Example: -i 100",
)
@click.option(
    "-c",
    "--count",
    type=java_int(1),
    default=10,
    show_default=True,
    help="How many units. Example: -c 50",
)
@click.option(
    "-b",
    "--broker",
    "broker_addr",
    default=None,
    help="Accepted for mqadmin compatibility, ignored offline. Example: -b 127.0.0.1:10911",
)
@click.option(
    "-g",
    "--consumer",
    "group",
    default=None,
    help="A consumer group: as a broker with no consumer connected, says the group is not "
    "online (its filter is not applied). Example: -g OrderProcessors",
)
@click.pass_obj
def query_cq(
    ctx: CliContext,
    topic: str,
    queue_id: int,
    start: int | None,
    count: int,
    broker_addr: str | None,
    group: str | None,
) -> None:
    """Raw consume-queue units (CommitLog offset, size, tagsCode), as mqadmin's queryCq
    prints them; --json adds the record each points to (its offsetMsgId and tags, null
    when no record with that size starts there).

    \b
    Example:
      rocketstore queryCq -t OrderEvents -q 0 -i 0 -c 5
    """
    with ctx.open_read_only() as store:
        require_queue(store, topic, queue_id)
        low, high = queue_bounds(store, topic, queue_id)
        first = low if start is None else start
        if not low <= first < high:
            valid = f"valid offsets are {low}..{high - 1}" if high > low else "the queue is empty"
            raise CliError(f"queue offset {first} is out of range for {topic}-{queue_id} ({valid})")
        queue = store.queue_view(topic, queue_id)
        assert queue is not None  # (require_queue)
        if not ctx.as_json:
            if group is not None:
                # The broker's filter data for a group it has no connection of.
                click.echo(f"Filter data: \n{group}@{topic} is not online!\n{SEPARATOR}")
            click.echo(f"Queue data: \nmax: {high}, min: {low}\n{SEPARATOR}")
        for queue_offset in range(first, min(high, first + count)):
            unit = queue.unit(queue_offset)
            if unit is None:
                continue
            located = store.commitlog_record(unit.commit_log_offset) if unit.is_valid else None
            message = rec.to_message_ext(*located, read_body=False) if located else None
            found = message is not None and message.size == unit.size
            msg_id = message.msg_id if message is not None and found else None
            ext_json, bitmap, msg = "null", "null", "null"
            ext = store.ext_unit(topic, queue_id, unit.tags_code)
            if ext is not None:
                ext_json = ext_unit_json(ext)
                bitmap = bitmap_text(ext.bitmap) if ext.bitmap else "null"
            elif is_ext_address(unit.tags_code):
                msg = f"Cq extend not exist!addr: {unit.tags_code}"  # mqadmin's words
            if ctx.as_json:
                ctx.emit(
                    {
                        "topic": topic,
                        "queueId": queue_id,
                        "queueOffset": queue_offset,
                        "physicOffset": unit.commit_log_offset,
                        "physicSize": unit.size,
                        "tagsCode": unit.tags_code,
                        "msgId": msg_id,
                        "tags": message.tags if message is not None and found else None,
                        **({"ext": json.loads(ext_json)} if ext is not None else {}),
                    }
                )
                continue
            # mqadmin's lines: the broker sets msg only for a missing extension unit.
            click.echo(
                f"idx: {queue_offset}\n"
                f"ConsumeQueueData{{physicOffset={unit.commit_log_offset}, "
                f"physicSize={unit.size}, tagsCode={unit.tags_code}, "
                f"extendDataJson='{ext_json}', bitMap='{bitmap}', eval=false, msg='{msg}'}}\n"
                f"{SEPARATOR}"
            )


def register(group: click.Group) -> None:
    for command in (topic_list, topic_status, query_cq):
        group.add_command(command)
