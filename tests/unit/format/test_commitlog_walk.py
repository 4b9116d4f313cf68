"""The CommitLog walker's verdicts, one case each (tests/property/test_commitlog_walk.py
holds every reader to them over fuzzed files)."""

from __future__ import annotations

import pytest

from rocketstore.format import record as rec
from rocketstore.format.commitlog_walk import FileWalk, Verdict
from rocketstore.format.crc import masked_crc32
from rocketstore.format.record_scan import Stop, TopicTable

FILE = 2048
BASE = 5 * FILE


def _record(offset: int, body: bytes = b"payload", crc: int | None = None) -> bytes:
    return rec.encode_record(
        topic=b"T",
        body=body,
        properties=b"TAGS\x01a",
        queue_id=0,
        flag=0,
        queue_offset=0,
        physical_offset=offset,
        sys_flag=0,
        born_timestamp=1,
        born_host=bytes(8),
        store_timestamp=2,
        store_host=bytes(8),
        reconsume_times=0,
        prepared_transaction_offset=0,
        body_crc=masked_crc32(body) if crc is None else crc,
    )


def _file(
    count: int, *, blank: bool = False, wrong_crc_at: int = -1
) -> tuple[bytearray, list[int]]:
    data = bytearray()
    starts = []
    for i in range(count):
        starts.append(len(data))
        data += _record(BASE + len(data), crc=1 if i == wrong_crc_at else None)
    if blank:
        data += rec.encode_blank(FILE - len(data))
    return data + bytes(FILE - len(data)), starts


def _walk(data: bytes | bytearray, **options: object) -> tuple[list[int], Verdict]:
    walk = FileWalk(memoryview(bytes(data)), BASE, 0, FILE, topics=TopicTable(), **options)  # type: ignore[arg-type]
    records, verdict = walk.run()
    return records.position.tolist(), verdict


def _end(data: bytes | bytearray, starts: list[int]) -> int:
    return starts[-1] + int.from_bytes(data[starts[-1] : starts[-1] + 4], "big")


def test_zeros_after_the_records_end_the_data() -> None:
    data, starts = _file(5)
    positions, verdict = _walk(data)
    assert positions == starts
    assert verdict == Verdict(_end(data, starts), Stop.END_OF_DATA, "end of data")
    assert not verdict.file_finished and not verdict.damaged


def test_a_blank_finishes_the_file_and_one_of_the_wrong_length_is_damage() -> None:
    data, starts = _file(3, blank=True)
    assert _walk(data)[1] == Verdict(_end(data, starts), Stop.BLANK)
    assert _walk(data)[1].file_finished
    at = _end(data, starts)
    data[at : at + 4] = (FILE - at - 8).to_bytes(4, "big")
    positions, verdict = _walk(data)
    assert positions == starts
    assert verdict == Verdict(at, Stop.CORRUPT, f"blank record with wrong length {FILE - at - 8}")


def test_a_body_crc_mismatch_stops_the_walk_only_when_crcs_are_checked() -> None:
    data, starts = _file(4, wrong_crc_at=2)
    assert _walk(data)[0] == starts
    positions, verdict = _walk(data, check_crc=True)
    assert positions == starts[:2]
    assert verdict.position == starts[2] and verdict.stop == Stop.CORRUPT
    assert verdict.reason.startswith("body CRC mismatch: stored 1, computed ")


def test_a_stale_record_is_damage_with_recoverys_reason() -> None:
    data, starts = _file(3)
    data[starts[1] + 28 + 7] ^= 1  # PHYSICALOFFSET's low byte
    positions, verdict = _walk(data)
    assert positions == starts[:1]
    assert verdict.stop == Stop.CORRUPT and verdict.position == starts[1]
    assert verdict.reason.startswith("stale record: PHYSICALOFFSET")


@pytest.mark.parametrize("into", [3, 8, 40])
def test_a_record_cut_by_the_readable_end_is_a_write_in_progress(into: int) -> None:
    """Only when the buffer stops short of the file: the whole file's walk at the same
    bytes calls the cut record damage or zeros."""
    data, starts = _file(3)
    readable = starts[2] + into
    positions, verdict = _walk(data, readable=readable)
    assert positions == starts[:2]
    assert verdict.stop == Stop.INCOMPLETE and verdict.position == starts[2]
    assert _walk(data)[0] == starts


def test_records_at_or_past_the_limit_are_left_for_the_next_walk() -> None:
    data, starts = _file(4)
    positions, verdict = _walk(data, limit=starts[2])
    assert positions == starts[:2]
    assert verdict == Verdict(starts[2], Stop.BOUNDARY)


def test_windows_smaller_than_a_record_change_nothing() -> None:
    data, _starts = _file(6, wrong_crc_at=4)
    assert _walk(data, window_bytes=7, check_crc=True) == _walk(data, check_crc=True)


def test_the_verdict_is_known_once_the_records_are_read() -> None:
    walk = FileWalk(memoryview(bytes(FILE)), BASE, 0, FILE, topics=TopicTable())
    with pytest.raises(RuntimeError):
        _ = walk.verdict
    assert list(walk) == []
    assert walk.verdict == Verdict(0, Stop.END_OF_DATA, "end of data")
