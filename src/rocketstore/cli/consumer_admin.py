"""Consumer groups' positions, offline, with mqadmin's names: consumerProgress (how far
each group is behind), resetOffsetByTime, skipAccumulatedMessage and cloneGroupOffset
(moving a group's committed offsets in ``config/consumerOffset.json``).

Layer: cli. A broker keeps the committed offsets in memory and rewrites
``config/consumerOffset.json`` every few seconds, so the three commands that change them
take the store's writer lock: they work on a stopped store (a running broker's store is
refused, as mqadmin's online path is the broker's business). Their output is mqadmin's
for a group with no consumer online: the "rollback" table of its old reset path.

consumerProgress follows the broker's GET_CONSUME_STATS: the topics the group has
offsets on, each queue of the topic's config (``readQueueNums``; a store without
``config/topics.json`` gives the queues its consume queues have), the queue's max offset,
the committed offset (0 if none) and the store time of the last consumed message.
"""

from __future__ import annotations

from dataclasses import dataclass

import click

from rocketstore.broker.consumer_offsets import ConsumerOffsets
from rocketstore.broker.topic_config import MAX_QUEUE_NUMS, TopicConfigManager, read_topics_file
from rocketstore.cli.context import (
    CliContext,
    CliError,
    queue_bounds,
    require_topic,
    unit_store_time,
)
from rocketstore.cli.queues import name_server_order
from rocketstore.cli.timeparse import HUMAN_FORMAT_HELP, format_seconds, parse_time
from rocketstore.cli.topic_admin import offline_edit
from rocketstore.paths import RETRY_PREFIX
from rocketstore.store import MessageStore

PROGRESS_HEADER = "{:<64}  {:<32}  {:<4}  {:<20}  {:<20}  {:<20}  {}"
PROGRESS_IP_HEADER = "{:<64}  {:<32}  {:<4}  {:<20}  {:<20}  {:<20} {:<20}  {}"
GROUPS_HEADER = "{:<64}  {:<6}  {:<24} {:<5}  {:<14}  {:<7}  {}"
ROLLBACK_ROW = "{:<20}  {:<20}  {:<20}  {:<20}  {:<20}  {:<20}"


@dataclass(frozen=True)
class QueueProgress:
    topic: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    last_timestamp: int  # 0: none (nothing consumed, or its message is gone)
    committed: bool  # the group has an offset for this queue


def _queue_ids(store: MessageStore, topics: TopicConfigManager, topic: str) -> list[int]:
    config = topics.get(topic)
    if config is not None:
        if config.read_queue_nums > MAX_QUEUE_NUMS:
            raise CliError(
                f"topic {topic}: readQueueNums {config.read_queue_nums} in config/topics.json "
                f"is more than the {MAX_QUEUE_NUMS} queues the offline tools list; "
                "correct it with updateTopic -r"
            )
        return list(range(config.read_queue_nums))
    known = store.topics().get(topic, [])
    return list(range(max(known) + 1)) if known else []


def consume_stats(
    store: MessageStore,
    offsets: ConsumerOffsets,
    topics: TopicConfigManager,
    group: str,
    topic: str | None = None,
) -> list[QueueProgress]:
    """The broker's ConsumeStats of ``group`` (of one topic, or of every topic it has
    offsets on), sorted as mqadmin sorts MessageQueues (topic, then queue id)."""
    names = {topic} if topic else offsets.topics_of_group(group)
    rows = []
    for name in sorted(names):
        committed = offsets.query_queues(group, name)
        for queue_id in _queue_ids(store, topics, name):
            broker_offset = max(queue_bounds(store, name, queue_id)[1], 0)
            consumer_offset = max(committed.get(queue_id, 0), 0)
            last = 0
            if consumer_offset > 0:
                last = max(unit_store_time(store, name, queue_id, consumer_offset - 1), 0)
            rows.append(
                QueueProgress(
                    name, queue_id, broker_offset, consumer_offset, last, queue_id in committed
                )
            )
    return rows


def _front(text: str, width: int) -> str:
    """UtilAll.frontStringAtLeast: at most ``width`` characters."""
    return text[:width]


def _date(epoch_ms: int) -> str:
    return "N/A" if epoch_ms == 0 else format_seconds(epoch_ms)


def _managers(root: str) -> tuple[ConsumerOffsets, TopicConfigManager]:
    return ConsumerOffsets(root), TopicConfigManager(root)


