"""Reading a queue's ConsumeQueueExt files (``consumequeue_ext/<topic>/<queueId>/``), which
a broker with ``enableConsumeQueueExt`` writes (format.cq_ext, spec 3.7).

Layer: beside consume_queue. rocketstore reads them and never writes them: where a unit's
tagsCode is an extension address, the real tagsCode (and the filter bitmap) is here.
"""

from __future__ import annotations

import os
import threading

from rocketstore.errors import CorruptDataError
from rocketstore.files.mapped_file_queue import offset_file_paths
from rocketstore.files.regular_file import open_store_file
from rocketstore.format.cq_ext import MAX_EXT_UNIT_SIZE, ExtUnit, decode_ext_unit, real_offset
from rocketstore.paths import consume_queue_ext_dir


class ConsumeQueueExtReader:
    """The extension units of one queue, looked up by address. Files are listed lazily
    and again when an address falls past them (the broker may have added one)."""

    def __init__(self, root: str, topic: str, queue_id: int):
        self.directory = consume_queue_ext_dir(root, topic, queue_id)
        self._files: list[tuple[int, int, str]] = []  # (start, size, path)
        self._lock = threading.Lock()

    def _list(self) -> list[tuple[int, int, str]]:
        files = []
        for start, path in offset_file_paths((self.directory,)).items():
            try:
                files.append((start, os.path.getsize(path), path))
            except FileNotFoundError:
                continue  # removed by retention meanwhile
        return files

    def _file_of(self, offset: int, refresh: bool) -> tuple[int, str] | None:
        with self._lock:
            if refresh or not self._files:
                self._files = self._list()
            for start, size, path in self._files:
                if start <= offset < start + size:
                    return offset - start, path
        return None

    def get(self, address: int) -> ExtUnit | None:
        """The unit at ``address`` (a consume-queue tagsCode that is an extension
        address); None when no file holds it or no unit is there (RocketMQ's
        ``getExt`` failing). CorruptDataError for bytes that are no unit."""
        offset = real_offset(address)
        found = self._file_of(offset, refresh=False) or self._file_of(offset, refresh=True)
        if found is None:
            return None
        position, path = found
        try:
            # (offset_file_paths refused a FIFO when listing; one put there since would
            # block a plain open)
            fd = open_store_file(path)
            try:
                data = os.pread(fd, MAX_EXT_UNIT_SIZE, position)
            finally:
                os.close(fd)
        except FileNotFoundError:
            return None  # removed meanwhile
        except OSError as e:
            raise CorruptDataError(
                f"cannot read the ConsumeQueueExt file: {e.strerror or e}", path=path
            ) from e
        try:
            return decode_ext_unit(data, 0)
        except CorruptDataError as e:
            raise CorruptDataError(e.reason, path=path, position=position) from e
