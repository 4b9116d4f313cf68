"""The bulk decoders (record scan, properties) against the scalar codecs: records of a
range (numpy header decode and validation vs ``read_record``), property values and hashes
(numpy vs ``decode_properties`` and Java's hashCode), and fuzzed bytes."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore.format import native
from rocketstore.format import properties_scan as bulk
from rocketstore.format import record as rec
from rocketstore.format.commitlog_walk import scan_range
from rocketstore.format.javahash import index_key_hash, tags_code
from rocketstore.format.properties import decode_properties, split_keys
from rocketstore.format.record_scan import RangeCorruptError, Stop, TopicTable
from rocketstore.rebuild.passes import queue_layout

FILE = 4096
BASE = 3 * FILE

# Property text: names and values from a small alphabet that includes the separators, so
# malformed, duplicated and empty segments all occur.
_text = st.text(alphabet="TAGSKEYUNIQ_ \x01\x02ab#é", max_size=40)
_props = st.one_of(
    _text,
    st.lists(
        st.tuples(st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "X", ""]), _text), max_size=6
    ).map(lambda pairs: "\x02".join(f"{k}\x01{v}" for k, v in pairs)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_props, min_size=1, max_size=8), st.sampled_from(["T", "Töpic", "%RETRY%g"]))
def test_bulk_properties_match_the_scalar_decoder(texts: list[str], topic: str) -> None:
    blobs = [t.encode("utf-8") for t in texts]
    raw = np.frombuffer(b"\x00" + b"".join(blobs), dtype=np.uint8)
    lengths = np.array([len(b) for b in blobs], dtype=np.int64)
    positions = 1 + np.cumsum(lengths) - lengths
    data, block_start = bulk.gather(raw, positions, lengths)
    found = bulk.segments(data, block_start)
    prefix = bulk.prefix_hashes([topic])
    for name in ("TAGS", "KEYS", "UNIQ_KEY"):
        last = bulk.find_last(data, found, name.encode(), len(blobs))
        for i, blob in enumerate(blobs):
            want = decode_properties(blob).get(name)
            if last[i] < 0:
                assert want is None
                continue
            start, length = found.value_start[last[i]], found.value_length[last[i]]
            got = bytes(data[start : start + length]).decode("utf-8", errors="replace")
            assert got == want
            if blob.isascii():
                h = bulk.hash_spans(data, np.array([start]), np.array([length]))
                if name == "TAGS":
                    assert int(bulk.to_signed(h)[0]) == tags_code(want)
                whole = bulk.combine(prefix, h, np.array([length]))
                assert int(bulk.index_hash(whole)[0]) == index_key_hash(f"{topic}#{want}")
            if name == "KEYS" and blob.isascii():
                tokens = bulk.key_tokens(data, np.array([i]), np.array([start]), np.array([length]))
                prefixes = prefix[[0] * len(tokens.owner)]
                hashes = bulk.index_hash(bulk.combine(prefixes, tokens.value_hash, tokens.length))
                assert hashes.tolist() == [index_key_hash(f"{topic}#{k}") for k in split_keys(want)]


def _record(topic: bytes, offset: int, v6: bool, props: bytes = b"TAGS\x01a") -> bytes:
    return rec.encode_record(
        topic=topic,
        body=b"body" * (offset % 7),
        properties=props,
        queue_id=offset % 3,
        flag=0,
        queue_offset=offset // 100,
        physical_offset=offset,
        sys_flag=0,
        born_timestamp=1,
        born_host=bytes(20) if v6 else bytes(8),
        store_timestamp=offset + 5,
        store_host=bytes(8),
        reconsume_times=0,
        prepared_transaction_offset=0,
        body_crc=0,
    )


def _file(shapes: list[tuple[bytes, bool]]) -> tuple[bytes, list[int]]:
    data = bytearray()
    starts = []
    for topic, v6 in shapes:
        record = _record(topic, BASE + len(data), v6)
        if len(data) + len(record) + 8 > FILE:
            break
        starts.append(len(data))
        data += record
    data += rec.encode_blank(FILE - len(data))
    return bytes(data + bytes(FILE - len(data))), starts


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from([b"A", b"Bb", b"\xc3\xa9t"]), st.booleans()), max_size=40),
    st.integers(0, FILE - 1),
    st.integers(1, FILE),
)
def test_range_scan_finds_the_records_starting_in_the_range(
    shapes: list[tuple[bytes, bool]], start: int, width: int
) -> None:
    data, starts = _file(shapes)
    end = min(FILE, start + width)
    topics = TopicTable()
    found = scan_range(memoryview(data), BASE, start, end, FILE, skip_corrupt=False, topics=topics)
    want = [s for s in starts if start <= s < end]
    assert found.records.position.tolist() == want
    for i, position in enumerate(want):
        view = rec.read_record(data, position)
        assert not isinstance(view, rec.Blank)
        assert topics.names[found.records.topic_id[i]] == view.topic
        assert found.records.store_timestamp[i] == view.store_timestamp
        assert found.records.properties_position[i] == view.properties_position
    if want:
        assert found.stop in (Stop.BOUNDARY, Stop.BLANK)


@pytest.mark.parametrize("width", [1, 2, 3, 4, 8])
def test_a_range_of_a_few_bytes_finds_the_record_starting_in_it(width: int) -> None:
    """A record's TOTALSIZE starts with zero bytes: a window that holds only those (a
    range ending a byte or three after the record's start) still finds it (the zero skip
    once returned the window's end, and the record was in no range)."""
    data, starts = _file([(b"A", False), (b"Bb", True), (b"A", False)] * 3)
    for position in starts[1:]:
        for start in (position, position - 1):
            found = scan_range(
                memoryview(data), BASE, start, start + width, FILE,
                skip_corrupt=False, topics=TopicTable(),
            )  # fmt: skip
            want = [position] if start + width > position else []
            assert found.records.position.tolist() == want, (start, width)


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=0, max_size=600), st.integers(0, 599))
def test_range_scan_of_arbitrary_bytes(noise: bytes, at: int) -> None:
    data, _ = _file([(b"A", False)] * 20)
    damaged = bytearray(data)
    damaged[at : at + len(noise)] = noise
    damaged = damaged[:FILE]
    view = memoryview(bytes(damaged))
    with contextlib.suppress(RangeCorruptError):  # the only error allowed out
        scan_range(view, BASE, 0, FILE, FILE, skip_corrupt=False, topics=TopicTable())
    found = scan_range(view, BASE, 0, FILE, FILE, skip_corrupt=True, topics=TopicTable())
    for region in found.corrupt:
        assert region.reason and region.length and region.length > 0


