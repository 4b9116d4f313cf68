"""How messages are shown: mqadmin's ``%-20s %s`` block (queryMsgById and friends), the
``MessageExt.toString()`` line of printMsg, and the JSON object ``--json`` prints instead.

Layer: cli. Formatting only: no store access. The block and the JSON object carry the same
fields (OffsetID = msgId, Tags, Keys, Queue ID, Queue Offset, CommitLog Offset, Reconsume
Times, Born/Store Timestamp and Host, System Flag, Properties, body or body path).
"""

from __future__ import annotations

import codecs
import ipaddress
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from rocketstore.cli.context import BROKER_NAME
from rocketstore.cli.timeparse import format_time
from rocketstore.config import parse_host
from rocketstore.errors import ConfigError, CorruptDataError
from rocketstore.format import properties as props
from rocketstore.format.body_compression import inflate
from rocketstore.format.javahash import java_hashmap_order
from rocketstore.format.message import MessageExt

F = TypeVar("F", bound=Callable[..., Any])
# A queue's (min, max) offsets as a pull answered them.
QueueSpan = tuple[int, int]

# Every byte value twice, plus a truncated multi-byte lead: a charset that decodes this
# with errors="replace" decodes any body.
_CHARSET_PROBE = bytes(range(256)) * 2 + b"\xe4\xb8"


# Java charset names (and aliases) Python's codec registry does not know, lower-cased,
# for the charsets both have: Windows code pages, Sun's "Unicode*" names, 8859_N.
_JAVA_CHARSETS = {
    "windows-31j": "cp932",
    "ms932": "cp932",
    "cswindows31j": "cp932",
    "windows-936": "gbk",
    "ms936": "gbk",
    "x-mswin-936": "gbk",
    "x-euc-cn": "gb2312",
    "euc-cn": "gb2312",
    "x-windows-949": "cp949",
    "ms949": "cp949",
    "windows-949": "cp949",
    "x-windows-950": "cp950",
    "ms950": "cp950",
    "windows-950": "cp950",
    "x-windows-874": "cp874",
    "ms874": "cp874",
    "windows-874": "cp874",
    "unicodebig": "utf-16",
    "unicodelittle": "utf-16",
    "unicodebigunmarked": "utf-16-be",
    "unicodelittleunmarked": "utf-16-le",
    "x-utf-16le-bom": "utf-16",
    "x-utf-32be-bom": "utf-32",
    "x-utf-32le-bom": "utf-32",
    "utf_32be_bom": "utf-32",
    "utf_32le_bom": "utf-32",
    "big5-hkscs": "big5hkscs",
    "x-ms950-hkscs": "big5hkscs",
}
# Text codecs of Python's that are no charsets: they read backslash escapes.
_PYTHON_ONLY_CODECS = frozenset({"unicode-escape", "raw-unicode-escape"})
_JAVA_NUMBERED = re.compile(r"(?:iso)?8859_(\d{1,2})|ibm-?0?(\d{3,4})|cp0(\d{4})", re.IGNORECASE)


def _python_codec_name(name: str) -> str:
    """The Python codec for a Java charset name (the name itself when Python knows it)."""
    known = _JAVA_CHARSETS.get(name.lower()) or _JAVA_CHARSETS.get(name)
    if known is not None:
        return known
    numbered = _JAVA_NUMBERED.fullmatch(name)
    if numbered is not None:
        part, ibm, cp = numbered.groups()
        return f"iso8859_{part}" if part else f"cp{int(ibm or cp):03d}"
    return name


def check_charset(name: str) -> str:
    """The Python codec name bodies are decoded with for the charset ``name`` (a Java
    name: ``GBK``, ``UTF-8``, ``windows-31j``, ``8859_1``, ``IBM01140``...); ValueError
    saying why not.

    Python knows codecs that are no charsets (hex, base64, rot13) and text codecs that
    refuse some bytes even with errors="replace" (idna, punycode); both are refused here
    rather than failing halfway through the output.
    """
    try:
        info = codecs.lookup(_python_codec_name(name))
    except (LookupError, ValueError, TypeError) as e:  # (a NUL in the name: ValueError)
        raise ValueError(f"unknown charset {name!r}") from e
    if info.name in _PYTHON_ONLY_CODECS:
        raise ValueError(f"{name!r} is not a charset (Python's {info.name} reads escape sequences)")
    if not info._is_text_encoding:
        raise ValueError(f"{name!r} is not a charset (Python's {info.name} codec transforms data)")
    try:
        _CHARSET_PROBE.decode(info.name, errors="replace")
    except (UnicodeError, ValueError) as e:
        raise ValueError(f"charset {name!r} cannot print arbitrary bytes: {e}") from e
    return info.name


