"""The rebuild plan: CommitLog files cut into byte ranges, and the settings every task needs.

Layer: rebuild (above the store). Only lists files and reads sizes; no record is decoded
here. A range ``(file_offset, start, end)`` owns the records that *start* at positions
[start, end) of one CommitLog file, the same contract as the Spark source's commitlog
partitions (which use :func:`split_spans` too). Everything is a small frozen dataclass, so
plans and tasks pickle cheaply to worker processes and Spark executors.
"""

from __future__ import annotations

import contextlib
import math
import os
from dataclasses import dataclass

from rocketstore.config import StoreConfig, delay_levels_ms
from rocketstore.errors import ConfigError, NotAStoreError
from rocketstore.files.deleted_queues import load_deleted_queues
from rocketstore.files.holes import next_data_finder
from rocketstore.files.mapped_file_queue import (
    detect_file_size,
    offset_file_path,
    offset_file_paths,
)
from rocketstore.files.store_dir import missing_commitlog
from rocketstore.index_catalog import newest_geometry
from rocketstore.paths import (
    CONSUME_QUEUE_DIR,
    INDEX_DIR,
    CommitLogDirs,
    is_offset_file_name,
)

SCAN_DIR = "scan"  # the scan's spills, when they stay in the work directory

# Ranges are at most this big: small enough to balance two to a few dozen workers, big
# enough that the per-task overhead stays small (a Spark task costs about 55 ms of a slot
# on local[2], as much as scanning 25 MiB).
MAX_RANGE_BYTES = 512 * 1024 * 1024
MIN_RANGE_BYTES = 1024 * 1024

Span = tuple[int, int, int]  # file offset (its name), start position, end position


@dataclass(frozen=True)
class Geometry:
    """File sizes of the structures being rebuilt (taken from existing files)."""

    commit_log_file_size: int
    queue_file_size: int
    hash_slot_num: int
    index_num: int


@dataclass(frozen=True)
class RebuildSettings:
    """What every task needs besides its own range: the store, the output directory and
    the rules that make the output byte-identical to the dispatcher's."""

    root: str  # the store directory (absolute)
    commitlog_dirs: tuple[str, ...]  # where its CommitLog files are (paths.CommitLogDirs.all)
    # Those of them whose files frame records in DLedger entries (CommitLogDirs.dledger).
    dledger_dirs: tuple[str, ...]
    work_dir: str  # the temporary directory inside the store root
    spill_dir: str  # where the scan's intermediate files go (work_dir/scan, or scratch)
    geometry: Geometry
    delay_levels_ms: tuple[int, ...]
    queues: bool
    index: bool
    skip_corrupt: bool
    # LMQ multi-dispatch (enableMultiDispatch, enableLmq): the extra units a wrapped
    # record gives the queues it names (format.multi_dispatch).
    multi_dispatch: bool = False
    enable_lmq: bool = False
    # Queues deleted on purpose (files.deleted_queues): ``topic-queueId`` -> the CommitLog
    # offset below which their records get no unit, as recovery leaves them.
    deleted_queues: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class CommitLogRange:
    """Records starting at positions [start, end) of the CommitLog file ``file_offset``."""

    number: int  # the range's place in CommitLog order
    file_offset: int
    start: int
    end: int
    is_last_file: bool

    @property
    def first_offset(self) -> int:
        return self.file_offset + self.start

    @property
    def end_offset(self) -> int:
        return self.file_offset + self.end

    def describe(self) -> str:
        return f"CommitLog range [{self.first_offset}, {self.end_offset})"


def split_spans(spans: list[Span], piece_bytes: int) -> list[Span]:
    """Cut each ``(file_offset, start, end)`` into pieces of at most ``piece_bytes``."""
    if piece_bytes <= 0:
        raise ConfigError(f"piece size must be positive, got {piece_bytes}")
    pieces: list[Span] = []
    for first, start, end in spans:
        for cut in range(start, end, piece_bytes):
            pieces.append((first, cut, min(cut + piece_bytes, end)))
    return pieces


def even_piece_bytes(total_bytes: int, pieces: int, ceiling: int) -> int:
    """About ``total_bytes / pieces``, never above ``ceiling`` nor below 1."""
    if pieces <= 0:
        return ceiling
    return max(1, min(ceiling, math.ceil(total_bytes / pieces)))


def commitlog_files(root: str, dirs: CommitLogDirs | None = None) -> list[tuple[int, int]]:
    """(file offset, file length) of every CommitLog file, in offset order. ``dirs``: where
    they are (default ``<root>/commitlog``)."""
    dirs = dirs or CommitLogDirs.of(root)
    lacks = missing_commitlog(root, dirs)
    if lacks is not None:
        raise NotAStoreError(f"{root} is not a store directory ({lacks})")
    return [(start, os.path.getsize(p)) for start, p in offset_file_paths(dirs.all).items()]


