"""Opening a store: the arguments checked, the directory judged, file geometry adopted;
for a writer, recovery run under the abort marker.

Layer: store (the facade's package). Checks on paths and existing files come before any
part is built; ``recover_writer`` then runs recovery (rocketstore.recovery) over the
parts the facade made and loaded.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable

from rocketstore.commitlog import CommitLog
from rocketstore.config import StoreConfig
from rocketstore.errors import ConfigError, CorruptDataError, NotAStoreError
from rocketstore.files.deleted_queues import load_deleted_queues, prune_deleted
from rocketstore.files.mapped_file_queue import detect_file_size
from rocketstore.files.store_dir import missing_commitlog, orphaned_files, with_dledger
from rocketstore.format.queue_unit import CQ_UNIT_SIZE
from rocketstore.index import IndexService
from rocketstore.index_catalog import newest_geometry
from rocketstore.paths import ABORT_FILE, CONSUME_QUEUE_DIR, index_dir
from rocketstore.recovery.checkpoint_file import CheckpointFile
from rocketstore.recovery.recover import RecoveryReport, recover_store
from rocketstore.store.queue_table import QueueTable

log = logging.getLogger(__name__)
# A line per slow phase of a writer's recovery, with its rate (the CLI shows these on a
# terminal: a recovery that re-checks or re-dispatches gigabytes takes minutes).
progress_log = logging.getLogger(f"{__name__}.progress")
SLOW_PHASE_S = 0.5
MIB = 1024 * 1024


# Within a long re-dispatch, a line this often with how far it is, its rate and time left.
TICK_S = 2.0


class _Ticker:
    """While a re-dispatch from ``start`` to ``end`` runs, logs every TICK_S how far it is
    (``position()``: the dispatcher's offset, read from another thread: an int attribute),
    its rate and the time left. Does nothing unless the progress lines are shown."""

    def __init__(self, start: int, end: int, position: Callable[[], int] | None) -> None:
        self.start, self.end, self.position = start, end, position
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> _Ticker:
        if self.position is not None and progress_log.isEnabledFor(logging.INFO):
            self._thread = threading.Thread(target=self._run, name="redispatch-progress")
            self._thread.daemon = True
            self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        assert self.position is not None
        began = time.monotonic()
        while not self._stop.wait(TICK_S):
            progress_log.info("recovery: %s", self.line(self.position(), time.monotonic() - began))

    def line(self, position: int, seconds: float) -> str:
        total = max(self.end - self.start, 1)
        done = min(max(position - self.start, 0), total)
        rate = done / max(seconds, 1e-9)
        left = f", {(total - done) / rate:,.0f} s left" if rate > 0 else ""
        return (
            f"re-dispatching: {done * 100 / total:.0f} % ({done / MIB:,.0f} of "
            f"{total / MIB:,.0f} MiB), {rate / MIB:,.0f} MiB/s{left}"
        )


def _phase(started: float, what: str, size_bytes: int = 0) -> None:
    took = time.monotonic() - started
    if took < SLOW_PHASE_S:
        return
    rate = f" ({size_bytes / MIB / took:,.0f} MiB/s)" if size_bytes else ""
    progress_log.info("recovery: %s in %.1f s%s", what, took, rate)


def open_arguments(
    path: str | os.PathLike[str], config: StoreConfig | None, read_only: bool
) -> tuple[str, StoreConfig]:
    """The root and the settings ``MessageStore.open`` opens with, after ConfigError for
    arguments of the wrong kind and NotAStoreError (or ConfigError for a CommitLog path)
    for a directory the store cannot be in. CommitLog and ConsumeQueue file sizes are
    taken from existing files, the index geometry from the newest index file."""
    if not isinstance(path, (str, os.PathLike)):
        raise ConfigError(f"path must be a str or os.PathLike, got {type(path).__name__}")
    root = os.fspath(path)
    if not isinstance(root, str) or not root:
        # "" would be the current directory, whatever it happens to be
        raise ConfigError(f"path must be a non-empty str path, got {root!r}")
    if config is not None and not isinstance(config, StoreConfig):
        raise ConfigError(f"config must be a StoreConfig, got {type(config).__name__}")
    if not isinstance(read_only, bool):
        raise ConfigError(f"read_only must be True or False, got {read_only!r}")
    config = with_dledger(root, (config or StoreConfig()).validate())
    if read_only:
        dirs = config.commit_log_dirs(root)
        lacks = missing_commitlog(root, dirs)
        if lacks is not None:
            raise NotAStoreError(f"{root} is not a store directory ({lacks})")
        orphaned = orphaned_files(root, dirs)
        if orphaned is not None:
            raise NotAStoreError(f"{root}: {orphaned}")
    elif os.path.exists(root) and not os.path.isdir(root):
        raise NotAStoreError(f"{root} exists and is not a directory")
    else:
        blocked = _blocked_by_file(root)
        if blocked is not None:
            raise NotAStoreError(f"{root} cannot be a directory: {blocked} is a file")
        dirs = config.commit_log_dirs(root)
        dirs.require_writable()
        for directory in dirs.all:
            if os.path.exists(directory) and not os.path.isdir(directory):
                raise ConfigError(f"CommitLog path {directory} is not a directory")
            blocked = _blocked_by_file(directory)
            if blocked is not None:
                # Else every put would fail, CREATE_MAPEDFILE_FAILED.
                raise ConfigError(
                    f"CommitLog path {directory} cannot be a directory: {blocked} is a file"
                )
    return root, adopt_file_sizes(root, config, read_only=read_only)


def recover_writer(
    commitlog: CommitLog,
    queues: QueueTable,
    index: IndexService,
    checkpoint: CheckpointFile,
    config: StoreConfig,
    redispatch: Callable[[int], int],
    position: Callable[[], int] | None = None,
) -> RecoveryReport:
    """Load and recover a writer's store (normal or, with the abort marker there, abnormal
    recovery) and create the marker for the session; the report. ``position``: how far a
    re-dispatch is (the dispatcher's offset), for the progress lines within it."""
    root = queues.root
    marker = os.path.join(root, ABORT_FILE)
    abnormal = os.path.exists(marker)
    # Recovery writes queue and index files (and re-dispatches, which may rebuild
    # them from the CommitLog start): a kill in it must leave the marker, or the next
    # open takes half-written queues for a clean shutdown (issue #33).
    if not abnormal:
        create_marker(marker)
    try:
        return _recover(
            commitlog, queues, index, checkpoint, config, redispatch, abnormal, position
        )
    except BaseException:
        if not abnormal:
            # A refused open leaves the store as it found it; what recovery wrote
            # before refusing were whole repairs, not a half-done re-dispatch.
            with contextlib.suppress(FileNotFoundError):
                os.remove(marker)
        raise


def _recover(
    commitlog: CommitLog,
    queues: QueueTable,
    index: IndexService,
    checkpoint: CheckpointFile,
    config: StoreConfig,
    redispatch: Callable[[int], int],
    abnormal: bool,
    position: Callable[[], int] | None = None,
) -> RecoveryReport:
    root = queues.root
    started = time.monotonic()
    commitlog.files.load()
    queues.load_all(writable=True)
    index.load()
    _phase(
        started,
        f"{len(commitlog.files.files)} CommitLog files, {len(queues.queues)} consume queues "
        f"and {len(index.files)} index files loaded",
    )
    redispatch_s = [0.0]

    def timed_redispatch(offset: int) -> int:
        began, size = time.monotonic(), max(0, commitlog.max_offset() - offset)
        try:
            with _Ticker(offset, commitlog.max_offset(), position):
                return redispatch(offset)
        finally:
            redispatch_s[0] += time.monotonic() - began
            _phase(began, f"re-dispatched {size:,} bytes from offset {offset:,}", size)

    started = time.monotonic()
    # Queues deleted on purpose stay deleted (files.deleted_queues); entries whose
    # records retention has all deleted are dropped.
    deleted = prune_deleted(root, load_deleted_queues(root), max(commitlog.min_offset(), 0))
    queues.deleted = deleted
    report = recover_store(
        commitlog=commitlog,
        queues=queues.queues,
        index=index,
        checkpoint=checkpoint.value,
        config=config,
        abnormal=abnormal,
        redispatch=timed_redispatch,
        deleted_queues=deleted,
    )
    checked = _checked_bytes(commitlog, report)
    scan_started = started + redispatch_s[0]  # the phase's time less the re-dispatch's
    _phase(
        scan_started,
        f"{report.records_scanned:,} CommitLog records ({checked:,} bytes) checked",
        checked,
    )
    # Queue offsets continue from the queues' max offsets (recoverTopicQueueTable).
    for (topic, qid), queue in queues.queues.items():
        commitlog.topic_queue_table[f"{topic}-{qid}"] = queue.max_offset()
    checkpoint.reserve()
    if not checkpoint.was_valid:
        log.warning("%s: checkpoint file was unreadable; rewritten", root)
    if abnormal or report.truncated_bytes or report.queues_truncated:
        log.warning("%s: %s", root, report.summary())
    else:
        log.info("%s: %s", root, report.summary())
    return report


def _checked_bytes(commitlog: CommitLog, report: RecoveryReport) -> int:
    """Bytes from the first file the recovery checked to the CommitLog's end."""
    for mapped in commitlog.files.files:
        if mapped.path == report.start_file:
            return max(0, report.commit_log_end - mapped.file_from_offset)
    return 0


def create_marker(path: str) -> None:
    """Create the empty ``abort`` file and make its directory entry durable, so that no
    queue or index write can reach the disk ahead of it."""
    with open(path, "wb"):
        pass
    dir_fd = os.open(os.path.dirname(path), os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def adopt_file_sizes(root: str, config: StoreConfig, *, read_only: bool) -> StoreConfig:
    """Take CommitLog and ConsumeQueue sizes from existing files (spec: 'sizes come from
    the files themselves'), the index geometry from an existing index file (which only a
    writer needs to know: it makes the next files)."""
    changes: dict[str, object] = {}
    commitlog_size = detect_file_size(config.commit_log_dirs(root).all)
    if commitlog_size is not None and commitlog_size != config.mapped_file_size_commit_log:
        changes["mapped_file_size_commit_log"] = commitlog_size
    cq_size = _detect_queue_file_size(os.path.join(root, CONSUME_QUEUE_DIR))
    if cq_size is not None and cq_size != config.consume_queue_file_size:
        changes["mapped_file_size_consume_queue"] = cq_size
    configured = config.index_geometry
    try:
        found = newest_geometry(index_dir(root), configured)
    except ValueError as e:
        if not read_only:
            raise ConfigError(str(e)) from e
        found = None  # each file's own is settled as the index loads
    if found is not None and found != configured:
        changes["max_hash_slot_num"], changes["max_index_num"] = found
    return config.replace(**changes) if changes else config


def _detect_queue_file_size(base: str) -> int | None:
    if not os.path.isdir(base):
        return None
    for topic in sorted(os.listdir(base)):
        topic_dir = os.path.join(base, topic)
        if not os.path.isdir(topic_dir):
            continue
        for qid in sorted(os.listdir(topic_dir)):
            try:
                size = detect_file_size(os.path.join(topic_dir, qid))
            except CorruptDataError:
                continue  # files that disagree: that queue's load names the odd one
            # (a file cut short is no queue's size: every other queue would be left out)
            if size and size % CQ_UNIT_SIZE == 0:
                return size
    return None


def _blocked_by_file(path: str) -> str | None:
    """The existing file among ``path``'s parents that keeps it from being made a
    directory, or None."""
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(parent):
        above = os.path.dirname(parent)
        if above == parent:
            return None
        parent = above
    return None if os.path.isdir(parent) else parent
