"""SEND_BATCH_MESSAGE body codec (MessageDecoder.encodeMessages layout)."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketstore.broker.processors.message_batch import (
    BatchColumns,
    BatchEntry,
    decode_batch,
    decode_batch_columns,
    decode_batch_columns_python,
    encode_batch,
)
from rocketstore.broker.remoting import ProtocolError
from rocketstore.format import native
from rocketstore.format.native import python_only
from rocketstore.format.properties import join_batch_properties


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


def test_columns_golden_bytes() -> None:
    """Each entry's body, flag and stored properties: its own string, a separator unless
    it is empty or ends in one, then the batch's."""
    entry = (
        struct.pack(">iiiii", 20 + 3 + 2 + 3, 0, 0, -7, 3)  # TOTALSIZE .. FLAG, BODYLEN
        + b"abc"
        + struct.pack(">h", 3)  # PROPERTIESLEN
        + b"K\x01v"
    )
    ends_in_separator = struct.pack(">iiiii", 20 + 0 + 2 + 4, 0, 0, 5, 0) + b"\0\x04a\x01b\x02"
    bare = struct.pack(">iiiii", 22, 0, 0, 0, 0) + b"\0\0"
    data = entry + ends_in_separator + bare
    expected = BatchColumns(
        [b"abc", b"", b""], [-7, 5, 0], ["K\x01v\x02C\x01D", "a\x01b\x02C\x01D", "C\x01D"], 3
    )
    assert decode_batch_columns(data, "C\x01D") == expected
    assert decode_batch_columns_python(data, "C\x01D") == expected
    assert decode_batch_columns(data, "").texts == ["K\x01v", "a\x01b\x02", ""]
    assert decode_batch_columns(b"", "C\x01D") == BatchColumns([], [], [], 0)


_text = st.text(st.characters(blacklist_categories=["Cs"]), max_size=12)


@given(st.lists(st.tuples(st.integers(-(2**31), 2**31 - 1), st.binary(max_size=40), _text)), _text)
def test_columns_are_the_entries_both_ways(
    entries: list[tuple[int, bytes, str]], suffix: str
) -> None:
    """The columns of an encoded batch are its entries (C and Python alike)."""
    data = encode_batch([BatchEntry(flag, body, {}, text) for flag, body, text in entries])
    expected = BatchColumns(
        [body for _, body, _ in entries],
        [flag for flag, _, _ in entries],
        [join_batch_properties(text, suffix) for _, _, text in entries],
        sum(len(body) for _, body, _ in entries),
    )
    assert decode_batch_columns(data, suffix) == expected
    assert decode_batch_columns_python(data, suffix) == expected


def _outcome(decode: object, data: bytes, suffix: str) -> object:
    try:
        return decode(data, suffix)  # type: ignore[operator]
    except ProtocolError as e:
        return ("ProtocolError", str(e))


@given(st.binary(max_size=160), _text)
def test_columns_of_any_bytes_agree_with_the_twin(data: bytes, suffix: str) -> None:
    """Arbitrary bytes: the same columns or the same ProtocolError with or without the
    extension (the C decoder hands every bad body back to the twin), and the same
    entries as decode_batch."""
    found = _outcome(decode_batch_columns, data, suffix)
    assert found == _outcome(decode_batch_columns_python, data, suffix)
    with python_only("batch_columns"):
        assert native.batch_columns is None
        assert _outcome(decode_batch_columns, data, suffix) == found
    if isinstance(found, BatchColumns):
        entries = decode_batch(data)
        assert found.bodies == [e.body for e in entries]
        assert found.flags == [e.flag for e in entries]
        assert found.texts == [join_batch_properties(e.properties_text, suffix) for e in entries]


@given(
    st.lists(st.tuples(st.binary(max_size=8), st.binary(max_size=8)), min_size=1, max_size=3),
    _text,
)
def test_columns_of_well_sized_entries_with_any_property_bytes_agree(
    entries: list[tuple[bytes, bytes]], suffix: str
) -> None:
    """Entries whose sizes agree but whose property bytes may not be UTF-8 (random bytes
    seldom get that far)."""
    data = b"".join(
        struct.pack(">iiiii", 22 + len(body) + len(raw), 0, 0, 1, len(body))
        + body
        + struct.pack(">h", len(raw))
        + raw
        for body, raw in entries
    )
    assert _outcome(decode_batch_columns, data, suffix) == _outcome(
        decode_batch_columns_python, data, suffix
    )


def test_the_c_decoder_is_bound() -> None:
    if native.native is None:
        pytest.skip("the C extension is not built")
    assert native.batch_columns is native.native.batch_columns
