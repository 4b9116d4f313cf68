"""The buffer types codecs accept (a type alias only; no I/O happens here)."""

from __future__ import annotations

import mmap
from typing import TypeAlias

ReadableBuffer: TypeAlias = bytes | bytearray | memoryview | mmap.mmap
WritableBuffer: TypeAlias = bytearray | memoryview | mmap.mmap
