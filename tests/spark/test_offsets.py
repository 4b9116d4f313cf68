"""Streaming offsets without Spark: JSON form, admission control, data-loss rules."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketstore.errors import ConfigError, DataLossError
from rocketstore.spark import offsets as offs

keys = st.tuples(st.sampled_from(["A", "B", "Orders", "%RETRY%g"]), st.integers(0, 12))
offset_maps = st.dictionaries(keys, st.integers(0, 10**12), max_size=12)


@given(offset_maps)
def test_json_round_trip(offsets):
    encoded = offs.to_json(offsets)
    assert offs.from_json(encoded) == offsets
    # Spark compares offsets as text: the same offsets always give the same JSON text.
    assert list(encoded) == sorted(encoded)
    for queues in encoded.values():
        assert list(queues) == sorted(queues, key=int)


def test_json_queue_ids_sort_numerically():
    assert list(offs.to_json({("A", 10): 1, ("A", 2): 1})["A"]) == ["2", "10"]


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ([1], "not a JSON object"),
        ({"A": 3}, "has no queue map"),
        ({"A": {"x": 3}}, "'x' is not an int"),
        ({"A": {"0": -1}}, "A/0 offset -1"),
        ({"A": {"0": True}}, "offset True"),
    ],
)
def test_from_json_names_the_bad_part(value, needle):
    with pytest.raises(ConfigError, match=needle):
        offs.from_json(value)


@st.composite
def backlogs(draw):
    queue_keys = draw(st.lists(keys, unique=True, max_size=10))
    start = {k: draw(st.integers(0, 1000)) for k in queue_keys}
    ends = {k: start[k] + draw(st.integers(0, 500)) for k in queue_keys}
    return start, ends


@given(backlogs(), st.integers(1, 2000))
def test_admit_stays_within_limit_and_backlog(case, max_rows):
    start, ends = case
    result = offs.admit(start, ends, max_rows)
    taken = {k: result[k] - start[k] for k in ends}
    assert all(0 <= taken[k] <= ends[k] - start[k] for k in ends)
    backlog = sum(ends[k] - start[k] for k in ends)
    assert sum(taken.values()) == min(max_rows, backlog)  # never less than allowed either
    waiting = [k for k in ends if ends[k] > start[k]]
    if max_rows >= len(waiting):
        assert all(taken[k] >= 1 for k in waiting)  # no backlogged queue starves
    assert offs.admit(start, ends, max_rows) == result  # deterministic


def test_admit_is_proportional_to_backlog():
    start = {("A", 0): 0, ("A", 1): 0, ("B", 0): 0}
    ends = {("A", 0): 1000, ("A", 1): 100, ("B", 0): 1}
    result = offs.admit(start, ends, 111)
    assert result == {("A", 0): 100, ("A", 1): 10, ("B", 0): 1}
    assert offs.admit(start, ends, None) == ends
    assert offs.admit(start, ends, 5000) == ends


def test_admit_rotates_when_queues_outnumber_the_limit():
    """Two rows per batch over five backlogged queues: every queue is served within three
    batches, however big the other backlogs are."""
    queue_keys = [("T", q) for q in range(5)]
    position = dict.fromkeys(queue_keys, 0)
    ends = {k: 10_000 * (k[1] + 1) for k in queue_keys}
    served: list[set[tuple[str, int]]] = []
    for _ in range(3):
        after = offs.admit(position, ends, 2)
        served.append({k for k in queue_keys if after[k] > position[k]})
        assert sum(after[k] - position[k] for k in queue_keys) == 2
        position = after
    assert set().union(*served) == set(queue_keys)


def test_new_queues_start_at_zero_and_gone_queues_keep_their_offset():
    start = {("A", 0): 7, ("Old", 0): 3}
    ends = offs.latest_ends(start, {("A", 0): 9, ("A", 1): 4}, fail_on_data_loss=True)
    assert ends == {("A", 0): 9, ("A", 1): 4, ("Old", 0): 3}
    assert offs.plan_ranges(start, ends, {("A", 0): 0, ("A", 1): 0}, True) == [
        ("A", 0, 7, 9),
        ("A", 1, 0, 4),
    ]


def test_queue_going_back_is_data_loss(caplog):
    with pytest.raises(DataLossError, match=r"topic 'A' queue 0: offsets \[2, 7\)"):
        offs.latest_ends({("A", 0): 7}, {("A", 0): 2}, fail_on_data_loss=True)
    with caplog.at_level(logging.WARNING):
        ends = offs.latest_ends({("A", 0): 7}, {("A", 0): 2}, fail_on_data_loss=False)
    assert ends == {("A", 0): 7}
    assert "skipping lost messages" in caplog.text


def test_retention_below_start_is_data_loss(caplog):
    start, end, low = {("A", 0): 5, ("A", 1): 0}, {("A", 0): 50, ("A", 1): 10}, {("A", 0): 20}
    with pytest.raises(DataLossError) as info:
        offs.plan_ranges(start, end, {**low, ("A", 1): 0}, fail_on_data_loss=True)
    assert "topic 'A' queue 0: offsets [5, 20) are gone (removed by retention)" in str(info.value)
    with caplog.at_level(logging.WARNING):
        ranges = offs.plan_ranges(start, end, low, fail_on_data_loss=False)
    assert ranges == [("A", 0, 20, 50), ("A", 1, 0, 10)]
    # Everything in range gone: nothing to read, still reported.
    assert offs.plan_ranges({("A", 0): 5}, {("A", 0): 9}, {("A", 0): 30}, False) == []


def test_available_now_cap():
    ends = {("A", 0): 50, ("A", 1): 9, ("B", 0): 4}
    assert offs.cap(ends, {("A", 0): 40, ("A", 1): 60}) == {("A", 0): 40, ("A", 1): 9}


def test_trigger_gate_waits_for_enough_new_offsets_or_the_delay():
    gate = offs.TriggerGate(min_offsets=10, max_delay_ms=1000)
    assert not gate.admits(0, 0)  # nothing new is never a batch
    assert gate.admits(1, 0)  # the first batch does not wait (Kafka's clock starts at 0)
    assert not gate.admits(9, 999)
    assert gate.admits(10, 999)  # enough: the clock restarts here
    assert not gate.admits(1, 1998)
    assert gate.admits(1, 1999)  # waited max_delay_ms since the last batch
    assert not gate.admits(0, 99_999)  # an empty trigger does not restart the clock ...
    assert gate.admits(1, 99_999)  # ... so the next entry goes at once


def test_new_offsets_counts_new_queues_from_zero_and_never_below_the_start():
    assert (
        offs.new_offsets({("A", 0): 5, ("A", 1): 9}, {("A", 0): 8, ("A", 1): 9, ("B", 0): 4}) == 7
    )
    assert offs.new_offsets({("A", 0): 5}, {("A", 0): 3}) == 0


def test_lag_metrics_are_kafkas():
    consumed = {("A", 0): 10, ("A", 1): 4}
    latest = {("A", 0): 10, ("A", 1): 10, ("B", 0): 3}  # B not consumed yet: from 0
    assert offs.lag_metrics(consumed, latest) == {
        "minOffsetsBehindLatest": "0",
        "maxOffsetsBehindLatest": "6",
        "avgOffsetsBehindLatest": "3.0",
    }
    assert offs.lag_metrics(consumed, {}) == {}
