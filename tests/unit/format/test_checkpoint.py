"""Checkpoint file: 4,096 bytes, longs at 0/8/16 (4.9) and 24/32 (5.x) (spec 5)."""

from __future__ import annotations

import struct

import pytest

from rocketstore.errors import IncompleteDataError
from rocketstore.format.checkpoint import (
    CHECKPOINT_FILE_SIZE,
    MIN_TIMESTAMP_MARGIN_MS,
    Checkpoint,
    decode_checkpoint,
    encode_checkpoint,
)

CP = Checkpoint(
    physic_msg_timestamp=1_700_000_000_100,
    logics_msg_timestamp=1_700_000_000_200,
    index_msg_timestamp=1_700_000_000_300,
    master_flushed_offset=4096,
    confirm_phy_offset=8192,
)


def test_constants() -> None:
    assert CHECKPOINT_FILE_SIZE == 4096
    assert MIN_TIMESTAMP_MARGIN_MS == 3000


def test_encode_49_golden() -> None:
    expected = (
        struct.pack(">q", 1_700_000_000_100)  # 0  physicMsgTimestamp
        + struct.pack(">q", 1_700_000_000_200)  # 8  logicsMsgTimestamp
        + struct.pack(">q", 1_700_000_000_300)  # 16 indexMsgTimestamp
        + bytes(4096 - 24)  # rest of the 4 KiB file: zero
    )
    assert encode_checkpoint(CP) == expected
    assert len(expected) == 4096


def test_encode_5x_golden() -> None:
    expected = (
        struct.pack(">q", 1_700_000_000_100)  # 0  physicMsgTimestamp
        + struct.pack(">q", 1_700_000_000_200)  # 8  logicsMsgTimestamp
        + struct.pack(">q", 1_700_000_000_300)  # 16 indexMsgTimestamp
        + struct.pack(">q", 4096)  # 24 masterFlushedOffset (5.x)
        + struct.pack(">q", 8192)  # 32 confirmPhyOffset (5.x)
        + bytes(4096 - 40)
    )
    assert encode_checkpoint(CP, with_5x_fields=True) == expected


def test_decode_49_image_has_zero_5x_fields() -> None:
    got = decode_checkpoint(encode_checkpoint(CP))
    assert got == CP._replace(master_flushed_offset=0, confirm_phy_offset=0)


def test_decode_5x_image() -> None:
    assert decode_checkpoint(encode_checkpoint(CP, with_5x_fields=True)) == CP


def test_decode_short_buffers() -> None:
    head = encode_checkpoint(CP, with_5x_fields=True)
    # 24..39 bytes: only the 4.9 fields.
    assert decode_checkpoint(head[:24]) == CP._replace(
        master_flushed_offset=0, confirm_phy_offset=0
    )
    assert decode_checkpoint(head[:39]).confirm_phy_offset == 0
    assert decode_checkpoint(head[:40]) == CP
    assert decode_checkpoint(memoryview(head)[:40]) == CP
    assert decode_checkpoint(bytearray(head)) == CP


@pytest.mark.parametrize("length", [0, 8, 23])
def test_decode_too_short_is_incomplete(length: int) -> None:
    with pytest.raises(IncompleteDataError):
        decode_checkpoint(bytes(length))


def test_defaults_are_zero() -> None:
    assert Checkpoint() == Checkpoint(0, 0, 0, 0, 0)
    assert encode_checkpoint(Checkpoint()) == bytes(4096)
    assert decode_checkpoint(bytes(4096)) == Checkpoint()


def test_store_checkpoint_test_write_and_read() -> None:
    # StoreCheckpointTest.testWriteAndRead: physic 0xAABB, logics 0xCCDD.
    cp = Checkpoint(physic_msg_timestamp=0xAABB, logics_msg_timestamp=0xCCDD)
    assert cp.physic_msg_timestamp - cp.min_timestamp() == 3000
    back = decode_checkpoint(encode_checkpoint(cp))
    assert (back.physic_msg_timestamp, back.logics_msg_timestamp) == (0xAABB, 0xCCDD)


@pytest.mark.parametrize(
    ("physic", "logics", "expected"),
    [
        (10_000, 20_000, 7_000),  # min(physic, logics) - 3 s
        (20_000, 10_000, 7_000),
        (1_000, 20_000, 0),  # never negative
        (3_000, 3_000, 0),
        (0, 0, 0),
    ],
)
def test_min_timestamp(physic: int, logics: int, expected: int) -> None:
    assert Checkpoint(physic, logics).min_timestamp() == expected


def test_min_timestamp_index() -> None:
    assert Checkpoint(10_000, 20_000, 5_000).min_timestamp_index() == 5_000
    assert Checkpoint(10_000, 20_000, 9_000).min_timestamp_index() == 7_000
