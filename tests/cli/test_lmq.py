"""The CLI on a store with LMQ multi-dispatch queues: check understands the units
records give other queues, rebuild writes them again (and refuses where it would drop
them), printMsg lists an LMQ queue."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.format.javahash import java_hash_set_order, message_queue_hash
from rocketstore.format.multi_dispatch import INNER_MULTI_DISPATCH
from tests.cli.cli_helpers import Run

Cli = Callable[..., Run]
LMQ = StoreConfig(
    mapped_file_size_commit_log=64 * 1024,
    mapped_file_size_consume_queue=20 * 50,
    enable_lmq=True,
    enable_multi_dispatch=True,
)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """300 messages over T's 4 queues; every other one names %LMQ%a, every third %LMQ%b."""
    root = tmp_path / "store"
    with MessageStore.open(root, LMQ) as store:
        for i in range(300):
            names = [n for n, every in (("%LMQ%a", 2), ("%LMQ%b", 3)) if i % every == 0]
            properties = {"TAGS": "t", "KEYS": f"k{i}", "WAIT": "true"}
            if names:
                properties[INNER_MULTI_DISPATCH] = ",".join(names)
            assert store.put(Message("T", b"m%d" % i, i % 4, properties=properties)).ok
    return root


@pytest.fixture
def conf(tmp_path: Path) -> Path:
    path = tmp_path / "broker.conf"
    path.write_text("enableLmq=true\nenableMultiDispatch=true\nmappedFileSizeConsumeQueue=1000\n")
    return path


def _queue_bytes(root: Path) -> dict[str, bytes]:
    base = root / "consumequeue"
    return {
        str(p.relative_to(base)): p.read_bytes() for p in sorted(base.rglob("*")) if p.is_file()
    }


def test_check_accepts_the_units_records_give_other_queues(root: Path, cli: Cli) -> None:
    run = cli("--store", root, "check")
    assert run.code == 0, run.out + run.err
    with MessageStore.open(root, read_only=True) as store:
        end = store.max_commit_log_offset()
    # 300 units of T's own, 150 in %LMQ%a, 100 in %LMQ%b.
    assert run.out == (
        f"checked 300 records (CommitLog data ends at {end}), 550 queue units, "
        "300 index entries: OK\n"
    )


def test_check_reports_an_lmq_unit_pointing_to_the_wrong_record(root: Path, cli: Cli) -> None:
    path = root / "consumequeue" / "%LMQ%a" / "0" / f"{0:020d}"
    data = bytearray(path.read_bytes())
    data[20 * 3 : 20 * 4], data[20 * 4 : 20 * 5] = data[20 * 4 : 20 * 5], data[20 * 3 : 20 * 4]
    path.write_bytes(bytes(data))
    run = cli("--store", root, "check")
    assert run.code == 1
    assert "INNER_MULTI_QUEUE_OFFSET gives this queue offset 4" in run.out
    assert "INNER_MULTI_QUEUE_OFFSET gives this queue offset 3" in run.out


def test_rebuild_writes_the_lmq_queues_again(root: Path, cli: Cli, conf: Path) -> None:
    before = _queue_bytes(root)
    assert {k.split("/")[0] for k in before} == {"T", "%LMQ%a", "%LMQ%b"}
    refused = cli("--store", root, "rebuild")
    assert refused.code == 1
    assert refused.err == (
        "rocketstore: error: the store has multi-dispatch queues (%LMQ%a, ...) that a rebuild "
        "without enableMultiDispatch would drop: give -c broker.conf with "
        "enableMultiDispatch=true and enableLmq=true, as the broker had\n"
    )
    assert _queue_bytes(root) == before  # nothing was moved
    for engine in ("single", "local"):
        rebuilt = cli("-c", conf, "--store", root, "rebuild", "--engine", engine)
        assert rebuilt.code == 0, rebuilt.err
        assert _queue_bytes(root) == before, engine


def test_repair_refuses_before_cutting_anything(root: Path, cli: Cli) -> None:
    path = root / "consumequeue" / "T" / "0" / f"{0:020d}"
    data = bytearray(path.read_bytes())
    data[0:20] = bytes(20)  # a damaged unit: repair would rebuild the queues
    path.write_bytes(bytes(data))
    commitlog = {p.name: p.read_bytes() for p in (root / "commitlog").iterdir()}
    run = cli("--store", root, "check", "--repair")
    assert run.code == 1
    assert "that a rebuild without enableMultiDispatch would drop" in run.err
    assert {p.name: p.read_bytes() for p in (root / "commitlog").iterdir()} == commitlog
    assert (root / "consumequeue" / "%LMQ%a").is_dir()


def test_print_msg_lists_an_lmq_queue(root: Path, cli: Cli) -> None:
    run = cli("--store", root, "printMsg", "-t", "%LMQ%b", "-d", "false")
    assert run.code == 0, run.err
    lines = run.out.splitlines()
    assert lines[0].startswith("minOffset=0, maxOffset=100, MessageQueue [topic=%LMQ%b")
    assert sum(line.startswith("MSGID: ") for line in lines) == 100
    assert "Message{topic='T'" in lines[1]  # the record is T's; the queue is the LMQ's


def test_print_msg_through_the_parent_topic(root: Path, cli: Cli) -> None:
    """-l T: the LMQ topic's queues with T's ids, in the order of mqadmin's set of T's
    queues; only queue 0 holds units."""
    run = cli("--store", root, "printMsg", "-t", "%LMQ%a", "-l", "T", "-d", "false")
    assert run.code == 0, run.err
    heads = [line for line in run.out.splitlines() if line.startswith("minOffset=")]
    order = java_hash_set_order([message_queue_hash("T", "localStore", q) for q in range(4)])
    assert heads == [
        f"minOffset=0, maxOffset={150 if q == 0 else 0}, MessageQueue [topic=%LMQ%a, "
        f"brokerName=localStore, queueId={q}]"
        for q in order
    ]
    missing = cli("--store", root, "printMsg", "-t", "%LMQ%a", "-l", "Nope")
    assert missing.code == 1 and "topic 'Nope' not found" in missing.err


def test_check_reports_an_lmq_queue_that_lost_its_units(root: Path, cli: Cli, conf: Path) -> None:
    """The units multi-dispatch records name must be there; `check --repair` with the
    broker's settings rebuilds them."""
    for path in (root / "consumequeue" / "%LMQ%b" / "0").iterdir():
        path.unlink()
    run = cli("--store", root, "check")
    assert run.code == 1
    assert "100 record(s) of %LMQ%b-0 have no unit (the first at offset 0" in run.out
    repaired = cli("-c", conf, "--store", root, "check", "--repair")
    assert repaired.code == 0, repaired.out + repaired.err
    assert cli("--store", root, "check").code == 0
