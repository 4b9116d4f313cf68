"""Message commands with mqadmin's names (queryMsgByKey, queryMsgById, ...), offline.

Read-only commands never take the writer lock.
"""

from __future__ import annotations

import click

from rocketstore.cli.context import CliContext, message_json
from rocketstore.format.message import MessageExt


def _print_block(ctx: CliContext, message: MessageExt) -> None:
    if ctx.as_json:
        ctx.emit(message_json(message))
        return
    rows = [
        ("OffsetID:", message.msg_id),
        ("Topic:", message.topic),
        ("Tags:", f"[{message.tags or ''}]"),
        ("Keys:", f"[{message.keys or ''}]"),
        ("Queue ID:", message.queue_id),
        ("Queue Offset:", message.queue_offset),
        ("CommitLog Offset:", message.commit_log_offset),
        ("Reconsume Times:", message.reconsume_times),
        ("Born Timestamp:", message.born_timestamp),
        ("Store Timestamp:", message.store_timestamp),
        ("Born Host:", message.born_host),
        ("Store Host:", message.store_host),
        ("System Flag:", message.sys_flag),
        ("Properties:", message.properties),
        ("Message Body:", (message.body or b"").decode("utf-8", errors="replace")),
    ]
    for name, value in rows:
        click.echo(f"{name:<20} {value}")
    click.echo()


@click.command("queryMsgByKey")
@click.option("-t", "--topic", required=True, help="Topic.")
@click.option("-k", "--msgKey", "key", required=True, help="A KEYS token.")
@click.option("-b", "--beginTimestamp", "begin", default=0, type=int, help="Epoch ms.")
@click.option("-e", "--endTimestamp", "end", default=2**63 - 1, type=int, help="Epoch ms.")
@click.option("-m", "--maxNum", "max_num", default=64, type=int, help="Max messages.")
@click.pass_obj
def query_by_key(ctx: CliContext, topic: str, key: str, begin: int, end: int, max_num: int) -> None:
    """Messages of a topic by key. Example: rocketstore queryMsgByKey -t T -k order-1"""
    with ctx.open_read_only() as store:
        found = store.query_messages(topic, key, max_num, begin, end)
    if ctx.as_json:
        for m in found:
            ctx.emit(message_json(m))
        return
    click.echo(f"{'#Message ID':<50} {'#QID':>4} {'#Offset':>40}")
    for m in found:
        click.echo(f"{m.msg_id:<50} {m.queue_id:>4} {m.queue_offset:>40}")


@click.command("queryMsgById")
@click.option("-i", "--msgId", "msg_ids", required=True, help="offsetMsgId[,offsetMsgId...]")
@click.pass_obj
def query_by_id(ctx: CliContext, msg_ids: str) -> None:
    """Messages by offsetMsgId. Example: rocketstore queryMsgById -i 7F00...0000"""
    with ctx.open_read_only() as store:
        for msg_id in msg_ids.split(","):
            message = store.view_message(msg_id.strip())
            if message is None:
                raise click.ClickException(f"Message not found! ({msg_id.strip()})")
            _print_block(ctx, message)


def register(group: click.Group) -> None:
    group.add_command(query_by_key)
    group.add_command(query_by_id)
