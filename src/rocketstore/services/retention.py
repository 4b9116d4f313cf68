"""Retention: RocketMQ's CleanCommitLogService and CleanConsumeQueueService (spec 9).

Layer: services. Every ``clean_resource_interval`` ms one round (``run_once``):

1. Measure disk usage of the CommitLog and consume-queue directories; set or clear the
   store's DISK_FULL flag (puts are refused above ``disk_space_warning_level_ratio``).
2. If it is time (the hour is in ``delete_when``), the disk is fuller than
   ``disk_max_used_space_ratio`` (or cannot be measured), or an operator asked: delete
   CommitLog files older than ``file_reserved_time`` hours, oldest first, at most
   ``delete_file_batch_max`` per round, pausing between deletions. Above
   ``disk_space_clean_forcibly_ratio`` files go regardless of age. Never the newest file,
   never a hole: the round stops at the first file that must stay.
3. When the CommitLog minimum moved: delete consume-queue and index files wholly below it
   and correct each queue's min offset.

Never unmaps a file a reader holds (``MappedFile.hold``): such a file is retired (no new
readers; they see it as removed) and deleted on a later round, or, once it has been held
for ``destroy_mapped_file_interval_forcibly`` ms, deleted at once and unmapped by its last
reader. Disk usage, clock and sleep are injectable so tests can fill a disk and age files.
Must not decide anything about records: it only compares offsets, file times and ratios.
"""

from __future__ import annotations

import enum
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from rocketstore.commitlog import CommitLog
from rocketstore.config import StoreConfig, delete_hours
from rocketstore.consume_queue import ConsumeQueue
from rocketstore.files.mapped_file import MappedFile
from rocketstore.index import IndexService
from rocketstore.paths import CONSUME_QUEUE_DIR

log = logging.getLogger(__name__)

# RocketMQ's MAX_MANUAL_DELETE_FILE_TIMES: executeDeleteFilesManually arms 20 rounds.
MANUAL_DELETE_ROUNDS = 20


