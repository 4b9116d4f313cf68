"""deleteExpiredCommitLog: the store's manual retention from the command line."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from tests.cli.cli_helpers import Run

Cli = Callable[..., Run]


def _age(path: Path, hours: float) -> None:
    then = time.time() - hours * 3600
    os.utime(path, (then, then))


def test_expired_files_go_now_and_a_dry_run_only_says_so(
    store: Path, cli: Cli, tmp_path: Path
) -> None:
    files = sorted((store / "commitlog").iterdir())
    assert len(files) >= 3
    # Two hours old: kept by the default fileReservedTime (72 h), not by a broker.conf's 1.
    _age(files[0], 2)
    kept = cli("--store", store, "deleteExpiredCommitLog", "--dry-run")
    assert kept.out.startswith("would delete 0 CommitLog"), kept.out
    conf = tmp_path / "broker.conf"
    conf.write_text("fileReservedTime=1\n")
    tight = cli("-c", conf, "--store", store, "deleteExpiredCommitLog", "--dry-run")
    assert tight.out.splitlines()[0].startswith(f"commitlog/{files[0].name}: expired")
    for path in files[:2]:
        _age(path, 100)
    before = {o["msgId"] for o in cli("--store", store, "--json", "dump").json_lines()}
    dry = cli("--store", store, "deleteExpiredCommitLog", "--dry-run")
    assert dry.code == 0, dry.err
    assert dry.out.splitlines()[0].startswith(f"commitlog/{files[0].name}: ")
    assert dry.out.splitlines()[-1].startswith("would delete 2 CommitLog")
    assert all(path.exists() for path in files)
    run = cli("--store", store, "--json", "deleteExpiredCommitLog")
    assert run.code == 0, run.err
    summary = run.json_lines()[-1]
    assert (summary["type"], summary["commitLogFiles"]) == ("summary", 2)
    assert summary["minCommitLogOffset"] == int(files[2].name)
    assert not files[0].exists() and not files[1].exists() and files[2].exists()
    after = {o["msgId"] for o in cli("--store", store, "--json", "dump").json_lines()}
    assert after < before and after  # the newer files' messages are all still there
    assert cli("--store", store, "check").code == 0


def test_clean_expired_cq_deletes_the_queues_retention_emptied(tmp_path: Path, cli: Cli) -> None:
    """cleanExpiredCQ: the queues whose records all went with deleted CommitLog files."""
    from rocketstore import Message, MessageStore, StoreConfig

    root = tmp_path / "store"
    config = StoreConfig(mapped_file_size_commit_log=4096)
    with MessageStore.open(root, config) as store:
        for _ in range(5):
            assert store.put(Message("Gone", b"old", queue_id=2)).ok
        for i in range(150):
            assert store.put(Message("Live", b"x%d" % i)).ok
        store.wait_dispatched()
        store.delete_expired_files(force=True)
    conf = tmp_path / "broker.conf"
    conf.write_text("mappedFileSizeCommitLog=4096\n")
    run = cli("-c", conf, "--store", root, "cleanExpiredCQ")
    assert run.code == 0, run.err
    assert (run.out, run.err) == ("success\n", "deleted consume queue Gone-2\n")
    assert cli("--store", root, "topicList").out == "Live\n"
    again = cli("-c", conf, "--store", root, "--json", "cleanExpiredCQ")
    assert again.json_lines() == [{"success": True, "deleted": []}]
    unreachable = cli("cleanExpiredCQ", "-b", "127.0.0.1:1")
    assert unreachable.code == 1
    assert unreachable.err.startswith("rocketstore: error: cleanExpiredCQ through 127.0.0.1:1")
