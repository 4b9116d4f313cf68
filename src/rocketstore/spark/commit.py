"""The job commit of a write: staged messages appended through the store's own put path.

Layer: spark (top); runs on the driver. Opens the store as its single writer (the
directory lock), so a store another process writes (a broker, another job) fails the
commit with :class:`StoreLockedError` and appends nothing.

The commit is all or nothing for everything the store can refuse: every message is first
checked with the store's own preparer (topic, sizes, properties) before the first one is
appended. Then messages go in with ``put_batch`` in file order, the store is flushed
(CommitLog, queues, index, checkpoint) and closed: when the commit returns, the messages
are on disk.

A streaming sink passes its batch id: :mod:`.sink_log` makes a replayed batch (Spark
re-runs the last batch after a restart) append nothing, and a batch whose commit crashed
half-way append only what is missing.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from rocketstore.commitlog import PreparedMessage
from rocketstore.errors import ConfigError, StoreError, StoreLockedError
from rocketstore.files.atomic import read_with_backup
from rocketstore.format import properties as props
from rocketstore.format.message import Message
from rocketstore.paths import CONFIG_DIR
from rocketstore.put_path import Refusal, delay_level
from rocketstore.spark import sink_log
from rocketstore.spark.routing import QueueChooser
from rocketstore.spark.staging import read_staged
from rocketstore.store import MessageStore

log = logging.getLogger(__name__)

# A put_batch call: at most this many messages and body bytes (a batch must also fit in
# one CommitLog file; see _chunks).
CHUNK_MESSAGES = 1024
CHUNK_BODY_BYTES = 1024 * 1024
TOPICS_FILE = "topics.json"  # a broker's topic table (spec: store-format, config files)


@dataclass(frozen=True)
class CommitResult:
    appended: int
    skipped: int = 0  # already in the store from an earlier attempt of the same batch
    replayed: bool = False  # the whole batch was committed before: nothing appended


def open_writer(path: str) -> MessageStore:
    try:
        return MessageStore.open(path)
    except StoreLockedError as e:
        raise StoreLockedError(
            f"cannot write to store {path!r}: another process holds its writer lock ({e}). "
            "rocketstore appends through the store's single writer: stop that writer (a "
            "broker, another job) or write to another store"
        ) from e


def staged_messages(files: Sequence[str], chooser: QueueChooser) -> Iterator[Message]:
    """Messages of the staged files, in file order, each with its queue chosen."""
    for path in files:
        for batch in read_staged(path):
            columns = batch.to_pydict()
            for topic, queue_id, keys, tags, properties, body in zip(
                columns["topic"],
                columns["queue_id"],
                columns["keys"],
                columns["tags"],
                columns["properties"],
                columns["body"],
                strict=True,
            ):
                mapping = dict(properties) if properties else {}
                if keys is not None:
                    mapping[props.KEYS] = keys
                if tags is not None:
                    mapping[props.TAGS] = tags
                yield Message(
                    topic=topic,
                    body=body,
                    queue_id=chooser.choose(topic, queue_id, mapping.get(props.KEYS)),
                    properties=mapping,
                )


def configured_queues(store_root: str) -> dict[str, tuple[int, int]]:
    """``(writeQueueNums, readQueueNums)`` per topic from a broker's
    ``config/topics.json``, if any. Best effort: the table is the broker's, and a file it
    is rewriting is skipped with a warning (queue counts then come from the queues
    themselves)."""
    raw = read_with_backup(os.path.join(store_root, CONFIG_DIR, TOPICS_FILE))
    if raw is None:
        return {}
    try:
        table = json.loads(raw).get("topicConfigTable", {})
        return {
            str(topic): (int(config["writeQueueNums"]), int(config.get("readQueueNums", 0)))
            for topic, config in table.items()
            if int(config.get("writeQueueNums", 0)) > 0
        }
    except (ValueError, TypeError, AttributeError, KeyError, RecursionError) as e:
        log.warning("ignoring %s/%s: %s", CONFIG_DIR, TOPICS_FILE, e)
        return {}


def _chooser(store: MessageStore, queue_nums: int) -> QueueChooser:
    topics = store.topics()
    counts = {t: sum(store.max_offset(t, q) for q in qids) for t, qids in topics.items()}
    configured = configured_queues(store.root)
    return QueueChooser(
        topics,
        counts,
        queue_nums,
        {topic: write for topic, (write, _read) in configured.items()},
        # A broker refuses a queue id at or past both counts (its send processor's
        # msgCheck): its consumers would never read such a queue.
        {topic: max(write, read) for topic, (write, read) in configured.items()},
    )


def _check_all(store: MessageStore, files: Sequence[str], queue_nums: int) -> int:
    """Prepare every message as the put path will; the first refusal fails the job."""
    count = 0
    for count, message in enumerate(staged_messages(files, _chooser(store, queue_nums)), 1):
        single = bool(delay_level(message.properties))
        prepared = store.preparer.prepare(message, None, in_batch=not single)
        if isinstance(prepared, Refusal):
            raise ConfigError(
                f"message {count} of the job (topic {message.topic!r}, "
                f"{len(message.body)} bytes of body) is refused by the store: "
                f"{prepared.status.name}: {prepared.reason}"
            )
    return count


def _chunks(
    messages: Iterator[Message], prepare: PreparedLength, file_size: int
) -> Iterator[list[Message]]:
    """Runs of messages for one ``put_batch`` each: a batch has to fit in one CommitLog
    file; delayed messages (a DELAY property) go alone (``put_batch`` refuses them)."""
    chunk: list[Message] = []
    record_bytes = body_bytes = 0
    for message in messages:
        length = prepare(message)
        alone = bool(delay_level(message.properties))
        if chunk and (
            alone
            or len(chunk) >= CHUNK_MESSAGES
            or body_bytes + len(message.body) > CHUNK_BODY_BYTES
            or record_bytes + length + 8 > file_size // 2
        ):
            yield chunk
            chunk, record_bytes, body_bytes = [], 0, 0
        chunk.append(message)
        record_bytes += length
        body_bytes += len(message.body)
        if alone:
            yield chunk
            chunk, record_bytes, body_bytes = [], 0, 0
    if chunk:
        yield chunk


class PreparedLength:
    """The record length of a message as the store will write it."""

    def __init__(self, store: MessageStore) -> None:
        self._store = store

    def __call__(self, message: Message) -> int:
        prepared = self._store.preparer.prepare(message, None)
        if not isinstance(prepared, PreparedMessage):  # checked before: cannot happen
            raise ConfigError(f"message for topic {message.topic!r} refused: {prepared}")
        return prepared.length


def _append(store: MessageStore, messages: Iterator[Message], total: int) -> int:
    appended = 0
    for chunk in _chunks(messages, PreparedLength(store), store.config.mapped_file_size_commit_log):
        if len(chunk) == 1 and delay_level(chunk[0].properties):
            results = [store.put(chunk[0])]
        else:
            results = store.put_batch(chunk)
        bad = [r for r in results if not r.ok]
        if bad:
            raise StoreError(
                f"the store refused a write after {appended} of {total} messages were "
                f"appended: {bad[0].status.name} {bad[0].reason}".rstrip()
            )
        appended += len(chunk)
    return appended


def commit_staged(
    path: str,
    files: Sequence[str],
    queue_nums: int,
    sink: tuple[str, int] | None = None,
    query_id: str | None = None,
) -> CommitResult:
    """Append the staged files' messages; ``sink`` is (sink id, batch id) for streams,
    ``query_id`` the id of the streaming query that owns the sink's checkpoint."""
    store = open_writer(path)
    try:
        record = None
        skip = 0
        if sink is not None:
            record = sink_log.SinkLog(store.root)
            sink_id, batch_id = sink
            if record.bind_query(sink_id, query_id):
                log.warning(
                    "sink %s: a new streaming query (%s) owns this checkpoint; its batch ids "
                    "start again, so the previous query's record of them is dropped",
                    sink_id,
                    query_id,
                )
            state = record.state(sink_id, batch_id)
            if state is sink_log.BatchState.COMMITTED:
                log.info("sink %s: batch %d was committed before; nothing appended", *sink)
                return CommitResult(0, replayed=True)
            if state is sink_log.BatchState.INTERRUPTED:
                skip = record.already_appended(
                    store, sink_id, staged_messages(files, _chooser(store, queue_nums))
                )
        total = _check_all(store, files, queue_nums)
        if record is not None and sink is not None:
            record.begin(sink[0], sink[1], store.max_commit_log_offset(), total, skip)
        messages = staged_messages(files, _chooser(store, queue_nums))
        for _ in range(skip):
            next(messages)
        appended = _append(store, messages, total - skip)
        store.flush()
        if record is not None and sink is not None:
            record.finish(sink[0], sink[1])
        log.info("appended %d messages to %s", appended, store.root)
        return CommitResult(appended, skipped=skip)
    finally:
        store.close()
