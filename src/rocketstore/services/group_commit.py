"""Group commit for callers that must not block (RocketMQ's GroupCommitService): a
SYNC_FLUSH put is appended at once, and a thread of its own makes it durable and answers.

Layer: services. ``MessageStore.put`` with SYNC_FLUSH waits for its sync in the caller's
thread, keeping the GIL through it (``MappedFile.flush``: a single writer is fastest so).
An event loop cannot wait so: a broker that handed each put to a worker thread paid a
thread hop per send, and the sync kept the GIL, so the loop could not even read the next
send meanwhile and every send had a sync of its own. Here requests queue up while a sync
runs, without the GIL, and the next sync covers all of them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from rocketstore.status import PutStatus

log = logging.getLogger(__name__)

Done = Callable[[PutStatus], None]


class GroupCommit:
    """``flush(offset)`` (the flusher's sync, which must let go of the GIL) runs on this
    service's thread; each request's ``done`` is called there with its status, after a
    sync that covered its offset."""

    def __init__(self, flush: Callable[[int], PutStatus]):
        self._flush = flush
        self._cond = threading.Condition()
        self._requests: list[tuple[int, Done]] = []
        self._thread: threading.Thread | None = None
        self._stopping = False
        self.syncs = 0  # syncs run, for tests and stats
        self.requests = 0

    @property
    def stopping(self) -> bool:
        return self._stopping

    def request(self, up_to_offset: int, done: Done) -> bool:
        """Have ``done(status)`` called once the CommitLog is durable up to
        ``up_to_offset`` (PUT_OK), or once that failed (FLUSH_DISK_TIMEOUT). False, and
        ``done`` never called, once the service is shut down: the caller syncs itself."""
        with self._cond:
            if self._stopping:
                return False
            self._requests.append((up_to_offset, done))
            self.requests += 1
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="rocketstore-group-commit", daemon=True
                )
                self._thread.start()
            self._cond.notify()
        return True

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._requests and not self._stopping:
                    self._cond.wait()
                if not self._requests:
                    return
                batch, self._requests = self._requests, []
            try:
                status = self._flush(max(offset for offset, _ in batch))
            except Exception:  # the flusher reports I/O errors; anything else is a bug
                log.exception("group commit sync failed")
                status = PutStatus.FLUSH_DISK_TIMEOUT
            self.syncs += 1
            for _, done in batch:
                try:
                    done(status)
                except Exception:
                    log.exception("group commit: a put's completion failed")

    def shutdown(self) -> None:
        """Answer every request made so far (after a last sync), then stop."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
            thread = self._thread
        if thread is not None:
            thread.join()
