"""The UNIQ_KEYs the sink derives, and the lag helper for progress reports (no Spark)."""

from __future__ import annotations

import json
import re

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketstore.errors import ConfigError
from rocketstore.format.message_id import uniq_key_ms_since_month_start
from rocketstore.spark.progress import offsets_behind_latest
from rocketstore.spark.sink_uniq_keys import KeyScope, with_uniq_keys
from rocketstore.spark.staging import read_staged, stage
from rocketstore.spark.write_options import WriteColumns, WriteOptions

MAP = pa.map_(pa.string(), pa.string())


def test_keys_are_rocketmq_format_and_field_by_field():
    scope = KeyScope("job-1", 7, month_ms=0x01020304)
    keys = scope.keys(65535, 2).to_pylist()
    for key in keys:
        assert re.fullmatch("[0-9A-F]{32}", key)
        assert uniq_key_ms_since_month_start(key) == 0x01020304
    first, second = keys
    assert first[:20] == scope.prefix(0).hex().upper() and first[20:] == "01020304FFFF"
    # Row 65536 starts the next block: a new prefix, the counter back at 0.
    assert second[:20] == scope.prefix(1).hex().upper() and second[20:] == "010203040000"


def test_the_same_task_derives_the_same_keys_and_others_do_not():
    one = KeyScope("job", 0, 5).keys(0, 1000).to_pylist()
    assert KeyScope("job", 0, 5).keys(0, 1000).to_pylist() == one  # a retried task
    assert KeyScope("job", 0, 5).keys(600, 400).to_pylist() == one[600:]  # batch by batch
    others = set()
    for scope in (KeyScope("job", 1, 5), KeyScope("other", 0, 5), KeyScope("job:1", 0, 5)):
        others.update(scope.keys(0, 1000).to_pylist())
    assert len(set(one) | others) == 4000


@given(
    st.lists(
        st.one_of(
            st.none(),
            st.dictionaries(
                st.sampled_from(["a", "b", "UNIQ_KEY", "KEYS"]),
                st.text("xyz", min_size=1),
                max_size=4,
            ),
        ),
        max_size=12,
    ),
    st.integers(0, 5),
)
def test_uniq_key_goes_where_none_is_and_nothing_else_changes(rows, cut):
    properties = pa.array([None if r is None else list(r.items()) for r in rows], MAP)
    keys = pa.array([f"K{i}" for i in range(len(rows))], pa.string())
    sliced = min(cut, len(rows))
    got = with_uniq_keys(properties.slice(sliced), keys.slice(sliced))
    assert got.type == MAP and got.null_count == 0
    for i, (row, result) in enumerate(zip(rows[sliced:], got.to_pylist(), strict=True)):
        before = list((row or {}).items())
        if row and "UNIQ_KEY" in row:
            assert result == before
        else:
            assert result == [*before, ("UNIQ_KEY", f"K{sliced + i}")]


def test_stage_adds_a_key_to_every_row_without_one(tmp_path):
    batch = pa.RecordBatch.from_pydict(
        {
            "value": pa.array([b"a", b"b", b"c"]),
            "properties": pa.array([None, [("UNIQ_KEY", "KEEP")], [("x", "1")]], MAP),
        }
    )
    columns = WriteColumns(value="value", properties="properties")
    options = WriteOptions(path=str(tmp_path), topic="T")
    scope = KeyScope("j", 2, 99)
    path, rows = stage(iter([batch.slice(0, 2), batch.slice(2)]), columns, options, "job", scope)
    assert rows == 3 and path is not None
    staged = [p for b in read_staged(path) for p in b.column("properties").to_pylist()]
    expected = scope.keys(0, 3).to_pylist()
    assert staged == [
        [("UNIQ_KEY", expected[0])],
        [("UNIQ_KEY", "KEEP")],
        [("x", "1"), ("UNIQ_KEY", expected[2])],  # row 2 of the task, in its second batch
    ]


def test_offsets_behind_latest_from_a_progress_source():
    source = {
        "endOffset": {"A": {"0": 10, "1": 4}},
        "latestOffset": json.dumps({"A": {"0": 10, "1": 10}, "B": {"0": 3}}),  # a listener's text
    }
    assert offsets_behind_latest(source) == {
        "minOffsetsBehindLatest": "0",
        "maxOffsetsBehindLatest": "6",
        "avgOffsetsBehindLatest": "3.0",
    }
    by_topic = offsets_behind_latest(source, by_topic=True)
    assert by_topic["A"]["maxOffsetsBehindLatest"] == "6" and by_topic["B"] == {
        "minOffsetsBehindLatest": "3",
        "maxOffsetsBehindLatest": "3",
        "avgOffsetsBehindLatest": "3.0",
    }
    assert offsets_behind_latest({"endOffset": None, "latestOffset": None}) == {}


@pytest.mark.parametrize("bad", ["{not json", '["A"]'])
def test_a_malformed_progress_offset_is_named(bad):
    with pytest.raises(ConfigError, match=r"latestOffset|JSON object"):
        offsets_behind_latest({"latestOffset": bad})
