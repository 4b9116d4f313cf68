"""CommitLog record codec: golden bytes built field by field (spec 1.2-1.4, 11)."""

from __future__ import annotations

import struct

import pytest

from rocketstore.errors import CorruptDataError, IncompleteDataError, StoreError
from rocketstore.format import sysflag
from rocketstore.format.crc import masked_crc32
from rocketstore.format.hosts import encode_host
from rocketstore.format.properties import encode_properties
from rocketstore.format.record import (
    BLANK_MAGIC,
    END_FILE_MIN_BLANK_LENGTH,
    FIXED_OVERHEAD_V4,
    MESSAGE_MAGIC_V1,
    MESSAGE_MAGIC_V2,
    POS_BODYCRC,
    POS_BORNHOST,
    POS_BORNTIMESTAMP,
    POS_FLAG,
    POS_MAGIC,
    POS_PHYSICALOFFSET,
    POS_QUEUEID,
    POS_QUEUEOFFSET,
    POS_SYSFLAG,
    POS_TOTALSIZE,
    Blank,
    RecordView,
    decode_message,
    encode_blank,
    encode_record,
    read_record,
    record_length,
    record_properties,
    store_timestamp_position,
    to_message_ext,
)

BODY = b"Once, there was a chance for me!"  # 32 bytes, masked CRC32 151,131,488
BODY_CRC = 151_131_488
TOPIC = b"FooBar"
PROPS = b"TAGS\x01TAG1\x02KEYS\x011234567890123"  # 28 bytes, no trailing separator
BORN_TS = 1_700_000_000_123
STORE_TS = 1_700_000_000_456


def _i32(v: int) -> bytes:
    return struct.pack(">i", v)


def _i64(v: int) -> bytes:
    return struct.pack(">q", v)


def _encode(**overrides: object) -> bytes:
    fields: dict[str, object] = {
        "topic": TOPIC,
        "body": BODY,
        "properties": PROPS,
        "queue_id": 3,
        "flag": 7,
        "queue_offset": 42,
        "physical_offset": 1024,
        "sys_flag": 0,
        "born_timestamp": BORN_TS,
        "born_host": encode_host("127.0.0.1:123"),
        "store_timestamp": STORE_TS,
        "store_host": encode_host("127.0.0.1:124"),
        "reconsume_times": 2,
        "prepared_transaction_offset": 0,
        "body_crc": BODY_CRC,
    }
    fields.update(overrides)
    return encode_record(**fields)  # type: ignore[arg-type]


def _golden_v4() -> bytes:
    """The 157-byte record of spec 1.2 (topic FooBar, 32-byte body, TAGS + KEYS)."""
    return b"".join(
        [
            _i32(157),  # TOTALSIZE: 91 + topic 6 + body 32 + props 28
            bytes.fromhex("DAA320A7"),  # MAGICCODE v1
            _i32(151_131_488),  # BODYCRC: masked CRC32 of the body
            _i32(3),  # QUEUEID
            _i32(7),  # FLAG
            _i64(42),  # QUEUEOFFSET
            _i64(1024),  # PHYSICALOFFSET
            _i32(0),  # SYSFLAG
            _i64(BORN_TS),  # BORNTIMESTAMP
            bytes.fromhex("7F000001"),  # BORNHOST address 127.0.0.1
            _i32(123),  # BORNHOST port
            _i64(STORE_TS),  # STORETIMESTAMP
            bytes.fromhex("7F000001"),  # STOREHOSTADDRESS address 127.0.0.1
            _i32(124),  # STOREHOSTADDRESS port
            _i32(2),  # RECONSUMETIMES
            _i64(0),  # PREPARED TRANSACTION OFFSET
            _i32(32),  # BODYLEN
            BODY,  # BODY
            bytes([6]),  # TOPICLEN: 1 signed byte in v1
            b"FooBar",  # TOPIC
            struct.pack(">h", 28),  # PROPLEN: 2-byte signed short
            PROPS,  # PROPERTIES
        ]
    )


# --- constants ---------------------------------------------------------------------------


