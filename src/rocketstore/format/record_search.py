"""Finding whole, valid records past damage (pure): how ``check``, ``rebuild`` and a
writer's recovery tell damage followed by readable records (which they refuse to cut)
from a torn tail (which is cut).

A candidate starts at each message magic. It counts only when its header decodes, its
PHYSICALOFFSET names the position it was found at (which random bytes almost never do),
its body matches its CRC, and it was stored no earlier than the last valid record before
the damage: RocketMQ's recovery moves the write position back without zeroing, so a
store it cut and wrote on holds old, intact records past its end, at the offsets they had.
An append cut short (``unfinished_append_end``) is a torn tail.

Layer: format.
"""

from __future__ import annotations

import struct
from typing import Protocol

from rocketstore.errors import CorruptDataError, IncompleteDataError
from rocketstore.format import record as rec

_MAGICS = tuple(struct.pack(">i", m) for m in (rec.MESSAGE_MAGIC_V1, rec.MESSAGE_MAGIC_V2))


class Searchable(Protocol):
    """File bytes that can be searched at C speed (bytes, an mmap)."""

    def find(self, sub: bytes, start: int = ..., end: int = ..., /) -> int: ...

    def __len__(self) -> int: ...


def unfinished_append_end(buf: Searchable, position: int, limit: int, base: int) -> int | None:
    """Where an append cut short ends, or None when ``position`` does not start one.

    rocketstore writes a batch's first TOTALSIZE last (SYNC_FLUSH's pwrite path): a kill in
    between leaves that size zero, its magic and other fields in place, and the batch's
    other records whole after it, all with the batch's one store time. Those records were
    never acknowledged: what they are is a torn tail. Anything else (a zeroed size with
    records of other times after it: damage) is not."""
    view = memoryview(buf)  # type: ignore[arg-type]
    try:
        head = bytes(view[position : position + rec.POS_BORNHOST + 40])
    finally:
        view.release()
    if len(head) < rec.POS_BORNHOST + 40 or head[:4] != bytes(4) or head[4:8] not in _MAGICS:
        return None
    sys_flag = struct.unpack_from(">i", head, rec.POS_SYSFLAG)[0]
    stamp = struct.unpack_from(">q", head, rec.store_timestamp_position(sys_flag))[0]
    end = position + 8  # (the cut record's own size is unknown)
    while True:
        following = first_valid_record(buf, end, limit, base, stamp)
        if following is None:
            return end
        if end != position + 8 and following != end:
            return None  # the batch's records follow one another
        view = memoryview(buf)  # type: ignore[arg-type]
        try:
            found = rec.read_record(view, following)
        finally:
            view.release()
        if isinstance(found, rec.Blank) or found.store_timestamp != stamp:
            return None  # a record of another time after it: not one batch
        end = following + found.size


def readable_record_after(
    buf: Searchable, position: int, limit: int, base: int, newest_stamp: int
) -> int | None:
    """Position of the first valid record after the damage at ``position`` (up to
    ``limit``), past the rest of a batch cut short if that is what starts there; None
    when the damage is a torn tail."""
    torn = unfinished_append_end(buf, position, limit, base)
    since = position + 1 if torn is None else torn
    return first_valid_record(buf, since, limit, base, newest_stamp)


def first_valid_record(
    buf: Searchable, start: int, limit: int, base: int, newest_stamp: int
) -> int | None:
    """Position in ``buf`` (a file whose first byte is CommitLog offset ``base``) of the
    first valid record starting in [``start``, ``limit``), or None."""
    nexts: dict[bytes, int] = {}
    for magic in _MAGICS:
        at = buf.find(magic, start + 4, limit + 4)
        if at >= 0:
            nexts[magic] = at
    while nexts:
        magic, at = min(nexts.items(), key=lambda item: item[1])
        if valid_record_at(buf, at - 4, base, newest_stamp):
            return at - 4
        following = buf.find(magic, at + 1, limit + 4)
        if following < 0:
            del nexts[magic]
        else:
            nexts[magic] = following
    return None


def valid_record_at(buf: Searchable, position: int, base: int, newest_stamp: int) -> bool:
    """Whether a whole record that passes every check starts at ``position``."""
    view = memoryview(buf)  # type: ignore[arg-type]
    try:
        found = rec.read_record(view, position, check_crc=True)
    except (CorruptDataError, IncompleteDataError):
        return False
    finally:
        view.release()
    return (
        not isinstance(found, rec.Blank)
        and found.physical_offset == base + position
        and found.store_timestamp >= newest_stamp
    )
