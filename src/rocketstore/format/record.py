"""CommitLog record codec (pure): encode v1 records, decode v1/v2, the END_OF_FILE blank.

Layout (IPv4 born and store hosts; a 16-byte IPv6 address shifts later fields by 12):

    0   4  TOTALSIZE        whole record length, this field included
    4   4  MAGICCODE        0xDAA320A7 (v1) / 0xDAA320AB (v2: 2-byte topic length)
    8   4  BODYCRC          zlib CRC32 of the body & 0x7FFFFFFF
    12  4  QUEUEID
    16  4  FLAG             producer's int flag
    20  8  QUEUEOFFSET      consume-queue index (0 for PREPARED/ROLLBACK)
    28  8  PHYSICALOFFSET   this record's own CommitLog offset
    36  4  SYSFLAG
    40  8  BORNTIMESTAMP
    48  8  BORNHOST         4 (or 16) address bytes + 4-byte port
    56  8  STORETIMESTAMP
    64  8  STOREHOST        4 (or 16) address bytes + 4-byte port
    72  4  RECONSUMETIMES
    76  8  PREPARED TRANSACTION OFFSET
    84  4  BODYLEN, then BODY
    .   1  TOPICLEN (v1, signed byte; v2: 2-byte short), then TOPIC (UTF-8)
    .   2  PROPLEN (signed short), then PROPERTIES (UTF-8)

The blank END_OF_FILE record is 8 bytes: int remaining-bytes-in-file, int 0xCBD43194.
Decoders tell apart "incomplete" (IncompleteDataError), corrupt bytes (CorruptDataError
with the position) and the blank (a ``Blank`` result).
"""

from __future__ import annotations

import functools
import mmap
import struct
from collections.abc import Callable
from typing import Any, NamedTuple

from rocketstore.errors import ConfigError, CorruptDataError, IncompleteDataError
from rocketstore.format import native, sysflag
from rocketstore.format.crc import masked_crc32
from rocketstore.format.hosts import decode_host, decoded_hosts
from rocketstore.format.message import MessageExt
from rocketstore.format.message_id import offset_msg_id_from_bytes
from rocketstore.format.properties import decode_properties

MESSAGE_MAGIC_V1 = -626843481  # 0xDAA320A7
MESSAGE_MAGIC_V2 = -626843477  # 0xDAA320AB
BLANK_MAGIC = -875286124  # 0xCBD43194
END_FILE_MIN_BLANK_LENGTH = 8
MAX_PROPERTIES_LENGTH = 32767

# Offsets of fixed fields (IPv4 born host; later fields shift when hosts are IPv6).
POS_TOTALSIZE = 0
POS_MAGIC = 4
POS_BODYCRC = 8
POS_QUEUEID = 12
POS_FLAG = 16
POS_QUEUEOFFSET = 20
POS_PHYSICALOFFSET = 28
POS_SYSFLAG = 36
POS_BORNTIMESTAMP = 40
POS_BORNHOST = 48

# TOTALSIZE, MAGIC, BODYCRC, QUEUEID, FLAG, QUEUEOFFSET, PHYSICALOFFSET, SYSFLAG, BORNTIMESTAMP
_HEAD = struct.Struct(">iiiiiqqiq")
_LONG = struct.Struct(">q")
_INT = struct.Struct(">i")
_SHORT = struct.Struct(">h")
_BYTE = struct.Struct(">b")
_RECONSUME_PREPARED = struct.Struct(">iq")
_BLANK = struct.Struct(">ii")

FIXED_OVERHEAD_V4 = 91
_TOPICS: dict[bytes, str] = {}  # every fixed field with IPv4/IPv4 hosts, v1 magic


def record_length(
    body_length: int,
    topic_length: int,
    properties_length: int,
    *,
    born_host_length: int = 8,
    store_host_length: int = 8,
    version: int = 1,
) -> int:
    """``CommitLog.calMsgLength``: the exact TOTALSIZE of a record."""
    topic_len_width = 1 if version == 1 else 2
    return (
        4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8
        + born_host_length
        + 8
        + store_host_length
        + 4 + 8
        + 4 + body_length
        + topic_len_width + topic_length
        + 2 + properties_length
    )  # fmt: skip


