"""The sink without Spark: options and columns, queue routing, staging in the tasks, and
the driver's commit through the store (batch and streaming, replays, interrupted commits)."""

from __future__ import annotations

import os
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketstore import ConfigError, GetStatus, Message, MessageStore, StoreLockedError
from rocketstore.format.javahash import java_string_hash
from rocketstore.spark import sink_log
from rocketstore.spark.commit import commit_staged
from rocketstore.spark.routing import QueueChooser, hash_queue, queue_count
from rocketstore.spark.staging import STAGING_DIR, new_job_id, read_staged, remove_job, stage
from rocketstore.spark.write_options import check_columns, parse_write_options

MAP = pa.map_(pa.string(), pa.string())


def _options(path, **extra):
    return parse_write_options({"path": str(path), **extra}, streaming=False)


def _stage(path, batch: pa.RecordBatch, job=None, **extra):
    options = _options(path, **extra)
    fields = [(f.name, _simple(f.type)) for f in batch.schema]
    columns = check_columns(fields, options)
    job = job or new_job_id()
    staged, rows = stage(iter([batch]), columns, options, job)
    return job, staged, rows


def _simple(kind: pa.DataType) -> str:
    names = {pa.string(): "string", pa.binary(): "binary", pa.int32(): "int", pa.int64(): "bigint"}
    if kind in names:
        return names[kind]
    if isinstance(kind, pa.MapType):
        return "map<string,string>"
    return "array<string>"


def _messages(path):
    out: list[Any] = []
    if not (path / "commitlog").is_dir():
        return out  # the store was opened as a writer but nothing was appended
    with MessageStore.open(path, read_only=True) as store:
        for topic, qids in store.topics().items():
            for qid in qids:
                offset = store.min_offset(topic, qid)
                while True:
                    got = store.get_messages("g", topic, qid, offset, 32)
                    if got.status is not GetStatus.FOUND:
                        break
                    out.extend(got.messages)
                    offset = got.next_begin_offset
    return sorted(out, key=lambda m: m.commit_log_offset)


# --- options and columns ----------------------------------------------------------------


