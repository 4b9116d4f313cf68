"""Reading only some columns (the ``columns`` option, or a schema given to ``load()``),
the ``headers`` column, and queue reads among many interleaved queues."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.errors import ConfigError
from rocketstore.format import properties as props
from rocketstore.spark import scan
from rocketstore.spark.columns import COLUMN_NAMES, spark_schema
from rocketstore.spark.options import parse_options
from rocketstore.spark.source import RocketStoreDataSource, with_schema
from tests.spark.spark_helpers import ident, read_all, store_rows
from tests.spark.test_arrow_records import _decode, _encode, _region


@pytest.mark.parametrize("mode", ["queue", "commitlog"])
@pytest.mark.parametrize(
    "chosen",
    [
        "topic,offset",
        "value",
        "offset,key,tags,headers",
        "uniqKey,properties,partition",
        "msgId,bornHost,storeHost,size,bodyCRC,flag,sysFlag,reconsumeTimes,bornTimestamp",
    ],
)
def test_selected_columns_are_the_full_rows_projected(store_path, mode, chosen):
    names = chosen.split(",")
    full = read_all({"path": str(store_path), "mode": mode})
    got = read_all({"path": str(store_path), "mode": mode, "columns": chosen})
    assert got and all(list(row) == names for row in got)
    # Both reads go through the same partitions in the same order.
    assert got == [{n: row[n] for n in names} for row in full]


@pytest.mark.parametrize("mode", ["queue", "commitlog"])
def test_selected_columns_with_filters_and_tags(store_path, mode):
    """The filter columns are decoded for the scan even when not selected."""
    options = {"path": str(store_path), "mode": mode, "tags": "TagB", "topics": "Orders"}
    full = read_all(options)
    got = read_all({**options, "columns": "offset"})
    assert sorted(r["offset"] for r in got) == sorted(r["offset"] for r in full)
    keyed = read_all({**options, "keys": '["Orders-2-7", "Orders-1-4"]', "columns": "value"})
    assert len(keyed) == 2 and all(list(r) == ["value"] for r in keyed)


def test_headers_are_the_user_properties(store_path):
    rows = read_all({"path": str(store_path), "columns": "properties,headers"})
    assert any(r["headers"] for r in rows)  # "color" is a user property of some messages
    for row in rows:
        assert dict(row["headers"]) == props.user_properties(dict(row["properties"]))
        assert "KEYS" not in dict(row["headers"])


def test_the_columns_option_names_what_is_wrong():
    for value, message in (
        ("topic,nope", r"unknown column\(s\) \['nope'\]"),
        ("topic,topic", r"column\(s\) \['topic'\] more than once"),
        (" , ", "names no column"),
    ):
        with pytest.raises(ConfigError, match=message):
            parse_options({"path": "/s", "columns": value})


def test_a_schema_given_to_load_selects_columns():
    from pyspark.sql import types as sql_types

    base = parse_options({"path": "/s"})
    schema = sql_types.StructType(
        [
            sql_types.StructField("offset", sql_types.LongType()),
            sql_types.StructField("key", sql_types.StringType()),
        ]
    )
    assert with_schema(base, schema).columns == ("offset", "key")
    assert with_schema(base, spark_schema()).columns is None
    wrong = sql_types.StructType([sql_types.StructField("offset", sql_types.IntegerType())])
    with pytest.raises(ConfigError, match="'offset' as int; the source reads it as bigint"):
        with_schema(base, wrong)
    with pytest.raises(ConfigError, match="unknown column"):
        with_schema(
            base, sql_types.StructType([sql_types.StructField("nope", sql_types.StringType())])
        )
    chosen = parse_options({"path": "/s", "columns": "offset"})
    with pytest.raises(ConfigError, match="give one of them"):
        with_schema(chosen, schema)
    source = RocketStoreDataSource({"path": "/s", "columns": "key,offset"})
    assert [f.name for f in source.schema().fields] == ["key", "offset"]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.dictionaries(
            st.sampled_from(["KEYS", "TAGS", "UNIQ_KEY", "color", "WAIT", "x"]),
            st.text(alphabet="ab c", min_size=1, max_size=4).filter(str.strip),
            max_size=4,
        ),
        min_size=1,
        max_size=6,
    ),
    st.sets(st.sampled_from(COLUMN_NAMES), min_size=1),
)
def test_decoding_some_columns_gives_those_of_the_full_decode(properties, chosen):
    records = [
        _encode("T", b"body%d" % i, "\x02".join(f"{k}\x01{v}" for k, v in p.items()))
        for i, p in enumerate(properties)
    ]
    region, positions = _region(records)
    full = _decode(region, positions)
    assert full is not None
    sizes = np.array([len(r) for r in records], dtype=np.int64)
    from rocketstore.spark.arrow_records import decode_records

    part = decode_records(
        region, positions, positions + 4096, sizes, np.arange(len(records)) + 10, True,
        frozenset(chosen),
    )  # fmt: skip
    assert part is not None
    assert part.schema.names == [n for n in COLUMN_NAMES if n in chosen]
    for name in part.schema.names:
        assert part.column(name).equals(full.column(name)), name


def test_queue_reads_among_many_interleaved_queues(tmp_path: Path):
    """64 queues written round robin: each queue's records fill 1/64 of the CommitLog
    range they span; they are decoded where they lie (nothing copied first), with the same
    rows, and nothing of the mapping outlives the read (closing the store unmaps it)."""
    root = tmp_path / "store"
    with MessageStore.open(root, StoreConfig(mapped_file_size_commit_log=1 << 20)) as store:
        for i in range(40):
            batch = [
                Message("Wide", b"x" * (i % 7 + 1), queue_id=q, properties={"KEYS": f"k{q}-{i}"})
                for q in range(64)
            ]
            for message in batch:
                assert store.put(message).ok
        store.wait_dispatched()
    rows = read_all({"path": str(root), "topics": "Wide"})
    want = store_rows(root, [("Wide", q) for q in range(64)])
    assert sorted(map(ident, rows)) == sorted(map(ident, want))
    by_id = {ident(r): r for r in rows}
    for w in want:
        assert by_id[ident(w)]["value"] == w["value"] and by_id[ident(w)]["key"] == w["key"]
    scan.close_stores()  # BufferError here if a batch still pointed into a mapped file


def test_columns_and_headers_through_spark(spark, store_path):
    df = (
        spark.read.format("rocketstore")
        .option("columns", "topic,offset,headers")
        .load(str(store_path))
    )
    assert df.columns == ["topic", "offset", "headers"]
    rows = df.collect()
    assert len(rows) == len(store_rows(store_path))
    assert any(r["headers"] == {"color": "red"} for r in rows)
    typed = (
        spark.read.format("rocketstore").schema("offset bigint, value binary").load(str(store_path))
    )
    assert typed.columns == ["offset", "value"] and typed.count() == len(rows)


def test_the_sink_takes_headers_where_there_is_no_properties_column():
    from rocketstore.spark.write_options import WriteOptions, check_columns

    options = WriteOptions(path="/s", topic="T")
    kafka_like = check_columns([("value", "binary"), ("headers", "map<string,string>")], options)
    assert kafka_like.properties == "headers"
    read_back = check_columns(
        [("value", "binary"), ("properties", "map<string,string>"),
         ("headers", "map<string,string>")],
        options,
    )  # fmt: skip
    assert read_back.properties == "properties"
