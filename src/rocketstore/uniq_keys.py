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
import threading
import time

from rocketstore.format.message_id import encode_uniq_key, month_start_ms, uniq_key_prefix
from rocketstore.host_addresses import host_addresses, java_address_order, java_get_ip


def local_ip() -> str:
    """The address Java's ``UtilAll.getIP`` picks on this host (see
    :mod:`rocketstore.host_addresses`), else, as the client does when it finds none, a
    fake one from the clock (the low 4 bytes of the time in ms)."""
    found = java_get_ip(java_address_order(host_addresses()))
    if found is not None:
        return str(found)
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
