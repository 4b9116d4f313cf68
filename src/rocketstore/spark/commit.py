"""The job commit of a write: staged messages appended through the store's own put path.

Layer: spark (top); runs on the driver. Opens the store as its single writer (the
directory lock), so a store another process writes (a broker, another job) fails the
commit with :class:`StoreLockedError` and appends nothing.

The commit is all or nothing for everything the store can refuse: every message is first
checked with the store's own checks (``put_columns.check_rows``: topic, sizes, properties)
before the first one is appended. Then messages go in in file order and the store is
flushed (CommitLog, queues, index, checkpoint) and closed: when the commit returns, the
messages are on disk.

The staged Arrow batches are read column by column into runs of rows of one topic, each
appended with ``put_columns``: no Message per row (building one cost ten times the
put). The bytes are those of the per-message path it replaced, a Message per row put
with ``put_batch`` in chunks (``staged_messages``, which the resume of an interrupted
batch still matches records against): a delayed row is put alone, and the chunks of that
path that started a new CommitLog file are put as it put them (``_rolling_chunks``).

A streaming sink passes its batch id: :mod:`.sink_log` makes a replayed batch (Spark
re-runs the last batch after a restart) append nothing, and a batch whose commit crashed
half-way append only what is missing.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from rocketstore.errors import ConfigError, StoreError, StoreLockedError
from rocketstore.files.atomic import read_with_backup
from rocketstore.format import properties as props
from rocketstore.format.message import Message
from rocketstore.format.record import END_FILE_MIN_BLANK_LENGTH
from rocketstore.paths import CONFIG_DIR
from rocketstore.put_columns import Columns
from rocketstore.put_path import Refusal, delay_level
from rocketstore.spark import sink_log
from rocketstore.spark.routing import QueueChooser
from rocketstore.spark.staging import read_staged, staged_rows
from rocketstore.status import PutStatus
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
            for row in staged_rows(batch):
                yield Message(
                    topic=row.topic,
                    body=row.body,
                    queue_id=chooser.choose(
                        row.topic, row.queue_id, row.properties.get(props.KEYS)
                    ),
                    properties=row.properties,
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


@dataclass
class _Run:
    """Consecutive staged rows of one topic as ``put_columns``' columns (``first``: the
    first row's index in staged order), or a single delayed row (``delayed``). Row i is
    the Message ``staged_messages`` makes of it: its staged properties (UNIQ_KEY alone
    goes in the ``uniq`` column, a map with anything else in ``own``), then KEYS, TAGS."""

    first: int
    topic: str
    bodies: list[bytes]
    queue_ids: npt.NDArray[np.int64]
    keys: list[str | None] | None
    tags: list[str | None] | None
    uniq: list[str | None] | None
    own: list[dict[str, str] | None] | None
    delayed: bool = False

    def __len__(self) -> int:
        return len(self.bodies)

    def arguments(self) -> dict[str, Any]:
        """``put_columns``' keyword arguments: UNIQ_KEY, KEYS and TAGS as property columns
        in that order, the order staging and ``staged_messages`` give them."""
        named = {props.UNIQ_KEY: self.uniq, props.KEYS: self.keys, props.TAGS: self.tags}
        return {
            "queue_ids": self.queue_ids,
            "properties": self.own,
            "property_columns": {k: v for k, v in named.items() if v is not None},
        }

    def columns(self) -> Columns:
        return Columns.of(self.topic, self.bodies, **self.arguments())

    def message(self, row: int) -> Message:
        return self.columns().message(row)

    def part(self, start: int, end: int) -> _Run:
        """Rows ``start .. end - 1`` of the run (indices within it)."""
        if (start, end) == (0, len(self)):
            return self

        def cut(column: list[Any] | None) -> Any:
            return None if column is None else column[start:end]

        return _Run(
            self.first + start,
            self.topic,
            self.bodies[start:end],
            self.queue_ids[start:end],
            cut(self.keys),
            cut(self.tags),
            cut(self.uniq),
            cut(self.own),
            self.delayed,
        )


def _text_list(column: Any) -> list[str | None] | None:
    return None if column.null_count == len(column) else column.to_pylist()


def _batch_runs(batch: Any, first: int, chooser: QueueChooser) -> Iterator[_Run]:
    """The runs of one staged batch, its queues chosen in row order."""
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.compute as pc  # noqa: PLC0415

    rows = batch.num_rows
    if not rows:
        return
    topics = batch.column("topic")
    bodies = batch.column("body").to_pylist()
    keys, tags = _text_list(batch.column("keys")), _text_list(batch.column("tags"))
    queue = batch.column("queue_id")
    named = queue.is_valid().to_numpy(zero_copy_only=False)
    queue_ids = pc.fill_null(queue, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    # Properties: a row whose map is UNIQ_KEY alone (the common case) gives it to the
    # uniq column; any other map is the row's own, as a dict.
    kind = batch.schema.field("properties").type
    listed = batch.column("properties").cast(pa.list_(pa.struct([kind.key_field, kind.item_field])))
    lengths = pc.fill_null(pc.list_value_length(listed), 0).to_numpy().astype(np.int64)
    entries = listed.flatten()  # (the batch's slice respected)
    starts = np.cumsum(lengths) - lengths
    single = lengths == 1
    if single.any():
        is_uniq = pc.equal(entries.field(0), props.UNIQ_KEY).to_numpy(zero_copy_only=False)
        single[single] = is_uniq[starts[single]]
    uniq = None
    if single.any():
        at = pa.array(np.where(single, starts, 0), mask=~single)
        uniq = entries.field(1).take(at).to_pylist()
    own: list[dict[str, str] | None] | None = None
    effective_keys = keys
    delayed = np.zeros(rows, dtype=bool)
    own_rows = np.flatnonzero((lengths > 0) & ~single)
    if len(own_rows):
        own = [None] * rows
        effective_keys = list(keys) if keys is not None else [None] * rows
        maps = batch.column("properties").take(pa.array(own_rows)).to_pylist()
        for row, pairs in zip(own_rows.tolist(), maps, strict=True):
            mapping = dict(pairs)
            own[row] = mapping
            if effective_keys[row] is None:
                effective_keys[row] = mapping.get(props.KEYS)
            delayed[row] = bool(delay_level(mapping))
    if topics.null_count == 0 and pc.count_distinct(topics).as_py() == 1:
        cuts = [0, rows]
    else:
        codes = topics.dictionary_encode().indices.to_numpy(zero_copy_only=False)
        cuts = [0, *(np.flatnonzero(codes[1:] != codes[:-1]) + 1).tolist(), rows]
    for delayed_row in np.flatnonzero(delayed).tolist():  # (each alone, as today's put)
        cuts += [delayed_row, delayed_row + 1]
    cuts = sorted(set(cuts))
    for start, end in itertools.pairwise(cuts):
        topic = topics[start].as_py()
        alone = bool(delayed[start])
        run = _Run(
            first + start,
            topic,
            bodies[start:end],
            chooser.choose_rows(
                topic,
                queue_ids[start:end],
                named[start:end],
                None if effective_keys is None else effective_keys[start:end],
            ),
            None if keys is None else keys[start:end],
            None if tags is None else tags[start:end],
            None if uniq is None else uniq[start:end],
            None if own is None else own[start:end],
            delayed=alone,
        )
        if run.own is not None and not any(m is not None for m in run.own):
            run.own = None  # (no per-row properties: put_columns' in-place path)
        yield run


def _staged_runs(files: Sequence[str], chooser: QueueChooser) -> Iterator[_Run]:
    """The staged rows as runs, in file order, each with its queues chosen."""
    first = 0
    for path in files:
        for batch in read_staged(path):
            yield from _batch_runs(batch, first, chooser)
            first += batch.num_rows


@dataclass
class _Checked:
    """Every staged row checked: its record length, body length and whether it is
    delayed (put alone), in staged order."""

    lengths: npt.NDArray[np.int64]
    bodies: npt.NDArray[np.int64]
    delayed: npt.NDArray[np.bool_]

    def __len__(self) -> int:
        return len(self.lengths)


def _refused(row: int, message: Message, refusal: Refusal) -> ConfigError:
    return ConfigError(
        f"message {row + 1} of the job (topic {message.topic!r}, "
        f"{len(message.body)} bytes of body) is refused by the store: "
        f"{refusal.status.name}: {refusal.reason}"
    )


def _check_all(store: MessageStore, files: Sequence[str], queue_nums: int) -> _Checked:
    """Check every row as the put path will (the first refusal fails the job), and
    measure its record."""
    lengths: list[npt.NDArray[np.int64]] = []
    bodies: list[npt.NDArray[np.int64]] = []
    delayed: list[npt.NDArray[np.bool_]] = []
    for run in _staged_runs(files, _chooser(store, queue_nums)):
        if run.delayed:
            message = run.message(0)
            prepared = store.prepare_message(message)
            if isinstance(prepared, Refusal):
                raise _refused(run.first, message, prepared)
            lengths.append(np.array([prepared.length], dtype=np.int64))
        else:
            columns = run.columns()
            checked = store.check_columns(columns)
            if checked.refused_row is not None:
                message = columns.message(checked.refused_row)
                refusal = store.prepare_message(message, in_batch=True)
                if not isinstance(refusal, Refusal):  # (cannot happen: the same checks)
                    refusal = checked.refusal or Refusal(PutStatus.UNKNOWN_ERROR, "refused")
                raise _refused(run.first + checked.refused_row, message, refusal)
            lengths.append(checked.lengths)
        bodies.append(np.fromiter(map(len, run.bodies), dtype=np.int64, count=len(run)))
        delayed.append(np.full(len(run), run.delayed))
    if not lengths:
        return _Checked(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, bool))
    return _Checked(np.concatenate(lengths), np.concatenate(bodies), np.concatenate(delayed))


def _rolling_chunks(
    checked: _Checked, skip: int, offset: int, file_size: int
) -> list[tuple[int, int]]:
    """The rows (start, end) of each ``put_batch`` of the per-message path that would
    start a new CommitLog file, from ``offset`` on. That path put rows in runs (at most
    CHUNK_MESSAGES rows and CHUNK_BODY_BYTES of bodies, records held to half a file, a
    delayed row alone), a run that does not fit the rest of a file going whole to the
    next: only those runs decide where files end, so only they go in as ``put_batch``
    to write what it wrote; between them no record can reach a file's end, however
    ``put_columns`` batches them."""
    lengths, bodies = checked.lengths[skip:], checked.bodies[skip:]
    ends = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=ends[1:])
    body_ends = np.zeros(len(bodies) + 1, dtype=np.int64)
    np.cumsum(bodies, out=body_ends[1:])
    alone = np.flatnonzero(checked.delayed[skip:])
    rolling = []
    row = 0
    while row < len(lengths):
        if checked.delayed[skip + row]:
            end = row + 1
        else:
            later = alone[np.searchsorted(alone, row) :]
            end = min(
                row + CHUNK_MESSAGES,
                int(later[0]) if len(later) else len(lengths),
                int(np.searchsorted(body_ends, body_ends[row] + CHUNK_BODY_BYTES, "right")) - 1,
                int(np.searchsorted(ends, ends[row] + file_size // 2 - 8, "right")) - 1,
            )
            end = max(end, row + 1)
        size = int(ends[end] - ends[row])
        if size + END_FILE_MIN_BLANK_LENGTH > file_size - offset % file_size:
            if not checked.delayed[skip + row]:  # (put alone, it rolls as it did)
                rolling.append((skip + row, skip + end))
            offset += file_size - offset % file_size
        offset += size
        row = end
    return rolling


class _Appender:
    """Appends runs in order: ``put_columns`` between file rolls, a rolling chunk's rows
    (which may span runs) as one ``put_batch``, a delayed row with ``put``."""

    def __init__(self, store: MessageStore, rolling: list[tuple[int, int]], total: int) -> None:
        self.store = store
        self.rolling = rolling
        self.total = total
        self.appended = 0
        self._next = 0  # the next rolling chunk
        self._pending: list[Message] = []

    def _refused(self, status: PutStatus, reason: str, stored: int = 0) -> StoreError:
        return StoreError(
            f"the store refused a write after {self.appended + stored} of {self.total} "
            f"messages were appended: {status.name} {reason}".rstrip()
        )

    def add(self, run: _Run) -> None:
        if run.delayed:
            result = self.store.put(run.message(0))
            if not result.ok:
                raise self._refused(result.status, result.reason)
            self.appended += 1
            return
        at, end = run.first, run.first + len(run)
        while at < end:
            start, stop = self.rolling[self._next] if self._next < len(self.rolling) else (end, end)
            if at < start:
                self._put_columns(run.part(at - run.first, min(end, start) - run.first))
                at = min(end, start)
                continue
            upto = min(end, stop)
            columns = run.part(at - run.first, upto - run.first).columns()
            self._pending.extend(columns.message(i) for i in range(len(columns)))
            at = upto
            if upto == stop:
                self._put_batch()

    def _put_columns(self, run: _Run) -> None:
        result = self.store.put_columns(run.topic, run.bodies, **run.arguments())
        if not result.ok:
            raise self._refused(result.status, result.reason, result.stored)
        self.appended += len(run)

    def _put_batch(self) -> None:
        results = self.store.put_batch(self._pending)
        bad = [r for r in results if not r.ok]
        if bad:
            raise self._refused(bad[0].status, bad[0].reason)
        self.appended += len(self._pending)
        self._pending = []
        self._next += 1


def _append(
    store: MessageStore, files: Sequence[str], queue_nums: int, checked: _Checked, skip: int
) -> int:
    """Append the staged rows from row ``skip`` on, in staged order, writing the bytes the
    per-message path (a Message per row, ``put_batch`` in chunks) writes."""
    file_size = store.config.mapped_file_size_commit_log
    rolling = _rolling_chunks(checked, skip, store.max_commit_log_offset(), file_size)
    appender = _Appender(store, rolling, len(checked) - skip)
    for run in _staged_runs(files, _chooser(store, queue_nums)):
        if run.first + len(run) > skip:
            appender.add(run.part(max(0, skip - run.first), len(run)))
    return appender.appended


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
        checked = _check_all(store, files, queue_nums)
        if record is not None and sink is not None:
            record.begin(sink[0], sink[1], store.max_commit_log_offset(), len(checked), skip)
        appended = _append(store, files, queue_nums, checked, skip)
        store.flush()
        if record is not None and sink is not None:
            record.finish(sink[0], sink[1])
        log.info("appended %d messages to %s", appended, store.root)
        return CommitResult(appended, skipped=skip)
    finally:
        store.close()