class CharsetParam(click.ParamType):  # type: ignore[type-arg]
    """A click option type for body charsets (Java names such as GBK, UTF-8, ISO-8859-1)."""

    name = "CHARSET"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        try:
            return check_charset(str(value))
        except ValueError as e:
            self.fail(str(e), param, ctx)


CHARSET = CharsetParam()


# Where mqadmin writes the bodies of the messages it shows.
MSGBODY_DIR = "/tmp/rocketmq/msgbodys"


@dataclass(frozen=True)
class BodyOptions:
    """How a message body is shown: as mqadmin, written to ``body_dir`` (default
    MSGBODY_DIR) and its path printed; also printed in ``charset`` when one was given."""

    charset: str | None = None
    body_dir: str | None = None

    @property
    def directory(self) -> str:
        return self.body_dir if self.body_dir is not None else MSGBODY_DIR


def body_options(func: F) -> F:
    """Add ``-f/--bodyFormat`` and ``--body-dir`` to a command (kwargs body_format, body_dir)."""
    func = click.option(
        "--body-dir",
        "body_dir",
        type=click.Path(file_okay=False),
        default=None,
        help=f"Where each body is written, as DIR/<msgId> [default: {MSGBODY_DIR}, as "
        "mqadmin]. Example: --body-dir /tmp/bodies",
    )(func)
    func = click.option(
        "-f",
        "--bodyFormat",
        "body_format",
        type=CHARSET,
        default=None,
        help="Also print the body, in this charset (mqadmin 5's -f). Example: -f UTF-8",
    )(func)
    return func


def make_body_options(body_format: str | None, body_dir: str | None) -> BodyOptions:
    """``body_format`` has been checked by the CHARSET option type."""
    return BodyOptions(charset=body_format, body_dir=body_dir)


def readable_body(message: MessageExt) -> bytes:
    """The body as the producer meant it: a compressed body (zlib, LZ4 or ZSTD, by its
    sysFlag) is inflated for display, as a consumer's decode does (the store keeps it as
    sent); one that does not inflate is shown as stored."""
    body = message.body or b""
    try:
        return inflate(body, message.sys_flag)
    except CorruptDataError:
        return body


def body_text(message: MessageExt, charset: str) -> str:
    return readable_body(message).decode(charset, errors="replace")


def write_body(message: MessageExt, body_dir: str, name: str | None = None) -> str:
    """Write the body to ``body_dir/name`` (default: the message's msgId, as mqadmin)."""
    os.makedirs(body_dir, exist_ok=True)
    path = os.path.join(body_dir, name or message.msg_id)
    with open(path, "wb") as f:
        f.write(readable_body(message))
    return path


def java_ip(ip: str) -> str:
    """An IP as Java's ``InetAddress.getHostAddress`` writes it: IPv6 in full, groups
    without leading zeros, no brackets (``0:0:0:0:0:0:0:1``); an IPv4-mapped IPv6
    address is the IPv4 address it maps (Java makes an Inet4Address of it)."""
    try:
        address = ipaddress.ip_address(ip.strip("[]"))
    except ValueError:
        return ip
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return ":".join(f"{int(group, 16):x}" for group in address.exploded.split(":"))
    return str(address)


def java_socket_address(host: str) -> str:
    """A store or born host as RocketMQ's tools print an InetSocketAddress on JDK 14 and
    later: ``10.0.0.1:10911``, ``[0:0:0:0:0:0:0:1]:10911``."""
    try:
        ip, port = parse_host(host)
    except ConfigError:
        return host
    text = java_ip(ip)
    return f"[{text}]:{port}" if ":" in text else f"{text}:{port}"


def java_map(properties: Mapping[str, str]) -> str:
    """``{KEYS=order-1, TAGS=paid}``: the toString of the HashMap RocketMQ decodes a
    record's properties into, so in HashMap iteration order (mostly the stored order, as
    brokers serialise from a HashMap too)."""
    order = java_hashmap_order(properties)
    return "{" + ", ".join(f"{k}={properties[k]}" for k in order) + "}"


def java_byte_array(data: bytes | None) -> str:
    """``Arrays.toString(byte[])``: signed bytes, ``[104, -28, 0]``, or ``null``."""
    if data is None:
        return "null"
    return "[" + ", ".join(map(str, memoryview(data).cast("b").tolist())) + "]"


def java_str(value: str | None) -> str:
    return "null" if value is None else value


