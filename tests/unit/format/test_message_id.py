"""Message ids: offsetMsgId (spec 2.1) and UNIQ_KEY (spec 2.2)."""

from __future__ import annotations

import datetime as dt
import struct
import time
import zoneinfo
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketstore.errors import CorruptDataError
from rocketstore.format import native
from rocketstore.format.message_id import (
    bytes_to_hex,
    decode_offset_msg_id,
    encode_uniq_key,
    hex_to_bytes,
    joined_offset_msg_ids,
    month_start_ms,
    offset_msg_id,
    offset_msg_id_from_bytes,
    previous_month_start_ms,
    uniq_key_ip,
    uniq_key_ms_since_month_start,
    uniq_key_prefix,
    uniq_key_timestamp,
)

UTC = dt.UTC


def _ms(year: int, month: int, day: int, *hms: int, tz: dt.tzinfo = UTC) -> int:
    hour, minute, second = (*hms, 0, 0, 0)[:3]
    return int(dt.datetime(year, month, day, hour, minute, second, tzinfo=tz).timestamp() * 1000)


# --- hex ---------------------------------------------------------------------------------


def test_bytes_to_hex_is_upper_case() -> None:
    assert bytes_to_hex(b"\x00\xab\xff") == "00ABFF"


def test_hex_to_bytes() -> None:
    assert hex_to_bytes("00abFF") == b"\x00\xab\xff"
    assert hex_to_bytes("") == b""
    with pytest.raises(CorruptDataError):
        hex_to_bytes("zz")
    with pytest.raises(CorruptDataError):
        hex_to_bytes("abc")  # odd length


@pytest.mark.parametrize("text", ["AB CD", "AB\tCD", " ABCD", "ABCD ", "\uff10\uff10"])
def test_hex_to_bytes_rejects_whitespace_and_non_ascii_digits(text: str) -> None:
    # bytes.fromhex would skip the whitespace; an id is hex digits and nothing else.
    with pytest.raises(CorruptDataError):
        hex_to_bytes(text)


def test_hex_to_bytes_rejects_trailing_newline() -> None:
    with pytest.raises(CorruptDataError):
        hex_to_bytes("AB\n")


# --- offsetMsgId -------------------------------------------------------------------------


def test_offset_msg_id_appendix_a_vector() -> None:
    expected = (
        "7F000001"  # store host IP 127.0.0.1
        "0000238F"  # port 9103
        "000000000001E240"  # CommitLog offset 123456
    )
    assert offset_msg_id("127.0.0.1:9103", 123456) == expected
    assert expected == "7F0000010000238F000000000001E240"


def test_offset_msg_id_from_bytes() -> None:
    store_host = bytes([127, 0, 0, 1]) + struct.pack(">i", 9103)
    got = offset_msg_id_from_bytes(store_host, 123456)
    assert got == "7F0000010000238F000000000001E240"


def test_offset_msg_id_ipv6_has_56_chars() -> None:
    got = offset_msg_id("[::1]:9103", 123456)
    assert len(got) == 56
    assert got == "00000000000000000000000000000001" + "0000238F" + "000000000001E240"


def test_decode_offset_msg_id() -> None:
    assert decode_offset_msg_id("7F0000010000238F000000000001E240") == ("127.0.0.1:9103", 123456)
    # Lower case and surrounding whitespace are accepted.
    assert decode_offset_msg_id(" 7f0000010000238f000000000001e240\n") == (
        "127.0.0.1:9103",
        123456,
    )


def test_decode_offset_msg_id_ipv6() -> None:
    msg_id = offset_msg_id("[fe80::1]:10911", 2**40)
    assert decode_offset_msg_id(msg_id) == ("[fe80::1]:10911", 2**40)


def test_offset_msg_id_negative_offset_round_trips() -> None:
    msg_id = offset_msg_id("10.0.0.1:1", -1)
    assert msg_id.endswith("F" * 16)
    assert decode_offset_msg_id(msg_id) == ("10.0.0.1:1", -1)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "7F0000010000238F000000000001E24",  # 31 chars
        "7F0000010000238F000000000001E2400",  # 33 chars
        "7F0000010000238F000000000001E24G",  # not hex
        "Z" * 56,
    ],
)
def test_decode_offset_msg_id_rejects_bad_text(text: str) -> None:
    with pytest.raises(CorruptDataError):
        decode_offset_msg_id(text)


@pytest.mark.parametrize(
    "text",
    [
        "00 " * 8 + "00" * 16,  # 56 chars -> 24 bytes
        "00 " * 16 + "00" * 4,  # 56 chars -> 20 bytes
        "00" + "   00" * 2 + "  00" * 5,  # 32 chars -> 8 bytes, read as a 20-byte host
    ],
)
def test_decode_offset_msg_id_with_inner_whitespace_is_corrupt(text: str) -> None:
    # Regression: bytes.fromhex skipped the spaces and struct.error escaped.
    with pytest.raises(CorruptDataError):
        decode_offset_msg_id(text)


# --- UNIQ_KEY ------------------------------------------------------------------------------


