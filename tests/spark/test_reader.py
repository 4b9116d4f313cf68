"""The reader without a SparkSession: partitions() and read() against a small store, checked
against the store's own API (get_messages, query_messages, offset_by_time)."""

from __future__ import annotations

import datetime as dt
import os
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import datasource as ds

from rocketstore import ConfigError, Message, MessageStore, NotAStoreError
from rocketstore.format.message import MessageExt
from rocketstore.spark import columns, scan
from rocketstore.spark.plan import (
    CommitLogPartition,
    KeyPartition,
    QueueGroupPartition,
    QueuePartition,
    group_partitions,
    queue_members,
)
from rocketstore.spark.source import PushdownReader, RocketStoreDataSource, RocketStoreReader
from tests.spark.spark_helpers import (
    BASE_MS,
    DEFAULT_QUEUES,
    LAYOUT,
    ROUNDS,
    ident,
    partitions_as,
    read_all,
    record_batches,
    store_rows,
)


def _ids(rows):
    return sorted(ident(r) for r in rows)


def test_arrow_schema_is_what_spark_derives():
    from pyspark.sql.pandas.types import to_arrow_schema

    assert columns.arrow_schema().equals(to_arrow_schema(columns.spark_schema(), timezone="UTC"))


def test_default_read_equals_get_messages(store_path):
    rows = read_all({"path": str(store_path)})
    expected = store_rows(store_path)
    assert len(rows) == sum(n for t, n in LAYOUT.items() if not t.startswith("RMQ_")) * ROUNDS
    by_id = {ident(r): r for r in rows}
    assert sorted(by_id) == _ids(expected)
    for want in expected:
        got = by_id[ident(want)]
        assert got["commitLogOffset"] == want["commitLogOffset"]
        assert got["key"] == want["key"] and got["keys"] == want["key"].split()
        assert got["tags"] == want["tags"] and got["uniqKey"] == want["uniqKey"]
        assert got["value"] == want["value"]
        assert got["timestamp"] == dt.datetime.fromtimestamp(want["ts_ms"] / 1000, dt.UTC)
        assert got["timestampType"] == 1
        assert dict(got["properties"])["TAGS"] == want["tags"]


def test_every_column_matches_look_message(store_path):
    rows = read_all({"path": str(store_path), "topics": "Payments"})
    with MessageStore.open(store_path, read_only=True) as store:
        for row in rows[:20]:
            m = store.look_message(row["commitLogOffset"])
            assert m is not None
            assert (row["msgId"], row["size"], row["bornHost"], row["storeHost"]) == (
                m.msg_id,
                m.size,
                m.born_host,
                m.store_host,
            )
            assert (row["sysFlag"], row["flag"], row["reconsumeTimes"], row["bodyCRC"]) == (
                m.sys_flag,
                m.flag,
                m.reconsume_times,
                m.body_crc,
            )
            assert row["bornTimestamp"].timestamp() * 1000 == m.born_timestamp
            assert dict(row["properties"]) == m.properties


def test_reads_yield_arrow_batches_of_the_schema(store_path):
    source = RocketStoreDataSource({"path": str(store_path)})
    reader = source.reader(source.schema())
    batch = next(iter(reader.read(reader.partitions()[0])))
    assert isinstance(batch, pa.RecordBatch)
    assert batch.schema.equals(columns.arrow_schema())


def test_selection_topics_pattern_assign_and_system_topics(store_path):
    path = str(store_path)
    default = {r["topic"] for r in read_all({"path": path})}
    assert default == {"Orders", "Payments", "%RETRY%groupA"}  # not RMQ_SYS_TRACE_TOPIC
    assert {r["topic"] for r in read_all({"path": path, "topics": "Payments"})} == {"Payments"}
    assert {r["topic"] for r in read_all({"path": path, "topicPattern": "Pay.*"})} == {"Payments"}
    retry = read_all({"path": path, "topics": "%RETRY%groupA,RMQ_SYS_TRACE_TOPIC"})
    assert len(retry) == 2 * ROUNDS
    assigned = read_all({"path": path, "assign": '{"Orders":[1,3]}'})
    assert {(r["topic"], r["partition"]) for r in assigned} == {("Orders", 1), ("Orders", 3)}
    # A batch read's assign of queues the store does not have is a mistake, named.
    with pytest.raises(ConfigError) as bad:
        read_all({"path": path, "assign": '{"Orders":[1,99],"Ordres":[0]}'})
    assert str(bad.value) == (
        "option assign names queues the store does not have: Orders queue 99 (Orders has "
        f"queues {list(range(LAYOUT['Orders']))}); Ordres queue 0 (no such topic)"
    )
    assert read_all({"path": path, "topics": "NoSuchTopic"}) == []


