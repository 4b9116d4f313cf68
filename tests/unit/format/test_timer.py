"""Timer store codecs (RocketMQ 5.3.3's TimerLog unit, Slot, TimerCheckpoint): golden
bytes built field by field, round trips, and arbitrary bytes decoding to a unit, a blank
or a corrupt/incomplete error only."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketstore.errors import CorruptDataError, IncompleteDataError
from rocketstore.format import timer as fmt

LONGS = st.integers(-(2**63), 2**63 - 1)
INTS = st.integers(-(2**31), 2**31 - 1)


def test_unit_golden_bytes() -> None:
    unit = fmt.TimerLogUnit(
        prev_pos=104,
        magic=fmt.MAGIC_DEFAULT | fmt.MAGIC_ROLL,
        enqueue_time_ms=1_700_000_000_000,
        delay_ms=5000,
        commit_log_offset=4096,
        size=230,
        topic_hash=-1_234_567,
    )
    expected = (
        struct.pack(">i", 52)
        + struct.pack(">q", 104)
        + struct.pack(">i", 3)
        + struct.pack(">q", 1_700_000_000_000)
        + struct.pack(">i", 5000)
        + struct.pack(">q", 4096)
        + struct.pack(">i", 230)
        + struct.pack(">i", -1_234_567)
        + struct.pack(">q", 0)
    )
    assert fmt.encode_unit(unit) == expected
    assert len(expected) == fmt.UNIT_SIZE
    assert fmt.decode_unit(expected) == unit
    assert unit.delayed_time_ms == 1_700_000_005_000 and unit.rolls and not unit.deletes


def test_blank_and_its_magic() -> None:
    # Java: 0xBBCCDDEE ^ 1880681586 + 8 (the + first), a negative int.
    assert (
        struct.unpack(">i", struct.pack(">I", 0xBBCCDDEE ^ 1880681594))[0] == fmt.BLANK_MAGIC_CODE
    )
    blank = fmt.encode_blank(40)
    assert blank == struct.pack(">iqi", 40, 0, fmt.BLANK_MAGIC_CODE)
    assert fmt.decode_unit(blank + bytes(24)) is None


def test_slot_and_checkpoint_golden_bytes() -> None:
    slot = fmt.Slot(1_700_000_005_000, 0, 52, 2, 0)
    data = fmt.encode_slot(slot, 1000)
    assert data == struct.pack(">qqqii", 1_700_000_005, 0, 52, 2, 0)
    assert fmt.decode_slot(data, 0, 1000) == slot
    assert fmt.slot_index(1_700_000_005_000, 1000) == 1_700_000_005 % (14 * 86400)
    cp = fmt.TimerCheckpoint(1, 2, 3, 4, 5, 6, 7)
    assert fmt.encode_timer_checkpoint(cp) == struct.pack(">7q", 1, 2, 3, 4, 5, 6, 7)
    assert fmt.decode_timer_checkpoint(fmt.encode_timer_checkpoint(cp)) == cp
    # A file of an older 5.x: four longs, no data version.
    assert fmt.decode_timer_checkpoint(struct.pack(">4q", 1, 2, 3, 4)) == (1, 2, 3, 4, 0, 0, 0)
    with pytest.raises(IncompleteDataError):
        fmt.decode_timer_checkpoint(b"\0" * 8)


@given(st.tuples(LONGS, st.integers(0, 15), LONGS, INTS, LONGS, INTS, INTS, LONGS))
def test_unit_round_trip(fields: tuple[int, int, int, int, int, int, int, int]) -> None:
    unit = fmt.TimerLogUnit(*fields)
    assert fmt.decode_unit(fmt.encode_unit(unit)) == unit


@given(st.binary(max_size=80))
def test_decoding_arbitrary_bytes(data: bytes) -> None:
    with contextlib.suppress(CorruptDataError, IncompleteDataError):
        fmt.decode_unit(data)
