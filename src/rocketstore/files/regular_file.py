"""Opening files that must be regular files: a settings file, an ACL file, a file to dump,
and every file of a store (CommitLog, consume queue, checkpoint, config JSON).

Checked on the opened descriptor, which is opened non-blocking, so a FIFO does not block
the open (or the read) forever, /dev/zero is not read until memory runs out, and a store
file that is no regular file (or is empty where it cannot be) is refused by its path
instead of hanging a command or failing in ``mmap`` without saying which file.

Layer: files.
"""

from __future__ import annotations

import os
import stat
from typing import IO

from rocketstore.errors import ConfigError, CorruptDataError

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def file_kind(mode: int) -> str:
    """What a file of ``st_mode`` ``mode`` is, for an error ("a FIFO", "a directory"...)."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def open_regular_file(path: str, what: str) -> IO[bytes]:
    """``path`` opened for reading in binary. ConfigError ("WHAT PATH is a directory" /
    "... is not a regular file") for anything else; OSError when it cannot be opened."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | _CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
            raise ConfigError(f"{what} {path} is {kind}")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def open_store_file(path: str, flags: int = os.O_RDONLY, mode: int = 0o644) -> int:
    """A descriptor of the store file ``path`` opened with ``flags`` (blocking again once
    open). CorruptDataError naming the path when it is not a regular file (a FIFO, a
    directory, a device); OSError (FileNotFoundError...) when it cannot be opened."""
    fd = os.open(path, flags | os.O_NONBLOCK | _CLOEXEC, mode)
    try:
        st_mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(st_mode):
            raise CorruptDataError(f"{file_kind(st_mode)}, not a regular file", path=path)
        os.set_blocking(fd, True)
        return fd
    except BaseException:
        os.close(fd)
        raise


def read_store_file(path: str, limit: int = -1) -> bytes:
    """The bytes of the store file ``path`` (at most ``limit``), as ``open_store_file``
    opens it."""
    with os.fdopen(open_store_file(path), "rb") as f:
        return f.read(limit)


def require_regular(path: str) -> None:
    """CorruptDataError naming ``path`` unless it is a regular file (not followed past a
    symlink's target: ``os.stat``); OSError when it cannot be looked at."""
    st_mode = os.stat(path).st_mode
    if not stat.S_ISREG(st_mode):
        raise CorruptDataError(f"{file_kind(st_mode)}, not a regular file", path=path)
