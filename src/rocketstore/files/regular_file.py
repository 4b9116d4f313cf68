"""Opening a file that must be a regular file (a settings file, an ACL file, a file to
dump): checked on the opened descriptor, which is opened non-blocking, so a FIFO does not
block the open (or the read) forever and /dev/zero is not read until memory runs out.

Layer: files.
"""

from __future__ import annotations

import os
import stat
from typing import IO

from rocketstore.errors import ConfigError


def open_regular_file(path: str, what: str) -> IO[bytes]:
    """``path`` opened for reading in binary. ConfigError ("WHAT PATH is a directory" /
    "... is not a regular file") for anything else; OSError when it cannot be opened."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
            raise ConfigError(f"{what} {path} is {kind}")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
