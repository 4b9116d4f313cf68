"""Browsing queues with mqadmin's names: printMsg (every queue of a topic) and
printMsgByQueue (one queue, with per-tag counts).

Layer: cli. Read-only. Messages are pulled through the store's getMessage with a tag
filter or a SQL92 selector (``--sql92``), as a consumer with that subscription would get
them; time bounds become queue offsets through offset_by_time.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import replace

import click

from rocketstore.cli.context import (
    CliContext,
    queue_bounds,
    require_queue,
    unit_store_time,
)
from rocketstore.cli.params import java_int
from rocketstore.cli.progress import Progress, progress
from rocketstore.cli.render import (
    CHARSET,
    QueueSpan,
    body_text,
    client_msg_id,
    message_json,
    message_queue,
    message_to_string,
)
from rocketstore.cli.route_queues import subscribe_queue_ids
from rocketstore.cli.timeparse import HUMAN_FORMAT_HELP, TIME
from rocketstore.cli.tools_pull import PullStatus, PullStep, empty_pull_line, tools_pull
from rocketstore.errors import SelectorError
from rocketstore.format.javahash import java_hashmap_order
from rocketstore.format.message import MessageExt
from rocketstore.format.selector import SQL92, TAG
from rocketstore.format.subscription import SUB_ALL, Subscription, build_subscription
from rocketstore.store import MessageStore

# What printMsg prints after each queue.
QUEUE_SEPARATOR = "-" * 56


def queue_range(
    store: MessageStore, topic: str, queue_id: int, begin: int | None, end: int | None
) -> tuple[int, int]:
    """[low, high) queue offsets of messages stored within [begin, end] (ms, inclusive)."""
    low, high = queue_bounds(store, topic, queue_id)
    if begin is not None:
        low = max(low, store.offset_by_time(topic, queue_id, begin, "lower"))
    if end is not None:
        upper = store.offset_by_time(topic, queue_id, end, "upper")
        stored = unit_store_time(store, topic, queue_id, upper)
        # UPPER falls back to the min offset when every message is newer than ``end``.
        high = min(high, upper + 1 if 0 <= stored <= end else upper)
    return low, max(low, high)


def searched_range(
    store: MessageStore, topic: str, queue_id: int, begin: int | None, end: int | None
) -> tuple[int, int]:
    """mqadmin's [minOffset, maxOffset) for -b/-e: each bound is ``searchOffset`` of its
    time, the first offset stored at or after it (the queue's min and max without one)."""
    low, high = queue_bounds(store, topic, queue_id)
    if begin is not None:
        low = store.offset_by_time(topic, queue_id, begin, "lower")
    if end is not None:
        high = store.offset_by_time(topic, queue_id, end, "lower")
    return low, high


def tools_pulls(
    store: MessageStore,
    topic: str,
    queue_id: int,
    low: int,
    high: int,
    subscription: Subscription,
    bar: Progress,
    *,
    exact: bool,
) -> Iterator[PullStep]:
    """mqadmin's loop over [low, high): a pull of 32 at a time, from each pull's next
    begin offset, until one answers NO_NEW_MSG or OFFSET_ILLEGAL (yielded too). mqadmin
    keeps the whole last batch, so what it prints may run past -e; so does this, unless
    ``exact`` (the --json output, which holds to the range). A pull that would not move
    on ends it."""
    offset = low
    while offset < high:
        step = tools_pull(store, topic, queue_id, offset, subscription)
        found = step.status is PullStatus.FOUND
        if exact and found and any(m.queue_offset >= high for m in step.messages):
            kept = [m for m in step.messages if m.queue_offset < high]
            step = replace(step, messages=kept)
        yield step
        if step.status in (PullStatus.NO_NEW_MSG, PullStatus.OFFSET_ILLEGAL):
            return
        if step.next_offset <= offset:
            return
        bar.advance(min(step.next_offset, high) - offset)
        offset = step.next_offset


def message_line(
    message: MessageExt, span: QueueSpan, print_body: bool, charset: str, broker_name: str
) -> str:
    """mqadmin's ``MSGID: <id> <MessageExt.toString()> BODY: <body>`` line of a pulled
    message (``span``: the queue's min and max offsets, which the pull adds)."""
    shown = body_text(message, charset) if print_body else "NOT PRINT BODY"
    text = message_to_string(message, pulled=span, broker_name=broker_name)
    return f"MSGID: {client_msg_id(message)} {text} BODY: {shown}"


BEGIN_HELP = f"Earliest store time, {HUMAN_FORMAT_HELP}. Example: -b 2024-05-01#00:00:00:000"
END_HELP = (
    f"End store time: pulls stop at the first message stored at or after it (as mqadmin's, "
    f"the last pull of 32 is printed whole; --json holds to the range), "
    f"{HUMAN_FORMAT_HELP}. Example: -e now"
)
SUB_HELP = "Tag expression. Example: -s 'created || paid'"
SQL92_HELP = (
    "Only messages this SQL92 selector (a consumer's MessageSelector.bySql) selects; "
    "not with -s. Example: --sql92 \"region = 'eu' AND amount > 100\""
)


def subscription_of(sub: str, sql92: str | None) -> Subscription:
    """The subscription -s or --sql92 describe; a usage error names what is wrong."""
    if sql92 is None:
        return build_subscription(sub, TAG)
    if sub.strip() not in ("", SUB_ALL):
        raise click.UsageError("-s and --sql92 are two kinds of subscription: give one")
    try:
        return build_subscription(sql92, SQL92)
    except SelectorError as e:
        raise click.BadParameter(str(e), param_hint="--sql92") from e


def _charset_filter_options(command: Callable[..., None]) -> Callable[..., None]:
    """-c charset, -s tag expression, -b/-e time bounds: shared by printMsg and
    printMsgByQueue, with mqadmin's flags; and our --sql92 selector."""
    options = (
        click.option(
            "-c",
            "--charsetName",
            "charset",
            type=CHARSET,
            default="UTF-8",
            show_default=True,
            help="Charset of printed bodies. Example: -c GBK",
        ),
        click.option("-s", "--subExpression", "sub", default="*", show_default=True, help=SUB_HELP),
        click.option("--sql92", "sql92", default=None, metavar="EXPR", help=SQL92_HELP),
        click.option("-b", "--beginTimestamp", "begin", type=TIME, default=None, help=BEGIN_HELP),
        click.option("-e", "--endTimestamp", "end", type=TIME, default=None, help=END_HELP),
    )
    for option in reversed(options):
        command = option(command)
    return command


@click.command("printMsg", short_help="Every message of a topic, queue by queue.")
@click.option("-t", "--topic", required=True, help="Topic. Example: -t OrderEvents")
@_charset_filter_options
@click.option(
    "-d",
    "--printBody",
    "print_body",
    type=click.BOOL,
    default=True,
    show_default=True,
    help="Print bodies (true|false). Example: -d false",
)
@click.option(
    "-l",
    "--lmqParentTopic",
    "lmq_parent",
    default=None,
    help="The topic whose queues to go through (mqadmin routes an LMQ queue by its "
    "parent topic): TOPIC's queues with those ids. Example: -t %LMQ%order-7 -l OrderEvents",
)
@click.pass_obj
def print_msg(
    ctx: CliContext,
    topic: str,
    charset: str,
    sub: str,
    sql92: str | None,
    begin: int | None,
    end: int | None,
    print_body: bool,
    lmq_parent: str | None,
) -> None:
    """Every message of TOPIC, queue by queue, as mqadmin's printMsg prints them.

    \b
    Example:
      rocketstore printMsg -t OrderEvents -s paid -b 2024-05-01#00:00:00:000 -e now -d false
      rocketstore printMsg -t OrderEvents --sql92 "region IN ('eu', 'us')"
    """
    subscription = subscription_of(sub, sql92)
    with ctx.open_read_only(broker_limits=True) as store:
        # mqadmin walks the (parent's) route's read queues in its HashSet's order; a queue
        # the route has and the store lacks is empty.
        route_topic = topic if lmq_parent is None else lmq_parent
        queue_ids = subscribe_queue_ids(store, route_topic, ctx.broker_name)
        present = set(store.topics().get(topic, []))
        ranges = [
            (queue_id, *searched_range(store, topic, queue_id, begin, end))
            if queue_id in present
            else (queue_id, 0, 0)  # a queue the route has and the store has not: empty
            for queue_id in queue_ids
        ]
        total = sum(max(high - low, 0) for _, low, high in ranges)
        with progress(total, "printMsg", streams_stdout=True, unit="messages") as bar:
            for queue_id, low, high in ranges:
                mq = message_queue(topic, queue_id, ctx.broker_name)
                if not ctx.as_json:
                    click.echo(f"minOffset={low}, maxOffset={high}, {mq}")
                for step in tools_pulls(
                    store, topic, queue_id, low, high, subscription, bar, exact=ctx.as_json
                ):
                    if ctx.as_json:
                        for message in step.messages:
                            ctx.emit(message_json(message, with_body=print_body))
                        continue
                    for message in step.messages:
                        line = message_line(
                            message, step.span, print_body, charset, ctx.broker_name
                        )
                        click.echo(line)
                    if step.status is not PullStatus.FOUND:
                        click.echo(empty_pull_line(mq, step.status, step.next_offset))
                if not ctx.as_json:
                    click.echo(QUEUE_SEPARATOR)


@click.command("printMsgByQueue", short_help="One queue: its messages and per-tag counts.")
@click.option("-t", "--topic", required=True, help="Topic. Example: -t OrderEvents")
@click.option(
    "-i", "--queueId", "queue_id", type=java_int(0), required=True, help="Queue id. Example: -i 0"
)
@click.option(
    "-a",
    "--brokerName",
    "broker",
    default=None,
    help="Accepted for mqadmin compatibility, ignored offline. Example: -a broker-a",
)
@_charset_filter_options
@click.option(
    "-p",
    "--print",
    "print_messages",
    type=click.BOOL,
    default=False,
    show_default=True,
    help="Print each message (true|false). Example: -p true",
)
@click.option(
    "-d",
    "--printBody",
    "print_body",
    type=click.BOOL,
    default=False,
    show_default=True,
    help="Print bodies when printing messages (true|false). Example: -d true",
)
@click.option(
    "-f",
    "--calculate",
    "by_tag",
    type=click.BOOL,
    default=False,
    show_default=True,
    help="Count messages per tag, most frequent first (true|false). Example: -f true",
)
@click.pass_obj
def print_msg_by_queue(
    ctx: CliContext,
    topic: str,
    queue_id: int,
    broker: str | None,
    charset: str,
    sub: str,
    sql92: str | None,
    begin: int | None,
    end: int | None,
    print_messages: bool,
    print_body: bool,
    by_tag: bool,
) -> None:
    """One queue of TOPIC: its offset range, optionally its messages (-p true) and the
    number of messages per tag (-f true).

    \b
    Example:
      rocketstore printMsgByQueue -t OrderEvents -i 0 -f true
      rocketstore printMsgByQueue -t OrderEvents -i 0 -p true -d true -s created
      rocketstore printMsgByQueue -t OrderEvents -i 0 -f true --sql92 "amount > 100"
    """
    subscription = subscription_of(sub, sql92)
    counts: Counter[str] = Counter()
    with ctx.open_read_only(broker_limits=True) as store:
        require_queue(store, topic, queue_id)
        low, high = searched_range(store, topic, queue_id, begin, end)
        with progress(
            max(high - low, 0), "printMsgByQueue", streams_stdout=print_messages, unit="messages"
        ) as bar:
            for step in tools_pulls(
                store, topic, queue_id, low, high, subscription, bar, exact=ctx.as_json
            ):
                if step.status is not PullStatus.FOUND:
                    break  # mqadmin ends the queue at any other status, NO_MATCHED_MSG too
                for message in step.messages:
                    if by_tag and message.tags is not None and message.tags.strip():
                        counts[message.tags] += 1  # (blank tags are not counted)
                    if not print_messages:
                        continue
                    if ctx.as_json:
                        ctx.emit(message_json(message, with_body=print_body))
                    else:
                        line = message_line(
                            message, step.span, print_body, charset, ctx.broker_name
                        )
                        click.echo(line)
    # Most frequent first; equal counts in the order mqadmin's HashMap of tags holds them
    # (a stable sort of that order).
    ranked = sorted(java_hashmap_order(counts), key=lambda tag: -counts[tag])
    for tag in ranked:
        if ctx.as_json:
            ctx.emit({"tag": tag, "count": counts[tag]})
        else:
            click.echo(f"Tag: {tag:<30} Count: {counts[tag]}")


def register(group: click.Group) -> None:
    group.add_command(print_msg)
    group.add_command(print_msg_by_queue)