@pytest.mark.parametrize(
    ("offsets", "file_size", "want"),
    [
        ([0, 1, 2], 160, (0, 0, [True, True, True])),
        ([11, 12], 160, (160, 3, [True, True])),  # first unit in the 2nd file: blank fill
        ([5, 4, 6, 9], 160, (0, 5, [True, False, True, True])),  # 4 is a duplicate
        ([0, 0, 3], 160, (0, 0, [True, True, True])),  # offset 0 is never checked
        # A damaged record's QUEUEOFFSET that no queue can reach is left out, and the
        # next unit is the queue's first (as ConsumeQueue.put does).
        ([2**63 - 1, 1, 2], 160, (0, 1, [False, True, True])),
        ([-5, 0, 1], 160, (0, 0, [False, True, True])),
        ([3, -1, 4], 160, (0, 3, [True, False, True])),
        ([-1], 160, (0, 0, [False])),
    ],
)
def test_queue_layout_follows_the_put_rules(
    offsets: list[int], file_size: int, want: tuple[int, int, list[bool]]
) -> None:
    start, fill, written = queue_layout(np.array(offsets, dtype=np.int64), file_size)
    assert (start, fill, written.tolist()) == want


@pytest.mark.parametrize("before_end", [1, 2, 3, 4])
def test_a_record_starting_in_the_last_bytes_of_a_range_is_found(before_end: int) -> None:
    """Its magic lies past the range end (it starts 4 bytes into the record): the search
    for it must reach that far."""
    data, starts = _file([(b"A", False), (b"Bb", False), (b"A", False)])
    last = starts[-1]
    start, end = last - 50, last + before_end
    found = scan_range(
        memoryview(data), BASE, start, end, FILE, skip_corrupt=False, topics=TopicTable()
    )
    assert found.first_position == last
    assert found.records.position.tolist() == [last]


_ROW = st.tuples(
    st.integers(0, 3),  # topic id
    st.sampled_from([0, 1, 2, 7, -1, 2**31 - 1]),  # queue id
    st.sampled_from([0, 0x4, 0x8, 0xC, 0x10, 0x8 | 0x20]),  # sys flag: NOT, PREPARED, ...
    st.integers(0, 2**40),  # CommitLog offset
    st.integers(1, 2**20),  # size
    st.integers(-(2**63), 2**63 - 1),  # tagsCode
    st.integers(0, 5),  # queue offset step: mostly consecutive, sometimes not
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_ROW, max_size=60))
def test_queue_runs_match_the_groups_and_unit_codec(rows: list[tuple[int, ...]]) -> None:
    """The C queue_units (when built) and the numpy path give the same runs, and both agree
    with queue_groups and encode_unit record by record."""
    from rocketstore.format import record_scan
    from rocketstore.format.queue_unit import encode_unit

    count = len(rows)
    column = [np.array([r[k] for r in rows], dtype=np.int64) for k in range(7)]
    queue_offset = np.cumsum(np.where(column[6] == 0, 1, column[6])) if count else column[6]
    empty = np.zeros(count, dtype=np.int64)
    records = record_scan.Records(
        empty, column[4], column[1], queue_offset, column[2], empty, empty, empty, empty,
        empty, column[0], empty, empty, empty,
    )  # fmt: skip
    topics = TopicTable()
    for name in (b"A", b"B", b"C", b"D"):
        topics.intern(name)
    offsets, tags = column[3], column[5]
    runs = record_scan.queue_runs(records, offsets, tags)
    groups = record_scan.queue_groups(records, topics)
    assert [(topics.names[r.topic_id], r.queue_id) for r in runs] == [(g[1], g[2]) for g in groups]
    for run, (group_rows, _topic, _queue) in zip(runs, groups, strict=True):
        assert run.row_numbers().tolist() == group_rows.tolist()
        assert run.units == b"".join(
            encode_unit(int(offsets[i]), int(column[4][i]), int(tags[i])) for i in group_rows
        )
        picked = queue_offset[group_rows]
        assert run.first_queue_offset == picked[0]
        assert run.consecutive == bool(np.all(np.diff(picked) == 1))
        assert run.first_end == offsets[group_rows[0]] + column[4][group_rows[0]]
        assert run.last_end == offsets[group_rows[-1]] + column[4][group_rows[-1]]
    if native.queue_units is not None:  # and the numpy path, the same
        with native.python_only("queue_units"):
            assert record_scan.queue_runs(records, offsets, tags) == runs
