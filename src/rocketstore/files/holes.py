"""Where a file may hold data: ``lseek(SEEK_DATA)`` / ``SEEK_HOLE``.

Layer: files. A CommitLog file is preallocated whole and filled from the start, so most of
the newest file is extents never written. Linux reports those as holes (ext4 and xfs do,
unless their pages were read into the page cache), and a hole reads as zeros: scans that
look for records or for the last non-zero byte skip them instead of reading them through
the mapping, which costs a page fault (and a zeroed page) per 4 KiB. Where the file system
cannot tell, every byte counts as data and the callers read it all, as before.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable


def next_data_finder(fd: int, size: int) -> Callable[[int], int]:
    """A function giving, for a position, where data may start at or after it (``size``
    when nowhere). ``fd`` must stay open while it is used."""

    def next_data(position: int) -> int:
        if position >= size:
            return size
        try:
            return min(size, os.lseek(fd, position, os.SEEK_DATA))
        except OSError as e:
            if e.errno == errno.ENXIO:  # only a hole from here to the end
                return size
            return position  # no SEEK_DATA here: look at everything

    return next_data


def data_spans(fd: int, start: int, end: int) -> list[tuple[int, int]]:
    """The parts of [start, end) that may hold data, in order (all of it where the file
    system cannot tell)."""
    spans: list[tuple[int, int]] = []
    at = start
    while at < end:
        try:
            begin = os.lseek(fd, at, os.SEEK_DATA)
        except OSError as e:
            if e.errno == errno.ENXIO:
                break
            return [*spans, (at, end)]
        if begin >= end:
            break
        try:
            finish = os.lseek(fd, begin, os.SEEK_HOLE)
        except OSError:
            return [*spans, (begin, end)]
        spans.append((begin, min(finish, end)))
        at = finish
    return spans
