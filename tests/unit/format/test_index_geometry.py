"""infer_geometry: an index file's slots and entries read off its bytes, for any ratio."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore.format.index_geometry import SAMPLE, infer_geometry
from rocketstore.format.index_layout import (
    IndexEntry,
    IndexHeader,
    decode_header,
    entry_position,
    file_size,
    pack_entry_into,
    pack_header_into,
    pack_slot_into,
    slot_position,
)

HASHES = st.integers(min_value=0, max_value=2**31 - 1)


def build(slots: int, entries: int, hashes: list[int], first_offset: int = 1000) -> bytearray:
    """An index file as RocketMQ's putKey leaves it after putting ``hashes`` in order."""
    buf = bytearray(file_size(slots, entries))
    newest = [0] * slots
    count = 1
    for i, key_hash in enumerate(hashes):
        slot = key_hash % slots
        entry = IndexEntry(key_hash, first_offset + 97 * i, i // 7, newest[slot])
        pack_entry_into(buf, entry_position(slots, count), entry)
        newest[slot] = count
        pack_slot_into(buf, slot_position(slot), count)
        count += 1
    used = sum(1 for n in newest if n)
    last = first_offset + 97 * (len(hashes) - 1)
    pack_header_into(buf, IndexHeader(1, 2, first_offset, last, used, count))
    return buf


@settings(max_examples=300, deadline=None)
@given(
    slots=st.integers(min_value=1, max_value=400),
    entries=st.integers(min_value=2, max_value=500),
    data=st.data(),
)
def test_any_geometry_with_entries_is_found(slots: int, entries: int, data: st.DataObject) -> None:
    keys = data.draw(st.integers(min_value=1, max_value=entries - 1))
    hashes = data.draw(st.lists(HASHES, min_size=keys, max_size=keys))
    assert infer_geometry(build(slots, entries, hashes)) == (slots, entries)


@settings(max_examples=100, deadline=None)
@given(
    slots=st.integers(min_value=1, max_value=64),
    entries=st.integers(min_value=8, max_value=64),
    small=st.lists(st.integers(min_value=0, max_value=6), min_size=1, max_size=5),
    data=st.data(),
)
def test_small_first_hashes_do_not_mislead_it(
    slots: int, entries: int, small: list[int], data: st.DataObject
) -> None:
    """The first keys' hashes at or below indexCount (0 included: abs(MIN_VALUE))."""
    rest = data.draw(st.lists(HASHES, min_size=0, max_size=entries - 1 - len(small)))
    hashes = small + rest
    if len(hashes) >= entries:
        hashes = hashes[: entries - 1]
    assert infer_geometry(build(slots, entries, hashes)) == (slots, entries)


def test_rocketmq_default_ratio_and_a_big_file() -> None:
    rng = random.Random(3)
    hashes = [rng.randrange(2**31) for _ in range(3 * SAMPLE)]
    assert infer_geometry(build(5_000, 20_000, hashes)) == (5_000, 20_000)
    assert infer_geometry(build(50_000, 12_000, hashes[:11_999])) == (50_000, 12_000)
    full = [rng.randrange(2**31) for _ in range(99)]
    assert infer_geometry(build(7, 100, full)) == (7, 100)  # full: indexCount == entries


def test_no_entries_or_no_index_file_says_none() -> None:
    assert infer_geometry(build(16, 32, [])) is None
    assert infer_geometry(bytes(100)) is None
    assert infer_geometry(b"") is None
    assert infer_geometry(bytes(41)) is None


def test_a_damaged_entry_or_two_do_not_hide_it_more_do() -> None:
    """``check`` reports damaged entries one by one, so a few must not hide the geometry;
    a file whose entries mostly disagree is no index file the size allows."""
    rng = random.Random(5)
    good = build(16, 32, [rng.randrange(2**31) for _ in range(30)])
    damaged = bytearray(good)
    for number in (5, 17):  # each names a later entry as its previous one
        position = entry_position(16, number) + 16
        damaged[position : position + 4] = (number + 3).to_bytes(4, "big")
    assert infer_geometry(damaged) == (16, 32)
    for number in range(1, 8):
        position = entry_position(16, number) + 16
        damaged[position : position + 4] = (number + 3).to_bytes(4, "big")
    assert infer_geometry(damaged) is None
    noise = bytearray(rng.randbytes(len(good)))
    noise[:40] = good[:40]
    assert infer_geometry(noise) is None


@settings(max_examples=300, deadline=None)
@given(
    slots=st.integers(min_value=1, max_value=200),
    entries=st.integers(min_value=3, max_value=300),
    data=st.data(),
)
def test_entries_a_crash_left_uncounted_do_not_mislead_it(
    slots: int, entries: int, data: st.DataObject
) -> None:
    """A crash between a bulk put's entries and slots and its header write: slots name
    entries past indexCount. The geometry is still found (recovery repairs the rest)."""
    keys = data.draw(st.integers(min_value=2, max_value=entries - 1))
    hashes = data.draw(st.lists(HASHES, min_size=keys, max_size=keys))
    buf = build(slots, entries, hashes)
    uncounted = data.draw(st.integers(min_value=1, max_value=keys - 1))
    header = decode_header(buf)
    pack_header_into(buf, header._replace(index_count=header.index_count - uncounted))
    assert infer_geometry(buf) == (slots, entries)
