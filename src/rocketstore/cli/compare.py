"""``compare STORE_A STORE_B``: is one store's CommitLog a byte prefix of the other's (a
slave behind its master, issue #36), and where do they first differ.

Layer: cli. Both stores are opened read-only: each one's data ends where recovery's walk
ends (``max_commit_log_offset``), never in a preallocated file's zero tail. Files are
matched by CommitLog offset; when retention left the two starting at different files,
only the range both hold is compared, and the answer says so. Exit status: 0 identical
or one a prefix of the other, 1 they differ, 2 a path that is not a store. Stores of
different CommitLog file sizes are compared up to the end of the smaller size's first
file compared: past the first blank their records lie at other offsets.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import click

from rocketstore.cli.context import CliContext, CliError
from rocketstore.errors import StoreError
from rocketstore.files.store_dir import missing_commitlog
from rocketstore.format import record as rec
from rocketstore.format.commitlog_walk import FileWalk
from rocketstore.format.record_scan import TopicTable
from rocketstore.store import MessageStore

# Bytes compared per read on each side.
CHUNK_BYTES = 4 * 1024 * 1024
BLANK_MAGIC_BYTES = rec.BLANK_MAGIC.to_bytes(4, "big", signed=True)


class NotAStoreError(CliError):
    """A STORE argument that cannot be compared: a usage error, exit status 2."""

    exit_code = 2


@dataclass(frozen=True)
class Side:
    path: str
    store: MessageStore

    @property
    def begin(self) -> int:
        return max(self.store.min_commit_log_offset(), 0)

    @property
    def end(self) -> int:
        return self.store.max_commit_log_offset()

    @property
    def file_size(self) -> int:
        return self.store.config.mapped_file_size_commit_log


def _open(ctx: CliContext, path: str) -> Side:
    if not os.path.isdir(path):
        raise NotAStoreError(f"{path}: not a directory (a store root is expected)")
    lacks = missing_commitlog(path, ctx.config.commit_log_dirs(path))
    if lacks is not None:
        raise NotAStoreError(f"{path}: not a store directory ({lacks})")
    try:
        return Side(path, MessageStore.open(path, ctx.config, read_only=True))
    except StoreError as e:
        raise NotAStoreError(f"{path}: cannot be opened as a store: {e}") from e


def _first_difference(a: bytes, b: bytes) -> int:
    """The index of the first byte where ``a`` and ``b`` (of one length) differ, found
    by halving (each comparison runs in C)."""
    low, high = 0, len(a)
    while high - low > 1:
        middle = (low + high) // 2
        if a[low:middle] != b[low:middle]:
            high = middle
        else:
            low = middle
    return low


def _differ_at(a: Side, b: Side, start: int, end: int) -> int | None:
    """The first CommitLog offset in [start, end) where the two differ, or None."""
    offset = start
    while offset < end:
        want = min(CHUNK_BYTES, end - offset)
        chunk_a = a.store.commitlog_data(offset, want) or b""
        chunk_b = b.store.commitlog_data(offset, want) or b""
        size = min(len(chunk_a), len(chunk_b), want)
        if size == 0:
            return offset  # (one side has no readable bytes there: a missing file)
        if chunk_a[:size] != chunk_b[:size]:
            return offset + _first_difference(chunk_a[:size], chunk_b[:size])
        offset += size
    return None


def _file_of(side: Side, offset: int) -> str | None:
    for first, path in side.store.commitlog_files():
        if first <= offset < first + side.store.config.mapped_file_size_commit_log:
            return os.path.basename(path)
    return None


def _record_holding(side: Side, offset: int) -> int | None:
    """The CommitLog offset of the valid record of ``side`` that holds byte ``offset``,
    found by the CommitLog walker from the start of its file, or None (past the records,
    or in a blank). The bytes before ``offset`` are the same on both sides, so one side's
    walk answers for both."""
    file_size = side.store.config.mapped_file_size_commit_log
    base = offset - offset % file_size
    written = min(file_size, side.end - base)
    if written <= 0:
        return None
    with side.store.commitlog_view(base, written) as view:
        if view is None:
            return None
        walk = FileWalk(view, base, 0, file_size, topics=TopicTable(), readable=written)
        for records in walk:
            starts, sizes = records.position, records.size
            holding = (starts <= offset - base) & (offset - base < starts + sizes)
            if holding.any():
                return base + int(starts[holding.argmax()])
    return None


def _record(side: Side, offset: int) -> dict[str, Any] | None:
    found = side.store.commitlog_record(offset) if offset < side.end else None
    if found is None:
        return None
    view = found[1]
    return {
        "topic": view.topic,
        "queueId": view.queue_id,
        "queueOffset": view.queue_offset,
        "size": view.size,
        "storeTimestamp": view.store_timestamp,
    }


def _describe(record: dict[str, Any] | None) -> str:
    if record is None:
        return "no valid record"
    return (
        f"{record['topic']}-{record['queueId']} queue offset {record['queueOffset']} "
        f"({record['size']} bytes)"
    )


def _compare(ctx: CliContext, a: Side, b: Side) -> int:
    start, end = max(a.begin, b.begin), min(a.end, b.end)
    answer: dict[str, Any] = {
        "a": {"store": a.path, "minOffset": a.begin, "maxOffset": a.end, "fileSize": a.file_size},
        "b": {"store": b.path, "minOffset": b.begin, "maxOffset": b.end, "fileSize": b.file_size},
        "comparedFrom": start,
        "comparedTo": max(start, end),
        "overlapOnly": a.begin != b.begin,
    }
    lines = [
        f"A {a.path}: CommitLog [{a.begin}, {a.end})",
        f"B {b.path}: CommitLog [{b.begin}, {b.end})",
    ]
    if a.begin != b.begin:
        lines.append(
            f"the two start at different files (retention): only [{start}, {max(start, end)})"
            ", which both hold, is compared"
        )
    if a.file_size != b.file_size:
        # Records never cross a file's end: the side with the smaller files closes its
        # first file with a blank where the other goes on, and everything after lies at
        # other offsets. Bytes are compared up to that file's end.
        smaller = a if a.file_size < b.file_size else b
        limit = start - start % smaller.file_size + smaller.file_size
        lines.append(
            f"the two have different CommitLog file sizes (A {a.file_size}, B {b.file_size} "
            f"bytes): records lie at the same offsets only up to the end of "
            f"{'A' if smaller is a else 'B'}'s file at {limit}, so only up to there is compared"
        )
        end = min(end, limit)
        answer["comparedTo"] = max(start, end)
        at = _differ_at(a, b, start, end) if start < end else None
        blank = None if at is None else _blank_before(smaller, at)
        if at is None or blank is not None:
            same = end if blank is None else blank
            answer |= {"verdict": "file_sizes_differ", "sameUpTo": same}
            lines.append(f"the same bytes from {start} up to {same}; past it they cannot match")
            status = 1
            return _finish(ctx, answer, lines, status)
    if start >= end and a.end != b.end:
        answer |= {"verdict": "disjoint"}
        lines.append("they hold no CommitLog range in common: nothing to compare")
        status = 1
    else:
        at = _differ_at(a, b, start, end)
        if at is None:
            if a.end == b.end:
                verdict, text = "identical", "identical"
            elif a.end < b.end:
                verdict, text = (
                    "a_prefix_of_b",
                    f"A is a prefix of B ({b.end - a.end} bytes behind)",
                )
            else:
                verdict, text = (
                    "b_prefix_of_a",
                    f"B is a prefix of A ({a.end - b.end} bytes behind)",
                )
            answer["verdict"] = verdict
            lines.append(text)
            status = 0
        else:
            file = _file_of(a, at) or _file_of(b, at)
            answer |= {"verdict": "differ", "offset": at, "file": file}
            where = (
                f"they differ at CommitLog offset {at} (file {file}, byte {at - start_of(a, at)})"
            )
            holder = _record_holding(a, at)
            if holder is not None:
                record_a, record_b = _record(a, holder), _record(b, holder)
                answer |= {"recordOffset": holder, "recordA": record_a, "recordB": record_b}
                where += (
                    f", {'at the start' if holder == at else f'byte {at - holder}'} of the "
                    f"record at {holder}: A has {_describe(record_a)}, B {_describe(record_b)}"
                )
            else:
                answer["recordOffset"] = None
                where += ", outside A's records"
            lines.append(where)
            status = 1
    return _finish(ctx, answer, lines, status)


def _finish(ctx: CliContext, answer: dict[str, Any], lines: list[str], status: int) -> int:
    if ctx.as_json:
        ctx.emit(answer)
    else:
        for line in lines:
            click.echo(line)
    return status


def _blank_before(side: Side, offset: int) -> int | None:
    """Where the END_OF_FILE blank of ``side`` starts whose 8-byte header holds byte
    ``offset`` (the first byte that differs may be any of its size or magic), or None."""
    for start in range(offset, max(offset - 8, -1), -1):
        head = side.store.read_commitlog(start, 8)
        if head is not None and len(head) == 8 and bytes(head[4:8]) == BLANK_MAGIC_BYTES:
            return start
    return None


def start_of(side: Side, offset: int) -> int:
    """The first CommitLog offset of the file holding ``offset``."""
    return offset - offset % side.store.config.mapped_file_size_commit_log


@click.command("compare", short_help="Is one store's CommitLog a prefix of another's (a slave's).")
@click.argument("store_a", metavar="STORE_A")
@click.argument("store_b", metavar="STORE_B")
@click.pass_obj
def compare(ctx: CliContext, store_a: str, store_b: str) -> None:
    """Compare two stores' CommitLogs by offset: identical, one a prefix of the other
    (exit 0), or where they first differ (exit 1: offset, file and, at a record start,
    the record on each side). Each side's data ends where its valid records end. A path
    that is not a store: exit 2. Example: rocketstore compare ./master-store ./slave-store"""
    a = _open(ctx, store_a)
    try:
        b = _open(ctx, store_b)
        try:
            status = _compare(ctx, a, b)
        finally:
            b.store.close()
    finally:
        a.store.close()
    if status:
        raise click.exceptions.Exit(status)


def register(group: click.Group) -> None:
    group.add_command(compare)
