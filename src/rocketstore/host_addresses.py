"""The host address a RocketMQ client puts in its UNIQ_KEYs (``UtilAll.getIP``).

Layer: engine paths (reads the host's interfaces). Java walks
``NetworkInterface.getNetworkInterfaces()`` and returns the first IPv4 address outside
10/8, 172.16/12 and 192.168/16 (127.0.0.1 counts as outside) or the first IPv6 address
that is not wildcard, link-local, loopback or site-local; else the first address it
passed over; else the client makes a fake one from the clock.

The order is the JDK's on Linux: it reads the IPv4 addresses (getifaddrs, in the
kernel's order) and then the IPv6 ones (``/proc/net/if_inet6``), putting each new
interface, and each address of an interface, at the head of its list, so interfaces come
last-seen first and an interface's IPv6 addresses before its IPv4 ones. On this kind of
host (``lo``, then ``eth0`` with 192.0.2.2 and fd00::2) a Java client picks fd00::2.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import ipaddress
import socket
from collections.abc import Iterable

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def java_address_order(seen: Iterable[tuple[str, Address]]) -> list[Address]:
    """The addresses in the order Java's NetworkInterface enumeration gives them, from
    (interface, address) pairs in the order the JDK reads them (IPv4 first)."""
    interfaces: list[tuple[str, list[Address]]] = []
    for name, address in seen:
        for known, addresses in interfaces:
            if known == name:
                addresses.insert(0, address)
                break
        else:
            interfaces.insert(0, (name, [address]))
    return [address for _, addresses in interfaces for address in addresses]


def java_get_ip(addresses: Iterable[Address]) -> Address | None:
    """``UtilAll.getIP`` over the addresses in enumeration order; None where Java throws
    ("Can not get local ip") and the client falls back to a fake address."""
    passed: Address | None = None
    for address in addresses:
        if isinstance(address, ipaddress.IPv4Address):
            first, second = address.packed[0], address.packed[1]
            internal = (
                first == 10
                or (first == 172 and 16 <= second <= 31)
                or (first == 192 and second == 168)
            )
        else:
            internal = (
                address.is_unspecified
                or address.is_link_local
                or address.is_loopback
                or address.is_site_local
            )
        if not internal:
            return address
        if passed is None:
            passed = address
    return passed


def host_addresses() -> list[tuple[str, Address]]:
    """(interface, address) pairs in the order the JDK reads them on Linux: IPv4 by
    getifaddrs, then IPv6 by /proc/net/if_inet6 (getifaddrs elsewhere). Empty when
    neither can be read."""
    from_getifaddrs = _getifaddrs()
    ipv4 = [(name, a) for name, a in from_getifaddrs if isinstance(a, ipaddress.IPv4Address)]
    ipv6 = _proc_if_inet6()
    if ipv6 is None:
        ipv6 = [(name, a) for name, a in from_getifaddrs if isinstance(a, ipaddress.IPv6Address)]
    return ipv4 + ipv6


def _proc_if_inet6() -> list[tuple[str, Address]] | None:
    try:
        with open("/proc/net/if_inet6", encoding="ascii") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    found: list[tuple[str, Address]] = []
    for line in lines:
        parts = line.split()
        if len(parts) >= 6 and len(parts[0]) == 32:
            found.append((parts[5], ipaddress.IPv6Address(bytes.fromhex(parts[0]))))
    return found


class _Sockaddr(ctypes.Structure):
    _fields_ = [("sa_family", ctypes.c_ushort), ("sa_data", ctypes.c_ubyte * 14)]


class _Ifaddrs(ctypes.Structure):
    pass


_Ifaddrs._fields_ = [
    ("ifa_next", ctypes.POINTER(_Ifaddrs)),
    ("ifa_name", ctypes.c_char_p),
    ("ifa_flags", ctypes.c_uint),
    ("ifa_addr", ctypes.POINTER(_Sockaddr)),
    ("ifa_netmask", ctypes.POINTER(_Sockaddr)),
    ("ifa_ifu", ctypes.c_void_p),
    ("ifa_data", ctypes.c_void_p),
]


def _getifaddrs() -> list[tuple[str, Address]]:
    """getifaddrs(3) through ctypes (Linux's sockaddr layout: a 2-byte family first)."""
    if not hasattr(socket, "AF_INET6") or not ctypes.util.find_library("c"):
        return []
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    except OSError:
        return []
    head = ctypes.POINTER(_Ifaddrs)()
    if libc.getifaddrs(ctypes.byref(head)) != 0:
        return []
    found: list[tuple[str, Address]] = []
    try:
        node = head
        while node:
            entry = node.contents
            if entry.ifa_addr and entry.ifa_name:
                name = entry.ifa_name.decode("utf-8", "replace")
                family = entry.ifa_addr.contents.sa_family
                # sockaddr_in: family, port, 4 address bytes; sockaddr_in6: family, port,
                # flow info, 16 address bytes (read no further than the family's size).
                if family == socket.AF_INET:
                    raw = ctypes.string_at(entry.ifa_addr, 8)
                    found.append((name, ipaddress.IPv4Address(raw[4:8])))
                elif family == socket.AF_INET6:
                    raw = ctypes.string_at(entry.ifa_addr, 24)
                    found.append((name, ipaddress.IPv6Address(raw[8:24])))
            node = entry.ifa_next
    finally:
        libc.freeifaddrs(head)
    return found