def test_offsets_json_earliest_latest(store_path):
    path = str(store_path)
    rows = read_all(
        {
            "path": path,
            "topics": "Orders",
            "startingOffsets": '{"Orders":{"0":5,"1":-2,"2":-1,"3":100}}',
            "endingOffsets": '{"Orders":{"0":9,"1":3}}',
        }
    )
    got: dict[int, list[int]] = {}
    for r in rows:
        got.setdefault(r["partition"], []).append(r["offset"])
    assert got == {0: [5, 6, 7, 8], 1: [0, 1, 2]}
    assert read_all({"path": path, "startingOffsets": "latest"}) == []
    assert read_all({"path": path, "endingOffsets": "earliest"}) == []


def test_timestamps_use_offset_by_time_lower(store_path):
    path = str(store_path)
    with MessageStore.open(store_path, read_only=True) as store:
        middle = store.message_store_time("Orders", 2, 10)
        start = store.offset_by_time("Orders", 2, middle - 1, "lower")
        end = store.offset_by_time("Orders", 2, middle + 200, "lower")
    rows = read_all(
        {
            "path": path,
            "assign": '{"Orders":[2]}',
            "startingTimestamp": str(middle - 1),
            "endingTimestamp": str(middle + 200),
        }
    )
    assert [r["offset"] for r in rows] == list(range(start, end))
    assert start == 10 and end > start
    by_queue = read_all(
        {
            "path": path,
            "topics": "Orders",
            "startingOffsetsByTimestamp": f'{{"Orders":{{"2":{middle}}}}}',
            "endingOffsetsByTimestamp": f'{{"Orders":{{"2":{middle + 1}}}}}',
        }
    )
    assert [(r["partition"], r["offset"]) for r in by_queue if r["partition"] == 2] == [(2, 10)]
    assert len([r for r in by_queue if r["partition"] != 2]) == 3 * ROUNDS


def test_tags_filter_code_then_real_tag(store_path):
    rows = read_all({"path": str(store_path), "tags": "TagA || TagC"})
    assert rows and {r["tags"] for r in rows} == {"TagA", "TagC"}
    expected = [r for r in store_rows(store_path) if r["tags"] in ("TagA", "TagC")]
    assert _ids(rows) == _ids(expected)


def test_sql92_selector_in_both_modes(store_path):
    selector = "color = 'red' AND TAGS <> 'TagB'"
    expected = [r for r in store_rows(store_path) if r["color"] == "red" and r["tags"] != "TagB"]
    assert expected
    for mode in ("queue", "commitlog"):
        rows = read_all({"path": str(store_path), "sql92": selector, "mode": mode})
        assert _ids(rows) == _ids(expected), mode
        assert all(dict(r["properties"])["color"] == "red" for r in rows)


def test_sql92_option_refusals(store_path):
    with pytest.raises(ConfigError, match=r"option sql92: .*expected a literal"):
        RocketStoreDataSource({"path": str(store_path), "sql92": "color ="}).reader(None)
    with pytest.raises(ConfigError, match="give one"):
        RocketStoreDataSource(
            {"path": str(store_path), "sql92": "color = 'red'", "tags": "TagA"}
        ).reader(None)


def test_partitions_split_by_max_records_and_min_partitions(store_path):
    def plan(**options):
        source = RocketStoreDataSource({"path": str(store_path), **options})
        return source.reader(source.schema()).partitions()

    whole = plan(maxPartitionBytes="1")  # nothing packed: one partition a queue
    assert all(isinstance(p, QueuePartition) for p in whole)
    assert len(whole) == DEFAULT_QUEUES and all(p.count == ROUNDS for p in whole)
    small = plan(maxRecordsPerPartition="7")
    assert (
        max(p.count for p in small) == 7 and sum(p.count for p in small) == DEFAULT_QUEUES * ROUNDS
    )
    assert all(isinstance(p, QueuePartition) for p in small)  # no room to pack: 7 a piece
    many = plan(minPartitions="24")
    assert len(many) >= 24 and sum(p.count for p in many) == DEFAULT_QUEUES * ROUNDS
    rows = read_all({"path": str(store_path), "minPartitions": "24"})
    assert _ids(rows) == _ids(store_rows(store_path))


def _queue_order(rows: list[dict[str, Any]]) -> dict[tuple[str, int], list[int]]:
    """Each queue's offsets in the order its rows came."""
    order: dict[tuple[str, int], list[int]] = {}
    for r in rows:
        order.setdefault((r["topic"], r["partition"]), []).append(r["offset"])
    return order


