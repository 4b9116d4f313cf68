"""Hypothesis round trips for every pure codec in ``rocketstore.format``."""

from __future__ import annotations

import datetime as dt
import ipaddress
from typing import TypedDict

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore.config import parse_host
from rocketstore.format import sysflag
from rocketstore.format.checkpoint import Checkpoint, decode_checkpoint, encode_checkpoint
from rocketstore.format.crc import masked_crc32
from rocketstore.format.hosts import decode_host, encode_host
from rocketstore.format.index_layout import (
    IndexEntry,
    IndexHeader,
    decode_entry,
    decode_header,
    encode_entry,
    encode_header,
)
from rocketstore.format.javahash import (
    hashmap_bucket,
    hashmap_capacity,
    index_key_hash,
    index_key_hash_many,
    java_hashmap_order,
    java_string_hash,
    java_string_hash_many,
)
from rocketstore.format.message_id import (
    decode_offset_msg_id,
    encode_uniq_key,
    month_start_ms,
    offset_msg_id,
    uniq_key_ip,
    uniq_key_ms_since_month_start,
    uniq_key_prefix,
    uniq_key_timestamp,
)
from rocketstore.format.properties import decode_properties, encode_properties
from rocketstore.format.queue_unit import QueueUnit, decode_unit, encode_unit
from rocketstore.format.record import (
    RecordView,
    decode_message,
    encode_record,
    read_record,
    record_length,
    record_properties,
)

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
PORTS = st.integers(0, 65535)

TOPICS = st.from_regex(r"[%|a-zA-Z0-9_-]{1,127}", fullmatch=True)
PROPERTY_TEXT = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="\x01\x02"),
    min_size=1,
    max_size=20,
)
PROPERTIES = st.dictionaries(PROPERTY_TEXT, PROPERTY_TEXT, max_size=8)
IPV4_HOSTS = st.builds(lambda ip, port: f"{ip}:{port}", st.ip_addresses(v=4), PORTS)
IPV6_HOSTS = st.builds(lambda ip, port: f"[{ip}]:{port}", st.ip_addresses(v=6), PORTS)
HOSTS = IPV4_HOSTS | IPV6_HOSTS
# Any sysFlag except the V6 bits, which the encoder derives from the host lengths.
SYS_FLAGS = INT32.map(lambda f: f & ~(sysflag.BORNHOST_V6_FLAG | sysflag.STOREHOSTADDRESS_V6_FLAG))


def _same_host(text: str, expected: str) -> bool:
    got_ip, got_port = parse_host(text)
    want_ip, want_port = parse_host(expected)
    return (ipaddress.ip_address(got_ip), got_port) == (ipaddress.ip_address(want_ip), want_port)


# --- CommitLog record ------------------------------------------------------------------------


class RecordFields(TypedDict):
    topic: bytes
    body: bytes
    properties_map: dict[str, str]
    trailing: bool
    queue_id: int
    flag: int
    queue_offset: int
    physical_offset: int
    sys_flag: int
    born_timestamp: int
    born_host_text: str
    store_timestamp: int
    store_host_text: str
    reconsume_times: int
    prepared_transaction_offset: int
    body_crc: int


@st.composite
def records(draw: st.DrawFn) -> RecordFields:
    body = draw(st.binary(max_size=512))
    return {
        "topic": draw(TOPICS).encode("ascii"),
        "body": body,
        "properties_map": draw(PROPERTIES),
        "trailing": draw(st.booleans()),
        "queue_id": draw(INT32),
        "flag": draw(INT32),
        "queue_offset": draw(INT64),
        "physical_offset": draw(INT64),
        "sys_flag": draw(SYS_FLAGS),
        "born_timestamp": draw(INT64),
        "born_host_text": draw(HOSTS),
        "store_timestamp": draw(INT64),
        "store_host_text": draw(HOSTS),
        "reconsume_times": draw(INT32),
        "prepared_transaction_offset": draw(INT64),
        "body_crc": masked_crc32(body),
    }


def _encode(fields: RecordFields) -> bytes:
    return encode_record(
        topic=fields["topic"],
        body=fields["body"],
        properties=encode_properties(
            fields["properties_map"],
            trailing_separator=fields["trailing"],
        ),
        queue_id=fields["queue_id"],
        flag=fields["flag"],
        queue_offset=fields["queue_offset"],
        physical_offset=fields["physical_offset"],
        sys_flag=fields["sys_flag"],
        born_timestamp=fields["born_timestamp"],
        born_host=encode_host(fields["born_host_text"]),
        store_timestamp=fields["store_timestamp"],
        store_host=encode_host(fields["store_host_text"]),
        reconsume_times=fields["reconsume_times"],
        prepared_transaction_offset=fields["prepared_transaction_offset"],
        body_crc=fields["body_crc"],
    )


