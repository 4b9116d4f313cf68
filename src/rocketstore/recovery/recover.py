"""Recovery on open: find the end of valid CommitLog data and make the queues agree.

Layer: recovery. Keeps RocketMQ's byte format while fixing its known flaws: a record whose
PHYSICALOFFSET field is not its real position is stale (RocketMQ #10017), a CRC of 0 is
accepted (#9121), an illegal magic ends the scan instead of looping (#289).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from rocketstore.commitlog import CommitLog
from rocketstore.errors import CorruptDataError, IncompleteDataError
from rocketstore.format import record as rec

log = logging.getLogger(__name__)


@dataclass
class RecoveryReport:
    """What recovery found and did (``store.recovery_report``)."""

    abnormal: bool = False
    commit_log_end: int = 0
    records_scanned: int = 0
    truncated_bytes: int = 0
    stop_reason: str = ""
    stop_offset: int | None = None
    queues_truncated: list[str] = field(default_factory=list)
    index_files_dropped: int = 0
    redispatched_records: int = 0

    def summary(self) -> str:
        kind = "abnormal" if self.abnormal else "normal"
        return (
            f"{kind} recovery: CommitLog ends at {self.commit_log_end}, "
            f"{self.records_scanned} records checked, {self.truncated_bytes} bytes dropped, "
            f"{len(self.queues_truncated)} queues truncated, "
            f"{self.redispatched_records} records re-dispatched"
            + (f"; stopped at {self.stop_offset}: {self.stop_reason}" if self.stop_reason else "")
        )


def scan_valid_end(
    commitlog: CommitLog, start_index: int, *, check_crc: bool, report: RecoveryReport
) -> int:
    """Walk records from file ``start_index``; return the offset after the last valid one.

    A blank moves to the next file; anything invalid stops the walk.
    """
    files = commitlog.files.files
    if not files:
        return 0
    index = max(0, min(start_index, len(files) - 1))
    offset = files[index].file_from_offset
    while index < len(files):
        mapped = files[index]
        data = mapped.read(0, commitlog.file_size)
        position = offset - mapped.file_from_offset
        while position < len(data):
            try:
                view = rec.read_record(data, position, check_crc=check_crc)
            except (CorruptDataError, IncompleteDataError) as e:
                if _all_zero(data, position):
                    report.stop_reason = "end of data"
                else:
                    report.stop_reason = str(e)
                report.stop_offset = mapped.file_from_offset + position
                return mapped.file_from_offset + position
            if isinstance(view, rec.Blank):
                if view.remaining != len(data) - position:
                    report.stop_reason = f"blank record with wrong length {view.remaining}"
                    report.stop_offset = mapped.file_from_offset + position
                    return mapped.file_from_offset + position
                break
            if view.physical_offset != mapped.file_from_offset + position:
                report.stop_reason = (
                    f"stale record: PHYSICALOFFSET {view.physical_offset} at "
                    f"{mapped.file_from_offset + position}"
                )
                report.stop_offset = mapped.file_from_offset + position
                return mapped.file_from_offset + position
            if mapped.file_size - (position + view.size) < rec.END_FILE_MIN_BLANK_LENGTH and (
                position + view.size != mapped.file_size
            ):
                report.stop_reason = "record leaves less than 8 bytes before the file end"
                report.stop_offset = mapped.file_from_offset + position
                return mapped.file_from_offset + position
            report.records_scanned += 1
            position += view.size
        # File finished (blank or exactly full): continue with the next file, if any.
        if index + 1 >= len(files):
            return mapped.file_from_offset + commitlog.file_size
        index += 1
        offset = files[index].file_from_offset
    return offset


def _all_zero(data: bytes, position: int) -> bool:
    return not any(data[position : position + 8])
