"""``stats``: what a store holds and how much room it takes.

Layer: cli. Read-only (never takes the writer lock). Counts come from the consume queues
and file sizes, so it is quick on any store size: nothing reads every record.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import click

from rocketstore.cli.context import CliContext, queue_bounds, unit_store_time
from rocketstore.cli.timeparse import format_time
from rocketstore.errors import CorruptDataError, IncompleteDataError
from rocketstore.files.deleted_queues import dispatched_through_deletions
from rocketstore.files.dledger_log import describe
from rocketstore.files.mapped_file_queue import offset_file_paths
from rocketstore.files.regular_file import read_store_file
from rocketstore.format.checkpoint import decode_checkpoint
from rocketstore.paths import CHECKPOINT_FILE, CONSUME_QUEUE_DIR, INDEX_DIR, dledger_home
from rocketstore.services.retention import disk_usage_ratio
from rocketstore.store import MessageStore

# RocketMQ starts deleting files early above this disk usage (diskMaxUsedSpaceRatio).
DISK_MAX_USED_RATIO = 0.75


@dataclass
class FileUsage:
    files: int = 0
    bytes: int = 0
    disk_bytes: int = 0  # allocated blocks: less than ``bytes`` for sparse, pre-sized files

    def add(self, path: str) -> None:
        st = os.stat(path)
        self.files += 1
        self.bytes += st.st_size
        self.disk_bytes += getattr(st, "st_blocks", 0) * 512 or st.st_size

    def to_json(self) -> dict[str, int]:
        return {"files": self.files, "bytes": self.bytes, "diskBytes": self.disk_bytes}


def usage(directory: str) -> FileUsage:
    total = FileUsage()
    for base, _dirs, names in os.walk(directory):
        for name in names:
            total.add(os.path.join(base, name))
    return total


def commitlog_usage(store: MessageStore) -> FileUsage:
    """The CommitLog files the store reads (in each of its directories, nothing else:
    a directory may hold other things, such as the other paths of a multi-path log)."""
    total = FileUsage()
    for path in offset_file_paths(store.commitlog_dirs.all).values():
        total.add(path)
    return total


def human_bytes(count: int) -> str:
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{count} B"


def human_span(ms: int) -> str:
    seconds = ms // 1000
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    parts = (
        [f"{days}d"] * bool(days) + [f"{hours}h"] * bool(hours) + [f"{minutes}m"] * bool(minutes)
    )
    return " ".join([*parts, f"{seconds}s"])


def collect(store: MessageStore) -> dict[str, Any]:
    root = store.root
    queues: list[dict[str, Any]] = []
    first_times: list[int] = []
    last_times: list[int] = []
    for topic, queue_ids in store.topics().items():
        for queue_id in queue_ids:
            low, high = queue_bounds(store, topic, queue_id)
            first = unit_store_time(store, topic, queue_id, low) if high > low else -1
            last = unit_store_time(store, topic, queue_id, high - 1) if high > low else -1
            first_times += [first] * (first > 0)
            last_times += [last] * (last > 0)
            queues.append(
                {
                    "topic": topic,
                    "queueId": queue_id,
                    "minOffset": low,
                    "maxOffset": high,
                    "messages": high - low,
                    "lastUpdateTimestamp": max(last, 0),
                }
            )
    topics: dict[str, int] = {}
    for q in queues:
        name, count = str(q["topic"]), int(q["messages"])
        topics[name] = topics.get(name, 0) + count
    commit_min = max(store.min_commit_log_offset(), 0)
    commit_max = store.max_commit_log_offset()
    dispatched = max((q.max_physic_offset for q in store.queue_views().values()), default=-1)
    dispatched = max(dispatched, dispatched_through_deletions(root))
    index_files = store.index_files()
    disk = os.statvfs(root)
    total = disk.f_blocks * disk.f_frsize
    free = disk.f_bavail * disk.f_frsize
    used_ratio = (total - disk.f_bfree * disk.f_frsize) / total if total else 0.0
    checkpoint_path = os.path.join(root, CHECKPOINT_FILE)
    checkpoint = None
    if os.path.exists(checkpoint_path):
        try:
            value = decode_checkpoint(read_store_file(checkpoint_path, 4096))
        except IncompleteDataError as e:
            raise CorruptDataError(str(e), path=checkpoint_path) from e
        checkpoint = {
            "physicMsgTimestamp": value.physic_msg_timestamp,
            "logicsMsgTimestamp": value.logics_msg_timestamp,
            "indexMsgTimestamp": value.index_msg_timestamp,
        }
    return {
        "store": root,
        "commitLog": {
            **commitlog_usage(store).to_json(),
            # Those that exist: a DLedger store has no commitlog/ unless it was plain once.
            "directories": [d for d in store.commitlog_dirs.all if os.path.isdir(d)],
            "fileSize": store.config.mapped_file_size_commit_log,
            "minOffset": commit_min,
            "maxOffset": commit_max,
            "dataBytes": max(0, commit_max - commit_min),
        },
        "consumeQueue": {
            **usage(os.path.join(root, CONSUME_QUEUE_DIR)).to_json(),
            "fileSize": store.config.consume_queue_file_size,
            "topics": len(topics),
            "queues": len(queues),
        },
        "index": {
            **usage(os.path.join(root, INDEX_DIR)).to_json(),
            "entries": sum(f.entry_count for f in index_files),
            # The newest file's (a broker may have been configured otherwise).
            "hashSlots": index_files[-1].hash_slot_num
            if index_files
            else store.config.max_hash_slot_num,
            "entriesPerFile": index_files[-1].index_num
            if index_files
            else store.config.max_index_num,
        },
        "messages": sum(topics.values()),
        "topics": topics,
        "queues": queues,
        "firstStoreTimestamp": min(first_times, default=0),
        "lastStoreTimestamp": max(last_times, default=0),
        "dispatchLagBytes": max(0, commit_max - dispatched)
        if dispatched >= 0
        else commit_max - commit_min,
        "disk": {"totalBytes": total, "freeBytes": free, "usedRatio": round(used_ratio, 4)},
        # A CommitLog over several paths: each one's disk (RocketMQ cleans up by the one
        # with the most room and puts no new file on one above 85 %).
        "commitLogDisks": [
            {"path": path, "usedRatio": disk_usage_ratio(path if os.path.isdir(path) else root)}
            for path in store.commitlog_dirs.writable
        ]
        if store.commitlog_dirs.multi_path
        else [],
        "checkpoint": checkpoint,
        "dledger": _dledger(store),
    }


def _dledger(store: MessageStore) -> dict[str, Any] | None:
    """A DLedger CommitLog's own bookkeeping: the entries its log and index hold, and its
    checkpoint (committedIndex: what the group had agreed on when it was written)."""
    config = store.config
    dirs = store.commitlog_dirs
    if not dirs.dledger:
        return None
    log = describe(dledger_home(store.root, config.dledger_self_id), dirs.dledger)
    files = store.commitlog_files()
    framed = [first for first, path in files if dirs.holds_entries(path)]
    return {
        "home": log.home,
        "selfId": config.dledger_self_id,
        "dataDirectories": list(dirs.dledger),
        "firstIndex": log.first_entry.index if log.first_entry else None,
        "lastIndex": log.last_indexed.index if log.last_indexed else None,
        "lastTerm": log.last_indexed.term if log.last_indexed else None,
        "endIndex": log.end_index,
        "committedIndex": log.committed_index,
        # Where the log turned DLedger (files before it are the broker's plain CommitLog).
        "dividedOffset": framed[0] if framed and len(framed) < len(files) else None,
    }


def _known(value: int | None) -> str:
    return "?" if value is None else str(value)


def _print(stats: dict[str, Any]) -> None:
    cl, cq, ix, disk = stats["commitLog"], stats["consumeQueue"], stats["index"], stats["disk"]

    def row(name: str, text: str) -> None:
        click.echo(f"{name:<18} {text}")

    row("Store:", stats["store"])
    row(
        "CommitLog:",
        f"{cl['files']} files of {human_bytes(cl['fileSize'])}, offsets {cl['minOffset']}.."
        f"{cl['maxOffset']} ({human_bytes(cl['dataBytes'])} of data), "
        f"{human_bytes(cl['diskBytes'])} on disk",
    )
    if len(cl["directories"]) > 1:
        row("", "spread over " + ", ".join(cl["directories"]))
    row(
        "ConsumeQueue:",
        f"{cq['queues']} queues in {cq['topics']} topics, {cq['files']} files, "
        f"{human_bytes(cq['diskBytes'])} on disk",
    )
    row(
        "Index:",
        f"{ix['files']} files, {ix['entries']} entries "
        f"({ix['hashSlots']} slots x {ix['entriesPerFile']} entries a file), "
        f"{human_bytes(ix['diskBytes'])} on disk",
    )
    row("Messages:", f"{stats['messages']} in {len(stats['topics'])} topics")
    first, last = stats["firstStoreTimestamp"], stats["lastStoreTimestamp"]
    if first and last:
        row(
            "Time span:",
            f"{format_time(first)} .. {format_time(last)} ({human_span(last - first)})",
        )
    row("Dispatch lag:", f"{stats['dispatchLagBytes']} bytes not yet in the consume queues")
    warn = (
        "  (above RocketMQ's 75% cleanup ratio)" if disk["usedRatio"] > DISK_MAX_USED_RATIO else ""
    )
    row(
        "Disk:",
        f"{human_bytes(disk['freeBytes'])} free of {human_bytes(disk['totalBytes'])}, "
        f"{disk['usedRatio']:.1%} used{warn}",
    )
    for path_disk in stats["commitLogDisks"]:
        row("", f"CommitLog path {path_disk['path']}: {path_disk['usedRatio']:.0%} used")
    dledger = stats["dledger"]
    if dledger:
        row(
            "DLedger:",
            f"member {dledger['selfId']}, entries {_known(dledger['firstIndex'])}.."
            f"{_known(dledger['lastIndex'])} (term {_known(dledger['lastTerm'])}), "
            f"committedIndex {_known(dledger['committedIndex'])} "
            f"(checkpoint; endIndex {_known(dledger['endIndex'])})",
        )
        if dledger["dividedOffset"] is not None:
            row("", f"plain CommitLog before offset {dledger['dividedOffset']}")
    checkpoint = stats["checkpoint"]
    if checkpoint:
        row(
            "Checkpoint:",
            f"physic {format_time(checkpoint['physicMsgTimestamp'])}, "
            f"logics {format_time(checkpoint['logicsMsgTimestamp'])}, "
            f"index {format_time(checkpoint['indexMsgTimestamp'])}",
        )
    if not stats["queues"]:
        return
    click.echo()
    line = "{:<32}  {:<4}  {:<12}  {:<12}  {:<10}  {}"
    click.echo(
        line.format("#Topic", "#QID", "#Min Offset", "#Max Offset", "#Messages", "#Last Updated")
    )
    for q in stats["queues"]:
        last_update = format_time(q["lastUpdateTimestamp"]) if q["lastUpdateTimestamp"] else ""
        click.echo(
            line.format(
                q["topic"], q["queueId"], q["minOffset"], q["maxOffset"], q["messages"], last_update
            )
        )


@click.command("stats", short_help="Files, sizes, message counts, time span, lag, disk.")
@click.pass_obj
def stats_command(ctx: CliContext) -> None:
    """Files and sizes, message counts per topic and queue, the time span, dispatch lag and
    free disk space. --json prints it all as one object.

    \b
    Example:
      rocketstore --store /var/rocketmq/store stats
    """
    with ctx.open_read_only() as store:
        stats = collect(store)
    if ctx.as_json:
        ctx.emit(stats)
    else:
        _print(stats)


def register(group: click.Group) -> None:
    group.add_command(stats_command)
