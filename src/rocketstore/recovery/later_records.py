"""Whether readable records follow the point where recovery stopped: the records
RocketMQ's recovery would cut away with the damage (format.record_search says what a
readable record is).

Layer: recovery. Reads the CommitLog's mappings; writes nothing.
"""

from __future__ import annotations

from rocketstore.commitlog import CommitLog
from rocketstore.errors import FileRemovedError
from rocketstore.format.record_search import readable_record_after, valid_record_at


def first_record_after(commitlog: CommitLog, end: int, newest_stamp: int) -> int | None:
    """The CommitLog offset of the first whole, valid record past ``end`` stored no
    earlier than ``newest_stamp`` (the last valid record's store time), or None.

    In the file recovery stopped in, the search covers ``end`` up to the last non-zero
    byte (a hole of zeros may come before records: a lost page); later files are looked
    at by their first record.
    """
    size = commitlog.file_size
    for mapped in list(commitlog.files.files):
        base = mapped.file_from_offset
        if base + size <= end:
            continue
        if not mapped.hold():
            raise FileRemovedError(f"{mapped.path} is closed")
        try:
            if base <= end:  # the file recovery stopped in
                start = end - base
                limit = mapped.last_nonzero_end(start)
                found = readable_record_after(mapped.mm, start, limit, base, newest_stamp)
            else:
                found = 0 if valid_record_at(mapped.mm, 0, base, newest_stamp) else None
        finally:
            mapped.release()
        if found is not None:
            return base + found
    return None
