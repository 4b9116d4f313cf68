"""Odd files where store files should be (issue #33 item 10): a FIFO, a consume-queue file
cut short, an empty file. Commands must neither hang (a FIFO opened blocking waits for a
writer forever) nor refuse the whole store over one queue, and every error names the path.
"""

from __future__ import annotations

import os
import signal
import struct
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from rocketstore.format.cq_ext import address_of
from tests.cli.cli_helpers import CLI, CONFIG, Run
from tests.dledger_helpers import frame_as_dledger

Cli = Callable[..., Run]

# Commands that open the store read-only, through queues, or read the checkpoint.
NAMESRV = ("--namesrv-listen", "127.0.0.1:0")
READERS = (("topicList",), ("topicStatus", "-t", "Payments"), ("stats",))


def _serve(store: Path) -> subprocess.CompletedProcess[str]:
    """``serve`` on loopback ports the system picks; a hang fails the test by its timeout
    (and SIGTERM, which a hung open would also ignore, is not needed to end it)."""
    return subprocess.run(
        [*CLI, "--store", str(store), "serve", "--listen", "127.0.0.1:0", *NAMESRV],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "TZ": "UTC"},
    )


def _serve_until_ready(store: Path) -> str:
    """``serve`` started, stopped with SIGTERM once it says it is ready; its stderr."""
    served = subprocess.Popen(
        [*CLI, "--store", str(store), "serve", "--listen", "127.0.0.1:0", *NAMESRV],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TZ": "UTC"},
    )
    assert served.stderr is not None
    lines = []
    try:
        for line in served.stderr:  # ends when serve exits: a failure before it was ready
            lines.append(line)
            if "(Ctrl-C stops)" in line:
                break
        served.send_signal(signal.SIGTERM)
        assert served.wait(timeout=60) == 0, "".join(lines)
    finally:
        if served.poll() is None:
            served.kill()
            served.wait()
    return "".join(lines) + served.stderr.read()


def _queue_files(store: Path, topic: str, queue_id: int) -> list[Path]:
    return sorted((store / "consumequeue" / topic / str(queue_id)).iterdir())


def test_a_fifo_checkpoint_is_refused_by_its_path(store: Path, cli: Cli) -> None:
    path = store / "checkpoint"
    path.unlink()
    os.mkfifo(path)  # nobody writes it: a blocking open would hang
    for command in READERS:
        run = cli("--store", store, *command)
        assert run.code == 1, command
        assert f"rocketstore: error: a FIFO, not a regular file ({path})" in run.err
    check = cli("--store", store, "check")
    assert check.code == 1 and "checkpoint: file: a FIFO, not a regular file" in check.out
    served = _serve(store)
    assert served.returncode == 1
    assert f"rocketstore: error: a FIFO, not a regular file ({path})" in served.stderr


def test_a_fifo_topic_config_is_refused_by_its_path(store: Path, cli: Cli) -> None:
    (store / "config").mkdir()
    path = store / "config" / "topics.json"
    os.mkfifo(path)
    for command in (("topicList",), ("topicStatus", "-t", "Payments")):
        run = cli("--store", store, *command)
        assert run.code == 1, command
        assert "a FIFO, not a regular file (" in run.err and "config/topics.json)" in run.err
    served = _serve(store)
    assert served.returncode == 1
    assert "rocketstore: error: a FIFO, not a regular file (" in served.stderr
    assert "config/topics.json)" in served.stderr


def test_a_fifo_queue_file_leaves_out_that_queue_and_names_it(store: Path, cli: Cli) -> None:
    path = _queue_files(store, "Payments", 0)[0]
    path.unlink()
    os.mkfifo(path)
    for command in READERS:
        run = cli("--store", store, *command)
        assert run.code == 0, command
        assert (
            "rocketstore: warning: consume queue Payments-0 cannot be read (a FIFO, not a "
            f"regular file ({path}))" in run.err
        )
    check = cli("--store", store, "check")
    assert check.code == 1
    assert f"consumequeue/Payments/0/{path.name}: file: a FIFO, not a regular file" in check.out
    served = _serve(store)
    assert served.returncode == 1
    assert f"rocketstore: error: a FIFO, not a regular file ({path})" in served.stderr


