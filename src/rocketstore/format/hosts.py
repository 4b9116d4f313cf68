"""Socket addresses as RocketMQ stores them: IPv4 (4 bytes) or IPv6 (16 bytes) + int port.

Pure codec. Text form is ``ip:port`` for IPv4 and ``[ip]:port`` for IPv6.
"""

from __future__ import annotations

import functools
import socket
import struct

from rocketstore.config import parse_host
from rocketstore.errors import ConfigError, CorruptDataError

_PORT = struct.Struct(">i")


@functools.lru_cache(maxsize=4096)
def encode_host(host: str) -> bytes:
    """``"1.2.3.4:80"`` -> 8 bytes; ``"[::1]:80"`` -> 20 bytes. ConfigError if malformed."""
    ip, port = parse_host(host)
    try:
        if ":" in ip:
            raw = socket.inet_pton(socket.AF_INET6, ip)
        else:
            raw = socket.inet_pton(socket.AF_INET, ip)
    except OSError as e:
        raise ConfigError(f"host {host!r}: bad IP address") from e
    return raw + _PORT.pack(port)


def is_ipv6_host(encoded: bytes) -> bool:
    return len(encoded) == 20


def decode_host(data: bytes | memoryview) -> str:
    """8 or 20 bytes -> text form (memoised: a store holds few distinct hosts, and every
    decoded message needs two)."""
    raw = bytes(data)
    text = _HOSTS.get(raw)
    if text is None:
        text = _decode_host(raw)
        if len(_HOSTS) < 65536:
            _HOSTS[raw] = text
    return text


_HOSTS: dict[bytes, str] = {}


def decoded_hosts() -> dict[bytes, str]:
    """The memo of ``decode_host`` (encoded bytes -> text), read by the C decoder."""
    return _HOSTS


def _decode_host(raw: bytes) -> str:
    if len(raw) == 8:
        ip = socket.inet_ntop(socket.AF_INET, raw[:4])
        return f"{ip}:{_PORT.unpack_from(raw, 4)[0]}"
    if len(raw) == 20:
        ip = socket.inet_ntop(socket.AF_INET6, raw[:16])
        return f"[{ip}]:{_PORT.unpack_from(raw, 16)[0]}"
    raise CorruptDataError(f"a host field is 8 or 20 bytes, got {len(raw)}")
