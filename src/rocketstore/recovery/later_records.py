"""Whether readable records follow the point where recovery stopped: the records
RocketMQ's recovery would cut away with the damage.

Layer: recovery. Reads the CommitLog's mappings; writes nothing.

A record is taken as readable only when it checks out whole: its header decodes, its
PHYSICALOFFSET names the position it was found at (which random bytes almost never do),
and its body matches its CRC. A torn write at the end of the data (the usual crash) is
followed by zeros or by a record's partial bytes, never by such a record, so it never
counts.
"""

from __future__ import annotations

import struct

from rocketstore.commitlog import CommitLog
from rocketstore.errors import CorruptDataError, FileRemovedError, IncompleteDataError
from rocketstore.files.mapped_file import MappedFile
from rocketstore.format import record as rec

_MAGICS = tuple(struct.pack(">i", m) for m in (rec.MESSAGE_MAGIC_V1, rec.MESSAGE_MAGIC_V2))


def first_record_after(commitlog: CommitLog, end: int, *, damaged: bool) -> int | None:
    """The CommitLog offset of the first whole, valid record past ``end``, or None.

    ``damaged``: recovery stopped at bytes that are no record (not at zeros), so the rest
    of that file is searched. At zeros (the end of the data, as after any crash) only the
    later files are looked at, by their first record: searching the rest of a 1 GiB file
    on every open would cost a read of its zeros.
    """
    size = commitlog.file_size
    for mapped in list(commitlog.files.files):
        file_end = mapped.file_from_offset + size
        if file_end <= end:
            continue
        if mapped.file_from_offset <= end:  # the file recovery stopped in
            if not damaged:
                continue
            found = _search(mapped, end - mapped.file_from_offset + 1, size)
        else:
            found = _search(mapped, 0, size, first_only=True)
        if found is not None:
            return found
    return None


def _search(mapped: MappedFile, start: int, size: int, *, first_only: bool = False) -> int | None:
    """Offset of the first valid record at or after ``start`` in ``mapped`` (only at
    ``start`` itself with ``first_only``)."""
    if not mapped.hold():
        raise FileRemovedError(f"{mapped.path} is closed")
    try:
        mm = mapped.mm
        if first_only:
            return mapped.file_from_offset + start if _valid_at(mapped, start, size) else None
        # A record's magic is its second word: find the candidates at C speed.
        candidates = (mm.find(magic, start + 4, size) for magic in _MAGICS)
        nexts = {m: at for m, at in zip(_MAGICS, candidates, strict=True) if at >= 0}
        while nexts:
            magic, at = min(nexts.items(), key=lambda item: item[1])
            if _valid_at(mapped, at - 4, size):
                return mapped.file_from_offset + at - 4
            following = mm.find(magic, at + 1, size)
            if following < 0:
                del nexts[magic]
            else:
                nexts[magic] = following
        return None
    finally:
        mapped.release()


def _valid_at(mapped: MappedFile, position: int, size: int) -> bool:
    buf = memoryview(mapped.mm)
    try:
        found = rec.read_record(buf, position, check_crc=True, end=size)
    except (CorruptDataError, IncompleteDataError):
        return False
    finally:
        buf.release()
    return (
        not isinstance(found, rec.Blank)
        and found.physical_offset == mapped.file_from_offset + position
    )