def encode_record(
    *,
    topic: bytes,
    body: bytes,
    properties: bytes,
    queue_id: int,
    flag: int,
    queue_offset: int,
    physical_offset: int,
    sys_flag: int,
    born_timestamp: int,
    born_host: bytes,
    store_timestamp: int,
    store_host: bytes,
    reconsume_times: int,
    prepared_transaction_offset: int,
    body_crc: int,
) -> bytes:
    """Encode one v1 record. Hosts are 8 or 20 encoded bytes; the V6 sysFlag bits are set
    from their lengths, as RocketMQ's CommitLog does."""
    # The V6 bits must describe the host fields actually written, or the record would not
    # decode: derive them from the host lengths, whatever the caller's flag said.
    sys_flag &= ~(sysflag.BORNHOST_V6_FLAG | sysflag.STOREHOSTADDRESS_V6_FLAG)
    if len(born_host) == 20:
        sys_flag |= sysflag.BORNHOST_V6_FLAG
    if len(store_host) == 20:
        sys_flag |= sysflag.STOREHOSTADDRESS_V6_FLAG
    if not 0 < len(topic) <= 127:
        raise ConfigError(f"a v1 record's topic is 1..127 bytes, got {len(topic)}")
    if len(properties) > MAX_PROPERTIES_LENGTH:
        raise ConfigError(f"properties are at most 32767 bytes, got {len(properties)}")
    if len(born_host) not in (8, 20) or len(store_host) not in (8, 20):
        raise ConfigError("encoded hosts are 8 (IPv4) or 20 (IPv6) bytes")
    total = record_length(
        len(body),
        len(topic),
        len(properties),
        born_host_length=len(born_host),
        store_host_length=len(store_host),
    )
    return b"".join(
        (
            _HEAD.pack(
                total,  # TOTALSIZE
                MESSAGE_MAGIC_V1,  # MAGICCODE
                body_crc,  # BODYCRC
                queue_id,  # QUEUEID
                flag,  # FLAG
                queue_offset,  # QUEUEOFFSET
                physical_offset,  # PHYSICALOFFSET
                sys_flag,  # SYSFLAG
                born_timestamp,  # BORNTIMESTAMP
            ),
            born_host,  # BORNHOST
            _LONG.pack(store_timestamp),  # STORETIMESTAMP
            store_host,  # STOREHOSTADDRESS
            _RECONSUME_PREPARED.pack(reconsume_times, prepared_transaction_offset),
            _INT.pack(len(body)),  # BODYLEN
            body,  # BODY
            _BYTE.pack(len(topic)),  # TOPICLEN (signed byte in v1)
            topic,  # TOPIC
            _SHORT.pack(len(properties)),  # PROPLEN
            properties,  # PROPERTIES
        )
    )


def encode_blank(remaining: int) -> bytes:
    """The 8-byte END_OF_FILE record: the whole remaining length, then the blank magic."""
    return _BLANK.pack(remaining, BLANK_MAGIC)


class Blank(NamedTuple):
    """An END_OF_FILE blank at ``position``: the rest of the file holds no record."""

    position: int
    remaining: int


class RecordView(NamedTuple):
    """A validated record's fields, with positions of its variable parts in the buffer."""

    position: int
    size: int
    magic: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    physical_offset: int
    sys_flag: int
    born_timestamp: int
    born_host: bytes
    store_timestamp: int
    store_host: bytes
    reconsume_times: int
    prepared_transaction_offset: int
    body_position: int
    body_length: int
    topic: str
    properties_position: int
    properties_length: int


def _need(buf_len: int, end: int, start: int, what: str) -> None:
    if end > buf_len:
        raise IncompleteDataError(end - start, buf_len - start, what)


