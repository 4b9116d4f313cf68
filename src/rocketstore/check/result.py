"""What ``check`` finds and what ``check_store(..., repair=True)`` did: typed results.

Layer: check. Plain data; no I/O, no printing. ``line()`` and ``to_json()`` give each
finding's one-line text and JSON object (what ``rocketstore check`` prints).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from rocketstore.check.scan import CommitLogScan
from rocketstore.check.store_rebuild import CutOutcome, RebuildOutcome
from rocketstore.errors import StoreError


class CheckStatus(enum.Enum):
    """The verdict of a check (or of a repair)."""

    OK = "OK"  # nothing wrong (after a repair: nothing needed repairing)
    PROBLEMS = "PROBLEMS"  # problems found (after a repair: problems it left)
    REPAIRED = "REPAIRED"  # a repair changed the store and the re-check found no problem


@dataclass(frozen=True)
class Problem:
    """One finding: ``path`` (relative to the store root), where in it, and why."""

    area: str  # commitlog | consumequeue | index | checkpoint
    path: str
    where: str
    reason: str
    offset: int | None = None  # the CommitLog offset concerned, when there is one
    kind: str = ""  # for CommitLog problems: crc | structure | layout

    def line(self) -> str:
        return f"{self.path}: {self.where}: {self.reason}"

    def to_json(self) -> dict[str, object]:
        return {
            "type": "problem",
            "area": self.area,
            "path": self.path,
            "where": self.where,
            "offset": self.offset,
            "kind": self.kind or None,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class Missed:
    """A message a consumer of its queue would not get: its unit names CommitLog bytes
    that are not a readable record (damage), so a pull steps over it (read_path)."""

    topic: str
    queue_id: int
    queue_offset: int
    offset: int  # the CommitLog offset the unit names
    reason: str

    def line(self) -> str:
        return (
            f"{self.topic}-{self.queue_id} queue offset {self.queue_offset} (CommitLog offset "
            f"{self.offset}): {self.reason}"
        )

    def to_json(self) -> dict[str, object]:
        return {
            "type": "missed",
            "topic": self.topic,
            "queueId": self.queue_id,
            "queueOffset": self.queue_offset,
            "offset": self.offset,
            "reason": self.reason,
        }


# What a repair changed: the CommitLog cut (zeroed from an offset, later files removed),
# then the rebuild of the consume queues and the index from the CommitLog.
RepairAction = CutOutcome | RebuildOutcome


@dataclass
class CheckResult:
    """One check of a store. After ``repair=True`` changed something, the findings are the
    re-check's, ``before`` the check that led to the repair and ``repairs`` what it did."""

    root: str
    problems: list[Problem] = field(default_factory=list)
    # The messages whose records are damaged, so that a consumer's pulls skip them.
    missed: list[Missed] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    records: int = 0
    queue_units: int = 0
    index_entries: int = 0
    dledger_units: int | None = None  # a DLedger log's index units checked (None: no such log)
    commit_log_end: int = 0
    scan: CommitLogScan | None = None
    # The abort file is there: a writer runs (or crashed), so records it has not dispatched
    # yet are lag, not damage. After a clean shutdown everything must be dispatched.
    unclean: bool = False
    # Repair only: what it changed, in order (a CommitLog cut, then the rebuild) ...
    repairs: list[RepairAction] = field(default_factory=list)
    # ... the check before it (None: nothing was changed, this is that check) ...
    before: CheckResult | None = None
    # ... records the cut dropped, and what it left as it was on purpose (bad body CRCs).
    records_cut_off: int = 0
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def status(self) -> CheckStatus:
        if self.problems:
            return CheckStatus.PROBLEMS
        return CheckStatus.REPAIRED if self.repairs else CheckStatus.OK


class RepairError(StoreError):
    """``check_store(..., repair=True)`` stopped, and why: it refuses to repair this store
    (``repairs`` empty: nothing was changed), or a step failed (the cause is chained).
    ``check`` is the check that ran before it (None: none ran)."""

    def __init__(
        self,
        message: str,
        check: CheckResult | None = None,
        repairs: list[RepairAction] | None = None,
    ):
        super().__init__(message)
        self.check = check
        self.repairs = list(repairs or [])
