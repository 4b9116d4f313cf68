"""``check``'s consume queue part: every queue's units against the CommitLog records the
scan read (queue -> CommitLog), and every record that takes a unit against its queue
(CommitLog -> queue), multi-dispatch units included.

Layer: check. Reads ``consumequeue/`` (and ``consumequeue_ext/``) files directly; never
opens a MessageStore.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from rocketstore.check.common import I64, RecordTable, lookup, no_record_reason
from rocketstore.check.result import CheckResult, Missed, Problem
from rocketstore.check.scan import DataFile, offset_files
from rocketstore.consume_queue_ext import ConsumeQueueExtReader
from rocketstore.errors import CorruptDataError
from rocketstore.files.deleted_queues import load_deleted_queues, queue_key
from rocketstore.files.regular_file import read_store_file
from rocketstore.format.cq_ext import MAX_ADDRESS, is_ext_address
from rocketstore.format.multi_dispatch import INNER_MULTI_QUEUE_OFFSET
from rocketstore.format.queue_unit import CQ_UNIT_SIZE, decode_units
from rocketstore.paths import CONSUME_QUEUE_DIR, CONSUME_QUEUE_EXT_DIR
from rocketstore.read_path import record_damage

BLANK_FILL_SIZE = 0x7FFFFFFF


class QueueCheck:
    def __init__(
        self,
        root: str,
        table: RecordTable,
        min_offset: int,
        data_end: int,
        result: CheckResult,
        rel: Callable[[str], str],
        on_bytes: Callable[[int], None] | None,
        *,
        multi_dispatch: bool,
    ):
        self.root = root
        self.base = os.path.join(root, CONSUME_QUEUE_DIR)
        self.table = table
        self.min_offset = min_offset
        self.data_end = data_end
        self.result = result
        self.rel = rel
        self.on_bytes = on_bytes
        self.queue_index = {name: i for i, name in enumerate(table.queue_names)}
        # Units per queue after the forward pass: (first queue offset, unit offsets).
        self.loaded: dict[int, tuple[int, I64]] = {}
        # Multi-dispatch on (-c): the units its records name must be there.
        self.multi_dispatch = multi_dispatch
        self.dispatched_end = -1
        # Queues deleted on purpose: their records below these offsets are no queue's.
        self.deleted = load_deleted_queues(root)
        self.ext_units = 0  # units whose tagsCode is in consumequeue_ext (cq_ext)
        # Units naming a whole record in a stretch the scan passed over (past damage).
        self.unread_but_whole = 0
        # Units past the CommitLog the check read, beside a running writer (unclean).
        self.newer_units = 0
        # Per queue: the CommitLog end of its last unit as read (dispatch goes in order).
        self.queue_ends: dict[int, int] = {}
        self.lag_from = 2**63 - 1  # the lowest such end of a queue with records lagging

    def _problem(self, path: str, where: str, reason: str, offset: int | None = None) -> None:
        self.result.problems.append(Problem("consumequeue", self.rel(path), where, reason, offset))

    def queue_dirs(self) -> list[tuple[str, int, str]]:
        found: list[tuple[str, int, str]] = []
        if not os.path.isdir(self.base):
            return found
        for topic in sorted(os.listdir(self.base)):
            topic_dir = os.path.join(self.base, topic)
            if not os.path.isdir(topic_dir):
                continue
            for qid in sorted(os.listdir(topic_dir)):
                if qid.isdigit() and os.path.isdir(os.path.join(topic_dir, qid)):
                    found.append((topic, int(qid), os.path.join(topic_dir, qid)))
        return found

    def run(self) -> None:
        for topic, queue_id, directory in self.queue_dirs():
            try:
                self._check_queue(topic, queue_id, directory)
            except CorruptDataError as e:  # a file that is no regular file (a FIFO...)
                self._problem(e.path or directory, "file", e.reason)
        self._check_records_have_units()

    def _load(self, directory: str, files: list[DataFile]) -> tuple[int, I64, I64, I64]:
        """(first queue offset, offsets, sizes, tags codes) of the queue's live units."""
        size = files[0].size
        if size % CQ_UNIT_SIZE:
            self._problem(files[0].path, "file", f"size {size} is not a multiple of 20")
        chunks: list[npt.NDArray[np.void]] = []
        first_queue_offset = files[0].start // CQ_UNIT_SIZE
        for i, f in enumerate(files):
            if i and f.start != files[i - 1].end:
                self._problem(f.path, "file", f"gap: expected {files[i - 1].end:020d} here")
                break
            if f.size != size:
                self._problem(f.path, "file", f"file is {f.size} bytes, the first file {size}")
                break
            data = read_store_file(f.path)
            if self.on_bytes is not None:
                self.on_bytes(len(data))
            chunks.append(decode_units(data))
        units = np.concatenate(chunks) if chunks else decode_units(b"")
        offsets = units["offset"].astype(np.int64)
        sizes = units["size"].astype(np.int64)
        codes = units["tags_code"].astype(np.int64)
        head = 0
        blank = (offsets == 0) & (sizes == BLANK_FILL_SIZE) & (codes == 0)
        while head < len(units) and blank[head]:
            head += 1
        valid = (offsets >= 0) & (sizes > 0) & ~blank
        bad = np.flatnonzero(~valid[head:])
        end = head + int(bad[0]) if len(bad) else len(units)
        tail = units[end:]
        if len(tail) and (
            np.any(tail["offset"]) or np.any(tail["size"]) or np.any(tail["tags_code"])
        ):
            q = first_queue_offset + end
            self._problem(
                _file_of(files, q * CQ_UNIT_SIZE),
                f"queue offset {q}",
                "the units end here but non-zero bytes follow",
            )
        live = slice(head, end)
        return first_queue_offset + head, offsets[live], sizes[live], codes[live]

    def _check_queue(self, topic: str, queue_id: int, directory: str) -> None:
        files = offset_files(directory)
        if not files:
            return
        first, offsets, sizes, codes = self._load(directory, files)
        self.result.queue_units += len(offsets)
        key = self.queue_index.get((topic, queue_id), -2)
        self.loaded[key] = (first, offsets)
        if len(offsets):
            self.dispatched_end = max(self.dispatched_end, int(offsets[-1] + sizes[-1]))
            self.queue_ends[key] = int(offsets[-1] + sizes[-1])
        table = self.table
        alive = offsets >= self.min_offset
        expired = int(np.count_nonzero(~alive))
        if self.result.unclean:
            # The queues are read after the CommitLog: beside a running writer they hold
            # units of records appended since, which the check judges as of the end it read.
            newer = offsets >= self.data_end
            self.newer_units += int(np.count_nonzero(newer & alive))
            alive &= ~newer
        if expired:
            self.result.notes.append(
                f"{topic}-{queue_id}: {expired} units point below the CommitLog's first "
                f"offset {self.min_offset} (expired, normal after retention)"
            )
        ext = None
        addresses = int(np.count_nonzero(codes <= MAX_ADDRESS))
        if addresses:
            # A broker with enableConsumeQueueExt: the tag hashes are in consumequeue_ext.
            ext = ConsumeQueueExtReader(self.root, topic, queue_id)
            self.ext_units += addresses
            if not os.path.isdir(ext.directory):
                # RocketMQ reads on without it (pulls pass such units, delayed delivery
                # takes the store time): worth saying, not a broken unit each.
                self.result.notes.append(
                    f"{topic}-{queue_id}: {addresses} units' tagsCode are ConsumeQueueExt "
                    f"addresses, but {CONSUME_QUEUE_EXT_DIR}/{topic}/{queue_id} is gone: "
                    "their tags are read from the records"
                )
                ext = None
        where_q = np.flatnonzero(alive)
        index, found = lookup(table.offset, offsets[where_q])
        for j in np.flatnonzero(~found):
            q = int(where_q[j])
            offset = int(offsets[q])
            reason = self._unread_record(topic, queue_id, first + q, offset, int(sizes[q]))
            if reason:
                self._unit_problem(files, first + q, offset, reason)
        for j in np.flatnonzero(found):
            q = int(where_q[j])
            r = int(index[j])
            code, reason = self._tags_code(ext, topic, queue_id, int(codes[q]))
            reason = reason or self._mismatch(q, r, key, first, int(sizes[q]), code)
            if reason:
                self._unit_problem(files, first + q, int(offsets[q]), reason)

    @staticmethod
    def _tags_code(
        ext: ConsumeQueueExtReader | None, topic: str, queue_id: int, code: int
    ) -> tuple[int | None, str]:
        """The tagsCode to check a unit by (None: not checked, its extension directory is
        gone), or why a ConsumeQueueExt address leads to no extension unit."""
        if not is_ext_address(code):
            return code, ""
        if ext is None:
            return None, ""
        try:
            unit = ext.get(code)
        except CorruptDataError as e:
            return None, f"tagsCode {code} is a ConsumeQueueExt address, where {e}"
        if unit is None:
            return None, (
                f"tagsCode {code} is a ConsumeQueueExt address, but "
                f"{CONSUME_QUEUE_EXT_DIR}/{topic}/{queue_id} has no unit there"
            )
        return unit.tags_code, ""

    def _unread_record(
        self, topic: str, queue_id: int, queue_offset: int, offset: int, size: int
    ) -> str:
        """Why a unit names no record the scan read ("" when a pull reads a whole record
        there all the same, in a stretch the scan passed over). A unit naming bytes that
        are no record a pull reads is a message its consumers miss: ``result.missed``."""
        data = self._commitlog_bytes(offset, size)
        if data is None:
            return self._no_record(offset)
        damage = record_damage(data, offset, size)
        if damage is None:
            self.unread_but_whole += 1
            return ""
        self.result.missed.append(Missed(topic, queue_id, queue_offset, offset, damage))
        return (
            f"{self._no_record(offset)}, and the bytes there are no record ({damage}): "
            f"a consumer of {topic}-{queue_id} misses this message"
        )

    def _commitlog_bytes(self, offset: int, size: int) -> bytes | None:
        """The ``size`` bytes a unit names, as a pull reads them: None when the CommitLog
        holds no data there (before its start, past its end, a file that is gone)."""
        scan = self.result.scan
        if scan is None or size <= 0 or offset < self.min_offset:
            return None
        if offset >= self.data_end and scan.damaged_stretch(offset) is None:
            return None
        for f in scan.files:
            if f.start <= offset and offset + size <= f.end:
                try:
                    with open(f.path, "rb") as handle:
                        handle.seek(offset - f.start)
                        return handle.read(size)
                except OSError:  # removed by a running writer's retention meanwhile
                    return None
        return None

    def _no_record(self, offset: int) -> str:
        return no_record_reason(offset, self.data_end, self.result.scan)

    def _mismatch(self, q: int, r: int, key: int, first: int, size: int, code: int | None) -> str:
        table = self.table
        offset = int(table.offset[r])
        if int(table.size[r]) != size:
            return f"size {size}, but the record at {offset} is {int(table.size[r])} bytes"
        extra = table.extra.get((r, key)) if table.extra else None
        if extra is not None:
            if extra != first + q:
                return (
                    f"points to the record at {offset}, whose {INNER_MULTI_QUEUE_OFFSET} gives "
                    f"this queue offset {extra}"
                )
        elif int(table.queue[r]) != key:
            owner = int(table.queue[r])
            name = "no queue" if owner < 0 else "{}-{}".format(*table.queue_names[owner])
            return f"points to the record at {offset}, which belongs to {name}"
        elif int(table.queue_offset[r]) != first + q:
            actual = int(table.queue_offset[r])
            return f"points to the record at {offset}, whose QUEUEOFFSET is {actual}"
        if code is not None and table.check_tags[r] and int(table.tags_code[r]) != code:
            return f"tagsCode {code}, but the record at {offset} gives {int(table.tags_code[r])}"
        return ""

    def _unit_problem(
        self, files: list[DataFile], queue_offset: int, offset: int, reason: str
    ) -> None:
        position = queue_offset * CQ_UNIT_SIZE
        path = _file_of(files, position)
        where = f"queue offset {queue_offset} (position {position % files[0].size})"
        self._problem(path, where, reason, offset)

    def _check_records_have_units(self) -> None:
        """CommitLog -> queue: one line per queue for the records without a unit (their own
        queue's, and those multi-dispatch records give the queues they name)."""
        table = self.table
        wanted: dict[int, tuple[list[I64], list[I64]]] = {}
        takes = np.flatnonzero(table.queue >= 0)
        if len(takes):
            order = takes[np.argsort(table.queue[takes], kind="stable")]
            keys = table.queue[order]
            for group in np.split(order, np.flatnonzero(np.diff(keys)) + 1):
                entry = wanted.setdefault(int(table.queue[group[0]]), ([], []))
                entry[0].append(table.offset[group])
                entry[1].append(table.queue_offset[group])
        for (row, key), queue_offset in table.extra.items():
            if key not in wanted and not self._expects_extra(key):
                continue
            entry = wanted.setdefault(key, ([], []))
            entry[0].append(table.offset[[row]])
            entry[1].append(np.array([queue_offset], dtype=np.int64))
        lag_records = 0
        for key in sorted(wanted, key=lambda k: table.queue_names[k]):
            offsets, queue_offsets = wanted[key]
            rec_offsets = np.concatenate(offsets)
            rec_q = np.concatenate(queue_offsets)
            in_order = np.argsort(rec_offsets, kind="stable")
            lag_records += self._check_queue_has(key, rec_offsets[in_order], rec_q[in_order])
        if lag_records:
            self.result.notes.append(
                f"{lag_records} record(s) after offset {max(self.lag_from, 0)} are not in "
                "the consume queues yet (dispatch lag: a running writer or the next writer's "
                "recovery adds them)"
            )

    def _expects_extra(self, key: int) -> bool:
        """Whether the units multi-dispatch records name for queue ``key`` must be there:
        with multi-dispatch on (``-c``), or when the queue's directory exists (a record
        can carry the two properties from a producer to a broker that had it off)."""
        topic, queue_id = self.table.queue_names[key]
        return self.multi_dispatch or os.path.isdir(os.path.join(self.base, topic, str(queue_id)))

    def _check_queue_has(self, key: int, rec_offsets: I64, rec_q: I64) -> int:
        """Report the records (CommitLog offsets, the queue offsets they should have)
        queue ``key`` lacks; return how many of them only lag behind a writer."""
        topic, queue_id = self.table.queue_names[key]
        cutoff = self.deleted.get(queue_key(topic, queue_id))
        if cutoff is not None:  # (a deleted topic's queue: its old records have none)
            kept = rec_offsets >= cutoff
            rec_offsets, rec_q = rec_offsets[kept], rec_q[kept]
        first, unit_offsets = self.loaded.get(key, (0, np.zeros(0, dtype=np.int64)))
        slot = rec_q - first
        present = (slot >= 0) & (slot < len(unit_offsets))
        before = slot < 0
        points_elsewhere = np.zeros(len(rec_offsets), dtype=bool)
        points_elsewhere[present] = unit_offsets[slot[present]] != rec_offsets[present]
        missing = ~present & ~before
        # Dispatch writes each queue's units in CommitLog order, but the queues are read
        # one after another while a writer runs: only what lies past this queue's own last
        # unit (as read) may still be on its way; a hole before it is a problem.
        lag_from = self.queue_ends.get(key, self.dispatched_end)
        lagging = missing & (rec_offsets >= lag_from) & self.result.unclean
        if np.any(lagging):
            self.lag_from = min(self.lag_from, lag_from)
        missing &= ~lagging
        directory = os.path.join(self.base, topic, str(queue_id))
        if np.any(missing):
            where = np.flatnonzero(missing)
            first_missing = int(rec_offsets[where[0]])
            self._problem(
                directory,
                f"queue offset {int(rec_q[where[0]])}",
                f"{len(where)} record(s) of {topic}-{queue_id} have no unit "
                f"(the first at offset {first_missing}, the last at "
                f"{int(rec_offsets[where[-1]])})",
                first_missing,
            )
        for i in np.flatnonzero(points_elsewhere)[:20]:
            self._problem(
                directory,
                f"queue offset {int(rec_q[i])}",
                f"the record at {int(rec_offsets[i])} has this QUEUEOFFSET, but the unit "
                f"points to {int(unit_offsets[slot[i]])}",
                int(rec_offsets[i]),
            )
        return int(np.count_nonzero(lagging))


def _file_of(files: list[DataFile], position: int) -> str:
    for f in files:
        if f.start <= position < f.end:
            return f.path
    return files[-1].path
