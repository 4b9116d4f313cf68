"""The timer store's three files, in RocketMQ 5.3.3's layout (codecs in
``rocketstore.format.timer``; docs/format.md "Timer messages"):

* ``timerlog/``: units appended in order, files named by their start offset as the
  CommitLog's (TimerLog on a MappedFileQueue, 100 MiB files by default);
* ``timerwheel``: one file of 2 x 7 x 86,400 slots of 32 bytes (TimerWheel);
* ``config/timercheck``: the checkpoint (TimerCheckpoint, a 4,096-byte file).

Layer: store. Bytes on disk only; the timer service (``rocketstore.store.timer``) decides
what goes in them.
"""

from __future__ import annotations

import logging
import mmap
import os

import numpy as np

from rocketstore.errors import CorruptDataError, IncompleteDataError, StoreError
from rocketstore.files.mapped_file_queue import MappedFileQueue
from rocketstore.files.mapping import map_file
from rocketstore.files.regular_file import open_store_file
from rocketstore.format import timer as fmt

log = logging.getLogger(__name__)

TIMER_LOG_DIR = "timerlog"
TIMER_WHEEL_FILE = "timerwheel"
TIMER_CHECK_FILE = os.path.join("config", "timercheck")
# A wheel slot as numpy reads it (big-endian, as format.timer's layout).
_SLOT_DTYPE = np.dtype(
    [("time", ">i8"), ("first", ">i8"), ("last", ">i8"), ("num", ">i4"), ("magic", ">i4")]
)
# Units read at a time by recovery's walk.
_WALK_UNITS = 16_384


class TimerLog:
    """The timer log: 52-byte units, a blank at each file's end (TimerLog.append)."""

    def __init__(self, root: str, file_size: int) -> None:
        self.file_size = file_size
        self.files = MappedFileQueue(os.path.join(root, TIMER_LOG_DIR), file_size, writable=True)
        self.files.load()

    def append(self, unit: fmt.TimerLogUnit) -> int:
        """Append ``unit``; its offset in the log."""
        data = fmt.encode_unit(unit)
        mapped = self.files.last_file_for_write()
        if len(data) + fmt.MIN_BLANK_LEN > mapped.free_bytes:
            mapped.append(fmt.encode_blank(mapped.free_bytes))
            mapped.wrote_position = mapped.file_size
            mapped = self.files.last_file_for_write()
        return mapped.file_from_offset + mapped.append(data)

    def read(self, offset: int) -> fmt.TimerLogUnit | None:
        """The unit at ``offset``; None when none is there (past the end, a blank, bytes
        that are no unit)."""
        mapped = self.files.find(offset)
        if mapped is None:
            return None
        position = offset - mapped.file_from_offset
        if position + fmt.UNIT_SIZE > mapped.wrote_position:
            return None
        data = mapped.read_held(position, fmt.UNIT_SIZE)
        if data is None:
            return None
        try:
            return fmt.decode_unit(data)
        except (CorruptDataError, IncompleteDataError) as e:
            log.error("timer log offset %d: %s", offset, e)
            return None

    def units_from(self, offset: int) -> list[tuple[int, fmt.TimerLogUnit]]:
        """Recovery's walk: the units from the start of the file holding ``offset`` to the
        first blank of the last file, a unit that is not one, or the end of the files."""
        found: list[tuple[int, fmt.TimerLogUnit]] = []
        for mapped in self.files.files:
            if mapped.file_from_offset + self.file_size <= offset:
                continue
            position = 0
            while position + fmt.UNIT_SIZE <= mapped.file_size:
                # In pieces: a file is 100 MiB, its data often a few units.
                data = mapped.read(position, _WALK_UNITS * fmt.UNIT_SIZE)
                at = 0
                while at + fmt.UNIT_SIZE <= len(data):
                    try:
                        unit = fmt.decode_unit(data, at)
                    except (CorruptDataError, IncompleteDataError):
                        return found  # the end of what was written (zeros), or damage
                    if unit is None:
                        break  # a blank: the next file goes on
                    found.append((mapped.file_from_offset + position + at, unit))
                    at += fmt.UNIT_SIZE
                else:
                    position += at
                    continue
                break
        return found

    def end_after(self, units: list[tuple[int, fmt.TimerLogUnit]], begin: int) -> int:
        """Where appends go on after recovery's walk ended at its last unit."""
        if units:
            last = units[-1][0] + fmt.UNIT_SIZE
        else:
            last = begin - begin % self.file_size if self.files.files else 0
        return last

    def last_unit_position(self) -> int:
        """Where a full file's last unit is (TimerLog.getOffsetForLastUnit)."""
        size = self.file_size
        return size - (size - fmt.MIN_BLANK_LEN) % fmt.UNIT_SIZE - fmt.MIN_BLANK_LEN - fmt.UNIT_SIZE

    def delete_expired(self, min_commit_log_offset: int) -> int:
        """Delete the oldest files (never the last) whose last unit names a message below
        the CommitLog's first offset (deleteExpiredFileByOffsetForTimerLog): their messages
        are gone with the CommitLog files retention removed. How many were deleted."""
        position = self.last_unit_position()
        count = 0
        for mapped in self.files.files[:-1]:
            data = mapped.read_held(position, fmt.UNIT_SIZE)
            try:
                unit = fmt.decode_unit(data) if data is not None else None
            except (CorruptDataError, IncompleteDataError):
                unit = None
            if unit is None or unit.commit_log_offset >= min_commit_log_offset:
                break
            count += 1
        if count:
            for mapped in self.files.delete_first(count):
                log.info("timer log file %s deleted: its messages are gone", mapped.path)
        return count

    def truncate(self, offset: int) -> None:
        self.files.truncate_dirty_files(offset)

    def flush(self) -> int:
        self.files.flush(0)
        return self.files.flushed_where

    def close(self) -> None:
        self.files.flush_all()
        self.files.close()


