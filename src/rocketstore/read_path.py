"""The read path: ``get_messages`` (RocketMQ's getMessage, spec 10) and record lookups.

Layer: engine paths (above the structures).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, cast

from rocketstore.commitlog import CommitLog
from rocketstore.config import StoreConfig
from rocketstore.consume_queue import ConsumeQueue
from rocketstore.errors import CorruptDataError, IncompleteDataError
from rocketstore.format import native
from rocketstore.format import record as rec
from rocketstore.format.message import MessageExt
from rocketstore.format.queue_unit import CQ_UNIT_SIZE, decode_units
from rocketstore.format.subscription import Subscription
from rocketstore.status import GetStatus

log = logging.getLogger(__name__)

# How many damaged records a reader tells apart (for its count and its log): beyond this
# each further meeting counts as a new one, which no real store's damage comes near.
_DAMAGED_REMEMBERED = 65536


def _physical_memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 * 1024**3


TOTAL_PHYSICAL_MEMORY = _physical_memory_bytes()


@dataclass(slots=True)
class GetResult:
    status: GetStatus
    messages: list[MessageExt] = field(default_factory=list)
    next_begin_offset: int = 0
    min_offset: int = 0
    max_offset: int = 0
    # True when the last pulled message is far behind the CommitLog end (RocketMQ's hint).
    suggest_pulling_from_slave: bool = False

    @property
    def found(self) -> bool:
        return self.status is GetStatus.FOUND


@dataclass(slots=True)
class PulledRecords:
    """A pull's answer as a broker sends it: ``get_messages``' status and offsets, with the
    found records' stored bytes back to back (RocketMQ's GetMessageResult buffers) instead
    of messages."""

    status: GetStatus
    body: bytes = b""
    count: int = 0  # records in ``body``
    next_begin_offset: int = 0
    min_offset: int = 0
    max_offset: int = 0
    suggest_pulling_from_slave: bool = False

    @property
    def found(self) -> bool:
        return self.status is GetStatus.FOUND


def _unit_rows(units: Any, first: int) -> Iterator[tuple[int, int, int]]:
    """The units as plain (offset, size, tags code) tuples, converted in growing slices:
    a pull usually ends after ``max_count`` units of the thousands read for filtering,
    and indexing a structured array costs about a microsecond a field."""
    step = max(first, 32)
    at = 0
    while at < len(units):
        yield from units[at : at + step].tolist()
        at += step
        step *= 4


def record_damage(data: bytes, offset: int, size: int) -> str | None:
    """Why ``data`` (the ``size`` bytes at CommitLog ``offset`` a queue unit names) is not
    a record a pull can read, or None when it is one. A body CRC is not checked: a pull
    does not check it either (``check`` reports it on its own)."""
    stored_size = int.from_bytes(data[:4], "big", signed=True)
    if stored_size != size:
        return f"its TOTALSIZE is {stored_size}, the unit says {size}"
    try:
        view = rec.read_record(data, 0)
    except (CorruptDataError, IncompleteDataError) as e:
        return e.reason if isinstance(e, CorruptDataError) else str(e)
    if isinstance(view, rec.Blank):
        return "an END_OF_FILE blank is there"
    if view.physical_offset != offset:
        return f"the record there says PHYSICALOFFSET {view.physical_offset}"
    return None


class MessageReader:
    """Reads messages through consume queues with RocketMQ's batch and status rules."""

    def __init__(self, commitlog: CommitLog, config: StoreConfig):
        self.commitlog = commitlog
        self.config = config
        # CommitLog offsets of the damaged records pulls stepped over (each logged once).
        self._damaged: set[int] = set()
        self._damaged_beyond = 0
        self._damaged_lock = threading.Lock()

    @property
    def damaged_records_skipped(self) -> int:
        """How many damaged records (whose bytes are there but do not read as the record
        their unit names) pulls have stepped over since the store was opened."""
        return len(self._damaged) + self._damaged_beyond

    def look(self, offset: int) -> MessageExt | None:
        return self.commitlog.read_message(offset)

    def _memory_bytes(self) -> float:
        """How far behind the CommitLog end a record still counts as in memory."""
        return TOTAL_PHYSICAL_MEMORY * (self.config.access_message_in_memory_max_ratio / 100.0)

    def _in_disk(self, offset: int, max_offset: int) -> bool:
        return (max_offset - offset) > self._memory_bytes()

    def _batch_full(
        self, size: int, max_count: int, total_bytes: int, count: int, in_disk: bool
    ) -> bool:
        if total_bytes == 0 or count == 0:
            return False
        if max_count <= count:
            return True
        c = self.config
        if in_disk:
            return (
                total_bytes + size > c.max_transfer_bytes_on_message_in_disk
                or count > c.max_transfer_count_on_message_in_disk - 1
            )
        return (
            total_bytes + size > c.max_transfer_bytes_on_message_in_memory
            or count > c.max_transfer_count_on_message_in_memory - 1
        )

    def _rules(self, max_count: int, commit_max: int) -> tuple[int, int, float, int, int, int, int]:
        """The batch rules as the C selection takes them: max count, the CommitLog end,
        the in-memory distance, then the in-memory and in-disk byte and count limits."""
        c = self.config
        return (
            max_count,
            commit_max,
            self._memory_bytes(),
            c.max_transfer_bytes_on_message_in_memory,
            c.max_transfer_count_on_message_in_memory,
            c.max_transfer_bytes_on_message_in_disk,
            c.max_transfer_count_on_message_in_disk,
        )

    def _select(
        self, units_bytes: bytes, max_count: int, commit_max: int
    ) -> tuple[list[int], list[int], int] | None:
        """The units a pull for every tag takes, by the batch rules alone: their offsets
        and sizes, and the index of the first unit not taken. None when one it would take
        has no size (``get``'s loop decides then)."""
        if native.select_units is not None:
            chosen: tuple[list[int], list[int], int] | None = native.select_units(
                units_bytes, *self._rules(max_count, commit_max)
            )
            return chosen
        units = decode_units(units_bytes)
        offsets: list[int] = []
        sizes: list[int] = []
        total_bytes = 0
        index = 0
        for index, (offset, size, _code) in enumerate(_unit_rows(units, max_count)):  # noqa: B007
            in_disk = self._in_disk(offset, commit_max)
            if self._batch_full(size, max_count, total_bytes, len(offsets), in_disk):
                break
            if size <= 0:
                return None
            offsets.append(offset)
            sizes.append(size)
            total_bytes += size
        else:
            index = len(units)
        return offsets, sizes, index

    def _pull_all(
        self, units_bytes: bytes, max_count: int, commit_max: int
    ) -> tuple[list[MessageExt], int, int] | None:
        """The pull of ``get`` for a subscription to every tag: the units alone decide which
        records the batch rules take, then all of them are read (in C, one call for the
        lot, which leaves batches across file ends to Python). Returns (messages, units
        taken, last offset taken or -1), or None when a record is missing or not of its
        unit's size: ``_get_filtered`` then decides, record by record."""
        pull = rec.fast_pull_messages
        if native.pull_messages is not None and pull is not None:
            files = self.commitlog.files
            pulled: tuple[list[MessageExt], int, int] | None = pull(
                units_bytes, *self._rules(max_count, commit_max), files.files, files.file_size
            )
            if pulled is not None:
                return pulled
        selected = self._select(units_bytes, max_count, commit_max)
        if selected is None:
            return None
        offsets, sizes, index = selected
        messages = self.commitlog.read_messages(offsets, sizes)
        if not all(messages):  # (None is the only false item: a MessageExt is always true)
            return None
        # (cast to a str: no alias built per pull)
        return cast("list[MessageExt]", messages), index, offsets[-1] if offsets else -1

    def get_records(
        self,
        queue: ConsumeQueue | None,
        queue_offset: int,
        max_count: int,
        subscription: Subscription,
    ) -> PulledRecords:
        """``get`` answered with the records' bytes, as a broker's pull answers: the batch
        rules over the units (for a TAG subscription their tag filter too, and the
        records' TAGS as ``get`` checks them) and each record checked and copied in one C
        call, no message decoded; a SQL92 pull, or what C declines, through ``get``."""
        pulled = None
        if queue is not None and subscription.selector is None and not subscription.matches_none:
            min_offset, max_offset = queue.min_offset(), queue.max_offset()
            if min_offset <= queue_offset < max_offset:
                pulled = self._records_native(queue, queue_offset, max_count, subscription)
        if pulled is None:
            return self._records_python(queue, queue_offset, max_count, subscription)
        body, count, taken, last_offset, commit_max = pulled
        return PulledRecords(
            GetStatus.FOUND if count else GetStatus.NO_MATCHED_MESSAGE,
            body,
            count,
            queue_offset + taken,
            min_offset,
            max_offset,
            count > 0 and self._in_disk(last_offset, commit_max),
        )

    def _records_native(
        self, queue: ConsumeQueue, queue_offset: int, max_count: int, subscription: Subscription
    ) -> tuple[bytes, int, int, int, int] | None:
        """The C pull of ``get_records`` (body, count, units taken, last offset, the
        CommitLog end it judged by), or None to leave it to Python."""
        every_tag = subscription.matches_all
        # A pull for every tag reads just the units it may take; a filtered one as far as
        # _get_filtered looks.
        scan_bytes = max_count * CQ_UNIT_SIZE
        if not every_tag:
            scan_bytes = max(self.config.max_filter_message_count, scan_bytes)
        units_bytes = queue.units_from(queue_offset, scan_bytes)
        # (read after the units, so it is at or past every record they point to)
        commit_max = self.commitlog.max_offset()
        files = self.commitlog.files
        if units_bytes is None:
            return None
        rules = self._rules(max_count, commit_max)
        if every_tag and native.pull_records is not None:
            pulled = native.pull_records(units_bytes, *rules, files.files, files.file_size)
        elif native.pull_tagged_records is not None:
            pulled = native.pull_tagged_records(
                units_bytes,
                *rules,
                files.files,
                files.file_size,
                tuple(subscription.codes),
                tuple(tag.encode("utf-8", "surrogatepass") for tag in subscription.tags),
            )
        else:
            return None
        return None if pulled is None else (*pulled, commit_max)

    def _records_python(
        self,
        queue: ConsumeQueue | None,
        queue_offset: int,
        max_count: int,
        subscription: Subscription,
    ) -> PulledRecords:
        """``get_records`` by way of ``get``: the messages found, then each one's record
        read again by its offset and size (the definition ``pull_records`` matches)."""
        result = self.get(queue, queue_offset, max_count, subscription)
        chunks = []
        for message in result.messages:
            raw = self.commitlog.read(message.commit_log_offset, message.size)
            if raw is not None:
                chunks.append(raw)
        return PulledRecords(
            result.status,
            b"".join(chunks),
            len(result.messages),
            result.next_begin_offset,
            result.min_offset,
            result.max_offset,
            result.suggest_pulling_from_slave,
        )

    @staticmethod
    def _outside(queue_offset: int, min_offset: int, max_offset: int) -> GetResult:
        """The result for an offset with no unit: an empty queue, or before or past it."""
        if max_offset == 0:
            status, next_offset = GetStatus.NO_MESSAGE_IN_QUEUE, 0
        elif queue_offset < min_offset:
            status, next_offset = GetStatus.OFFSET_TOO_SMALL, min_offset
        elif queue_offset == max_offset:
            status, next_offset = GetStatus.OFFSET_OVERFLOW_ONE, queue_offset
        else:
            status, next_offset = GetStatus.OFFSET_OVERFLOW_BADLY, max_offset
        return GetResult(status, [], next_offset, min_offset, max_offset)

    def get(
        self,
        queue: ConsumeQueue | None,
        queue_offset: int,
        max_count: int,
        subscription: Subscription,
    ) -> GetResult:
        if queue is None:
            return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, next_begin_offset=0)
        min_offset, max_offset = queue.min_offset(), queue.max_offset()
        if not min_offset <= queue_offset < max_offset:
            return self._outside(queue_offset, min_offset, max_offset)
        if subscription.matches_all:
            # A pull for every tag takes at most max_count units: it reads just those (16 KB
            # of units copied per pull of 32 cost more than deciding on them).
            # _get_filtered, which may step past records that are gone, reads the whole
            # scan limit.
            units_bytes = queue.units_from(queue_offset, max_count * CQ_UNIT_SIZE)
            # (read after the units, so it is at or past every record they point to)
            commit_max = self.commitlog.max_offset()
            pulled = None
            if units_bytes is not None:
                pulled = self._pull_all(units_bytes, max_count, commit_max)
            if pulled is not None:
                messages, taken, last_offset = pulled
                found = bool(messages)
                # (one constructor call: around the 6 us of C a pull of 32 takes, each
                # Python step here counts)
                return GetResult(
                    GetStatus.FOUND if found else GetStatus.NO_MATCHED_MESSAGE,
                    messages,
                    queue_offset + taken,
                    min_offset,
                    max_offset,
                    found and self._in_disk(last_offset, commit_max),
                )
        return self._get_filtered(
            GetResult(GetStatus.NO_MATCHED_MESSAGE, [], 0, min_offset, max_offset),
            queue,
            queue_offset,
            max_count,
            subscription,
        )

    def _get_filtered(
        self,
        result: GetResult,
        queue: ConsumeQueue,
        queue_offset: int,
        max_count: int,
        subscription: Subscription,
    ) -> GetResult:
        """``get`` unit by unit: tag filters, and records that are gone or not whole."""
        scan_limit = max(self.config.max_filter_message_count, max_count * CQ_UNIT_SIZE)
        units_bytes = queue.units_from(queue_offset, scan_limit)
        if units_bytes is None:  # (or retention took the file since the first read)
            result.status = GetStatus.OFFSET_FOUND_NULL
            result.next_begin_offset = queue.next_file_offset(queue_offset)
            return result
        commit_max = self.commitlog.max_offset()
        units = decode_units(units_bytes)
        next_file_start: int | None = None
        total_bytes = 0
        last_pulled = 0
        index = 0
        # Plain tuples: indexing a numpy structured array costs ~1 us a field.
        for index, (offset, size, tags_code) in enumerate(_unit_rows(units, max_count)):
            if next_file_start is not None and offset < next_file_start:
                continue
            in_disk = self._in_disk(offset, commit_max)
            if self._batch_full(size, max_count, total_bytes, len(result.messages), in_disk):
                break
            if not subscription.match_code(tags_code):
                continue
            message = self.commitlog.read_message(offset, size=size) if size > 0 else None
            if message is None:  # gone, or not a record of the unit's size
                if not result.messages:
                    result.status = GetStatus.MESSAGE_WAS_REMOVING
                damage = self._damage(offset, size)
                if damage is not None:
                    # RocketMQ rolls to the next file here too, which is right for a file
                    # retention deleted but, for one damaged record, passes over every
                    # intact record after it in its file: step over this unit alone.
                    self._note_damaged(queue, queue_offset + index, offset, damage)
                    continue
                next_file_start = self.commitlog.roll_next_file(offset)
                continue
            if not subscription.match_properties(message.properties):
                continue
            result.messages.append(message)
            total_bytes += size
            last_pulled = offset
            result.status = GetStatus.FOUND
            next_file_start = None
        else:
            index = len(units)
        result.next_begin_offset = queue_offset + index
        if result.messages:
            result.suggest_pulling_from_slave = self._in_disk(last_pulled, commit_max)
        return result

    def _damage(self, offset: int, size: int) -> str | None:
        """Why the record a unit names cannot be read although the CommitLog holds bytes
        there (damage), or None when it holds none (a file retention removed, or a unit
        past the data): that case is RocketMQ's, whose pull rolls to the next file."""
        if size <= 0:
            return f"the unit's size is {size}"
        data = self.commitlog.read(offset, size)
        if data is None:
            return None
        return record_damage(data, offset, size) or "the record does not decode"

    def _note_damaged(self, queue: ConsumeQueue, queue_offset: int, offset: int, why: str) -> None:
        """Count a damaged record a pull stepped over, and log it the first time."""
        with self._damaged_lock:
            if offset in self._damaged:
                return
            if len(self._damaged) < _DAMAGED_REMEMBERED:
                self._damaged.add(offset)
            else:
                self._damaged_beyond += 1
        log.error(
            "%s-%d queue offset %d: the record at CommitLog offset %d is damaged (%s); "
            "pulls skip this message and go on with the next",
            queue.topic,
            queue.queue_id,
            queue_offset,
            offset,
            why,
        )
