"""The remoting frame and header codec (RemotingCommand.java, RocketMQSerializable.java).

Layer: remoting (below broker and spark, which both speak the protocol), pure codec:
bytes <-> :class:`RemotingCommand`; no sockets, no clock.

Frame on the wire::

    offset  size  field
    0       4     int32 BE  length of everything after this field (4 + header + body)
    4       4     int32 BE  (serialize type << 24) | header length
    8       H     header: JSON (type 0) or RocketMQ's binary layout (type 1)
    8+H     B     body, raw bytes

Requests arrive with loosely typed extFields (numbers, booleans, strings); they are coerced
to strings here, so processors see one type. Responses always carry string values, as a Java
broker sends them: some clients fail on numbers.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rocketstore.errors import CorruptDataError
from rocketstore.java_ints import JAVA_INT_MAX, JAVA_INT_MIN, fits_java_long
from rocketstore.remoting.codes import LANGUAGES

FLAG_RESPONSE = 0x1  # bit 0: this command answers a request
FLAG_ONEWAY = 0x2  # bit 1: the sender wants no answer

SERIALIZE_JSON = 0
SERIALIZE_ROCKETMQ = 1

# RocketMQ's default frame limit (com.rocketmq.remoting.frameMaxLength).
DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024

_INT = struct.Struct(">i")
_PREFIX = struct.Struct(">ii")  # frame length, serialize type + header length
# Binary header: code, language, version, opaque, flag.
_BINARY_HEAD = struct.Struct(">hbhii")
_SHORT = struct.Struct(">h")

# JSON lets a string hold an escaped lone UTF-16 surrogate (\ud800 without its pair); a
# Java peer keeps it in a String and writes "?" for it whenever the String becomes UTF-8
# bytes. Python cannot encode such a str at all: a response naming it, or a config file
# holding it, would fail to be written. So it becomes "?" as soon as the JSON is read.
_SURROGATE_ESCAPE_HINT = re.compile(r"\\u[dD][89a-fA-F]")
_JSON_ESCAPE = re.compile(
    r"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"  # a pair: one character
    r"|\\u[dD][89a-fA-F][0-9a-fA-F]{2}"  # a lone surrogate (6 characters)
    r"|\\.",  # any other escape, an escaped backslash included
    re.DOTALL,
)


class ProtocolError(CorruptDataError):
    """A frame or header that does not follow the remoting protocol; the connection that
    sent it is closed."""


class RequestFieldError(ProtocolError):
    """A request lacks a field its code needs, or the field is not of the right type;
    answered with SYSTEM_ERROR naming the field (the connection stays open)."""


@dataclass
class RemotingCommand:
    code: int
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    language: str = "JAVA"
    version: int = 0
    serialize_type: int = SERIALIZE_JSON

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY)

    def response(
        self,
        code: int,
        remark: str | None = None,
        ext_fields: Mapping[str, object] | None = None,
        body: bytes = b"",
    ) -> RemotingCommand:
        """The answer to this request: same opaque, response bit set, string ext values."""
        return RemotingCommand(
            code=int(code),
            opaque=self.opaque,
            flag=FLAG_RESPONSE,
            remark=remark,
            ext_fields=coerce_ext_fields(ext_fields or {}),
            body=body,
            version=self.version,
        )


def replace_lone_surrogates(text: str) -> str:
    """JSON ``text`` with each escaped lone surrogate replaced by ``?`` (what a Java peer
    stores for it); surrogate pairs and every other escape are kept."""
    if "\\u" not in text or _SURROGATE_ESCAPE_HINT.search(text) is None:
        return text
    return _JSON_ESCAPE.sub(lambda m: "?" if len(m.group(0)) == 6 else m.group(0), text)


def loads_json(data: bytes) -> Any:
    """A request body or header: UTF-8 JSON, lone surrogates read as ``?``. Raises
    UnicodeDecodeError or ValueError (nesting too deep included)."""
    try:
        return json.loads(replace_lone_surrogates(data.decode("utf-8")))
    except RecursionError as e:
        raise ValueError("JSON nested too deeply") from e


# --- extFields ------------------------------------------------------------------------


def _ext_value(value: object) -> str:
    if isinstance(value, bool):  # before int: bool is an int subclass
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, separators=(",", ":"))


def coerce_ext_fields(raw: object) -> dict[str, str]:
    """Any JSON object -> ``{str: str}``; null values are dropped (Java never sends them)."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ProtocolError(f"extFields must be an object, got {type(raw).__name__}")
    if type(raw) is dict and all(type(v) is str for v in raw.values()):
        # What Java clients send (every value a string) and what responses are built
        # from: a JSON object's keys are strings already.
        return {k if type(k) is str else str(k): v for k, v in raw.items()}
    return {str(k): _ext_value(v) for k, v in raw.items() if v is not None}