def message_block(
    message: MessageExt,
    body: BodyOptions,
    *,
    offset_id: bool = True,
    body_name: str | None = None,
) -> list[str]:
    """mqadmin's queryMsgById block, one ``%-20s %s`` line per field (queryMsgByUniqueKey's
    has no OffsetID line: ``offset_id=False``), ending with the body file's path (and the
    body itself when a charset was given)."""
    rows: list[tuple[str, object]] = [("OffsetID:", message.msg_id)] if offset_id else []
    rows += [
        ("Topic:", message.topic),
        ("Tags:", f"[{java_str(message.tags)}]"),
        ("Keys:", f"[{java_str(message.keys)}]"),
        ("Queue ID:", message.queue_id),
        ("Queue Offset:", message.queue_offset),
        ("CommitLog Offset:", message.commit_log_offset),
        ("Reconsume Times:", message.reconsume_times),
        ("Born Timestamp:", format_time(message.born_timestamp)),
        ("Store Timestamp:", format_time(message.store_timestamp)),
        ("Born Host:", java_socket_address(message.born_host)),
        ("Store Host:", java_socket_address(message.store_host)),
        ("System Flag:", message.sys_flag),
        ("Properties:", java_map(message.properties)),
    ]
    try:
        path = write_body(message, body.directory, body_name)
    except OSError as e:
        path = f"(not written: {e.strerror or e})"
    rows.append(("Message Body Path:", path))
    if body.charset is not None:
        rows.append(("Message Body:", body_text(message, body.charset)))
    return [f"{name:<20} {value}" for name, value in rows]


def message_json(
    message: MessageExt, body: BodyOptions | None = None, *, with_body: bool = True
) -> dict[str, Any]:
    """The block's fields as JSON (times in epoch ms, the body base64 as stored)."""
    obj: dict[str, Any] = dict(message.to_dict())
    obj["magicCode"] = message.magic_code & 0xFFFFFFFF
    if not with_body:
        obj["body"] = None
    elif body is not None and body.body_dir is not None:
        obj["bodyPath"] = write_body(message, body.body_dir)
    return obj


def pulled_properties(properties: Mapping[str, str], span: QueueSpan) -> dict[str, str]:
    """A pulled message's properties: the client's PullAPIWrapper adds the (min, max)
    queue offsets the pull was answered with as MIN_OFFSET and MAX_OFFSET."""
    return {**properties, props.MIN_OFFSET: str(span[0]), props.MAX_OFFSET: str(span[1])}


def message_to_string(
    message: MessageExt,
    *,
    with_body: bool = True,
    broker_name: str = BROKER_NAME,
    pulled: QueueSpan | None = None,
) -> str:
    """RocketMQ's ``MessageExt.toString()`` (4.3 to 5.x alike): the body byte by byte as
    ``Arrays.toString`` prints it, inflated as a consumer's decode leaves a compressed one;
    ``with_body=False`` prints ``body=null``, as for a record decoded without its body.

    ``pulled``: the message came from a pull answered with these (min, max) queue offsets.
    The client's PullAPIWrapper then adds them as the MIN_OFFSET and MAX_OFFSET properties
    and, for a transactional message (TRAN_MSG=true), takes UNIQ_KEY as its transactionId.
    """
    body = readable_body(message) if with_body and message.body is not None else None
    properties = dict(message.properties)
    transaction_id = None
    if pulled is not None:
        if properties.get(props.TRAN_MSG, "").lower() == "true":  # Boolean.parseBoolean
            transaction_id = properties.get(props.UNIQ_KEY)
        properties = pulled_properties(properties, pulled)
    inner = (
        f"Message{{topic='{message.topic}', flag={message.flag}, "
        f"properties={java_map(properties)}, body={java_byte_array(body)}, "
        f"transactionId='{java_str(transaction_id)}'}}"
    )
    return (
        f"MessageExt [brokerName={broker_name}, queueId={message.queue_id}, "
        f"storeSize={message.size}, queueOffset={message.queue_offset}, "
        f"sysFlag={message.sys_flag}, bornTimestamp={message.born_timestamp}, "
        f"bornHost=/{java_socket_address(message.born_host)}, "
        f"storeTimestamp={message.store_timestamp}, "
        f"storeHost=/{java_socket_address(message.store_host)}, msgId={message.msg_id}, "
        f"commitLogOffset={message.commit_log_offset}, bodyCRC={message.body_crc}, "
        f"reconsumeTimes={message.reconsume_times}, "
        f"preparedTransactionOffset={message.prepared_transaction_offset}, "
        f"toString()={inner}]"
    )


def client_msg_id(message: MessageExt) -> str:
    """What a RocketMQ client calls the msgId: the UNIQ_KEY, else the offsetMsgId."""
    return message.uniq_key or message.msg_id


def message_queue(topic: str, queue_id: int, broker_name: str = BROKER_NAME) -> str:
    return f"MessageQueue [topic={topic}, brokerName={broker_name}, queueId={queue_id}]"