def detect_geometry(root: str, config: StoreConfig) -> Geometry:
    """File sizes from the store's own files (as the engine adopts them), else ``config``."""
    commitlog_size = detect_file_size(config.commit_log_dirs(root).all)
    queue_size = config.consume_queue_file_size
    queue_base = os.path.join(root, CONSUME_QUEUE_DIR)
    for directory, _dirs, names in sorted(os.walk(queue_base)):
        found = sorted(n for n in names if is_offset_file_name(n))
        if found:
            queue_size = os.path.getsize(os.path.join(directory, found[0]))
            break
    geometry = configured = config.index_geometry
    with contextlib.suppress(ValueError):  # unknown: the configured one is used
        geometry = newest_geometry(os.path.join(root, INDEX_DIR), configured) or configured
    slots, entries = geometry
    return Geometry(
        commit_log_file_size=commitlog_size or config.mapped_file_size_commit_log,
        queue_file_size=queue_size,
        hash_slot_num=slots,
        index_num=entries,
    )


def plan_ranges(
    root: str,
    file_size: int,
    pieces: int,
    max_range_bytes: int,
    dirs: CommitLogDirs | None = None,
) -> list[CommitLogRange]:
    """The whole CommitLog (every file, up to its length) cut into about ``pieces`` ranges
    of at most ``max_range_bytes``. Where data really ends is found by the scan."""
    dirs = dirs or CommitLogDirs.of(root)
    files = commitlog_files(root, dirs)
    for offset, length in files:
        if length != file_size:
            raise ConfigError(
                f"CommitLog file {offset:020d} is {length} bytes, expected {file_size}"
            )
    spans: list[Span] = [(offset, 0, length) for offset, length in files if length > 0]
    total = sum(end - start for _, start, end in spans)
    piece = even_piece_bytes(total, pieces, max_range_bytes)
    piece = max(piece, min(MIN_RANGE_BYTES, max_range_bytes))
    last_file = files[-1][0] if files else -1
    # A DLedger log's file is one range: its records are found by following the entries
    # from the file's start (a range cannot find its first entry by itself).
    whole = {
        offset for offset, path in offset_file_paths(dirs.all).items() if dirs.holds_entries(path)
    }
    cut = split_spans([s for s in spans if s[0] not in whole], piece)
    cut = sorted(cut + [s for s in spans if s[0] in whole])
    cut = _join_zero_tail(dirs, cut, last_file)
    return [
        CommitLogRange(number, first, start, end, first == last_file)
        for number, (first, start, end) in enumerate(cut)
    ]


def _join_zero_tail(dirs: CommitLogDirs, spans: list[Span], last_file: int) -> list[Span]:
    """One range for the last file's pieces that start with zero bytes, as do all pieces
    after them, to the file's end: usually the unwritten rest of the file, then looked
    through by one task instead of one per piece. (Records may still lie there, after a
    long zero run inside a body: the joined range holds the same bytes.)"""
    mine = [i for i, span in enumerate(spans) if span[0] == last_file]
    if len(mine) < 2:
        return spans
    path = offset_file_path(dirs.all, last_file)
    join = None
    with open(path, "rb") as handle:
        next_data = next_data_finder(handle.fileno(), spans[mine[-1]][2])
        for i in reversed(mine[1:]):
            start = spans[i][1]
            if next_data(start) <= start:  # may hold data: look (a hole is zeros)
                handle.seek(start)
                if any(handle.read(8)):
                    break
            join = i
    if join is None or join == mine[-1]:
        return spans
    return [*spans[:join], (last_file, spans[join][1], spans[mine[-1]][2])]


def make_settings(
    root: str,
    work_dir: str,
    config: StoreConfig,
    *,
    queues: bool,
    index: bool,
    skip_corrupt: bool,
    spill_dir: str | None = None,
) -> RebuildSettings:
    dirs = config.commit_log_dirs(root)
    return RebuildSettings(
        root=os.path.abspath(root),
        commitlog_dirs=dirs.all,
        dledger_dirs=dirs.dledger,
        work_dir=work_dir,
        spill_dir=spill_dir or os.path.join(work_dir, SCAN_DIR),
        geometry=detect_geometry(root, config),
        delay_levels_ms=tuple(delay_levels_ms(config.message_delay_level)),
        queues=queues,
        index=index and config.message_index_enable,
        skip_corrupt=skip_corrupt,
        multi_dispatch=config.enable_multi_dispatch,
        enable_lmq=config.enable_lmq,
        deleted_queues=tuple(sorted(load_deleted_queues(root).items())),
    )
