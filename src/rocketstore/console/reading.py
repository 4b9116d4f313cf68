"""What the console's pages show, as plain data: topics and their queues, consumer groups
and their lag per queue, message searches, one message with its consume track, DLQ
messages, the store's health.

Layer: console. Reads through MessageStore's public methods and the broker's config
managers only; never writes. Each function takes the request's :class:`Snapshot`.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass, field

from rocketstore.broker.subscription_groups import BUILTIN_GROUPS, is_system_group
from rocketstore.console.source import Snapshot
from rocketstore.errors import StoreError
from rocketstore.format.body_compression import inflate
from rocketstore.format.message import MessageExt
from rocketstore.format.message_id import decode_offset_msg_id
from rocketstore.java_ints import JAVA_LONG_MAX
from rocketstore.paths import DLQ_PREFIX, RETRY_PREFIX

# The group name the console's reads pull with (never committed anywhere).
CONSOLE_GROUP = "rocketstore_console"
# Messages a search or a page lists at most.
PAGE_SIZE = 50
# Body bytes a message page shows (the rest is cut, and said so).
BODY_SHOWN_BYTES = 64 * 1024


def format_ms(epoch_ms: int) -> str:
    """Local time with milliseconds; an empty string for none (<= 0)."""
    if epoch_ms <= 0:
        return ""
    seconds, ms = divmod(epoch_ms, 1000)
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds)) + f".{ms:03d}"


def topic_kind(topic: str) -> str:
    if topic.startswith(RETRY_PREFIX):
        return "retry"
    if topic.startswith(DLQ_PREFIX):
        return "dlq"
    return "normal"


@dataclass(frozen=True)
class QueueRow:
    topic: str
    queue_id: int
    min_offset: int
    max_offset: int
    last_update_ms: int  # store time of the last message, 0: none

    @property
    def messages(self) -> int:
        return self.max_offset - self.min_offset


@dataclass(frozen=True)
class TopicRow:
    topic: str
    kind: str
    queues: list[QueueRow]
    configured: bool  # in config/topics.json (or the broker's table)
    read_queue_nums: int | None
    write_queue_nums: int | None
    perm: int | None

    @property
    def messages(self) -> int:
        return sum(q.messages for q in self.queues)

    @property
    def last_update_ms(self) -> int:
        return max((q.last_update_ms for q in self.queues), default=0)


def queue_rows(snap: Snapshot, topic: str, queue_ids: list[int] | None = None) -> list[QueueRow]:
    """``queue_ids``: the topic's queues when the caller has listed them (a listing reads
    every queue's state: once per page, not once per topic)."""
    store = snap.store
    rows = []
    for queue_id in store.topics().get(topic, []) if queue_ids is None else queue_ids:
        low, high = store.min_offset(topic, queue_id), store.max_offset(topic, queue_id)
        last = store.message_store_time(topic, queue_id, high - 1) if high > low else 0
        rows.append(QueueRow(topic, queue_id, low, high, max(last, 0)))
    return rows


def topic_rows(snap: Snapshot, *, with_system: bool = True) -> list[TopicRow]:
    in_store = snap.store.topics()
    configs = {c.topic_name: c for c in snap.topics.all()}
    rows = []
    for topic in sorted(set(in_store) | set(configs)):
        if not with_system and snap.topics.is_system_topic(topic) and topic not in in_store:
            continue
        config = configs.get(topic)
        rows.append(
            TopicRow(
                topic,
                topic_kind(topic),
                queue_rows(snap, topic, in_store.get(topic, [])),
                config is not None,
                config.read_queue_nums if config else None,
                config.write_queue_nums if config else None,
                config.perm if config else None,
            )
        )
    return rows


@dataclass(frozen=True)
class LagRow:
    topic: str
    queue_id: int
    broker_offset: int
    consumer_offset: int | None  # None: the group has no committed offset for the queue
    last_consumed_ms: int  # store time of the last consumed message, 0: none

    @property
    def lag(self) -> int:
        return max(self.broker_offset - max(self.consumer_offset or 0, 0), 0)


@dataclass(frozen=True)
class GroupRow:
    group: str
    topics: list[str]
    lag: int
    online: bool
    configured: bool


