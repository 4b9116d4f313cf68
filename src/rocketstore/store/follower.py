"""The read-only follower: what a store opened read-only sees of a writer beside it.

Layer: store (the facade's package). Reads only: it moves its own view of the files (the
CommitLog's written positions, the queues' and index's known ends) forward to a validated
prefix of what the writer appended, and writes nothing to disk.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable

from rocketstore.commitlog import CommitLog
from rocketstore.config import StoreConfig
from rocketstore.files.mapped_file import MappedFile
from rocketstore.index import IndexService
from rocketstore.recovery.recover import EntryChain, RecoveryReport, scan_valid_end
from rocketstore.store.queue_table import QueueKey, QueueTable

# Directories (CommitLog, queues, index) are listed at most this often between refresh()es.
LIST_INTERVAL_S = 0.05

# A record's (or a DLedger entry's) first word: TOTALSIZE (or the entry's magic).
_FIRST_WORD = struct.Struct(">i")


class ReadOnlyFollower:
    def __init__(
        self,
        commitlog: CommitLog,
        queues: QueueTable,
        index: IndexService,
        config: Callable[[], StoreConfig],
    ) -> None:
        self.commitlog = commitlog
        self.queues = queues
        self.index = index
        self.config = config
        self.listed_at = 0.0
        self.min_offset = -2
        self.end = 0
        # A DLedger log: the entry at ``end`` must follow the last one seen (recovery).
        self.entries: EntryChain | None = None
        # The mapped file holding ``end`` (None: none does), as of the last scan.
        self._tail: MappedFile | None = None
        # Directory listings so far, and per queue the listing its files were last listed
        # at and the CommitLog minimum it was last corrected for: a queue catches up when
        # it is read, not at every listing (issue #34: a store with thousands of queues
        # paid all of them every 50 ms, in its p99).
        self.listings = 0
        # The listing at which every topic's directory was last looked through for new
        # queues: a call about every queue after a listing a one-queue read took sees the
        # queues created before that listing too.
        self._all_listed = -1
        self._queue_seen: dict[QueueKey, tuple[int, int]] = {}

    def list_now(self) -> None:
        """List the directories at the next refresh, not in up to 50 ms."""
        self.listed_at = float("-inf")

    def refresh_for_lookup(self) -> None:
        """``refresh(queues=False)``, for a key or id lookup: between listings, when the
        CommitLog has not moved, only the index can have (the dispatcher lags the
        CommitLog), and its newest header is all there is to read. That keeps a lookup
        beside a writer within 2x of the writer's own (issue #34)."""
        if time.monotonic() - self.listed_at < LIST_INTERVAL_S and not self._commitlog_moved():
            for index_file in self.index.files[-1:]:
                index_file.refresh_header()
            return
        self.refresh(queues=False)

    def refresh(
        self, full: bool = False, queue_key: QueueKey | None = None, queues: bool = True
    ) -> RecoveryReport | None:
        """See what a concurrent writer has appended since the last call: a validated
        prefix only. Incremental: the CommitLog is scanned from the last known end, each
        queue from its last known unit; directories are listed at most every 50 ms.

        A call that reads one queue refreshes just that queue (``queue_key``), a key or id
        lookup none (``queues=False``), and a call about every queue (neither) all of
        them: refreshing every queue of a big store on each call cost more than the call
        itself. Likewise at a listing: a call about every queue looks for new queues in
        every topic's directory, a read of one queue for that queue alone; a queue read
        after a listing lists its files first, queues nobody reads wait. When the CommitLog
        minimum moved (retention), every queue is refreshed and its minimum corrected.
        With ``full`` (the open), the scan's report is returned."""
        now = time.monotonic()
        list_dirs = full or now - self.listed_at >= LIST_INTERVAL_S
        files = self.commitlog.files
        if list_dirs:
            files.refresh()
            self.listed_at = now
            self.listings += 1
        if not files.files:
            return None
        report = RecoveryReport()
        if full or list_dirs or self._commitlog_moved():
            self._follow_commitlog(full, report)
        end = self.end
        every_queue = full or (queues and queue_key is None)
        if every_queue and self._all_listed != self.listings:
            self.queues.load_all(writable=False)  # queues created since the last look
            self._all_listed = self.listings
        elif queue_key is not None:
            # The one queue this call reads, if the table lacks it: looked for at every call
            # (a directory lookup), not only at a listing, or a read within 50 ms of one
            # found a queue the writer had just made empty (Spark read no rows of it).
            self.queues.load_one(*queue_key)
        min_offset = self.commitlog.min_offset()
        # Retention moved the CommitLog's start: every queue's minimum moves, and the files
        # it deleted are dropped (unmapped) now, not when each queue is next read.
        correct_min = full or min_offset != self.min_offset
        self.min_offset = min_offset

        def record_exists(offset: int) -> bool:
            # A unit whose record retention deleted is expired, not torn: it stays, and
            # correct_min_offset moves the queue's minimum past it.
            return offset < min_offset or self.commitlog.read_record(offset) is not None

        table = self.queues.queues
        if correct_min or (queues and queue_key is None):
            refreshing = list(table.items())
        elif queue_key is not None and queue_key in table:
            refreshing = [(queue_key, table[queue_key])]
        else:
            refreshing = []
        seen = self._queue_seen
        listings = self.listings
        for key, queue in refreshing:
            listed, corrected = seen.get(key, (-1, -2))
            if listed != listings:
                queue.files.refresh()
            grew = queue.refresh_read_only(end, record_exists, full=full)
            if min_offset >= 0 and (correct_min or corrected != min_offset or grew == -1):
                queue.min_logic_offset = max(queue.min_logic_offset, queue.files.min_offset())
                queue.correct_min_offset(min_offset)
            seen[key] = (listings, min_offset)
        if list_dirs:
            self.index.refresh()
        else:
            for index_file in self.index.files[-1:]:
                index_file.refresh_header()
        return report if full else None

    def _commitlog_moved(self) -> bool:
        """Whether the writer may have appended past ``end`` since the last scan: the
        first word of a record there is no longer 0. The C put path stores each
        TOTALSIZE last and the others write whole records, so 0 means nothing new (a
        scan from there stops at once); anything else is scanned, as before. A new file
        past the end, or files retention deleted, show up at the next listing, as they
        did. Without this a key lookup cost five times the writer's: every call scanned
        the tail and its zeros (issue #34)."""
        mapped = self._tail
        if mapped is None:
            return False  # (a scan finds no file there either)
        word = mapped.unpack_at(_FIRST_WORD, self.end - mapped.file_from_offset)
        return word is None or word[0] != 0

    def _follow_commitlog(self, full: bool, report: RecoveryReport) -> None:
        """Scan the CommitLog on from ``end`` (from the last files when ``full`` or the
        end fell below the first file) and move the files' written positions to the new
        end."""
        files = self.commitlog.files
        check_crc = self.config().check_crc_on_recover
        if full or self.end < files.min_offset():
            self.entries = EntryChain()
            end = scan_valid_end(
                self.commitlog,
                max(0, len(files.files) - 3),
                check_crc=check_crc,
                report=report,
                entries=self.entries,
            )
        else:
            end = scan_valid_end(
                self.commitlog,
                0,
                check_crc=check_crc,
                report=report,
                start_offset=self.end,
                entries=self.entries,
            )
        for mapped in files.files:
            if mapped.file_from_offset + files.file_size <= end:
                mapped.wrote_position = files.file_size
            elif mapped.file_from_offset <= end:
                mapped.wrote_position = end - mapped.file_from_offset
            else:
                mapped.wrote_position = 0
        self.end = end
        self._tail = files.find(end)
