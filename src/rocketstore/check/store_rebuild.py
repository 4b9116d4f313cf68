"""Rebuilding consume queues and index from the CommitLog, and cutting a corrupt CommitLog
tail: the writing half of ``rebuild`` and ``check --repair``.

Layer: check (above the store: the rebuild opens a MessageStore as the writer; the CLI's
``rebuild`` command and ``check_store(..., repair=True)`` call it). The rebuild itself is
the engine's recovery: the old ``consumequeue/`` and ``index/`` are moved into a temporary
directory inside the store root, the store is opened as a writer (with no queues and no
index, recovery dispatches every record again from the CommitLog's start) and closed; the
old directories are deleted only when that succeeded, and put back otherwise. Body CRCs are
not checked during a rebuild, so a record with a bad body is kept (``check`` reports it)
rather than cutting off everything after it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass

from rocketstore.config import StoreConfig
from rocketstore.errors import StoreLockedError
from rocketstore.files.lock import DirectoryLock
from rocketstore.files.mapped_file_queue import offset_file_paths
from rocketstore.files.store_dir import orphaned_files
from rocketstore.format.multi_dispatch import LMQ_PREFIX
from rocketstore.index_catalog import newest_geometry
from rocketstore.paths import (
    CONSUME_QUEUE_DIR,
    INDEX_DIR,
    CommitLogDirs,
    is_offset_file_name,
)
from rocketstore.store import MessageStore

ZERO_CHUNK = bytes(1 << 20)
ASIDE_PREFIX = ".rebuild-"
# The parallel engine's work directories share the prefix; it clears its own at its next
# run (putting back what a killed swap left aside), so this engine leaves them alone.
PARALLEL_PREFIX = ".rebuild-parallel-"
# Old directories kept for the user after a writer took the store mid-rebuild: never
# cleared automatically.
KEPT_PREFIX = "rebuild-kept-"

log = logging.getLogger(__name__)


@dataclass
class RebuildOutcome:
    rebuilt_queues: bool = True
    rebuilt_index: bool = True
    queues: int = 0
    queue_units: int = 0
    index_files: int = 0
    index_entries: int = 0
    redispatched_records: int = 0
    commit_log_min: int = 0
    commit_log_end: int = 0
    truncated_bytes: int = 0
    seconds: float = 0.0


@dataclass
class CutOutcome:
    offset: int
    cleared_bytes: int  # from the cut to the last non-zero byte, now zeros
    removed_files: list[str]


def cut_commitlog(dirs: CommitLogDirs, offset: int) -> CutOutcome:
    """Zero the CommitLog from ``offset`` to the end of its file and delete later files.

    The file holding ``offset`` is kept (zeroed from there), so the store keeps its first
    offset even when the cut is at the start of the first file. Only chunks that hold data
    are written, so a sparse, pre-sized file stays sparse. The caller holds the lock.
    """
    cleared = 0
    removed: list[str] = []
    for start, path in offset_file_paths(dirs.all).items():
        name = os.path.basename(path)
        size = os.path.getsize(path)
        if start + size <= offset:
            continue
        if start > offset:
            os.remove(path)
            removed.append(name)
            continue
        with open(path, "r+b") as f:
            position = first = offset - start
            data_end = first
            while position < size:
                f.seek(position)
                chunk = f.read(min(len(ZERO_CHUNK), size - position))
                if chunk.strip(b"\0"):
                    data_end = position + len(chunk.rstrip(b"\0"))
                    f.seek(position)
                    f.write(ZERO_CHUNK[: len(chunk)])
                position += len(chunk)
            cleared += data_end - first
            f.flush()
            os.fsync(f.fileno())
    return CutOutcome(offset, cleared, removed)


class Rebuild:
    """Set ``consumequeue/`` and/or ``index/`` aside, then rebuild them with the engine.

    ``prepare`` runs while the caller holds the writer lock; ``run`` opens the store as the
    writer (which takes the lock itself) and ``finish``/``restore`` clean up.
    """

    def __init__(self, root: str, *, queues: bool, index: bool, config: StoreConfig | None = None):
        # A rebuild of the index was asked for (its old files are moved aside): it is made
        # whatever messageIndexEnable says, which only stops a broker adding to it.
        self.config = (config or StoreConfig()).replace(message_index_enable=True)
        self.root = root
        # Both are always rebuilt (a re-dispatch writes both); the one not asked for is put
        # back afterwards, so it stays byte for byte as it was.
        self.names = [CONSUME_QUEUE_DIR, INDEX_DIR]
        self.keep = [
            name for name, wanted in ((CONSUME_QUEUE_DIR, queues), (INDEX_DIR, index)) if not wanted
        ]
        self.aside = ""
        self.moved: list[str] = []

    def prepare(self) -> None:
        clear_stale_asides(self.root)
        self.aside = tempfile.mkdtemp(prefix=ASIDE_PREFIX, dir=self.root)
        for name in self.names:
            source = os.path.join(self.root, name)
            if os.path.exists(source):
                os.rename(source, os.path.join(self.aside, name))
                self.moved.append(name)

    def geometry(self) -> dict[str, int]:
        """File sizes of the set-aside queues and index, so the rebuilt files match them
        (the engine adopts sizes from existing files only, and these are moved away)."""
        sizes: dict[str, int] = {}
        queue_base = os.path.join(self.aside, CONSUME_QUEUE_DIR)
        for directory, _dirs, names in os.walk(queue_base):
            found = [n for n in names if is_offset_file_name(n)]
            if found:
                size = os.path.getsize(os.path.join(directory, found[0]))
                sizes["mapped_file_size_consume_queue"] = size
                break
        defaults = self.config.index_geometry
        with contextlib.suppress(ValueError):  # unknown: the engine's defaults
            geometry = newest_geometry(os.path.join(self.aside, INDEX_DIR), defaults)
            if geometry is not None:
                sizes["max_hash_slot_num"], sizes["max_index_num"] = geometry
        return sizes

    def run(self) -> RebuildOutcome:
        started = time.monotonic()
        # Readable records after damage are refused, not cut: `check --repair --force`
        # cuts on purpose (before this runs).
        config = self.config.replace(
            check_crc_on_recover=False, cut_damaged_commitlog=False, **self.geometry()
        )
        with MessageStore.open(self.root, config) as store:
            report = store.recovery_report
            outcome = RebuildOutcome(
                rebuilt_queues=CONSUME_QUEUE_DIR not in self.keep,
                rebuilt_index=INDEX_DIR not in self.keep,
                redispatched_records=report.redispatched_records,
                commit_log_min=max(store.min_commit_log_offset(), 0),
                commit_log_end=store.max_commit_log_offset(),
                truncated_bytes=report.truncated_bytes,
            )
            for topic, queue_ids in store.topics().items():
                for queue_id in queue_ids:
                    outcome.queues += 1
                    outcome.queue_units += store.max_offset(topic, queue_id) - store.min_offset(
                        topic, queue_id
                    )
            outcome.index_files = len(store.index_files())
            outcome.index_entries = sum(f.entry_count for f in store.index_files())
        outcome.seconds = time.monotonic() - started
        return outcome

    def finish(self) -> None:
        """Keep the rebuilt directories (put back the ones not asked for) and clean up."""
        for name in self.keep:
            rebuilt = os.path.join(self.root, name)
            if os.path.isdir(rebuilt):
                shutil.rmtree(rebuilt)
            if name in self.moved:
                os.rename(os.path.join(self.aside, name), rebuilt)
        shutil.rmtree(self.aside, ignore_errors=True)

    def keep_aside(self) -> str:
        """Rename the set-aside directory to one ``clear_stale_asides`` leaves alone."""
        kept = os.path.join(
            self.root, KEPT_PREFIX + os.path.basename(self.aside)[len(ASIDE_PREFIX) :]
        )
        os.rename(self.aside, kept)
        self.aside = kept
        return kept

    def restore(self) -> None:
        """Put the old directories back (after a failed rebuild)."""
        for name in self.moved:
            current = os.path.join(self.root, name)
            if os.path.isdir(current):
                shutil.rmtree(current)
            elif os.path.exists(current):
                os.remove(current)
            os.rename(os.path.join(self.aside, name), current)
        shutil.rmtree(self.aside, ignore_errors=True)


def clear_stale_asides(root: str) -> list[str]:
    """Remove what rebuilds killed mid-way set aside (the caller holds the lock, so none
    runs). Only old, derived queue and index files are in them; the store's open rebuilds
    whatever is missing from the CommitLog, under the abort marker."""
    removed = []
    for name in sorted(os.listdir(root)):
        stale = os.path.join(root, name)
        if name.startswith(PARALLEL_PREFIX) or not name.startswith(ASIDE_PREFIX):
            continue
        if os.path.isdir(stale) and not os.path.islink(stale):
            log.warning("%s: removing %s, left by a rebuild that did not finish", root, name)
            shutil.rmtree(stale, ignore_errors=True)
            removed.append(name)
    return removed


def missing_commitlog_problem(root: str, dirs: CommitLogDirs) -> str | None:
    """Why rebuilding (or repairing) ``root`` would delete its consume queues and index,
    or None (files.store_dir.orphaned_files; RocketMQ's recovery would empty them too)."""
    problem = orphaned_files(root, dirs)
    return None if problem is None else f"{problem}: a rebuild would delete them"


def dledger_problem(dirs: CommitLogDirs, engine: str | None) -> str | None:
    """Why a store with a DLedger CommitLog cannot be repaired (``engine`` None) or
    rebuilt with ``engine``, or None: its log is only read, so repair (which cuts it) and
    the single engine (a writer's recovery) cannot run; the parallel engines read it."""
    if not dirs.dledger:
        return None
    where = f"the CommitLog is a DLedger log ({', '.join(dirs.dledger)})"
    if engine is None:
        return (
            f"{where}: rocketstore reads it but does not repair it (check reports its "
            "damage; rebuild --engine local rebuilds its queues and index)"
        )
    if engine == "single":
        return f"{where}: rebuild its queues and index with --engine local or --engine spark"
    return None


def multi_dispatch_problem(root: str, config: StoreConfig) -> str | None:
    """Why rebuilding the consume queues of ``root`` under ``config`` would lose the
    units multi-dispatch (LMQ) records give other queues, or None (every engine writes
    them with enableMultiDispatch)."""
    if config.enable_multi_dispatch:
        return None
    base = os.path.join(root, CONSUME_QUEUE_DIR)
    names = sorted(os.listdir(base)) if os.path.isdir(base) else []
    lmq = [name for name in names if name.startswith(LMQ_PREFIX)]
    if not lmq:
        return None
    return (
        f"the store has multi-dispatch queues ({lmq[0]}{', ...' if len(lmq) > 1 else ''}) "
        "that a rebuild without enableMultiDispatch would drop: give -c broker.conf with "
        "enableMultiDispatch=true and enableLmq=true, as the broker had"
    )


def held_lock(root: str) -> DirectoryLock:
    """Take the writer lock (StoreLockedError while a writer or a broker runs)."""
    lock = DirectoryLock(root)
    lock.acquire()
    return lock


def rebuild(
    root: str,
    *,
    queues: bool,
    index: bool,
    lock: DirectoryLock,
    config: StoreConfig | None = None,
) -> RebuildOutcome:
    """Rebuild under ``lock`` (held by the caller, released here before the engine takes
    it again: the engine offers no way to hand a held lock over)."""
    job = Rebuild(root, queues=queues, index=index, config=config)
    try:
        job.prepare()
    except BaseException:
        job.restore()
        lock.release()
        raise
    lock.release()
    try:
        outcome = job.run()
    except StoreLockedError as e:
        # Another writer took the store between our lock and the engine's: it owns the
        # directories now, so nothing is moved back under its feet.
        kept = job.keep_aside()
        raise StoreLockedError(
            f"{e}; it was opened during the rebuild: the old directories are kept in {kept}"
        ) from e
    except BaseException:
        job.restore()
        raise
    job.finish()
    return outcome
