"""Checking and repairing a store's files, as a library: ``rocketstore check [--repair]``
without the CLI (docs/cli.md, "check as a library")::

    from rocketstore.check import CheckStatus, check_store

    result = check_store("/data/store")                 # reads only: no lock
    if result.status is CheckStatus.PROBLEMS:
        for problem in result.problems:
            print(problem.line())                       # path: where: why
    repaired = check_store("/data/store", repair=True)  # takes the writer lock

Layer: above the store, below broker, spark and cli (which must not be imported here).
Nothing here prints, exits or uses click; it logs through ``logging``.
"""

from rocketstore.check.result import (
    CheckResult,
    CheckStatus,
    Missed,
    Problem,
    RepairAction,
    RepairError,
)
from rocketstore.check.run import check_store
from rocketstore.check.store_check import ByteCounter, ProgressFactory, store_bytes
from rocketstore.check.store_rebuild import CutOutcome, RebuildOutcome

__all__ = [
    "ByteCounter",
    "CheckResult",
    "CheckStatus",
    "CutOutcome",
    "Missed",
    "Problem",
    "ProgressFactory",
    "RebuildOutcome",
    "RepairAction",
    "RepairError",
    "check_store",
    "store_bytes",
]
