"""Flush policies: ASYNC_FLUSH (a background flusher) and SYNC_FLUSH (group commit).

Layer: services. The async flusher msyncs the CommitLog every ``flush_interval_commit_log``
ms when enough pages are dirty (thoroughly every ``flush_commit_log_thorough_interval``)
and the consume queues every ``flush_interval_consume_queue`` ms. Sync flush makes the
caller wait until its bytes are durable; concurrent callers share one msync.
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

    # --- sync (group commit) --------------------------------------------------------------

    def flush_sync(self, up_to_offset: int) -> PutStatus:
        """Block until the CommitLog is durable up to ``up_to_offset``."""
        deadline = time.monotonic() + self.config.sync_flush_timeout / 1000
        with self._sync_lock:  # whoever holds it flushes for everyone waiting behind
            files = self.commitlog.files
            if files.flushed_where >= up_to_offset:
                return PutStatus.PUT_OK
            stamp = self.commitlog.last_store_timestamp()
            try:
                while files.flushed_where < up_to_offset:
                    files.flush(0)
                    self.flush_count += 1
                    if time.monotonic() > deadline:
                        return PutStatus.FLUSH_DISK_TIMEOUT
            except OSError as e:
                if self.on_error is not None:
                    self.on_error(e)
                return PutStatus.FLUSH_DISK_TIMEOUT
            if self.on_commitlog_flushed is not None:
                self.on_commitlog_flushed(stamp)
        return PutStatus.PUT_OK

    # --- async ------------------------------------------------------------------------

    def run_once(self, now: float | None = None) -> None:
        """One round of the async policy (what the thread does every interval)."""
        moment = time.monotonic() if now is None else now
        c = self.config
        pages = c.flush_commit_log_least_pages
        if moment - self._last_thorough_commitlog >= c.flush_commit_log_thorough_interval / 1000:
            pages = 0
            self._last_thorough_commitlog = moment
        files = self.commitlog.files
        while not files.flush(pages):  # one file per call; loop while it moves
            self.flush_count += 1
        if moment - self._last_queue_flush >= c.flush_interval_consume_queue / 1000:
            queue_pages = c.flush_consume_queue_least_pages
            if (
                moment - self._last_thorough_queues
                >= c.flush_consume_queue_thorough_interval / 1000
            ):
                queue_pages = 0
                self._last_thorough_queues = moment
            self.flush_queues(queue_pages)
            self._last_queue_flush = moment

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        now = time.monotonic()
        self._last_thorough_commitlog = self._last_queue_flush = self._last_thorough_queues = now
        self._thread = threading.Thread(target=self._run, name="rocketstore-flusher", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        interval = self.config.flush_interval_commit_log / 1000
        while not self._stop.wait(interval):
            try:
                self.run_once()
            except OSError as e:
                log.exception("flush failed")
                if self.on_error is not None:
                    self.on_error(e)

    def shutdown(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