@click.command("consumerProgress", short_help="How far each consumer group is behind.")
@click.option("-g", "--groupName", "group", default=None, help="A consumer group. Example: -g G1")
@click.option(
    "-t", "--topicName", "topic", default=None, help="Only this topic (with -g). Example: -t T"
)
@click.option(
    "-s",
    "--showClientIP",
    "show_client_ip",
    default=None,
    help="true: add mqadmin's #Client IP column (with -g; N/A offline: no consumer holds a "
    "queue). Example: -s true",
)
@click.pass_obj
def consumer_progress(
    ctx: CliContext, group: str | None, topic: str | None, show_client_ip: str | None
) -> None:
    """With -g, each queue of the group's topics: the queue's max offset, the group's
    committed offset, the difference and the time of the last consumed message. Without,
    each group and its total difference: as mqadmin, the groups with a %RETRY% topic in
    config/topics.json, in the name server's topic-list order (a store without a topic
    config: every group with offsets or a %RETRY% queue, sorted).

    \b
    Example:
      rocketstore consumerProgress
      rocketstore consumerProgress -g OrderProcessors
    """
    root = ctx.require_store_dir()
    offsets, topics = _managers(root)
    with ctx.open_read_only() as store:
        if group is not None:
            # mqadmin shows the column only for -s true (any case), as its check does.
            with_ip = show_client_ip is not None and show_client_ip.strip().lower() == "true"
            _print_group(ctx, consume_stats(store, offsets, topics, group, topic), with_ip)
            return
        if topic is not None:
            raise click.UsageError("-t needs -g")
        configured = read_topics_file(root)
        if configured is not None and configured.topics:
            # mqadmin's groups: those with a %RETRY% topic in the name server's topic
            # list (the broker's configured topics), in that list's order.
            listed = name_server_order(configured.topics)
            groups = [t[len(RETRY_PREFIX) :] for t in listed if t.startswith(RETRY_PREFIX)]
        else:
            # A store written without a broker: every group it has offsets or retry
            # queues for.
            retry_groups = {
                t[len(RETRY_PREFIX) :]
                for t in [*store.topics(), *(c.topic_name for c in topics.all())]
                if t.startswith(RETRY_PREFIX)
            }
            groups = sorted(retry_groups | offsets.groups())
        if not ctx.as_json:
            click.echo(GROUPS_HEADER.format(
                "#Group", "#Count", "#Version", "#Type", "#Model", "#TPS", "#Diff Total"
            ))  # fmt: skip
        for name in groups:
            diff = sum(
                r.broker_offset - r.consumer_offset
                for r in consume_stats(store, offsets, topics, name)
            )
            if ctx.as_json:
                ctx.emit({"group": name, "diffTotal": diff})
            else:
                # No client is connected offline: mqadmin's row for a group with none.
                click.echo(GROUPS_HEADER.format(_front(name, 64), 0, "OFFLINE", "", "", 0, diff))


def _print_group(ctx: CliContext, rows: list[QueueProgress], with_ip: bool = False) -> None:
    if not ctx.as_json and with_ip:
        click.echo(PROGRESS_IP_HEADER.format(
            "#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Client IP",
            "#Diff", "#LastTime",
        ))  # fmt: skip
    elif not ctx.as_json:
        click.echo(PROGRESS_HEADER.format(
            "#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff",
            "#LastTime",
        ))  # fmt: skip
    total = 0
    for r in rows:
        diff = r.broker_offset - r.consumer_offset
        total += diff
        if ctx.as_json:
            ctx.emit(
                {
                    "topic": r.topic,
                    "brokerName": ctx.broker_name,
                    "queueId": r.queue_id,
                    "brokerOffset": r.broker_offset,
                    "consumerOffset": r.consumer_offset,
                    "diff": diff,
                    "lastTimestamp": r.last_timestamp,
                }
            )
            continue
        if with_ip:
            # No consumer is connected offline, so no client holds the queue.
            click.echo(PROGRESS_IP_HEADER.format(
                _front(r.topic, 64), _front(ctx.broker_name, 32), r.queue_id, r.broker_offset,
                r.consumer_offset, "N/A", diff, _date(r.last_timestamp),
            ))  # fmt: skip
            continue
        click.echo(PROGRESS_HEADER.format(
            _front(r.topic, 64), _front(ctx.broker_name, 32), r.queue_id, r.broker_offset,
            r.consumer_offset, diff, _date(r.last_timestamp),
        ))  # fmt: skip
    if not ctx.as_json:
        click.echo("")
        click.echo("Consume TPS: 0.00")  # nothing consumes offline
        click.echo(f"Diff Total: {total}")


