"""The POP state's journal: what changed since the last snapshot, written before the
answer that hands out or acknowledges goes out.

Layer: broker.grpc. Files config/grpcPopState.journal.<N>, one JSON array of records
(:data:`rocketstore.broker.grpc.pop.JournalRecord`) a line, one line per receive, ack or
renewal pass: a single ``write`` each, so a kill -9 leaves whole lines (the page cache
keeps them); under SYNC_FLUSH the line is also fsync'ed (in a worker thread) before the
answer, as the store's own writes are, one fsync covering every line written before it
(the service's group commit). A snapshot (config/grpcPopState.json) names the
generation that follows it: taking one starts generation N+1, and once the snapshot is
written the files before N are deleted (N stays for the snapshot's ``.bak``). Reading
replays every file from the snapshot's generation on. docs/format.md, "POP state".
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import re
from typing import Any

log = logging.getLogger(__name__)

JOURNAL_PREFIX = "grpcPopState.journal."
_NAME = re.compile(re.escape(JOURNAL_PREFIX) + r"(\d+)$")


class PopJournal:
    def __init__(self, directory: str, *, sync: bool = False) -> None:
        self.directory = directory
        self.sync = sync
        self.generation = 0
        self._fd = -1
        self.written_bytes = 0  # in the current generation

    def generations(self) -> list[int]:
        """The generations on disk, oldest first."""
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        found = (_NAME.match(name) for name in names)
        return sorted(int(m.group(1)) for m in found if m is not None)

    def path(self, generation: int) -> str:
        return os.path.join(self.directory, f"{JOURNAL_PREFIX}{generation}")

    def read(self, since: int) -> list[Any]:
        """The records of every generation from ``since`` on, in order. A line that is not
        a JSON array (a torn last line after a power loss) is skipped and logged."""
        records: list[Any] = []
        for generation in self.generations():
            if generation < since:
                continue
            path = self.path(generation)
            with open(path, "rb") as f:
                for number, line in enumerate(f, 1):
                    try:
                        batch = json.loads(line)
                    except (UnicodeDecodeError, ValueError):
                        batch = None
                    if not isinstance(batch, list):
                        log.warning("%s line %d is not a journal line; skipped", path, number)
                        continue
                    records.extend(batch)
        return records

    def start(self, generation: int) -> None:
        """Append to generation ``generation`` from now on (a new, empty file)."""
        os.makedirs(self.directory, exist_ok=True)
        fd = os.open(
            self.path(generation), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644
        )
        self.close()
        self._fd = fd
        self.generation = generation
        self.written_bytes = 0

    def append(self, records: list[Any]) -> None:
        """One line for ``records``, in one write (the caller fsyncs under ``sync``:
        off the event loop)."""
        if not records or self._fd < 0:
            return
        line = json.dumps(records, separators=(",", ":")).encode("utf-8") + b"\n"
        view = memoryview(line)
        while view:  # a regular file takes it whole; the loop is for the rule, not the case
            view = view[os.write(self._fd, view) :]
        self.written_bytes += len(line)

    def fsync(self) -> None:
        fd = self._fd
        if fd < 0:
            return
        try:
            os.fsync(fd)
        except OSError as e:
            # Closed by start() meanwhile, which synced it first under ``sync``.
            if e.errno != errno.EBADF:
                raise

    def remove_before(self, generation: int) -> None:
        for old in self.generations():
            if old < generation:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.path(old))

    def close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            if self.sync:
                os.fsync(fd)
            os.close(fd)