def test_magic_constants() -> None:
    assert MESSAGE_MAGIC_V1 & 0xFFFFFFFF == 0xDAA320A7
    assert MESSAGE_MAGIC_V1 == -626_843_481
    assert MESSAGE_MAGIC_V2 & 0xFFFFFFFF == 0xDAA320AB
    assert MESSAGE_MAGIC_V2 == -626_843_477
    assert BLANK_MAGIC & 0xFFFFFFFF == 0xCBD43194
    assert BLANK_MAGIC == -875_286_124
    assert END_FILE_MIN_BLANK_LENGTH == 8
    assert FIXED_OVERHEAD_V4 == 91


def test_fixed_positions() -> None:
    assert (POS_TOTALSIZE, POS_MAGIC, POS_BODYCRC, POS_QUEUEID, POS_FLAG) == (0, 4, 8, 12, 16)
    assert (POS_QUEUEOFFSET, POS_PHYSICALOFFSET, POS_SYSFLAG) == (20, 28, 36)
    assert (POS_BORNTIMESTAMP, POS_BORNHOST) == (40, 48)


def test_store_timestamp_position() -> None:
    assert store_timestamp_position(0) == 56
    assert store_timestamp_position(sysflag.BORNHOST_V6_FLAG) == 68
    assert store_timestamp_position(sysflag.STOREHOSTADDRESS_V6_FLAG) == 56


# --- record_length (CommitLog.calMsgLength) ----------------------------------------------


def test_record_length_fixed_overheads() -> None:
    assert record_length(0, 0, 0) == 91
    assert record_length(0, 0, 0, born_host_length=20) == 103
    assert record_length(0, 0, 0, store_host_length=20) == 103
    assert record_length(0, 0, 0, born_host_length=20, store_host_length=20) == 115
    assert record_length(0, 0, 0, version=2) == 92  # 2-byte topic length


def test_record_length_worked_example() -> None:
    # spec 1.2: FooBar, 32-byte body, TAGS=TAG1 and KEYS=<13 digits>.
    assert record_length(32, 6, 28) == 157
    assert record_length(32, 6, 29) == 158  # 5.2+ trailing separator
    assert 10 * record_length(32, 6, 29) == 1580  # ReputMessageServiceTest


# --- encoding ------------------------------------------------------------------------------


def test_encode_golden_157_byte_record() -> None:
    got = _encode()
    assert len(got) == 157
    assert got == _golden_v4()


def test_encode_157_byte_record_from_properties_mapping() -> None:
    properties = encode_properties({"TAGS": "TAG1", "KEYS": "1234567890123"})
    assert len(_encode(properties=properties)) == 157
    with_trailing = encode_properties(
        {"TAGS": "TAG1", "KEYS": "1234567890123"}, trailing_separator=True
    )
    rec = _encode(properties=with_trailing)
    assert len(rec) == 158
    assert struct.unpack_from(">i", rec, 0)[0] == 158


def test_encode_does_not_compute_the_crc() -> None:
    # The caller supplies BODYCRC (the broker computes it at put time).
    rec = _encode(body_crc=12345)
    assert struct.unpack_from(">i", rec, POS_BODYCRC)[0] == 12345


def test_encode_empty_body_topic_props() -> None:
    rec = _encode(body=b"", properties=b"", topic=b"T", body_crc=0)
    assert len(rec) == 92
    assert rec[84:88] == _i32(0)  # BODYLEN 0, no body bytes
    assert rec[88:90] == b"\x01T"  # TOPICLEN, TOPIC
    assert rec[90:92] == b"\x00\x00"  # PROPLEN 0


def test_encode_append_callback_example() -> None:
    # AppendCallbackTest: topic test-topic, body "body", hosts 127.0.0.1:123/124.
    rec = _encode(
        topic=b"test-topic",
        body=b"body",
        properties=encode_properties({"TAGS": "abc"}),
        body_crc=masked_crc32(b"body"),
    )
    assert struct.unpack_from(">i", rec, POS_BODYCRC)[0] == 1_537_739_698
    assert len(rec) == 91 + 10 + 4 + len(b"TAGS\x01abc")