def group_lag(
    snap: Snapshot, group: str, known: dict[str, list[int]] | None = None
) -> list[LagRow]:
    """Per queue of each topic the group has offsets for (and its retry topic): the
    queue's max offset, the group's committed offset, the difference. ``known``: the
    store's topics and queues when the caller has listed them."""
    store = snap.store
    known = store.topics() if known is None else known
    rows = []
    topics = set(snap.offsets.topics_of_group(group))
    if RETRY_PREFIX + group in known:
        topics.add(RETRY_PREFIX + group)
    for topic in sorted(topics):
        committed = snap.offsets.query_queues(group, topic)
        config = snap.topics.get(topic)
        # As the broker's ConsumeStats: every read queue of the topic, and those on disk.
        configured = range(config.read_queue_nums) if config is not None else range(0)
        for queue_id in sorted(set(known.get(topic, [])) | set(committed) | set(configured)):
            broker_offset = max(store.max_offset(topic, queue_id), 0)
            consumer = committed.get(queue_id)
            last = 0
            if consumer is not None and consumer > 0:
                last = max(store.message_store_time(topic, queue_id, consumer - 1), 0)
            rows.append(LagRow(topic, queue_id, broker_offset, consumer, last))
    return rows


def group_names(snap: Snapshot, known: dict[str, list[int]] | None = None) -> list[str]:
    known = snap.store.topics() if known is None else known
    names = set(snap.offsets.groups())
    names.update(
        c.group_name
        for c in snap.groups.all()
        if not is_system_group(c.group_name) and c.group_name not in BUILTIN_GROUPS
    )
    names.update(t[len(RETRY_PREFIX) :] for t in known if t.startswith(RETRY_PREFIX))
    return sorted(names)


def group_rows(snap: Snapshot, online: set[str]) -> list[GroupRow]:
    configured = {c.group_name for c in snap.groups.all()}
    known = snap.store.topics()
    rows = []
    for group in group_names(snap, known):
        lag = group_lag(snap, group, known)
        rows.append(
            GroupRow(
                group,
                sorted({r.topic for r in lag}),
                sum(r.lag for r in lag),
                group in online,
                group in configured,
            )
        )
    return rows


# --- messages ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Track:
    """RocketMQ's MessageTrack for one group: CONSUMED when its committed offset in the
    message's queue is past the message, NOT_CONSUME_YET otherwise; ``online`` when a
    client of the group is connected (live only)."""

    group: str
    committed: int | None
    track_type: str
    online: bool


def consume_tracks(
    snap: Snapshot, message: MessageExt, online: set[str], subscribed: frozenset[str] = frozenset()
) -> list[Track]:
    """Per group that consumes the message's topic (QUERY_TOPIC_CONSUME_BY_WHO: those with
    offsets on it, and, live, those with a client subscribed to it)."""
    tracks = []
    for group in sorted(snap.offsets.groups_of_topic(message.topic) | subscribed):
        committed = snap.offsets.query(group, message.topic, message.queue_id)
        consumed = committed is not None and committed > message.queue_offset
        kind = "CONSUMED" if consumed else "NOT_CONSUME_YET"
        tracks.append(Track(group, committed, kind, group in online))
    return tracks


@dataclass(frozen=True)
class Body:
    text: str
    json: str | None  # pretty-printed when the body is a JSON document
    hex: str
    size: int
    cut: bool  # only the first BODY_SHOWN_BYTES are shown
    inflated: bool  # the stored body was compressed and is shown inflated


def hex_dump(data: bytes) -> str:
    lines = []
    for start in range(0, len(data), 16):
        chunk = data[start : start + 16]
        hexes = " ".join(f"{b:02x}" for b in chunk)
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{start:08x}  {hexes:<47}  {text}")
    return "\n".join(lines)


def body_of(message: MessageExt) -> Body:
    stored = message.body or b""
    try:
        body = inflate(stored, message.sys_flag)
    except StoreError:
        body = stored
    shown = body[:BODY_SHOWN_BYTES]
    text = shown.decode("utf-8", errors="replace")
    pretty = None
    if len(body) <= BODY_SHOWN_BYTES:
        try:
            pretty = json.dumps(json.loads(body), indent=2, ensure_ascii=False)
        except (ValueError, UnicodeDecodeError):
            pretty = None
    return Body(
        text, pretty, hex_dump(shown), len(body), len(body) > len(shown), body is not stored
    )


