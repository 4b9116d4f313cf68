"""The trace message body codec (TraceDataEncoder's format)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rocketstore.cli.trace_data import (
    TraceEntry,
    decode_trace_data,
    encode_pub,
    encode_sub_after,
    java_split,
)

_TEXT = st.text(
    st.characters(exclude_characters="\x01\x02", exclude_categories=["Cs"]), max_size=12
)
_NONEMPTY = _TEXT.filter(bool)
_MS = st.integers(0, 2**62)
_INT = st.integers(0, 2**31 - 1)


def test_java_split_drops_trailing_empty_strings() -> None:
    assert java_split("a\x01b\x01\x01", "\x01") == ["a", "b"]
    assert java_split("a\x01\x01b", "\x01") == ["a", "", "b"]
    assert java_split("", "\x01") == [""]


@given(
    timestamp=_MS, group=_TEXT, topic=_TEXT, msg_id=_NONEMPTY, tags=_TEXT, keys=_TEXT,
    host=_TEXT, length=_INT, cost=_INT, msg_type=st.integers(0, 4), offset_id=_NONEMPTY,
    success=st.booleans(),
)  # fmt: skip
def test_a_pub_entry_decodes_to_what_was_written(
    timestamp: int, group: str, topic: str, msg_id: str, tags: str, keys: str, host: str,
    length: int, cost: int, msg_type: int, offset_id: str, success: bool,
) -> None:  # fmt: skip
    body = encode_pub(
        timestamp=timestamp, region_id="DefaultRegion", group_name=group, topic=topic,
        msg_id=msg_id, tags=tags, keys=keys, store_host=host, body_length=length,
        cost_time=cost, msg_type=msg_type, offset_msg_id=offset_id, success=success,
    )  # fmt: skip
    assert decode_trace_data(body) == [
        TraceEntry("Pub", msg_id, group, timestamp, cost, success, topic, tags, keys, host,
                   offset_id)
    ]  # fmt: skip


@given(
    msg_id=_NONEMPTY, cost=_INT, success=st.booleans(), keys=_TEXT, code=st.integers(0, 5),
    stamp=st.one_of(st.none(), st.tuples(_MS, _NONEMPTY)),
)  # fmt: skip
def test_a_sub_after_entry_decodes_to_what_was_written(
    msg_id: str, cost: int, success: bool, keys: str, code: int, stamp: tuple[int, str] | None
) -> None:
    timestamp, group = stamp if stamp is not None else (None, None)
    body = encode_sub_after(
        request_id="r1", msg_id=msg_id, cost_time=cost, success=success, keys=keys,
        context_code=code, timestamp=timestamp, group_name=group,
    )  # fmt: skip
    (entry,) = decode_trace_data(body)
    assert (entry.kind, entry.msg_id, entry.cost_time, entry.success) == (
        "SubAfter", msg_id, cost, success,
    )  # fmt: skip
    assert (entry.timestamp, entry.group_name) == (timestamp or 0, group)


def test_several_entries_older_forms_and_damage() -> None:
    old_pub = "\x01".join(["Pub", "5", "R", "PG", "T", "M1", "t", "k", "h", "3", "7", "0", "false"])
    sub_before = "\x01".join(["SubBefore", "6", "R", "CG", "req", "M1", "0", "k"])
    bad = "\x01".join(["SubAfter", "req", "M1", "not-a-number", "true", "k"])
    unknown = "\x01".join(["Nope", "1"])
    body = "\x02".join([old_pub, sub_before, bad, unknown, "Pub"]) + "\x02"
    entries = decode_trace_data(body)
    assert [(e.kind, e.msg_id, e.success) for e in entries] == [
        ("Pub", "M1", False),  # 13 fields: success at 12, no offsetMsgId
        ("SubBefore", "M1", True),
    ]
    assert entries[0].offset_msg_id is None
    assert decode_trace_data("") == []
