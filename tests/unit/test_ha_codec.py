"""The HA wire codec (format.ha) and the replicated-bytes check (format.replicated):
golden bytes built field by field, round trips, and fuzzed decoders that only ever say
"incomplete" or "corrupt"."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketstore.errors import ConfigError, CorruptDataError, IncompleteDataError
from rocketstore.format import ha
from rocketstore.format import record as rec
from rocketstore.format.crc import masked_crc32
from rocketstore.format.replicated import check_replicated

OFFSETS = st.integers(min_value=0, max_value=2**63 - 1)


def test_report_golden_bytes():
    expected = bytes.fromhex("0000000140000010")  # 0  8  MAX OFFSET, big-endian long
    assert ha.encode_report(0x1_4000_0010) == expected
    assert ha.last_report(expected) == (0x1_4000_0010, 8)


def test_transfer_golden_bytes():
    body = b"\xda\xa3\x20\xa7abc"
    expected = (
        bytes.fromhex("0000000040000000")  # 0  8  OFFSET
        + bytes.fromhex("00000007")  # 8  4  BODY SIZE
        + body  # 12  n  BODY
    )
    assert ha.encode_transfer(1 << 30, body) == expected
    transfer = ha.decode_transfer(expected)
    assert (transfer.offset, bytes(transfer.body), transfer.end) == (1 << 30, body, 19)
    assert not transfer.is_heartbeat


def test_heartbeat_is_a_header_with_size_zero():
    beat = ha.encode_transfer_header(4096, 0)
    assert beat == struct.pack(">qi", 4096, 0)
    assert ha.decode_transfer(beat).is_heartbeat


def test_only_the_last_whole_report_counts():
    buf = ha.encode_report(10) + ha.encode_report(20) + ha.encode_report(30)[:5]
    assert ha.last_report(buf) == (20, 16)
    assert ha.last_report(buf, 16) == (None, 16)


def test_encoders_refuse_what_the_wire_cannot_say():
    with pytest.raises(ConfigError):
        ha.encode_report(-1)
    with pytest.raises(ConfigError):
        ha.encode_transfer_header(-1, 0)
    with pytest.raises(ConfigError):
        ha.encode_transfer_header(0, ha.MAX_TRANSFER_BODY + 1)


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (struct.pack(">qi", -5, 0), "negative offset"),
        (struct.pack(">qi", 0, -1), "body size -1"),
        (struct.pack(">qi", 0, ha.MAX_TRANSFER_BODY + 1), "body size"),
    ],
)
def test_corrupt_transfer_headers(raw, problem):
    with pytest.raises(CorruptDataError, match=problem):
        ha.decode_transfer(b"xx" + raw, 2)


def test_negative_report_is_corrupt():
    with pytest.raises(CorruptDataError):
        ha.last_report(struct.pack(">q", -1))


@given(OFFSETS)
def test_report_round_trip(offset):
    assert ha.last_report(ha.encode_report(offset)) == (offset, 8)


@given(OFFSETS, st.binary(max_size=300), st.binary(max_size=20))
def test_transfer_round_trip(offset, body, after):
    wire = ha.encode_transfer(offset, body) + after
    transfer = ha.decode_transfer(wire)
    assert (transfer.offset, bytes(transfer.body)) == (offset, body)
    assert wire[transfer.end :] == after


@given(OFFSETS, st.binary(min_size=1, max_size=300), st.data())
def test_cut_transfer_is_incomplete(offset, body, data):
    wire = ha.encode_transfer(offset, body)
    cut = data.draw(st.integers(min_value=0, max_value=len(wire) - 1))
    with pytest.raises(IncompleteDataError):
        ha.decode_transfer(wire[:cut])


@given(st.binary(max_size=64), st.integers(min_value=0, max_value=8))
def test_fuzzed_decoders_say_incomplete_or_corrupt(raw, position):
    try:
        transfer = ha.decode_transfer(raw, position)
    except (IncompleteDataError, CorruptDataError):
        pass
    else:
        assert transfer.end <= len(raw)
    try:
        offset, end = ha.last_report(raw, position)
    except CorruptDataError:
        pass
    else:
        assert end <= max(len(raw), position)
        assert offset is None or offset >= 0


# --- transfer_run -------------------------------------------------------------------------


def _frames(draw_list: list[tuple[int, int, bytes]]) -> bytes:
    return b"".join(struct.pack(">qi", off, size) + body for off, size, body in draw_list)


FRAME = st.tuples(
    st.sampled_from([0, 100, 103, 104, 110, -1, 2**62]),
    st.sampled_from([0, 1, 3, 4, 6, -1, ha.MAX_TRANSFER_BODY + 1]),
    st.binary(max_size=8),
)


@given(
    st.lists(FRAME, max_size=8),
    st.sampled_from([0, 100, 103, 110]),
    st.integers(min_value=0, max_value=20),
)
def test_transfer_run_is_its_twin_and_reads_what_decode_transfer_reads(frames, end, cut):
    # Sizes mostly agree with the bodies, so runs follow one another; some lie.
    wire = _frames([(o, len(b) if s in (1, 3) else s, b) for o, s, b in frames])
    wire = wire[: max(0, len(wire) - cut)]
    want = ha.transfer_run_python(wire, end)
    got = ha.transfer_run(wire, end)
    assert [bytes(b) for b in got.bodies] == [bytes(b) for b in want.bodies]
    assert got[1:] == want[1:]


def test_transfer_run_stops():
    def frame(off: int, body: bytes) -> bytes:
        return ha.encode_transfer(off, body)

    run = ha.transfer_run(frame(100, b"abc") + frame(103, b"") + frame(103, b"de"), 100)
    assert [bytes(b) for b in run.bodies] == [b"abc", b"de"]
    assert run[1:] == (100, 105, 41, ha.TransferStop.INCOMPLETE, 0)
    assert ha.transfer_run(frame(100, b"abc") + frame(99, b""), 100)[1:] == (
        100,
        103,
        15,
        ha.TransferStop.BEHIND,
        99,
    )
    assert ha.transfer_run(frame(7, b"a"), 5)[1:] == (-1, 5, 0, ha.TransferStop.NOT_FOLLOWING, 7)
    assert ha.transfer_run(frame(7, b"a"), 0)[1:] == (7, 8, 13, ha.TransferStop.INCOMPLETE, 0)
    bad = struct.pack(">qi", -1, 0)
    assert ha.transfer_run(frame(0, b"a") + bad, 0)[1:] == (0, 1, 13, ha.TransferStop.BAD_HEADER, 0)


# --- check_replicated ---------------------------------------------------------------------


def _records(base: int, count: int) -> bytes:
    out = b""
    for i in range(count):
        body = b"x" * (i * 7 % 50)
        out += rec.encode_record(
            topic=b"T",
            queue_id=0,
            flag=0,
            body=body,
            properties=b"",
            reconsume_times=0,
            prepared_transaction_offset=0,
            body_crc=masked_crc32(body),
            queue_offset=i,
            physical_offset=base + len(out),
            sys_flag=0,
            born_timestamp=1,
            born_host=b"\x7f\x00\x00\x01\x00\x00\x00\x01",
            store_timestamp=1000 + i,
            store_host=b"\x7f\x00\x00\x01\x00\x00\x00\x02",
        )
    return out


def test_check_replicated_whole_and_cut_records():
    data = _records(4096, 5)
    assert check_replicated(data, 4096, 1 << 20) == (len(data), 1004)
    first = rec.read_record(data, 0)
    assert isinstance(first, rec.RecordView)
    cut = check_replicated(data[: first.size + 3], 4096, 1 << 20)
    assert cut == (first.size, 1000)


def test_check_replicated_refuses_a_record_of_another_place():
    data = _records(0, 2)
    with pytest.raises(CorruptDataError, match="PHYSICALOFFSET") as raised:
        check_replicated(data, 64, 1 << 20)
    assert raised.value.position == 64


def test_check_replicated_refuses_a_flipped_body_byte():
    data = bytearray(_records(0, 3))
    first = rec.read_record(bytes(data), 0)
    assert isinstance(first, rec.RecordView)
    second = rec.read_record(bytes(data), first.size)
    assert isinstance(second, rec.RecordView) and second.body_length
    data[second.body_position] ^= 0x01
    with pytest.raises(CorruptDataError):
        check_replicated(bytes(data), 0, 1 << 20)


def test_check_replicated_blank_ends_the_file():
    data = _records(0, 2)
    file_end = len(data) + 64
    blank = rec.encode_blank(64) + bytes(56)
    assert check_replicated(data + blank, 0, file_end) == (file_end, 1001)
    with pytest.raises(CorruptDataError, match="blank"):
        check_replicated(data + rec.encode_blank(60), 0, file_end)


@given(st.binary(max_size=200), st.integers(min_value=0, max_value=1 << 20))
def test_check_replicated_fuzz(raw, base):
    try:
        checked = check_replicated(raw, base, 4096)
    except CorruptDataError:
        return
    assert 0 <= checked.next_record <= 4096