def test_small_queues_are_packed_into_one_task_with_the_same_rows(store_path):
    path = str(store_path)
    source = RocketStoreDataSource({"path": path})
    parts = source.reader(source.schema()).partitions()
    # Seven queues of ~9 KiB: one task, by default (128 MiB, 4 MiB a queue opened).
    assert len(parts) == 1 and isinstance(parts[0], QueueGroupPartition)
    members = parts[0].members
    assert [(m.topic, m.queue_id) for m in members] == sorted(
        (m.topic, m.queue_id) for m in members
    )
    assert len(members) == DEFAULT_QUEUES and parts[0].count == DEFAULT_QUEUES * ROUNDS
    packed = read_all({"path": path})
    apart = read_all({"path": path, "maxPartitionBytes": "1"})
    assert packed == apart  # the same rows, in the same order
    order = _queue_order(packed)
    assert all(offsets == list(range(ROUNDS)) for offsets in order.values())
    assert _ids(packed) == _ids(store_rows(store_path))
    assert _ids(packed) == _ids(read_all({"path": path, "mode": "commitlog"}))
    # Columns, tags and a selector go through the packed members as through their tasks.
    for options in ({"columns": "topic,offset,value"}, {"tags": "TagB"}, {"sql92": "color = 'red'"},
                    {"includeBody": "false"}):  # fmt: skip
        assert read_all({"path": path, **options}) == read_all(
            {"path": path, "maxPartitionBytes": "1", **options}
        )


def test_packing_follows_max_partition_bytes_and_open_cost(store_path):
    def plan(**options):
        source = RocketStoreDataSource({"path": str(store_path), **options})
        return source.reader(source.schema()).partitions()

    # A queue counts as its ~9 KiB plus the open cost: two fit in 2.1 MB, three do not.
    pairs = plan(openCostInBytes="1000000", maxPartitionBytes="2100000")
    assert [len(queue_members([p])) for p in pairs] == [2, 2, 2, 1]
    assert [(m.topic, m.queue_id) for m in queue_members(pairs)] == [
        (m.topic, m.queue_id) for m in plan(maxPartitionBytes="1")
    ]
    # No open cost and room for about three queues' bytes.
    sizes = [m.count for m in queue_members(plan())]
    assert sum(sizes) == DEFAULT_QUEUES * ROUNDS
    assert len(plan(openCostInBytes="0", maxPartitionBytes="30000")) in (2, 3)
    # A pack never holds more than maxRecordsPerPartition entries, and minPartitions
    # is kept.
    capped = plan(maxRecordsPerPartition="70")
    assert [p.count for p in capped] == [60, 60, 60, 30]
    assert len(plan(minPartitions="5")) >= 5
    rows = read_all({"path": str(store_path), "maxRecordsPerPartition": "70"})
    assert _ids(rows) == _ids(store_rows(store_path))
    with pytest.raises(ConfigError, match="maxPartitionBytes"):
        plan(maxPartitionBytes="0")
    with pytest.raises(ConfigError, match="openCostInBytes"):
        plan(openCostInBytes="-1")


def test_group_partitions_is_spark_s_packing_rule():
    parts = [QueuePartition("T", q, 0, 10) for q in range(6)]

    def counts(sizes, **kw):
        return [len(queue_members([p])) for p in group_partitions(parts, sizes, **kw)]

    assert counts([10] * 6, max_partition_bytes=35, open_cost_bytes=0) == [3, 3]
    assert counts([10] * 6, max_partition_bytes=35, open_cost_bytes=2) == [2, 2, 2]
    assert counts([40, 1, 1, 40, 1, 1], max_partition_bytes=35, open_cost_bytes=0) == [1, 2, 1, 2]
    assert counts([1] * 6, max_partition_bytes=100, open_cost_bytes=0, max_records=20) == [2, 2, 2]
    # minPartitions bounds a pack to total / minPartitions, and never leaves fewer.
    assert counts([1] * 6, max_partition_bytes=100, open_cost_bytes=0, min_partitions=3) == [
        2,
        2,
        2,
    ]
    assert counts([1] * 6, max_partition_bytes=100, open_cost_bytes=0, min_partitions=6) == [1] * 6
    assert all(isinstance(p, QueuePartition) for p in group_partitions(parts, [10] * 6, 5, 0))


def test_include_body_false_leaves_value_null(store_path):
    rows = read_all({"path": str(store_path), "includeBody": "false", "topics": "Payments"})
    assert rows and all(r["value"] is None for r in rows)
    assert all(r["size"] > 0 for r in rows)


def test_not_a_store_names_the_path(tmp_path):
    for path in (tmp_path / "missing", tmp_path):
        source = RocketStoreDataSource({"path": str(path)})
        reader = source.reader(source.schema())
        with pytest.raises(NotAStoreError, match=r"not a store directory|not a rocketstore"):
            reader.partitions()


