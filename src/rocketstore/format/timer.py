"""RocketMQ 5's timer store records (RIP-43), pure codecs: the timer log unit, the timer
wheel slot and the timer checkpoint (``store/timer`` in RocketMQ 5.3.3: TimerLog, Slot,
TimerCheckpoint). No I/O; ``rocketstore.store.timer_files`` does the files.

Timer log unit, 52 bytes, big-endian (TimerLog.UNIT_SIZE; docs/format.md):

====== ==== ===============================================================
offset size meaning
====== ==== ===============================================================
0      4    size: 52
4      8    prev pos: the previous unit of the same slot (-1: none)
12     4    magic: 1 (default) | 2 (roll) | 4 (delete)
16     8    enqueue time: the wheel's write time (ms) when it was appended
24     4    delay: the slot's time minus the enqueue time (ms)
28     8    CommitLog offset of the message (in rmq_sys_wheel_timer)
36     4    its record size
40     4    String.hashCode of the real topic (for metrics)
44     8    reserved: 0
====== ==== ===============================================================

A file's end that cannot hold a unit and a blank gets a blank: 4 size (the bytes left),
8 zero, 4 BLANK_MAGIC_CODE.

Wheel slot, 32 bytes: 8 time / precision, 8 first pos, 8 last pos, 4 num, 4 magic. The
wheel file is 2 x 7 x 86,400 slots, slot i = (time / precision) % its count.

Checkpoint (config/timercheck, 4,096 bytes, the first 56 used): 8 last read time, 8
timer log flush position, 8 timer queue offset, 8 master timer queue offset, 8 data
version state version, 8 its timestamp, 8 its counter.
"""

from __future__ import annotations

import mmap
import struct
from typing import NamedTuple

from rocketstore.errors import CorruptDataError, IncompleteDataError

UNIT_SIZE = 52
# Where the CommitLog offset and size sit in a unit (UNIT_PRE_SIZE_FOR_MSG).
UNIT_PRE_SIZE_FOR_MSG = 28
MIN_BLANK_LEN = 16
# Java: 0xBBCCDDEE ^ 1880681586 + 8, where + binds first; as a signed int.
BLANK_MAGIC_CODE = struct.unpack(">i", struct.pack(">I", 0xBBCCDDEE ^ (1880681586 + 8)))[0]
MAGIC_DEFAULT = 1
MAGIC_ROLL = 1 << 1
MAGIC_DELETE = 1 << 2

SLOT_SIZE = 32
DAY_SECS = 24 * 3600
# TimerMessageStore: the wheel has 7 days of slots (twice over) whatever the precision.
TIMER_WHEEL_TTL_DAY = 7
SLOTS_TOTAL = TIMER_WHEEL_TTL_DAY * DAY_SECS
WHEEL_SLOTS = SLOTS_TOTAL * 2
WHEEL_FILE_SIZE = WHEEL_SLOTS * SLOT_SIZE
TIMER_BLANK_SLOTS = 60
# TimerMessageStoreConfig.setTimerPrecisionMs's candidates.
PRECISIONS_MS = (100, 200, 500, 1000)

CHECKPOINT_FILE_SIZE = 4096
CHECKPOINT_SIZE = 56

_UNIT = struct.Struct(">iqiqiqiiq")
_BLANK = struct.Struct(">iqi")
_SLOT = struct.Struct(">qqqii")
_CHECKPOINT = struct.Struct(">7q")


def is_magic_ok(magic: int) -> bool:
    """TimerMessageStore.isMagicOK: no bits above the low four."""
    return (magic | 0xF) == 0xF


class TimerLogUnit(NamedTuple):
    prev_pos: int
    magic: int
    enqueue_time_ms: int
    delay_ms: int
    commit_log_offset: int
    size: int
    topic_hash: int
    reserved: int = 0

    @property
    def delayed_time_ms(self) -> int:
        """The slot time the unit was put in."""
        return self.enqueue_time_ms + self.delay_ms

    @property
    def rolls(self) -> bool:
        return bool(self.magic & MAGIC_ROLL)

    @property
    def deletes(self) -> bool:
        return bool(self.magic & MAGIC_DELETE)


def encode_unit(unit: TimerLogUnit) -> bytes:
    return _UNIT.pack(
        UNIT_SIZE,
        unit.prev_pos,
        unit.magic,
        unit.enqueue_time_ms,
        unit.delay_ms,
        unit.commit_log_offset,
        unit.size,
        unit.topic_hash,
        unit.reserved,
    )


def decode_unit(data: bytes, position: int = 0) -> TimerLogUnit | None:
    """The unit at ``position``; None at a blank (the file's end). IncompleteDataError when
    fewer than 52 bytes are there, CorruptDataError for a size or magic that is no unit's."""
    if len(data) - position < _BLANK.size:
        raise IncompleteDataError(_BLANK.size, len(data) - position, "timer log unit")
    size, _prev, magic = _BLANK.unpack_from(data, position)
    if magic == BLANK_MAGIC_CODE:
        return None
    if size != UNIT_SIZE or not is_magic_ok(magic):
        raise CorruptDataError(
            f"no timer log unit (size {size}, magic {magic:#x})", position=position
        )
    if len(data) - position < UNIT_SIZE:
        raise IncompleteDataError(UNIT_SIZE, len(data) - position, "timer log unit")
    _size, *fields = _UNIT.unpack_from(data, position)
    return TimerLogUnit(*fields)


def encode_blank(length: int) -> bytes:
    """The blank filling a file's last ``length`` bytes (only its 16-byte head is written)."""
    return _BLANK.pack(length, 0, BLANK_MAGIC_CODE)


class Slot(NamedTuple):
    """One wheel slot: the time it holds (-1: another time's, or none), the first and last
    units of its chain in the timer log, their number."""

    time_ms: int
    first_pos: int
    last_pos: int
    num: int = 0
    magic: int = 0


EMPTY_SLOT = Slot(-1, -1, -1)


def slot_index(time_ms: int, precision_ms: int) -> int:
    return (time_ms // precision_ms) % WHEEL_SLOTS


def encode_slot(slot: Slot, precision_ms: int) -> bytes:
    # Java stores time / precision (older wheels, always 1 s, stored seconds the same way).
    return _SLOT.pack(
        slot.time_ms // precision_ms, slot.first_pos, slot.last_pos, slot.num, slot.magic
    )


def decode_slot(
    data: bytes | bytearray | memoryview | mmap.mmap, position: int, precision_ms: int
) -> Slot:
    """The raw slot at ``position`` (getRawSlot): its time is whatever it holds."""
    units, first, last, num, magic = _SLOT.unpack_from(data, position)
    return Slot(units * precision_ms, first, last, num, magic)


class TimerCheckpoint(NamedTuple):
    last_read_time_ms: int = 0
    last_timer_log_flush_pos: int = 0
    last_timer_queue_offset: int = 0
    master_timer_queue_offset: int = 0
    state_version: int = 0
    timestamp: int = 0
    counter: int = 0


def encode_timer_checkpoint(cp: TimerCheckpoint) -> bytes:
    return _CHECKPOINT.pack(*cp)


def decode_timer_checkpoint(data: bytes) -> TimerCheckpoint:
    if len(data) < 32:
        raise IncompleteDataError(32, len(data), "timer checkpoint")
    if len(data) < CHECKPOINT_SIZE:  # an older file: no data version
        data = bytes(data[:32]) + bytes(CHECKPOINT_SIZE - 32)
    return TimerCheckpoint(*_CHECKPOINT.unpack_from(data, 0))