def _expected_sys_flag(fields: RecordFields) -> int:
    flags = fields["sys_flag"]
    if len(encode_host(fields["born_host_text"])) == 20:
        flags |= sysflag.BORNHOST_V6_FLAG
    if len(encode_host(fields["store_host_text"])) == 20:
        flags |= sysflag.STOREHOSTADDRESS_V6_FLAG
    return flags


@settings(deadline=None)
@given(records(), st.binary(max_size=16), st.binary(max_size=16))
def test_record_round_trip_read_record(fields: RecordFields, before: bytes, after: bytes) -> None:
    rec = _encode(fields)
    buf = before + rec + after
    view = read_record(buf, len(before), check_crc=True)
    assert isinstance(view, RecordView)
    assert view.position == len(before)
    assert view.size == len(rec)
    born_host = encode_host(fields["born_host_text"])
    store_host = encode_host(fields["store_host_text"])
    properties = encode_properties(
        fields["properties_map"],
        trailing_separator=fields["trailing"],
    )
    assert view.size == record_length(
        len(fields["body"]),
        len(fields["topic"]),
        len(properties),
        born_host_length=len(born_host),
        store_host_length=len(store_host),
    )
    assert view.topic == fields["topic"].decode()
    assert view.queue_id == fields["queue_id"]
    assert view.flag == fields["flag"]
    assert view.queue_offset == fields["queue_offset"]
    assert view.physical_offset == fields["physical_offset"]
    assert view.sys_flag == _expected_sys_flag(fields)
    assert view.born_timestamp == fields["born_timestamp"]
    assert view.born_host == born_host
    assert view.store_timestamp == fields["store_timestamp"]
    assert view.store_host == store_host
    assert view.reconsume_times == fields["reconsume_times"]
    assert view.prepared_transaction_offset == fields["prepared_transaction_offset"]
    assert view.body_crc == fields["body_crc"]
    assert buf[view.body_position : view.body_position + view.body_length] == fields["body"]
    assert record_properties(buf, view) == fields["properties_map"]


@settings(deadline=None)
@given(records())
def test_record_round_trip_decode_message(fields: RecordFields) -> None:
    msg = decode_message(_encode(fields), check_crc=True)
    assert msg.topic == fields["topic"].decode()
    assert msg.body == fields["body"]
    assert msg.properties == fields["properties_map"]
    assert list(msg.properties) == list(fields["properties_map"])
    assert msg.queue_id == fields["queue_id"]
    assert msg.queue_offset == fields["queue_offset"]
    assert msg.commit_log_offset == fields["physical_offset"]
    assert msg.sys_flag == _expected_sys_flag(fields)
    assert _same_host(msg.born_host, fields["born_host_text"])
    assert _same_host(msg.store_host, fields["store_host_text"])
    assert msg.msg_id == offset_msg_id(
        fields["store_host_text"],
        fields["physical_offset"],
    )
    assert len(msg.msg_id) == (56 if msg.sys_flag & sysflag.STOREHOSTADDRESS_V6_FLAG else 32)


# --- properties, hosts, ids --------------------------------------------------------------


@given(PROPERTIES, st.booleans())
def test_properties_round_trip(mapping: dict[str, str], trailing: bool) -> None:
    data = encode_properties(mapping, trailing_separator=trailing)
    assert decode_properties(data) == mapping
    assert list(decode_properties(data)) == list(mapping)
    assert data.endswith(b"\x02") == (trailing and bool(mapping))


@given(HOSTS)
def test_host_round_trip(host: str) -> None:
    encoded = encode_host(host)
    assert len(encoded) == (20 if host.startswith("[") else 8)
    text = decode_host(encoded)
    assert _same_host(text, host)
    assert encode_host(text) == encoded


@given(HOSTS, INT64)
def test_offset_msg_id_round_trip(host: str, offset: int) -> None:
    msg_id = offset_msg_id(host, offset)
    assert len(msg_id) == (56 if host.startswith("[") else 32)
    assert msg_id == msg_id.upper()
    got_host, got_offset = decode_offset_msg_id(msg_id)
    assert got_offset == offset
    assert _same_host(got_host, host)
    assert decode_offset_msg_id(msg_id.lower()) == (got_host, got_offset)


@given(
    st.ip_addresses(),
    st.integers(0, 2**32 - 1),
    st.integers(-(2**40), 2**40),
    st.integers(0, 2**32 - 1),
    st.integers(0, 2**20),
)
def test_uniq_key_round_trip(
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address,
    ms: int,
    pid: int,
    loader_hash: int,
    counter: int,
) -> None:
    key = encode_uniq_key(uniq_key_prefix(str(ip), pid, loader_hash), ms, counter)
    assert len(key) == (56 if ip.version == 6 else 32)
    assert uniq_key_ms_since_month_start(key) == ms
    assert ipaddress.ip_address(uniq_key_ip(key)) == ip
    assert int(key[-4:], 16) == counter & 0xFFFF