@pytest.mark.parametrize("which", [0, -1])
def test_a_queue_file_7_bytes_short_leaves_out_that_queue_only(
    store: Path, cli: Cli, which: int
) -> None:
    """docs/cli.md: a reader leaves out a queue whose files cannot be mapped. A queue of
    two files, one cut short, made every reader refuse the store (its files disagree)."""
    files = _queue_files(store, "OrderEvents", 0)
    assert len(files) == 2
    short = files[which]
    short.write_bytes(short.read_bytes()[:-7])
    for command in (*READERS, ("topicStatus", "-t", "OrderEvents")):
        run = cli("--store", store, *command)
        assert run.code == 0, command
        assert (
            "rocketstore: warning: consume queue OrderEvents-0 cannot be read (file is 1993 "
            f"bytes, expected 2000 ({short}))" in run.err
        )
    status = cli("--store", store, "topicStatus", "-t", "OrderEvents")
    assert status.err.count("cannot be read") == 1
    assert len([line for line in status.out.splitlines() if "localStore" in line]) == 3


def test_a_single_queue_file_cut_short_does_not_set_every_queue_s_size(
    store: Path, cli: Cli
) -> None:
    """The queue file size is taken from the files: a file cut short, in the first queue
    looked at, must not become the size every other queue is then refused by."""
    first = sorted((store / "consumequeue").iterdir())[0]  # OrderEvents
    for queue_dir in first.iterdir():
        for path in queue_dir.iterdir():
            path.write_bytes(path.read_bytes()[:-7])
    run = cli("--store", store, "topicStatus", "-t", "Payments")
    assert run.code == 0
    assert "Payments-" not in run.err
    assert len([line for line in run.out.splitlines() if "localStore" in line]) == 4


def test_empty_files_are_named(store: Path, cli: Cli) -> None:
    commitlog = sorted((store / "commitlog").iterdir())
    newest = commitlog[-1]
    newest.write_bytes(b"")
    run = cli("--store", store, "topicList")
    assert run.code == 1
    assert (
        "rocketstore: error: files of different sizes: this one is 0 bytes, the others "
        f"65536 ({newest})" in run.err
    )
    for path in commitlog[:-1]:
        path.unlink()
    run = cli("--store", store, "topicList")
    assert run.code == 1
    assert f"rocketstore: error: empty file (0 bytes) ({newest})" in run.err
    assert "internal error" not in run.err


def test_an_empty_queue_file_and_checkpoint_are_named(store: Path, cli: Cli) -> None:
    empty = _queue_files(store, "OrderEvents", 1)[-1]
    empty.write_bytes(b"")
    run = cli("--store", store, "topicStatus", "-t", "Payments")
    assert run.code == 0
    assert f"consume queue OrderEvents-1 cannot be read (empty file (0 bytes) ({empty}))" in run.err
    (store / "checkpoint").write_bytes(b"")
    stats = cli("--store", store, "stats")
    assert stats.code == 1
    assert f"incomplete checkpoint: need 24 bytes, have 0 ({store / 'checkpoint'})" in stats.err


def test_a_fifo_lock_file_is_refused_by_its_path(store: Path, cli: Cli) -> None:
    """The lock is opened read-write, which does not block on a FIFO, but lockf failed on
    it and read as another writer holding the store."""
    path = store / "lock"
    path.unlink(missing_ok=True)
    os.mkfifo(path)
    served = _serve(store)
    assert served.returncode == 1
    assert f"rocketstore: error: a FIFO, not a regular file ({path})" in served.stderr
    assert "locked" not in served.stderr
    repair = cli("--store", store, "rebuild")
    assert repair.code == 1
    assert f"a FIFO, not a regular file ({path})" in repair.err
    assert cli("--store", store, "topicList").code == 0  # readers take no lock


def _index_files(store: Path) -> list[Path]:
    return sorted((store / "index").iterdir())


@pytest.mark.parametrize("which", [0, -1])
def test_a_fifo_index_file_is_refused_by_its_path(store: Path, cli: Cli, which: int) -> None:
    path = _index_files(store)[which]
    path.unlink()
    os.mkfifo(path)
    query = cli("--store", store, "queryMsgByKey", "-t", "Payments", "-k", "order-300")
    assert query.code == 1
    assert f"rocketstore: error: a FIFO, not a regular file ({path})" in query.err
    served = _serve(store)
    assert served.returncode == 1
    assert f"rocketstore: error: a FIFO, not a regular file ({path})" in served.stderr


