"""The CLI on a DLedger broker's store (enableDLegerCommitLog): found without its
broker.conf, or named by it; read, queried, exported, described and checked (a damaged
entry is a problem with its place); never written. The store is the CLI tests' own,
framed as a DLedger broker frames it (tests/dledger_helpers.py); the golden tests run
the same commands on stores RocketMQ 4.9.8 wrote."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from pathlib import Path

from tests.cli.cli_helpers import CONFIG, COUNT, Run
from tests.dledger_helpers import Framed, frame_as_dledger


def _framed(store: Path, keep_plain: int = 0) -> Framed:
    return frame_as_dledger(store, hash_slot_num=CONFIG.max_hash_slot_num, keep_plain=keep_plain)


def test_read_commands_find_the_log_by_themselves(store: Path, cli: Callable[..., Run]) -> None:
    framed = _framed(store)
    run = cli("--store", store, "--json", "queryMsgByKey", "-t", "Payments", "-k", "order-300")
    assert run.code == 0, run.err
    (found,) = run.json_lines()
    offset = framed.moved[sorted(framed.moved)[300]]
    assert found["commitLogOffset"] == offset
    by_id = cli("--store", store, "--json", "queryMsgById", "-i", found["msgId"])
    assert by_id.code == 0, by_id.err
    assert by_id.json_lines()[0]["body"] == found["body"]
    status = cli("--store", store, "--json", "topicStatus", "-t", "OrderEvents")
    assert sum(q["maxOffset"] for q in status.json_lines()) == COUNT - COUNT // 3
    check = cli("--store", store, "check")
    assert check.code == 0, check.out + check.err
    assert f"checked {COUNT} records" in check.out


def test_export_reads_every_record_in_log_order(
    store: Path, cli: Callable[..., Run], tmp_path: Path
) -> None:
    framed = _framed(store, keep_plain=100)
    out = tmp_path / "all.jsonl"
    run = cli("--store", store, "export", "--format", "jsonl", out)
    assert run.code == 0, run.err
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["commitLogOffset"] for r in rows] == list(framed.moved.values())


def test_broker_conf_names_the_member(store: Path, cli: Callable[..., Run], tmp_path: Path) -> None:
    _framed(store)
    (store / "dledger-n0").rename(store / "dledger-n2")
    (store / "dledger-n1" / "data").mkdir(parents=True)  # another member's, empty
    run = cli("--store", store, "topicStatus", "-t", "Payments")
    assert run.code == 1
    assert run.err == (
        f"rocketstore: error: {store} holds the DLedger logs of several members "
        "(dledger-n1, dledger-n2): give the broker's dLegerSelfId (rocketstore -c broker.conf)\n"
    )
    conf = tmp_path / "broker.conf"
    conf.write_text(f"storePathRootDir={store}\nenableDLegerCommitLog=true\ndLegerSelfId=n2\n")
    run = cli("-c", conf, "--json", "topicStatus", "-t", "Payments")
    assert run.code == 0, run.err
    assert sum(q["maxOffset"] for q in run.json_lines()) == COUNT // 3


def test_check_names_a_damaged_entry(store: Path, cli: Callable[..., Run]) -> None:
    framed = _framed(store)
    entry = framed.entries[500]
    size = CONFIG.mapped_file_size_commit_log
    path = store / "dledger-n0" / "data" / f"{entry.pos - entry.pos % size:020d}"
    with open(path, "r+b") as f:
        f.seek(entry.pos % size + 16)  # the term: lower than the entry before's
        f.write(struct.pack(">q", -1))
    run = cli("--store", store, "check")
    assert run.code == 1, run.out
    name = path.relative_to(store)
    assert run.out.startswith(
        f"{name}: offset {entry.pos} (position {entry.pos % size}): DLedger entry term -1 is "
        "below the previous 1\n"
    )
    # The files after it are read on: only the damaged file's later records are missing.
    later = [e for e in framed.entries if e.pos // size == entry.pos // size and e.pos >= entry.pos]
    assert f"checked {COUNT - len(later)} records" in run.out
    # Readers read up to it.
    status = cli("--store", store, "--json", "queryMsgByKey", "-t", "Payments", "-k", "order-0")
    assert status.code == 0, status.err


def _index_file(store: Path) -> Path:
    return store / "dledger-n0" / "index" / f"{0:020d}"


def test_check_compares_dledgers_index_and_checkpoint_with_the_entries(
    store: Path, cli: Callable[..., Run]
) -> None:
    framed = _framed(store)
    index = _index_file(store)
    with open(index, "r+b") as f:
        f.seek(7 * 32 + 24)  # unit 7's term
        f.write(struct.pack(">q", 5))
        f.seek(890 * 32)  # the last ten units never written
        f.write(bytes(10 * 32))
    checkpoint = store / "dledger-n0" / "checkpoint"
    checkpoint.write_text("committedIndex=950\nendIndex=899\n")
    run = cli("--store", store, "check")
    assert run.code == 1, run.out
    name = index.relative_to(store)
    assert run.out.splitlines()[:3] == [
        f"{name}: unit of entry 7: says term 5 where the entry has 1",
        f"dledger-n0/index: units: no unit for entries 890..{COUNT - 1} (DLedger's recovery "
        "writes them from the entries)",
        "dledger-n0/checkpoint: committedIndex: committedIndex 950 is past the last readable "
        f"entry ({COUNT - 1}): entries the DLedger group had agreed on are missing or unreadable",
    ]
    assert f"{COUNT} records" in run.out and "890 DLedger index units: 3 problem(s)" in run.out
    assert framed.entries[-1].index == COUNT - 1


def test_check_names_a_damaged_dledger_checkpoint(store: Path, cli: Callable[..., Run]) -> None:
    _framed(store)
    (store / "dledger-n0" / "checkpoint").write_text("committedIndex=abc\n")
    run = cli("--store", store, "check")
    assert run.code == 1
    assert (
        "dledger-n0/checkpoint: file: DLedger checkpoint line 1: committedIndex is 'abc', "
        "not a number" in run.out
    )
    stats = cli("--store", store, "--json", "stats")
    assert stats.code == 0, stats.err
    dledger = json.loads(stats.out)["dledger"]
    assert (dledger["committedIndex"], dledger["lastIndex"]) == (None, COUNT - 1)
