"""Host fields: 4-byte IPv4 or 16-byte IPv6 address, then the port as a 4-byte int."""

from __future__ import annotations

import struct

import pytest

from rocketstore.errors import ConfigError, CorruptDataError
from rocketstore.format.hosts import decode_host, encode_host, is_ipv6_host


def test_encode_ipv4_golden() -> None:
    expected = (
        bytes([127, 0, 0, 1])  # IPv4 address
        + struct.pack(">i", 9103)  # port, 4-byte big-endian int
    )
    assert encode_host("127.0.0.1:9103") == expected
    assert expected.hex().upper() == "7F0000010000238F"


def test_encode_ipv6_golden() -> None:
    expected = (
        bytes(15) + b"\x01"  # ::1 as 16 address bytes
        + struct.pack(">i", 123)  # port
    )  # fmt: skip
    assert encode_host("[::1]:123") == expected
    assert len(expected) == 20


def test_encode_full_ipv6_address() -> None:
    got = encode_host("[2001:db8::8a2e:370:7334]:65535")
    assert got[:16] == bytes.fromhex("20010db80000000000008a2e03707334")
    assert got[16:] == b"\x00\x00\xff\xff"


@pytest.mark.parametrize(
    ("text", "length", "v6"),
    [("10.0.0.1:0", 8, False), ("[fe80::1]:10911", 20, True), ("[::ffff:1.2.3.4]:1", 20, True)],
)
def test_is_ipv6_host(text: str, length: int, v6: bool) -> None:
    encoded = encode_host(text)
    assert len(encoded) == length
    assert is_ipv6_host(encoded) is v6


def test_decode_ipv4() -> None:
    assert decode_host(bytes.fromhex("7F0000010000238F")) == "127.0.0.1:9103"


def test_decode_ipv6_is_bracketed() -> None:
    assert decode_host(bytes(15) + b"\x01" + struct.pack(">i", 123)) == "[::1]:123"


def test_decode_accepts_memoryview() -> None:
    data = b"xx" + bytes.fromhex("0A0000010000007B")
    assert decode_host(memoryview(data)[2:]) == "10.0.0.1:123"


@pytest.mark.parametrize("length", [0, 4, 7, 9, 16, 19, 21, 28])
def test_decode_wrong_length_is_corrupt(length: int) -> None:
    with pytest.raises(CorruptDataError):
        decode_host(bytes(length))


@pytest.mark.parametrize(
    "host", ["127.0.0.1:9103", "0.0.0.0:0", "255.255.255.255:65535", "[::1]:123", "[::]:1"]
)
def test_round_trip(host: str) -> None:
    assert decode_host(encode_host(host)) == host


@pytest.mark.parametrize(
    "text",
    [
        "127.0.0.1",  # no port
        "localhost:80",  # not an IP address
        "1.2.3:80",
        "256.0.0.1:80",
        "[::1]80",
        "[::1:80",
        "127.0.0.1:-1",
        "127.0.0.1:port",
        "127.0.0.1:2147483648",  # above a Java int
    ],
)
def test_encode_rejects_malformed_hosts(text: str) -> None:
    with pytest.raises(ConfigError):
        encode_host(text)
