"""The CLI on a broker whose CommitLog is spread over several directories (broker.conf's
``storePathCommitLog`` with ``,``): reads, writes, check, repair and rebuild follow the
files wherever they are."""

from __future__ import annotations

import base64
import os
from collections.abc import Callable
from pathlib import Path

from rocketstore import Message, MessageStore
from rocketstore.settings_file import store_config_from_settings
from tests.cli.cli_helpers import Run

Cli = Callable[..., Run]
FILE_SIZE = 4096


def _broker(tmp_path: Path, count: int = 40) -> tuple[Path, Path, list[str]]:
    """A store whose CommitLog files alternate between disk-a and disk-b, its broker.conf
    and the msg ids of its messages (key ``k<i>``)."""
    root = tmp_path / "store"
    paths = f"{tmp_path}/disk-b/commitlog,{tmp_path}/disk-a/commitlog"
    conf = tmp_path / "broker.conf"
    conf.write_text(
        f"storePathRootDir={root}\nstorePathCommitLog={paths}\n"
        f"mappedFileSizeCommitLog={FILE_SIZE}\n"
    )
    config = store_config_from_settings({"storePathCommitLog": paths})
    config = config.replace(mapped_file_size_commit_log=FILE_SIZE)
    ids = []
    with MessageStore.open(root, config) as store:
        for i in range(count):
            body = f"body {i}".encode().ljust(200, b"-")
            result = store.put(Message("T", body, i % 2, properties={"KEYS": f"k{i}"}))
            assert result.ok
            ids.append(result.msg_id)
    assert os.listdir(tmp_path / "disk-a" / "commitlog")
    assert os.listdir(tmp_path / "disk-b" / "commitlog")
    return root, conf, ids


def test_reading_commands_follow_the_files(tmp_path: Path, cli: Cli) -> None:
    root, conf, ids = _broker(tmp_path)
    by_key = cli("-c", conf, "--json", "queryMsgByKey", "-t", "T", "-k", "k37")
    assert by_key.code == 0, by_key.err
    assert [m["msgId"] for m in by_key.json_lines()] == [ids[37]]
    by_id = cli("-c", conf, "queryMsgById", "-i", ids[25], "-f", "UTF-8", "--body-dir", tmp_path)
    assert by_id.code == 0, by_id.err
    assert "body 25" in by_id.out
    stats = cli("-c", conf, "--json", "stats").json_lines()[0]["commitLog"]
    assert stats["directories"] == [
        f"{tmp_path}/disk-b/commitlog",
        f"{tmp_path}/disk-a/commitlog",
    ]
    assert stats["files"] >= 3
    disks = cli("-c", conf, "--json", "stats").json_lines()[0]["commitLogDisks"]
    assert [d["path"] for d in disks] == stats["directories"]
    assert all(0 < d["usedRatio"] <= 1 for d in disks)
    shown = cli("-c", conf, "stats").out
    assert f"CommitLog path {tmp_path}/disk-a/commitlog: " in shown
    dumped = cli("-c", conf, "--json", "dump").json_lines()
    assert len([r for r in dumped if r.get("topic") == "T"]) == 40
    # --store naming the file's own root keeps its CommitLog paths.
    same = cli("-c", conf, "--store", root, "queryMsgById", "-i", ids[3])
    assert same.code == 0, same.err
    # Without the settings file the root alone has no CommitLog, and says so.
    alone = cli("--store", root, "topicList")
    assert alone.code == 1
    assert f"{root} is not a store directory (no commitlog/)" in alone.err


