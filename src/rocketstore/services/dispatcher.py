"""The dispatcher (RocketMQ's "reput" service): turns new CommitLog records into
consume-queue units and index entries.

Layer: services. Reads the CommitLog from ``dispatched_offset`` up to its max offset and
hands each record to ``handle``; blanks roll to the next file; corrupt bytes skip the rest of
the readable slice as a RocketMQ master does.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from rocketstore.commitlog import CommitLog
from rocketstore.errors import CorruptDataError, IncompleteDataError
from rocketstore.format import record as rec

log = logging.getLogger(__name__)

# Larger than any record (4 MiB body + 64 KiB), so a chunk always holds a whole record.
CHUNK_BYTES = 8 * 1024 * 1024

# Receives a chunk and the records decoded from it, in CommitLog order.
BatchHandler = Callable[[bytes, list[rec.RecordView]], None]


class Dispatcher:
    def __init__(
        self,
        commitlog: CommitLog,
        handle: BatchHandler,
        from_offset: int,
        *,
        interval_ms: int = 1,
        on_progress: Callable[[int], None] | None = None,
    ):
        self.commitlog = commitlog
        self.handle = handle
        self.dispatched_offset = from_offset
        self.interval_ms = interval_ms
        self.on_progress = on_progress
        self.records_dispatched = 0
        self.corrupt_skipped_bytes = 0
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

    def lag_bytes(self) -> int:
        return max(0, self.commitlog.max_offset() - self.dispatched_offset)

    def run_once(self) -> int:
        """Dispatch everything appended so far; return the number of records dispatched."""
        with self._lock:
            return self._dispatch_available()

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
            chunk = self.commitlog.read_to_file_end(self.dispatched_offset, CHUNK_BYTES)
            if chunk is None:
                # The offset sits at the end of a full file: go to the next one.
                next_start = self.commitlog.roll_next_file(self.dispatched_offset)
                if (
                    self.dispatched_offset % self.commitlog.file_size == 0
                    or next_start > max_offset
                ):
                    break
                self.dispatched_offset = next_start
                continue
            count += self._dispatch_chunk(chunk)
        if count and self.on_progress is not None:
            self.on_progress(self.dispatched_offset)
        return count

    def _dispatch_chunk(self, chunk: bytes) -> int:
        """Decode every whole record of ``chunk``, hand them over as one batch, and move
        ``dispatched_offset`` past them (or to the next file after a blank)."""
        position = 0
        base = self.dispatched_offset
        views: list[rec.RecordView] = []
        next_offset: int | None = None
        while position < len(chunk):
            try:
                view = rec.read_record(chunk, position)
            except IncompleteDataError:
                break  # the rest arrives in the next chunk
            except CorruptDataError as e:
                skipped = len(chunk) - position
                log.error(
                    "dispatch: corrupt record at %d (%s); skipping %d bytes",
                    base + position,
                    e.reason,
                    skipped,
                )
                self.corrupt_skipped_bytes += skipped
                position = len(chunk)
                break
            if isinstance(view, rec.Blank):
                next_offset = self.commitlog.roll_next_file(base + position)
                break
            views.append(view)
            position += view.size
        if views:
            self.handle(chunk, views)
            self.records_dispatched += len(views)
        self.dispatched_offset = next_offset if next_offset is not None else base + position
        return len(views)

    # --- thread -----------------------------------------------------------------------

    def wakeup(self, _max_offset: int = 0) -> None:
        self._wake.set()

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._run, name="rocketstore-dispatcher", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()  # before the run, so a put during it is not missed
            try:
                self.run_once()
            except BaseException as e:  # keep the reason for the store to report
                log.exception("dispatcher failed")
                self.error = e
                return
            self._wake.wait(timeout=max(self.interval_ms, 1) / 1000 * 50)

    def shutdown(self, catch_up: bool = True) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        if catch_up and self.error is None:
            self.run_once()
