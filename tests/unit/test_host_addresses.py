"""The address a RocketMQ client puts in its UNIQ_KEYs: Java's interface order and
UtilAll.getIP's choice."""

from __future__ import annotations

import ipaddress

from hypothesis import given
from hypothesis import strategies as st

from rocketstore.format.message_id import uniq_key_ip
from rocketstore.host_addresses import (
    Address,
    host_addresses,
    java_address_order,
    java_get_ip,
)
from rocketstore.uniq_keys import UniqKeyGenerator, local_ip


def ip(text: str) -> Address:
    return ipaddress.ip_address(text)


def test_the_jdk_order_puts_the_last_interface_and_its_ipv6_addresses_first() -> None:
    """What the JDK reads on a container host (IPv4 by getifaddrs, then
    /proc/net/if_inet6), and the order NetworkInterface gives: the real 4.9.8 client on
    such a host wrote UNIQ_KEYs with fd00::2."""
    seen = [
        ("lo", ip("127.0.0.1")),
        ("eth0", ip("192.0.2.2")),
        ("lo", ip("::1")),
        ("eth0", ip("fd00::2")),
        ("eth0", ip("fe80::fc:ff:fe00:1")),
    ]
    order = java_address_order(seen)
    assert order == [
        ip("fe80::fc:ff:fe00:1"), ip("fd00::2"), ip("192.0.2.2"), ip("::1"), ip("127.0.0.1")
    ]  # fmt: skip
    assert java_get_ip(order) == ip("fd00::2")


def test_get_ip_takes_the_first_outside_address_else_the_first_passed_over() -> None:
    # 127.0.0.1 is outside 10/8, 172.16/12 and 192.168/16 for UtilAll.isInternalIP.
    assert java_get_ip([ip("10.0.0.5"), ip("127.0.0.1")]) == ip("127.0.0.1")
    assert java_get_ip([ip("172.16.0.1"), ip("172.32.0.1")]) == ip("172.32.0.1")
    assert java_get_ip([ip("192.168.1.1"), ip("fec0::1"), ip("::1")]) == ip("192.168.1.1")
    assert java_get_ip([ip("fe80::1"), ip("10.1.1.1")]) == ip("fe80::1")
    assert java_get_ip([ip("::"), ip("2001:db8::7")]) == ip("2001:db8::7")
    assert java_get_ip([]) is None


@given(st.lists(st.tuples(st.sampled_from(["lo", "eth0", "eth1"]), st.ip_addresses())))
def test_every_address_is_enumerated_once_per_time_seen(
    seen: list[tuple[str, Address]],
) -> None:
    order = java_address_order(seen)
    assert sorted(map(str, order)) == sorted(str(a) for _, a in seen)
    chosen = java_get_ip(order)
    assert chosen is None if not seen else chosen in order


def test_this_hosts_address_goes_into_the_keys() -> None:
    chosen = java_get_ip(java_address_order(host_addresses()))
    address = local_ip()
    if chosen is not None:
        assert address == str(chosen)
    key = UniqKeyGenerator().next()
    assert uniq_key_ip(key) == str(ipaddress.ip_address(address))