def test_writing_checking_and_rebuilding_follow_the_files(tmp_path: Path, cli: Cli) -> None:
    _root, conf, _ids = _broker(tmp_path)
    sent = cli("-c", conf, "sendMessage", "-t", "T", "-p", "late", "-k", "late")
    assert sent.code == 0, sent.err
    check = cli("-c", conf, "check")
    assert check.code == 0, check.out + check.err
    for engine in ("single", "local"):
        rebuilt = cli("-c", conf, "rebuild", "--engine", engine)
        assert rebuilt.code == 0, rebuilt.err
        after = cli("-c", conf, "--json", "queryMsgByKey", "-t", "T", "-k", "late")
        assert [base64.b64decode(m["body"]) for m in after.json_lines()] == [b"late"]
    assert cli("-c", conf, "check").code == 0
    # A torn record at the end of the last file (in whichever directory): repair cuts it.
    last = max(
        (tmp_path / d / "commitlog" / n for d in ("disk-a", "disk-b")
         for n in os.listdir(tmp_path / d / "commitlog")),
        key=lambda p: p.name,
    )  # fmt: skip
    data = bytearray(last.read_bytes())
    end = len(data.rstrip(b"\0"))
    data[end : end + 8] = b"\x00\x00\x01\x00\xda\xa3\x20\xa7"
    last.write_bytes(bytes(data))
    damaged = cli("-c", conf, "check")
    assert damaged.code != 0
    assert str(last) in damaged.out
    repaired = cli("-c", conf, "check", "--repair")
    assert repaired.code == 0, repaired.out + repaired.err
    assert cli("-c", conf, "check").code == 0
    assert len(cli("-c", conf, "--json", "dump").json_lines()) == 41


def test_without_the_settings_nothing_is_emptied(tmp_path: Path, cli: Cli) -> None:
    """Run without -c, the root alone has no CommitLog file: rebuild and repair refuse
    instead of deleting every consume queue and index file (RocketMQ's recovery would)."""
    root, conf, ids = _broker(tmp_path)
    (root / "commitlog").mkdir()  # an empty commitlog/ beside the queues
    before = sorted(p.relative_to(root) for p in root.rglob("*") if p.is_file())
    for args in (("rebuild",), ("rebuild", "--engine", "local"), ("check", "--repair")):
        run = cli("--store", root, *args)
        assert run.code == 1, args
        assert "no CommitLog file in" in run.err and "a rebuild would delete them" in run.err
    assert sorted(p.relative_to(root) for p in root.rglob("*") if p.is_file()) == before
    sent = cli("--store", root, "sendMessage", "-t", "T", "-p", "x")
    assert sent.code == 1 and "recovery would delete them" in sent.err
    # updateTopic knows the store by its queues (no config/ yet, no commitlog/).
    (root / "commitlog").rmdir()
    assert not (root / "config").exists()
    made = cli("-c", conf, "updateTopic", "-t", "NewT", "-r", "2", "-w", "2")
    assert made.code == 0, made.err
    assert cli("-c", conf, "queryMsgById", "-i", ids[0]).code == 0


def test_readers_refuse_orphaned_queues_and_warn_of_missing_files(tmp_path: Path, cli: Cli) -> None:
    """Without the settings, the queues' files would read as full of units (their
    size): readers refuse, and nothing is written (offset tools). With a path left out,
    they read what is there and say what is missing."""
    root, conf, _ids = _broker(tmp_path)
    (root / "commitlog").mkdir()
    for args in (
        ("topicStatus", "-t", "T"),
        ("resetOffsetByTime", "-g", "G", "-t", "T", "-s", "now"),
        ("skipAccumulatedMessage", "-g", "G", "-t", "T"),
    ):
        run = cli("--store", root, *args)
        assert run.code == 1, args
        assert "no CommitLog file in" in run.err and "give its storePathCommitLog" in run.err
    assert not (root / "config" / "consumerOffset.json").exists()
    one = conf.read_text().replace(f",{tmp_path}/disk-a/commitlog", ",")
    (tmp_path / "one.conf").write_text(one)
    partial = cli("-c", tmp_path / "one.conf", "--json", "printMsg", "-t", "T")
    assert partial.code == 0
    assert "warning: CommitLog files are missing between" in partial.err
    assert "Messages in the missing files cannot be read." in partial.err
    assert 0 < len(partial.json_lines()) < 40
