"""The multi-dispatch codec (format.multi_dispatch): Java's split and isBlank, the queue
keys, the wrapped properties and the extra units found in a run of records."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.format import properties as props
from rocketstore.format.javahash import java_hashmap_order
from rocketstore.format.multi_dispatch import (
    INNER_MULTI_DISPATCH,
    INNER_MULTI_QUEUE_OFFSET,
    ExtraUnits,
    extra_units,
    is_multi_dispatch,
    java_is_blank,
    java_split,
    merge_units,
    queue_keys,
    target_queue_id,
    wrapped_properties,
)
from rocketstore.format.record_scan import Records, TopicTable, decode_run, walk_start_array

# String.split(",") as a JDK 17 prints it (checked with a small Java program).
JAVA_SPLITS = {
    "": [""],
    ",": [],
    ",,": [],
    "a": ["a"],
    "a,": ["a"],
    ",a": ["", "a"],
    "a,,b": ["a", "", "b"],
    "a,b,,": ["a", "b"],
    " , ": [" ", " "],
}


@pytest.mark.parametrize("text", sorted(JAVA_SPLITS))
def test_java_split(text: str) -> None:
    assert java_split(text) == JAVA_SPLITS[text]


@given(st.lists(st.text(alphabet="ab%,", max_size=6), max_size=5))
def test_java_split_rejoins_to_the_text_without_trailing_commas(parts: list[str]) -> None:
    text = ",".join(parts)
    split = java_split(text)
    if "," not in text:
        assert split == [text]
    else:
        assert ",".join(split) == text.rstrip(",")
        assert not split or split[-1] != ""


@pytest.mark.parametrize(
    ("text", "blank"),
    [(None, True), ("", True), (" \t\r\n\x0b\x0c", True), ("\x1c\x1f", True), ("a", False),
     (" a ", False), ("\u00a0", False), ("\u2007", False), ("\u0085", False), ("\u3000", True)],
)  # fmt: skip
def test_java_is_blank_is_commons_lang(text: str | None, blank: bool) -> None:
    assert java_is_blank(text) is blank


def test_queue_keys_take_queue_0_for_lmq_queues_only_with_enable_lmq() -> None:
    properties = {INNER_MULTI_DISPATCH: "%LMQ%a,Plain,%LMQ%a,"}
    assert queue_keys(properties, 3, enable_lmq=True) == ["%LMQ%a-0", "Plain-3", "%LMQ%a-0"]
    assert queue_keys(properties, 3, enable_lmq=False) == ["%LMQ%a-3", "Plain-3", "%LMQ%a-3"]
    assert target_queue_id("%LMQ%x", 7, enable_lmq=True) == 0
    assert target_queue_id("LMQ%x", 7, enable_lmq=True) == 7


def test_is_multi_dispatch_needs_a_non_blank_value() -> None:
    assert is_multi_dispatch({INNER_MULTI_DISPATCH: "%LMQ%a"})
    assert is_multi_dispatch({INNER_MULTI_DISPATCH: ","})  # not blank: wrapped, no queues
    assert not is_multi_dispatch({INNER_MULTI_DISPATCH: "  "})
    assert not is_multi_dispatch({props.TAGS: "t"})


@given(
    st.dictionaries(
        st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ_", min_size=1, max_size=12),
        st.text(alphabet="xyz", max_size=3),
        max_size=14,
    ),
    st.lists(st.integers(0, 10**12), min_size=1, max_size=4),
    st.booleans(),
)
def test_wrapped_properties_are_the_hashmap_with_offsets_and_without_wait(
    given_props: dict[str, str], offsets: list[int], wait: bool
) -> None:
    properties = dict(given_props)
    properties[INNER_MULTI_DISPATCH] = ",".join(f"%LMQ%{i}" for i in range(len(offsets)))
    if wait:
        properties[props.WAIT] = "true"
    properties.pop(INNER_MULTI_QUEUE_OFFSET, None)
    wrapped = wrapped_properties(properties, offsets)
    assert props.WAIT not in wrapped
    assert wrapped[INNER_MULTI_QUEUE_OFFSET] == ",".join(map(str, offsets))
    # The order is a HashMap's holding every key, WAIT included (it sized the table).
    everything = [*properties, INNER_MULTI_QUEUE_OFFSET]
    assert list(wrapped) == [k for k in java_hashmap_order(everything) if k != props.WAIT]


def test_wrapped_properties_of_rocketmq_s_example() -> None:
    """KEYS, TAGS, WAIT, UNIQ_KEY and the dispatch list, as a 4.9.8 client map holds them."""
    properties = {
        props.KEYS: "k1",
        props.UNIQ_KEY: "7F0000010001",
        props.WAIT: "true",
        props.TAGS: "TAG1",
        INNER_MULTI_DISPATCH: "%LMQ%123,%LMQ%456",
    }
    wrapped = wrapped_properties(properties, [0, 5])
    assert wrapped == {
        k: v for k, v in {**properties, INNER_MULTI_QUEUE_OFFSET: "0,5"}.items() if k != props.WAIT
    }
    assert list(wrapped) == [
        k for k in java_hashmap_order([*properties, INNER_MULTI_QUEUE_OFFSET]) if k != props.WAIT
    ]


def _stored_run(
    tmp_path: Path, specs: list[tuple[int, dict[str, str], int]]
) -> tuple[bytes, Records]:
    """Records with exactly these properties (multi-dispatch off stores them as given),
    decoded as the dispatcher decodes a run."""
    config = StoreConfig(mapped_file_size_commit_log=1 << 20)
    with MessageStore.open(tmp_path / "s", config) as store:
        for queue_id, properties, sys_flag in specs:
            message = Message("T", b"body", queue_id, sys_flag=sys_flag, properties=properties)
            assert store.put(message).ok
        end = store.max_commit_log_offset()
    data = (tmp_path / "s" / "commitlog" / f"{0:020d}").read_bytes()[:end]
    view = memoryview(data)
    starts, _stop, _why = walk_start_array(view, 0, len(data), len(data))
    decoded, valid = decode_run(
        view, np.frombuffer(data, np.uint8), 0, starts, len(data), TopicTable()
    )
    assert valid == len(specs)
    return data, decoded


def test_extra_units_of_a_run(tmp_path: Path) -> None:
    """Wrapped records give units; a plain one, a PREPARED one, one with only the list,
    one with a blank offsets value and a mismatched pair give none (the last a problem)."""
    specs: list[tuple[int, dict[str, str], int]] = [
        (1, {INNER_MULTI_DISPATCH: "%LMQ%a,Plain", INNER_MULTI_QUEUE_OFFSET: "4,9"}, 0),
        (2, {props.TAGS: "t"}, 0),
        (3, {INNER_MULTI_DISPATCH: "%LMQ%a", INNER_MULTI_QUEUE_OFFSET: "5"}, 0),
        (0, {INNER_MULTI_DISPATCH: "%LMQ%a", INNER_MULTI_QUEUE_OFFSET: "6"}, 0x4),  # PREPARED
        (0, {INNER_MULTI_DISPATCH: "%LMQ%b"}, 0),
        (0, {INNER_MULTI_DISPATCH: "%LMQ%b", INNER_MULTI_QUEUE_OFFSET: " "}, 0),
        (0, {INNER_MULTI_DISPATCH: "%LMQ%b,%LMQ%c", INNER_MULTI_QUEUE_OFFSET: "1"}, 0),
        (2, {INNER_MULTI_DISPATCH: "%LMQ%a,Plain", INNER_MULTI_QUEUE_OFFSET: "-1,x"}, 0),
    ]
    data, decoded = _stored_run(tmp_path, specs)
    units, problems = extra_units(data, decoded, enable_lmq=True)
    assert {k: (v.rows.tolist(), v.queue_offsets.tolist()) for k, v in units.items()} == {
        ("%LMQ%a", 0): ([0, 2], [4, 5]),
        ("Plain", 1): ([0], [9]),
    }
    assert len(problems) == 2
    assert "'%LMQ%b,%LMQ%c'" in problems[0] and "'1'" in problems[0]
    assert "'-1,x'" in problems[1]
    without_lmq, _ = extra_units(data, decoded, enable_lmq=False)
    assert sorted(without_lmq) == [("%LMQ%a", 1), ("%LMQ%a", 3), ("Plain", 1)]


def test_merge_units_puts_a_records_own_unit_first() -> None:
    extra = ExtraUnits(np.array([1, 3], dtype=np.int64), np.array([7, 8], dtype=np.int64))
    merged = merge_units(np.array([0, 1, 4]), np.array([6, 7, 9]), extra)
    assert merged.rows.tolist() == [0, 1, 1, 3, 4]
    assert merged.queue_offsets.tolist() == [6, 7, 7, 8, 9]
