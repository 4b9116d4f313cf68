"""The MessageStore facade's durability and lifetime: flush, the checkpoint's updates,
close (and the context manager).

Layer: store (the facade's package; see base.py).
"""

from __future__ import annotations

import contextlib
import logging
import os
from types import TracebackType
from typing import Self

from rocketstore.errors import StoreError
from rocketstore.paths import ABORT_FILE
from rocketstore.status import RunningFlags
from rocketstore.store.base import StoreBase

log = logging.getLogger(__name__)


class StoreLifetime(StoreBase):
    """MessageStore's flush, checkpoint and close."""

    def flush(self) -> None:
        """Make every appended byte durable (CommitLog, queues, index) and the checkpoint."""
        if self._closed or self.read_only:
            return
        if self.dispatcher.error is None:
            self.dispatcher.run_once()
        physic = self.commitlog.last_store_timestamp()
        logics = self.live_logics_timestamp
        self.commitlog.files.flush_all()
        for queue in list(self.queues.values()):
            queue.files.flush_all()
        self.index.flush()
        index_end = self.index.files[-1].end_timestamp if self.index.files else 0
        self._write_checkpoint(
            physic_msg_timestamp=physic, logics_msg_timestamp=logics, index_msg_timestamp=index_end
        )

    def _write_checkpoint(self, **fields: int) -> None:
        # Values only move forward: each is a promise that data up to it is on disk.
        current = self.checkpoint.value
        update = {k: max(v, getattr(current, k)) for k, v in fields.items() if v > 0}
        self.checkpoint.update(**update)
        self.checkpoint.flush()

    def _on_commitlog_flushed(self, store_timestamp: int) -> None:
        if store_timestamp > self.checkpoint.value.physic_msg_timestamp:
            self.checkpoint.update(physic_msg_timestamp=store_timestamp)

    def _on_queues_flushed(self, logics_timestamp: int) -> None:
        """After a thorough queue flush: persist the checkpoint (RocketMQ does the same)."""
        self._write_checkpoint(logics_msg_timestamp=logics_timestamp)

    def _on_flush_error(self, error: BaseException) -> None:
        log.error("flush failed, store no longer accepts writes: %s", error)
        self.running_flags |= RunningFlags.NOT_WRITEABLE

    def _on_index_file_full(self, end_timestamp: int) -> None:
        self._write_checkpoint(index_msg_timestamp=end_timestamp)

    def close(self) -> None:
        """Stop the services, flush everything, and remove the abort marker if the store
        is consistent (dispatch caught up, no write fault). Files are unmapped and the
        lock released even when a step fails; the failure is logged and re-raised."""
        if self._closed:
            return
        error: BaseException | None = None
        try:
            if not self.read_only:
                self.group_commit.shutdown()  # answers every submitted put first
                self.retention.shutdown()
                self.prefaulter.shutdown()
                self.flusher.shutdown()
                try:
                    self.dispatcher.shutdown(catch_up=self.dispatcher.error is None)
                    self.flush()
                except (OSError, StoreError) as e:
                    log.error("%s: close could not flush everything: %s", self.root, e)
                    self.running_flags |= RunningFlags.NOT_WRITEABLE
                    error = e
                clean = (
                    error is None
                    and self.dispatcher.error is None
                    and self.dispatcher.lag_bytes() == 0
                    # A full disk refuses puts but leaves the files consistent.
                    and (self.running_flags & ~RunningFlags.DISK_FULL).writeable
                )
                if clean:
                    with contextlib.suppress(FileNotFoundError):
                        os.remove(os.path.join(self.root, ABORT_FILE))
        finally:
            self._closed = True
            self.commitlog.close()
            self._queue_table.close()
            self.index.close()
            if self._lock is not None:
                self._lock.release()
        if error is not None:
            raise error

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
