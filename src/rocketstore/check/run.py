"""``check_store``: the library entry of ``rocketstore check [--repair]``, for Python
callers (Spark jobs, the broker, scripts) as for the CLI.

Layer: check. Returns typed results (:mod:`.result`); never prints or exits.
"""

from __future__ import annotations

from rocketstore.check.repair import repair_store
from rocketstore.check.result import CheckResult
from rocketstore.check.store_check import ProgressFactory, check_with_progress
from rocketstore.config import StoreConfig
from rocketstore.errors import ConfigError


def check_store(
    root: str,
    config: StoreConfig | None = None,
    repair: bool = False,
    *,
    force: bool = False,
    progress: ProgressFactory | None = None,
) -> CheckResult:
    """Check every file of the store at ``root`` (``config``: its broker settings, for
    CommitLog paths, multi-dispatch and index geometry) and return what is wrong.

    Without ``repair`` the files are only read: no lock, beside a running writer too (it
    is then judged as of the CommitLog end the scan reached). With ``repair`` the writer
    lock is taken (``StoreLockedError`` while a writer runs) and, if the check finds
    problems, a corrupt CommitLog tail is cut (from the first bad record even when
    readable records follow, with ``force``), the consume queues and the index are
    rebuilt, and the store is checked again: the result is that re-check, with
    ``before`` and ``repairs``. ``RepairError`` where repair would lose data (nothing is
    changed then). ``result.status`` is the verdict; ``progress`` counts the bytes read.
    """
    settings = config or StoreConfig()
    if repair:
        return repair_store(root, settings, force=force, progress=progress)
    if force:
        raise ConfigError("force only applies with repair")
    return check_with_progress(root, settings, "check", progress)
