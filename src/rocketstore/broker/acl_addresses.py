"""RocketMQ 4.9's ACL address patterns (``RemoteAddressStrategyFactory``): the
``globalWhiteRemoteAddresses`` and an account's ``whiteRemoteAddress`` of plain_acl.yml.

Layer: broker; pure (no sockets, no files).

The shapes RocketMQ accepts, and what each matches (a client's IP, its port left out):

- blank: nothing; ``*``, ``*.*.*.*``, ``*:*:*:*:*:*:*:*``: every address;
- ``192.168.1.{1,2,3}``: those addresses (the braces' items complete the prefix);
- ``192.168.1.1,192.168.1.2``: that list of addresses;
- ``192.168.1.*``, ``192.168.1-10.*``, ``192.168.*``: the FIRST part (after the first)
  that is ``*`` or a range ``a-b`` is compared with the address's part at the same place;
  the parts after it are not compared (as RocketMQ's RangeRemoteAddressStrategy);
- one IPv4 or IPv6 address: that address (IPv6 compared in full form).

A pattern RocketMQ refuses (not an address, a range out of 0-255, ``-1``) is a
:class:`~rocketstore.errors.ConfigError` here.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from rocketstore.errors import ConfigError

__all__ = ["AddressPattern", "address_pattern", "client_ip"]


def client_ip(peer: str) -> str:
    """``ip:port`` / ``[v6]:port`` -> the IP (``PlainAccessValidator.parse`` cuts at the last
    colon)."""
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def _is_ipv4(text: str) -> bool:
    parts = text.split(".")
    return len(parts) == 4 and all(p.isdigit() and len(p) <= 3 and int(p) <= 255 for p in parts)


def _is_ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


def _is_hex_group(text: str) -> bool:
    return 0 < len(text) <= 4 and all(c in "0123456789abcdefABCDEF" for c in text)


def _expand_v6(text: str) -> str:
    """An IPv6 address as eight 4-digit upper-case groups (``AclUtils.expandIP``)."""
    return ipaddress.IPv6Address(text).exploded.upper()


def _checked_address(text: str, pattern: str) -> str:
    if _is_ipv4(text):
        return text
    if _is_ipv6(text):
        return _expand_v6(text)
    raise ConfigError(f"ACL address pattern {pattern!r}: {text!r} is not an IP address")


@dataclass(frozen=True)
class AddressPattern:
    """One white-list entry, compiled: ``matches(ip)``."""

    text: str
    kind: str  # "none", "any", "set" or "range"
    addresses: frozenset[str] = frozenset()
    # range: the parts before the ranged one, the ranged part's index and bounds
    head: tuple[str, ...] = ()
    index: int = 0
    low: int = 0
    high: int = 0
    v6: bool = False

    def matches(self, ip: str) -> bool:
        if self.kind == "any":
            return True
        if self.kind == "none" or not ip:
            return False
        if self.kind == "set":
            if _is_ipv6(ip):
                ip = _expand_v6(ip)
            return ip in self.addresses
        return self._in_range(ip)

    def _in_range(self, ip: str) -> bool:
        if not self.v6 and _is_ipv4(ip):
            parts = ip.split(".")
            return (
                tuple(parts[: self.index]) == self.head
                and self.low <= int(parts[self.index]) <= self.high
            )
        if self.v6 and _is_ipv6(ip):
            groups = _expand_v6(ip).split(":")
            return (
                tuple(groups[: self.index]) == self.head
                and self.low <= int(groups[self.index], 16) <= self.high
            )
        return False


def _bounds(value: str, pattern: str, base: int, top: int) -> tuple[int, int] | None:
    """A part ``*`` or ``a-b`` as its bounds; None for a plain part."""
    value = value.strip()
    if value == "*":
        return 0, top
    if "-" not in value:
        return None
    pieces = [p for p in value.split("-") if p]
    if value.startswith("-") or len(pieces) != 2:
        raise ConfigError(f"ACL address pattern {pattern!r}: bad range {value!r}")
    try:
        low, high = int(pieces[0], base), int(pieces[1], base)
    except ValueError as e:
        raise ConfigError(f"ACL address pattern {pattern!r}: bad range {value!r}") from e
    if not (0 <= low <= high <= top):
        raise ConfigError(f"ACL address pattern {pattern!r}: range {value!r} out of 0-{top}")
    return low, high


def _range_pattern(pattern: str) -> AddressPattern:
    v6 = ":" in pattern
    if v6:
        groups = pattern.split(":")
        at = next(i for i, g in enumerate(groups) if "*" in g or "-" in g)
        if "*" in pattern and not pattern.endswith("*"):
            raise ConfigError(f"ACL address pattern {pattern!r}: '*' must come last")
        # A head shortened with '::' cannot say where the ranged group is: refuse it
        # (RocketMQ's reading of one is rarely what was meant).
        head_groups = groups[:at]
        if not head_groups or not all(_is_hex_group(g) for g in head_groups):
            raise ConfigError(f"ACL address pattern {pattern!r}: write the groups in full")
        bounds = _bounds(groups[at], pattern, 16, 0xFFFF)
        assert bounds is not None
        head = tuple(g.upper().rjust(4, "0") for g in head_groups)
        return AddressPattern(
            pattern, "range", head=head, index=at, low=bounds[0], high=bounds[1], v6=True
        )
    parts = pattern.split(".")
    for index in (1, 2, 3):
        if index >= len(parts):
            break
        bounds = _bounds(parts[index], pattern, 10, 255)
        # RocketMQ moves on past a part whose upper bound is 0 ("0-0").
        if bounds is None or bounds[1] == 0:
            continue
        head = tuple(p.strip() for p in parts[:index])
        if not all(p.isdigit() and int(p) <= 255 for p in head):
            raise ConfigError(f"ACL address pattern {pattern!r}: parts must be 0-255")
        return AddressPattern(
            pattern, "range", head=head, index=index, low=bounds[0], high=bounds[1]
        )
    raise ConfigError(f"ACL address pattern {pattern!r}: no '*' or range after the first part")


def address_pattern(text: str | None) -> AddressPattern:
    """``RemoteAddressStrategyFactory.getRemoteAddressStrategy``."""
    pattern = "" if text is None else str(text)
    if not pattern.strip():
        return AddressPattern(pattern, "none")
    if pattern in ("*", "*.*.*.*", "*:*:*:*:*:*:*:*"):
        return AddressPattern(pattern, "any")
    if pattern.endswith("}"):
        brace = pattern.find("{")
        separator = ":" if ":" in pattern else "."
        if brace < 0 or (separator == "." and len(pattern.split(".")) < 4):
            raise ConfigError(f"ACL address pattern {pattern!r}: bad {{a,b}} list")
        if separator not in pattern[:brace] or pattern[brace - 1] != separator:
            raise ConfigError(f"ACL address pattern {pattern!r}: '{{' must start the last part")
        prefix = pattern[:brace]
        items = [i for i in pattern[brace + 1 : -1].split(",") if i]
        addresses = frozenset(_checked_address(prefix + i, pattern) for i in items)
        return AddressPattern(pattern, "set", addresses=addresses)
    if "," in pattern:
        items = [i for i in pattern.split(",") if i]
        return AddressPattern(
            pattern, "set", addresses=frozenset(_checked_address(i, pattern) for i in items)
        )
    if "*" in pattern or "-" in pattern:
        return _range_pattern(pattern)
    return AddressPattern(pattern, "set", addresses=frozenset({_checked_address(pattern, pattern)}))