def _reset(ctx: CliContext, group: str, topic: str, timestamp: int, force: bool) -> list[str]:
    """mqadmin's reset for a group with no consumer online (resetOffsetByTimestampOld):
    per queue, the offset for ``timestamp`` (-1: the max offset) becomes the committed one
    when ``force`` or when it is not after the current one. The table's lines."""
    root = ctx.require_store_dir()
    lines = [ROLLBACK_ROW.format(
        "#brokerName", "#queueId", "#brokerOffset", "#consumerOffset", "#timestampOffset",
        "#rollbackOffset",
    )]  # fmt: skip
    with offline_edit(root, "consumerOffset.json"), ctx.open_read_only() as store:
        require_topic(store, topic)
        offsets, topics = _managers(root)
        rows = [r for r in consume_stats(store, offsets, topics, group) if r.topic == topic]
        if not rows:  # the group never consumed the topic: from each queue's min offset
            rows = []
            for q in _queue_ids(store, topics, topic):
                low, high = queue_bounds(store, topic, q)
                rows.append(QueueProgress(topic, q, high, low, 0, False))
        for r in rows:
            if timestamp == -1:
                target = queue_bounds(store, topic, r.queue_id)[1]
            else:
                target = store.offset_by_time(topic, r.queue_id, timestamp, "lower")
            rollback = r.consumer_offset
            if force or target <= r.consumer_offset:
                rollback = target
                offsets.commit(group, topic, r.queue_id, target)
            lines.append(ROLLBACK_ROW.format(
                _front(ctx.broker_name, 32), r.queue_id, r.broker_offset, r.consumer_offset,
                target, rollback,
            ))  # fmt: skip
        offsets.persist(force=True)
    return lines


_GROUP = click.option("-g", "--group", required=True, help="Consumer group. Example: -g G1")
_TOPIC = click.option("-t", "--topic", required=True, help="Topic. Example: -t OrderEvents")
_FORCE = click.option(
    "-f",
    "--force",
    type=click.BOOL,
    default=True,
    show_default=True,
    help="Also move offsets forward (false: only back). Example: -f false",
)


@click.command("resetOffsetByTime", short_help="Move a group's offsets to a time (stopped store).")
@_GROUP
@_TOPIC
@click.option(
    "-s",
    "--timestamp",
    "when",
    required=True,
    help=f"The time to consume from, {HUMAN_FORMAT_HELP}. Example: -s 2024-05-01#00:00:00:000",
)
@_FORCE
@click.pass_obj
def reset_offset_by_time(ctx: CliContext, group: str, topic: str, when: str, force: bool) -> None:
    """Set GROUP's committed offsets on TOPIC to the first message stored at or after
    the time, in config/consumerOffset.json of a stopped store (takes the writer lock).

    \b
    Example:
      rocketstore resetOffsetByTime -g OrderProcessors -t OrderEvents -s 2024-05-01#00:00:00:000
    """
    try:
        timestamp = parse_time(when)
    except ValueError as e:  # (-s is kept as text: the line below prints it as given)
        raise click.BadParameter(str(e), param_hint="'-s' / '--timestamp'") from e
    lines = _reset(ctx, group, topic, timestamp, force)
    click.echo(
        f"rollback consumer offset by specified consumerGroup[{group}], topic[{topic}], "
        f"force[{str(force).lower()}], timestamp(string)[{when}], timestamp(long)[{timestamp}]"
    )
    for line in lines:
        click.echo(line)


@click.command("skipAccumulatedMessage", short_help="Move a group to the end of a topic.")
@_GROUP
@_TOPIC
@_FORCE
@click.pass_obj
def skip_accumulated_message(ctx: CliContext, group: str, topic: str, force: bool) -> None:
    """Set GROUP's committed offsets on TOPIC to each queue's max offset (skip everything
    not yet consumed), in config/consumerOffset.json of a stopped store.

    \b
    Example:
      rocketstore skipAccumulatedMessage -g OrderProcessors -t OrderEvents
    """
    for line in _reset(ctx, group, topic, -1, force):
        click.echo(line)


@click.command("cloneGroupOffset", short_help="Give a group another group's offsets.")
@click.option("-s", "--srcGroup", "src", required=True, help="Source group. Example: -s G1")
@click.option("-d", "--destGroup", "dest", required=True, help="Target group. Example: -d G2")
@_TOPIC
@click.option(
    "-o",
    "--offline",
    "offline_flag",
    default=None,
    help="Accepted for mqadmin compatibility (the store is always offline here). Example: -o true",
)
@click.pass_obj
def clone_group_offset(
    ctx: CliContext, src: str, dest: str, topic: str, offline_flag: str | None
) -> None:
    """Give DEST the committed offsets SRC has on TOPIC (0 for a queue SRC never
    committed, as mqadmin copies the broker's consume stats), in a stopped store.

    \b
    Example:
      rocketstore cloneGroupOffset -s OrderProcessors -d OrderAudit -t OrderEvents
    """
    root = ctx.require_store_dir()
    with offline_edit(root, "consumerOffset.json"), ctx.open_read_only() as store:
        require_topic(store, topic)
        offsets, topics = _managers(root)
        for r in consume_stats(store, offsets, topics, src, topic):
            offsets.commit(dest, topic, r.queue_id, r.consumer_offset)
        offsets.persist(force=True)
    click.echo(f"clone group offset success. srcGroup[{src}], destGroup=[{dest}], topic[{topic}]")


def register(group: click.Group) -> None:
    for command in (
        consumer_progress,
        reset_offset_by_time,
        skip_accumulated_message,
        clone_group_offset,
    ):
        group.add_command(command)