def ext_str(ext: Mapping[str, str], name: str, default: str | None = None) -> str:
    value = ext.get(name)
    if value is None:
        if default is None:
            raise RequestFieldError(f"the request has no {name!r} field")
        return default
    return value


def ext_int(ext: Mapping[str, str], name: str, default: int | None = None) -> int:
    """An integer field; beyond a Java long is a RequestFieldError, as Long.parseLong
    refuses it in a Java broker (and numpy and the C decoder could not take it)."""
    value = ext.get(name)
    if value is None or value == "":
        if default is None:
            raise RequestFieldError(f"the request has no {name!r} field")
        return default
    try:
        number = int(value)
    except ValueError:
        try:  # JSON numbers such as 1.0 from loosely typed clients
            real = float(value)
        except ValueError:
            real = float("nan")
        if not real.is_integer():
            raise RequestFieldError(f"field {name!r} must be an integer, got {value!r}") from None
        number = int(real)
    if not fits_java_long(number):
        raise RequestFieldError(f"field {name!r} is out of a long's range, got {value!r}")
    return number


def ext_java_int(ext: Mapping[str, str], name: str, default: int | None = None) -> int:
    """A field a Java header declares ``Integer`` (a queue id, a flag): beyond an int is a
    RequestFieldError, as Integer.parseInt refuses it in a Java broker (the store could
    not write it into its 4-byte slot either)."""
    number = ext_int(ext, name, default)
    if not JAVA_INT_MIN <= number <= JAVA_INT_MAX:
        raise RequestFieldError(f"field {name!r} is out of an int's range, got {ext.get(name)!r}")
    return number


def ext_bool(ext: Mapping[str, str], name: str, default: bool = False) -> bool:
    value = ext.get(name)
    if value is None or value == "":
        return default
    lowered = value.strip().lower()
    if lowered in ("true", "1"):
        return True
    if lowered in ("false", "0"):
        return False
    raise RequestFieldError(f"field {name!r} must be a boolean, got {value!r}")


# --- encoding -------------------------------------------------------------------------


# The JSON string encoder json.dumps(..., ensure_ascii=False) uses (C when available).
_quote = json.encoder.encode_basestring


def encode_header_json(cmd: RemotingCommand) -> bytes:
    """The header as ``json.dumps(header, separators=(",", ":"), ensure_ascii=False)``
    writes it (keys in this order), put together directly: the same string escaper, ints
    as ``int.__repr__``, without building a dict and an encoder per answer (a few
    microseconds of every answer). tests/unit/broker/test_remoting.py checks it against
    json.dumps."""
    ext = ",".join([f"{_quote(k)}:{_quote(str(v))}" for k, v in cmd.ext_fields.items()])
    remark = "" if cmd.remark is None else f',"remark":{_quote(cmd.remark)}'
    text = (
        f'{{"code":{int(cmd.code)},"extFields":{{{ext}}},"flag":{int(cmd.flag)},'
        f'"language":{_quote(cmd.language)},"opaque":{int(cmd.opaque)},'
        f'"serializeTypeCurrentRPC":"JSON","version":{int(cmd.version)}{remark}}}'
    )
    # "replace": a lone surrogate (which no decoded request holds) goes out as "?", as
    # Java writes it, rather than failing the frame and leaving the request unanswered.
    return text.encode("utf-8", "replace")


def encode_command(cmd: RemotingCommand) -> bytes:
    """One whole frame, length prefix included (always a JSON header)."""
    header = encode_header_json(cmd)
    body = bytes(cmd.body)
    return (
        _PREFIX.pack(4 + len(header) + len(body), (SERIALIZE_JSON << 24) | len(header))
        + header
        + body
    )


# --- decoding -------------------------------------------------------------------------


def frame_length(buf: bytes | bytearray | memoryview, max_frame_bytes: int) -> int | None:
    """The length that follows the 4-byte prefix, None if the prefix is incomplete.

    Raises ProtocolError for a length below 4 or above ``max_frame_bytes``, so a hostile
    peer cannot make the reader buffer more than the limit.
    """
    if len(buf) < 4:
        return None
    length: int = _INT.unpack_from(buf, 0)[0]
    if length < 4:
        raise ProtocolError(f"frame length {length} is below the minimum of 4")
    if length > max_frame_bytes:
        raise ProtocolError(f"frame length {length} exceeds the limit of {max_frame_bytes}")
    return length


