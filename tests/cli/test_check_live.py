"""``check`` beside a running writer (issue #33 item 9): it reads the CommitLog first and
the queues and index after, so they hold units and entries of records appended since, and
each queue is read at another moment of the dispatch. Judged as of the CommitLog end the
check read, none of that is a problem: repeated checks while a writer process appends
report no problem at all."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests.cli.cli_helpers import Run

Cli = Callable[..., Run]

# A writer process: small files (so queues and index span several), several topics and
# queues, keys; it writes until the stop file appears, a little at a time.
WRITER = """
import os, sys, time
from rocketstore import Message, MessageStore, StoreConfig
root, stop = sys.argv[1], sys.argv[2]
config = StoreConfig(mapped_file_size_commit_log=64 * 1024, mapped_file_size_consume_queue=2000,
                     max_hash_slot_num=64, max_index_num=256)
with MessageStore.open(root, config) as store:
    i = 0
    while not os.path.exists(stop) and i < 200_000:
        message = Message(f"T{i % 3}", b"x" * (50 + i % 200), queue_id=i % 4,
                          properties={"TAGS": "a", "KEYS": f"k{i} c{i % 7}"})
        assert store.put(message).status.ok
        i += 1
        if i == 200:
            print("ready", flush=True)
        if i % 50 == 0:
            time.sleep(0.005)
"""


def test_check_beside_a_running_writer_reports_no_false_problems(tmp_path: Path, cli: Cli) -> None:
    store = tmp_path / "store"
    stop = tmp_path / "stop"
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(store), str(stop)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline() == "ready\n"
        records = []
        for _ in range(4):
            run = cli("--store", store, "check", "--max-problems", "0")
            assert run.code == 0, run.out[-3000:]
            assert run.out.splitlines()[-1].endswith(": OK")
            assert "note: abort file present" in run.out
            records.append(int(run.out.splitlines()[-1].split()[1]))
            assert writer.poll() is None  # still writing: the check ran beside it
            time.sleep(0.3)
        assert records == sorted(records) and records[0] < records[-1]
    finally:
        stop.touch()
        writer.wait(timeout=60)
    assert writer.returncode == 0
    # Stopped cleanly: everything is dispatched and judged, nothing is in flight.
    final = cli("--store", store, "check")
    assert final.code == 0 and "abort file present" not in final.out
