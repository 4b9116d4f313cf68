"""SYSFLAG bits of a CommitLog record (``MessageSysFlag``). Pure constants and helpers."""

from __future__ import annotations

COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x2
TRANSACTION_NOT_TYPE = 0x0
TRANSACTION_PREPARED_TYPE = 0x4
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC
TRANSACTION_MASK = 0xC
BORNHOST_V6_FLAG = 0x10
STOREHOSTADDRESS_V6_FLAG = 0x20
NEED_UNWRAP_FLAG = 0x40
INNER_BATCH_FLAG = 0x80
COMPRESSION_TYPE_MASK = 0x700


def transaction_type(sys_flag: int) -> int:
    return sys_flag & TRANSACTION_MASK


def gets_queue_entry(sys_flag: int) -> bool:
    """Only NOT and COMMIT records get a consume-queue entry (and a queue offset)."""
    return transaction_type(sys_flag) in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE)


def gets_index_entry(sys_flag: int) -> bool:
    """ROLLBACK records are not indexed; NOT, PREPARED and COMMIT are."""
    return transaction_type(sys_flag) != TRANSACTION_ROLLBACK_TYPE
