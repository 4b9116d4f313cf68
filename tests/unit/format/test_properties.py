"""Properties string codec: ``name 0x01 value 0x02 ...`` (spec 1.5 and section 11)."""

from __future__ import annotations

import pytest

from rocketstore.format import properties as props
from rocketstore.format.properties import (
    decode_properties,
    decode_properties_str,
    encode_properties,
    encode_properties_str,
    split_keys,
)


def test_separators() -> None:
    assert props.NAME_VALUE_SEPARATOR == "\x01"
    assert props.PROPERTY_SEPARATOR == "\x02"
    assert props.KEY_SEPARATOR == " "


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("KEYS", "KEYS"),
        ("TAGS", "TAGS"),
        ("WAIT", "WAIT"),
        ("DELAY", "DELAY"),
        ("UNIQ_KEY", "UNIQ_KEY"),
        ("REAL_TOPIC", "REAL_TOPIC"),
        ("REAL_QID", "REAL_QID"),
        ("CLUSTER", "CLUSTER"),
        ("RETRY_TOPIC", "RETRY_TOPIC"),
        ("TRAN_MSG", "TRAN_MSG"),
        ("PGROUP", "PGROUP"),
        ("MAX_RECONSUME_TIMES", "MAX_RECONSUME_TIMES"),
        ("ORIGIN_MESSAGE_ID", "ORIGIN_MESSAGE_ID"),
        ("RECONSUME_TIME", "RECONSUME_TIME"),
        ("CRC32_PROPERTY", "__CRC32#"),
    ],
)
def test_property_names_are_rocketmq_strings(name: str, expected: str) -> None:
    assert getattr(props, name) == expected


# --- encoding ------------------------------------------------------------------------------


def test_encode_without_trailing_separator_by_default() -> None:
    # 4.9.1+ form: entries in mapping order, the final 0x02 deleted.
    expected = (
        b"TAGS"  # name
        b"\x01"  # NAME_VALUE_SEPARATOR
        b"TAG1"  # value
        b"\x02"  # PROPERTY_SEPARATOR
        b"KEYS"
        b"\x01"
        b"1234567890123"
    )
    got = encode_properties({"TAGS": "TAG1", "KEYS": "1234567890123"})
    assert got == expected
    assert len(got) == 28  # the props of spec 1.2's 157-byte record


def test_encode_with_trailing_separator() -> None:
    got = encode_properties({"TAGS": "TAG1", "KEYS": "1234567890123"}, trailing_separator=True)
    assert got == b"TAGS\x01TAG1\x02KEYS\x011234567890123\x02"
    assert len(got) == 29


def test_encode_keeps_mapping_order() -> None:
    assert encode_properties_str({"b": "1", "a": "2"}) == "b\x011\x02a\x012"
    assert encode_properties_str({"a": "2", "b": "1"}) == "a\x012\x02b\x011"


def test_encode_empty_mapping_is_empty_in_both_forms() -> None:
    assert encode_properties({}) == b""
    assert encode_properties({}, trailing_separator=True) == b""


def test_encode_skips_none_values() -> None:
    mapping = {"A": "1", "B": None, "C": "3"}
    assert encode_properties_str(mapping) == "A\x011\x02C\x013"  # type: ignore[arg-type]
    only_none = {"B": None}
    assert encode_properties_str(only_none) == ""  # type: ignore[arg-type]


def test_encode_is_utf8() -> None:
    assert encode_properties({"K": "é"}) == b"K\x01\xc3\xa9"


# --- decoding: MessageDecoderTest.testString2messageProperties (spec section 11) ----------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("k1\x01v1", {"k1": "v1"}),
        ("", {}),
        (" ", {}),
        ("aaa", {}),
        ("k1\x01", {}),
        ("\x01v1", {}),
        ("k1\x01v1\x02", {"k1": "v1"}),
        ("k1\x01v1\x02\x01v2", {"k1": "v1"}),
        ("k1\x01\x02k2\x01v2", {"k2": "v2"}),
        ("1\x011\x022\x012", {"1": "1", "2": "2"}),
    ],
)
def test_decode_message_decoder_test_vectors(text: str, expected: dict[str, str]) -> None:
    assert decode_properties_str(text) == expected
    assert decode_properties(text.encode("utf-8")) == expected