def read_record(
    buf: bytes | bytearray | memoryview,
    position: int = 0,
    *,
    check_crc: bool = False,
    end: int | None = None,
) -> RecordView | Blank:
    """Decode the record at ``position`` of ``buf`` (readable up to ``end``).

    Returns a RecordView or a Blank. Raises IncompleteDataError when the buffer ends before
    the record does, CorruptDataError (with the position) for a bad magic, a size that does
    not match the fields, a negative length or a CRC mismatch (a stored CRC of 0 is accepted:
    RocketMQ issue #9121).
    """
    limit = len(buf) if end is None else end
    _need(limit, position + 8, position, "record header")
    total, magic = _BLANK.unpack_from(buf, position)
    if magic == BLANK_MAGIC:
        return Blank(position, total)
    if magic not in (MESSAGE_MAGIC_V1, MESSAGE_MAGIC_V2):
        raise CorruptDataError(f"illegal magic code {magic & 0xFFFFFFFF:#010x}", position=position)
    if total < FIXED_OVERHEAD_V4:
        raise CorruptDataError(f"record size {total} is below the minimum", position=position)
    _need(limit, position + total, position, "record")
    try:
        return _read_fields(buf, position, total, magic, check_crc)
    except struct.error as e:  # a length field pointed outside the record
        raise CorruptDataError(f"record fields overrun: {e}", position=position) from e


def _read_fields(
    buf: bytes | bytearray | memoryview, position: int, total: int, magic: int, check_crc: bool
) -> RecordView:
    (
        _total,
        _magic,
        body_crc,
        queue_id,
        flag,
        queue_offset,
        physical_offset,
        sys_flag,
        born_timestamp,
    ) = _HEAD.unpack_from(buf, position)
    p = position + _HEAD.size
    born_len = 20 if sys_flag & sysflag.BORNHOST_V6_FLAG else 8
    born_host = bytes(buf[p : p + born_len])
    p += born_len
    (store_timestamp,) = _LONG.unpack_from(buf, p)
    p += 8
    store_len = 20 if sys_flag & sysflag.STOREHOSTADDRESS_V6_FLAG else 8
    store_host = bytes(buf[p : p + store_len])
    p += store_len
    reconsume_times, prepared = _RECONSUME_PREPARED.unpack_from(buf, p)
    p += 12
    (body_length,) = _INT.unpack_from(buf, p)
    p += 4
    record_end = position + total
    if body_length < 0 or p + body_length > record_end:
        raise CorruptDataError(f"bad body length {body_length}", position=position)
    body_position = p
    p += body_length
    if magic == MESSAGE_MAGIC_V1:
        (topic_length,) = _BYTE.unpack_from(buf, p)
        p += 1
    else:
        (topic_length,) = _SHORT.unpack_from(buf, p)
        p += 2
    if topic_length < 0 or p + topic_length > record_end:
        raise CorruptDataError(f"bad topic length {topic_length}", position=position)
    topic_bytes = bytes(buf[p : p + topic_length])
    p += topic_length
    (properties_length,) = _SHORT.unpack_from(buf, p)
    p += 2
    if properties_length < 0:
        raise CorruptDataError(f"bad properties length {properties_length}", position=position)
    expected = record_length(
        body_length,
        topic_length,
        properties_length,
        born_host_length=born_len,
        store_host_length=store_len,
        version=1 if magic == MESSAGE_MAGIC_V1 else 2,
    )
    if expected != total:
        raise CorruptDataError(
            f"record size {total} does not match its fields ({expected})", position=position
        )
    if check_crc and body_length > 0 and body_crc != 0:
        actual = masked_crc32(buf[body_position : body_position + body_length])
        if actual != body_crc:
            raise CorruptDataError(
                f"body CRC mismatch: stored {body_crc}, computed {actual}", position=position
            )
    topic = _TOPICS.get(topic_bytes)
    if topic is None:
        try:
            topic = topic_bytes.decode("utf-8")
        except UnicodeDecodeError as e:
            raise CorruptDataError("topic is not valid UTF-8", position=position) from e
        if len(_TOPICS) < 65536:  # a store has few topics; the cache only saves decoding
            _TOPICS[topic_bytes] = topic
    return RecordView(
        position,
        total,
        magic,
        body_crc,
        queue_id,
        flag,
        queue_offset,
        physical_offset,
        sys_flag,
        born_timestamp,
        born_host,
        store_timestamp,
        store_host,
        reconsume_times,
        prepared,
        body_position,
        body_length,
        topic,
        p,
        properties_length,
    )


def record_properties(buf: bytes | bytearray | memoryview, view: RecordView) -> dict[str, str]:
    start = view.properties_position
    return decode_properties(buf[start : start + view.properties_length])


