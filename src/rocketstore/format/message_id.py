"""Message ids (pure): the broker's offsetMsgId and the client's UNIQ_KEY.

* offsetMsgId = store host IP (4 or 16 bytes) + port (int) + CommitLog offset (long), as 32
  or 56 upper-case hex characters.
* UNIQ_KEY = client IP (4 or 16) + pid (short) + class-loader hash (int) + milliseconds since
  the start of the current month in local time (int) + counter (short).

Clock and time zone are passed in by callers (``month_start_ms``), so this stays pure.
"""

from __future__ import annotations

import datetime as _dt
import re
import socket
import struct
from collections.abc import Iterable

from rocketstore.errors import CorruptDataError
from rocketstore.format.hosts import decode_host, encode_host

_OFFSET = struct.Struct(">q")
_HEX_DIGITS = "0123456789ABCDEF"


def bytes_to_hex(data: bytes) -> str:
    return data.hex().upper()


_HEX = re.compile(r"^(?:[0-9A-Fa-f]{2})*$")


def hex_to_bytes(text: str, *, what: str = "message id") -> bytes:
    # bytes.fromhex would skip inner whitespace; an id is hex digits and nothing else.
    if not _HEX.fullmatch(text):
        raise CorruptDataError(f"{what} {text!r} is not hexadecimal")
    return bytes.fromhex(text)


def offset_msg_id_from_bytes(store_host: bytes, commit_log_offset: int) -> str:
    """offsetMsgId from the encoded STOREHOST field (8 or 20 bytes) and an offset."""
    return bytes_to_hex(store_host + _OFFSET.pack(commit_log_offset))


def joined_offset_msg_ids(store_host: bytes, commit_log_offsets: Iterable[int]) -> str:
    """The offsetMsgIds of records at ``commit_log_offsets``, joined by "," (a batch
    send's msgId answer)."""
    return ",".join(offset_msg_id_from_bytes(store_host, int(o)) for o in commit_log_offsets)


def offset_msg_id(store_host: str, commit_log_offset: int) -> str:
    """offsetMsgId of a record stored by ``ip:port`` at ``commit_log_offset``."""
    return offset_msg_id_from_bytes(encode_host(store_host), commit_log_offset)


def decode_offset_msg_id(msg_id: str) -> tuple[str, int]:
    """offsetMsgId -> (store host ``ip:port``, CommitLog offset). 32 chars: IPv4, 56: IPv6."""
    text = msg_id.strip()
    if len(text) not in (32, 56):
        raise CorruptDataError(
            f"offsetMsgId {msg_id!r} must be 32 (IPv4) or 56 (IPv6) hex characters, has {len(text)}"
        )
    raw = hex_to_bytes(text, what="offsetMsgId")
    host_len = 8 if len(raw) == 16 else 20
    host = decode_host(raw[:host_len])
    (offset,) = _OFFSET.unpack_from(raw, host_len)
    return host, offset


# --- UNIQ_KEY ----------------------------------------------------------------------------

_UNIQ_TAIL = struct.Struct(">IH")  # ms since month start (as unsigned), counter


def uniq_key_prefix(ip: str, pid: int, class_loader_hash: int) -> bytes:
    """The fixed first 10 (IPv4) or 22 (IPv6) bytes of every UNIQ_KEY of one client."""
    family = socket.AF_INET6 if ":" in ip else socket.AF_INET
    return (
        socket.inet_pton(family, ip)
        + struct.pack(">h", _to_short(pid))
        + struct.pack(">i", _to_int(class_loader_hash))
    )


def _to_short(value: int) -> int:
    value &= 0xFFFF
    return value - 0x10000 if value & 0x8000 else value


def _to_int(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - 0x1_0000_0000 if value & 0x8000_0000 else value


def encode_uniq_key(prefix: bytes, ms_since_month_start: int, counter: int) -> str:
    """Assemble a UNIQ_KEY; negative time diffs above -1,000,000 ms clamp to 0 (NTP steps)."""
    diff = ms_since_month_start
    if -1_000_000 < diff < 0:
        diff = 0
    return bytes_to_hex(prefix + _UNIQ_TAIL.pack(diff & 0xFFFFFFFF, counter & 0xFFFF))


def uniq_key_ms_since_month_start(uniq_key: str) -> int:
    raw = _uniq_raw(uniq_key)
    ip_len = 16 if len(raw) == 28 else 4
    (span,) = struct.unpack_from(">I", raw, ip_len + 6)
    return int(span)


def uniq_key_pid(uniq_key: str) -> int:
    """The producer's pid as stored (Java's ``(short) pid``: the low 16 bits, signed)."""
    raw = _uniq_raw(uniq_key)
    ip_len = 16 if len(raw) == 28 else 4
    return int(struct.unpack_from(">h", raw, ip_len)[0])


def uniq_key_ip(uniq_key: str) -> str:
    raw = _uniq_raw(uniq_key)
    if len(raw) == 28:
        return socket.inet_ntop(socket.AF_INET6, raw[:16])
    return socket.inet_ntop(socket.AF_INET, raw[:4])


def _uniq_raw(uniq_key: str) -> bytes:
    text = uniq_key.strip()
    if len(text) not in (32, 56):
        raise CorruptDataError(
            f"UNIQ_KEY {uniq_key!r} must be 32 (IPv4) or 56 (IPv6) hex characters, has {len(text)}"
        )
    return hex_to_bytes(text, what="UNIQ_KEY")


def month_start_ms(at_ms: int, tz: _dt.tzinfo | None = None) -> int:
    """Epoch ms of the start of the month containing ``at_ms`` in ``tz`` (local if None).

    With ``tz=None`` naive local datetimes are used, so the zone's rules (DST) apply to
    the month start itself, as Java's Calendar does.
    """
    moment = _dt.datetime.fromtimestamp(at_ms / 1000, tz=tz)
    start = moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return round(start.timestamp() * 1000)


def previous_month_start_ms(month_start: int, tz: _dt.tzinfo | None = None) -> int:
    moment = _dt.datetime.fromtimestamp(month_start / 1000, tz=tz)
    year, month = (moment.year, moment.month - 1) if moment.month > 1 else (moment.year - 1, 12)
    start = moment.replace(year=year, month=month, day=1, hour=0, minute=0, second=0, microsecond=0)
    return round(start.timestamp() * 1000)


def uniq_key_timestamp(uniq_key: str, now_ms: int, tz: _dt.tzinfo | None = None) -> int:
    """The time a UNIQ_KEY was made, assuming this month or, if that lies at/after ``now``,
    the previous month (``MessageClientIDSetter.getNearlyTimeFromID``)."""
    span = uniq_key_ms_since_month_start(uniq_key)
    start = month_start_ms(now_ms, tz)
    if start + span >= now_ms:
        start = previous_month_start_ms(start, tz)
    return start + span