@given(
    st.integers(1_000_000_000_000, 4_000_000_000_000),
    st.data(),
)
def test_uniq_key_timestamp_reconstructs_times_earlier_this_month(
    now_ms: int, data: st.DataObject
) -> None:
    start = month_start_ms(now_ms, dt.UTC)
    if now_ms == start:
        return  # no earlier moment in this month
    made = data.draw(st.integers(start, now_ms - 1))
    key = encode_uniq_key(uniq_key_prefix("10.0.0.1", 1, 2), made - start, 0)
    assert uniq_key_timestamp(key, now_ms, dt.UTC) == made


# --- ConsumeQueue, index, checkpoint -------------------------------------------------------


@given(INT64, INT32, INT64, st.binary(max_size=40))
def test_queue_unit_round_trip(offset: int, size: int, code: int, prefix: bytes) -> None:
    data = encode_unit(offset, size, code)
    assert len(data) == 20
    assert decode_unit(prefix + data, len(prefix)) == QueueUnit(offset, size, code)


@given(st.builds(IndexHeader, INT64, INT64, INT64, INT64, INT32, INT32))
def test_index_header_round_trip(header: IndexHeader) -> None:
    data = encode_header(header)
    assert len(data) == 40
    assert decode_header(data) == header


@given(st.builds(IndexEntry, INT32, INT64, INT32, INT32), st.binary(max_size=40))
def test_index_entry_round_trip(entry: IndexEntry, prefix: bytes) -> None:
    data = encode_entry(entry)
    assert len(data) == 20
    assert decode_entry(prefix + data, len(prefix)) == entry


@given(st.builds(Checkpoint, INT64, INT64, INT64, INT64, INT64), st.booleans())
def test_checkpoint_round_trip(cp: Checkpoint, with_5x: bool) -> None:
    data = encode_checkpoint(cp, with_5x_fields=with_5x)
    assert len(data) == 4096
    got = decode_checkpoint(data)
    if with_5x:
        assert got == cp
    else:
        assert got == cp._replace(master_flushed_offset=0, confirm_phy_offset=0)


# --- Java hashing ----------------------------------------------------------------------------


def _reference_hash(text: str) -> int:
    """String.hashCode written from its definition over UTF-16 code units."""
    units: list[int] = []
    for ch in text:
        cp = ord(ch)
        if cp >= 0x10000:  # encode as a surrogate pair
            cp -= 0x10000
            units += [0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF)]
        else:
            units.append(cp)
    h = 0
    for unit in units:
        h = (h * 31 + unit) % 2**32
    return h - 2**32 if h >= 2**31 else h


ANY_TEXT = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=40)


@given(ANY_TEXT)
def test_java_string_hash_matches_reference(text: str) -> None:
    assert java_string_hash(text) == _reference_hash(text)


@given(ANY_TEXT)
def test_index_key_hash_is_non_negative_abs(text: str) -> None:
    h = index_key_hash(text)
    assert 0 <= h <= 2**31 - 1
    assert h in (abs(_reference_hash(text)), 0)


@settings(deadline=None)
@given(st.lists(ANY_TEXT, max_size=30))
def test_vectorised_hashes_equal_scalar(texts: list[str]) -> None:
    assert java_string_hash_many(texts).tolist() == [java_string_hash(t) for t in texts]
    assert index_key_hash_many(texts).tolist() == [index_key_hash(t) for t in texts]


KEYS = st.lists(st.text(min_size=1, max_size=12), max_size=40)


@given(KEYS, st.sampled_from([1, 2, 16, 49, 128]))
def test_hashmap_order_is_a_bucket_sorted_stable_permutation(keys: list[str], initial: int) -> None:
    order = java_hashmap_order(keys, initial_capacity=initial)
    distinct = list(dict.fromkeys(keys))
    assert sorted(order) == sorted(distinct)
    assert len(order) == len(distinct)
    cap = hashmap_capacity(len(distinct), initial)
    buckets = [hashmap_bucket(k, cap) for k in order]
    assert buckets == sorted(buckets)
    for bucket in set(buckets):
        same = [k for k in order if hashmap_bucket(k, cap) == bucket]
        assert same == [k for k in distinct if hashmap_bucket(k, cap) == bucket]


@given(st.lists(st.lists(st.sampled_from(["Aa", "BB"]), min_size=3, max_size=3), max_size=20))
def test_hashmap_order_keeps_insertion_order_for_equal_hashes(blocks: list[list[str]]) -> None:
    # Every "Aa"/"BB" string of the same length has the same hashCode, hence the same bucket.
    keys = ["".join(b) for b in blocks]
    assert java_hashmap_order(keys) == list(dict.fromkeys(keys))