def test_an_empty_index_file_is_passed_over_or_removed(store: Path, cli: Cli) -> None:
    """Shorter than its header: a creation cut short, which holds nothing (index.unfinished):
    a reader passes over it, a writer removes it."""
    path = _index_files(store)[-1]
    path.write_bytes(b"")
    query = cli("--store", store, "queryMsgByKey", "-t", "Payments", "-k", "order-0")
    assert query.code == 0, query.err
    assert "internal error" not in query.err
    served = _serve_until_ready(store)
    assert "error" not in served
    assert not path.exists()  # the writer removed it


def test_a_fifo_consume_queue_ext_file_is_refused_by_its_path(store: Path, cli: Cli) -> None:
    """A unit whose tagsCode is a ConsumeQueueExt address makes readers look in
    consumequeue_ext/: a FIFO there is waited on by nobody (queryCq shows no extension,
    as mqadmin does for a unit it cannot read; tests/unit/test_consume_queue_ext.py has
    the FIFO that appears after the files were listed)."""
    unit0 = _queue_files(store, "Payments", 0)[0]
    data = bytearray(unit0.read_bytes())
    data[12:20] = struct.pack(">q", address_of(0))
    unit0.write_bytes(bytes(data))
    ext = store / "consumequeue_ext" / "Payments" / "0"
    ext.mkdir(parents=True)
    path = ext / "00000000000000000000"
    os.mkfifo(path)
    run = cli("--store", store, "queryCq", "-t", "Payments", "-q", "0", "-i", "0", "-c", "1")
    assert run.code == 0, run.err  # (the store logs the path; the unit shows none)
    assert "Cq extend not exist!addr: -9223372036854775808" in run.out
    path.unlink()
    path.write_bytes(b"")  # empty: no unit at that address
    run = cli("--store", store, "queryCq", "-t", "Payments", "-q", "0", "-i", "0", "-c", "1")
    assert run.code == 0 and "internal error" not in run.err


# For each DLedger file: (command, its exit code). Its checkpoint only adds to what
# ``stats`` shows (unknown when unreadable) and ``check`` names it as a problem; its index
# is read by ``stats`` and ``check``; its data files are the CommitLog, read by all.
DLEDGER_FIFO = {
    "checkpoint": {"stats": 0, "check": 1, "topicList": 0},
    "index": {"stats": 1, "check": 1, "topicList": 0},
    "data": {"stats": 1, "check": 1, "topicList": 1},
}


@pytest.mark.parametrize("which", sorted(DLEDGER_FIFO))
def test_fifo_dledger_files_are_refused_by_their_path(store: Path, cli: Cli, which: str) -> None:
    frame_as_dledger(store, hash_slot_num=CONFIG.max_hash_slot_num)
    home = store / "dledger-n0"
    path = home / "checkpoint" if which == "checkpoint" else sorted((home / which).iterdir())[0]
    path.unlink()
    os.mkfifo(path)
    for command, code in DLEDGER_FIFO[which].items():
        run = cli("--store", store, command)
        assert run.code == code, (command, run)
        if command == "check" and which == "checkpoint":
            assert "dledger-n0/checkpoint: file: a FIFO, not a regular file" in run.out
        elif code:
            assert f"rocketstore: error: a FIFO, not a regular file ({path})" in run.err


@pytest.mark.parametrize("which", sorted(DLEDGER_FIFO))
def test_empty_dledger_files_are_named_or_read_as_empty(store: Path, cli: Cli, which: str) -> None:
    frame_as_dledger(store, hash_slot_num=CONFIG.max_hash_slot_num)
    home = store / "dledger-n0"
    path = home / "checkpoint" if which == "checkpoint" else sorted((home / which).iterdir())[-1]
    path.write_bytes(b"")
    for command in DLEDGER_FIFO[which]:
        run = cli("--store", store, command)
        assert "internal error" not in run.err, (command, run)
        if run.code:  # the file named, or what its emptiness means for its directory
            named = path.relative_to(store)
            assert str(path) in run.err or str(named.parent) in run.out, (command, run)
