"""The messages a transaction writes (pure builders): property order against
java.util.HashMap's, as printed by a Java 17 program that repeats RocketMQ 4.9.8's map
operations (decode the request's string, put CLUSTER, take WAIT out and put it back, put
REAL_TOPIC and REAL_QID; decode the half message's string for a commit; put
TRANSACTION_CHECK_TIMES and TRAN_PREPARED_QUEUE_OFFSET for a check), and the fields each
message carries."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketstore.broker.transaction import (
    COMMIT,
    check_request_body,
    check_request_fields,
    committed_message,
    counted_check,
    discarded_message,
    half_message,
    half_message_properties,
    is_transactional,
    op_half_offset,
    op_message,
    parse_java_integer,
    real_destination,
    renewed_half_message,
    reset_transaction_type,
)
from rocketstore.format import properties as props
from rocketstore.format import record as rec
from rocketstore.format import sysflag
from rocketstore.format.message import MessageExt
from rocketstore.paths import TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC

SMALL_REQUEST = (
    "TRAN_MSG=true|PGROUP=TxGroup|KEYS=k1|TAGS=TagA|UNIQ_KEY=AC11000100002A9F0000000000000001"
    "|WAIT=true"
)
LARGE_REQUEST = (
    "TRAN_MSG=true|PGROUP=TxGroup|KEYS=order-7 shared|TAGS=TagB"
    "|UNIQ_KEY=AC11000100002A9F00000000000000FF|WAIT=true|custom=v1|a=1|b=2|c=3|d=4|e=5|f=6"
)
# What the Java program printed (=, | for 0x01, 0x02).
JAVA = {
    SMALL_REQUEST: {
        "half": "REAL_TOPIC=TopicA|KEYS=k1|TRAN_MSG=true|UNIQ_KEY=AC11000100002A9F0000000000000001"
        "|CLUSTER=DefaultCluster|PGROUP=TxGroup|WAIT=true|TAGS=TagA|REAL_QID=2",
        "renew": "REAL_TOPIC=TopicA|TRANSACTION_CHECK_TIMES=1|KEYS=k1|TRAN_MSG=true"
        "|UNIQ_KEY=AC11000100002A9F0000000000000001|CLUSTER=DefaultCluster|PGROUP=TxGroup"
        "|WAIT=true|TAGS=TagA|REAL_QID=2",
        "immune": "REAL_TOPIC=TopicA|TRAN_PREPARED_QUEUE_OFFSET=0|TRANSACTION_CHECK_TIMES=1"
        "|KEYS=k1|TRAN_MSG=true|UNIQ_KEY=AC11000100002A9F0000000000000001"
        "|CLUSTER=DefaultCluster|PGROUP=TxGroup|WAIT=true|TAGS=TagA|REAL_QID=2",
    },
    LARGE_REQUEST: {
        "half": "a=1|b=2|c=3|d=4|e=5|f=6|custom=v1|TRAN_MSG=true|REAL_TOPIC=TopicA"
        "|KEYS=order-7 shared|UNIQ_KEY=AC11000100002A9F00000000000000FF|CLUSTER=DefaultCluster"
        "|PGROUP=TxGroup|WAIT=true|TAGS=TagB|REAL_QID=2",
        "renew": "a=1|b=2|c=3|d=4|e=5|TRANSACTION_CHECK_TIMES=1|f=6|custom=v1|TRAN_MSG=true"
        "|REAL_TOPIC=TopicA|KEYS=order-7 shared|UNIQ_KEY=AC11000100002A9F00000000000000FF"
        "|CLUSTER=DefaultCluster|PGROUP=TxGroup|WAIT=true|TAGS=TagB|REAL_QID=2",
        "immune": "a=1|b=2|c=3|TRAN_PREPARED_QUEUE_OFFSET=0|d=4|e=5|TRANSACTION_CHECK_TIMES=1"
        "|f=6|custom=v1|TRAN_MSG=true|REAL_TOPIC=TopicA|KEYS=order-7 shared"
        "|UNIQ_KEY=AC11000100002A9F00000000000000FF|CLUSTER=DefaultCluster|PGROUP=TxGroup"
        "|WAIT=true|TAGS=TagB|REAL_QID=2",
    },
}
BROKER = "127.0.0.1:10911"


def raw(shown: str) -> str:
    return shown.replace("=", props.NAME_VALUE_SEPARATOR).replace("|", props.PROPERTY_SEPARATOR)


def shown(properties: dict[str, str]) -> str:
    return "|".join(f"{k}={v}" for k, v in properties.items())


def half_ext(properties: dict[str, str], **fields: object) -> MessageExt:
    values: dict[str, object] = {
        "topic": TRANS_HALF_TOPIC,
        "queue_id": 0,
        "queue_offset": 0,
        "commit_log_offset": 4096,
        "size": 300,
        "body": b"payload",
        "properties": properties,
        "msg_id": "7F0000010000000000001000",
        "sys_flag": sysflag.MULTI_TAGS_FLAG,
        "flag": 7,
        "body_crc": 1234,
        "born_timestamp": 1_700_000_000_000,
        "born_host": "10.1.2.3:45678",
        "store_timestamp": 1_700_000_000_005,
        "store_host": BROKER,
        "reconsume_times": 0,
        "prepared_transaction_offset": 0,
    }
    values.update(fields)
    return MessageExt(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize("request_text", [SMALL_REQUEST, LARGE_REQUEST])
def test_half_message_properties_in_java_hashmap_order(request_text: str) -> None:
    request = props.decode_properties_str(raw(request_text))
    half = half_message_properties(request, "DefaultCluster", "TopicA", 2)
    assert shown(half) == JAVA[request_text]["half"]


@pytest.mark.parametrize("request_text", [SMALL_REQUEST, LARGE_REQUEST])
def test_committed_and_renewed_properties_in_java_hashmap_order(request_text: str) -> None:
    stored = props.decode_properties_str(raw(JAVA[request_text]["half"]))
    half = half_ext(stored)
    committed = committed_message(half, 4096)
    # The commit keeps the half message's string as Java's HashMap iterates it again.
    assert shown(committed.properties) == JAVA[request_text]["half"]
    counted = dict(stored)
    assert counted_check(counted, 15) is False
    assert shown(renewed_half_message(half, counted).properties) == JAVA[request_text]["renew"]
    immune = renewed_half_message(half, counted, prepared_queue_offset="0")
    assert shown(immune.properties) == JAVA[request_text]["immune"]


def test_half_message_fields() -> None:
    message = half_message(
        body=b"x",
        flag=3,
        sys_flag=sysflag.TRANSACTION_PREPARED_TYPE | sysflag.COMPRESSED_FLAG,
        properties={"TAGS": "t"},
        born_timestamp=5,
        born_host="10.0.0.1:1",
        reconsume_times=2,
    )
    assert (message.topic, message.queue_id) == (TRANS_HALF_TOPIC, 0)
    assert message.sys_flag == sysflag.COMPRESSED_FLAG  # transaction bits cleared
    assert (message.flag, message.born_timestamp, message.reconsume_times) == (3, 5, 2)


def test_committed_message_fields() -> None:
    properties = props.decode_properties_str(raw(JAVA[SMALL_REQUEST]["half"]))
    half = half_ext(properties, sys_flag=sysflag.MULTI_TAGS_FLAG | sysflag.COMPRESSED_FLAG)
    message = committed_message(half, 4096)
    assert (message.topic, message.queue_id) == ("TopicA", 2)
    assert sysflag.transaction_type(message.sys_flag) == COMMIT
    assert message.sys_flag & sysflag.COMPRESSED_FLAG  # the stored (compressed) body kept
    assert message.prepared_transaction_offset == 4096
    assert (message.body, message.flag, message.born_host) == (b"payload", 7, "10.1.2.3:45678")
    # REAL_TOPIC, REAL_QID and TRAN_MSG stay in the record (written before they are cleared).
    assert {"REAL_TOPIC", "REAL_QID", "TRAN_MSG"} <= set(message.properties)


@pytest.mark.parametrize(
    "properties",
    [{}, {"REAL_TOPIC": "T"}, {"REAL_QID": "1"}, {"REAL_TOPIC": "T", "REAL_QID": "x"}],
)
def test_a_message_without_its_real_destination_cannot_be_committed(
    properties: dict[str, str],
) -> None:
    half = half_ext(properties)
    assert real_destination(half) is None
    with pytest.raises(ValueError, match="REAL_TOPIC/REAL_QID"):
        committed_message(half, 0)
    with pytest.raises(ValueError, match="REAL_TOPIC/REAL_QID"):
        check_request_body(half, properties, queue_offset=1, commit_log_offset=2)


def test_op_message() -> None:
    op = op_message(41, 0, BROKER, 1_700_000_000_123)
    assert (op.topic, op.queue_id, op.body, op.sys_flag) == (TRANS_OP_HALF_TOPIC, 0, b"41", 0)
    assert shown(op.properties) == "WAIT=true|TAGS=d"  # as Java's HashMap iterates them
    assert (op.born_host, op.born_timestamp) == (BROKER, 1_700_000_000_123)
    ext = half_ext({"TAGS": "d"}, body=b"41")
    assert op_half_offset(ext) == 41
    assert op_half_offset(half_ext({}, body=b"x41")) == -1
    assert op_half_offset(half_ext({}, body=b" 41")) == -1


def test_counted_check_counts_then_refuses() -> None:
    properties: dict[str, str] = {}
    for expected in ("1", "2", "3"):
        assert counted_check(properties, 3) is False
        assert properties[props.TRANSACTION_CHECK_TIMES] == expected
    assert counted_check(properties, 3) is True  # checked 3 times already
    assert properties[props.TRANSACTION_CHECK_TIMES] == "3"
    junk = {props.TRANSACTION_CHECK_TIMES: "many"}  # getInt: -1, so this is check 0
    assert counted_check(junk, 3) is False and junk[props.TRANSACTION_CHECK_TIMES] == "0"


def test_discarded_message() -> None:
    half = half_ext({"A": "1", "TRANSACTION_CHECK_TIMES": "15"}, reconsume_times=1)
    message = discarded_message(half, half.properties)
    assert (message.topic, message.queue_id, message.flag) == (TRANS_CHECK_MAX_TIME_TOPIC, 0, 7)
    assert (message.reconsume_times, message.sys_flag) == (1, half.sys_flag)


def test_check_request_is_the_half_message_for_its_real_topic_at_the_copy() -> None:
    properties = props.decode_properties_str(raw(JAVA[SMALL_REQUEST]["renew"]))
    half = half_ext(properties)
    body = check_request_body(half, properties, queue_offset=9, commit_log_offset=8192)
    view = rec.read_record(body, 0, check_crc=False)
    assert isinstance(view, rec.RecordView) and view.size == len(body)
    decoded = rec.to_message_ext(body, view)
    assert (decoded.topic, decoded.queue_id) == ("TopicA", 2)
    assert (decoded.queue_offset, decoded.commit_log_offset) == (9, 8192)
    assert decoded.store_timestamp == half.store_timestamp and decoded.body == b"payload"
    assert shown(decoded.properties) == JAVA[SMALL_REQUEST]["renew"]
    fields = check_request_fields(
        uniq_key=half.uniq_key, queue_offset=9, commit_log_offset=8192, offset_msg_id="AB"
    )
    assert fields == {
        "tranStateTableOffset": "9",
        "commitLogOffset": "8192",
        "offsetMsgId": "AB",
        "msgId": "AC11000100002A9F0000000000000001",
        "transactionId": "AC11000100002A9F0000000000000001",
    }
    assert "msgId" not in check_request_fields(
        uniq_key=None, queue_offset=0, commit_log_offset=0, offset_msg_id="AB"
    )


@pytest.mark.parametrize(
    ("value", "expected"), [("true", True), ("TRUE", True), ("false", False), ("1", False)]
)
def test_is_transactional_parses_like_java_boolean(value: str, expected: bool) -> None:
    assert is_transactional({props.TRAN_MSG: value}) is expected
    assert is_transactional({}) is False


@given(st.integers(0, 0xFFFF), st.sampled_from([0x0, 0x4, 0x8, 0xC]))
def test_reset_transaction_type_changes_only_the_type_bits(flag: int, kind: int) -> None:
    reset = reset_transaction_type(flag, kind)
    assert sysflag.transaction_type(reset) == kind
    assert reset & ~sysflag.TRANSACTION_MASK == flag & ~sysflag.TRANSACTION_MASK


@given(st.integers(-(2**70), 2**70))
def test_parse_java_integer_round_trips_what_fits(value: int) -> None:
    parsed = parse_java_integer(str(value), 64)
    assert parsed == (value if -(2**63) <= value < 2**63 else None)


@pytest.mark.parametrize("text", ["", "+", "-", " 1", "1 ", "1_000", "0x10", "١٢"])
def test_parse_java_integer_refuses_what_java_refuses(text: str) -> None:
    assert parse_java_integer(text, 32) is None


_PROPERTY_TEXT = st.text(
    st.characters(blacklist_characters="\x01\x02", blacklist_categories=["Cs"]),
    min_size=1,
    max_size=8,
)


@given(
    st.dictionaries(_PROPERTY_TEXT, _PROPERTY_TEXT, max_size=20),
    st.text(st.characters(min_codepoint=48, max_codepoint=122), min_size=1, max_size=20),
    st.integers(0, 2**31 - 1),
)
def test_half_properties_keep_every_request_entry(
    request: dict[str, str], topic: str, queue_id: int
) -> None:
    half = half_message_properties(request, "C", topic, queue_id)
    expected = {
        **request,
        props.CLUSTER: "C",
        props.REAL_TOPIC: topic,
        props.REAL_QID: str(queue_id),
    }
    assert half == expected