def test_commitlog_mode_without_queues_or_index(store_copy):
    expected = store_rows(store_copy)
    shutil.rmtree(store_copy / "consumequeue")
    shutil.rmtree(store_copy / "index")
    source = RocketStoreDataSource({"path": str(store_copy), "mode": "commitlog"})
    parts = source.reader(source.schema()).partitions()
    assert len(parts) == len(list((store_copy / "commitlog").iterdir()))
    assert all(isinstance(p, CommitLogPartition) for p in parts)
    rows = read_all({"path": str(store_copy), "mode": "commitlog"})
    assert _ids(rows) == _ids(expected)  # the PREPARED record has no queue entry: left out
    by_id = {ident(r): r for r in rows}
    assert all(by_id[ident(w)]["commitLogOffset"] == w["commitLogOffset"] for w in expected)


@pytest.mark.parametrize("mode", ["queue", "commitlog"])
def test_a_commitlog_spread_over_directories(store_copy, tmp_path, mode):
    """storePathCommitLog (and readOnlyCommitLogStorePaths) as a broker.conf has them."""
    expected = _ids(read_all({"path": str(store_copy), "mode": mode}))
    disks = [tmp_path / "disk-a", tmp_path / "disk-b", tmp_path / "old"]
    for disk in disks:
        disk.mkdir()
    for i, name in enumerate(sorted(os.listdir(store_copy / "commitlog"))):
        os.rename(store_copy / "commitlog" / name, disks[i % 3] / name)
    os.rmdir(store_copy / "commitlog")
    options = {
        "path": str(store_copy),
        "mode": mode,
        "storePathCommitLog": f"{disks[0]},{disks[1]}",
        "readOnlyCommitLogStorePaths": str(disks[2]),
    }
    assert len(list(disks[2].iterdir())) >= 1
    assert _ids(read_all(options)) == expected
    scan.close_stores()  # the store opened before the files moved is cached per process
    source = RocketStoreDataSource({"path": str(store_copy), "mode": mode})
    with pytest.raises(NotAStoreError, match=r"no commitlog/"):
        source.reader(source.schema()).partitions()


