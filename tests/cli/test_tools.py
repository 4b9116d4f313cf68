"""check, check --repair, rebuild, stats, dump and export through the console script,
on healthy and on damaged stores."""

from __future__ import annotations

import base64
import os
import shutil
import stat
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from rocketstore import MessageStore
from tests.cli.cli_helpers import (
    BASE_MS,
    COUNT,
    TAGS,
    Run,
    body_of,
    commitlog_file,
    flip_byte,
    topic_of,
    uniq_of,
)

Cli = Callable[..., Run]


def dumped(store: Path, cli: Cli, *args: str) -> list[dict[str, object]]:
    run = cli("--store", store, "dump", *args)
    assert run.code == 0, run.err
    return run.json_lines()


def tree_bytes(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def index_bodies(root: Path) -> list[bytes]:
    """Index files without their names (creation times) and headers' timestamps."""
    return [p.read_bytes()[40:] for p in sorted((root / "index").iterdir())]


def test_check_healthy_store(store: Path, cli: Cli) -> None:
    run = cli("--store", store, "check")
    assert run.code == 0, run.out + run.err
    assert run.out.endswith(f"{COUNT * 3} index entries: OK\n")
    assert f"checked {COUNT} records" in run.out
    summary = cli("--store", store, "--json", "check").json_lines()[-1]
    assert summary["type"] == "summary"
    assert (summary["records"], summary["queueUnits"], summary["problems"]) == (COUNT, COUNT, 0)
    assert summary["indexEntries"] == COUNT * 3


def test_check_reports_a_flipped_body_byte(store: Path, cli: Cli) -> None:
    record = dumped(store, cli)[100]
    offset = int(record["offset"])  # type: ignore[call-overload]
    body_position = offset % (64 * 1024) + 88 + 3  # BODYLEN at 84, the body at 88
    flip_byte(commitlog_file(store, offset), body_position)
    run = cli("--store", store, "check")
    assert run.code == 1
    name = commitlog_file(store, offset).name
    assert run.out.splitlines()[0].startswith(
        f"commitlog/{name}: offset {offset} (position {offset % 65536}): body CRC mismatch"
    )
    (problem,) = [
        o for o in cli("--store", store, "--json", "check").json_lines() if o["type"] == "problem"
    ]
    assert (problem["area"], problem["kind"], problem["offset"]) == ("commitlog", "crc", offset)
    # dump still shows the record, flagged.
    assert [r["crcOk"] for r in dumped(store, cli) if r["offset"] == offset] == [False]
    # repair keeps it (readable records follow) and says how to cut there.
    kept = cli("--store", store, "check", "--repair")
    assert kept.code == 1
    assert "with a bad body CRC were kept" in kept.out
    forced = cli("--store", store, "check", "--repair", "--force")
    assert forced.code == 0, forced.out + forced.err
    assert f"cut the CommitLog at offset {offset}" in forced.out
    assert f"{COUNT - 100} record(s) were cut off" in forced.out
    assert cli("--store", store, "check").code == 0


def test_repair_cuts_a_garbage_tail(store: Path, cli: Cli) -> None:
    records = dumped(store, cli)
    end = int(records[-1]["offset"]) + int(records[-1]["size"])  # type: ignore[call-overload]
    with open(commitlog_file(store, end), "r+b") as f:
        f.seek(end % 65536)
        f.write(b"\xde\xad\xbe\xef" * 64)
    broken = cli("--store", store, "check")
    assert broken.code == 1
    assert f"offset {end} " in broken.out and "illegal magic code 0xdeadbeef" in broken.out
    repaired = cli("--store", store, "check", "--repair")
    assert repaired.code == 0, repaired.out + repaired.err
    assert f"cut the CommitLog at offset {end}: cleared 256 bytes of data" in repaired.out
    assert repaired.out.rstrip().endswith("index entries: OK")
    assert cli("--store", store, "check").code == 0
    assert len(dumped(store, cli)) == COUNT


def test_repair_refuses_corruption_followed_by_data(store: Path, cli: Cli) -> None:
    record = dumped(store, cli)[10]
    offset = int(record["offset"])  # type: ignore[call-overload]
    flip_byte(commitlog_file(store, offset), offset % 65536 + 4)  # the magic code
    run = cli("--store", store, "check", "--repair")
    assert run.code == 1
    assert run.err.startswith(f"rocketstore: error: corrupt CommitLog data at offset {offset}")
    refused = cli("--store", store, "rebuild")
    assert refused.code == 1 and "a rebuild would cut them" in refused.err
    assert (store / "consumequeue").is_dir()  # nothing was moved


def test_check_and_repair_queue_and_index_damage(store: Path, cli: Cli) -> None:
    queue_file = store / "consumequeue" / "OrderEvents" / "0" / f"{0:020d}"
    data = bytearray(queue_file.read_bytes())
    offset, size, code = struct.unpack_from(">qiq", data, 3 * 20)
    struct.pack_into(">qiq", data, 3 * 20, offset + 1, size, code)
    struct.pack_into(">qiq", data, 4 * 20, *struct.unpack_from(">qi", data, 80), 12345)
    queue_file.write_bytes(bytes(data))
    (store / "consumequeue" / "OrderEvents" / "1" / f"{2000:020d}").unlink()
    index_file = sorted((store / "index").iterdir())[1]
    flip_byte(index_file, 40 + 64 * 4 + 20 * 3)  # the key hash of entry 3
    run = cli("--store", store, "--json", "check")
    assert run.code == 1
    problems = [o for o in run.json_lines() if o["type"] == "problem"]
    reasons = "\n".join(f"{p['path']}: {p['where']}: {p['reason']}" for p in problems)
    assert (
        f"OrderEvents/0/{0:020d}: queue offset 3 (position 60): points to offset {offset + 1}"
        in reasons
    )
    assert "queue offset 4 (position 80): tagsCode 12345" in reasons
    assert "OrderEvents/1: queue offset 100:" in reasons and "have no unit" in reasons
    assert f"index/{index_file.name}: entry 3" in reasons
    assert {p["area"] for p in problems} == {"consumequeue", "index"}
    repaired = cli("--store", store, "check", "--repair")
    assert repaired.code == 0, repaired.out + repaired.err
    assert cli("--store", store, "check").code == 0


def test_rebuild_reproduces_queues_and_index(store: Path, cli: Cli, template_store: Path) -> None:
    before = tree_bytes(store / "consumequeue")
    run = cli("--store", store, "rebuild")
    assert run.code == 0, run.err
    assert run.out.startswith(f"rebuilt 8 consume queues ({COUNT} units) and ")
    assert f"{COUNT} records dispatched" in run.out
    assert tree_bytes(store / "consumequeue") == before
    assert index_bodies(store) == index_bodies(template_store)
    assert not [p for p in store.iterdir() if p.name.startswith(".rebuild-")]
    assert not (store / "abort").exists()
    only_index = cli("--store", store, "--json", "rebuild", "--index")
    (said,) = only_index.json_lines()
    assert (said["type"], said["indexEntries"], said["records"]) == ("rebuild", COUNT * 3, COUNT)
    assert "queues" not in said
    assert index_bodies(store) == index_bodies(template_store)
    index_before = tree_bytes(store / "index")
    (store / "consumequeue" / "OrderEvents").rename(store / "elsewhere")
    assert cli("--store", store, "rebuild", "--queues").code == 0
    assert tree_bytes(store / "consumequeue") == before
    assert tree_bytes(store / "index") == index_before  # untouched, names and all
    assert cli("--store", store, "check").code == 0


@pytest.mark.cli_subprocess  # the lock is this process's: the CLI must be another
def test_rebuild_clears_what_a_killed_rebuild_set_aside(store: Path, cli: Cli) -> None:
    before = tree_bytes(store / "consumequeue")
    stale = store / ".rebuild-k1ll3d"
    shutil.copytree(store / "consumequeue", stale / "consumequeue")
    # Left alone: the parallel engine's own work (it puts back what it set aside) and old
    # directories the user was told were kept.
    (store / ".rebuild-parallel-x").mkdir()
    (store / "rebuild-kept-y" / "index").mkdir(parents=True)
    run = cli("--store", store, "rebuild", "--queues")
    assert run.code == 0, run.err
    assert not stale.exists()
    assert (store / ".rebuild-parallel-x").is_dir() and (store / "rebuild-kept-y").is_dir()
    assert tree_bytes(store / "consumequeue") == before


@pytest.mark.cli_subprocess  # the lock is this process's: the CLI must be another
def test_writers_lock_blocks_writing_commands_not_readers(store: Path, cli: Cli) -> None:
    with MessageStore.open(store):
        for args in (("sendMessage", "-t", "T", "-p", "x"), ("rebuild",), ("check", "--repair")):
            run = cli("--store", store, *args)
            assert run.code == 1
            locked = f"store {store.resolve()} is locked by another writer process"
            assert run.err == f"rocketstore: error: {locked}\n"
        assert cli("--store", store, "topicList").code == 0
        assert cli("--store", store, "check").code == 0
        assert (
            cli("--store", store, "queryMsgByUniqueKey", "-t", "Payments", "-i", uniq_of(3)).code
            == 0
        )
    assert (store / "consumequeue").is_dir()


def test_stats(store: Path, cli: Cli) -> None:
    run = cli("--store", store, "--json", "stats")
    assert run.code == 0, run.err
    (stats,) = run.json_lines()
    assert stats["messages"] == COUNT
    assert stats["topics"] == {
        "OrderEvents": sum(1 for i in range(COUNT) if topic_of(i) == "OrderEvents"),
        "Payments": sum(1 for i in range(COUNT) if topic_of(i) == "Payments"),
    }
    assert stats["commitLog"]["files"] == len(os.listdir(store / "commitlog"))
    assert stats["commitLog"]["fileSize"] == 64 * 1024
    assert stats["consumeQueue"]["queues"] == 8
    assert stats["index"]["entries"] == COUNT * 3
    assert (stats["firstStoreTimestamp"], stats["lastStoreTimestamp"]) == (
        BASE_MS,
        BASE_MS + (COUNT - 1) * 1000,
    )
    assert stats["dispatchLagBytes"] == 0
    assert stats["disk"]["totalBytes"] > stats["disk"]["freeBytes"] > 0
    text = cli("--store", store, "stats").out
    assert "Messages:          900 in 2 topics" in text
    assert "Time span:         2023-11-14 22:13:20,000 .. 2023-11-14 22:28:19,000 (14m 59s)" in text


def test_dump_fields_and_range(store: Path, cli: Cli) -> None:
    records = dumped(store, cli)
    assert len(records) == COUNT
    for i, record in enumerate(records[:50]):
        assert record["crcOk"] is True
        assert record["topic"] == topic_of(i)
        assert record["uniqKey"] == uniq_of(i)
        assert record["tags"] == TAGS[i % 3]
        assert record["queueId"] == i % 4
        assert record["storeTimestamp"] == BASE_MS + i * 1000
        assert base64.b64decode(str(record["body"])) == body_of(i)
        assert record["offset"] == record["commitLogOffset"]
        assert record["magicCode"] == 0xDAA320A7
    second = int(records[1]["offset"])  # type: ignore[call-overload]
    third = int(records[2]["offset"])  # type: ignore[call-overload]
    assert [
        r["offset"] for r in dumped(store, cli, "--from", str(second - 1), "--to", str(third + 1))
    ] == [
        second,
        third,
    ]
    only = dumped(store, cli, "-t", "Payments")
    assert len(only) == sum(1 for i in range(COUNT) if topic_of(i) == "Payments")
    missing = cli("--store", store, "dump", "-t", "Payments", "-t", "NoSuchTopic")
    assert missing.code == 0 and len(missing.out.splitlines()) == len(only)
    assert "warning: no record of topic 'NoSuchTopic'\n" in missing.err
    assert "Payments" not in missing.err
    # record 1 and 2 alone: OrderEvents
    ranged = cli("--store", store, "dump", "--from", str(second), "--to", str(third + 1),
                 "-t", "Payments")  # fmt: skip
    assert ranged.code == 0 and ranged.out == ""
    assert "no record of topic 'Payments' in the range read" in ranged.err
    beyond = cli("--store", store, "dump", "--from", str(10**9))
    assert beyond.code == 1 and "beyond the end of the CommitLog" in beyond.err
    backwards = cli("--store", store, "dump", "--from", "10", "--to", "5")
    assert backwards.code == 2


def test_export_jsonl(store: Path, cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "all.jsonl"
    run = cli("--store", store, "export", "--format", "jsonl", out)
    assert run.code == 0, run.err
    assert run.out == f"exported {COUNT} records to {out} (jsonl, {out.stat().st_size} bytes)\n"
    lines = out.read_text().splitlines()
    assert len(lines) == COUNT
    assert lines == [line for line in cli("--store", store, "dump").out.splitlines()]
    assert not (tmp_path / "all.jsonl.partial").exists()


def test_export_parquet(store: Path, cli: Cli, tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "payments.parquet"
    run = cli("--store", store, "--json", "export", "--format", "parquet", "-t", "Payments", out)
    assert run.code == 0, run.err
    payments = [i for i in range(COUNT) if topic_of(i) == "Payments"]
    assert run.json_lines()[0]["records"] == len(payments)
    rows = pq.read_table(out).to_pylist()
    assert [r["uniq_key"] for r in rows] == [uniq_of(i) for i in payments]
    first = rows[0]
    assert first["body"] == body_of(0)
    assert first["tags"] == "created"
    assert dict(first["properties"])["KEYS"] == "order-0 cust-0"
    assert int(first["store_timestamp"].timestamp() * 1000) == BASE_MS
    assert first["crc_ok"] is True


@pytest.mark.cli_subprocess  # PYTHONPATH hides pyarrow from a new process
def test_export_parquet_without_pyarrow(store: Path, cli: Cli, tmp_path: Path) -> None:
    # A module named pyarrow that fails to import hides the real one.
    fake = tmp_path / "fake"
    (fake / "pyarrow").mkdir(parents=True)
    (fake / "pyarrow" / "__init__.py").write_text("raise ImportError('no pyarrow here')\n")
    path = os.pathsep.join(filter(None, [str(fake), os.environ.get("PYTHONPATH")]))
    run = cli(
        "--store", store, "export", "--format", "parquet", tmp_path / "x.parquet",
        extra_env={"PYTHONPATH": path},
    )  # fmt: skip
    assert run.code == 1
    assert run.err.startswith("rocketstore: error: parquet export needs pyarrow")
    assert not (tmp_path / "x.parquet").exists()


def test_missing_queues_are_damage_after_a_clean_shutdown_lag_otherwise(
    store: Path, cli: Cli
) -> None:
    shutil.rmtree(store / "consumequeue" / "Payments")
    clean = cli("--store", store, "check")
    assert clean.code == 1
    assert clean.out.splitlines()[0].startswith(
        f"consumequeue/Payments/0: queue offset 0: {len(range(0, COUNT, 12))} record(s) of "
        "Payments-0 have no unit (the first at offset 0,"
    )
    # A writer runs (or crashed): records after the furthest dispatched one are lag...
    (store / "abort").touch()
    assert cli("--store", store, "check").code == 1  # ...but Payments' lie before it
    shutil.rmtree(store / "consumequeue")
    running = cli("--store", store, "--json", "check")
    objs = running.json_lines()
    assert running.code == 0
    assert any(o["type"] == "note" and "not in the consume queues yet" in o["text"] for o in objs)


def test_torn_tail_while_a_writer_may_run_is_a_note_repair_still_cuts_it(
    store: Path, cli: Cli
) -> None:
    records = dumped(store, cli)
    end = int(records[-1]["offset"]) + int(records[-1]["size"])  # type: ignore[call-overload]
    with open(commitlog_file(store, end), "r+b") as f:
        f.seek(end % 65536)
        f.write(struct.pack(">ii", 300, -626843481) + b"half a record")
    (store / "abort").touch()
    seen = cli("--store", store, "check")
    assert seen.code == 0, seen.out
    assert (
        f"commitlog/{commitlog_file(store, end).name}: offset {end}: record size 300 does not "
        "match its fields" in seen.out
    )
    assert "while a writer may be appending" in seen.out
    repaired = cli("--store", store, "check", "--repair")
    assert repaired.code == 0, repaired.out + repaired.err
    assert f"cut the CommitLog at offset {end}: cleared 21 bytes of data" in repaired.out
    assert not (store / "abort").exists()


def test_odd_commitlog_files_are_problems_not_crashes(store: Path, cli: Cli) -> None:
    """An empty first file (a creation cut short) and a file named past a Java long (no
    RocketMQ file) are reported; they had crashed `check` and `stats` (ZeroDivisionError,
    OverflowError)."""
    first = store / "commitlog" / f"{0:020d}"
    first.write_bytes(b"")
    run = cli("--store", store, "check")
    assert run.code == 1 and "internal error" not in run.err, run.err
    assert "commitlog/00000000000000000000: offset 0 (position 0): file is 0 bytes" in run.out
    stats = cli("--store", store, "stats")
    assert (
        stats.code == 1
        and f"files of different sizes: this one is 0 bytes, the others 65536 ({first})"
        in stats.err
    )
    first.unlink()
    (store / "commitlog" / ("9" * 20)).write_bytes(bytes(65536))
    assert cli("--store", store, "stats").code == 0


def test_export_never_replaces_a_link_fifo_or_device(store: Path, cli: Cli, tmp_path: Path) -> None:
    """The file is written beside OUT and renamed over it: a symlink, FIFO or device
    node there would become a plain file (run as root, even /dev/null)."""
    (tmp_path / "real.jsonl").write_text("keep\n")
    (tmp_path / "link").symlink_to(tmp_path / "real.jsonl")
    os.mkfifo(tmp_path / "fifo")
    for out in (tmp_path / "link", tmp_path / "fifo", Path("/dev/null")):
        run = cli("--store", store, "export", "--format", "jsonl", out)
        assert run.code == 2, out
        assert "exists and is not a regular file" in run.err
    assert (tmp_path / "link").is_symlink() and stat.S_ISFIFO((tmp_path / "fifo").lstat().st_mode)
    assert (tmp_path / "real.jsonl").read_text() == "keep\n"
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_readers_warn_when_the_queues_end_before_the_commitlog(store: Path, cli: Cli) -> None:
    """A cleanly stopped store whose queues are gone (or kept in RocksDB by a RocketMQ 5
    broker): the queue commands see nothing, and say why and what to do."""
    assert "warning" not in cli("--store", store, "topicList").err
    shutil.rmtree(store / "consumequeue")
    run = cli("--store", store, "topicStatus", "-t", "Payments")
    assert run.code == 1
    assert "warning: the consume queues end before the CommitLog" in run.err
    assert "(the first of Payments-0)" in run.err
    assert "rocketstore rebuild --queues" in run.err
    # Behind a writer (or after a crash) that is lag, not news: no warning.
    (store / "abort").touch()
    assert "warning" not in cli("--store", store, "topicList").err
    (store / "abort").unlink()
    assert cli("--store", store, "rebuild", "--queues").code == 0
    healed = cli("--store", store, "topicStatus", "-t", "Payments")
    assert healed.code == 0 and "warning" not in healed.err
