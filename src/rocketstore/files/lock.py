"""The store directory's writer lock: an OS lock on the first byte of ``lock``.

Layer: files. Uses POSIX record locks (as Java's FileChannel.tryLock does on Linux), so a
RocketMQ broker and rocketstore exclude each other. POSIX locks are per process, so a
process-local registry rejects a second opener in the same process too.
"""

from __future__ import annotations

import fcntl
import os
import threading

from rocketstore.errors import StoreLockedError
from rocketstore.files.regular_file import open_store_file

_HELD: set[str] = set()
_HELD_LOCK = threading.Lock()


class DirectoryLock:
    def __init__(self, root: str, file_name: str = "lock"):
        self.path = os.path.join(root, file_name)
        self._key = os.path.realpath(root)
        self._fd: int | None = None

    def acquire(self) -> None:
        with _HELD_LOCK:
            if self._key in _HELD:
                raise StoreLockedError(f"store {self._key} is already open for writing here")
            # Regular files only: a FIFO so named fails lockf, which read as another
            # writer holding the store; it is refused by its path instead.
            fd = open_store_file(self.path, os.O_RDWR | os.O_CREAT)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
            except OSError as e:
                os.close(fd)
                raise StoreLockedError(
                    f"store {self._key} is locked by another writer process"
                ) from e
            os.pwrite(fd, b"lock", 0)
            os.fsync(fd)
            self._fd = fd
            _HELD.add(self._key)

    def release(self) -> None:
        with _HELD_LOCK:
            if self._fd is None:
                return
            try:
                fcntl.lockf(self._fd, fcntl.LOCK_UN, 1, 0)
            finally:
                os.close(self._fd)
                self._fd = None
                _HELD.discard(self._key)
