"""A full disk under ASYNC_FLUSH (issue #33, item 5): a writer on an 8 MiB tmpfs fills it
while it puts. Queue and index files have their blocks before the dispatcher writes into
them, so the dispatcher meets the full disk as an error (WRITE_LOGICS_QUEUE_ERROR or
WRITE_INDEX_FILE_ERROR, puts refused with SERVICE_NOT_AVAILABLE), never as a SIGBUS on a
sparse page. Once there is room again, every acknowledged message is served."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketstore import GetStatus, MessageStore
from tests.crash.crash_writer import PROJECT_ROOT, TOPIC, config

WRITER = [sys.executable, "-m", "tests.crash.disk_full_writer"]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(disk)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


@pytest.mark.parametrize(
    ("case", "flag"),
    [
        ("index", "WRITE_INDEX_FILE_ERROR"),
        ("index-entries", "WRITE_INDEX_FILE_ERROR"),
        ("new-queue", "WRITE_LOGICS_QUEUE_ERROR"),
    ],
)
def test_a_full_disk_stops_the_writes_without_a_sigbus(
    small_disk: Path, case: str, flag: str
) -> None:
    root = small_disk / "store"
    run = subprocess.run(
        [*WRITER, str(root), case],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode != -signal.SIGBUS, "SIGBUS: a write through a mapping met the full disk"
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    acked = {int(line[4:]) for line in lines if line.startswith("ACK ")}
    refused = {line for line in lines if line.startswith("REFUSED ")}
    assert refused == {"REFUSED SERVICE_NOT_AVAILABLE"}, refused
    assert any(line.startswith("FLAGS") and flag in line for line in lines), lines[-4:]
    assert len(acked) >= 300
    if case == "index-entries":  # met inside the first file, not at a roll
        names = [n for n in os.listdir(root / "index") if not n.startswith(".")]
        assert len(names) == 1, names

    os.remove(small_disk / "ballast")  # room again: the next open re-dispatches
    with MessageStore.open(root, config("ASYNC_FLUSH").replace(cut_damaged_commitlog=False)) as s:
        assert s.recovery_report.abnormal
        seen: set[int] = set()
        for queue_id in s.topics()[TOPIC]:
            offset, top = s.min_offset(TOPIC, queue_id), s.max_offset(TOPIC, queue_id)
            while offset < top:
                got = s.get_messages("check", TOPIC, queue_id, offset, max_count=32)
                assert got.status is GetStatus.FOUND
                seen.update(int(m.properties["N"]) for m in got.messages)
                offset = got.next_begin_offset
        assert acked <= seen, f"acknowledged but lost: {sorted(acked - seen)[:10]}"
        for n in sorted(acked):
            assert [int(m.properties["N"]) for m in s.query_messages(TOPIC, f"key-{n}")] == [n]
            assert len(s.query_by_unique_key(TOPIC, f"{n:032X}")) == 1
