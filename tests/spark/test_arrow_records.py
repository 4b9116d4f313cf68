"""The column-wise record decoder against the per-record reference (record codec +
RowBuffer): same batch, or None for what it leaves to the reference."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore.format import record as rec
from rocketstore.format import sysflag
from rocketstore.format.crc import masked_crc32
from rocketstore.format.hosts import encode_host
from rocketstore.spark.arrow_records import decode_records
from rocketstore.spark.columns import RowBuffer


def _encode(topic: str, body: bytes, properties: str, *, born="10.1.2.3:77", flag=0, qid=0):
    return bytearray(
        rec.encode_record(
            topic=topic.encode("utf-8"),
            body=body,
            properties=properties.encode("utf-8"),
            queue_id=qid,
            flag=flag,
            queue_offset=0,
            physical_offset=0,
            sys_flag=0,
            born_timestamp=1_700_000_000_123,
            born_host=encode_host(born),
            store_timestamp=0,
            store_host=encode_host("192.168.0.9:10911"),
            reconsume_times=2,
            prepared_transaction_offset=0,
            body_crc=masked_crc32(body),
        )
    )


def _region(records: list[bytearray], base: int = 4096):
    """Lay records out back to back as the CommitLog would, at CommitLog offset ``base``;
    fill queue offset, physical offset and store time."""
    blob = bytearray()
    positions = []
    for i, data in enumerate(records):
        positions.append(len(blob))
        data[20:28] = (i + 10).to_bytes(8, "big", signed=True)  # queue offset
        data[28:36] = (base + len(blob)).to_bytes(8, "big", signed=True)  # physical offset
        data[56:64] = (1_700_000_001_000 + i).to_bytes(8, "big", signed=True)  # store time
        blob += data
    return bytes(blob), np.array(positions, dtype=np.int64)


def _decode(region: bytes, positions: np.ndarray, base: int = 4096, include_body=True):
    sizes = np.array(
        [int.from_bytes(region[p : p + 4], "big") for p in positions.tolist()], dtype=np.int64
    )
    return decode_records(
        region, positions, positions + base, sizes, np.arange(len(positions)) + 10, include_body
    )


def _reference(region: bytes, positions: np.ndarray, include_body=True) -> pa.RecordBatch:
    buffer = RowBuffer(include_body)
    for position in positions.tolist():
        view = rec.read_record(region, position)
        assert isinstance(view, rec.RecordView)
        buffer.append(rec.to_message_ext(region, view, read_body=include_body), view.queue_offset)
    return buffer.take()


property_text = st.lists(
    st.tuples(st.sampled_from(["KEYS", "TAGS", "UNIQ_KEY", "a", "é", ""]),
              st.text(alphabet="xyz é\u4e2d", max_size=6)),
    max_size=4,
).map(lambda pairs: "\x02".join(f"{k}\x01{v}" for k, v in pairs))  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["Orders", "Pay", "T\u00e9"]),
            st.binary(max_size=40),
            st.one_of(
                property_text,
                st.sampled_from(["", "\x02", "KEYS\x01a b\x02", "x\x01"]),
                # Raw text: separators anywhere (doubled, leading, trailing, 0x01 in values).
                st.text(alphabet="ab\x01\x02\u00e9", max_size=14),
            ),
        ),
        min_size=1,
        max_size=12,
    ),
    st.booleans(),
)
def test_same_rows_as_the_reference_or_none(messages, include_body):
    records = [_encode(t, b, p, flag=i, qid=i % 3) for i, (t, b, p) in enumerate(messages)]
    region, positions = _region(records)
    got = _decode(region, positions, include_body=include_body)
    want = _reference(region, positions, include_body)
    assert got is not None  # a repeated name too: first position, last value
    assert got.schema.equals(want.schema)
    assert got.to_pylist() == want.to_pylist()


def test_typical_records_decode_column_wise():
    records = [
        _encode(
            "Orders",
            b"x" * size,
            f"KEYS\x01k{i} shared\x02UNIQ_KEY\x01U{i}\x02TAGS\x01T",
            born=f"10.0.0.{i % 3}:{4000 + i}",  # several born hosts: formatted per value
        )
        for i, size in enumerate([0, 1, 12, 13, 100, 5000])
    ]
    region, positions = _region(records)
    got = _decode(region, positions)
    assert got is not None
    assert got.to_pylist() == _reference(region, positions).to_pylist()
    assert got.column("keys").to_pylist()[1] == ["k1", "shared"]


def test_records_that_do_not_check_out_are_declined():
    region, positions = _region([_encode("A", b"1", ""), _encode("A", b"2", "")])
    sizes = np.array([len(region) // 2] * 2, dtype=np.int64)
    queue_offsets = np.array([10, 11], dtype=np.int64)
    assert decode_records(region, positions, positions + 4096, sizes, queue_offsets, True)
    # The queue says another offset (the record went with retention, a new one is there).
    assert decode_records(region, positions, positions + 1, sizes, queue_offsets, True) is None
    assert (
        decode_records(region, positions, positions + 4096, sizes + 1, queue_offsets, True) is None
    )
    broken = bytearray(region)
    broken[4:8] = b"\x00\x00\x00\x00"  # magic
    assert (
        decode_records(bytes(broken), positions, positions + 4096, sizes, queue_offsets, True)
        is None
    )


def test_ipv6_hosts_and_bad_utf8_are_left_to_the_reference():
    v6 = _encode("A", b"1", "", born="[::1]:80")
    assert int.from_bytes(v6[36:40], "big") & sysflag.BORNHOST_V6_FLAG
    region, positions = _region([v6])
    assert _decode(region, positions) is None
    bad = _encode("A", b"1", "KEYS\x01ok")
    region, positions = _region([bad])
    raw = bytearray(region)
    raw[-2:] = b"\xff\xfe"  # the last property bytes are not UTF-8
    assert _decode(bytes(raw), positions) is None


def test_a_java_batch_entry_repeating_names_decodes_column_wise():
    """Every entry of a Java batch send carries the batch's properties after its own
    (CommitLog.MessageExtBatchEncoder), so WAIT comes twice: decoded here, as the reference
    does (first position, last value), not left to the per-record path."""
    records = [
        _encode(
            "Orders",
            b"body",
            f"KEYS\x01k{i}\x02WAIT\x01true\x02UNIQ_KEY\x01U{i}\x02CLUSTER\x01c\x02WAIT\x01false"
            + ("\x02KEYS\x01again" if i % 2 else ""),
        )
        for i in range(6)
    ]
    region, positions = _region(records)
    got = _decode(region, positions)
    assert got is not None
    assert got.to_pylist() == _reference(region, positions).to_pylist()
    first = got.column("properties").to_pylist()[1]
    assert first == [("KEYS", "again"), ("WAIT", "false"), ("UNIQ_KEY", "U1"), ("CLUSTER", "c")]