def disk_usage_ratio(path: str, adding: int = 0) -> float:
    """Used fraction of the filesystem holding ``path``, as RocketMQ computes it
    (``UtilAll.getDiskPartitionSpaceUsedPercent``): used / (used + available to us),
    rounded up to a whole percent; -1.0 when it cannot be measured. ``adding``: as it would
    be once that many more bytes are written (what a tool checks before a large write)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return -1.0
    total = st.f_blocks * st.f_frsize
    used = total - st.f_bfree * st.f_frsize + adding
    entire = total - st.f_bfree * st.f_frsize + st.f_bavail * st.f_frsize
    if total <= 0 or entire <= 0:
        return -1.0
    return -(-used * 100 // entire) / 100  # integer percent, rounded up


class Trigger(enum.Enum):
    """Why a round deletes CommitLog files at all (RocketMQ's three conditions)."""

    TIME = "time"  # the hour is in delete_when
    SPACE = "space"  # a disk is above disk_max_used_space_ratio, or unmeasurable
    MANUAL = "manual"  # delete_expired_files() / plan()


class Deletion(NamedTuple):
    """One file deleted (or, in a dry run, to be deleted) and why."""

    path: str
    reason: str


@dataclass
class RetentionReport:
    """What one round (or one manual call) did or, with ``dry_run``, would do."""

    commitlog_files: list[Deletion] = field(default_factory=list)
    queue_files: list[Deletion] = field(default_factory=list)
    index_files: list[Deletion] = field(default_factory=list)
    # CommitLog files retired but still held by a reader: deleted on a later round.
    held_files: list[str] = field(default_factory=list)
    disk_ratio: float = -1.0  # CommitLog disk, fraction used, -1 when unknown
    queue_disk_ratio: float = -1.0
    trigger: Trigger | None = None
    trigger_reason: str = ""
    clean_immediately: bool = False  # disk above disk_space_clean_forcibly_ratio
    disk_full: bool = False
    disk_full_changed: bool = False
    min_commit_log_offset: int = -1  # after the round
    dry_run: bool = False

    @property
    def files_deleted(self) -> int:
        return len(self.commitlog_files) + len(self.queue_files) + len(self.index_files)

    def deletions(self) -> list[Deletion]:
        return [*self.commitlog_files, *self.queue_files, *self.index_files]

    def merge(self, later: RetentionReport) -> RetentionReport:
        """This report followed by ``later`` (a manual call runs several rounds)."""
        self.commitlog_files += later.commitlog_files
        self.queue_files += later.queue_files
        self.index_files += later.index_files
        self.held_files = later.held_files
        self.disk_ratio, self.queue_disk_ratio = later.disk_ratio, later.queue_disk_ratio
        self.clean_immediately = later.clean_immediately
        self.disk_full_changed = self.disk_full_changed or later.disk_full_changed
        self.disk_full = later.disk_full
        if later.min_commit_log_offset >= 0:
            self.min_commit_log_offset = later.min_commit_log_offset
        return self

    def summary(self) -> str:
        verb = "would delete" if self.dry_run else "deleted"
        text = (
            f"{verb} {len(self.commitlog_files)} CommitLog, {len(self.queue_files)} "
            f"consume-queue and {len(self.index_files)} index files"
        )
        if self.trigger is not None:
            text += f" ({self.trigger_reason})"
        text += f"; disk {_percent(self.disk_ratio)} used"
        if self.held_files:
            text += f"; {len(self.held_files)} held by a reader, retried next round"
        if self.disk_full:
            text += "; DISK FULL: puts refused"
        return text


def _percent(ratio: float) -> str:
    return "unknown" if ratio < 0 else f"{ratio * 100:.0f}%"


class RetentionService:
    """Deletes expired files of one store; ``run_once`` is one scheduled round."""

    def __init__(
        self,
        root: str,
        commitlog: CommitLog,
        queues: Callable[[], Iterable[ConsumeQueue]],
        index: IndexService,
        config: StoreConfig,
        *,
        on_disk_full: Callable[[bool], None] | None = None,
        disk_usage: Callable[[str], float] = disk_usage_ratio,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], object] | None = None,
    ):
        """``queues`` returns the store's consume queues; ``on_disk_full(full)`` is told
        when the disk-full state changes. ``disk_usage(path)`` (fraction used, -1 unknown),
        ``clock`` (epoch seconds, compared with file mtimes) and ``sleep`` (the pause
        between deletions; by default interrupted by ``shutdown``) are for tests."""
        self.root = root
        self.commitlog = commitlog
        self.queues = queues
        self.index = index
        self.config = config
        self.on_disk_full = on_disk_full
        self.disk_usage = disk_usage
        self.clock = clock
        self.sleep: Callable[[float], object] = sleep if sleep is not None else self._wait
        self.disk_full = False
        self.last_report: RetentionReport | None = None
        self.error: BaseException | None = None
        self._held_since: dict[str, float] = {}  # path -> when a reader first blocked it
        self._queues_cleaned_below = -1  # CommitLog min of the last queue/index cleanup
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- entry points -------------------------------------------------------------------

    def run_once(self) -> RetentionReport:
        """One scheduled round (what the background thread does every interval)."""
        with self._lock:
            report = self._round(manual=False, force=False, dry_run=False)
        self.last_report = report
        if report.files_deleted or report.held_files or report.disk_full_changed:
            log.info("%s: retention %s", self.root, report.summary())
        return report

    def delete_expired_files(self, force: bool = False, dry_run: bool = False) -> RetentionReport:
        """Manual cleanup (RocketMQ's executeDeleteFilesManually): expired files go now,
        whatever the hour or disk usage; ``force`` deletes every CommitLog file but the
        newest regardless of age. Runs rounds back to back (each at most
        ``delete_file_batch_max`` files) until one deletes nothing, at most 20.
        ``dry_run`` only reports what would be deleted and why."""
        with self._lock:
            if dry_run:
                return self._round(manual=True, force=force, dry_run=True)
            total = self._round(manual=True, force=force, dry_run=False)
            for _ in range(MANUAL_DELETE_ROUNDS - 1):
                if not total.commitlog_files or total.held_files or self._stop.is_set():
                    break
                later = self._round(manual=True, force=force, dry_run=False)
                total.merge(later)
                if not later.commitlog_files:
                    break
        self.last_report = total
        log.info("%s: manual retention %s", self.root, total.summary())
        return total

    def plan(self, force: bool = False) -> list[Deletion]:
        """Dry run of ``delete_expired_files(force)``: (path, reason) of every file it
        would delete, CommitLog files first, then consume-queue and index files."""
        return self.delete_expired_files(force=force, dry_run=True).deletions()

    # --- one round ----------------------------------------------------------------------

    def _round(self, *, manual: bool, force: bool, dry_run: bool) -> RetentionReport:
        now = self.clock()
        report = RetentionReport(dry_run=dry_run)
        self._measure(report)
        if not dry_run:
            self._update_disk_full(report)
        self._decide_trigger(report, now, manual)
        rounds = MANUAL_DELETE_ROUNDS if dry_run else 1
        limit = max(1, self.config.delete_file_batch_max) * rounds
        candidates = self._commitlog_candidates(report, now, force, limit)
        if dry_run:
            report.commitlog_files = [Deletion(m.path, why) for m, why in candidates]
            min_offset = self._min_offset_after(len(candidates))
            report.min_commit_log_offset = min_offset
            if min_offset >= 0:
                why = _below(min_offset)
                for queue in list(self.queues()):
                    report.queue_files += [
                        Deletion(p, why) for p in queue.expired_files(min_offset)
                    ]
                report.index_files = [
                    Deletion(p, why) for p in self.index.expired_files(min_offset)
                ]
            return report
        self._delete_commitlog(report, candidates, now)
        min_offset = self.commitlog.min_offset()
        report.min_commit_log_offset = min_offset
        if min_offset > self._queues_cleaned_below:
            # CleanConsumeQueueService: only when the CommitLog minimum moved.
            self._delete_queues_and_index(report, min_offset)
            self._queues_cleaned_below = min_offset
        return report

    def _measure(self, report: RetentionReport) -> None:
        c = self.config
        # Each CommitLog path's disk (one unless the CommitLog spreads over several):
        # RocketMQ counts the one with the most room, and makes no new file on one above
        # the forcible-clean ratio.
        forcibly = c.disk_space_clean_forcibly_ratio / 100
        ratios = {p: self.disk_usage(self._existing(p)) for p in self.commitlog.dirs.writable}
        self.commitlog.full_paths = frozenset(p for p, r in ratios.items() if r > forcibly)
        report.disk_ratio = min(ratios.values())
        report.queue_disk_ratio = self.disk_usage(
            self._existing(os.path.join(self.root, CONSUME_QUEUE_DIR))
        )
        report.clean_immediately = c.clean_file_forcibly_enable and any(
            r > forcibly for r in (report.disk_ratio, report.queue_disk_ratio)
        )

    def _existing(self, path: str) -> str:
        # Before the first file is written the directory may not exist: measure the disk
        # it will be made on (its nearest existing parent), else the root's.
        probe = os.path.abspath(path)
        while not os.path.isdir(probe):
            parent = os.path.dirname(probe)
            if parent == probe:
                return self.root
            probe = parent
        return probe

    def _update_disk_full(self, report: RetentionReport) -> None:
        warning = self.config.disk_space_warning_level_ratio
        worst = max(report.disk_ratio, report.queue_disk_ratio)
        full = worst > warning / 100
        report.disk_full = full
        if full == self.disk_full:
            return
        self.disk_full = full
        report.disk_full_changed = True
        if full:
            log.error(
                "%s: disk %s used > disk_space_warning_level_ratio %d%%: refusing puts",
                self.root,
                _percent(worst),
                warning,
            )
        else:
            log.warning(
                "%s: disk %s used, not above %d%% any more: accepting puts again",
                self.root,
                _percent(worst),
                warning,
            )
        if self.on_disk_full is not None:
            self.on_disk_full(full)

    def _decide_trigger(self, report: RetentionReport, now: float, manual: bool) -> None:
        c = self.config
        max_used = min(95, max(10, c.disk_max_used_space_ratio))  # RocketMQ clamps it
        hour = time.localtime(now).tm_hour
        spaces = (("CommitLog", report.disk_ratio), ("consume-queue", report.queue_disk_ratio))
        if manual:
            report.trigger, report.trigger_reason = Trigger.MANUAL, "manual delete"
        elif hour in delete_hours(c.delete_when):
            report.trigger = Trigger.TIME
            report.trigger_reason = f"hour {hour:02d} is in delete_when {c.delete_when!r}"
        else:
            for name, ratio in spaces:
                if ratio < 0 or ratio > max_used / 100:
                    report.trigger = Trigger.SPACE
                    report.trigger_reason = (
                        f"{name} disk usage unknown"
                        if ratio < 0
                        else f"{name} disk {_percent(ratio)} used > disk_max_used_space_ratio "
                        f"{max_used}%"
                    )
                    break
        if report.trigger is not None and report.clean_immediately:
            report.trigger_reason += (
                f"; above disk_space_clean_forcibly_ratio {c.disk_space_clean_forcibly_ratio}%"
            )

    def _commitlog_candidates(
        self, report: RetentionReport, now: float, force: bool, limit: int
    ) -> list[tuple[MappedFile, str]]:
        """Oldest-first files to delete: never the newest, stop at the first that stays."""
        c = self.config
        reserved_s = c.file_reserved_time * 3600
        chosen: list[tuple[MappedFile, str]] = []
        for mapped in list(self.commitlog.files.files)[:-1]:
            if len(chosen) >= limit:
                break
            if not mapped.available:
                # Retired by an earlier round while a reader held it; it is unreadable
                # already, so it goes whatever the trigger (RocketMQ's redeleteHangedFile).
                chosen.append((mapped, "retired earlier while a reader held it"))
                continue
            if report.trigger is None:
                break
            age_s = now - self._mtime(mapped)
            age = f"last modified {age_s / 3600:.1f} h ago"
            if age_s >= reserved_s:
                why = f"expired: {age}, file_reserved_time is {c.file_reserved_time} h"
            elif force:
                why = f"forced by delete_expired_files(force=True); {age}"
            elif report.clean_immediately:
                why = (
                    f"disk above disk_space_clean_forcibly_ratio "
                    f"{c.disk_space_clean_forcibly_ratio}%: deleted regardless of age; {age}"
                )
            else:
                break  # the first file that must stay: never leave a hole
            if mapped.in_use:
                why += " (a reader holds it now: deleted once released)"
            chosen.append((mapped, why))
        return chosen

    @staticmethod
    def _mtime(mapped: MappedFile) -> float:
        try:
            return os.stat(mapped.path).st_mtime  # RocketMQ uses File.lastModified()
        except FileNotFoundError:
            return float("-inf")  # gone from disk already: certainly expired

    def _min_offset_after(self, deleted: int) -> int:
        files = list(self.commitlog.files.files)
        if deleted >= len(files):
            return -1
        if deleted == 0:
            return self.commitlog.min_offset()
        return files[deleted].file_from_offset

    def _delete_commitlog(
        self, report: RetentionReport, candidates: list[tuple[MappedFile, str]], now: float
    ) -> None:
        c = self.config
        forcibly_s = c.destroy_mapped_file_interval_forcibly / 1000
        for number, (mapped, reason) in enumerate(candidates):
            why = reason
            if self._stop.is_set():
                break
            if not mapped.retire():
                since = self._held_since.setdefault(mapped.path, now)
                if now - since < forcibly_s:
                    report.held_files.append(mapped.path)
                    log.info("%s is held by a reader; deletion retried next round", mapped.path)
                    break
                why += (
                    f"; held by a reader for {now - since:.0f} s, more than "
                    "destroy_mapped_file_interval_forcibly: unmapped when it releases the file"
                )
            self._held_since.pop(mapped.path, None)
            if self.commitlog.files.first is not mapped:
                break  # cannot happen: only retention removes files from the front
            self.commitlog.files.delete_first()
            report.commitlog_files.append(Deletion(mapped.path, why))
            log.info("retention deleted %s: %s", mapped.path, why)
            if number + 1 < len(candidates):
                self.sleep(c.delete_commit_log_files_interval / 1000)

    def _delete_queues_and_index(self, report: RetentionReport, min_offset: int) -> None:
        why = _below(min_offset)
        pause = self.config.delete_consume_queue_files_interval / 1000
        for queue in list(self.queues()):
            if self._stop.is_set():
                return
            expired = queue.expired_files(min_offset)
            deleted = queue.delete_expired_files(min_offset)  # also corrects the min offset
            report.queue_files += [Deletion(p, why) for p in expired[:deleted]]
            if deleted:
                self.sleep(pause)
        expired = self.index.expired_files(min_offset)
        deleted = self.index.delete_expired(min_offset)
        report.index_files += [Deletion(p, why) for p in expired[:deleted]]

    # --- thread -------------------------------------------------------------------------

    def _wait(self, seconds: float) -> bool:
        return self._stop.wait(seconds)

    def start(self) -> None:
        """Run a round every ``clean_resource_interval`` ms (the first after one interval)."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="rocketstore-retention", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        # The interval is read at each round: the settings may change while the store is open.
        while not self._stop.wait(self.config.clean_resource_interval / 1000):
            try:
                self.run_once()
            except Exception as e:  # a failed round is retried next interval, as RocketMQ's
                log.exception("%s: retention round failed", self.root)
                self.error = e

    def shutdown(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None


def _below(min_offset: int) -> str:
    return f"every entry points below the CommitLog min offset {min_offset}"
