"""Checkpoint record codec (pure). The file is 4,096 bytes:

0  8  physicMsgTimestamp   store time covered by the last CommitLog flush
8  8  logicsMsgTimestamp   store time covered by the consume queues
16 8  indexMsgTimestamp    end time of the last full, flushed index file
24 8  masterFlushedOffset  (5.x only)
32 8  confirmPhyOffset     (5.x only)
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from rocketstore.errors import IncompleteDataError

CHECKPOINT_FILE_SIZE = 4096
_V4 = struct.Struct(">qqq")
_V5_TAIL = struct.Struct(">qq")
MIN_TIMESTAMP_MARGIN_MS = 3000


class Checkpoint(NamedTuple):
    physic_msg_timestamp: int = 0
    logics_msg_timestamp: int = 0
    index_msg_timestamp: int = 0
    master_flushed_offset: int = 0
    confirm_phy_offset: int = 0

    def min_timestamp(self) -> int:
        """``getMinTimestamp``: min(physic, logics) - 3 s, never negative."""
        return max(0, min(self.physic_msg_timestamp, self.logics_msg_timestamp) - 3000)

    def min_timestamp_index(self) -> int:
        return min(self.min_timestamp(), self.index_msg_timestamp)


def encode_checkpoint(cp: Checkpoint, *, with_5x_fields: bool = False) -> bytes:
    """The full 4,096-byte file image (4.9 writes only the first three longs)."""
    head = _V4.pack(cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp)
    if with_5x_fields:
        head += _V5_TAIL.pack(cp.master_flushed_offset, cp.confirm_phy_offset)
    return head + bytes(CHECKPOINT_FILE_SIZE - len(head))


def decode_checkpoint(buf: bytes | bytearray | memoryview) -> Checkpoint:
    if len(buf) < _V4.size:
        raise IncompleteDataError(_V4.size, len(buf), "checkpoint")
    physic, logics, index = _V4.unpack_from(buf, 0)
    flushed = confirm = 0
    if len(buf) >= _V4.size + _V5_TAIL.size:
        flushed, confirm = _V5_TAIL.unpack_from(buf, _V4.size)
    return Checkpoint(physic, logics, index, flushed, confirm)
