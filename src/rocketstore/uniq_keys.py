"""UNIQ_KEY generation in RocketMQ's client format (``MessageClientIDSetter``).

Layer: engine paths (uses the clock, the pid and the host's addresses; the byte layout is
the pure codec in :mod:`rocketstore.format.message_id`). A key is the client IP, the pid
(2 bytes), a per-process int (Java uses the class loader's hash), the milliseconds since the
start of the current month in local time (4 bytes) and a 16-bit counter.
"""

from __future__ import annotations

import ipaddress
import os
import random
import socket
import threading
import time

from rocketstore.format.message_id import encode_uniq_key, month_start_ms, uniq_key_prefix


def local_ip() -> str:
    """The address Java's ``UtilAll.getIP`` would pick: the first public IPv4 (or public
    IPv6) address, else the first private IPv4, else a fake one from the clock."""
    candidates: list[str] = []
    try:
        infos = socket.getaddrinfo(socket.gethostname(), None)
        candidates = [str(info[4][0]) for info in infos]
    except OSError:
        pass
    private: str | None = None
    for text in candidates:
        try:
            ip = ipaddress.ip_address(text.split("%")[0])
        except ValueError:
            continue
        if ip.is_loopback or ip.is_unspecified or ip.is_link_local or ip.is_multicast:
            continue
        if ip.version == 4 and ip.is_private:
            private = private or str(ip)
            continue
        if not ip.is_private:
            return str(ip)
    if private is not None:
        return private
    fake = (time.time_ns() // 1_000_000) & 0xFFFFFFFF
    return str(ipaddress.IPv4Address(fake))


class UniqKeyGenerator:
    """Thread-safe generator of client-format UNIQ_KEYs for this process."""

    def __init__(self, ip: str | None = None, pid: int | None = None, seed: int | None = None):
        self._prefix = uniq_key_prefix(
            ip or local_ip(),
            os.getpid() if pid is None else pid,
            random.Random(seed).getrandbits(31) if seed is not None else id(self) & 0x7FFFFFFF,
        )
        self._counter = 0
        self._lock = threading.Lock()
        self._month_start = 0
        self._next_month_start = 0

    def next(self, now_ms: int | None = None) -> str:
        now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        with self._lock:
            if now >= self._next_month_start or now < self._month_start:
                self._month_start = month_start_ms(now)
                self._next_month_start = month_start_ms(
                    now + 32 * 86_400_000 - (now - self._month_start)
                )
            counter = self._counter
            self._counter = (self._counter + 1) & 0xFFFF
        return encode_uniq_key(self._prefix, now - self._month_start, counter)
