"""Flush policies: ASYNC_FLUSH (a background flusher) and SYNC_FLUSH (group commit).

Layer: services. The async flusher msyncs the CommitLog every ``flush_interval_commit_log``
ms when enough pages are dirty (thoroughly every ``flush_commit_log_thorough_interval``).
Under both policies the consume queues are flushed every ``flush_interval_consume_queue``
ms (thoroughly every ``flush_consume_queue_thorough_interval``, followed by a checkpoint
write, as RocketMQ does). Sync flush makes the caller wait until its bytes are durable;
concurrent callers share one msync.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from rocketstore.commitlog import CommitLog
from rocketstore.config import StoreConfig
from rocketstore.status import PutStatus

log = logging.getLogger(__name__)

# Mean SYNC_FLUSH sync size below which the CommitLog is zeroed ahead (small_sync_flushes).
ZERO_FILL_MAX_FLUSH_BYTES = 128 * 1024


class Flusher:
    def __init__(
        self,
        commitlog: CommitLog,
        flush_queues: Callable[[int], None],
        config: StoreConfig,
        *,
        on_commitlog_flushed: Callable[[int], None] | None = None,
        on_queues_flushed: Callable[[int], None] | None = None,
        on_error: Callable[[BaseException], None] | None = None,
        live_logics_timestamp: Callable[[], int] = lambda: 0,
    ):
        self.commitlog = commitlog
        self.flush_queues = flush_queues
        self.config = config
        self.on_commitlog_flushed = on_commitlog_flushed
        self.on_queues_flushed = on_queues_flushed
        self.on_error = on_error
        self.live_logics_timestamp = live_logics_timestamp
        self._sync_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_thorough_commitlog = 0.0
        self._last_queue_flush = 0.0
        self._last_thorough_queues = 0.0
        self.flush_count = 0
        self.flush_seconds = 0.0  # time in CommitLog flushes (the metrics' flush latency)
        # Bytes per SYNC_FLUSH sync, a moving mean (None before the first).
        self.mean_sync_flush_bytes: float | None = None

    # --- sync (group commit) ----------------------------------------------------------

    def flush_sync(self, up_to_offset: int, *, background: bool = False) -> PutStatus:
        """Block until the CommitLog is durable up to ``up_to_offset``.

        Whoever holds the lock flushes everything appended so far, so producers waiting
        behind it usually find their bytes already durable (group commit). ``background``
        lets the other threads run during the msync (``MappedFile.flush``): the group
        commit thread's syncs, which nobody waits for on the GIL.
        """
        deadline = time.monotonic() + self.config.sync_flush_timeout / 1000
        with self._sync_lock:
            files = self.commitlog.files
            if files.flushed_where >= up_to_offset:
                return PutStatus.PUT_OK
            stamp = self.commitlog.last_store_timestamp()
            before = files.flushed_where
            try:
                while files.flushed_where < up_to_offset:
                    started = time.perf_counter()
                    files.flush(0, background=background)
                    self.flush_seconds += time.perf_counter() - started
                    self.flush_count += 1
                    if time.monotonic() > deadline:
                        return PutStatus.FLUSH_DISK_TIMEOUT
            except OSError as e:
                if self.on_error is not None:
                    self.on_error(e)
                return PutStatus.FLUSH_DISK_TIMEOUT
            self._note_sync_flush(files.flushed_where - before)
        if self.on_commitlog_flushed is not None:
            self.on_commitlog_flushed(stamp)
        return PutStatus.PUT_OK

    def _note_sync_flush(self, flushed: int) -> None:
        mean = self.mean_sync_flush_bytes
        self.mean_sync_flush_bytes = flushed if mean is None else mean + (flushed - mean) / 8

    def small_sync_flushes(self) -> bool:
        """Whether SYNC_FLUSH syncs are small enough that zeroing the CommitLog ahead of
        the writer pays (see CommitLog.zero_ahead): true before the first.

        Zeroing writes every byte twice; what it saves is a journal commit per sync, about
        0.1 ms, which is the disk's time for some 128 KiB (measured on ext4: a sync of
        8 KiB takes 0.18 ms into zeroed blocks and 0.34 ms into unwritten ones; of
        1.2 MiB, 0.8 ms against 1.1 ms, but zeroing it ahead costs another 1 ms)."""
        mean = self.mean_sync_flush_bytes
        return mean is None or mean < ZERO_FILL_MAX_FLUSH_BYTES

    # --- async ------------------------------------------------------------------------

    def run_once(self, now: float | None = None) -> None:
        """One round of the policy (what the thread does every interval)."""
        moment = time.monotonic() if now is None else now
        c = self.config
        if c.flush_disk_type == "ASYNC_FLUSH":
            self._flush_commitlog(moment)
        if moment - self._last_queue_flush >= c.flush_interval_consume_queue / 1000:
            queue_pages = c.flush_consume_queue_least_pages
            thorough = (
                moment - self._last_thorough_queues
                >= c.flush_consume_queue_thorough_interval / 1000
            )
            logics = self.live_logics_timestamp()  # captured before the flush it vouches for
            if thorough:
                queue_pages = 0
                self._last_thorough_queues = moment
            self.flush_queues(queue_pages)
            self._last_queue_flush = moment
            if thorough and self.on_queues_flushed is not None:
                self.on_queues_flushed(logics)

    def _flush_commitlog(self, moment: float) -> None:
        c = self.config
        pages = c.flush_commit_log_least_pages
        if moment - self._last_thorough_commitlog >= c.flush_commit_log_thorough_interval / 1000:
            pages = 0
            self._last_thorough_commitlog = moment
        files = self.commitlog.files
        stamp = self.commitlog.last_store_timestamp()
        target = files.max_offset()
        with self._sync_lock:
            # One file per call; loop while it moves. Nobody waits for these syncs: the
            # other threads run meanwhile (see MappedFile.flush).
            while True:
                started = time.perf_counter()
                done = files.flush(pages, background=True)
                self.flush_seconds += time.perf_counter() - started
                if done:
                    break
                self.flush_count += 1
        # RocketMQ records the physic time only after thorough flushes.
        if pages == 0 and files.flushed_where >= target and self.on_commitlog_flushed:
            self.on_commitlog_flushed(stamp)

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        now = time.monotonic()
        self._last_thorough_commitlog = now
        self._last_queue_flush = now
        self._last_thorough_queues = now
        self._thread = threading.Thread(target=self._run, name="rocketstore-flusher", daemon=True)
        self._thread.start()

    def _interval_s(self) -> float:
        # Read at each round: the settings may change while the store is open.
        c = self.config
        return max(min(c.flush_interval_commit_log, c.flush_interval_consume_queue), 1) / 1000

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s()):
            try:
                self.run_once()
            except Exception as e:  # not only OSError: a flusher that died quietly would
                # leave the store acknowledging puts that never reach the disk
                log.exception("flush failed")
                if self.on_error is not None:
                    self.on_error(e)
                return

    def shutdown(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
