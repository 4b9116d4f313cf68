"""The body of SEND_BATCH_MESSAGE: messages in ``MessageDecoder.encodeMessages`` layout.

Layer: broker, pure codec. Each message::

    offset  size  field
    0       4     int32 TOTALSIZE   length of this entry, this field included
    4       4     int32 MAGICCODE   0 (unused)
    8       4     int32 BODYCRC     0 (unused; the store computes it)
    12      4     int32 FLAG        the message's flag
    16      4     int32 BODYLEN
    20      L     body
    20+L    2     int16 PROPERTIESLEN
    22+L    P     properties, UTF-8 name\\x01value\\x02...
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from rocketstore.broker.remoting import ProtocolError
from rocketstore.format import native
from rocketstore.format.properties import (
    decode_properties_str,
    encode_properties_str,
    join_batch_properties,
)

_HEAD = struct.Struct(">iiiii")  # TOTALSIZE, MAGICCODE, BODYCRC, FLAG, BODYLEN
_SHORT = struct.Struct(">h")


@dataclass(frozen=True)
class BatchEntry:
    flag: int
    body: bytes
    properties: dict[str, str]
    # The properties string as the client encoded it (decoding sets it; RocketMQ stores
    # these bytes as they are). None: the 4.9.1+ serialisation of ``properties``.
    text: str | None = None

    @property
    def properties_text(self) -> str:
        return encode_properties_str(self.properties) if self.text is None else self.text


def encode_batch(entries: list[BatchEntry]) -> bytes:
    out = bytearray()
    for entry in entries:
        props = entry.properties_text.encode("utf-8")
        total = _HEAD.size + len(entry.body) + _SHORT.size + len(props)
        out += _HEAD.pack(total, 0, 0, entry.flag, len(entry.body))
        out += entry.body
        out += _SHORT.pack(len(props))
        out += props
    return bytes(out)


def _entries(data: bytes) -> Iterator[tuple[int, bytes, str]]:
    """Each entry's (flag, body, properties string); ProtocolError (with the position) if
    one is cut or its sizes disagree."""
    position = 0
    while position < len(data):
        if position + _HEAD.size > len(data):
            raise ProtocolError("batch entry header cut short", position=position)
        total, _magic, _crc, flag, body_length = _HEAD.unpack_from(data, position)
        end = position + total
        body_start = position + _HEAD.size
        props_at = body_start + body_length
        if total < _HEAD.size + _SHORT.size or end > len(data) or body_length < 0:
            raise ProtocolError(f"batch entry size {total} is impossible", position=position)
        if props_at + _SHORT.size > end:
            raise ProtocolError(
                f"batch entry body length {body_length} overruns the entry", position=position
            )
        props_length = _SHORT.unpack_from(data, props_at)[0]
        if props_length < 0 or props_at + _SHORT.size + props_length != end:
            raise ProtocolError(
                f"batch entry properties length {props_length} does not fit the entry",
                position=position,
            )
        try:
            text = data[props_at + _SHORT.size : end].decode("utf-8")
        except UnicodeDecodeError as e:
            raise ProtocolError("batch entry properties are not UTF-8", position=position) from e
        yield flag, bytes(data[body_start:props_at]), text
        position = end


def decode_batch(data: bytes) -> list[BatchEntry]:
    """Every entry of a batch body; ProtocolError (with the position) if one is cut or
    its sizes disagree."""
    return [
        BatchEntry(flag, body, decode_properties_str(text), text)
        for flag, body, text in _entries(data)
    ]


@dataclass(frozen=True, slots=True)
class BatchColumns:
    """A batch body as columns: entry i is ``bodies[i]`` with flag ``flags[i]``, stored
    with the properties string ``texts[i]`` (its own, then the batch's)."""

    bodies: list[bytes]
    flags: list[int]
    texts: list[str]
    body_bytes: int  # the bodies' total length

    def __len__(self) -> int:
        return len(self.bodies)


def decode_batch_columns_python(data: bytes, suffix: str) -> BatchColumns:
    """``decode_batch_columns``'s definition (and its path without the extension)."""
    bodies: list[bytes] = []
    flags: list[int] = []
    texts: list[str] = []
    for flag, body, text in _entries(data):
        bodies.append(body)
        flags.append(flag)
        texts.append(join_batch_properties(text, suffix))
    return BatchColumns(bodies, flags, texts, sum(len(body) for body in bodies))


def decode_batch_columns(data: bytes, suffix: str) -> BatchColumns:
    """The entries of a batch body as columns, each entry's properties string joined with
    ``suffix`` (the batch's own properties) as RocketMQ 4.9.8 stores a batch record's
    (``join_batch_properties``): no Python object per entry but its body, flag and text
    (decoding each entry into objects was ~70 % of a batch send). ProtocolError as
    ``decode_batch``."""
    if native.batch_columns is not None:
        found = native.batch_columns(data, suffix)
        if found is not None:
            return BatchColumns(*found)
    return decode_batch_columns_python(data, suffix)
