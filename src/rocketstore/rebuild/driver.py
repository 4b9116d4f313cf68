"""The rebuild driver: plan, pass 1 (scan and count), layout, pass 2 (queues and index
files), swap, checkpoint.

Layer: rebuild. Everything is built inside a temporary directory in the store root; the
store's ``consumequeue/`` and ``index/`` are replaced only after every task succeeded, so a
failed task leaves them untouched. The writer lock is held throughout (workers only read
the CommitLog and write into the temporary directory).
"""

from __future__ import annotations

import logging
import mmap
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from rocketstore.config import StoreConfig
from rocketstore.errors import CorruptDataError
from rocketstore.files.lock import DirectoryLock
from rocketstore.files.mapped_file_queue import offset_file_path
from rocketstore.files.store_dir import with_dledger
from rocketstore.format.record_scan import CorruptRegion, check_record
from rocketstore.paths import (
    CHECKPOINT_FILE,
    CONSUME_QUEUE_DIR,
    INDEX_DIR,
    index_file_name,
)
from rocketstore.rebuild.layout import (
    MIN_INDEX_PART_ENTRIES,
    index_tasks,
    join_ranges,
    link_tasks,
    queue_tasks,
)
from rocketstore.rebuild.passes import (
    BuildResult,
    BuildTask,
    IndexPartResult,
    IndexResult,
    QueueResult,
    ScanResult,
    ScanTask,
    TaskFailure,
    build_pass,
    bundle_scans,
    bundle_tasks,
    index_pass,
    scan_bundle_pass,
)
from rocketstore.rebuild.plan import MAX_RANGE_BYTES, commitlog_files, make_settings, plan_ranges
from rocketstore.rebuild.runners import RebuildFailedError, SerialRunner, TaskRunner
from rocketstore.rebuild.scratch import make_scratch
from rocketstore.recovery.checkpoint_file import CheckpointFile

log = logging.getLogger(__name__)

__all__ = ["RebuildFailedError", "RebuildReport", "rebuild_store"]

WORK_PREFIX = ".rebuild-parallel-"
# Called with (phase, amount done, total) as tasks finish: phase is "scan" (amounts in
# bytes of CommitLog), "build" (consume queues and index entries written; in tasks) or
# "link" (index files finished; in files).
ProgressCallback = Callable[[str, int, int], None]


@dataclass
class RebuildReport:
    engine: str
    ranges: int = 0
    records: int = 0
    queues: int = 0
    queue_units: int = 0
    queue_files: int = 0
    index_files: int = 0
    index_entries: int = 0
    commit_log_min: int = 0
    commit_log_end: int = 0
    corrupt: list[CorruptRegion] = field(default_factory=list)
    torn_tail: list[CorruptRegion] = field(default_factory=list)  # not dispatched, no error
    rebuilt_queues: bool = True
    rebuilt_index: bool = True
    seconds: float = 0.0
    phase_seconds: dict[str, float] = field(default_factory=dict)


