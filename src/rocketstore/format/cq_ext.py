"""ConsumeQueueExt units (spec 3.7): what a broker with ``enableConsumeQueueExt`` keeps
beside each consume-queue unit, under ``consumequeue_ext/<topic>/<queueId>/``.

Pure. Such a broker writes, for every unit, an extension unit (short size, long tagsCode,
long msgStoreTime, short bitMapSize, the filter bitmap), and puts the unit's *address*
in the consume-queue unit's tagsCode field instead of the tag hash: the byte offset in
the extension files plus ``Long.MIN_VALUE``, so it is at most ``Integer.MIN_VALUE - 1``
and never looks like a tag hash (a Java int, sign-extended) or a delivery time.
"""

from __future__ import annotations

import base64
import struct
from dataclasses import dataclass

from rocketstore.errors import CorruptDataError

# mappedFileSizeConsumeQueueExt: 48 MiB.
EXT_FILE_SIZE = 48 * 1024 * 1024
JAVA_LONG_MIN = -(1 << 63)
# ConsumeQueueExt.MAX_ADDR = Integer.MIN_VALUE - 1L: every address is at most this.
MAX_ADDRESS = -(1 << 31) - 1
MAX_REAL_OFFSET = MAX_ADDRESS - JAVA_LONG_MIN
# size (2) + tagsCode (8) + msgStoreTime (8) + bitMapSize (2).
MIN_EXT_UNIT_SIZE = 20
MAX_EXT_UNIT_SIZE = 32767  # Short.MAX_VALUE
# A file whose next unit would not fit ends with this size (short -1).
END_OF_FILE_SIZE = -1

_HEAD = struct.Struct(">hqqh")


def is_ext_address(tags_code: int) -> bool:
    """Whether a consume-queue tagsCode is an extension address (``isExtAddr``)."""
    return tags_code <= MAX_ADDRESS


def real_offset(address: int) -> int:
    """The byte offset in the extension files an address stands for (``unDecorate``)."""
    if not is_ext_address(address):
        raise ValueError(f"{address} is not a ConsumeQueueExt address")
    return address - JAVA_LONG_MIN


def address_of(offset: int) -> int:
    """The address of the extension unit at byte ``offset`` (``decorate``)."""
    if not 0 <= offset <= MAX_REAL_OFFSET:
        raise ValueError(f"offset {offset} is outside 0..{MAX_REAL_OFFSET}")
    return offset + JAVA_LONG_MIN


@dataclass(frozen=True, slots=True)
class ExtUnit:
    """One extension unit: the message's real tagsCode, its store time and its filter
    bitmap (empty when the broker computes none)."""

    tags_code: int
    msg_store_time: int
    bitmap: bytes = b""

    @property
    def size(self) -> int:
        return MIN_EXT_UNIT_SIZE + len(self.bitmap)


def encode_ext_unit(unit: ExtUnit) -> bytes:
    """``CqExtUnit.write``: the unit's bytes."""
    if unit.size > MAX_EXT_UNIT_SIZE:
        raise ValueError(f"an extension unit of {unit.size} bytes is past {MAX_EXT_UNIT_SIZE}")
    head = _HEAD.pack(unit.size, unit.tags_code, unit.msg_store_time, len(unit.bitmap))
    return head + unit.bitmap


def decode_ext_unit(data: bytes | memoryview, position: int) -> ExtUnit | None:
    """The unit at ``position`` (``CqExtUnit.read``); None where none is (a size below 1:
    zeros past the last unit, or a file's end marker). CorruptDataError when the bytes
    claim a unit they cannot hold."""
    if position + 2 > len(data):
        return None
    (size,) = struct.unpack_from(">h", data, position)
    if size < 1:
        return None
    if size < MIN_EXT_UNIT_SIZE or position + size > len(data):
        raise CorruptDataError(
            f"a ConsumeQueueExt unit claims {size} bytes "
            f"({len(data) - position} left, at least {MIN_EXT_UNIT_SIZE} needed)",
            position=position,
        )
    _size, tags_code, msg_store_time, bitmap_size = _HEAD.unpack_from(data, position)
    bitmap_size = max(bitmap_size, 0)
    if MIN_EXT_UNIT_SIZE + bitmap_size > size:
        raise CorruptDataError(
            f"a ConsumeQueueExt unit holds a {bitmap_size}-byte bitmap in {size} bytes",
            position=position,
        )
    start = position + MIN_EXT_UNIT_SIZE
    return ExtUnit(tags_code, msg_store_time, bytes(data[start : start + bitmap_size]))


def ext_unit_json(unit: ExtUnit) -> str:
    """The unit as mqadmin queryCq shows it (fastjson of ``CqExtUnit``: getters in name
    order, the bitmap as base64 and left out when there is none)."""
    fields = []
    if unit.bitmap:
        fields.append(f'"filterBitMap":"{base64.b64encode(unit.bitmap).decode()}"')
    fields += [
        f'"msgStoreTime":{unit.msg_store_time}',
        f'"size":{unit.size}',
        f'"tagsCode":{unit.tags_code}',
    ]
    return "{" + ",".join(fields) + "}"


def bitmap_text(bitmap: bytes) -> str:
    """``BitsArray.toString``: the bits from the last byte's highest to the first byte's
    lowest, a line break after every eighth byte counted from the first."""
    out = []
    for i in range(len(bitmap) - 1, -1, -1):
        out.append(f"{bitmap[i]:08b}")
        if i % 8 == 0:
            out.append("\n")
    return "".join(out)
