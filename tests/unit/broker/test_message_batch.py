"""SEND_BATCH_MESSAGE body codec (MessageDecoder.encodeMessages layout)."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketstore.broker.processors.message_batch import BatchEntry, decode_batch, encode_batch
from rocketstore.broker.remoting import ProtocolError


def test_golden_bytes_field_by_field() -> None:
    props = b"KEYS\x01k1\x02UNIQ_KEY\x01AB"
    entry = (
        struct.pack(">i", 20 + 3 + 2 + len(props))  # TOTALSIZE
        + struct.pack(">i", 0)  # MAGICCODE
        + struct.pack(">i", 0)  # BODYCRC
        + struct.pack(">i", 7)  # FLAG
        + struct.pack(">i", 3)  # BODYLEN
        + b"abc"
        + struct.pack(">h", len(props))
        + props
    )
    given = BatchEntry(7, b"abc", {"KEYS": "k1", "UNIQ_KEY": "AB"})
    # Decoding keeps the client's string too (the broker stores it as it is).
    expected = [BatchEntry(7, b"abc", {"KEYS": "k1", "UNIQ_KEY": "AB"}, props.decode())]
    assert decode_batch(entry + entry) == expected * 2
    assert encode_batch([given]) == entry
    assert encode_batch(expected) == entry


def test_a_clients_own_properties_string_goes_through_as_it_is() -> None:
    """A trailing separator (4.9.0 and 5.2+ clients) and a repeated name survive a
    decode and an encode; the map is RocketMQ's reading of them."""
    text = "KEYS\x01k1\x02TAGS\x01a\x02TAGS\x01b\x02"
    (entry,) = decode_batch(encode_batch([BatchEntry(0, b"x", {}, text)]))
    assert entry.text == entry.properties_text == text
    assert entry.properties == {"KEYS": "k1", "TAGS": "b"}


@pytest.mark.parametrize(
    "data",
    [
        b"\0\0\0",  # cut header
        struct.pack(">iiiii", 100, 0, 0, 0, 0),  # entry longer than the body
        struct.pack(">iiiii", 22, 0, 0, 0, 50) + b"\0\0",  # body overruns the entry
        struct.pack(">iiiii", 22, 0, 0, 0, 0) + struct.pack(">h", 5),  # props overrun
    ],
)
def test_cut_or_inconsistent_entries_raise(data: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_batch(data)


_props = st.dictionaries(
    st.text(
        st.characters(blacklist_characters="\x01\x02", blacklist_categories=["Cs"]),
        min_size=1,
        max_size=8,
    ),
    st.text(
        st.characters(blacklist_characters="\x01\x02", blacklist_categories=["Cs"]),
        min_size=1,
        max_size=8,
    ),
    max_size=4,
)


@given(
    st.lists(
        st.builds(BatchEntry, st.integers(-(2**31), 2**31 - 1), st.binary(max_size=40), _props),
        max_size=5,
    )
)
def test_round_trip(entries: list[BatchEntry]) -> None:
    decoded = decode_batch(encode_batch(entries))
    assert [(e.flag, e.body, e.properties, e.properties_text) for e in decoded] == [
        (e.flag, e.body, e.properties, e.properties_text) for e in entries
    ]


@given(st.binary(max_size=120))
def test_fuzz_only_protocol_errors(data: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        decode_batch(data)
