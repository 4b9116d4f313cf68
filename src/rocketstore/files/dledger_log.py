"""What a DLedger CommitLog's own files say (layer: files): its checkpoint, the first entry
of its log and the last unit of its index, for ``stats`` and ``check``.

The records in the data files are read through the CommitLog like any others (their
offsets are the records', format.dledger_entry); these are DLedger's bookkeeping beside
them, which RocketMQ's DLedgerCommitLog leaves to DLedger.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from rocketstore.errors import CorruptDataError, IncompleteDataError
from rocketstore.files.mapped_file_queue import offset_file_paths
from rocketstore.files.regular_file import open_store_file, read_store_file
from rocketstore.format import dledger_entry as dl


@dataclass(frozen=True, slots=True)
class DLedgerLog:
    """A DLedger member's log as its files describe it. ``None`` fields could not be read
    (no such file, or bytes that are no entry/unit): a reader shows them as unknown."""

    home: str
    first_entry: dl.EntryHeader | None
    last_indexed: dl.IndexUnit | None
    end_index: int | None
    committed_index: int | None


def describe(home: str, data_dirs: tuple[str, ...]) -> DLedgerLog:
    """The member at ``home`` (``dledger-<selfId>/``) with its log in ``data_dirs`` (an
    unreadable checkpoint leaves its fields unknown: ``check`` names it)."""
    try:
        checkpoint = read_checkpoint(home)
    except CorruptDataError:
        checkpoint = {}
    return DLedgerLog(
        home=home,
        first_entry=first_entry(data_dirs),
        last_indexed=last_index_unit(os.path.join(home, dl.INDEX_DIR)),
        end_index=checkpoint.get("endIndex"),
        committed_index=checkpoint.get("committedIndex"),
    )


def read_checkpoint(home: str) -> dict[str, int]:
    """``endIndex`` and ``committedIndex`` of ``home/checkpoint`` (empty when there is no
    such file; DLedger writes it every few seconds and at shutdown)."""
    try:
        text = read_store_file(os.path.join(home, dl.CHECKPOINT_FILE), 1 << 16).decode("latin-1")
    except FileNotFoundError:
        return {}
    return dl.parse_checkpoint(text)


def first_entry(data_dirs: tuple[str, ...]) -> dl.EntryHeader | None:
    """The header at the start of the first data file (DLedger's ledgerBeginIndex is its
    index), or None when there is none or it is not an entry."""
    paths = offset_file_paths(data_dirs)
    if not paths:
        return None
    start, path = min(paths.items())
    head = read_store_file(path, dl.BODY_OFFSET)  # (offset_file_paths refused a FIFO)
    try:
        header = dl.decode_entry_header(head, 0)
    except IncompleteDataError:
        return None
    size = os.path.getsize(path)
    return header if dl.entry_problem(header, start, start + size) is None else None


def last_index_unit(index_dir: str) -> dl.IndexUnit | None:
    """The last unit DLedger wrote to its index (units are written one after another
    into zero-filled files, so the last non-zero one is found by bisection)."""
    paths = offset_file_paths((index_dir,))
    for _start, path in sorted(paths.items(), reverse=True):
        count = os.path.getsize(path) // dl.INDEX_UNIT_SIZE
        with os.fdopen(open_store_file(path), "rb") as f:

            def unit(number: int) -> bytes:
                f.seek(number * dl.INDEX_UNIT_SIZE)
                return f.read(dl.INDEX_UNIT_SIZE)

            low, high = 0, count  # units [0, low) are written, [high, count) are not
            while low < high:
                middle = (low + high) // 2
                if any(unit(middle)):
                    low = middle + 1
                else:
                    high = middle
            if low:
                return dl.decode_index_unit(unit(low - 1))
    return None
