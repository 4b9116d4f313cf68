"""Keeps the CommitLog's next file and page tables ahead of the writer.

Layer: services. Two waits the writer would otherwise take, both moved to this thread, on
the other core and without the GIL:

- *The next file.* Creating and preallocating a CommitLog file takes milliseconds
  (``posix_fallocate`` of 1 GiB). When the writer comes within ``ahead_bytes`` of the end
  of the last file (or the CommitLog has none yet), this thread creates the file that
  follows as the queue's spare (``MappedFileQueue.prepare_next``, RocketMQ's
  AllocateMappedFileService); the roll then takes it as it is.
- *Page faults.* CommitLog files are preallocated (``MappedFile`` reserves their blocks so
  a full disk fails cleanly), and the first write to each page of such a file costs a
  fault of several microseconds: for 1 KiB messages more than the rest of a put. This
  thread has the kernel take them for the next ``ahead_bytes`` past the write position,
  into the spare too (``MappedFile.prefault``, bytes unchanged). Where the kernel cannot
  (before Linux 5.14) or the C extension is missing, that part stops for good and the
  writer takes its faults itself, as without it.

With SYNC_FLUSH the CommitLog is written with pwrite (``CommitLog.write_through``), so
its pages are never faulted; instead, while the syncs are small
(``Flusher.small_sync_flushes``), the margin is filled with real zeros
(``CommitLog.zero_ahead``), so that a sync writes data only, without converting
preallocated blocks in a journal commit.

A slave's CommitLog (``MessageStore.append_replicated``) is written with pwrite too; from
its first replicated append on, its pages are not faulted in either
(``skip_commitlog_faults``): the next file is still made ahead.

The same for the index, whose writer is the dispatcher: the next index file is made ahead
of need and the last one's entries are faulted in ahead of it
(``IndexService.prefault_ahead``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from rocketstore.commitlog import CommitLog
from rocketstore.errors import StoreError
from rocketstore.files.mapped_file import MappedFile
from rocketstore.index import IndexService

log = logging.getLogger(__name__)

STEP_BYTES = 4 * 1024 * 1024  # per call: a file roll is noticed within one step
# Zeroing goes at the writer's pace, a little ahead: a burst of tens of MiB written to a
# VM's disk slowed its syncs for a second afterwards.
ZERO_AHEAD_BYTES = 4 * 1024 * 1024
ZERO_STEP_BYTES = 1024 * 1024


class Prefaulter:
    def __init__(
        self,
        commitlog: CommitLog,
        ahead_bytes: int,
        index: IndexService | None = None,
        *,
        zero_fill: Callable[[], bool] | None = None,
    ):
        """``zero_fill`` (for a written-through CommitLog) says whether to zero the margin
        now; without it the margin's pages are faulted in."""
        self.commitlog = commitlog
        self.index = index
        self.ahead_bytes = ahead_bytes
        self.enabled = ahead_bytes > 0
        self.zero_fill = zero_fill
        # How far ahead of the writer pages are faulted in (or zeroed), and per step.
        zeroing = zero_fill is not None
        self.margin = min(ahead_bytes, ZERO_AHEAD_BYTES) if zeroing else ahead_bytes
        self.step = ZERO_STEP_BYTES if zeroing else STEP_BYTES
        # False once the kernel (or a missing C extension) showed it cannot prefault.
        self.faults_enabled = self.enabled
        # CommitLog offset up to which pages are known to be faulted in.
        self.ready_offset = 0
        # The end of the last file when making its successor failed (None: no failure).
        self._spare_failed_at: int | None = None
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def wakeup(self, max_offset: int) -> None:
        """After an append: wake the thread once the writer is half-way into the margin."""
        if self.enabled and max_offset + self.margin // 2 > self.ready_offset:
            self._wake.set()

    def wake_for_index(self) -> None:
        """After a dispatch: wake the thread once the index needs it."""
        if self.enabled and self.index is not None and self.index.wants_prefault():
            self._wake.set()

    def skip_commitlog_faults(self) -> None:
        """The CommitLog is written with pwrite from now on (a slave's replicated bytes):
        faulting its pages in would only zero them before the write copies over them.
        The next file is still made ahead; a SYNC_FLUSH store's zeroing goes on."""
        if self.zero_fill is None:
            self.faults_enabled = False

    def run_once(self) -> bool:
        """One step for the CommitLog or, once its margin is ready, one for the index;
        True if there is more to do. The writer's margin comes first: making a new index
        file takes tens of milliseconds (its slots faulted in), and puts that overtook an
        unfinished margin meanwhile took their own faults (a fresh store's first 20,000
        puts of 1 KiB ran 1.7x slower)."""
        if not self.enabled:
            return False
        if self._commitlog_once():
            return True
        return self.index is not None and self.index.prefault_ahead()

    def _commitlog_once(self) -> bool:
        """Make the spare file when it is due, then fault in the next step ahead of the
        writer; True if there is more to do."""
        files = self.commitlog.files
        mapped = files.last
        wrote = 0 if mapped is None else mapped.file_from_offset + mapped.wrote_position
        file_end = 0 if mapped is None else mapped.file_from_offset + mapped.file_size
        target = wrote + self.margin
        if wrote + self.ahead_bytes > file_end and self._spare_failed_at != file_end:
            # The margin reaches past the last file: the next one is due.
            try:
                spare = files.prepare_next(0)
            except (OSError, StoreError) as e:  # a full disk: the writer's roll reports it
                log.warning("could not make the next CommitLog file ahead: %s", e)
                self._spare_failed_at = file_end  # not again until the writer rolls
            else:
                if mapped is None or self.ready_offset >= file_end:
                    start = max(self.ready_offset, spare.file_from_offset)
                    return self._fault(spare, start, target)
        if mapped is None:
            return False
        more = self._fault(mapped, max(self.ready_offset, wrote), min(target, file_end))
        # Faulted to the end of the last file: the spare's turn comes next.
        return more or (target > file_end and self.faults_enabled and files.spare is not None)

    def _fault(self, mapped: MappedFile, start: int, target: int) -> bool:
        """Fault in (or zero) one step of [start, target) (CommitLog offsets) of
        ``mapped``; True if there is more to do."""
        target = min(target, mapped.file_from_offset + mapped.file_size)
        if not self.faults_enabled:
            # Nothing to fault: no wake-up per append for it (a slave's pwrite appends
            # woke this thread every time, a futex wake and two context switches each).
            self.ready_offset = max(self.ready_offset, target)
            return False
        if start >= target:
            return False
        end = min(target, start + self.step)
        base = mapped.file_from_offset
        if self.zero_fill is not None:
            if not self.zero_fill():
                self.ready_offset = target  # nothing to do: no wake-up per append for it
                return False
            reached = base + self.commitlog.zero_ahead(mapped, start - base, end - base)
            self.ready_offset = max(self.ready_offset, reached)
            return reached == end < target
        if not mapped.prefault(start - base, end - base):
            if not mapped.is_full and mapped.writable:  # a file retired meanwhile is no reason
                log.info("CommitLog prefault unavailable here; the writer takes its faults")
                self.faults_enabled = False
            return False
        self.ready_offset = end
        return end < target

    def start(self) -> None:
        if self._thread is not None or not self.enabled:
            return
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._run, name="rocketstore-prefaulter", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()  # before the run, so an append during it is not missed
            try:
                while self.run_once() and not self._stop.is_set():
                    pass
            except Exception:  # an optimisation only: never take the store down
                log.exception("CommitLog prefault failed; the writer takes its faults")
                self.enabled = False
                return
            self._wake.wait(timeout=1.0)

    def shutdown(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
