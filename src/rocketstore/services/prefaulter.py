"""Keeps the CommitLog's page tables ahead of the writer.

Layer: services. CommitLog files are preallocated (``MappedFile`` reserves their blocks so
a full disk fails cleanly), and the first write to each page of such a file costs the
writer a fault of several microseconds: for 1 KiB messages more than the rest of a put.
This thread has the kernel take those faults for the next ``ahead_bytes`` past the write
position (``MappedFile.prefault``, bytes unchanged), on the other core and without the GIL.
It stops for good where the kernel cannot (before Linux 5.14) or the C extension is
missing: then the writer takes the faults itself, as without it.
"""

from __future__ import annotations

import logging
import threading

from rocketstore.commitlog import CommitLog

log = logging.getLogger(__name__)

STEP_BYTES = 4 * 1024 * 1024  # per call: a file roll is noticed within one step


class Prefaulter:
    def __init__(self, commitlog: CommitLog, ahead_bytes: int):
        self.commitlog = commitlog
        self.ahead_bytes = ahead_bytes
        self.enabled = ahead_bytes > 0
        # CommitLog offset up to which pages are known to be faulted in.
        self.ready_offset = 0
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def wakeup(self, max_offset: int) -> None:
        """After an append: wake the thread once the writer is half-way into the margin."""
        if self.enabled and max_offset + self.ahead_bytes // 2 > self.ready_offset:
            self._wake.set()

    def run_once(self) -> bool:
        """Fault in the next step ahead of the writer; True if there is more to do."""
        mapped = self.commitlog.files.last
        if not self.enabled or mapped is None:
            return False
        wrote = mapped.file_from_offset + mapped.wrote_position
        target = min(wrote + self.ahead_bytes, mapped.file_from_offset + mapped.file_size)
        start = max(self.ready_offset, wrote)
        if start >= target:
            return False
        end = min(target, start + STEP_BYTES)
        base = mapped.file_from_offset
        if not mapped.prefault(start - base, end - base):
            if not mapped.is_full:  # a file retired meanwhile is no reason to stop
                log.info("CommitLog prefault unavailable here; the writer takes its faults")
                self.enabled = False
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
