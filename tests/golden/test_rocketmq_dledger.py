"""A DLedger CommitLog written by RocketMQ 4.9.8's own DLedgerCommitLog and DLedger
0.3.1.2 (`dledger`: the basic workload in a one-member group; `dledgermixed`: 76 records
in a plain CommitLog, then the rest after RocketMQ's mixed recovery turned the store to
DLedger; tests/golden/README.md). rocketstore's walk finds every entry DLedger reports,
the CLI reads, checks, dumps and describes such a store without its broker.conf, and
the parallel rebuild gives back RocketMQ's consume queues and index byte for byte, and
every command that would write the log refuses, leaving the files as they were. (The read
checks of every message and RocketMQ's answers run on both in
test_rocketmq_written.py.)"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from rocketstore.files.mapped_file_queue import offset_file_paths
from rocketstore.format import dledger_entry as dl
from tests.golden.golden_helpers import (
    V4,
    V5,
    Manifest,
    compare_files,
    extract,
    load_manifest,
    run_cli,
)

STORES = ("dledger", "dledgermixed")
# The reading tests run on 5.3.3's `dledger` store too (the 5.x workload, written by
# RocketMQ 5.3.3's own DLedgerCommitLog and DLedger 0.3.1.2).
EVERY_STORE = [
    *(pytest.param(V4, name, id=f"4.9.8-{name}") for name in STORES),
    pytest.param(V5, "dledger", id="5.3.3-dledger"),
]


def _entries(root: Path, file_size: int) -> list[dl.EntryHeader]:
    found: list[dl.EntryHeader] = []
    previous = None
    for start, path in offset_file_paths((str(root / "dledger-n0" / "data"),)).items():
        data = Path(path).read_bytes()
        walk = dl.walk_entries(data, start, 0, file_size, previous)
        found += walk.entries
        previous = walk.entries[-1] if walk.entries else previous
        assert walk.stop_reason in (None, dl.END_OF_DATA), (path, walk.stop_reason)
    return found


@pytest.mark.parametrize(("corpus", "name"), EVERY_STORE)
def test_the_walk_finds_every_entry_dledger_wrote(corpus: Path, name: str, tmp_path: Path) -> None:
    manifest = load_manifest(name, corpus)
    root = extract(name, tmp_path, corpus)
    ours = _entries(root, manifest["config"]["mappedFileSizeCommitLog"])
    theirs = manifest["dledgerEntries"]
    assert [
        (e.index, e.term, e.magic, e.pos, e.size, e.body_offset, e.body_size) for e in ours
    ] == [
        (e["index"], e["term"], e["magic"], e["pos"], e["size"], e["bodyOffset"], e["bodySize"])
        for e in theirs
    ]
    # Every record is the body of an entry: its offset is the entry's plus 48.
    wrapped = [m for m in manifest["messages"] if m["commitLogOffset"] >= ours[0].pos]
    assert [(m["commitLogOffset"], m["wroteBytes"]) for m in wrapped] == [
        (e.body_offset, e.body_size) for e in ours
    ]


@pytest.mark.parametrize(("corpus", "name"), EVERY_STORE)
def test_stats_describe_the_dledger_log(corpus: Path, name: str, tmp_path: Path) -> None:
    manifest: Manifest = load_manifest(name, corpus)
    root = extract(name, tmp_path, corpus)
    run = run_cli("--store", root, "--json", "stats")
    assert run.returncode == 0, run.stderr
    stats = json.loads(run.stdout)
    state = manifest["dledger"]
    assert stats["dledger"] == {
        "home": str(root / "dledger-n0"),
        "selfId": "n0",
        "dataDirectories": [str(root / "dledger-n0" / "data")],
        "firstIndex": state["ledgerBeginIndex"],
        "lastIndex": state["ledgerEndIndex"],
        "lastTerm": state["ledgerEndTerm"],
        "endIndex": state["ledgerEndIndex"],
        "committedIndex": state["committedIndex"],
        "dividedOffset": manifest["dividedCommitlogOffset"] if name == "dledgermixed" else None,
    }
    assert stats["commitLog"]["maxOffset"] == state["committedPos"] == manifest["maxPhyOffset"]
    assert stats["messages"] == sum(1 for _ in _queued(manifest))


def _queued(manifest: Manifest) -> list[Manifest]:
    # Half and rolled-back transaction records are in no queue.
    return [m for m in manifest["messages"] if m["sysFlag"] & 0xC not in (0x4, 0xC)]


@pytest.mark.parametrize(("corpus", "name"), EVERY_STORE)
def test_check_and_dump_read_the_whole_log(corpus: Path, name: str, tmp_path: Path) -> None:
    manifest = load_manifest(name, corpus)
    root = extract(name, tmp_path, corpus)
    run = run_cli("--store", root, "check")
    assert run.returncode == 0, run.stdout + run.stderr
    records = len(manifest["messages"])
    assert f"checked {records} records (CommitLog data ends at {manifest['maxPhyOffset']})" in (
        run.stdout
    )
    assert run.stdout.rstrip().endswith("OK")
    dump = run_cli("--store", root, "dump")
    assert dump.returncode == 0, dump.stderr
    rows = [json.loads(line) for line in dump.stdout.splitlines()]
    assert [(r["commitLogOffset"], r["msgId"], r["crcOk"]) for r in rows] == [
        (m["commitLogOffset"], m["msgId"], True) for m in manifest["messages"]
    ]


def _digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "lock"
    }


@pytest.mark.parametrize(
    "command",
    [
        ("sendMessage", "-t", "TopicA", "-p", "hello"),
        ("rebuild",),  # the single engine recovers as a writer: --engine local is the way
        ("check", "--repair"),
        ("deleteExpiredCommitLog",),
        ("serve",),  # refused before any server listens
    ],
    ids=lambda c: c[0] + (c[1] if len(c) > 1 and c[1].startswith("--") else ""),
)
def test_writing_commands_refuse_and_change_nothing(
    command: tuple[str, ...], tmp_path: Path
) -> None:
    """(Commands that write only config/*.json, as updateTopic, work as on any store: a
    DLedger broker keeps its topics and offsets there too.)"""
    root = extract("dledger", tmp_path)
    before = _digest(root)
    run = run_cli("--store", root, *command)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "DLedger log" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr
    assert _digest(root) == before


@pytest.mark.parametrize("name", STORES)
def test_parallel_rebuild_gives_back_rocketmqs_queues_and_index(name: str, tmp_path: Path) -> None:
    manifest = load_manifest(name)
    ours = extract(name, tmp_path / "ours")
    reference = extract(name, tmp_path / "reference")
    done = run_cli("--store", ours, "rebuild", "--engine", "local")
    assert done.returncode == 0, done.stderr
    assert f"{len(manifest['messages'])} records dispatched" in done.stdout
    for kind in ("consumequeue", "index"):
        problems = compare_files(kind, ours, reference, manifest["config"]["maxHashSlotNum"])
        assert not problems, "\n".join(problems)
    data = ours / "dledger-n0" / "data"
    assert _digest(data) == _digest(reference / "dledger-n0" / "data")