class TimerWheel:
    """The wheel file, mapped: a slot per time step, twice around 7 days (TimerWheel)."""

    def __init__(self, root: str, precision_ms: int) -> None:
        self.precision_ms = precision_ms
        self.path = os.path.join(root, TIMER_WHEEL_FILE)
        os.makedirs(root, exist_ok=True)
        fd = open_store_file(self.path, os.O_RDWR | os.O_CREAT)
        try:
            size = os.fstat(fd).st_size
            if size not in (0, fmt.WHEEL_FILE_SIZE):
                raise CorruptDataError(
                    f"timer wheel of {size} bytes, expected {fmt.WHEEL_FILE_SIZE}", path=self.path
                )
            if size == 0:
                os.ftruncate(fd, fmt.WHEEL_FILE_SIZE)  # sparse, as RandomAccessFile.setLength
            self._mm: mmap.mmap = map_file(fd, fmt.WHEEL_FILE_SIZE, mmap.ACCESS_WRITE)
        finally:
            os.close(fd)

    def _position(self, time_ms: int) -> int:
        return fmt.slot_index(time_ms, self.precision_ms) * fmt.SLOT_SIZE

    def raw_slot(self, time_ms: int) -> fmt.Slot:
        return fmt.decode_slot(self._mm, self._position(time_ms), self.precision_ms)

    def slot(self, time_ms: int) -> fmt.Slot:
        """The slot of ``time_ms``'s step, or EMPTY_SLOT when it holds another time."""
        slot = self.raw_slot(time_ms)
        if slot.time_ms != time_ms // self.precision_ms * self.precision_ms:
            return fmt.EMPTY_SLOT
        return slot

    def put(self, slot: fmt.Slot) -> None:
        position = self._position(slot.time_ms)
        self._mm[position : position + fmt.SLOT_SIZE] = fmt.encode_slot(slot, self.precision_ms)

    def revise(self, time_ms: int, last_pos: int) -> None:
        """reviseSlot(time, IGNORE, last, force=true): recovery makes the slot end at a unit
        the log holds beyond what the wheel was last written with."""
        slot = self.slot(time_ms)
        step = time_ms // self.precision_ms * self.precision_ms
        if slot.time_ms == -1:
            self.put(fmt.Slot(step, last_pos, last_pos))
        else:
            self.put(slot._replace(last_pos=last_pos))

    def messages_from(self, time_ms: int) -> int:
        """Units in the slots of the coming turn from ``time_ms`` (getAllNum): every slot
        that holds the time its place stands for from there on. Reads the whole wheel."""
        slots = np.frombuffer(self._mm, dtype=_SLOT_DTYPE)
        first = fmt.slot_index(time_ms, self.precision_ms)
        expected = time_ms // self.precision_ms + (
            (np.arange(fmt.WHEEL_SLOTS, dtype=np.int64) - first) % fmt.WHEEL_SLOTS
        )
        held = slots["time"].astype(np.int64) == expected
        return int(slots["num"][held].astype(np.int64).sum())

    def flush(self) -> None:
        self._mm.flush()

    def close(self) -> None:
        try:
            self._mm.flush()
        finally:
            self._mm.close()


class TimerCheckpointFile:
    """config/timercheck: 56 bytes at the head of a 4,096-byte file."""

    def __init__(self, root: str) -> None:
        self.path = os.path.join(root, TIMER_CHECK_FILE)
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        self.value = fmt.TimerCheckpoint()
        self.existed = os.path.exists(self.path)
        if self.existed:
            fd = open_store_file(self.path)
            try:
                data = os.pread(fd, fmt.CHECKPOINT_SIZE, 0)
            finally:
                os.close(fd)
            try:
                self.value = fmt.decode_timer_checkpoint(data)
            except IncompleteDataError as e:
                raise CorruptDataError(str(e), path=self.path) from e

    def write(self, value: fmt.TimerCheckpoint) -> None:
        fd = open_store_file(self.path, os.O_RDWR | os.O_CREAT)
        try:
            if os.fstat(fd).st_size < fmt.CHECKPOINT_FILE_SIZE:
                os.ftruncate(fd, fmt.CHECKPOINT_FILE_SIZE)
            data = fmt.encode_timer_checkpoint(value)
            if os.pwrite(fd, data, 0) != len(data):
                raise StoreError(f"{self.path}: short write")
            os.fsync(fd)
        finally:
            os.close(fd)
        self.value = value