def test_encode_ipv6_born_host_golden() -> None:
    rec = _encode(born_host=encode_host("[::1]:123"))
    expected = b"".join(
        [
            _i32(169),  # TOTALSIZE: 157 + 12
            bytes.fromhex("DAA320A7"),  # MAGICCODE
            _i32(BODY_CRC),  # BODYCRC
            _i32(3),  # QUEUEID
            _i32(7),  # FLAG
            _i64(42),  # QUEUEOFFSET
            _i64(1024),  # PHYSICALOFFSET
            _i32(0x10),  # SYSFLAG: BORNHOST_V6_FLAG set by the encoder
            _i64(BORN_TS),  # BORNTIMESTAMP
            bytes(15) + b"\x01",  # BORNHOST address ::1 (16 bytes)
            _i32(123),  # BORNHOST port
            _i64(STORE_TS),  # STORETIMESTAMP, now at 68
            bytes.fromhex("7F000001"),  # STOREHOSTADDRESS address
            _i32(124),  # STOREHOSTADDRESS port
            _i32(2),  # RECONSUMETIMES
            _i64(0),  # PREPARED TRANSACTION OFFSET
            _i32(32),  # BODYLEN
            BODY,  # BODY
            bytes([6]),  # TOPICLEN
            TOPIC,  # TOPIC
            struct.pack(">h", 28),  # PROPLEN
            PROPS,  # PROPERTIES
        ]
    )
    assert rec == expected
    assert struct.unpack_from(">q", rec, 68)[0] == STORE_TS


def test_encode_both_hosts_ipv6_shift_by_24() -> None:
    rec = _encode(born_host=encode_host("[::1]:123"), store_host=encode_host("[fe80::2]:10911"))
    assert len(rec) == 157 + 24
    sys_flag = struct.unpack_from(">i", rec, POS_SYSFLAG)[0]
    assert sys_flag == sysflag.BORNHOST_V6_FLAG | sysflag.STOREHOSTADDRESS_V6_FLAG == 0x30
    assert struct.unpack_from(">q", rec, 68)[0] == STORE_TS  # STORETIMESTAMP
    assert rec[76:92] == bytes.fromhex("fe800000000000000000000000000002")  # STOREHOST addr
    assert struct.unpack_from(">i", rec, 92)[0] == 10911  # STOREHOST port
    assert struct.unpack_from(">i", rec, 96)[0] == 2  # RECONSUMETIMES (72 + 24)
    assert struct.unpack_from(">i", rec, 108)[0] == 32  # BODYLEN (84 + 24)


def test_encode_ipv6_store_host_only_shifts_after_store_host() -> None:
    rec = _encode(store_host=encode_host("[::1]:124"))
    assert len(rec) == 169
    assert struct.unpack_from(">i", rec, POS_SYSFLAG)[0] == sysflag.STOREHOSTADDRESS_V6_FLAG
    assert struct.unpack_from(">q", rec, 56)[0] == STORE_TS  # not shifted
    assert struct.unpack_from(">i", rec, 84)[0] == 2  # RECONSUMETIMES (72 + 12)
    assert struct.unpack_from(">i", rec, 96)[0] == 32  # BODYLEN (84 + 12)


def test_encode_keeps_other_sys_flag_bits() -> None:
    flags = sysflag.COMPRESSED_FLAG | sysflag.MULTI_TAGS_FLAG | sysflag.TRANSACTION_COMMIT_TYPE
    rec = _encode(sys_flag=flags, born_host=encode_host("[::1]:1"))
    assert struct.unpack_from(">i", rec, POS_SYSFLAG)[0] == flags | sysflag.BORNHOST_V6_FLAG


def test_encode_v6_flag_with_ipv4_host_gives_a_readable_record() -> None:
    # Regression: the V6 bits were ORed in but never cleared, so a caller's stale V6 flag
    # with 8-byte hosts produced a record that no decoder accepts.
    try:
        rec = _encode(sys_flag=sysflag.BORNHOST_V6_FLAG | sysflag.STOREHOSTADDRESS_V6_FLAG)
    except (StoreError, ValueError):
        return  # rejecting the inconsistent input would be fine too
    assert struct.unpack_from(">i", rec, POS_SYSFLAG)[0] == 0
    view = read_record(rec)
    assert isinstance(view, RecordView)
    assert view.born_host == encode_host("127.0.0.1:123")


