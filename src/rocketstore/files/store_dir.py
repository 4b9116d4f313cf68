"""What a directory that should be a store lacks (layer: files; it lists the directory)."""

from __future__ import annotations

import os

from rocketstore.config import StoreConfig
from rocketstore.errors import ConfigError
from rocketstore.files.mapped_file_queue import offset_file_paths
from rocketstore.paths import (
    CONSUME_QUEUE_DIR,
    DLEDGER_DATA_DIR,
    DLEDGER_PREFIX,
    INDEX_DIR,
    CommitLogDirs,
    no_commitlog,
)


def dledger_members(root: str) -> list[str]:
    """The self ids of the DLedger logs in ``root`` (``dledger-<selfId>/data/``), sorted."""
    try:
        names = os.listdir(root)
    except OSError:
        return []
    return sorted(
        name[len(DLEDGER_PREFIX) :]
        for name in names
        if name.startswith(DLEDGER_PREFIX)
        and len(name) > len(DLEDGER_PREFIX)
        and os.path.isdir(os.path.join(root, name, DLEDGER_DATA_DIR))
    )


def with_dledger(root: str, config: StoreConfig) -> StoreConfig:
    """``config``, told of the DLedger CommitLog ``root`` holds when it does not know of
    it: a broker with enableDLegerCommitLog keeps its log in ``dledger-<selfId>/data``,
    and an operator handed such a directory should not need its broker.conf to read it.
    ConfigError when several members' logs are there (which one is the store's cannot
    be told)."""
    if config.enable_dledger_commit_log:
        return config
    members = dledger_members(root)
    if not members:
        return config
    if len(members) > 1:
        listed = ", ".join(DLEDGER_PREFIX + m for m in members)
        raise ConfigError(
            f"{root} holds the DLedger logs of several members ({listed}): give the "
            "broker's dLegerSelfId (rocketstore -c broker.conf)"
        )
    return config.replace(enable_dledger_commit_log=True, dledger_self_id=members[0])


def missing_commitlog(root: str, dirs: CommitLogDirs) -> str | None:
    """Why ``root`` has no CommitLog to read, for an error message, or None when one of
    its CommitLog directories is there (paths.no_commitlog, with the root's names, so a
    DLedger store is named as one)."""
    if any(os.path.isdir(d) for d in dirs.all):
        return None
    try:
        entries = os.listdir(root)
    except OSError:
        entries = []
    return no_commitlog(dirs, entries)


def orphaned_files(root: str, dirs: CommitLogDirs) -> str | None:
    """Why ``root``'s consume queues and index cannot be used, or None: there is no
    CommitLog file in ``dirs`` but queue or index files are there. The usual story is a
    broker whose CommitLog is elsewhere (storePathCommitLog) and a command given only the
    root; reading would take the queues' file sizes for their contents, and writing (as
    RocketMQ's recovery does) would delete them."""
    if offset_file_paths(dirs.all):
        return None
    held = sum(
        len(names)
        for part in (CONSUME_QUEUE_DIR, INDEX_DIR)
        for _base, _dirs, names in os.walk(os.path.join(root, part))
    )
    if not held:
        return None
    return (
        f"no CommitLog file in {', '.join(dirs.all)}, but {held} consume-queue and index "
        "files are there: if the broker keeps its CommitLog elsewhere, give its "
        "storePathCommitLog (rocketstore -c broker.conf); if the CommitLog is really gone, "
        "remove consumequeue/ and index/ first"
    )
