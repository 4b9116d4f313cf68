"""The ``checkpoint`` file: 4,096 bytes, three (4.9) or five (5.x) big-endian longs.

Layer: recovery. Values live in memory; ``flush`` writes and fsyncs them, as RocketMQ does.
"""

from __future__ import annotations

import errno
import os

from rocketstore.crashpoints import DURING_CHECKPOINT_WRITE, crash_point
from rocketstore.errors import CorruptDataError, IncompleteDataError, StoreError
from rocketstore.files.regular_file import open_store_file, read_store_file
from rocketstore.format.checkpoint import (
    CHECKPOINT_FILE_SIZE,
    Checkpoint,
    decode_checkpoint,
    encode_checkpoint,
)


class CheckpointFile:
    def __init__(self, path: str, *, writable: bool):
        self.path = path
        self.writable = writable
        self.value = Checkpoint()
        self.was_present = False
        self.was_valid = True
        self.has_5x_fields = False
        try:
            # (a FIFO would block the read: refused by its path, not taken for damage)
            data = read_store_file(path, CHECKPOINT_FILE_SIZE)
        except FileNotFoundError:
            return
        self.was_present = True
        try:
            self.value = decode_checkpoint(data)
            self.has_5x_fields = any(data[24:40])
        except (IncompleteDataError, CorruptDataError):
            self.was_valid = False

    def update(self, **fields: int) -> None:
        self.value = self.value._replace(**fields)

    def reserve(self) -> None:
        """Make the file at its full size with its blocks allocated, as RocketMQ maps it
        at start: a flush on a full disk then rewrites blocks it has instead of failing
        (which stops every write). The bytes read the same; StoreError naming the path
        when the disk has no room for them now."""
        if not self.writable:
            return
        fd = open_store_file(self.path, os.O_RDWR | os.O_CREAT)
        try:
            os.posix_fallocate(fd, 0, CHECKPOINT_FILE_SIZE)
        except OSError as e:
            if e.errno not in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                raise StoreError(f"cannot reserve the checkpoint file {self.path}: {e}") from e
        finally:
            os.close(fd)

    def flush(self) -> None:
        if not self.writable:
            return
        image = encode_checkpoint(self.value, with_5x_fields=self.has_5x_fields)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.pwrite(fd, image[:8], 0)
            crash_point(DURING_CHECKPOINT_WRITE)  # a torn write: one field new, the rest old
            os.pwrite(fd, image[8:], 8)
            os.fsync(fd)
        finally:
            os.close(fd)