def test_uniq_key_prefix_ipv4_golden() -> None:
    expected = (
        bytes([192, 168, 0, 10])  # client IP
        + struct.pack(">h", 1234)  # (short) pid
        + struct.pack(">i", -559038737)  # class loader hashCode
    )
    assert uniq_key_prefix("192.168.0.10", 1234, -559038737) == expected
    assert len(expected) == 10


def test_uniq_key_prefix_truncates_pid_and_hash_like_java_casts() -> None:
    prefix = uniq_key_prefix("1.2.3.4", 0x12345, 0x1_DEADBEEF)
    assert prefix[4:6] == b"\x23\x45"  # (short) 0x12345
    assert prefix[6:10] == bytes.fromhex("DEADBEEF")  # low 32 bits
    assert uniq_key_prefix("1.2.3.4", 40000, 0)[4:6] == struct.pack(">h", 40000 - 65536)


def test_uniq_key_prefix_ipv6_is_22_bytes() -> None:
    prefix = uniq_key_prefix("::1", 1, 2)
    assert len(prefix) == 22
    assert prefix[:16] == bytes(15) + b"\x01"


def test_encode_uniq_key_golden() -> None:
    prefix = uniq_key_prefix("192.168.0.10", 1234, 0x0BADCAFE)
    got = encode_uniq_key(prefix, 86_400_000, 7)
    expected = (
        "C0A8000A"  # client IP
        "04D2"  # pid 1234
        "0BADCAFE"  # class loader hash
        "05265C00"  # ms since month start: 86,400,000
        "0007"  # counter
    )
    assert got == expected
    assert len(got) == 32


def test_encode_uniq_key_ipv6_has_56_chars() -> None:
    assert len(encode_uniq_key(uniq_key_prefix("fe80::1", 1, 2), 5, 6)) == 56


def test_encode_uniq_key_counter_wraps_at_16_bits() -> None:
    prefix = uniq_key_prefix("1.2.3.4", 1, 2)
    assert encode_uniq_key(prefix, 0, 0x10001).endswith("0001")
    assert encode_uniq_key(prefix, 0, 0xFFFF).endswith("FFFF")


@pytest.mark.parametrize(
    ("diff", "stored"),
    [
        (-1, 0),  # small negative (NTP step) -> 0
        (-999_999, 0),
        (-1_000_000, 0xFFFFFFFF - 1_000_000 + 1),  # not clamped: written as the int
        (0, 0),
        # > Integer.MAX_VALUE (after day 24 of a month): Java's int wraps, same 4 bytes.
        (2_678_399_999, 2_678_399_999),
    ],
)
def test_encode_uniq_key_time_field(diff: int, stored: int) -> None:
    key = encode_uniq_key(uniq_key_prefix("1.2.3.4", 1, 2), diff, 0)
    assert key[20:28] == f"{stored:08X}"
    assert uniq_key_ms_since_month_start(key) == stored


def test_uniq_key_fields_decode() -> None:
    key = encode_uniq_key(uniq_key_prefix("10.1.2.3", 1, 2), 123_456_789, 9)
    assert uniq_key_ms_since_month_start(key) == 123_456_789
    assert uniq_key_ip(key) == "10.1.2.3"
    key6 = encode_uniq_key(uniq_key_prefix("2001:db8::5", 1, 2), 42, 9)
    assert uniq_key_ms_since_month_start(key6) == 42
    assert uniq_key_ip(key6) == "2001:db8::5"


@pytest.mark.parametrize("text", ["", "ABC", "0" * 31, "G" * 32, "0" * 57])
def test_uniq_key_decoders_reject_bad_text(text: str) -> None:
    with pytest.raises(CorruptDataError):
        uniq_key_ms_since_month_start(text)
    with pytest.raises(CorruptDataError):
        uniq_key_ip(text)
    with pytest.raises(CorruptDataError):
        uniq_key_timestamp(text, 0, UTC)


def test_uniq_key_with_inner_whitespace_is_corrupt() -> None:
    # Regression: bytes.fromhex skipped the spaces and struct.error escaped.
    with pytest.raises(CorruptDataError):
        uniq_key_ms_since_month_start("00 " * 10 + "00")


# --- month arithmetic and timestamp reconstruction (fixed tz and fixed now) --------------


def test_month_start_ms_utc() -> None:
    assert month_start_ms(_ms(2024, 3, 15, 12, 30), UTC) == _ms(2024, 3, 1)
    assert month_start_ms(_ms(2024, 3, 1), UTC) == _ms(2024, 3, 1)
    assert month_start_ms(_ms(2024, 2, 29, 23, 59, 59) + 999, UTC) == _ms(2024, 2, 1)


def test_previous_month_start_ms_utc() -> None:
    assert previous_month_start_ms(_ms(2024, 3, 1), UTC) == _ms(2024, 2, 1)
    assert previous_month_start_ms(_ms(2024, 1, 1), UTC) == _ms(2023, 12, 1)


