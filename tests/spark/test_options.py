"""Option parsing of the rocketstore data source (no Spark, no store)."""

from __future__ import annotations

import re

import pytest

from rocketstore.errors import ConfigError
from rocketstore.spark.options import (
    EARLIEST,
    LATEST,
    MODE_COMMITLOG,
    parse_options,
    parse_stream_options,
)


def test_defaults():
    opts = parse_options({"path": "/s"})
    assert opts.mode == "queue"
    assert opts.start.default == EARLIEST and opts.end.default == LATEST
    assert opts.include_body and opts.pushdown
    # Every topic but RocketMQ's system topics (TopicValidator.isSystemTopic), as the
    # contract says: the retry, dead-letter and light queues are topics like others.
    for topic in ("Orders", "%RETRY%g", "%DLQ%g", "%LMQ%x"):
        assert opts.selection.accepts(topic, 3)
    for topic in (
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "SCHEDULE_TOPIC_XXXX",
        "TBW102",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "OFFSET_MOVED_EVENT",
        "rmq_sys_wheel_timer",
    ):
        assert not opts.selection.accepts(topic, 0)
    # A pattern matches among the same topics (Kafka leaves out internal topics so).
    pattern = parse_options({"path": "/s", "topicPattern": "%RETRY%.*|RMQ_SYS.*"}).selection
    assert pattern.accepts("%RETRY%g", 0) and not pattern.accepts("RMQ_SYS_TRACE_TOPIC", 0)


def test_option_names_are_case_insensitive():
    opts = parse_options({"PATH": "/s", "startingoffsets": "latest", "INCLUDEBODY": "false"})
    assert opts.start.default == LATEST and not opts.include_body


def test_topic_selection_kinds():
    assert parse_options({"path": "/s", "topics": "A, B"}).selection.accepts("B", 9)
    assert parse_options({"path": "/s", "topics": "%RETRY%g"}).selection.accepts("%RETRY%g", 0)
    pattern = parse_options({"path": "/s", "topicPattern": "Ord.*"}).selection
    assert pattern.accepts("Orders", 0) and not pattern.accepts("XOrders", 0)
    assign = parse_options({"path": "/s", "assign": '{"A":[0,2]}'}).selection
    assert assign.accepts("A", 2) and not assign.accepts("A", 1) and not assign.accepts("B", 0)
    assert assign.select({"A": [0, 1, 2], "B": [0]}) == [("A", 0), ("A", 2)]


def test_offsets_json_and_timestamps():
    opts = parse_options(
        {
            "path": "/s",
            "startingOffsets": '{"A":{"0":12,"1":-2}}',
            "endingOffsetsByTimestamp": '{"A":{"0":1700000000000}}',
        }
    )
    assert opts.start.offsets == {("A", 0): 12, ("A", 1): EARLIEST}
    assert opts.end.timestamps == {("A", 0): 1_700_000_000_000}
    assert parse_options({"path": "/s", "startingTimestamp": "5"}).start.timestamp_ms == 5


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({}, "path"),
        ({"mode": "kafka"}, "mode='kafka'"),
        ({"topics": " , "}, "topics"),
        ({"topicPattern": "("}, "topicPattern='('"),
        ({"assign": "[1]"}, "assign='[1]'"),
        ({"assign": '{"A":["x"]}'}, "assign"),
        ({"startingOffsets": "{nope"}, "startingOffsets='{nope'"),
        ({"startingOffsets": '{"A":{"x":1}}'}, "queue id 'x'"),
        ({"startingOffsets": '{"A":{"0":-7}}'}, "offset -7"),
        ({"startingOffsets": "earliest", "startingTimestamp": "1"}, "only one of"),
        ({"endingTimestamp": "soon"}, "endingTimestamp='soon'"),
        ({"startingOffsetsByTimestamp": '{"A":{"0":-1}}'}, "negative"),
        ({"maxRecordsPerPartition": "0"}, "maxRecordsPerPartition='0'"),
        ({"minPartitions": "two"}, "minPartitions='two'"),
        ({"includeBody": "maybe"}, "includeBody='maybe'"),
        ({"topics": "A", "assign": '{"A":[0]}'}, "only one of topics"),
        ({"topics": "A", "startingOffsets": '{"B":{"0":1}}'}, "'B'"),
        ({"colour": "red"}, "colour"),
        ({"mode": "commitlog", "startingOffsets": "latest"}, "startingOffsets=latest"),
        ({"mode": "commitlog", "endingOffsets": '{"A":{"0":-2}}'}, "endingOffsets=earliest"),
    ],
)
def test_errors_name_the_option_and_value(options, named):
    raw = {"path": "/s", **options} if options else {}
    with pytest.raises(ConfigError, match=None) as caught:
        parse_options(raw)
    assert named in str(caught.value)


