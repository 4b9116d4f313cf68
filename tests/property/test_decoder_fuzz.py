"""Decoders fed arbitrary or damaged input: only a valid result, IncompleteDataError or
CorruptDataError may come out (never struct.error, IndexError, UnicodeDecodeError ...)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import TypeVar

from hypothesis import example, given, settings
from hypothesis import strategies as st

from rocketstore.errors import CorruptDataError, IncompleteDataError
from rocketstore.format.checkpoint import Checkpoint, decode_checkpoint
from rocketstore.format.crc import masked_crc32
from rocketstore.format.hosts import decode_host, encode_host
from rocketstore.format.index_layout import (
    IndexEntry,
    IndexHeader,
    decode_entry,
    decode_header,
    decode_slot,
)
from rocketstore.format.message import MessageExt
from rocketstore.format.message_id import (
    decode_offset_msg_id,
    uniq_key_ip,
    uniq_key_ms_since_month_start,
    uniq_key_timestamp,
)
from rocketstore.format.properties import decode_properties, encode_properties
from rocketstore.format.queue_unit import QueueUnit, decode_unit, decode_units
from rocketstore.format.record import (
    Blank,
    RecordView,
    decode_message,
    encode_blank,
    encode_record,
    read_record,
    to_message_ext,
)

ALLOWED = (CorruptDataError, IncompleteDataError)
T = TypeVar("T")


def _outcome(call: Callable[[], T]) -> T | CorruptDataError | IncompleteDataError:
    """The decoder's result, or the allowed exception it raised (anything else propagates)."""
    try:
        return call()
    except ALLOWED as e:
        return e


def _valid_record(born_v6: bool = False, store_v6: bool = False) -> bytes:
    body = b"Once, there was a chance for me!"
    return encode_record(
        topic=b"FooBar",
        body=body,
        properties=encode_properties({"TAGS": "TAG1", "KEYS": "1234567890123"}),
        queue_id=1,
        flag=0,
        queue_offset=5,
        physical_offset=2048,
        sys_flag=0,
        born_timestamp=1_700_000_000_000,
        born_host=encode_host("[::1]:123" if born_v6 else "127.0.0.1:123"),
        store_timestamp=1_700_000_000_001,
        store_host=encode_host("[::2]:124" if store_v6 else "127.0.0.1:124"),
        reconsume_times=0,
        prepared_transaction_offset=0,
        body_crc=masked_crc32(body),
    )


RECORDS = [_valid_record(), _valid_record(True, False), _valid_record(False, True)]
RECORDS.append(_valid_record(True, True))

MAGIC_PREFIXES = st.sampled_from(
    [b"", bytes.fromhex("DAA320A7"), bytes.fromhex("DAA320AB"), bytes.fromhex("CBD43194")]
)


@st.composite
def record_like_bytes(draw: st.DrawFn) -> bytes:
    """Arbitrary bytes, often with a plausible TOTALSIZE and a real magic to get past the
    first checks."""
    tail = draw(st.binary(max_size=400))
    magic = draw(MAGIC_PREFIXES)
    if not magic:
        return tail
    total = draw(st.integers(-10, len(tail) + 16))
    return total.to_bytes(4, "big", signed=True) + magic + tail


def _check_read_record(buf: bytes, position: int, check_crc: bool) -> None:
    got = _outcome(lambda: read_record(buf, position, check_crc=check_crc))
    if isinstance(got, RecordView):
        assert got.position == position
        assert position + got.size <= len(buf)
        # A RecordView must be turnable into a message without new errors.
        assert isinstance(to_message_ext(buf, got), MessageExt)
    else:
        assert isinstance(got, (Blank, *ALLOWED))


# --- arbitrary bytes -------------------------------------------------------------------------


@settings(max_examples=500)
@given(record_like_bytes(), st.booleans())
@example(b"", False)
@example(bytes(200), True)
def test_read_record_arbitrary_bytes(buf: bytes, check_crc: bool) -> None:
    _check_read_record(buf, 0, check_crc)


@given(st.binary(max_size=300), st.integers(0, 320))
def test_read_record_arbitrary_position(buf: bytes, position: int) -> None:
    _check_read_record(buf, position, False)


@settings(max_examples=500)
@given(record_like_bytes(), st.booleans())
def test_decode_message_arbitrary_bytes(buf: bytes, check_crc: bool) -> None:
    got = _outcome(lambda: decode_message(buf, check_crc=check_crc))
    assert isinstance(got, (MessageExt, *ALLOWED))


@given(st.binary(max_size=60), st.integers(0, 64))
def test_decode_unit_arbitrary_bytes(buf: bytes, position: int) -> None:
    got = _outcome(lambda: decode_unit(buf, position))
    assert isinstance(got, (QueueUnit, *ALLOWED))