def rebuild_store(
    root: str | os.PathLike[str],
    runner: TaskRunner,
    *,
    queues: bool = True,
    index: bool = True,
    skip_corrupt: bool = False,
    config: StoreConfig | None = None,
    ranges_per_worker: int = 2,
    max_range_bytes: int = MAX_RANGE_BYTES,
    index_parts: int | None = None,
    min_index_part_entries: int = MIN_INDEX_PART_ENTRIES,
    scratch: bool | None = None,
    lock_held: bool = False,
    on_progress: ProgressCallback | None = None,
) -> RebuildReport:
    """Rebuild the consume queues and/or index files of the store at ``root`` from its
    CommitLog with ``runner``; byte-identical to what the store's dispatcher writes.

    Raises RebuildFailedError (naming the CommitLog range or the file, and the reason)
    when a task fails; corrupt records fail the job unless ``skip_corrupt``, which skips
    them and lists them in the report. Index entries are written in about
    ``index_parts`` parallel parts (default: one a worker) of at least
    ``min_index_part_entries`` each. ``scratch`` puts the scan's spills in RAM-backed
    scratch space (see :mod:`rocketstore.rebuild.scratch`); by default when the runner's
    tasks all run on this machine.
    """
    started = time.monotonic()
    path = os.path.abspath(os.fspath(root))
    config = with_dledger(path, (config or StoreConfig()).validate())
    dirs = config.commit_log_dirs(path)
    commitlog_files(path, dirs)  # NotAStoreError before anything is locked or created
    lock = None if lock_held else DirectoryLock(path)
    if lock is not None:
        lock.acquire()
    spills: str | None = None
    try:
        clear_stale_work(path)
        work = tempfile.mkdtemp(prefix=WORK_PREFIX, dir=path)
        if _is_local(runner) if scratch is None else scratch:
            spills = make_scratch(sum(length for _, length in commitlog_files(path, dirs)))
    except BaseException:
        if lock is not None:
            lock.release()
        raise
    try:
        job = _Job(path, work, runner, config, on_progress, spills)
        report = job.run(
            queues=queues,
            index=index,
            skip_corrupt=skip_corrupt,
            pieces=max(1, runner.workers * ranges_per_worker),
            max_range_bytes=max_range_bytes,
            index_parts=index_parts or runner.workers,
            min_index_part_entries=min_index_part_entries,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if spills is not None:
            shutil.rmtree(spills, ignore_errors=True)
        if lock is not None:
            lock.release()
    report.seconds = time.monotonic() - started
    return report


class _Job:
    def __init__(
        self,
        root: str,
        work: str,
        runner: TaskRunner,
        config: StoreConfig,
        on_progress: ProgressCallback | None,
        spills: str | None,
    ):
        self.spills = spills
        self.root = root
        self.work = work
        self.runner = runner
        self.config = config
        self.on_progress = on_progress

    def _map(self, phase: str, fn: Callable[[Any], Any], tasks: Sequence[Any],
             weights: Sequence[int], *, here: bool = False) -> list[Any]:  # fmt: skip
        """Run ``tasks`` on the runner, or in this process when ``here`` (short work
        whose own time is below what starting a job costs the engine)."""
        total = sum(weights)
        done = [0]

        def finished(i: int) -> None:
            done[0] += weights[i]
            if self.on_progress is not None:
                self.on_progress(phase, done[0], total)

        results = (SerialRunner() if here else self.runner).map(fn, tasks, finished)
        _raise_first_failure(results)
        return results

    def run(
        self,
        *,
        queues: bool,
        index: bool,
        skip_corrupt: bool,
        pieces: int,
        max_range_bytes: int,
        index_parts: int,
        min_index_part_entries: int,
    ) -> RebuildReport:
        settings = make_settings(
            self.root,
            self.work,
            self.config,
            queues=queues,
            index=index,
            skip_corrupt=skip_corrupt,
            spill_dir=self.spills,
        )
        geometry = settings.geometry
        report = RebuildReport(self.runner.name, rebuilt_queues=queues, rebuilt_index=index)
        clock = time.monotonic()
        ranges = plan_ranges(
            self.root,
            geometry.commit_log_file_size,
            pieces,
            max_range_bytes,
            self.config.commit_log_dirs(self.root),
        )
        report.ranges = len(ranges)
        scans = bundle_scans([ScanTask(settings, r) for r in ranges], self.runner.workers)
        bundled_scans: list[list[ScanResult | TaskFailure]] = self._map(
            "scan", scan_bundle_pass, scans,
            [bundle.bytes for bundle in scans],
        )  # fmt: skip
        scanned = _unbundled(bundled_scans)
        results = sorted(cast("list[ScanResult]", scanned), key=lambda r: r.number)
        try:
            walk = join_ranges(
                ranges,
                results,
                geometry.commit_log_file_size,
                skip_corrupt=skip_corrupt,
                inspect=lambda offset: inspect_offset(
                    settings.commitlog_dirs, geometry.commit_log_file_size, offset
                ),
            )
        except CorruptDataError as e:
            raise RebuildFailedError(str(e)) from e
        report.phase_seconds["scan"] = time.monotonic() - clock
        report.records = walk.records
        report.corrupt = walk.corrupt
        report.torn_tail = walk.torn_tail
        for region in walk.torn_tail:
            log.warning("CommitLog data ends with unreadable bytes at %d (%s): a torn write, "
                        "not dispatched; the store's recovery cuts it", region.offset,
                        region.reason)  # fmt: skip
        report.commit_log_min = ranges[0].file_offset if ranges else 0
        report.commit_log_end = walk.end_offset
        for region in walk.corrupt:
            log.warning("skipped corrupt CommitLog bytes at %d: %s", region.offset, region.reason)

        # Two jobs: the consume queues and the index entries (cut into parts over every
        # worker) side by side, then each index file's parts linked. Fewer jobs cost the
        # engine less than more, smaller ones.
        clock = time.monotonic()
        new_queues = os.path.join(self.work, CONSUME_QUEUE_DIR)
        new_index = os.path.join(self.work, INDEX_DIR)
        build: list[BuildTask] = []
        layout = None
        if settings.index:
            entries = sum(r.key_count for r in walk.used)
            names = _index_names(entries // max(1, geometry.index_num - 1) + 2)
            layout = index_tasks(
                walk,
                new_index,
                names,
                geometry.hash_slot_num,
                geometry.index_num,
                parts=index_parts,
                spill_dir=settings.spill_dir,
                min_part_entries=min_index_part_entries,
            )
            build.extend(layout.parts)
        if queues:
            build.extend(queue_tasks(walk, new_queues, geometry.queue_file_size,
                                     self.runner.workers))  # fmt: skip
        bundles = bundle_tasks(build, self.runner.workers)
        bundled: list[list[BuildResult]] = self._map(
            "build", build_pass, bundles, [len(b.tasks) for b in bundles]
        )
        done = _unbundled(bundled)
        queue_results = [r for r in done if isinstance(r, QueueResult)]
        report.queues = sum(r.queues for r in queue_results)
        report.queue_units = sum(r.units for r in queue_results)
        report.queue_files = sum(r.files for r in queue_results)
        report.phase_seconds["build"] = time.monotonic() - clock

        clock = time.monotonic()
        index_end = 0
        if layout is not None:
            files = link_tasks(layout, [r for r in done if isinstance(r, IndexPartResult)])
            built: list[IndexResult] = self._map(
                "link", index_pass, files, [1] * len(files), here=_is_local(self.runner)
            )
            report.index_files = len(built)
            report.index_entries = sum(r.entries for r in built)
            index_end = max((r.end_timestamp for r in built), default=0)
        report.phase_seconds["link"] = time.monotonic() - clock

        clock = time.monotonic()
        swap = [(CONSUME_QUEUE_DIR, new_queues)] if queues else []
        if index:
            swap.append((INDEX_DIR, new_index))
        _swap_in(self.root, self.work, swap)
        with_records = [r for r in walk.used if r.records]
        last_stamp = with_records[-1].last_store_timestamp if with_records else 0
        _write_checkpoint(self.root, last_stamp, index_end if index else None)
        report.phase_seconds["swap"] = time.monotonic() - clock
        return report


def _is_local(runner: TaskRunner) -> bool:
    """Whether every task of ``runner`` runs on this machine (a runner written before the
    ``local`` attribute existed is taken as not local: the safe answer)."""
    return bool(getattr(runner, "local", False))


R = TypeVar("R")


def _unbundled(bundled: Sequence[Sequence[R]]) -> list[R]:
    """The results of bundled tasks, bundle after bundle; the first failure raised."""
    results = [result for bundle in bundled for result in bundle]
    _raise_first_failure(results)
    return results


def _raise_first_failure(results: Sequence[object]) -> None:
    failures = [r for r in results if isinstance(r, TaskFailure)]
    if failures:
        first = failures[0]
        more = f" (and {len(failures) - 1} more failed tasks)" if len(failures) > 1 else ""
        raise RebuildFailedError(f"{first.task}: {first.reason}{more}")


def clear_stale_work(root: str) -> list[str]:
    """Remove the work directories of rebuilds that died (the caller holds the lock, so no
    rebuild is running). A rebuild killed between moving an old directory aside and moving
    the new one in leaves the old one in its work directory: it is put back first."""
    removed = []
    for name in sorted(os.listdir(root)):
        stale = os.path.join(root, name)
        if not name.startswith(WORK_PREFIX) or not os.path.isdir(stale):
            continue
        for part in (CONSUME_QUEUE_DIR, INDEX_DIR):
            aside = os.path.join(stale, f"old-{part}")
            if os.path.isdir(aside) and not os.path.exists(os.path.join(root, part)):
                log.warning("putting back %s/ left aside by a rebuild that died", part)
                os.rename(aside, os.path.join(root, part))
        shutil.rmtree(stale, ignore_errors=True)
        removed.append(name)
    return removed


def _index_names(count: int) -> list[str]:
    """File names for new index files: creation times, strictly increasing (spec 15.6)."""
    now = int(time.time() * 1000)
    names: list[str] = []
    for k in range(count):
        name = index_file_name(now + k)
        while names and name <= names[-1]:
            now += 1
            name = index_file_name(now + k)
        names.append(name)
    return names


def _swap_in(root: str, work: str, swap: list[tuple[str, str]]) -> None:
    """Move each old directory aside and the new one in; on any failure put back what was
    moved so far."""
    moved: list[tuple[str, str | None]] = []  # (name, where the old one went)
    try:
        for name, new in swap:
            current = os.path.join(root, name)
            aside: str | None = None
            if os.path.exists(current):
                aside = os.path.join(work, f"old-{name}")
                os.rename(current, aside)
            moved.append((name, aside))
            if os.path.isdir(new):
                os.rename(new, current)
    except OSError:
        for name, aside in reversed(moved):
            current = os.path.join(root, name)
            if os.path.isdir(current):
                shutil.rmtree(current, ignore_errors=True)
            if aside is not None:
                os.rename(aside, current)
        raise


def _write_checkpoint(root: str, last_store_timestamp: int, index_end: int | None) -> None:
    """A fresh checkpoint: CommitLog and queues cover the last record, the index its last
    file's end (kept as it was when the index was not rebuilt)."""
    checkpoint = CheckpointFile(os.path.join(root, CHECKPOINT_FILE), writable=True)
    fields = {
        "physic_msg_timestamp": last_store_timestamp,
        "logics_msg_timestamp": last_store_timestamp,
    }
    if index_end is not None:
        fields["index_msg_timestamp"] = index_end
    checkpoint.update(**fields)
    checkpoint.flush()


def inspect_offset(dirs: Sequence[str], file_size: int, offset: int) -> str | None:
    """Why the bytes at CommitLog ``offset`` are not a valid record; None when they are
    zero (the end of the data). ``dirs``: where the CommitLog files are."""
    first = offset - offset % file_size
    path = offset_file_path(dirs, first)
    try:
        with open(path, "rb") as handle:
            handle.seek(offset - first)
            head = handle.read(8)
            if len(head) == 8 and not any(head):
                return None
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                view = memoryview(mapped)
                try:
                    reason = check_record(view, first, offset - first, len(mapped))
                finally:
                    view.release()
    except (OSError, ValueError) as e:
        return f"unreadable: {e}"
    return f"{reason or 'no record'} (offset {offset})"
