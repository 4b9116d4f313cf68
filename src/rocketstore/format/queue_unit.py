"""ConsumeQueue unit codec (pure): 20 bytes = CommitLog offset (8), size (4), tagsCode (8).

A queue's very first file may start with blank fill units (0, 0x7FFFFFFF, 0); recovery
treats any unit with offset >= 0 and size > 0 as valid.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from rocketstore.errors import IncompleteDataError
from rocketstore.java_ints import JAVA_LONG_MAX

CQ_UNIT_SIZE = 20
UNIT_LAYOUT = struct.Struct(">qiq")  # offset, size, tagsCode
BLANK_UNIT = UNIT_LAYOUT.pack(0, 0x7FFFFFFF, 0)

# numpy view of a run of units (big-endian, packed).
UNIT_DTYPE = np.dtype([("offset", ">i8"), ("size", ">i4"), ("tags_code", ">i8")])


class QueueUnit(NamedTuple):
    commit_log_offset: int
    size: int
    tags_code: int

    @property
    def is_valid(self) -> bool:
        return self.commit_log_offset >= 0 and self.size > 0

    @property
    def is_blank_fill(self) -> bool:
        return self.commit_log_offset == 0 and self.size == 0x7FFFFFFF and self.tags_code == 0


def encode_unit(commit_log_offset: int, size: int, tags_code: int) -> bytes:
    return UNIT_LAYOUT.pack(commit_log_offset, size, tags_code)


def encode_units(
    commit_log_offsets: npt.NDArray[np.int64],
    sizes: npt.NDArray[np.int64],
    tags_codes: npt.NDArray[np.int64],
) -> bytes:
    """A run of units, byte for byte ``encode_unit`` of each, in one numpy pass."""
    units = np.empty(len(commit_log_offsets), dtype=UNIT_DTYPE)
    units["offset"] = commit_log_offsets
    units["size"] = sizes
    units["tags_code"] = tags_codes
    return units.tobytes()


def decode_unit(buf: bytes | bytearray | memoryview, position: int = 0) -> QueueUnit:
    if position + CQ_UNIT_SIZE > len(buf):
        raise IncompleteDataError(CQ_UNIT_SIZE, max(0, len(buf) - position), "queue unit")
    return QueueUnit(*UNIT_LAYOUT.unpack_from(buf, position))


def decode_units(buf: bytes | bytearray | memoryview) -> npt.NDArray[np.void]:
    """All whole units of ``buf`` as a structured numpy array (no copy for bytes)."""
    count = len(buf) // CQ_UNIT_SIZE
    return np.frombuffer(buf, dtype=UNIT_DTYPE, count=count)


def max_queue_offset(file_size: int) -> int:
    """The highest queue offset a queue of ``file_size``-byte files can hold: its byte
    position and its file's end stay within a Java long. Only a damaged record carries a
    QUEUEOFFSET past it (or a negative one); RocketMQ's arithmetic would overflow on it."""
    return (JAVA_LONG_MAX - file_size) // CQ_UNIT_SIZE
