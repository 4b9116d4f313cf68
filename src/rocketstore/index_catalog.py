"""The index directory's files (``index/<yyyyMMddHHmmssSSS>``): which are whole, which
were cut short at creation, and each one's geometry (hash slots x entries), from its size,
its siblings or its entries.

Layer: structures, below :mod:`rocketstore.index`. Reads files; writes nothing. Readers
(``check``, ``rebuild``, the CLI) and the index service decide a file's geometry here.
"""

from __future__ import annotations

import contextlib
import mmap
import os

from rocketstore.files.regular_file import open_store_file, read_store_file, require_regular
from rocketstore.format import index_layout as layout
from rocketstore.format.index_geometry import infer_geometry
from rocketstore.java_ints import JAVA_INT_MAX
from rocketstore.paths import is_index_file_name


def unfinished(path: str) -> bool:
    """An index file its creator died making: shorter than a header. It holds nothing
    (RocketMQ, loading it, maps it to its configured size and finds it empty): a writer
    removes it, a reader passes it over."""
    return os.path.getsize(path) < layout.HEADER_SIZE


def file_geometry(
    path: str, configured: tuple[int, int], *, siblings: dict[int, tuple[int, int]] | None = None
) -> tuple[int, int]:
    """(hash_slot_num, index_num) of the index file at ``path``: that of a file of the
    same size in ``siblings`` (size -> geometry, ``settled_geometries``: one broker makes
    all its files alike, so one file of a size is read for all), else ``configured``
    when its size fits that, else what its entries show (format.index_geometry), else
    four entries per slot (RocketMQ's default ratio) when its size fits that and it
    holds no entries. ValueError, naming the file and what to do, when nothing settles
    it."""
    size = os.path.getsize(path)
    found = siblings.get(size) if siblings else None
    if found is None:
        found = _settled_geometry(path, size, configured)
    if found is not None:
        return found
    if size > JAVA_INT_MAX:
        raise ValueError(
            f"index file {path} is {size} bytes, more than any index file RocketMQ makes "
            f"(its size is a Java int, at most {JAVA_INT_MAX}); it may be damaged or "
            "extended: move it away and rebuild the index (rocketstore rebuild)"
        )
    if not _holds_no_entries(path):
        # Entries that fit no geometry its size allows: a guess would misread them (and
        # a writer's repair would rewrite the wrong bytes).
        raise ValueError(
            f"index file {path} holds entries that read as no index file of its size "
            f"({size} bytes); it may be damaged: set max_hash_slot_num and max_index_num "
            "to those of the broker that wrote it, or rebuild the index (rocketstore rebuild)"
        )
    try:
        return layout.geometry_from_size(size)
    except ValueError:
        raise ValueError(
            f"index file {path} is {size} bytes: not the configured geometry ({configured[0]} "
            f"slots x {configured[1]} entries), and neither it nor another file of its size "
            "holds entries to tell its own; set max_hash_slot_num and max_index_num "
            "(RocketMQ's maxHashSlotNum and maxIndexNum) to those of the broker that wrote it"
        ) from None


def _settled_geometry(path: str, size: int, configured: tuple[int, int]) -> tuple[int, int] | None:
    """The geometry the file's size (the configured one) or its entries settle."""
    if size == layout.file_size(*configured):
        return configured
    if size < layout.HEADER_SIZE:
        raise ValueError(
            f"index file {path} is {size} bytes, shorter than its header: its creation was "
            "cut short (a writer removes it)"
        )
    if size == layout.HEADER_SIZE:
        return None
    with (
        os.fdopen(open_store_file(path), "rb") as f,
        mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm,
    ):
        return infer_geometry(mm)


def settled_geometries(paths: list[str], configured: tuple[int, int]) -> dict[int, tuple[int, int]]:
    """Size -> geometry of the whole index files in ``paths`` whose size or entries settle
    it: the ``siblings`` of ``file_geometry``."""
    settled: dict[int, tuple[int, int]] = {}
    for path in paths:
        try:
            size = os.path.getsize(path)
            if size in settled or size < layout.HEADER_SIZE:
                continue
            found = _settled_geometry(path, size, configured)
        except OSError:  # gone meanwhile (a writer's retention, beside a reader)
            continue
        if found is not None:
            settled[size] = found
    return settled


def _holds_no_entries(path: str) -> bool:
    """The header's indexCount says no entry was counted (or there is no header)."""
    header = read_store_file(path, layout.HEADER_SIZE)
    return len(header) < layout.HEADER_SIZE or layout.decode_header(header).index_count <= 1


def index_files(directory: str) -> tuple[list[str], list[str]]:
    """Paths of the index files in ``directory`` in name (time) order: the whole ones,
    and the ``unfinished`` ones (files gone meanwhile are in neither)."""
    if not os.path.isdir(directory):
        return [], []
    names = sorted(n for n in os.listdir(directory) if is_index_file_name(n))
    whole: list[str] = []
    cut_short: list[str] = []
    for name in names:
        path = os.path.join(directory, name)
        with contextlib.suppress(FileNotFoundError):  # a writer's retention, beside a reader
            # A FIFO (or directory...) so named: refused by its path, as the queues' files
            # are, instead of a later open waiting for a writer that never comes.
            require_regular(path)
            (cut_short if unfinished(path) else whole).append(path)
    return whole, cut_short


def newest_geometry(directory: str, configured: tuple[int, int]) -> tuple[int, int] | None:
    """``file_geometry`` of the newest whole index file in ``directory``, the one a
    writer's new files follow; None when there is none."""
    paths, _ = index_files(directory)
    if not paths:
        return None
    return file_geometry(paths[-1], configured, siblings=settled_geometries(paths, configured))