def test_streaming_options_are_accepted_for_one_option_map():
    # A map that can serve a stream serves a batch read too: the admission options are
    # checked, then unused.
    shared = {"maxOffsetsPerTrigger": "10", "minOffsetsPerTrigger": "5", "maxTriggerDelay": "1m"}
    assert parse_options({"path": "/s", **shared}).mode == "queue"


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        ({"maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger='0' must be >= 1"),
        ({"minOffsetsPerTrigger": "many"}, "minOffsetsPerTrigger='many' must be an integer"),
        ({"maxTriggerDelay": "soon"}, "maxTriggerDelay='soon' must be a duration"),
        ({"maxTriggerDelay": "5 fortnights"}, "maxTriggerDelay='5 fortnights'"),
        ({"failOnDataLoss": "maybe"}, "failOnDataLoss='maybe' must be true or false"),
        (
            {"minOffsetsPerTrigger": "50", "maxOffsetsPerTrigger": "10"},
            "minOffsetsPerTrigger='50' is higher than maxOffsetsPerTrigger='10'",
        ),
        (
            {"maxOffsetsPerTrigger": "10", "mode": MODE_COMMITLOG},
            "option mode='commitlog' is for batch reads and maxOffsetsPerTrigger for streaming",
        ),
        (
            {"minOffsetsPerTrigger": "10", "endingOffsets": "latest"},
            "option endingOffsets='latest' is for batch reads and minOffsetsPerTrigger",
        ),
        (
            {"maxTriggerDelay": "1m", "endingTimestamp": "5"},
            "option endingTimestamp='5' is for batch reads and maxTriggerDelay",
        ),
    ],
)
def test_streaming_option_values_and_batch_only_mixes_fail_every_load(options, needle):
    """schema() (so load()) runs this for spark.read and spark.readStream alike: a value no
    query can use, or a stream option beside a batch-only one, is wrong either way."""
    with pytest.raises(ConfigError, match=re.escape(needle)):
        parse_options({"path": "/s", **options})


@pytest.mark.parametrize(
    ("text", "ms"),
    [("15m", 900_000), ("250", 250), ("250ms", 250), ("30s", 30_000), ("2h", 7_200_000),
     ("1d", 86_400_000), ("3min", 180_000), (" 10 S ", 10_000), ("1500us", 1)],
)  # fmt: skip
def test_max_trigger_delay_reads_spark_time_strings(text, ms):
    options = parse_stream_options(
        {"path": "/s", "minOffsetsPerTrigger": "1", "maxTriggerDelay": text}
    )
    assert options.max_trigger_delay_ms == ms
    assert options.min_offsets_per_trigger == 1
    assert parse_stream_options({"path": "/s"}).max_trigger_delay_ms == 15 * 60_000  # Kafka's


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (
            {"startingOffsets": '{"A":{"0":10,"1":2}}', "endingOffsets": '{"A":{"0":5,"1":9}}'},
            "topic 'A' queue 0: offset 10 > 5",
        ),
        (
            {"startingTimestamp": "1700000000500", "endingTimestamp": "1700000000100"},
            "startingTimestamp='1700000000500' starts after endingTimestamp='1700000000100'",
        ),
        (
            {
                "startingOffsetsByTimestamp": '{"A":{"1":1700000000500}}',
                "endingTimestamp": "1700000000100",
            },
            "topic 'A' queue 1: time 1700000000500 > 1700000000100",
        ),
        (
            {
                "startingTimestamp": "1700000000500",
                "endingOffsetsByTimestamp": '{"A":{"2":1700000000499}}',
            },
            "topic 'A' queue 2: time 1700000000500 > 1700000000499",
        ),
    ],
)
def test_a_start_after_its_end_is_refused(options, named):
    """Kafka's source refuses a start after the end; a silent empty result would hide
    the mistake."""
    with pytest.raises(ConfigError) as caught:
        parse_options({"path": "/s", **options})
    assert named in str(caught.value)


def test_starts_and_ends_that_can_be_ordered_only_per_queue_are_taken():
    # Equal bounds read nothing but are not contradictory; -1/-2 and offsets against
    # timestamps are resolved per queue when the read is planned.
    for options in (
        {"startingOffsets": '{"A":{"0":5}}', "endingOffsets": '{"A":{"0":5}}'},
        {"startingOffsets": '{"A":{"0":-1}}', "endingOffsets": '{"A":{"0":3}}'},
        {"startingOffsets": '{"A":{"0":9}}', "endingTimestamp": "1"},
        {"startingTimestamp": "5", "endingTimestamp": "5"},
        {
            "startingOffsetsByTimestamp": '{"A":{"0":9}}',
            "endingOffsetsByTimestamp": '{"B":{"0":1}}',
        },
    ):
        parse_options({"path": "/s", **options})


@pytest.mark.parametrize("tags", ["||", " ", " || ", "||||"])
def test_a_tags_expression_naming_no_tag_is_refused(tags):
    """RocketMQ refuses "||" and matches nothing with a blank expression: neither may
    silently read every message."""
    with pytest.raises(ConfigError, match=r"option tags=.* names no tag"):
        parse_options({"path": "/s", "tags": tags})
    for fine in ("", "*", " * ", "TagA ||", "TagA || TagB"):
        assert parse_options({"path": "/s", "tags": fine}).tags == fine