def test_write_options_name_the_bad_value(tmp_path):
    with pytest.raises(ConfigError, match="option path is required"):
        parse_write_options({}, streaming=False)
    with pytest.raises(ConfigError, match=r"queueNums='x' must be an integer"):
        _options(tmp_path, queueNums="x")
    with pytest.raises(ConfigError, match=r"queueNums='0' must be in"):
        _options(tmp_path, queueNums="0")
    with pytest.raises(ConfigError, match=r"topic 'bad topic!' is not a valid topic name"):
        _options(tmp_path, topic="bad topic!")
    for system in ("SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "OFFSET_MOVED_EVENT"):
        with pytest.raises(ConfigError, match=f"topic '{system}' is a system topic no producer"):
            _options(tmp_path, topic=system)
    assert _options(tmp_path, topic="RMQ_SYS_TRACE_TOPIC").topic == "RMQ_SYS_TRACE_TOPIC"
    with pytest.raises(ConfigError, match=r"unknown write option\(s\) \['tpoic'\]"):
        _options(tmp_path, tpoic="A")
    with pytest.raises(ConfigError, match="give option checkpointLocation"):
        parse_write_options({"path": "/s"}, streaming=True)
    assert parse_write_options({"path": "/s", "checkpointLocation": "/c"}, streaming=True).sink_id


def test_columns_roles_types_and_unknown_names(tmp_path):
    options = _options(tmp_path)
    columns = check_columns(
        [("VALUE", "string"), ("topic", "string"), ("keys", "array<string>"), ("offset", "bigint")],
        options,
    )
    assert (columns.value, columns.keys, columns.key) == ("VALUE", "keys", None)
    with pytest.raises(ConfigError, match="needs a 'value' column"):
        check_columns([("topic", "string")], options)
    with pytest.raises(ConfigError, match="needs a 'topic' column or option topic"):
        check_columns([("value", "binary")], options)
    with pytest.raises(ConfigError, match=r"column 'value' has type int"):
        check_columns([("value", "int"), ("topic", "string")], options)
    with pytest.raises(ConfigError, match=r"unknown column\(s\) \['tag'\]"):
        check_columns([("value", "binary"), ("topic", "string"), ("tag", "string")], options)
    # The option wins over the column, as in Kafka's sink.
    fields = [("value", "binary"), ("topic", "string")]
    with_option = check_columns(fields, _options(tmp_path, topic="T"))
    assert with_option.topic is None


# --- routing ----------------------------------------------------------------------------


@given(st.text(min_size=1), st.integers(1, 64))
def test_hash_queue_is_rocketmq_select_by_hash(keys, count):
    # SelectMessageQueueByHash: value = hashCode % size (Java remainder); abs if negative.
    h = java_string_hash(keys)
    java_remainder = abs(h) % count * (1 if h >= 0 else -1)
    assert hash_queue(keys, count) == abs(java_remainder)


def test_hash_queue_golden_values():
    # Well-known Java values: "hello".hashCode() == 99162322 and
    # "polygenelubricants".hashCode() == Integer.MIN_VALUE.
    assert hash_queue("hello", 4) == 99162322 % 4
    assert hash_queue("polygenelubricants", 3) == 2**31 % 3  # no overflow surprise
    assert hash_queue("a", 3) == 97 % 3


def test_queue_count_and_round_robin():
    assert queue_count(None, 4, None) == 4
    assert queue_count([0, 2], 4, None) == 4  # a topic whose queue 1 and 3 are still empty
    assert queue_count([0, 7], 4, None) == 8
    assert queue_count([0, 7], 4, 2) == 2  # the broker's writeQueueNums rules
    chooser = QueueChooser({"A": [0, 1, 2]}, {"A": 10}, 4)
    assert [chooser.choose("A", None, None) for _ in range(5)] == [2, 3, 0, 1, 2]
    assert [chooser.choose("B", None, None) for _ in range(3)] == [0, 1, 2]
    assert chooser.choose("A", 9, "k") == 9
    assert chooser.choose("A", None, "k") == hash_queue("k", 4)


# --- staging ----------------------------------------------------------------------------


def test_stage_normalizes_columns(tmp_path):
    batch = pa.RecordBatch.from_pydict(
        {
            "value": ["a", "bb"],
            "topic": ["T1", "T2"],
            "key": ["k1", None],
            "keys": [["x", "y"], ["p", "q"]],
            "tags": [None, "TagB"],
            "properties": pa.array([[("c", "red")], None], MAP),
            "queueId": pa.array([None, 3], pa.int64()),
        }
    )
    job, staged, rows = _stage(tmp_path, batch)
    assert rows == 2 and staged and staged.startswith(str(tmp_path / STAGING_DIR / job))
    (back,) = list(read_staged(staged))
    assert back.to_pylist() == [
        {"topic": "T1", "queue_id": None, "keys": "k1", "tags": None,
         "properties": [("c", "red")], "body": b"a"},
        {"topic": "T2", "queue_id": 3, "keys": "p q", "tags": "TagB",
         "properties": None, "body": b"bb"},
    ]  # fmt: skip
    remove_job(str(tmp_path), job)
    assert not (tmp_path / STAGING_DIR).exists()


@pytest.mark.parametrize(
    ("columns", "extra", "needle"),
    [
        ({"value": pa.array([b"a", None])}, {"topic": "T"}, "column 'value' is null in row 1"),
        ({"value": [b"a"], "topic": pa.array([None], pa.string())}, {}, "'topic' is null in row 0"),
        ({"value": [b"a"], "topic": ["no space"]}, {}, "topic 'no space' is not a valid"),
        ({"value": [b"a"], "queueId": [-1]}, {"topic": "T"}, "'queueId' is -1 in row 0"),
        ({"value": [b"x" * (4 * 1024 * 1024 + 1)]}, {"topic": "T"}, "max message size"),
    ],
)
def test_bad_rows_fail_the_task_and_leave_nothing(tmp_path, columns, extra, needle):
    with pytest.raises(ConfigError, match=needle):
        _stage(tmp_path, pa.RecordBatch.from_pydict(columns), **extra)
    staged = tmp_path / STAGING_DIR
    assert not staged.exists() or [p for p in staged.rglob("*") if p.is_file()] == []


def _props(*rows):
    return pa.array(list(rows), MAP)


@pytest.mark.parametrize(
    ("columns", "needle"),
    [
        # A property the record's text cannot hold would be dropped or split silently.
        ({"properties": _props([("a", "1")], [("b", None)])}, "row 1: property 'b' is null"),
        ({"properties": _props([("a", "")])}, "row 0: property 'a' is ''"),
        ({"properties": _props(None, [("", "x")])}, "row 1: a property name is ''"),
        ({"properties": _props([("a\x01b", "x")])}, r"row 0: a property name is 'a\\x01b'"),
        ({"properties": _props([("a", "x\x02c\x01d")])}, r"property 'a' is 'x\\x02c"),
        ({"key": ["ok", "k\x02"]}, r"column 'key' in row 1 is 'k\\x02'"),
        ({"keys": [["a"], ["b\x01"]]}, r"column 'keys' in row 1"),
        ({"tags": ["T\x01g"]}, r"column 'tags' in row 0 is 'T\\x01g'"),
    ],
)
def test_properties_the_store_cannot_keep_fail_the_task(tmp_path, columns, needle):
    rows = len(next(iter(columns.values())))
    batch = pa.RecordBatch.from_pydict({"value": [b"v"] * rows, **columns})
    with pytest.raises(ConfigError, match=needle):
        _stage(tmp_path, batch, topic="T")
    staged = tmp_path / STAGING_DIR
    assert not staged.exists() or [p for p in staged.rglob("*") if p.is_file()] == []


def test_keys_list_nulls_and_empty_text_are_no_keys(tmp_path):
    """A null element of ``keys`` is left out (as Spark's array_join), not the whole
    KEYS; an empty ``key`` or ``tags`` is no KEYS or TAGS (a reader sees none)."""
    batch = pa.RecordBatch.from_pydict(
        {
            "value": [b"a", b"b", b"c"],
            "key": [None, "", None],
            "keys": pa.array([["x", None, "y"], ["p"], None], pa.list_(pa.string())),
            "tags": ["", "t", None],
        }
    )
    job, staged, _rows = _stage(tmp_path, batch, topic="T")
    (back,) = list(read_staged(staged))
    assert back.column("keys").to_pylist() == ["x y", "p", None]
    assert back.column("tags").to_pylist() == [None, "t", None]
    commit_staged(str(tmp_path), [staged], 4)
    assert [(m.keys, m.tags) for m in _messages(tmp_path)] == [
        ("x y", None),
        ("p", "t"),
        (None, None),
    ]
    remove_job(str(tmp_path), job)


def test_empty_task_stages_no_file(tmp_path):
    options = _options(tmp_path, topic="T")
    columns = check_columns([("value", "binary")], options)
    assert stage(iter([]), columns, options, new_job_id()) == (None, 0)


# --- the commit -------------------------------------------------------------------------


def _rows(n: int, topic="Out", start=0) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "value": [f"m{i}".encode() for i in range(start, start + n)],
            "topic": [topic] * n,
            "key": [f"key-{i}" if i % 2 else None for i in range(start, start + n)],
            "tags": ["TagA"] * n,
            "properties": pa.array([[("seq", str(i))] for i in range(start, start + n)], MAP),
        }
    )