def to_message_ext(
    buf: bytes | bytearray | memoryview, view: RecordView, *, read_body: bool = True
) -> MessageExt:
    """Build a MessageExt from a decoded record (the body is kept as stored)."""
    body = None
    if read_body:
        body = bytes(buf[view.body_position : view.body_position + view.body_length])
    return MessageExt(
        topic=view.topic,
        queue_id=view.queue_id,
        queue_offset=view.queue_offset,
        commit_log_offset=view.physical_offset,
        size=view.size,
        body=body,
        properties=record_properties(buf, view),
        msg_id=offset_msg_id_from_bytes(view.store_host, view.physical_offset),
        sys_flag=view.sys_flag,
        flag=view.flag,
        body_crc=view.body_crc,
        born_timestamp=view.born_timestamp,
        born_host=decode_host(view.born_host),
        store_timestamp=view.store_timestamp,
        store_host=decode_host(view.store_host),
        reconsume_times=view.reconsume_times,
        prepared_transaction_offset=view.prepared_transaction_offset,
        magic_code=view.magic,
    )


def _bound(function: Callable[..., Any]) -> Callable[..., Any]:
    """A C reader with its leading decode arguments bound (the MessageExt type, the topic
    and host caches, the properties decoder): a lookup is a few microseconds, and each
    argument passed costs."""
    return functools.partial(function, MessageExt, _TOPICS, decoded_hosts(), decode_properties)


# A whole key query by the C extension (``_native.key_lookup``), None when it is not
# built: the chains of "topic#key" in ``index_files`` (the IndexFiles, oldest first), each
# candidate record read from ``commitlog_files`` (the CommitLog's MappedFiles) and checked
# for ``topic``, the store time window and ``key`` among its KEYS (its UNIQ_KEY with
# ``unique``), at most ``max_count``, in candidate order. It answers None to leave the
# query to the Python path (a file going away, a record it declines).
# (index_files, commitlog_files, file_size, topic, key, unique, begin_ms, end_ms, max_count)
KeyLookup = Callable[
    [list[Any], list[Any], int, str, str, bool, int, int, int], list[MessageExt] | None
]
fast_key_lookup: KeyLookup | None = None if native.key_lookup is None else _bound(native.key_lookup)


# A pull of every tag by the C extension (``_native.pull_messages``), None when it is not
# built: MessageReader's batch rules over raw queue units (units, max_count, commit_max,
# memory_bytes, then the in-memory and in-disk byte and count limits), each record taken
# read from ``commitlog_files`` with ``file_size``: (messages, index of the first unit not
# taken, last offset or -1), or None to leave the pull to the Python path.
PullMessages = Callable[
    [bytes, int, int, float, int, int, int, int, list[Any], int],
    tuple[list[MessageExt], int, int] | None,
]
fast_pull_messages: PullMessages | None = (
    None if native.pull_messages is None else _bound(native.pull_messages)
)


def fast_message_exts(
    buf: bytes | bytearray | memoryview | mmap.mmap,
    base: int,
    limit: int,
    offsets: list[int],
    sizes: list[int],
    read_body: bool = True,
) -> list[MessageExt | None]:
    """``to_message_ext(buf, read_record(...))`` done by the C extension for records of
    one file mapped as ``buf`` (its first byte at CommitLog offset ``base``), readable up to
    ``limit``: v1 records at ``offsets`` whose size is that of ``sizes`` (-1: any). None
    for each record left to the Python decoder (anything uncommon or malformed, a topic
    or host seen for the first time), and for all when the extension is not built."""
    if native.decode_messages is None:
        return [None] * len(offsets)
    found: list[MessageExt | None] = native.decode_messages(
        buf,
        base,
        limit,
        offsets,
        sizes,
        read_body,
        MessageExt,
        _TOPICS,
        decoded_hosts(),
        decode_properties,
    )
    return found


def decode_message(
    buf: bytes | bytearray | memoryview, position: int = 0, *, check_crc: bool = False
) -> MessageExt:
    """Decode a full message at ``position``; CorruptDataError if it is a blank."""
    view = read_record(buf, position, check_crc=check_crc)
    if isinstance(view, Blank):
        raise CorruptDataError("END_OF_FILE blank where a message was expected", position=position)
    return to_message_ext(buf, view)


def store_timestamp_position(sys_flag: int) -> int:
    """Where STORETIMESTAMP sits in a record: 56, or 68 when the born host is IPv6."""
    return 68 if sys_flag & sysflag.BORNHOST_V6_FLAG else 56
