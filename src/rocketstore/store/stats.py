"""What a running store reports about itself for monitoring (the broker's metrics endpoint
reads it when scraped): flush and group-commit work, the index's fill, the recovery that
opened it.

Layer: store. A snapshot of counters the parts keep anyway; reading it takes no lock and
does no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StoreStats:
    commit_log_min_offset: int
    commit_log_max_offset: int
    # Where the CommitLog is durable to (flush behind = max - flushed).
    commit_log_flushed_offset: int
    dispatch_lag_bytes: int
    commit_log_files: int
    # Flushes of CommitLog files (each an msync of one file's dirty range) and their time.
    flushes: int
    flush_seconds: float
    # SYNC_FLUSH puts handed to the group commit thread, and the syncs that served them:
    # requests / syncs is the mean group-commit batch.
    group_commit_requests: int
    group_commit_syncs: int
    index_files: int
    # Entries in the newest index file and how many it holds (RocketMQ's maxIndexNum).
    index_entries: int
    index_capacity: int
    # The open's recovery: how long it took, whether it was abnormal (no clean shutdown),
    # and how many CommitLog records it checked.
    recovery_seconds: float
    recovery_abnormal: bool
    recovery_records_scanned: int
    # Pulls that stepped over an unreadable CommitLog record.
    damaged_records_skipped: int
    writeable: bool