def test_commit_appends_field_by_field_and_removes_staging(tmp_path):
    store = tmp_path / "store"
    job, first, _ = _stage(store, _rows(3))
    _, second, _ = _stage(store, _rows(2, start=3), job=job)
    result = commit_staged(str(store), [first, second], 4)
    remove_job(str(store), job)
    assert result.appended == 5
    got = _messages(store)
    assert [m.body for m in got] == [b"m0", b"m1", b"m2", b"m3", b"m4"]
    for i, m in enumerate(got):
        assert m.topic == "Out" and m.tags == "TagA" and m.properties["seq"] == str(i)
        assert m.keys == (f"key-{i}" if i % 2 else None)
        if m.keys:
            assert m.queue_id == hash_queue(m.keys, 4)
    assert not (store / STAGING_DIR).exists()


def test_commit_refuses_a_held_store_and_appends_nothing(tmp_path):
    store = tmp_path / "store"
    _, staged, _ = _stage(store, _rows(2))
    with MessageStore.open(store) as holder:
        with pytest.raises(StoreLockedError, match="another process holds its writer lock"):
            commit_staged(str(store), [staged], 4)
        assert holder.topics() == {}


def test_queue_ids_a_broker_refuses_fail_the_commit(tmp_path):
    """A topic in the broker's table (config/topics.json) has the queues below its write
    and read counts; a broker refuses a send to any other queue id, whose messages its
    consumers would never read: the job names the topic and the id and appends nothing.
    Topics the table lacks take any queue id."""
    import json

    store = tmp_path / "store"
    (store / "config").mkdir(parents=True)
    table = {"Known": {"topicName": "Known", "readQueueNums": 6, "writeQueueNums": 4, "perm": 6}}
    (store / "config" / "topics.json").write_text(json.dumps({"topicConfigTable": table}))

    def batch(topic, queue_ids):
        return pa.RecordBatch.from_pydict(
            {"value": [b"v"] * len(queue_ids), "topic": [topic] * len(queue_ids),
             "queueId": pa.array(queue_ids, pa.int32())}
        )  # fmt: skip

    _, staged, _ = _stage(store, batch("Known", [0, 5, 6]))
    with pytest.raises(ConfigError, match=r"queueId is 6 for topic 'Known'.*queues 0\.\.5"):
        commit_staged(str(store), [staged], 4)
    assert _messages(store) == []
    _, staged, _ = _stage(store, batch("Known", [0, 5]))
    _, other, _ = _stage(store, batch("Unknown", [9]))
    assert commit_staged(str(store), [staged, other], 4).appended == 3
    assert [(m.topic, m.queue_id) for m in _messages(store)] == [
        ("Known", 0), ("Known", 5), ("Unknown", 9)
    ]  # fmt: skip


