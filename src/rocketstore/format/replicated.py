"""Checks on CommitLog bytes a slave received from its master, before it appends them.

Layer: format (pure: bytes in, a verdict out). :meth:`MessageStore.append_replicated`
calls it with the bytes from the first record not yet wholly checked (a record the last
transfer cut) through the end of the new ones, within one CommitLog file.

The master cuts its transfers anywhere (haTransferBatchSize), so the bytes end in the
middle of a record as often as not: that record is *incomplete*, looked at again once the
rest of it has arrived. Every whole record must pass recovery's rules (a valid header and
fields, PHYSICALOFFSET equal to where it lies, the 8-byte file tail rule; the body CRC with
``check_crc``, which a Java 4.9.8 slave never checks: a pass over every byte);
an END_OF_FILE blank must say how much of the file is left, and what follows it up to the
file's end is filler, copied as it is. Anything else is *corrupt*: the slave refuses the
whole transfer and appends none of it (a Java slave appends whatever it gets; its
dispatcher skips what it cannot read, and its files then differ from nothing in particular).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from rocketstore.errors import CorruptDataError, IncompleteDataError
from rocketstore.format import record as rec
from rocketstore.format.commitlog_walk import FileWalk
from rocketstore.format.record_scan import Records, Stop, TopicTable

_HEAD8 = struct.Struct(">ii")
_LONG = struct.Struct(">q")


class ReplicatedCheck(NamedTuple):
    """What the checked bytes hold.

    ``next_record``: the position (in the checked bytes) of the first record not wholly in
    them, or the file's end after a blank; ``store_timestamp``: the STORETIMESTAMP of the
    last whole record (0 when there is none)."""

    next_record: int
    store_timestamp: int


def check_replicated(
    buf: bytes | bytearray | memoryview, base: int, file_end: int, *, check_crc: bool = True
) -> ReplicatedCheck:
    """Check the records of ``buf``, which starts at a record boundary at CommitLog offset
    ``base``; its file ends at position ``file_end`` of ``buf`` (``len(buf) <= file_end``).

    CorruptDataError (position: the CommitLog offset of the bad record) when a whole record
    or the start of one is not valid."""
    return check_replicated_records(buf, base, file_end, check_crc=check_crc)[0]


def check_replicated_records(
    buf: bytes | bytearray | memoryview,
    base: int,
    file_end: int,
    *,
    check_crc: bool = True,
    topics: TopicTable | None = None,
) -> tuple[ReplicatedCheck, Records | None]:
    """``check_replicated``, with the whole records it walked (positions within ``buf``,
    topic ids of ``topics``): a slave's dispatcher takes them instead of decoding the
    same bytes again. None when the walker stopped short and the record by record check
    decided (it then raises, or found no whole record)."""
    if len(buf) > file_end:
        raise CorruptDataError(
            f"replicated bytes run {len(buf) - file_end} bytes past their CommitLog file",
            position=base + file_end,
        )
    walked = _walked(buf, base, file_end, check_crc, TopicTable() if topics is None else topics)
    if walked is not None:
        return walked
    return _check_one_by_one(buf, base, file_end, check_crc), None


def _walked(
    buf: bytes | bytearray | memoryview,
    base: int,
    file_end: int,
    check_crc: bool,
    topics: TopicTable,
) -> tuple[ReplicatedCheck, Records] | None:
    """The CommitLog walker's answer (recovery's rules, a run at a time, in C when the
    extension is built) and its records: None when it stopped at something not valid,
    which the record by record check then names."""
    walk = FileWalk(
        memoryview(buf).cast("B"),
        base,
        0,
        file_end,
        topics=topics,
        readable=len(buf),
        check_crc=check_crc,
    )
    runs = list(walk)
    stamp = int(runs[-1].store_timestamp[-1]) if runs else 0
    verdict = walk.verdict
    if verdict.stop in (Stop.BOUNDARY, Stop.INCOMPLETE):
        return ReplicatedCheck(verdict.position, stamp), Records.concat(runs)
    if verdict.stop == Stop.BLANK:
        return ReplicatedCheck(file_end, stamp), Records.concat(runs)
    return None


def _check_one_by_one(
    buf: bytes | bytearray | memoryview, base: int, file_end: int, check_crc: bool
) -> ReplicatedCheck:
    position = 0
    stamp = 0
    while position < len(buf):
        if len(buf) - position < 8:
            break  # the header itself is still arriving
        total, magic = _HEAD8.unpack_from(buf, position)
        if magic == rec.BLANK_MAGIC:
            if total != file_end - position:
                raise CorruptDataError(
                    f"END_OF_FILE blank says {total} bytes are left, the file has "
                    f"{file_end - position}",
                    position=base + position,
                )
            return ReplicatedCheck(file_end, stamp)
        if magic not in (rec.MESSAGE_MAGIC_V1, rec.MESSAGE_MAGIC_V2):
            raise CorruptDataError(
                f"no record header (magic {magic & 0xFFFFFFFF:#010x})", position=base + position
            )
        if total < rec.FIXED_OVERHEAD_V4 or position + total > file_end:
            raise CorruptDataError(
                f"record size {total} does not fit its file", position=base + position
            )
        if position + total > len(buf):
            break  # the rest of the record is still arriving
        try:
            view = rec.read_record(buf, position, check_crc=check_crc, end=position + total)
        except IncompleteDataError as e:  # fields that claim more than TOTALSIZE
            raise CorruptDataError(f"record fields overrun: {e}", position=base + position) from e
        except CorruptDataError as e:
            raise CorruptDataError(e.reason, position=base + position) from e
        assert isinstance(view, rec.RecordView)  # the blank was handled above
        if view.physical_offset != base + position:
            raise CorruptDataError(
                f"PHYSICALOFFSET {view.physical_offset} in a record at {base + position}",
                position=base + position,
            )
        end = position + total
        if file_end - end < rec.END_FILE_MIN_BLANK_LENGTH and end != file_end:
            raise CorruptDataError(
                "record leaves less than 8 bytes before the file end", position=base + position
            )
        stamp = view.store_timestamp
        position = end
    return ReplicatedCheck(position, stamp)
