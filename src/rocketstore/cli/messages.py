"""Message lookups with mqadmin's names and short flags, offline: queryMsgByKey,
queryMsgById, queryMsgByUniqueKey, queryMsgByOffset, decodeMessageId.

Layer: cli. Read-only: these commands never take the writer lock.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import click

from rocketstore.broker.consumer_offsets import ConsumerOffsets
from rocketstore.cli.context import (
    CLI_GROUP,
    CliContext,
    CliError,
    hidden_alias,
    require_queue,
    require_topic,
)
from rocketstore.cli.params import java_int, java_long
from rocketstore.cli.render import (
    BodyOptions,
    body_options,
    client_msg_id,
    make_body_options,
    message_block,
    message_json,
    pulled_properties,
)
from rocketstore.cli.timeparse import (
    HUMAN_FORMAT_HELP,
    TIME,
    format_hash_time,
    format_time,
    now_ms,
)
from rocketstore.errors import CorruptDataError
from rocketstore.format.javahash import java_hashmap_order
from rocketstore.format.message import MessageExt
from rocketstore.format.message_id import (
    decode_offset_msg_id,
    hex_to_bytes,
    uniq_key_ip,
    uniq_key_timestamp,
)
from rocketstore.java_ints import JAVA_LONG_MAX
from rocketstore.status import GetStatus
from rocketstore.store import MessageStore


def consuming_groups(offsets: ConsumerOffsets, topic: str) -> list[str]:
    """The groups mqadmin tracks a message of ``topic`` for (and topicList -c lists with
    it): those the broker says consume it (QUERY_TOPIC_CONSUME_BY_WHO: the groups with
    committed offsets for it, and online subscribers, of which there are none offline),
    in the order of the HashSet mqadmin reads them into."""
    return java_hashmap_order(sorted(offsets.groups_of_topic(topic)))


def message_tracks(offsets: ConsumerOffsets, message: MessageExt) -> str:
    """mqadmin's MessageTrack text for the message, the tracks back to back as it prints
    them. Offline no consumer is connected, so each group's track is the broker's
    CONSUMER_NOT_ONLINE (206) answer, as mqadmin prints it for a broker serving this store
    before its consumers connect; whether each group has consumed the message is in the
    --json output (``consumerTracks``)."""
    return "".join(
        f"MessageTrack [consumerGroup={group}, trackType=NOT_ONLINE, "
        f"exceptionDesc=CODE:206 DESC:the consumer group[{group}] not online]"
        for group in consuming_groups(offsets, message.topic)
    )


def consumer_tracks(offsets: ConsumerOffsets, message: MessageExt) -> list[dict[str, Any]]:
    """Per tracked group: its committed offset in the message's queue and whether that is
    past the message (the message was consumed)."""
    tracks = []
    for group in consuming_groups(offsets, message.topic):
        committed = offsets.query(group, message.topic, message.queue_id)
        tracks.append(
            {
                "consumerGroup": group,
                "committedOffset": committed,
                "consumed": committed is not None and committed > message.queue_offset,
            }
        )
    return tracks


def _consumer_offsets(root: str) -> ConsumerOffsets | None:
    try:
        return ConsumerOffsets(root)
    except (CorruptDataError, OSError) as e:
        click.echo(f"rocketstore: warning: consumer offsets not shown: {e}", err=True)
        return None


def print_messages(
    ctx: CliContext,
    store: MessageStore,
    messages: Iterable[MessageExt],
    body: BodyOptions,
    *,
    offset_id: bool = True,
    numbered: bool = False,
) -> None:
    """Each message as mqadmin's block, then, after two line breaks, its consumer tracks
    (or ``WARN: No Consumer``) with no line break after them: mqadmin prints them so, and
    the next block starts on the same line. Or each as one JSON object, with its
    ``consumerTracks``. ``numbered``: the n-th match's body file is ``<msgId>_<n>``
    (queryMsgByUniqueKey -a: they share a msgId)."""
    offsets = _consumer_offsets(store.root)
    printed = False
    for n, message in enumerate(messages):
        if ctx.as_json:
            obj = message_json(message, body)
            obj["consumerTracks"] = [] if offsets is None else consumer_tracks(offsets, message)
            ctx.emit(obj)
            continue
        # mqadmin names the body file by the client's msgId (the UNIQ_KEY, else the
        # offsetMsgId); queryMsgByUniqueKey adds _n after the first match.
        name = client_msg_id(message)
        if numbered and n > 0:
            name = f"{name}_{n}"
        for line in message_block(message, body, offset_id=offset_id, body_name=name):
            click.echo(line)
        tracks = message_tracks(offsets, message) if offsets is not None else ""
        click.echo("\n\n" + (tracks or "WARN: No Consumer"), nl=False)
        printed = True
    if printed:
        click.echo()  # (mqadmin ends without one; a shell prompt is better on its own line)


@click.command(
    "queryMsgByKey", short_help="Messages of a topic by a KEYS token (through the index)."
)
@click.option("-t", "--topic", required=True, help="Topic. Example: -t OrderEvents")
@click.option("-k", "--msgKey", "key", required=True, help="One KEYS token. Example: -k order-42")
@click.option(
    "-b",
    "--beginTimestamp",
    "begin",
    type=TIME,
    default=0,
    help=f"Earliest store time, {HUMAN_FORMAT_HELP} [default: 0]. "
    "Example: -b 2024-05-01#00:00:00:000",
)
@click.option(
    "-e",
    "--endTimestamp",
    "end",
    type=TIME,
    default=JAVA_LONG_MAX,
    help=f"Latest store time, {HUMAN_FORMAT_HELP} [default: Long.MAX]. Example: -e now",
)
@click.option(
    "-m",
    "--maxNum",
    "max_num",
    type=java_int(1),
    default=64,
    show_default=True,
    help="At most this many (the newest). Example: -m 10",
)
@click.pass_obj
def query_by_key(ctx: CliContext, topic: str, key: str, begin: int, end: int, max_num: int) -> None:
    """Messages of TOPIC whose KEYS contain KEY, through the index.

    Prints mqadmin's table (#Message ID is the client's msgId, the UNIQ_KEY, as mqadmin
    shows it: queryMsgByUniqueKey takes it; the offsetMsgId when a message has none);
    --json prints every field of each message, the offsetMsgId as msgId.

    \b
    Example:
      rocketstore queryMsgByKey -t OrderEvents -k order-42
      rocketstore --json queryMsgByKey -t OrderEvents -k order-42 -b 2024-05-01#00:00:00:000
    """
    if begin > end:
        raise click.BadParameter(f"begin {begin} is after end {end}", param_hint="-b/-e")
    with ctx.open_read_only() as store:
        require_topic(store, topic)
        found = store.query_messages(topic, key, max_num, begin, end)
        if not found:
            # mqadmin's client fails the query with these words (and prints no table).
            raise CliError(
                f"query message by key finished, but no message. (no message of {topic} "
                f"with key {key} stored in [{begin}, {end}])"
            )
        if ctx.as_json:
            for m in found:
                ctx.emit(message_json(m))
            return
        click.echo(f"{'#Message ID':<50} {'#QID':>4} {'#Offset':>40}")
        for m in found:
            # The client's msgId as mqadmin shows it (MessageClientExt.getMsgId: the
            # UNIQ_KEY, else the offsetMsgId): queryMsgByUniqueKey takes it.
            shown = m.uniq_key or m.msg_id
            click.echo(f"{shown:<50} {m.queue_id:>4} {m.queue_offset:>40}")


@click.command("queryMsgById", short_help="Messages by offsetMsgId (a comma-separated list).")
@click.option(
    "-i",
    "--msgId",
    "msg_ids",
    required=True,
    help="offsetMsgId, or several separated by commas. "
    "Example: -i 7F00000100002A9F0000000000000000",
)
@click.option(
    "-t",
    "--topic",
    default=None,
    help="Topic; with it an id that is not an offsetMsgId is tried as a UNIQ_KEY "
    "(as mqadmin 5 does). Example: -t OrderEvents",
)
@body_options
@click.pass_obj
def query_by_id(
    ctx: CliContext,
    msg_ids: str,
    topic: str | None,
    body_format: str | None,
    body_dir: str | None,
) -> None:
    """Messages by offsetMsgId (store host + CommitLog offset, 32 hex digits for IPv4).

    Prints mqadmin's block per message; exits 1 if any id is not found.

    \b
    Example:
      rocketstore queryMsgById -i 7F00000100002A9F0000000000000000
      rocketstore queryMsgById -i ID1,ID2 --body-dir /tmp/bodies
    """
    body = make_body_options(body_format, body_dir)
    ids = [part.strip() for part in msg_ids.split(",") if part.strip()]
    if not ids:
        raise click.BadParameter("no message id given", param_hint="-i")
    missing: list[str] = []
    notes: list[str] = []
    found: list[MessageExt] = []
    with ctx.open_read_only() as store:
        if topic is not None:
            require_topic(store, topic)
        for msg_id in ids:
            message: MessageExt | None = None
            try:
                decode_offset_msg_id(msg_id)
            except CorruptDataError as e:
                if topic is None:
                    raise CliError(f"malformed offsetMsgId: {e.reason}") from e
            else:
                message = store.view_message(msg_id)
                if message is not None and message.msg_id.upper() != msg_id.upper():
                    # The id names another broker's record at this offset (an offsetMsgId
                    # is the storing broker's address and the offset): not this store's.
                    notes.append(
                        f"{msg_id}: the record at CommitLog offset {message.commit_log_offset} "
                        f"was stored by {message.store_host} (offsetMsgId {message.msg_id}), "
                        f"not by the broker the id names"
                    )
                    message = None
            if message is None and topic is not None:
                by_uniq = store.query_by_unique_key(topic, msg_id)
                message = by_uniq[0] if by_uniq else None
            if message is None:
                missing.append(msg_id)
                continue
            found.append(message)
        print_messages(ctx, store, found, body)
    if missing:
        if not ctx.as_json:
            click.echo("\nMessage not found!")  # mqadmin's words, on stdout
        hint = "" if topic else " (a client msgId/UNIQ_KEY needs -t TOPIC or queryMsgByUniqueKey)"
        for note in notes:
            click.echo(f"rocketstore: note: {note}", err=True)
        raise CliError(f"Message not found: {', '.join(missing)}{hint}")


@click.command(
    "queryMsgByUniqueKey", short_help="Messages of a topic by UNIQ_KEY (the client's msgId)."
)
@click.option("-t", "--topic", required=True, help="Topic. Example: -t OrderEvents")
@click.option(
    "-i",
    "--msgId",
    "uniq_key",
    required=True,
    help="The client's msgId (UNIQ_KEY property). Example: -i 0A0000011F9A18B4AAC2...",
)
@click.option(
    "-a",
    "--showAll",
    "show_all",
    is_flag=True,
    help="Print every match (up to 32), not only the first. Example: -a",
)
@body_options
@click.pass_obj
def query_by_unique_key(
    ctx: CliContext,
    topic: str,
    uniq_key: str,
    show_all: bool,
    body_format: str | None,
    body_dir: str | None,
) -> None:
    """Messages of TOPIC by UNIQ_KEY (the msgId a RocketMQ client reports), oldest first.

    A resent message shares its UNIQ_KEY; -a shows every copy.

    \b
    Example:
      rocketstore queryMsgByUniqueKey -t OrderEvents -i 0A0000011F9A18B4AAC2623E5C8E0000 -a
    """
    body = make_body_options(body_format, body_dir)
    with ctx.open_read_only() as store:
        require_topic(store, topic)
        found = store.query_by_unique_key(topic, uniq_key.strip())
        if not found:
            raise CliError(f"Message not found: no message with UNIQ_KEY {uniq_key} in {topic}")
        print_messages(
            ctx, store, found if show_all else found[:1], body, offset_id=False, numbered=show_all
        )


@click.command("queryMsgByOffset", short_help="The message at a queue offset.")
@click.option("-t", "--topic", required=True, help="Topic. Example: -t OrderEvents")
@click.option(
    "-i", "--queueId", "queue_id", type=java_int(), required=True, help="Queue id. Example: -i 0"
)
@click.option(
    "-o",
    "--offset",
    "queue_offset",
    type=java_long(),
    required=True,
    help="Queue offset. Example: -o 17",
)
@click.option(
    "-b",
    "--brokerName",
    "broker",
    default=None,
    help="Accepted for mqadmin compatibility, ignored offline. Example: -b broker-a",
)
@body_options
@click.pass_obj
def query_by_offset(
    ctx: CliContext,
    topic: str,
    queue_id: int,
    queue_offset: int,
    broker: str | None,
    body_format: str | None,
    body_dir: str | None,
) -> None:
    """The message at a queue offset of TOPIC's queue QUEUEID.

    \b
    Example:
      rocketstore queryMsgByOffset -t OrderEvents -i 0 -o 17
    """
    body = make_body_options(body_format, body_dir)
    with ctx.open_read_only() as store:
        require_queue(store, topic, queue_id)
        low, high = store.min_offset(topic, queue_id), store.max_offset(topic, queue_id)
        if not low <= queue_offset < high:
            valid = f"valid offsets are {low}..{high - 1}" if high > low else "the queue is empty"
            raise CliError(
                f"queue offset {queue_offset} is out of range for {topic}-{queue_id} ({valid})"
            )
        got = store.get_messages(CLI_GROUP, topic, queue_id, queue_offset, max_count=1)
        if got.status is not GetStatus.FOUND or got.messages[0].queue_offset != queue_offset:
            raise CliError(
                f"no message at {topic}-{queue_id} offset {queue_offset} "
                f"({got.status.name}: its record is no longer in the CommitLog)"
            )
        # mqadmin pulls it: the client adds the queue's bounds to its properties.
        found = got.messages[0]
        pulled = replace(found, properties=pulled_properties(found.properties, (low, high)))
        print_messages(ctx, store, [pulled], body)


@click.command("decodeMessageId", short_help="Decode an id as a UNIQ_KEY and as an offsetMsgId.")
@click.option(
    "-i",
    "--messageId",
    "msg_ids",
    required=True,
    help="An id, or several separated by commas. Example: -i 0A0000011F9A18B4AAC2623E5C8E0000",
)
@click.pass_obj
def decode_message_id(ctx: CliContext, msg_ids: str) -> None:
    """Decode a message id both ways (32 hex digits fit both; no store needed).

    As a client UNIQ_KEY: the producer's ip, pid and the time it was made (mqadmin's ip= and
    date=). As an offsetMsgId: the storing broker's host and the CommitLog offset.

    \b
    Example:
      rocketstore decodeMessageId -i 0A0000011F9A18B4AAC2623E5C8E0000
    """
    for msg_id in (part.strip() for part in msg_ids.split(",")):
        if not msg_id:
            continue
        decoded = _decode_both(msg_id)
        if ctx.as_json:
            ctx.emit(decoded)
            continue
        # mqadmin's two lines first (it prints them without line ends), then what else
        # the id holds: the producer's pid, and the id read as an offsetMsgId.
        uniq = decoded["uniqKey"]
        click.echo(f"ip={uniq['ip']}")
        click.echo(f"date={format_hash_time(uniq['timestamp'])}")
        click.echo(f"pid={uniq['pid']}")
        offset_id = decoded["offsetMsgId"]
        click.echo(
            f"as offsetMsgId: storeHost={offset_id['storeHost']} "
            f"commitLogOffset={offset_id['commitLogOffset']}"
        )
        click.echo()


def _decode_both(msg_id: str) -> dict[str, Any]:
    # The length first: hex_to_bytes calls an odd number of hex digits "not hexadecimal".
    if len(msg_id) not in (32, 56):
        raise CliError(
            f"malformed message id {msg_id!r}: a UNIQ_KEY or offsetMsgId has 32 (IPv4) or "
            f"56 (IPv6) hex digits, this has {len(msg_id)}"
        )
    try:
        raw = hex_to_bytes(msg_id, what="message id")
    except CorruptDataError as e:
        raise CliError(f"malformed message id: {e.reason}") from e
    ip_length = 16 if len(raw) == 28 else 4
    (pid,) = struct.unpack_from(">H", raw, ip_length)
    timestamp = uniq_key_timestamp(msg_id, now_ms())
    uniq = {
        "ip": uniq_key_ip(msg_id),
        "pid": pid,
        "timestamp": timestamp,
        "date": format_time(timestamp),
    }
    host, offset = decode_offset_msg_id(msg_id)
    return {
        "id": msg_id.upper(),
        "uniqKey": uniq,
        "offsetMsgId": {"storeHost": host, "commitLogOffset": offset},
    }


# mqadmin spells this one with a capital D; accept that too, without listing it twice.
decode_message_id_alias = hidden_alias(decode_message_id, "DecodeMessageId")


def register(group: click.Group) -> None:
    group.add_command(decode_message_id_alias)
    for command in (
        query_by_key,
        query_by_id,
        query_by_unique_key,
        query_by_offset,
        decode_message_id,
    ):
        group.add_command(command)