def test_commit_checks_everything_before_appending(tmp_path):
    store = tmp_path / "store"
    batch = _rows(5)
    properties = [[("seq", str(i))] for i in range(5)]
    properties[3].append(("DELAY", "nope"))  # the put path refuses this message
    batch = batch.set_column(4, "properties", pa.array(properties, MAP))
    _, staged, _ = _stage(store, batch)
    with pytest.raises(ConfigError, match=r"message 4 of the job.*DELAY 'nope'"):
        commit_staged(str(store), [staged], 4)
    assert _messages(store) == []


def test_commit_splits_batches_across_small_commitlog_files(tmp_path):
    from tests.spark.spark_helpers import small_config

    store = tmp_path / "store"
    with MessageStore.open(store, small_config()):
        pass  # 8 KiB CommitLog files
    with MessageStore.open(store, small_config()) as s:
        s.put(Message(topic="Seed", body=b"x"))
    _, staged, _ = _stage(store, _rows(300))
    assert commit_staged(str(store), [staged], 2).appended == 300
    assert [m.body for m in _messages(store) if m.topic == "Out"] == [
        f"m{i}".encode() for i in range(300)
    ]


def test_delayed_messages_go_in_one_by_one(tmp_path):
    store = tmp_path / "store"
    batch = pa.RecordBatch.from_pydict(
        {"value": [b"a", b"b"], "properties": pa.array([[("DELAY", "2")], []], MAP)}
    )
    _, staged, _ = _stage(store, batch, topic="T")
    assert commit_staged(str(store), [staged], 4).appended == 2
    with MessageStore.open(store, read_only=True) as s:
        assert "SCHEDULE_TOPIC_XXXX" in s.topics()  # the delayed one waits there


