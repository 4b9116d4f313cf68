"""DLedger entries, index units and checkpoints (format.dledger_entry): the bytes of
DLedger 0.3.1.2's DLedgerEntryCoder, its recovery's checks, and the walk over a file."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketstore.errors import CorruptDataError, IncompleteDataError
from rocketstore.format import dledger_entry as dl

LONGS = st.integers(min_value=0, max_value=(1 << 62))
BODIES = st.binary(min_size=1, max_size=200)


def test_entry_bytes_are_dledgers() -> None:
    """Field by field, as DLedgerEntryCoder.encode writes them (and as the golden store's
    first entry: magic 1, size 266, index 0, term 0, pos 0, three zero ints, body 218)."""
    body = bytes(range(218))
    raw = dl.encode_entry(0, 0, 0, body)
    assert raw[:48] == (
        struct.pack(">i", 1)  # magic
        + struct.pack(">i", 266)  # size: 48 + body
        + struct.pack(">q", 0)  # index
        + struct.pack(">q", 0)  # term
        + struct.pack(">q", 0)  # pos
        + struct.pack(">iii", 0, 0, 0)  # channel, chainCrc, bodyCrc
        + struct.pack(">i", 218)  # body size
    )
    assert raw[48:] == body
    header = dl.decode_entry_header(raw, 0)
    assert (header.size, header.body_offset, header.end) == (266, 48, 266)


@given(LONGS, LONGS, LONGS, BODIES, st.binary(max_size=40))
def test_an_entry_reads_back_wherever_it_lies(
    index: int, term: int, pos: int, body: bytes, before: bytes
) -> None:
    raw = dl.encode_entry(index, term, pos, body)
    header = dl.decode_entry_header(before + raw, len(before))
    assert (header.index, header.term, header.pos, header.body_size) == (
        index,
        term,
        pos,
        len(body),
    )
    assert header.size == len(raw)


@given(st.binary(max_size=100), st.integers(min_value=-5, max_value=120))
def test_decoders_take_any_bytes(data: bytes, position: int) -> None:
    """Arbitrary bytes give a header or IncompleteDataError, never another exception."""
    for decode in (dl.decode_entry_header, dl.decode_index_unit):
        with contextlib.suppress(IncompleteDataError):
            decode(data, position)


@given(LONGS, st.integers(min_value=1, max_value=1 << 30), LONGS, LONGS)
def test_an_index_unit_reads_back(pos: int, size: int, index: int, term: int) -> None:
    unit = dl.IndexUnit(dl.MAGIC_1, pos, size, index, term)
    raw = dl.encode_index_unit(unit)
    assert len(raw) == dl.INDEX_UNIT_SIZE
    assert raw[:12] == struct.pack(">iq", 1, pos)  # magic, then pos: encodeIndex's order
    assert dl.decode_index_unit(raw) == unit


def test_blank_is_minus_one_and_the_bytes_left() -> None:
    assert dl.encode_blank(100) == struct.pack(">ii", -1, 100)
    with pytest.raises(ValueError, match="needs 8 bytes"):
        dl.encode_blank(7)


def _header(**changes: int) -> dl.EntryHeader:
    fields = dict(magic=1, size=100, index=5, term=2, pos=1000, channel=0, chain_crc=0, body_crc=0)
    fields.update(body_size=fields["size"] - 48)
    fields.update(changes)
    return dl.EntryHeader(**fields)


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        (dict(magic=2), "unknown DLedger entry magic 2"),
        (dict(magic=0), "unknown DLedger entry magic 0"),
        (dict(size=44, body_size=-4), "is not past the 44-byte header"),
        (dict(body_size=51), "is not 48 + body 51"),
        (dict(pos=999), "says it is at 999"),
        (dict(size=1300, body_size=1252), "does not fit its file"),
        (dict(size=1196, body_size=1148), "does not fit its file"),  # leaves 4 bytes
        (dict(index=7), "index 7 does not follow 4"),
        (dict(term=1), "term 1 is below the previous 2"),
    ],
)
def test_entry_problems_are_dledger_recoverys_checks(changes: dict[str, int], why: str) -> None:
    previous = _header(index=4, pos=900)
    assert dl.entry_problem(_header(**changes), 1000, 2200, previous) is not None
    assert why in str(dl.entry_problem(_header(**changes), 1000, 2200, previous))


def test_a_valid_entry_has_no_problem() -> None:
    assert dl.entry_problem(_header(), 1000, 2200, _header(index=4, pos=900)) is None
    # Ending exactly at the file end is fine; so is the first entry a walk sees.
    assert dl.entry_problem(_header(size=1200, body_size=1152), 1000, 2200) is None


def _file(entries: list[bytes], size: int, blank: bool) -> bytes:
    data = b"".join(entries)
    if blank:
        data += dl.encode_blank(size - len(data))
    return data + bytes(size - len(data))


def test_walk_follows_entries_to_a_blank() -> None:
    first = dl.encode_entry(0, 1, 4096, b"a" * 30)
    second = dl.encode_entry(1, 1, 4096 + len(first), b"b" * 40)
    walk = dl.walk_entries(_file([first, second], 512, blank=True), 4096, 0, 512)
    assert [e.index for e in walk.entries] == [0, 1]
    assert walk.stop_reason is None  # the file is finished
    assert walk.stop_position == len(first) + len(second)


def test_walk_stops_at_zeros_and_at_a_bad_entry() -> None:
    first = dl.encode_entry(3, 1, 0, b"a" * 30)
    walk = dl.walk_entries(_file([first], 512, blank=False), 0, 0, 512)
    assert (len(walk.entries), walk.stop_position, walk.stop_reason) == (1, 78, dl.END_OF_DATA)
    stale = dl.encode_entry(9, 1, 78, b"b" * 10)  # index 9 after 3
    walk = dl.walk_entries(_file([first, stale], 512, blank=False), 0, 0, 512)
    assert walk.stop_position == 78
    assert walk.stop_reason == "DLedger entry index 9 does not follow 3"
    wrong_blank = first + struct.pack(">ii", -1, 5)
    walk = dl.walk_entries(wrong_blank + bytes(512 - len(wrong_blank)), 0, 0, 512)
    assert walk.stop_reason == "DLedger blank with wrong length 5"


def test_walk_checks_the_chain_across_files() -> None:
    previous = dl.decode_entry_header(dl.encode_entry(10, 3, 0, b"x"), 0)
    later = dl.encode_entry(11, 2, 512, b"y")
    walk = dl.walk_entries(_file([later], 512, blank=False), 512, 0, 512, previous)
    assert walk.stop_reason == "DLedger entry term 2 is below the previous 3"


@given(st.binary(min_size=0, max_size=300), st.integers(min_value=0, max_value=300))
def test_walk_takes_any_bytes(data: bytes, position: int) -> None:
    size = max(len(data), 1)
    walk = dl.walk_entries(data, 0, min(position, size), size)
    for entry in walk.entries:
        assert dl.entry_problem(entry, entry.pos, size) is None


def test_checkpoint_text() -> None:
    # As the golden store's (Properties.store without its date comment) and with one.
    assert dl.parse_checkpoint("committedIndex=521\nendIndex=521\n") == {
        "committedIndex": 521,
        "endIndex": 521,
    }
    text = "#Thu Nov 26 17:00:00 UTC 2026\nendIndex = 7\r\ncommittedIndex=-1\nother=x\n"
    assert dl.parse_checkpoint(text) == {"endIndex": 7, "committedIndex": -1}
    with pytest.raises(CorruptDataError, match="committedIndex is 'x1', not a number"):
        dl.parse_checkpoint("committedIndex=x1\n")
