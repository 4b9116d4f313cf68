"""Named crash points for crash tests (lowest layer).

A test arms points through the environment: ``ROCKETSTORE_CRASH_AT="name"`` or
``"name:N"`` (crash the N-th time the point is reached), several separated by commas. A
reached, armed point ends the process at once with ``os._exit(137)``, like a SIGKILL: no
flush, no cleanup. Unarmed, a point costs one dict lookup.
"""

from __future__ import annotations

import os

ENV_VAR = "ROCKETSTORE_CRASH_AT"

AFTER_APPEND_BEFORE_FLUSH = "after_append_before_flush"
MID_BATCH_WRITE = "mid_batch_write"
DURING_INDEX_ROLLOVER = "during_index_rollover"
DURING_FILE_PREALLOCATION = "during_file_preallocation"
DURING_CHECKPOINT_WRITE = "during_checkpoint_write"
AFTER_DISPATCH_QUEUE_BEFORE_INDEX = "after_dispatch_queue_before_index"
# Reached after each run that recovery's re-dispatch hands over (queues and index written
# for it): the window where a rebuild from the CommitLog start is half done.
MID_REDISPATCH = "mid_redispatch"
# Reached when a POP message's move to %DLQ% is stored and not yet journaled as done (a
# gRPC broker's point: tests/conformance/test_grpc_broker_kill.py arms it).
AFTER_DLQ_PUT_BEFORE_JOURNAL = "after_dlq_put_before_journal"

ALL_POINTS = (
    AFTER_APPEND_BEFORE_FLUSH,
    MID_BATCH_WRITE,
    DURING_INDEX_ROLLOVER,
    DURING_FILE_PREALLOCATION,
    DURING_CHECKPOINT_WRITE,
    AFTER_DISPATCH_QUEUE_BEFORE_INDEX,
)

# Points a writer's puts never reach: only an open that re-dispatches does (tests/crash/
# test_kill_recovery.py arms them).
RECOVERY_POINTS = (MID_REDISPATCH,)


def _parse(spec: str) -> dict[str, int]:
    armed: dict[str, int] = {}
    for raw in spec.split(","):
        item = raw.strip()
        if not item:
            continue
        name, _, count = item.partition(":")
        armed[name] = int(count) if count.isdigit() and int(count) > 0 else 1
    return armed


_ARMED: dict[str, int] = _parse(os.environ.get(ENV_VAR, ""))


def armed(name: str) -> bool:
    return name in _ARMED


def any_armed() -> bool:
    return bool(_ARMED)


def crash_point(name: str) -> None:
    """End the process here if ``name`` is armed and its count is reached."""
    if not _ARMED:
        return
    remaining = _ARMED.get(name)
    if remaining is None:
        return
    if remaining <= 1:
        os._exit(137)
    _ARMED[name] = remaining - 1