def test_streaming_commit_of_the_same_batch_appends_once(tmp_path):
    store = tmp_path / "store"
    _, staged, _ = _stage(store, _rows(4))
    first = commit_staged(str(store), [staged], 4, sink=("q1", 0))
    again = commit_staged(str(store), [staged], 4, sink=("q1", 0))
    other = commit_staged(str(store), [staged], 4, sink=("q2", 0))  # another query
    assert (first.appended, again.appended, again.replayed, other.appended) == (4, 0, True, 4)
    assert len(_messages(store)) == 8
    log = sink_log.SinkLog(str(store))
    assert log.last_batch_id("q1") == 0 and log.state("q1", 1) is sink_log.BatchState.NEW


@pytest.mark.parametrize("appended_before", [0, 2, 4])
def test_interrupted_streaming_commit_appends_only_what_is_missing(
    tmp_path, monkeypatch, appended_before
):
    """The commit dies after ``appended_before`` of 5 rows are in the CommitLog (in the
    middle of a put_columns); the replayed batch appends the rest."""
    store = tmp_path / "store"
    _, staged, _ = _stage(store, _rows(5))
    real_put_columns = MessageStore.put_columns

    def dying(self, topic, bodies, *, queue_ids, properties, property_columns):
        def first(column):
            return None if column is None else column[:appended_before]

        real_put_columns(
            self,
            topic,
            bodies[:appended_before],
            queue_ids=queue_ids[:appended_before],
            properties=first(properties),
            property_columns={k: first(v) for k, v in property_columns.items()},
        )
        raise KeyboardInterrupt("simulated crash mid-commit")

    monkeypatch.setattr(MessageStore, "put_columns", dying)
    with pytest.raises(KeyboardInterrupt):
        commit_staged(str(store), [staged], 4, sink=("q", 7))
    monkeypatch.setattr(MessageStore, "put_columns", real_put_columns)
    assert sink_log.SinkLog(str(store)).state("q", 7) is sink_log.BatchState.INTERRUPTED
    assert len(_messages(store)) == appended_before
    result = commit_staged(str(store), [staged], 4, sink=("q", 7))
    assert (result.appended, result.skipped) == (5 - appended_before, appended_before)
    assert [m.body for m in _messages(store)] == [f"m{i}".encode() for i in range(5)]
    assert sink_log.SinkLog(str(store)).last_batch_id("q") == 7
    assert os.path.exists(store / "config" / sink_log.FILE_NAME)


def test_a_new_query_at_a_reused_checkpoint_starts_its_record_afresh(tmp_path):
    store = tmp_path / "store"
    checkpoint = tmp_path / "ckpt"
    checkpoint.mkdir()
    (checkpoint / "metadata").write_text('{"id":"query-1"}\n')
    query = sink_log.checkpoint_query_id(f"file://{checkpoint}")
    assert query == "query-1" == sink_log.checkpoint_query_id(str(checkpoint))
    assert sink_log.checkpoint_query_id("hdfs://nn/ckpt") is None
    assert sink_log.checkpoint_query_id(str(tmp_path / "none")) is None
    _, staged, _ = _stage(store, _rows(3))
    sink = (str(checkpoint), 0)
    assert commit_staged(str(store), [staged], 4, sink=sink, query_id=query).appended == 3
    assert commit_staged(str(store), [staged], 4, sink=sink, query_id=query).replayed
    # Another query at the same location: its batch 0 is new.
    assert commit_staged(str(store), [staged], 4, sink=sink, query_id="query-2").appended == 3
    log = sink_log.SinkLog(str(store))
    assert log.last_batch_id(str(checkpoint)) == 0
    assert log.bind_query(str(checkpoint), "query-2") is False
    # A record written before query ids were kept adopts the first id it meets.
    assert commit_staged(str(store), [staged], 4, sink=("old", 5)).appended == 3
    assert sink_log.SinkLog(str(store)).bind_query("old", "query-9") is False
    assert commit_staged(str(store), [staged], 4, sink=("old", 5), query_id="query-9").replayed