@given(st.binary(max_size=200))
def test_decode_units_arbitrary_bytes(buf: bytes) -> None:
    assert len(decode_units(buf)) == len(buf) // 20


@given(st.binary(max_size=100), st.integers(0, 100))
def test_decode_header_arbitrary_bytes(buf: bytes, position: int) -> None:
    got = _outcome(lambda: decode_header(buf, position))
    assert isinstance(got, (IndexHeader, *ALLOWED))


@given(st.binary(max_size=60), st.integers(0, 64))
def test_decode_entry_arbitrary_bytes(buf: bytes, position: int) -> None:
    got = _outcome(lambda: decode_entry(buf, position))
    assert isinstance(got, (IndexEntry, *ALLOWED))


@given(st.binary(max_size=20), st.integers(0, 24))
def test_decode_slot_arbitrary_bytes(buf: bytes, position: int) -> None:
    got = _outcome(lambda: decode_slot(buf, position))
    assert isinstance(got, (int, *ALLOWED))


@given(st.binary(max_size=80))
@example(bytes(4096))
def test_decode_checkpoint_arbitrary_bytes(buf: bytes) -> None:
    got = _outcome(lambda: decode_checkpoint(buf))
    assert isinstance(got, (Checkpoint, *ALLOWED))


@given(st.binary(max_size=40))
def test_decode_host_arbitrary_bytes(buf: bytes) -> None:
    got = _outcome(lambda: decode_host(buf))
    assert isinstance(got, (str, *ALLOWED))


@given(st.binary(max_size=300))
def test_decode_properties_arbitrary_bytes(buf: bytes) -> None:
    got = decode_properties(buf)  # never raises: bad segments are dropped
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in got.items())
    assert all(k and v for k, v in got.items())


@st.composite
def id_like_text(draw: st.DrawFn) -> str:
    """Arbitrary text, or hex-and-whitespace text of about the right length."""
    if draw(st.booleans()):
        return draw(st.text(max_size=70))
    size = draw(st.sampled_from([0, 31, 32, 33, 55, 56, 57]))
    return draw(st.text(alphabet="0123456789abcdefABCDEFg \t\n", min_size=size, max_size=size))


@given(id_like_text())
@example("7F0000010000238F000000000001E240")
def test_decode_offset_msg_id_arbitrary_text(text: str) -> None:
    got = _outcome(lambda: decode_offset_msg_id(text))
    if not isinstance(got, Exception):
        host, offset = got
        assert isinstance(host, str)
        assert isinstance(offset, int)


@given(id_like_text(), st.integers(0, 4_000_000_000_000))
def test_uniq_key_decoders_arbitrary_text(text: str, now_ms: int) -> None:
    got = _outcome(lambda: uniq_key_ms_since_month_start(text))
    assert isinstance(got, (int, *ALLOWED))
    ip = _outcome(lambda: uniq_key_ip(text))
    assert isinstance(ip, (str, *ALLOWED))
    got = _outcome(lambda: uniq_key_timestamp(text, now_ms, dt.UTC))
    assert isinstance(got, (int, *ALLOWED))


# --- damaged valid records ---------------------------------------------------------------


@settings(max_examples=500)
@given(
    st.sampled_from(RECORDS),
    st.data(),
    st.integers(0, 255),
    st.binary(max_size=64),
    st.booleans(),
)
def test_single_byte_mutation_of_a_valid_record(
    rec: bytes, data: st.DataObject, value: int, after: bytes, check_crc: bool
) -> None:
    index = data.draw(st.integers(0, len(rec) - 1))
    damaged = bytearray(rec + after)
    damaged[index] = value
    buf = bytes(damaged)
    _check_read_record(buf, 0, check_crc)
    got = _outcome(lambda: decode_message(buf, check_crc=check_crc))
    assert isinstance(got, (MessageExt, *ALLOWED))


@settings(max_examples=200)
@given(st.sampled_from(RECORDS), st.data())
def test_body_byte_flip_is_caught_by_crc(rec: bytes, data: st.DataObject) -> None:
    view = read_record(rec)
    assert isinstance(view, RecordView)
    index = data.draw(st.integers(view.body_position, view.body_position + view.body_length - 1))
    bit = data.draw(st.integers(0, 7))
    damaged = bytearray(rec)
    damaged[index] ^= 1 << bit
    got = _outcome(lambda: read_record(bytes(damaged), check_crc=True))
    assert isinstance(got, CorruptDataError)


@given(st.sampled_from([*RECORDS, encode_blank(64)]), st.data())
def test_every_truncation_is_incomplete(rec: bytes, data: st.DataObject) -> None:
    cut = data.draw(st.integers(0, len(rec) - 1))
    if rec[4:8] == bytes.fromhex("CBD43194") and cut >= 8:
        return  # a blank is whole after its 8 bytes
    got = _outcome(lambda: read_record(rec[:cut]))
    assert isinstance(got, IncompleteDataError)