def test_encode_limits_topic_127_and_properties_32767() -> None:
    # DefaultMessageStoreTest.testPutLongMessage boundaries.
    topic = b"t" * 127
    properties = b"k\x01" + b"v" * (32767 - 2)
    rec = _encode(topic=topic, properties=properties)
    view = read_record(rec)
    assert isinstance(view, RecordView)
    assert view.topic == "t" * 127
    assert view.properties_length == 32767


# --- blank record --------------------------------------------------------------------------


def test_encode_blank_golden() -> None:
    expected = (
        _i32(1000)  # whole remaining length of the file
        + bytes.fromhex("CBD43194")  # BLANK_MAGIC_CODE
    )
    assert encode_blank(1000) == expected
    assert len(expected) == 8


def test_read_blank() -> None:
    buf = _golden_v4() + encode_blank(1000)
    got = read_record(buf, 157)
    assert got == Blank(position=157, remaining=1000)


def test_read_blank_needs_only_8_bytes() -> None:
    assert read_record(encode_blank(8)) == Blank(0, 8)


def test_decode_message_on_blank_is_corrupt() -> None:
    with pytest.raises(CorruptDataError) as info:
        decode_message(b"\x00" * 16 + encode_blank(64), 16)
    assert info.value.position == 16


# --- reading -------------------------------------------------------------------------------


def test_read_golden_record_fields() -> None:
    buf = _golden_v4()
    view = read_record(buf)
    assert isinstance(view, RecordView)
    assert view.position == 0
    assert view.size == 157
    assert view.magic == MESSAGE_MAGIC_V1
    assert view.body_crc == BODY_CRC
    assert view.queue_id == 3
    assert view.flag == 7
    assert view.queue_offset == 42
    assert view.physical_offset == 1024
    assert view.sys_flag == 0
    assert view.born_timestamp == BORN_TS
    assert view.born_host == bytes.fromhex("7F0000010000007B")
    assert view.store_timestamp == STORE_TS
    assert view.store_host == bytes.fromhex("7F0000010000007C")
    assert view.reconsume_times == 2
    assert view.prepared_transaction_offset == 0
    assert view.body_position == 88
    assert view.body_length == 32
    assert buf[view.body_position : view.body_position + view.body_length] == BODY
    assert view.topic == "FooBar"
    assert view.properties_position == 129  # 88 + 32 + 1 + 6 + 2
    assert view.properties_length == 28
    assert record_properties(buf, view) == {"TAGS": "TAG1", "KEYS": "1234567890123"}


def test_decode_message_golden() -> None:
    msg = decode_message(_golden_v4(), check_crc=True)
    assert msg.topic == "FooBar"
    assert msg.body == BODY
    assert msg.tags == "TAG1"
    assert msg.keys == "1234567890123"
    assert msg.key_list == ["1234567890123"]
    assert msg.queue_id == 3
    assert msg.queue_offset == 42
    assert msg.commit_log_offset == 1024
    assert msg.size == 157
    assert msg.flag == 7
    assert msg.sys_flag == 0
    assert msg.body_crc == BODY_CRC
    assert msg.born_timestamp == BORN_TS
    assert msg.born_host == "127.0.0.1:123"
    assert msg.store_timestamp == STORE_TS
    assert msg.store_host == "127.0.0.1:124"
    assert msg.reconsume_times == 2
    assert msg.prepared_transaction_offset == 0
    assert msg.magic_code == MESSAGE_MAGIC_V1
    # offsetMsgId = STOREHOST bytes + PHYSICALOFFSET, upper-case hex.
    assert msg.msg_id == "7F0000010000007C0000000000000400"


def test_to_message_ext_without_body() -> None:
    buf = _golden_v4()
    view = read_record(buf)
    assert isinstance(view, RecordView)
    assert to_message_ext(buf, view, read_body=False).body is None


