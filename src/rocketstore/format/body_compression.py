"""Bodies as producers compress them. Pure codec: the store keeps a body as sent; readers
that show it (the CLI) inflate it with this.

A RocketMQ producer compresses a body of 4 KiB or more (``compressMsgBodyOverHowmuch``)
and sets SYSFLAG bit 0 (COMPRESSED). Since 4.9.4 the compression type sits in SYSFLAG bits
8-10: 1 LZ4 (an LZ4 frame, lz4-java's LZ4FrameOutputStream), 2 ZSTD (a zstd frame,
zstd-jni's ZstdOutputStream, which may not record the content size), 3 ZLIB; 0 is what
clients before 4.9.4 write, always zlib. The types 4-7 are unassigned.
"""

from __future__ import annotations

import enum
import zlib

import lz4.frame
import zstandard

from rocketstore.errors import CorruptDataError
from rocketstore.format import sysflag


class CompressionType(enum.IntEnum):
    """SYSFLAG bits 8-10 (``MessageSysFlag.getCompressionType``)."""

    LEGACY_ZLIB = 0
    LZ4 = 1
    ZSTD = 2
    ZLIB = 3


def compression_type(sys_flag: int) -> CompressionType | None:
    """The type a compressed body's SYSFLAG names; None for an unassigned value."""
    value = (sys_flag & sysflag.COMPRESSION_TYPE_MASK) >> 8
    try:
        return CompressionType(value)
    except ValueError:
        return None


def is_compressed(sys_flag: int) -> bool:
    return bool(sys_flag & sysflag.COMPRESSED_FLAG)


def inflate(body: bytes, sys_flag: int) -> bytes:
    """The body as the producer gave it. A body not flagged COMPRESSED is returned as it
    is; one that does not inflate with its type raises CorruptDataError naming why."""
    if not is_compressed(sys_flag):
        return body
    kind = compression_type(sys_flag)
    try:
        if kind in (CompressionType.LEGACY_ZLIB, CompressionType.ZLIB):
            return zlib.decompress(body)
        if kind is CompressionType.LZ4:
            inflated: bytes = lz4.frame.decompress(body)
            return inflated
        if kind is CompressionType.ZSTD:
            # A streamed frame may not say how long its content is: decompress as a stream.
            stream = zstandard.ZstdDecompressor().decompressobj()
            inflated = stream.decompress(body)
            if not stream.eof:
                raise CorruptDataError("the body does not inflate as ZSTD: the frame is cut short")
            return inflated
    except (zlib.error, RuntimeError, zstandard.ZstdError) as e:
        name = kind.name if kind is not None else "?"
        raise CorruptDataError(f"the body does not inflate as {name}: {e}") from e
    value = (sys_flag & sysflag.COMPRESSION_TYPE_MASK) >> 8
    raise CorruptDataError(f"compression type {value} (sysFlag {sys_flag:#x}) is unassigned")
