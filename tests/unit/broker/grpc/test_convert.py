import hashlib

import pytest

pytest.importorskip("grpc")

from rocketstore.broker.grpc import convert
from rocketstore.broker.grpc.convert import RequestError
from rocketstore.broker.grpc.protocol import rocketmq_v2_types_pb2 as pb
from rocketstore.format import properties as props
from rocketstore.format.message import MessageExt

LEVELS = [1000, 5000, 10000, 30000]


def _message(**system):
    fields = {"message_id": "01ABC", "tag": "TagA", "keys": ["k1", "k2"], **system}
    message = pb.Message(
        topic=pb.Resource(name="T"),
        user_properties={"color": "red"},
        system_properties=pb.SystemProperties(**fields),
        body=b"hello",
    )
    message.system_properties.born_timestamp.FromMilliseconds(1_700_000_000_123)
    return message


def _fields(message, **kwargs):
    return convert.send_fields(
        message, "10.0.0.1", max_body_bytes=1024, delay_levels_ms=LEVELS, now_ms=10_000, **kwargs
    )


def test_properties_in_the_proxy_order():
    fields = _fields(_message(message_group="g1", trace_context="tc"))
    assert list(fields.properties.items()) == [
        ("color", "red"),
        (props.TAGS, "TagA"),
        (props.KEYS, "k1 k2"),
        (props.UNIQ_KEY, "01ABC"),
        (props.RECONSUME_TIME, "0"),
        (props.PGROUP, "T"),
        (props.SHARDING_KEY, "g1"),
        (props.TRACE_CONTEXT, "tc"),
        (props.BORN_HOST, "10.0.0.1"),
        (props.BORN_TIMESTAMP, "1700000000123"),
    ]
    assert fields.born_timestamp == 1_700_000_000_123
    assert fields.sys_flag == 0 and not fields.transactional


def test_delivery_time_becomes_the_first_level_reaching_it():
    message = _message()
    message.system_properties.delivery_timestamp.FromMilliseconds(10_000 + 7000)
    fields = _fields(message)
    assert fields.properties[props.DELAY] == "3"  # 10 s: the first level past 7 s
    assert fields.properties[props.TIMER_DELIVER_MS] == "17000"
    assert convert.delay_level_for(10_000 + 10**6, LEVELS, 10_000) == 4  # the longest


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"message_id": " "}, pb.Code.ILLEGAL_MESSAGE_ID),
        ({"tag": "a|b"}, pb.Code.ILLEGAL_MESSAGE_TAG),
        ({"keys": [" "]}, pb.Code.ILLEGAL_MESSAGE_KEY),
        ({"message_group": "x" * 64}, pb.Code.ILLEGAL_MESSAGE_GROUP),
    ],
)
def test_refusals_carry_the_proxy_codes(change, code):
    with pytest.raises(RequestError) as caught:
        _fields(_message(**change))
    assert caught.value.code == code


def test_bodies_and_properties_are_bounded():
    empty = _message()
    empty.body = b""
    with pytest.raises(RequestError) as caught:
        _fields(empty)
    assert caught.value.code == pb.Code.MESSAGE_BODY_EMPTY
    big = _message()
    big.body = b"x" * 1025
    with pytest.raises(RequestError) as caught:
        _fields(big)
    assert caught.value.code == pb.Code.MESSAGE_BODY_TOO_LARGE
    system = _message()
    system.user_properties["UNIQ_KEY"] = "x"
    with pytest.raises(RequestError) as caught:
        _fields(system)
    assert caught.value.code == pb.Code.ILLEGAL_MESSAGE_PROPERTY_KEY
    late = _message()
    late.system_properties.delivery_timestamp.FromMilliseconds(10_000 + convert.MAX_DELAY_MS + 1)
    with pytest.raises(RequestError) as caught:
        _fields(late)
    assert caught.value.code == pb.Code.ILLEGAL_DELIVERY_TIME


def test_stored_message_as_the_proxy_answers_it():
    ext = MessageExt(
        topic="T",
        queue_id=2,
        queue_offset=9,
        commit_log_offset=4096,
        size=200,
        body=b"hello",
        properties={
            props.TAGS: "TagA",
            props.KEYS: "k1 k2",
            props.UNIQ_KEY: "01ABC",
            props.SHARDING_KEY: "g1",
            "color": "red",
        },
        msg_id="0A00000100002A9F0000000000001000",
        sys_flag=0,
        flag=0,
        body_crc=0,
        born_timestamp=1_700_000_000_123,
        born_host="10.0.0.1:5000",
        store_timestamp=1_700_000_000_200,
        store_host="10.0.0.2:10911",
        reconsume_times=0,
        prepared_transaction_offset=0,
    )
    message = convert.proto_message(
        ext, receipt_handle="h", delivery_attempt=2, invisible_ms=15_500
    )
    system = message.system_properties
    assert message.topic.name == "T" and message.body == b"hello"
    assert dict(message.user_properties) == {"color": "red"}
    assert system.message_id == "01ABC" and system.tag == "TagA"
    assert list(system.keys) == ["k1", "k2"]
    assert system.message_type == pb.MessageType.FIFO and system.message_group == "g1"
    assert system.body_digest.type == pb.DigestType.MD5
    assert system.body_digest.checksum == hashlib.md5(b"hello").hexdigest().upper()
    assert system.body_encoding == pb.Encoding.IDENTITY
    assert system.born_timestamp.ToMilliseconds() == 1_700_000_000_123
    assert system.store_timestamp.ToMilliseconds() == 1_700_000_000_200
    assert (system.queue_id, system.queue_offset) == (2, 9)
    assert system.receipt_handle == "h" and system.delivery_attempt == 2
    assert system.invisible_duration.ToMilliseconds() == 15_500
