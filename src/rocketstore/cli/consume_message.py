"""consumeMessage: pull up to N messages of a topic, or of one queue from an offset, and
print them as mqadmin's consumeMessage does.

Layer: cli. Read-only. mqadmin pulls with a tools consumer, at most 32 messages a pull
(the broker's cap), and prints ``Consume ok`` before each pull's messages; offline the
same pulls go to the store's getMessage. Its notices keep mqadmin's wording, typo
included ("The oldler ..."), so that scripts reading its output read ours.

One difference: across queues, mqadmin takes one message more off the count than each
queue gave (``countLeft - (max - min) - 1``), so it prints fewer messages than asked and,
once the count is spent, "The older -1 message ..." for every later queue. This counts
the messages printed.
"""

from __future__ import annotations

import time

import click

from rocketstore.cli.browse import message_line, queue_range
from rocketstore.cli.context import (
    CliContext,
    CliError,
    queue_bounds,
    require_queue,
)
from rocketstore.cli.params import java_int, java_long
from rocketstore.cli.render import message_json, message_queue
from rocketstore.cli.route_queues import subscribe_queue_ids
from rocketstore.cli.timeparse import HUMAN_FORMAT_HELP, TIME
from rocketstore.cli.tools_pull import TOOLS_PULL_MAX, PullStatus, empty_pull_line, tools_pull
from rocketstore.format.selector import TAG
from rocketstore.format.subscription import SUB_ALL, build_subscription
from rocketstore.store import MessageStore

DEFAULT_COUNT = 128
# consumeMessage pulls with "*".
SUB_ALL_TAGS = build_subscription(SUB_ALL, TAG)


def _check_times(begin: int | None, end: int | None) -> None:
    now = int(time.time() * 1000)
    if begin is not None and begin > now:
        raise CliError("Please set the beginTimestamp before now!")
    if end is not None and end > now:
        raise CliError("Please set the endTimestamp before now!")
    if begin is not None and end is not None and begin > end:
        raise CliError(
            "Please make sure that the beginTimestamp is less than or equal to the endTimestamp"
        )


def _pull_range(ctx: CliContext, store: MessageStore, topic: str, queue_id: int, low: int,
                high: int, queue_end: int) -> None:  # fmt: skip
    """Print the messages of [low, high) a pull at a time; reaching the queue's end
    (``queue_end``) prints mqadmin's ``print msg finished`` line, as its last pull does."""
    mq = message_queue(topic, queue_id, ctx.broker_name)
    offset = low
    while offset < high:
        step = tools_pull(
            store, topic, queue_id, offset, SUB_ALL_TAGS, min(TOOLS_PULL_MAX, high - offset)
        )
        nxt = max(step.next_offset, offset)
        if step.status is PullStatus.FOUND:
            if not ctx.as_json:
                click.echo("Consume ok")
            for message in step.messages:
                if ctx.as_json:
                    ctx.emit(message_json(message))
                else:
                    click.echo(message_line(message, step.span, True, "UTF-8", ctx.broker_name))
        else:
            if not ctx.as_json:
                click.echo(empty_pull_line(mq, step.status, nxt))
            if step.status is not PullStatus.NO_MATCHED_MSG:
                return
        if nxt == offset:
            return
        offset = nxt
    if high >= queue_end and not ctx.as_json:
        click.echo(empty_pull_line(mq, PullStatus.NO_NEW_MSG, offset))


@click.command("consumeMessage", short_help="Pull and print up to N messages of a topic.")
@click.option("-t", "--topic", required=True, help="Topic. Example: -t OrderEvents")
@click.option(
    "-b",
    "--brokerName",
    "broker",
    default=None,
    help="Broker name (needed before -i; any name offline). Example: -b broker-a",
)
@click.option(
    "-i", "--queueId", "queue_id", type=java_int(0), default=None, help="Queue id. Example: -i 0"
)
@click.option(
    "-o",
    "--offset",
    type=java_long(),
    default=None,
    help="First queue offset (needs -i). Example: -o 100",
)
@click.option(
    "-g",
    "--consumerGroup",
    "group",
    default=None,
    help="Consumer group (accepted; offline nothing is committed). Example: -g my-group",
)
@click.option(
    "-s",
    "--beginTimestamp",
    "begin",
    type=TIME,
    default=None,
    help=f"Earliest store time, {HUMAN_FORMAT_HELP}. Example: -s 2024-05-01#00:00:00:000",
)
@click.option(
    "-e",
    "--endTimestamp",
    "end",
    type=TIME,
    default=None,
    help=f"Latest store time, {HUMAN_FORMAT_HELP}. Example: -e now",
)
@click.option(
    "-c",
    "--MessageNumber",
    "count",
    type=java_long(),
    default=DEFAULT_COUNT,
    show_default=True,
    help="How many messages at most. Example: -c 10",
)
@click.pass_obj
def consume_message(
    ctx: CliContext,
    topic: str,
    broker: str | None,
    queue_id: int | None,
    offset: int | None,
    group: str | None,
    begin: int | None,
    end: int | None,
    count: int,
) -> None:
    """Pull up to -c messages of TOPIC (the oldest of each queue in turn), or of one
    queue (-b, -i) from an offset (-o), within -s/-e, and print them as mqadmin's
    consumeMessage does.

    \b
    Example:
      rocketstore consumeMessage -t OrderEvents -c 10
      rocketstore consumeMessage -t OrderEvents -b broker-a -i 1 -o 190 -c 5
    """
    if count <= 0:
        raise CliError("Please input a positive messageNumber!")
    if queue_id is not None and broker is None:
        raise CliError("Please set the brokerName before queueId!")
    if offset is not None and queue_id is None:
        raise CliError("Please set queueId before offset!")
    _check_times(begin, end)
    with ctx.open_read_only(broker_limits=True) as store:
        if queue_id is None:
            left = count
            present = set(store.topics().get(topic, []))
            for each in subscribe_queue_ids(store, topic, ctx.broker_name):
                if left == 0:
                    return
                if each not in present:
                    continue  # a queue of the route without a consume queue: nothing in it
                low, high = queue_range(store, topic, each, begin, end)
                queue_end = queue_bounds(store, topic, each)[1]
                if high - low > left:
                    if not ctx.as_json:
                        click.echo(f"The older {left} message of the {each} queue will be provided")
                    high = low + left
                left -= high - low
                _pull_range(ctx, store, topic, each, low, high, queue_end)
            return
        require_queue(store, topic, queue_id)
        low, high = queue_range(store, topic, queue_id, begin, end)
        queue_end = queue_bounds(store, topic, queue_id)[1]
        start = offset or 0
        if start > high:
            if not ctx.as_json:
                mq = message_queue(topic, queue_id, ctx.broker_name)
                click.echo(f"{mq} no matched msg, offset={start}")
            return
        low = max(low, start)
        if high - low > count:
            if not ctx.as_json:
                click.echo(f"The oldler {count} message will be provided")
            high = low + count
        _pull_range(ctx, store, topic, queue_id, low, high, queue_end)


def register(group: click.Group) -> None:
    group.add_command(consume_message)