def test_read_consecutive_records_and_positions() -> None:
    first = _encode(physical_offset=0)
    second = _encode(physical_offset=len(first), queue_offset=43, body=b"x", body_crc=0)
    buf = first + second + encode_blank(500)
    view1 = read_record(buf, 0)
    assert isinstance(view1, RecordView)
    view2 = read_record(buf, view1.size)
    assert isinstance(view2, RecordView)
    assert (view2.position, view2.queue_offset, view2.physical_offset) == (157, 43, 157)
    assert read_record(buf, view1.size + view2.size) == Blank(view1.size + view2.size, 500)


def test_read_ipv6_hosts_and_56_char_msg_id() -> None:
    rec = _encode(born_host=encode_host("[::1]:123"), store_host=encode_host("[::2]:10911"))
    msg = decode_message(rec)
    assert msg.sys_flag == 0x30
    assert msg.born_host == "[::1]:123"
    assert msg.store_host == "[::2]:10911"
    assert msg.store_timestamp == STORE_TS
    assert msg.body == BODY
    assert len(msg.msg_id) == 56
    assert msg.msg_id == (bytes(15) + b"\x02" + _i32(10911) + _i64(1024)).hex().upper()


def test_read_v2_record_built_by_hand() -> None:
    topic = b"%RETRY%" + b"g" * 193  # 200 bytes: needs the 2-byte topic length of v2
    body = b"hello"
    properties = b"TAGS\x01TagA"
    total = 92 + len(body) + len(topic) + len(properties)
    rec = b"".join(
        [
            _i32(total),  # TOTALSIZE
            bytes.fromhex("DAA320AB"),  # MAGICCODE v2
            _i32(masked_crc32(body)),  # BODYCRC
            _i32(1),  # QUEUEID
            _i32(0),  # FLAG
            _i64(5),  # QUEUEOFFSET
            _i64(2048),  # PHYSICALOFFSET
            _i32(0),  # SYSFLAG
            _i64(BORN_TS),  # BORNTIMESTAMP
            bytes.fromhex("0A000001"),  # BORNHOST address 10.0.0.1
            _i32(5000),  # BORNHOST port
            _i64(STORE_TS),  # STORETIMESTAMP
            bytes.fromhex("0A000002"),  # STOREHOSTADDRESS address 10.0.0.2
            _i32(10911),  # STOREHOSTADDRESS port
            _i32(0),  # RECONSUMETIMES
            _i64(0),  # PREPARED TRANSACTION OFFSET
            _i32(len(body)),  # BODYLEN
            body,  # BODY
            struct.pack(">h", len(topic)),  # TOPICLEN: 2-byte short in v2
            topic,  # TOPIC
            struct.pack(">h", len(properties)),  # PROPLEN
            properties,  # PROPERTIES
        ]
    )
    assert len(rec) == total
    view = read_record(rec, check_crc=True)
    assert isinstance(view, RecordView)
    assert view.magic == MESSAGE_MAGIC_V2
    assert view.topic == topic.decode()
    assert view.size == total
    msg = decode_message(rec)
    assert msg.topic == topic.decode()
    assert msg.body == body
    assert msg.tags == "TagA"
    assert msg.store_host == "10.0.0.2:10911"
    assert msg.magic_code == MESSAGE_MAGIC_V2


def test_v1_record_with_v2_magic_is_corrupt() -> None:
    rec = bytearray(_golden_v4())
    rec[4:8] = bytes.fromhex("DAA320AB")
    with pytest.raises(CorruptDataError):
        read_record(rec)


def test_read_accepts_bytearray_and_memoryview() -> None:
    rec = _golden_v4()
    for buf in (bytearray(rec), memoryview(rec)):
        view = read_record(buf)
        assert isinstance(view, RecordView)
        assert view.topic == "FooBar"
        assert decode_message(buf).body == BODY


# --- incomplete ----------------------------------------------------------------------------


@pytest.mark.parametrize("length", [0, 1, 7, 8, 90, 91, 156])
def test_truncated_record_is_incomplete(length: int) -> None:
    with pytest.raises(IncompleteDataError):
        read_record(_golden_v4()[:length])


