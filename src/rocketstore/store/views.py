"""What the layers above read of the store's parts: the read-only shapes the facade hands
out (``MessageStore.queue_view``), so that broker, cli and spark never hold a part that
writes.

Layer: store (the facade's package). Types only: no behaviour here.
"""

from __future__ import annotations

from typing import Protocol

from rocketstore.format.queue_unit import QueueUnit


class QueueView(Protocol):
    """One consume queue, read-only, as the store has it loaded (a read-only opener's:
    as of its last refresh). Queue offsets count units; CommitLog offsets are bytes."""

    @property
    def max_physic_offset(self) -> int:
        """The CommitLog offset just past the last record this queue has a unit for
        (-1: none yet)."""
        ...

    def min_offset(self) -> int:
        """The first queue offset still held (retention moves it on)."""
        ...

    def max_offset(self) -> int:
        """The next queue offset to be written."""
        ...

    def unit(self, queue_offset: int) -> QueueUnit | None:
        """The unit at ``queue_offset``, or None outside [min, max)."""
        ...

    def units_from(self, queue_offset: int, max_bytes: int | None = None) -> bytes | None:
        """Raw units from ``queue_offset`` to the readable end of the file holding it,
        None if no file holds it (retention removed it, or a hole)."""
        ...

    def next_file_offset(self, queue_offset: int) -> int:
        """First queue offset of the file after the one holding ``queue_offset``."""
        ...

    def unit_on_disk(self, queue_offset: int) -> QueueUnit | None:
        """The unit at ``queue_offset`` as its file holds it, past ``max_offset`` too."""
        ...
