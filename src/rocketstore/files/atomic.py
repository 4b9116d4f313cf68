"""Atomic file replacement as RocketMQ's ConfigManager does it: ``.tmp`` -> ``.bak`` -> rename.

Layer: files.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

from rocketstore.errors import ConfigError
from rocketstore.files.regular_file import read_store_file


def write_atomic(
    path: str,
    data: bytes,
    *,
    keep_backup: bool = True,
    keep_mode: bool = False,
    create_mode: int = 0o666,
) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old or the new file whole;
    ``keep_mode`` gives the new file the old one's permission bits (an operator's file);
    ``create_mode`` (before the umask) is the ``.tmp`` file's from its creation on, so a
    file of secrets is never readable by others, not even for a moment."""
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, create_mode)
    if create_mode != 0o666:
        os.fchmod(fd, create_mode)  # a .tmp a crash left keeps its old mode otherwise
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    if keep_mode and os.path.exists(path):
        shutil.copymode(path, tmp)
    if keep_backup and os.path.exists(path):
        shutil.copyfile(path, path + ".bak")
    os.replace(tmp, path)
    fsync_directory(os.path.dirname(os.path.abspath(path)))


def fsync_directory(path: str) -> None:
    """Make the entries of directory ``path`` (files created, renamed) durable."""
    dir_fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def read_with_backup(path: str) -> bytes | None:
    """The file's bytes, or its ``.bak`` when the file is missing or empty."""
    for candidate in (path, path + ".bak"):
        try:
            data = read_store_file(candidate)  # (a FIFO so named is refused, not waited on)
        except FileNotFoundError:
            continue
        if data.strip():
            return data
    return None


def read_json_with_backup(path: str, what: str) -> Any:
    """The JSON document of ``path`` (its ``.bak`` when it is gone), None when neither
    exists; ConfigError naming ``what`` when it is not JSON."""
    raw = read_with_backup(path)
    if raw is None:
        return None
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ConfigError(f"{what} is not JSON: {e}") from e