@dataclass
class SearchResult:
    messages: list[MessageExt] = field(default_factory=list)
    error: str | None = None
    note: str | None = None


def search_by_key(snap: Snapshot, topic: str, key: str, begin_ms: int, end_ms: int) -> SearchResult:
    found = snap.store.query_messages(topic, key, PAGE_SIZE, begin_ms, end_ms or JAVA_LONG_MAX)
    return SearchResult(found)


def search_by_unique_key(snap: Snapshot, topic: str, uniq_key: str) -> SearchResult:
    topics = [topic] if topic else sorted(snap.store.topics())
    found: list[MessageExt] = []
    for name in topics:
        found.extend(snap.store.query_by_unique_key(name, uniq_key, PAGE_SIZE))
    return SearchResult(found[:PAGE_SIZE])


def search_by_msg_id(snap: Snapshot, topic: str, msg_id: str) -> SearchResult:
    """An offsetMsgId (store host and CommitLog offset); failing that, the id as a
    UNIQ_KEY (the client's msgId), as the dashboard's message id search does."""
    msg_id = msg_id.strip()
    try:
        decode_offset_msg_id(msg_id)
        message = snap.store.view_message(msg_id)
    except StoreError:
        message = None
    if message is not None and (not topic or message.topic == topic):
        return SearchResult([message])
    result = search_by_unique_key(snap, topic, msg_id)
    if not result.messages:
        result.note = "no message has this offsetMsgId or UNIQ_KEY"
    return result


def search_by_time(snap: Snapshot, topic: str, begin_ms: int, end_ms: int) -> SearchResult:
    """The first messages stored in [begin_ms, end_ms], queue by queue."""
    store = snap.store
    end_ms = end_ms or JAVA_LONG_MAX
    found: list[MessageExt] = []
    for queue_id in store.topics().get(topic, []):
        start = store.offset_by_time(topic, queue_id, begin_ms)
        while len(found) < PAGE_SIZE:
            got = store.get_messages(CONSOLE_GROUP, topic, queue_id, start, PAGE_SIZE)
            inside = [m for m in got.messages if begin_ms <= m.store_timestamp <= end_ms]
            found.extend(inside)
            if not got.messages or got.messages[-1].store_timestamp > end_ms:
                break
            if got.next_begin_offset <= start:
                break
            start = got.next_begin_offset
    found.sort(key=lambda m: (m.store_timestamp, m.queue_id, m.queue_offset))
    result = SearchResult(found[:PAGE_SIZE])
    if len(found) > PAGE_SIZE:
        result.note = f"the first {PAGE_SIZE} shown: narrow the time range for the rest"
    return result


def messages_at(snap: Snapshot, topic: str, queue_id: int, queue_offset: int) -> SearchResult:
    """Up to a page of a queue's messages from ``queue_offset`` on."""
    got = snap.store.get_messages(CONSOLE_GROUP, topic, queue_id, queue_offset, PAGE_SIZE)
    result = SearchResult(got.messages[:PAGE_SIZE])
    if not got.messages:
        result.note = (
            f"no message at {topic}-{queue_id} offset {queue_offset} ({got.status.name}; "
            f"the queue holds {got.min_offset} to {got.max_offset})"
        )
    return result


def message_at(snap: Snapshot, commit_log_offset: int) -> MessageExt | None:
    return snap.store.look_message(commit_log_offset)


# --- health -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Disk:
    path: str
    total_bytes: int
    free_bytes: int
    store_bytes: int  # the files under the store directory (CommitLog, queues, index...)

    @property
    def used_ratio(self) -> float:
        return 1 - self.free_bytes / self.total_bytes if self.total_bytes else 0.0


def disk_of(root: str) -> Disk:
    usage = shutil.disk_usage(root)
    size = 0
    for directory, _dirs, files in os.walk(root):
        for name in files:
            try:
                # Blocks in use, not the preallocated length a sparse file claims.
                size += os.stat(os.path.join(directory, name)).st_blocks * 512
            except OSError:
                continue
    return Disk(root, usage.total, usage.free, size)