def test_uniq_key_timestamp_in_current_month() -> None:
    prefix = uniq_key_prefix("10.0.0.1", 1, 2)
    made = _ms(2024, 3, 15, 8, 0, 0) + 123
    key = encode_uniq_key(prefix, made - _ms(2024, 3, 1), 1)
    now = _ms(2024, 3, 20)
    assert uniq_key_timestamp(key, now, UTC) == made


def test_uniq_key_timestamp_falls_back_to_previous_month() -> None:
    # Made on Feb 28 10:00; now is Mar 2: this-month reading (Mar 28) would be in the future.
    prefix = uniq_key_prefix("10.0.0.1", 1, 2)
    made = _ms(2024, 2, 28, 10)
    key = encode_uniq_key(prefix, made - _ms(2024, 2, 1), 1)
    assert uniq_key_timestamp(key, _ms(2024, 3, 2), UTC) == made


def test_uniq_key_timestamp_equal_to_now_uses_previous_month() -> None:
    # getNearlyTimeFromID: monthStart + span >= now -> previous month.
    prefix = uniq_key_prefix("10.0.0.1", 1, 2)
    now = _ms(2024, 3, 10)
    key = encode_uniq_key(prefix, now - _ms(2024, 3, 1), 1)
    assert uniq_key_timestamp(key, now, UTC) == _ms(2024, 2, 10)
    assert uniq_key_timestamp(key, now + 1, UTC) == now


def test_uniq_key_timestamp_across_year_boundary() -> None:
    prefix = uniq_key_prefix("10.0.0.1", 1, 2)
    made = _ms(2023, 12, 31, 23, 59, 59)
    key = encode_uniq_key(prefix, made - _ms(2023, 12, 1), 1)
    assert uniq_key_timestamp(key, _ms(2024, 1, 1, 0, 0, 5), UTC) == made


def test_uniq_key_timestamp_late_in_a_long_month() -> None:
    # Day 31: span above Integer.MAX_VALUE still decodes (read as unsigned).
    prefix = uniq_key_prefix("10.0.0.1", 1, 2)
    made = _ms(2024, 1, 31, 20)
    assert made - _ms(2024, 1, 1) > 2**31
    key = encode_uniq_key(prefix, made - _ms(2024, 1, 1), 1)
    assert uniq_key_timestamp(key, _ms(2024, 1, 31, 21), UTC) == made


def _berlin() -> zoneinfo.ZoneInfo:
    try:
        return zoneinfo.ZoneInfo("Europe/Berlin")
    except zoneinfo.ZoneInfoNotFoundError:  # pragma: no cover - no tz database
        pytest.skip("no tz database")


def test_month_start_with_zoneinfo_across_dst() -> None:
    berlin = _berlin()
    # DST starts 2024-03-31: month start is CET (+01:00), the moment is CEST (+02:00).
    now = _ms(2024, 3, 31, 12, tz=berlin)
    assert month_start_ms(now, berlin) == _ms(2024, 3, 1, tz=berlin)
    assert previous_month_start_ms(_ms(2024, 4, 1, tz=berlin), berlin) == _ms(2024, 3, 1, tz=berlin)


@pytest.fixture
def berlin_local_time(monkeypatch: pytest.MonkeyPatch) -> Iterator[zoneinfo.ZoneInfo]:
    berlin = _berlin()
    monkeypatch.setenv("TZ", "Europe/Berlin")
    time.tzset()
    try:
        yield berlin
    finally:
        monkeypatch.undo()
        time.tzset()


def test_month_start_local_time_across_dst(berlin_local_time: zoneinfo.ZoneInfo) -> None:
    # Regression: tz=None used the fixed UTC offset of the given moment (+02:00 on Mar 31),
    # not the zone's rules at the month start (+01:00), like Java's Calendar does.
    berlin = berlin_local_time
    now = _ms(2024, 3, 31, 12, tz=berlin)
    assert month_start_ms(now) == _ms(2024, 3, 1, tz=berlin)
    assert previous_month_start_ms(_ms(2024, 4, 1, tz=berlin)) == _ms(2024, 3, 1, tz=berlin)


def test_month_start_local_time_without_dst_change(
    berlin_local_time: zoneinfo.ZoneInfo,
) -> None:
    berlin = berlin_local_time
    assert month_start_ms(_ms(2024, 5, 20, 12, tz=berlin)) == _ms(2024, 5, 1, tz=berlin)


@given(
    st.sampled_from([8, 20]).flatmap(lambda n: st.binary(min_size=n, max_size=n)),
    st.lists(st.integers(-(2**63), 2**63 - 1), max_size=70),
)
def test_joined_offset_msg_ids_are_each_id_joined_both_ways(
    host: bytes, offsets: list[int]
) -> None:
    """A batch send's msgId answer: each offsetMsgId, joined by ","; the C join (when
    built) writes the same text from an int64 array."""
    expected = ",".join(offset_msg_id_from_bytes(host, o) for o in offsets)
    assert joined_offset_msg_ids(host, offsets) == expected
    if native.offset_msg_ids is not None:
        assert native.offset_msg_ids(host, np.array(offsets, dtype=np.int64)) == expected