def test_decode_accepts_both_trailing_forms() -> None:
    expected = {"TAGS": "TAG1", "KEYS": "1234567890123"}
    assert decode_properties(b"TAGS\x01TAG1\x02KEYS\x011234567890123") == expected
    assert decode_properties(b"TAGS\x01TAG1\x02KEYS\x011234567890123\x02") == expected


def test_decode_preserves_string_order() -> None:
    got = decode_properties(b"KEYS\x01k\x02UNIQ_KEY\x01u\x02CLUSTER\x01c\x02TAGS\x01t")
    assert list(got) == ["KEYS", "UNIQ_KEY", "CLUSTER", "TAGS"]


def test_decode_drops_empty_segments() -> None:
    assert decode_properties_str("\x02\x02a\x01b\x02\x02") == {"a": "b"}


def test_decode_value_keeps_later_name_value_separators() -> None:
    # The key ends at the first 0x01; the rest of the segment is the value.
    assert decode_properties_str("k\x01v\x01w") == {"k": "v\x01w"}


def test_decode_segment_without_separator_is_dropped_even_if_a_later_one_has_it() -> None:
    # "abc" has no 0x01; the search runs into the next segment, which must not be used.
    assert decode_properties_str("abc\x02k\x01v") == {"k": "v"}


def test_decode_last_value_wins_for_duplicate_names() -> None:
    assert decode_properties_str("k\x011\x02k\x012") == {"k": "2"}


def test_decode_utf8_and_invalid_utf8() -> None:
    assert decode_properties(b"K\x01\xc3\xa9") == {"K": "é"}
    got = decode_properties(b"K\x01\xff\xfe")  # not UTF-8: replaced, never raises
    assert list(got) == ["K"]


def test_decode_accepts_bytearray_and_memoryview() -> None:
    data = b"..a\x01b"
    assert decode_properties(bytearray(data[2:])) == {"a": "b"}
    assert decode_properties(memoryview(data)[2:]) == {"a": "b"}


def test_encode_decode_round_trip_in_both_forms() -> None:
    mapping = {"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "7F0000010000238F000000000001E240"}
    for trailing in (False, True):
        assert decode_properties(encode_properties(mapping, trailing_separator=trailing)) == mapping


# --- KEYS tokens -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        (None, []),
        ("", []),
        ("k1", ["k1"]),
        ("k1 k2", ["k1", "k2"]),
        ("  k1   k2 ", ["k1", "k2"]),
        ("k1\tk2", ["k1\tk2"]),  # only a space separates keys
    ],
)
def test_split_keys(keys: str | None, expected: list[str]) -> None:
    assert split_keys(keys) == expected


# --- verbatim properties: a batch record's string as RocketMQ keeps it ---------------------


def test_verbatim_properties_keep_their_text_and_map_its_decoding() -> None:
    text = "TAGS\x01a\x02KEYS\x01k1\x02TAGS\x01b\x02"  # a repeated name, a trailing separator
    verbatim = props.VerbatimProperties(text)
    assert verbatim == {"TAGS": "b", "KEYS": "k1"}  # the later name wins, as in RocketMQ
    assert verbatim.text == text
    assert props.stored_properties_str(verbatim) == text
    assert props.stored_properties_str({"TAGS": "b", "KEYS": "k1"}) == "TAGS\x01b\x02KEYS\x01k1"


@pytest.mark.parametrize(
    ("inner", "batch", "stored"),
    [
        # BatchPutMessageTest: inner + batch properties + one separator.
        ("TAGS\x01t", "extraKey\x01v", "TAGS\x01t\x02extraKey\x01v"),
        # A client that ends its properties with a separator (4.9.0, 5.2+) gets no second.
        ("TAGS\x01t\x02", "extraKey\x01v", "TAGS\x01t\x02extraKey\x01v"),
        ("", "extraKey\x01v", "extraKey\x01v"),
        ("TAGS\x01t\x02", "", "TAGS\x01t\x02"),
        ("", "", ""),
    ],
)
def test_join_batch_properties(inner: str, batch: str, stored: str) -> None:
    assert props.join_batch_properties(inner, batch) == stored
