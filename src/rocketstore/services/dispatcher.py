"""The dispatcher (RocketMQ's "reput" service): turns new CommitLog records into
consume-queue units and index entries.

Layer: services. Reads the CommitLog from ``dispatched_offset`` up to its max offset in
chunks and hands each chunk's run of records to ``handle`` at once, walked, decoded and
validated in bulk by the CommitLog walker (:mod:`rocketstore.format.commitlog_walk`: numpy
or C over the whole run, not a Python decode per record); blanks roll to the next file;
corrupt bytes skip the rest of the readable slice as a RocketMQ master does. A record counts
as corrupt here by recovery's rules (the walker's), which include PHYSICALOFFSET == its
position and the 8-byte file tail rule.

A slave's CommitLog bytes were walked by that same walker once already, by the check
before they were appended (store.replica): those records are handed over
(:meth:`Dispatcher.hand_over`) and dispatched without a second decode. The check's walk
decided where its valid data ends; the dispatcher takes its records only when they start
exactly at the dispatched offset, and walks the bytes itself otherwise.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from time import monotonic

import numpy as np

from rocketstore.commitlog import CommitLog
from rocketstore.format.commitlog_walk import FileWalk
from rocketstore.format.record_scan import Records, Stop, TopicTable

log = logging.getLogger(__name__)

# Larger than any record (4 MiB body + 64 KiB), so a chunk always holds a whole record.
CHUNK_BYTES = 8 * 1024 * 1024
# Lag past which the writer yields the GIL to this thread after each append
# (after_append).
YIELD_LAG_BYTES = 64 * 1024 * 1024
# Runs a slave's check handed over (hand_over) kept at most, one per append (a slave
# appends up to 1 MiB per receive; 112 bytes of arrays per record): a stopped or lagging
# dispatcher keeps a few MiB of them, and walks what was dropped.
HANDED_RUNS = 32


@dataclass
class DispatchRun:
    """A run of valid records, in CommitLog order, to dispatch at once.

    ``records`` holds positions within ``data``, whose first byte is at CommitLog offset
    ``base``; topic ids index ``topics``, a table kept for the dispatcher's lifetime."""

    data: bytes | memoryview  # valid only during the handler's call
    base: int
    records: Records
    topics: TopicTable


BatchHandler = Callable[[DispatchRun], None]


