"""Finding whole, valid records past damage (pure): how ``check``, ``rebuild`` and a
writer's recovery tell damage followed by readable records (which they refuse to cut)
from a torn tail (which is cut).

A candidate starts at each message magic. It counts only when its header decodes, its
PHYSICALOFFSET names the position it was found at (which random bytes almost never do),
its body matches its CRC, and it was stored no earlier than the last valid record before
the damage: RocketMQ's recovery moves the write position back without zeroing, so a
store it cut and wrote on holds old, intact records past its end, at the offsets they had.

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
