"""SYSFLAG bits (``MessageSysFlag``, spec 1.4) and which records get CQ / index entries."""

from __future__ import annotations

import pytest

from rocketstore.format import sysflag
from rocketstore.format.sysflag import gets_index_entry, gets_queue_entry, transaction_type


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("COMPRESSED_FLAG", 0x1),
        ("MULTI_TAGS_FLAG", 0x2),
        ("TRANSACTION_NOT_TYPE", 0x0),
        ("TRANSACTION_PREPARED_TYPE", 0x4),
        ("TRANSACTION_COMMIT_TYPE", 0x8),
        ("TRANSACTION_ROLLBACK_TYPE", 0xC),
        ("TRANSACTION_MASK", 0xC),
        ("BORNHOST_V6_FLAG", 0x10),
        ("STOREHOSTADDRESS_V6_FLAG", 0x20),
        ("NEED_UNWRAP_FLAG", 0x40),
        ("INNER_BATCH_FLAG", 0x80),
        ("COMPRESSION_TYPE_MASK", 0x700),
    ],
)
def test_constants(name: str, value: int) -> None:
    assert getattr(sysflag, name) == value


OTHER_BITS = (
    sysflag.COMPRESSED_FLAG
    | sysflag.MULTI_TAGS_FLAG
    | sysflag.BORNHOST_V6_FLAG
    | sysflag.STOREHOSTADDRESS_V6_FLAG
    | sysflag.NEED_UNWRAP_FLAG
    | sysflag.INNER_BATCH_FLAG
    | 0x300  # ZLIB compression type
)


@pytest.mark.parametrize(
    ("kind", "queue_entry", "index_entry"),
    [
        (sysflag.TRANSACTION_NOT_TYPE, True, True),
        (sysflag.TRANSACTION_PREPARED_TYPE, False, True),
        (sysflag.TRANSACTION_COMMIT_TYPE, True, True),
        (sysflag.TRANSACTION_ROLLBACK_TYPE, False, False),
    ],
)
@pytest.mark.parametrize("other", [0, OTHER_BITS])
def test_transaction_types(kind: int, queue_entry: bool, index_entry: bool, other: int) -> None:
    flags = kind | other
    assert transaction_type(flags) == kind
    assert gets_queue_entry(flags) is queue_entry
    assert gets_index_entry(flags) is index_entry


def test_negative_sys_flag_uses_the_same_bits() -> None:
    # SYSFLAG is a signed int on disk; a set sign bit does not change the transaction bits.
    assert transaction_type(-(2**31) | 0x8) == sysflag.TRANSACTION_COMMIT_TYPE
    assert gets_queue_entry(-(2**31) | 0x8)
    assert not gets_index_entry(-1)  # all bits set -> ROLLBACK