def decode_frame(
    buf: bytes | bytearray | memoryview, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
) -> tuple[RemotingCommand, int] | None:
    """The first frame in ``buf`` and the bytes it used; None while it is incomplete."""
    length = frame_length(buf, max_frame_bytes)
    if length is None or len(buf) < 4 + length:
        return None
    return decode_command(bytes(buf[4 : 4 + length])), 4 + length


def decode_command(data: bytes) -> RemotingCommand:
    """A frame without its length prefix: header-length word, header, body."""
    if len(data) < 4:
        raise ProtocolError(f"frame of {len(data)} bytes has no header length")
    word: int = _INT.unpack_from(data, 0)[0]
    serialize_type = (word >> 24) & 0xFF
    header_length = word & 0xFFFFFF
    if 4 + header_length > len(data):
        raise ProtocolError(
            f"header length {header_length} exceeds the frame's {len(data) - 4} bytes"
        )
    header = data[4 : 4 + header_length]
    body = data[4 + header_length :]
    if serialize_type == SERIALIZE_JSON:
        cmd = _decode_json_header(header)
    elif serialize_type == SERIALIZE_ROCKETMQ:
        cmd = _decode_binary_header(header)
    else:
        raise ProtocolError(f"unknown serialize type {serialize_type}")
    cmd.body = body
    cmd.serialize_type = serialize_type
    return cmd


def _int_field(header: Mapping[str, Any], name: str, default: int | None = None) -> int:
    value = header.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | str):
        if value is None and default is not None:
            return default
        raise ProtocolError(f"header field {name!r} must be an integer, got {value!r}")
    try:
        return int(value)
    except ValueError as e:
        raise ProtocolError(f"header field {name!r} must be an integer, got {value!r}") from e


def _decode_json_header(header: bytes) -> RemotingCommand:
    try:
        obj = loads_json(header)
    except (UnicodeDecodeError, ValueError) as e:
        raise ProtocolError(f"header is not UTF-8 JSON: {e}") from e
    if not isinstance(obj, dict):
        raise ProtocolError(f"header must be a JSON object, got {type(obj).__name__}")
    remark = obj.get("remark")
    language = obj.get("language", "JAVA")
    return RemotingCommand(
        # fastjson leaves a missing int field 0: a Java peer answers it as request type 0
        # (not supported), with its opaque, rather than dropping the connection.
        code=_int_field(obj, "code", 0),
        opaque=_int_field(obj, "opaque", 0),
        flag=_int_field(obj, "flag", 0),
        remark=None if remark is None else str(remark),
        ext_fields=coerce_ext_fields(obj.get("extFields")),
        language=str(language) if language is not None else "JAVA",
        version=_int_field(obj, "version", 0),
    )


class _Reader:
    """Bounds-checked reads from a binary header (a short read is a ProtocolError)."""

    def __init__(self, data: bytes):
        self.data = data
        self.position = 0

    def take(self, size: int, what: str) -> bytes:
        if size < 0 or self.position + size > len(self.data):
            raise ProtocolError(
                f"binary header: {what} needs {size} bytes at {self.position}, "
                f"header has {len(self.data)}"
            )
        chunk = self.data[self.position : self.position + size]
        self.position += size
        return chunk

    def text(self, size: int, what: str) -> str:
        try:
            return self.take(size, what).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ProtocolError(f"binary header: {what} is not UTF-8") from e


def _decode_binary_header(header: bytes) -> RemotingCommand:
    reader = _Reader(header)
    code, language, version, opaque, flag = _BINARY_HEAD.unpack(
        reader.take(_BINARY_HEAD.size, "fixed fields")
    )
    remark_length = _INT.unpack(reader.take(4, "remark length"))[0]
    remark = reader.text(remark_length, "remark") if remark_length > 0 else None
    ext_length = _INT.unpack(reader.take(4, "extFields length"))[0]
    ext = _Reader(reader.take(max(ext_length, 0), "extFields"))
    fields: dict[str, str] = {}
    while ext.position < len(ext.data):
        key_length = _SHORT.unpack(ext.take(2, "key length"))[0]
        key = ext.text(key_length, "key")
        value_length = _INT.unpack(ext.take(4, "value length"))[0]
        fields[key] = ext.text(value_length, "value")
    return RemotingCommand(
        code=code,
        opaque=opaque,
        flag=flag,
        remark=remark,
        ext_fields=fields,
        language=LANGUAGES[language] if 0 <= language < len(LANGUAGES) else "OTHER",
        version=version,
    )
