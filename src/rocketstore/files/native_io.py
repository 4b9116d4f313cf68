"""The C extension's file I/O entry points (pwrite, msync, madvise), bound here in the
files layer through the registry of :mod:`rocketstore.format.native`: the format layer
does no I/O. Each is None without the extension; its twin is the Python I/O it speeds up.

Layer: files. Imports only the format layer's registry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocketstore.format.native import bind

if TYPE_CHECKING:
    from rocketstore.format import _native as _c
else:
    from rocketstore.format import native as _registry

    _c = _registry.native if _registry.native is not None else _registry._Unbuilt()

write_batch = bind(
    _c.write_batch,
    "write_batch",
    "rocketstore.files.mapped_file:MappedFile.write_batch",
    module=__name__,
)
write_parts = bind(
    _c.write_parts,
    "write_parts",
    "rocketstore.files.mapped_file:MappedFile.write_through_parts",
    module=__name__,
)
msync_range = bind(
    _c.msync_range, "msync_range", "rocketstore.files.mapped_file:MappedFile.flush", module=__name__
)
populate_write = bind(
    _c.populate_write,
    "populate_write",
    "none: only faults pages in (MappedFile.prefault does nothing without it)",
    module=__name__,
)
