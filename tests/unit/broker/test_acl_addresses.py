"""RocketMQ's ACL address patterns (RemoteAddressStrategyFactory, 4.9.8)."""

from __future__ import annotations

import pytest

from rocketstore.broker.acl_addresses import address_pattern, client_ip
from rocketstore.errors import ConfigError


@pytest.mark.parametrize(
    ("pattern", "inside", "outside"),
    [
        ("*", ["1.2.3.4", "::1"], []),
        ("*.*.*.*", ["10.0.0.1"], []),
        ("", [], ["127.0.0.1"]),
        ("127.0.0.1", ["127.0.0.1"], ["127.0.0.2", "::1"]),
        ("192.168.1.*", ["192.168.1.0", "192.168.1.255"], ["192.168.2.1", "10.0.0.1"]),
        ("192.168.1-10.*", ["192.168.1.7", "192.168.10.0"], ["192.168.11.1", "192.168.0.1"]),
        ("192.168.*", ["192.168.0.1", "192.168.255.9"], ["192.169.0.1"]),
        ("192.168.1.1-10", ["192.168.1.1", "192.168.1.10"], ["192.168.1.11"]),
        ("192.168.1.{1,2,3}", ["192.168.1.2"], ["192.168.1.4", "192.168.1.12"]),
        ("192.168.1.1,10.0.0.1", ["10.0.0.1", "192.168.1.1"], ["192.168.1.2"]),
        ("::1", ["::1", "0:0:0:0:0:0:0:1"], ["::2", "127.0.0.1"]),
        ("1050:0:0:0:5:600:300c:*", ["1050::5:600:300c:1"], ["1050::5:600:300d:1"]),
        ("1050:0:0:0:5:600:300c:1-10", ["1050::5:600:300c:f"], ["1050::5:600:300c:11"]),
    ],
)
def test_patterns_match_as_rocketmq(pattern: str, inside: list[str], outside: list[str]) -> None:
    compiled = address_pattern(pattern)
    assert [ip for ip in inside if not compiled.matches(ip)] == []
    assert [ip for ip in outside if compiled.matches(ip)] == []


@pytest.mark.parametrize(
    "pattern",
    ["not-an-ip", "192.168.1.256", "192.168.1.-1", "192.168.1.5-1", "192.168.{1,2}", "1.2.3.x*"],
)
def test_bad_patterns_are_refused(pattern: str) -> None:
    with pytest.raises(ConfigError, match="ACL address pattern"):
        address_pattern(pattern)


def test_client_ip() -> None:
    assert client_ip("127.0.0.1:5555") == "127.0.0.1"
    assert client_ip("[::1]:5555") == "::1"
    assert client_ip("10.0.0.1") == "10.0.0.1"