class Dispatcher:
    def __init__(
        self,
        commitlog: CommitLog,
        handle: BatchHandler,
        from_offset: int,
        *,
        interval_ms: int = 1,
        max_lag_ms: int = 0,
        on_progress: Callable[[int], None] | None = None,
    ):
        self.commitlog = commitlog
        self.handle = handle
        self.dispatched_offset = from_offset
        self.interval_ms = interval_ms
        self.max_lag_s = max_lag_ms / 1000
        self.on_progress = on_progress
        self.records_dispatched = 0
        self.topics = TopicTable()
        self.corrupt_skipped_bytes = 0
        self._lock = threading.Lock()
        self._wake = threading.Event()
        # Mirrors ``_wake`` for the writer's check after each append: an attribute read,
        # where ``Event.is_set`` is a Python call (a single put is about 2 us; its
        # after-append calls took a sixth of that).
        self._woken = False
        # When the writer woke this thread first since its last round began (monotonic s).
        self._woken_at = 0.0
        self.writer_rounds = 0  # backlogs the writer dispatched itself (max_lag_ms)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None
        # Records a slave's check walked (hand_over): first CommitLog offset, records
        # (positions from it), their topic table; appended by the writer, taken here.
        self._handed: deque[tuple[int, Records, TopicTable, int]] = deque()
        # Ids in ``topics`` of the handed-over table's topics, by its id.
        self._handed_ids: list[int] = []
        self.records_handed = 0  # records dispatched from a check's walk

    def hand_over(
        self, offset: int, records: Records, topics: TopicTable, cut_at: int = -1
    ) -> None:
        """Whole records the writer's check walked at CommitLog ``offset`` (positions from
        it; topic ids of ``topics``, one table that only grows), once they are appended.
        ``cut_at``: the CommitLog's end when the check's bytes ended inside a record (-1
        otherwise); while it still ends there, the dispatcher does not walk that record's
        start again (the append that completes it hands it over).
        Taken when the dispatcher reaches ``offset``; dropped once it is past, or when
        more than ``HANDED_RUNS`` wait (a stopped or far behind dispatcher walks them)."""
        handed = self._handed
        if len(handed) >= HANDED_RUNS:
            with contextlib.suppress(IndexError):  # this thread may have taken it
                handed.popleft()
        handed.append((offset, records, topics, cut_at))

    def forget_handed(self) -> None:
        """Drop the records handed over (the CommitLog was cut back)."""
        self._handed.clear()

    def _take_handed(self, offset: int) -> tuple[Records, TopicTable, int] | None:
        # popleft, never a look at [0] first: the writer may drop the oldest meanwhile.
        handed = self._handed
        while True:
            try:
                run = handed.popleft()
            except IndexError:
                return None
            if run[0] == offset:
                return run[1], run[2], run[3]
            if run[0] > offset:
                handed.appendleft(run)  # the walk gets there first
                return None

    def lag_bytes(self) -> int:
        return max(0, self.commitlog.max_offset() - self.dispatched_offset)

    @contextlib.contextmanager
    def caught_up(self) -> Iterator[None]:
        """Dispatch everything appended so far, and keep the dispatcher from running until
        the block ends (callers that change the queues themselves hold off puts first)."""
        with self._lock:
            try:
                self._dispatch_available()
            except Exception as e:
                self.error = e
                raise
            yield

    def run_once(self) -> int:
        """Dispatch everything appended so far; return the number of records dispatched.

        A failure is kept in ``error`` (and raised): the thread stops, and close does not
        try again, so the abort file stays and the next open re-dispatches."""
        with self._lock:
            try:
                return self._dispatch_available()
            except Exception as e:
                self.error = e
                raise

    def _dispatch_available(self) -> int:
        count = 0
        while True:
            max_offset = self.commitlog.max_offset()
            min_offset = self.commitlog.min_offset()
            if min_offset >= 0 and self.dispatched_offset < min_offset:
                log.warning(
                    "dispatch offset %d below CommitLog min %d; jumping",
                    self.dispatched_offset,
                    min_offset,
                )
                self.dispatched_offset = min_offset
            if self.dispatched_offset >= max_offset:
                break
            before = self.dispatched_offset
            handed = self._take_handed(before) if self._handed else None
            if handed is not None and self._dispatch_handed(before, handed[0], handed[1]):
                count += len(handed[0])
                if handed[2] == self.commitlog.max_offset():
                    break  # the rest is the start of a record the check saw cut
                continue
            # The records are read in place through the mapping, which the view holds.
            with self.commitlog.view_to_file_end(before, CHUNK_BYTES) as chunk:
                if chunk is not None:
                    count += self._dispatch_chunk(chunk)
            if chunk is not None:
                if self.dispatched_offset == before:
                    break  # a record still being written past the readable end: next run
                continue
            # The offset sits at the end of a full file: go to the next one.
            next_start = self.commitlog.roll_next_file(self.dispatched_offset)
            if self.dispatched_offset % self.commitlog.file_size == 0 or next_start > max_offset:
                break
            self.dispatched_offset = next_start
        if count and self.on_progress is not None:
            self.on_progress(self.dispatched_offset)
        return count

    def _dispatch_chunk(self, chunk: memoryview) -> int:
        """Walk every whole record of ``chunk`` (format.commitlog_walk), hand them over as
        one run, and move ``dispatched_offset`` past them (or to the next file after a
        blank). A record the chunk holds only the start of waits for the next chunk;
        damage skips the rest of the chunk, as a RocketMQ master skips a readable slice."""
        base = self.dispatched_offset
        file_size = self.commitlog.file_size
        # The chunk runs at most to its file's end; the 8-byte tail rule needs that end.
        file_end = file_size - base % file_size
        walk = FileWalk(
            chunk,
            base,
            0,
            file_end,
            topics=self.topics,
            readable=len(chunk),
            window_bytes=len(chunk),  # one decode for the chunk
        )
        records, verdict = walk.run()
        position = verdict.position
        next_offset: int | None = None
        if verdict.stop == Stop.BLANK:
            next_offset = self.commitlog.roll_next_file(base + position)
        elif verdict.stop in (Stop.CORRUPT, Stop.END_OF_DATA):
            self._skip_corrupt(chunk, base, position, verdict.reason)
            position = len(chunk)
        if len(records):
            self.handle(DispatchRun(chunk, base, records, self.topics))
            self.records_dispatched += len(records)
        self.dispatched_offset = next_offset if next_offset is not None else base + position
        return len(records)

    def _dispatch_handed(self, base: int, records: Records, topics: TopicTable) -> bool:
        """Dispatch records a check walked from ``base`` (the dispatched offset) and move
        past them; False (nothing done) when they are not all readable here."""
        ids = self._handed_ids
        if len(ids) < len(topics.names):
            ids.extend(self.topics.intern(name.encode()) for name in topics.names[len(ids) :])
        last = len(records) - 1
        end = int(records.position[last] + records.size[last])
        with self.commitlog.view_to_file_end(base, end) as chunk:
            if chunk is None or len(chunk) < end:
                return False
            mapped = dataclasses.replace(
                records, topic_id=np.asarray(ids, dtype=np.int64)[records.topic_id]
            )
            self.handle(DispatchRun(chunk, base, mapped, self.topics))
        self.records_dispatched += len(records)
        self.records_handed += len(records)
        self.dispatched_offset = base + end
        return True

    def _skip_corrupt(self, chunk: memoryview, base: int, position: int, reason: str) -> None:
        skipped = len(chunk) - position
        log.error(
            "dispatch: corrupt record at %d (%s); skipping %d bytes",
            base + position,
            reason,
            skipped,
        )
        self.corrupt_skipped_bytes += skipped

    # --- thread -----------------------------------------------------------------------

    def after_append(self, max_offset: int) -> None:
        """The writer's call after each append: wake this thread; once it is more than
        ``YIELD_LAG_BYTES`` behind, hand it the GIL for a moment; and with ``max_lag_ms``,
        once it has left an append undispatched that long, dispatch here.

        Its Python steps run between C loops that release the GIL; under a writer that
        never lets go of it, each step would wait a whole switch interval (5 ms) to get
        it back, and the index fell hundreds of MiB behind sustained puts. A yield per
        append while it lags bounds that wait by one put instead.

        A SYNC_FLUSH writer keeps the GIL through its syncs too (MappedFile.flush), so this
        thread got it only at switch intervals even well under the 64 MiB, and a consumer
        saw messages up to 37-983 ms after their puts under sustained load (the dispatch
        benchmark's visibility lag). ``max_lag_ms`` bounds that (10-14 ms at 5 ms): the
        writer takes the lock, which lets go of the GIL while a round under way finishes,
        and dispatches the rest without a hand-off. The dispatch is then part of the put's
        time (0-27 % of the SYNC_FLUSH put rate at 5 ms, 27-57 % of the ASYNC_FLUSH one),
        so it is off unless asked for."""
        if not self._woken:  # set() takes the condition's lock: skip when done
            self._woken = True
            if self.max_lag_s:
                self._woken_at = monotonic()
            self._wake.set()
        elif self.max_lag_s and monotonic() - self._woken_at > self.max_lag_s:
            self._dispatch_on_writer()
            return
        if max_offset - self.dispatched_offset > YIELD_LAG_BYTES and self._thread is not None:
            time.sleep(0)

    def _dispatch_on_writer(self) -> None:
        """One round on the writer's thread. A failure is kept for the store to report,
        as the thread keeps its own: the put that called this has been appended, and must
        not fail for what the index does."""
        with self._lock:
            if self.error is not None:
                return
            self._woken_at = monotonic()
            self.writer_rounds += 1
            try:
                self._dispatch_available()
            except Exception as e:
                log.error(
                    "dispatch on the writer's thread failed: %s",
                    e,
                    exc_info=log.isEnabledFor(logging.DEBUG),
                )
                self.error = e

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._run, name="rocketstore-dispatcher", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set() and self.error is None:
            # Before the run, so a put during it is not missed; the event first, so that
            # a writer that saw the flag still set finds its put dispatched by this run.
            self._wake.clear()
            self._woken = False
            try:
                count = self.run_once()
            except BaseException as e:  # keep the reason for the store to report
                # The traceback only when debugging: the reason names the file and the
                # fix, and the store reports it (``MessageStore.dispatch_error``).
                log.error("dispatcher failed: %s", e, exc_info=log.isEnabledFor(logging.DEBUG))
                self.error = e
                return
            if count and self.interval_ms > 0:
                # A pause between rounds, as RocketMQ's reput sleeps 1 ms: what is
                # appended meanwhile goes in one round. A round costs ~0.1 ms of set-up
                # with the GIL whatever its size; woken per append, the rounds took that
                # from every SYNC_FLUSH put of 32 messages (0.34 ms a put, 0.20 with it).
                self._stop.wait(self.interval_ms / 1000)
            self._wake.wait(timeout=max(self.interval_ms, 1) / 1000 * 50)

    def shutdown(self, catch_up: bool = True) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        if catch_up and self.error is None:
            self.run_once()
