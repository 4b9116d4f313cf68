"""queryMsgTraceById: the message trace of a message id, read offline from the trace
topic's messages, printed as mqadmin prints it.

Layer: cli. Read-only. Trace messages (``RMQ_SYS_TRACE_TOPIC`` unless the producers chose
another) are indexed by the traced message's id; their bodies are decoded by
:mod:`rocketstore.cli.trace_data`. As mqadmin: a ``Pub`` entry is a table of its own; the
``SubAfter`` entries are grouped by consumer group, the groups in the order of the HashMap
mqadmin collects them in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from rocketstore.cli.context import CliContext, hidden_alias, require_topic
from rocketstore.cli.params import java_int, java_long
from rocketstore.cli.render import java_ip, readable_body
from rocketstore.cli.timeparse import format_seconds
from rocketstore.cli.trace_data import TraceEntry, decode_trace_data
from rocketstore.config import parse_host
from rocketstore.errors import ConfigError
from rocketstore.format.javahash import hashmap_bucket, hashmap_capacity
from rocketstore.format.message import MessageExt
from rocketstore.java_ints import JAVA_LONG_MAX
from rocketstore.paths import TRACE_TOPIC

F = TypeVar("F", bound=Callable[..., Any])
ROW = "{:<10} {:<20} {:<20} {:<20} {:<10} {:<10}"


def born_host_string(message: MessageExt) -> str:
    """``MessageExt.getBornHostString()``: the born host's IP as Java writes it (IPv6
    in full, without brackets, groups without leading zeros)."""
    try:
        ip, _port = parse_host(message.born_host)
    except ConfigError:
        return message.born_host
    return java_ip(ip)


def _hashmap_order(keys: list[str | None]) -> list[str | None]:
    """Iteration order of a HashMap(16) the keys were put into in this order; a null
    key lives in bucket 0 (among the others there, by insertion)."""
    capacity = hashmap_capacity(len(keys), 16)
    buckets = [0 if key is None else hashmap_bucket(key, capacity) for key in keys]
    return [key for _, _, key in sorted(zip(buckets, range(len(keys)), keys, strict=True))]


def _row(kind: str, entry: TraceEntry, host: str) -> str:
    status = "success" if entry.success else "failed"
    group = "null" if entry.group_name is None else entry.group_name
    return ROW.format(
        kind, group, host, format_seconds(entry.timestamp), f"{entry.cost_time}ms", status
    )


def _ms_option(short: str, name: str, dest: str, default: int, which: str) -> Callable[[F], F]:
    """A store-time bound in epoch ms, within a Java long (as mqadmin's Long.parseLong)."""
    return click.option(
        short,
        name,
        dest,
        type=java_long(),
        default=default,
        help=f"{which} store time of a trace message (ms). Example: {short} 1676730526212",
    )


@click.command("queryMsgTraceById", short_help="The trace of a message (producer, consumers).")
@click.option(
    "-i",
    "--msgId",
    "msg_id",
    required=True,
    help="The traced message's id. Example: -i 7F0000010C2418B4AAC2773F5E1B0000",
)
@click.option(
    "-t",
    "--traceTopic",
    "trace_topic",
    default=TRACE_TOPIC,
    show_default=True,
    help="The trace topic. Example: -t RMQ_SYS_TRACE_TOPIC",
)
@_ms_option("-b", "--beginTimestamp", "begin", 0, "Earliest")
@_ms_option("-e", "--endTimestamp", "end", JAVA_LONG_MAX, "Latest")
@click.option(
    "-c",
    "--maxNum",
    "max_num",
    type=java_int(),
    default=64,
    show_default=True,
    help="Most trace messages to read. Example: -c 16",
)
@click.pass_obj
def query_msg_trace_by_id(
    ctx: CliContext, msg_id: str, trace_topic: str, begin: int, end: int, max_num: int
) -> None:
    """The trace of message MSGID as its producer's and consumers' trace hooks recorded it
    in the trace topic: the send (Pub) and each consumer group's consumes (SubAfter).

    \b
    Example:
      rocketstore queryMsgTraceById -i 7F0000010C2418B4AAC2773F5E1B0000
    """
    msg_id = msg_id.strip()
    with ctx.open_read_only() as store:
        require_topic(store, trace_topic)
        found = store.query_messages(trace_topic, msg_id, max_num, begin, end)
    views: list[tuple[TraceEntry, str]] = []
    for message in found:
        # The trace producer compresses bodies of 4 KiB and more; the admin's decode
        # inflates them (clientDecode), as readable_body does.
        body = readable_body(message).decode("utf-8", errors="replace")
        host = born_host_string(message)
        views.extend((e, host) for e in decode_trace_data(body) if e.msg_id == msg_id)
    if ctx.as_json:
        for entry, host in views:
            ctx.emit(
                {
                    "type": entry.kind,
                    "msgId": entry.msg_id,
                    "group": entry.group_name,
                    "clientHost": host,
                    "timestamp": entry.timestamp,
                    "costTime": entry.cost_time,
                    "status": "success" if entry.success else "failed",
                }
            )
        return
    consumers: dict[str | None, list[tuple[TraceEntry, str]]] = {}
    for entry, host in views:
        if entry.kind == "Pub":
            click.echo(ROW.format(
                "#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes", "#Status"
            ))  # fmt: skip
            click.echo(_row("Pub", entry, host))
            click.echo("")
        elif entry.kind == "SubAfter":
            consumers.setdefault(entry.group_name, []).append((entry, host))
    for group in _hashmap_order(list(consumers)):
        click.echo(ROW.format(
            "#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime", "#CostTimes", "#Status"
        ))  # fmt: skip
        for entry, host in consumers[group]:
            click.echo(_row("Sub", entry, host))
        click.echo("")


def register(group: click.Group) -> None:
    group.add_command(query_msg_trace_by_id)
    # mqadmin 5's alias.
    group.add_command(hidden_alias(query_msg_trace_by_id, "QueryMsgTraceById"))
