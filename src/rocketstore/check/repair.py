"""``check --repair``: check under the writer lock, cut a corrupt CommitLog tail, rebuild
the consume queues and the index from the CommitLog, and check again.

Layer: check. Takes the writer lock (``StoreLockedError`` while a writer or a broker runs);
refuses with ``RepairError`` (nothing changed) where a repair would lose data it cannot
know is lost, and never prints.
"""

from __future__ import annotations

import logging

from rocketstore.check.result import CheckResult, RepairAction, RepairError
from rocketstore.check.scan import ScanIssue
from rocketstore.check.store_check import ProgressFactory, check_with_progress
from rocketstore.check.store_rebuild import (
    RebuildOutcome,
    cut_commitlog,
    dledger_problem,
    held_lock,
    missing_commitlog_problem,
    multi_dispatch_problem,
    rebuild,
)
from rocketstore.config import StoreConfig
from rocketstore.errors import StoreError
from rocketstore.files.lock import DirectoryLock

log = logging.getLogger(__name__)


def cut_point(before: CheckResult, force: bool) -> tuple[int | None, list[ScanIssue]]:
    """Where repair cuts the CommitLog (None: nowhere) and the CRC issues it keeps;
    ``RepairError`` where it will not cut."""
    scan = before.scan
    assert scan is not None
    layout = [i for i in scan.issues if i.kind == "layout"]
    if layout:
        raise RepairError(
            f"cannot repair the CommitLog's file layout ({layout[0].path}: {layout[0].reason}); "
            "fix or remove the file by hand",
            before,
        )
    crc = [i for i in scan.issues if i.kind == "crc"]
    structure = scan.first_structure_issue
    cut: int | None = None
    if structure is not None:
        if scan.records_after_structure_issue and not force:
            raise RepairError(
                f"corrupt CommitLog data at offset {structure.offset} ({structure.reason}) is "
                "followed by readable records; repair would lose them. Salvage with "
                "`rocketstore dump`, or cut there anyway with `check --repair --force`",
                before,
            )
        cut = structure.cut_at
    # A bad CRC on the very last record is a torn write, as recovery takes it: cut there.
    torn = len(crc) == 1 and structure is None and crc[0].offset == scan.last_record_offset
    if (force or torn) and crc:
        first_crc = crc[0].cut_at
        if first_crc is not None:
            cut = first_crc if cut is None else min(cut, first_crc)
        crc = []
    return cut, crc


def repair_store(
    root: str, config: StoreConfig, *, force: bool = False, progress: ProgressFactory | None = None
) -> CheckResult:
    """Check ``root`` under the writer lock and repair what the check found (see
    ``check_store``). Returns the check before the repair when nothing was changed, else
    the re-check with ``before`` and ``repairs`` set."""
    dirs = config.commit_log_dirs(root)
    problem = dledger_problem(dirs, None) or missing_commitlog_problem(root, dirs)
    if problem is not None:
        raise RepairError(problem)
    lock: DirectoryLock | None = held_lock(root)
    repairs: list[RepairAction] = []
    rebuilt: RebuildOutcome | None = None
    try:
        before = check_with_progress(root, config, "check", progress, lock_held=True)
        if before.ok:
            return before
        cut, kept_crc = cut_point(before, force)
        # Bad body CRCs alone are not fixed by a rebuild: only rebuild for anything else.
        rebuilds = cut is not None or any(p.kind != "crc" for p in before.problems)
        if rebuilds:
            # Checked before anything is cut: the rebuild would drop LMQ queues.
            problem = multi_dispatch_problem(root, config)
            if problem is not None:
                raise RepairError(problem, before)
        try:
            if cut is not None:
                repairs.append(cut_commitlog(dirs, cut))
                log.info("repair cut the CommitLog of %s at offset %d", root, cut)
            if rebuilds:
                assert lock is not None
                held, lock = lock, None
                rebuilt = rebuild(root, queues=True, index=True, lock=held, config=config)
                repairs.append(rebuilt)
        except (StoreError, OSError) as e:
            raise RepairError(str(e) or type(e).__name__, before, repairs) from e
    finally:
        if lock is not None:
            lock.release()
    warnings = []
    if kept_crc:
        warnings.append(
            f"{len(kept_crc)} record(s) with a bad body CRC were kept (the first at offset "
            f"{kept_crc[0].offset}); `check --repair --force` cuts the CommitLog there"
        )
    if rebuilt is None:
        before.warnings = warnings
        return before
    after = check_with_progress(root, config, "re-check", progress)
    after.before = before
    after.repairs = repairs
    after.records_cut_off = max(before.records - after.records, 0)
    after.warnings = warnings
    return after