@pytest.mark.parametrize("keep_plain", [0, 50], ids=["dledger", "mixed"])
@pytest.mark.parametrize("mode", ["queue", "commitlog"])
def test_a_dledger_log_reads_in_both_modes(store_copy, mode, keep_plain):
    """A DLedger broker's store (its records framed in dledger-<id>/data, found without
    options): every message at its new offset, column-wise and record by record (a key
    filter takes the record path); a commitlog partition is a whole DLedger file."""
    from tests.dledger_helpers import frame_as_dledger

    def key(r):
        return (r["topic"], r["partition"], r["offset"], r["value"])

    expected = read_all({"path": str(store_copy), "mode": mode})
    scan.close_stores()
    framed = frame_as_dledger(store_copy, hash_slot_num=64, keep_plain=keep_plain)
    rows = read_all({"path": str(store_copy), "mode": mode})
    assert sorted(map(key, rows)) == sorted(map(key, expected))
    moved = {key(r): framed.moved[r["commitLogOffset"]] for r in expected}
    assert all(r["commitLogOffset"] == moved[key(r)] for r in rows)
    if mode == "commitlog":
        source = RocketStoreDataSource({"path": str(store_copy), "mode": mode})
        parts = partitions_as(CommitLogPartition, source.reader(source.schema()).partitions())
        assert sum(p.framed for p in parts) == len({e.pos // 8192 for e in framed.entries})
        wanted = expected[len(expected) // 2]
        found = read_all(
            {"path": str(store_copy), "mode": mode}, [ds.EqualTo(("key",), wanted["key"])]
        )
        assert wanted["value"] in [r["value"] for r in found]
    scan.close_stores()


def test_commitlog_mode_splits_inside_files_at_record_boundaries(store_path):
    options = {"path": str(store_path), "mode": "commitlog", "minPartitions": "50"}
    source = RocketStoreDataSource(options)
    parts = source.reader(source.schema()).partitions()
    assert len(parts) >= 50
    rows = read_all(options)
    assert len(rows) == len({r["commitLogOffset"] for r in rows})  # no record read twice
    assert _ids(rows) == _ids(store_rows(store_path))


def test_commitlog_mode_max_records_per_partition_cuts_at_record_starts(store_copy):
    """maxRecordsPerPartition in mode=commitlog: the planner walks the record headers and
    cuts at every N-th record start, so no partition holds more than N records and every
    piece but the last of a file holds exactly N."""
    options = {
        "path": str(store_copy), "mode": "commitlog", "maxRecordsPerPartition": "7",
        "topics": ",".join(LAYOUT),  # every record is a row (system topics too)
    }  # fmt: skip
    source = RocketStoreDataSource(options)
    reader = source.reader(source.schema())
    parts = partitions_as(CommitLogPartition, reader.partitions())
    counts = [sum(b.num_rows for b in record_batches(reader, p)) for p in parts]
    assert max(counts) == 7
    by_file: dict[int, list[int]] = {}
    for part, count in zip(parts, counts, strict=True):
        by_file.setdefault(part.file_offset, []).append(count)
    # (the store's one PREPARED record is no row: its piece shows 6)
    short = [c for cs in by_file.values() for c in cs[:-1] if c != 7]
    assert short in ([], [6])
    assert any(len(c) > 1 for c in by_file.values())
    rows = read_all(options)
    assert len(rows) == len({r["commitLogOffset"] for r in rows}) == sum(counts)
    assert len(rows) == sum(LAYOUT.values()) * ROUNDS
    # A DLedger log is read file by file: the option cannot be honoured there.
    from tests.dledger_helpers import frame_as_dledger

    scan.close_stores()
    frame_as_dledger(store_copy, hash_slot_num=64, keep_plain=False)
    with pytest.raises(ConfigError, match="maxRecordsPerPartition with mode=commitlog"):
        RocketStoreDataSource(options).reader(source.schema()).partitions()
    scan.close_stores()


def test_commitlog_mode_damage_fails_only_the_partition_it_starts_in(store_copy):
    """Each partition finds its first record by the self-located offset (no walk from the
    file's start): a damaged record fails the partition it starts in, with its position;
    the partitions after it still read their records."""
    from rocketstore.errors import CorruptDataError

    options = {"path": str(store_copy), "mode": "commitlog", "minPartitions": "20"}
    with MessageStore.open(store_copy, read_only=True) as store:
        offsets = sorted(
            m.commit_log_offset
            for t, qs in store.topics().items()
            for q in qs
            for m in store.get_messages("g", t, q, 0, 10_000).messages
        )
    victim = offsets[len(offsets) // 2]
    first_file = sorted((store_copy / "commitlog").iterdir())[0]
    file_size = first_file.stat().st_size
    assert victim < file_size  # the damage is in the first file
    with open(first_file, "r+b") as f:
        f.seek(victim + 4)
        f.write(b"\x00\x11\x22\x33")  # the magic code
    source = RocketStoreDataSource(options)
    reader = source.reader(source.schema())
    failed: list[tuple[CommitLogPartition, CorruptDataError]] = []
    read_after = 0
    for part in partitions_as(CommitLogPartition, reader.partitions()):
        try:
            rows = sum(batch.num_rows for batch in record_batches(reader, part))
        except CorruptDataError as e:
            failed.append((part, e))
            continue
        if part.file_offset == 0 and part.start > victim:
            read_after += rows
    assert len(failed) == 1
    part, error = failed[0]
    assert part.file_offset == 0 and part.start <= victim < part.end
    assert str(victim) in str(error)
    assert read_after > 0


def test_commitlog_mode_options_as_record_filters(store_path):
    path = str(store_path)
    with MessageStore.open(store_path, read_only=True) as store:
        ts = store.message_store_time("Orders", 1, 12)
    common = {
        "assign": '{"Orders":[1],"Payments":[0]}',
        "tags": "TagB",
        "startingOffsets": '{"Orders":{"1":3}}',
        "endingOffsetsByTimestamp": f'{{"Orders":{{"1":{ts}}}}}',
        "minPartitions": "9",
    }
    queue_rows = read_all({"path": path, **common})
    log_rows = read_all({"path": path, "mode": "commitlog", **common})
    assert queue_rows and _ids(log_rows) == _ids(queue_rows)


def test_live_writer_appends_are_seen(store_copy):
    before = len(read_all({"path": str(store_copy), "topics": "Payments"}))
    with MessageStore.open(store_copy) as store:
        store.put(Message(topic="Payments", body=b"late", queue_id=1), BASE_MS + 10**7)
    after = read_all({"path": str(store_copy), "topics": "Payments"})  # same cached store
    assert len(after) == before + 1


# --- filter pushdown (the Filter objects Spark would pass) -------------------------------


def _ts(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC)


def _check_pushdown(path: Path, filters, predicate, options=None, *, all_claimed=True):
    options = {"path": str(path), **(options or {})}
    source = RocketStoreDataSource(options)
    reader = source.reader(source.schema())
    assert isinstance(reader, PushdownReader)
    rest = list(reader.pushFilters(list(filters)))
    if all_claimed:
        assert rest == []
    pushed_rows = [r for r in read_all(options, list(filters)) if predicate(r)]
    plain_rows = [r for r in read_all(options) if predicate(r)]
    assert _ids(pushed_rows) == _ids(plain_rows)
    return pushed_rows


@pytest.mark.parametrize("mode", ["queue", "commitlog"])
def test_pushdown_topic_partition_offset(store_path, mode):
    filters = [
        ds.In(("topic",), ("Orders", "Payments", "Nope")),
        ds.EqualTo(("partition",), 1),
        ds.GreaterThan(("offset",), 4),
        ds.LessThanOrEqual(("offset",), 11),
    ]
    rows = _check_pushdown(
        store_path,
        filters,
        lambda r: r["topic"] in ("Orders", "Payments") and r["partition"] == 1
        and 4 < r["offset"] <= 11,
        {"mode": mode},
    )  # fmt: skip
    assert len(rows) == 2 * 7


def test_pushdown_narrows_the_plan(store_path):
    source = RocketStoreDataSource({"path": str(store_path)})
    reader = source.reader(source.schema())
    reader.pushFilters([ds.EqualTo(("topic",), "Orders"), ds.In(("partition",), (0, 3))])
    reader.pushFilters([ds.GreaterThanOrEqual(("offset",), 20)])
    parts = queue_members(reader.partitions())
    assert [(p.topic, p.queue_id, p.start, p.end) for p in parts] == [
        ("Orders", 0, 20, ROUNDS),
        ("Orders", 3, 20, ROUNDS),
    ]


@pytest.mark.parametrize("mode", ["queue", "commitlog"])
def test_pushdown_timestamp_range(store_path, mode):
    with MessageStore.open(store_path, read_only=True) as store:
        low = store.message_store_time("Orders", 0, 7)
        high = store.message_store_time("Payments", 1, 20)
    low_dt, high_dt = _ts(low), _ts(high)
    rows = _check_pushdown(
        store_path,
        [ds.GreaterThanOrEqual(("timestamp",), low_dt), ds.LessThan(("timestamp",), high_dt)],
        lambda r: low_dt <= r["timestamp"] < high_dt,
        {"mode": mode},
    )
    assert len(rows) > 10
    between = dt.datetime.fromtimestamp(low / 1000 + 0.0005, dt.UTC)  # sub-ms literal
    _check_pushdown(
        store_path,
        [ds.GreaterThan(("timestamp",), between), ds.EqualTo(("topic",), "Orders")],
        lambda r: r["timestamp"] > between and r["topic"] == "Orders",
        {"mode": mode},
    )


@pytest.mark.parametrize("mode", ["queue", "commitlog"])
def test_pushdown_key_and_uniq_key(store_path, mode):
    opts = {"mode": mode}
    one = _check_pushdown(
        store_path, [ds.EqualTo(("key",), "Orders-2-7")], lambda r: r["key"] == "Orders-2-7", opts
    )
    assert [(r["partition"], r["offset"]) for r in one] == [(2, 7)]
    shared = ("Orders-1-10 shared", "Payments-0-3", "nothing")
    many = _check_pushdown(
        store_path, [ds.In(("key",), shared)], lambda r: r["key"] in shared, opts
    )
    assert len(many) == 2
    # `key = 'shared'` matches no row: KEYS as stored is never just the shared token.
    assert (
        _check_pushdown(store_path, [ds.EqualTo(("key",), "shared")], lambda r: False, opts) == []
    )
    uniq = _check_pushdown(
        store_path,
        [ds.EqualTo(("uniqKey",), "UPayments010004"), ds.EqualTo(("topic",), "Payments")],
        lambda r: r["uniqKey"] == "UPayments010004",
        opts,
    )
    assert [(r["partition"], r["offset"]) for r in uniq] == [(1, 4)]


def test_key_pushdown_goes_through_the_index(store_path):
    source = RocketStoreDataSource({"path": str(store_path)})
    reader = source.reader(source.schema())
    reader.pushFilters([ds.EqualTo(("key",), "Orders-2-7"), ds.LessThan(("offset",), 5)])
    parts = partitions_as(KeyPartition, reader.partitions())
    assert parts
    # the first also looks for records of other topics dispatched into the planned queues
    lookups = [p.dispatched for p in parts if p.dispatched is not None]
    assert len(lookups) == 1 and set(lookups[0].sources) == set(LAYOUT)
    assert [r for p in parts for b in record_batches(reader, p) for r in b.to_pylist()] == []


def test_key_pushdown_respects_options_and_tags(store_path):
    key = "Orders-1-4"  # TagB
    for options, count in (
        ({}, 1),
        ({"tags": "TagA"}, 0),
        ({"startingOffsets": '{"Orders":{"1":5}}'}, 0),
        ({"topics": "Payments"}, 0),
    ):
        rows = _check_pushdown(
            store_path, [ds.EqualTo(("key",), key)], lambda r: r["key"] == key, options
        )
        assert len(rows) == count, options


def test_key_filters_go_back_to_spark_without_an_index(store_copy):
    shutil.rmtree(store_copy / "index")
    source = RocketStoreDataSource({"path": str(store_copy)})
    reader = source.reader(source.schema())
    key = ds.EqualTo(("key",), "Orders-2-7")
    assert list(reader.pushFilters([key])) == [key]


def test_unsupported_filters_are_returned(store_path):
    filters = [
        ds.StringStartsWith(("topic",), "Ord"),
        ds.Not(ds.EqualTo(("partition",), 1)),
        ds.IsNotNull(("key",)),
        ds.EqualTo(("tags",), "TagA"),
        ds.In(("offset",), (3, 9)),
    ]
    source = RocketStoreDataSource({"path": str(store_path)})
    reader = source.reader(source.schema())
    rest = list(reader.pushFilters(filters))
    assert len(rest) == len(filters) and all(a is b for a, b in zip(rest, filters, strict=True))
    _check_pushdown(store_path, [filters[-1]], lambda r: r["offset"] in (3, 9), all_claimed=False)


def test_pushdown_option_false_gives_the_plain_reader(store_path):
    source = RocketStoreDataSource({"path": str(store_path), "pushdown": "false"})
    reader = source.reader(source.schema())
    assert type(reader) is RocketStoreReader


COMMITLOG_OPTION_SETS = [
    {},
    {"tags": "TagA || TagC"},
    {"topics": "Orders,%RETRY%groupA"},
    {"topicPattern": "Pay.*"},
    {"assign": '{"Orders": [1, 3]}'},
    {
        "startingOffsets": '{"Orders": {"0": 5, "2": 12}}',
        "endingOffsets": '{"Orders": {"0": 20}}',
    },
    {"startingTimestamp": str(BASE_MS + 1_000), "endingTimestamp": str(BASE_MS + 2_000)},
    {"includeBody": "false", "minPartitions": "7"},
]


@pytest.mark.parametrize("options", COMMITLOG_OPTION_SETS)
def test_commitlog_mode_column_wise_equals_record_by_record(
    store_path, options, monkeypatch: pytest.MonkeyPatch
):
    """The column-wise CommitLog read gives the rows of the per-record reference path,
    in the same order, for every kind of option it applies itself."""
    from rocketstore.spark import scan

    common = {"path": str(store_path), "mode": "commitlog", **options}
    fast = read_all(common)
    monkeypatch.setattr(scan, "decode_records", lambda *args: None)  # every chunk declined
    slow = read_all(common)
    assert fast == slow
    assert fast or options.get("startingOffsets")  # every set but one selects rows


def test_commitlog_mode_column_wise_with_records_it_declines(tmp_path, monkeypatch):
    """IPv6 hosts, a repeated property name, a delayed and a rolled-back record among
    ordinary ones: the chunks holding them go record by record, the others column-wise,
    and the rows are the reference's."""
    from rocketstore.format import sysflag
    from rocketstore.spark import commitlog_runs, scan

    root = tmp_path / "store"
    with MessageStore.open(root) as store:
        for i in range(300):
            msg = Message("Mixed", f"m{i}".encode(), queue_id=i % 2,
                          properties={"KEYS": f"k{i}", "TAGS": "T"})  # fmt: skip
            if i == 40:
                msg.born_host = "[2001:db8::1]:9876"
            if i == 80:
                msg.properties["DELAY"] = "2"
            if i == 120:
                msg.sys_flag = sysflag.TRANSACTION_ROLLBACK_TYPE
            assert store.put(msg, BASE_MS + i).ok
    monkeypatch.setattr(commitlog_runs, "COMMITLOG_CHUNK_BYTES", 4096)  # many runs
    options = {"path": str(root), "mode": "commitlog", "topics": "Mixed"}
    fast = read_all(options)
    monkeypatch.setattr(scan, "decode_records", lambda *args: None)
    assert fast == read_all(options)
    assert len(fast) == 298  # not the delayed one (it is in SCHEDULE_TOPIC) nor the rollback


def test_uniq_key_pushdown_finds_every_match(tmp_path):
    """40 messages share one UNIQ_KEY (a producer resending): the claimed filter gives all
    of them, not the 32 an index query returns by default."""
    path = tmp_path / "s"
    with MessageStore.open(path) as store:
        for i in range(40):
            props = {"UNIQ_KEY": "SAME"}
            assert store.put(Message("T", b"x%d" % i, i % 2, properties=props)).ok
        store.wait_dispatched()
        assert len(store.query_by_unique_key("T", "SAME")) == 32  # RocketMQ's default
    rows = _check_pushdown(
        path, [ds.EqualTo(("uniqKey",), "SAME")], lambda r: r["uniqKey"] == "SAME"
    )
    assert len(rows) == 40


@pytest.mark.parametrize("tags", [None, "TagA || TagB || Tág"])
def test_a_light_queue_reads_as_its_own_rows(tmp_path, tags):
    """An LMQ queue's units point at records of other topics: each row is the queue's
    (topic %LMQ%a, its queue id, its offset), column-wise and (with a tag filter) record
    by record, and pushed topic and partition filters select the queue's rows."""
    from tests.unit.rebuild.rebuild_helpers import build_lmq_store

    root = tmp_path / "store"
    build_lmq_store(root, 60)
    options = {"path": str(root), "topics": "%LMQ%a", **({"tags": tags} if tags else {})}
    rows = read_all(options)
    messages: list[MessageExt] = []
    with MessageStore.open(root, read_only=True) as store:
        while len(messages) < store.max_offset("%LMQ%a", 0):
            messages += store.get_messages("g", "%LMQ%a", 0, len(messages), 32).messages
    expected = [m.commit_log_offset for m in messages]
    assert {m.topic for m in messages} == {"Orders", "Payments"}
    assert [r["commitLogOffset"] for r in rows] == expected
    assert [(r["topic"], r["partition"]) for r in rows] == [("%LMQ%a", 0)] * len(expected)
    assert [r["offset"] for r in rows] == list(range(len(expected)))
    pushed = read_all(options, [ds.EqualTo(("topic",), "%LMQ%a"), ds.EqualTo(("partition",), 0)])
    assert [r["commitLogOffset"] for r in pushed] == expected
    scan.close_stores()


@pytest.mark.parametrize("tags", [None, "TagA || TagB || Tág"])
@pytest.mark.parametrize("light_topic", ["%LMQ%a", "PlainQ"])
def test_key_pushdown_on_a_light_queue_finds_its_rows(tmp_path, tags, light_topic):
    """A light queue's rows are records of other topics, which the index files under
    those topics: pushed ``key`` / ``uniqKey`` filters on the light queue must still find
    them (an %LMQ% queue is scanned and every row checked; for a queue with a plain name
    the index is also searched under the store's other topics), alongside index lookups
    for the ordinary topics of the same read."""
    from tests.unit.rebuild.rebuild_helpers import build_lmq_store

    root = tmp_path / "store"
    build_lmq_store(root, 60)
    topics = f"{light_topic},Orders"
    options = {"path": str(root), "topics": topics, **({"tags": tags} if tags else {})}
    rows = read_all(options)
    light = [
        r for r in rows if r["topic"] == light_topic and r["uniqKey"] and (r["key"] or "").strip()
    ]
    assert len(light) > 3
    for row in light[:4]:
        for column, make in (("key", ds.EqualTo), ("uniqKey", ds.EqualTo), ("key", ds.In)):
            value = row[column] if make is ds.EqualTo else (row[column], "no-such-key")
            pushed = read_all(options, [make((column,), value)])
            wanted = {value} if isinstance(value, str) else set(value)
            expected = [r for r in rows if r[column] in wanted]
            assert light_topic in {r["topic"] for r in expected}
            assert sorted(map(ident, pushed)) == sorted(map(ident, expected)), (column, value)
    scan.close_stores()


def _by_queue(rows):
    """Rows in (topic, partition, offset) order, maps as sorted pairs (comparable)."""
    return sorted(({**r, "properties": sorted(r["properties"])} for r in rows), key=ident)


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"topics": "%LMQ%a,%LMQ%c,PlainQ"},
        {"topics": "%LMQ%b,Orders", "tags": "TagA || Tág"},
        {"topics": "%LMQ%a", "startingOffsets": '{"%LMQ%a":{"0":5}}',
         "endingOffsets": '{"%LMQ%a":{"0":17}}'},
        {"topicPattern": "PlainQ", "startingTimestamp": str(BASE_MS + 11 * 60)},
    ],
)  # fmt: skip
def test_commitlog_mode_reads_the_light_queues_as_queue_mode_does(tmp_path, monkeypatch, options):
    """A multi-dispatch record's units in other queues (%LMQ% ones and a plain name) are
    rows in mode=queue; mode=commitlog sees the record once and makes the same rows from
    its two properties: column-wise, record by record, and with pushed filters."""
    from tests.unit.rebuild.rebuild_helpers import build_lmq_store

    root = tmp_path / "store"
    build_lmq_store(root, 120)
    base = {"path": str(root), **options}
    queue = _by_queue(read_all(base))
    light = [r for r in queue if r["topic"] not in ("Orders", "Payments")]
    assert light and len({r["commitLogOffset"] for r in light}) > 5
    commitlog = {**base, "mode": "commitlog"}
    assert _by_queue(read_all(commitlog)) == queue
    queues = sorted({(r["topic"], r["partition"]) for r in light})
    topic, partition = queues[-1]
    filters = [ds.EqualTo(("topic",), topic), ds.EqualTo(("partition",), partition)]
    wanted = [r for r in queue if (r["topic"], r["partition"]) == (topic, partition)]
    assert _by_queue(read_all(commitlog, filters)) == wanted
    monkeypatch.setattr(scan, "decode_records", lambda *args: None)
    assert _by_queue(read_all(commitlog)) == queue
    scan.close_stores()