def test_incomplete_reports_needed_and_available() -> None:
    with pytest.raises(IncompleteDataError) as info:
        read_record(_golden_v4()[:100])
    assert (info.value.needed, info.value.available) == (157, 100)


def test_end_limits_the_readable_bytes() -> None:
    buf = _golden_v4() + bytes(100)
    with pytest.raises(IncompleteDataError):
        read_record(buf, end=156)
    assert isinstance(read_record(buf, end=157), RecordView)


# --- corrupt -------------------------------------------------------------------------------


def test_bad_magic_is_corrupt_with_position() -> None:
    buf = bytes(40) + _i32(157) + _i32(0x12345678) + bytes(149)
    with pytest.raises(CorruptDataError) as info:
        read_record(buf, 40)
    assert info.value.position == 40


def test_zeroed_bytes_are_corrupt() -> None:
    # An all-zero tail (unwritten part of a file) has magic 0.
    with pytest.raises(CorruptDataError):
        read_record(bytes(200))


@pytest.mark.parametrize("total", [-1, 0, 8, 90])
def test_size_below_minimum_is_corrupt(total: int) -> None:
    rec = bytearray(_golden_v4())
    rec[0:4] = _i32(total)
    with pytest.raises(CorruptDataError):
        read_record(rec)


@pytest.mark.parametrize("total", [156, 158])
def test_size_not_matching_fields_is_corrupt(total: int) -> None:
    rec = bytearray(_golden_v4() + bytes(8))
    rec[0:4] = _i32(total)
    with pytest.raises(CorruptDataError):
        read_record(rec)


@pytest.mark.parametrize("body_length", [-1, 33, 10_000, 2**31 - 1])
def test_bad_body_length_is_corrupt(body_length: int) -> None:
    rec = bytearray(_golden_v4())
    rec[84:88] = _i32(body_length)
    with pytest.raises(CorruptDataError):
        read_record(rec)


def test_negative_topic_length_is_corrupt() -> None:
    rec = bytearray(_golden_v4())
    rec[120] = 0xFF  # TOPICLEN = -1 (signed byte)
    with pytest.raises(CorruptDataError):
        read_record(rec)


def test_negative_properties_length_is_corrupt() -> None:
    rec = bytearray(_golden_v4())
    rec[127:129] = struct.pack(">h", -28)
    with pytest.raises(CorruptDataError):
        read_record(rec)


def test_v6_flag_without_v6_host_is_corrupt() -> None:
    rec = bytearray(_golden_v4())
    rec[36:40] = _i32(sysflag.BORNHOST_V6_FLAG)
    with pytest.raises(CorruptDataError):
        read_record(rec)


def test_invalid_utf8_topic_is_corrupt() -> None:
    rec = _encode(topic=b"\xff\xfe")
    with pytest.raises(CorruptDataError):
        read_record(rec)


def test_crc_checked_only_on_request() -> None:
    rec = bytearray(_golden_v4())
    rec[88] ^= 0x01  # flip a body bit
    assert isinstance(read_record(rec), RecordView)
    with pytest.raises(CorruptDataError) as info:
        read_record(rec, check_crc=True)
    assert info.value.position == 0
    with pytest.raises(CorruptDataError):
        decode_message(rec, check_crc=True)


def test_stored_crc_zero_is_accepted() -> None:
    # RocketMQ issue #9121: a stored BODYCRC of 0 is not checked.
    rec = _encode(body_crc=0)
    assert isinstance(read_record(rec, check_crc=True), RecordView)


def test_empty_body_crc_is_zero_and_checks() -> None:
    rec = _encode(body=b"", body_crc=masked_crc32(b""))
    assert isinstance(read_record(rec, check_crc=True), RecordView)


def test_recover_scenario_zeroed_topic_length_is_corrupt() -> None:
    # DefaultMessageStoreTest.testRecover: zero 16 bytes from the topic-length byte
    # (record start + 84 + 4 + bodyLen).
    rec = bytearray(_golden_v4())
    start = 84 + 4 + 32
    rec[start : start + 16] = bytes(16)
    with pytest.raises(CorruptDataError):
        read_record(rec)
