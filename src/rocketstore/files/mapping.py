"""Memory mappings that keep no file descriptor open.

Layer: files. CPython's ``mmap.mmap`` duplicates the descriptor it maps and keeps the
duplicate until the mapping is closed (for ``size()`` and ``resize()``, which the store
never calls). A mapping itself needs no descriptor, so every mapped file cost the process
one: a writer with 64 KiB CommitLog files stopped with "Too many open files" (EMFILE in
the dispatcher) after about 4,000 of them, and a reader of a big store could not open it.
RocketMQ keeps one FileChannel open per mapped file as well, but the JVM raises the soft
open-file limit to the hard one at start-up; a Python process keeps the soft one.

Python 3.13 has ``trackfd=False`` for this. On 3.11 and 3.12 the duplicate is closed
here and the mapping's field set to -1 (what ``trackfd=False`` stores), after checking
that the object's layout is the one expected (the mapped size where it belongs, the
descriptor open on the same file); where anything differs the duplicate is kept, as
before.
"""

from __future__ import annotations

import ctypes
import logging
import mmap
import os
import platform
import sys

log = logging.getLogger(__name__)

# Offsets in CPython 3.11/3.12's ``mmap_object`` on a 64-bit Unix: PyObject_HEAD (16),
# ``char *data`` (8), ``Py_ssize_t size`` at 24, ``pos``, ``off_t offset``,
# ``Py_ssize_t exports`` at 48, ``int fd`` at 56.
_SIZE_AT = 24
_EXPORTS_AT = 48
_FD_AT = 56
_TRACKFD = sys.version_info >= (3, 13)
_CAN_DROP = (
    not _TRACKFD
    and sys.implementation.name == "cpython"
    and os.name == "posix"
    and ctypes.sizeof(ctypes.c_void_p) == 8
    and ctypes.sizeof(ctypes.c_ssize_t) == 8
    and platform.system() in ("Linux", "Darwin")
    and not hasattr(sys, "gettotalrefcount")  # a debug build has a longer object head
)


def map_file(fd: int, size: int, access: int) -> mmap.mmap:
    """``mmap.mmap(fd, size, access=access)`` holding no descriptor of its own (``fd``
    stays the caller's to close): see the module docstring."""
    if _TRACKFD:
        return mmap.mmap(fd, size, access=access, trackfd=False)  # type: ignore[call-arg,unused-ignore]
    mapping = mmap.mmap(fd, size, access=access)
    if _CAN_DROP:
        _drop_descriptor(mapping, fd, size)
    return mapping


def holds_descriptor(mapping: mmap.mmap) -> bool:
    """Whether ``mapping`` still keeps a descriptor open (for tests)."""
    try:
        mapping.size()  # fstat(2) on the mapping's own descriptor
    except OSError:
        return False
    return True


def _drop_descriptor(mapping: mmap.mmap, fd: int, size: int) -> None:
    base = id(mapping)
    field = ctypes.c_int.from_address(base + _FD_AT)
    dup = field.value
    if (
        ctypes.c_ssize_t.from_address(base + _SIZE_AT).value != size
        or ctypes.c_ssize_t.from_address(base + _EXPORTS_AT).value != 0
        or dup < 0
        or dup == fd
    ):
        log.debug("mmap object layout not recognised: its descriptor is kept")
        return
    try:
        mine, theirs = os.fstat(fd), os.fstat(dup)
    except OSError:
        return
    if (mine.st_dev, mine.st_ino) != (theirs.st_dev, theirs.st_ino):
        log.debug("mmap object layout not recognised: its descriptor is kept")
        return
    # The field first (a plain store, the GIL held throughout): from here on the mapping
    # never uses nor closes that number, which another open may then reuse.
    field.value = -1
    os.close(dup)
