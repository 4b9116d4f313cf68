"""Helpers for the CLI tests: the store they build (small files, so it spans several
CommitLog, queue and index files) and a runner for the real console script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocketstore import Message, MessageStore, StoreConfig

CONFIG = StoreConfig(
    mapped_file_size_commit_log=64 * 1024,
    mapped_file_size_consume_queue=2000,
    max_hash_slot_num=64,
    max_index_num=256,
)
BASE_MS = 1_700_000_000_000  # 2023-11-14 22:13:20 UTC
BORN_MS = 1_699_999_999_000
TAGS = ("created", "paid", "shipped")
COUNT = 900  # ~210 KB of CommitLog: 4 files of 64 KiB, more than recovery's last three


def topic_of(i: int) -> str:
    return "Payments" if i % 3 == 0 else "OrderEvents"


def uniq_of(i: int) -> str:
    return f"7F000001{i:024X}"


def body_of(i: int) -> bytes:
    return (f'{{"order": {i}}}' * (1 + i % 5)).encode()


def message_of(i: int) -> Message:
    return Message(
        topic_of(i),
        body_of(i),
        queue_id=i % 4,
        properties={"TAGS": TAGS[i % 3], "KEYS": f"order-{i} cust-{i % 7}", "UNIQ_KEY": uniq_of(i)},
        born_timestamp=BORN_MS + i,
        born_host="10.1.2.3:40000",
    )


def build_store(root: Path, count: int = COUNT) -> None:
    with MessageStore.open(root, CONFIG) as store:
        for i in range(count):
            result = store.put(message_of(i), store_timestamp=BASE_MS + i * 1000)
            assert result.status.ok
        store.wait_dispatched()


@dataclass
class Run:
    code: int
    out: str
    err: str

    def json_lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.out.splitlines() if line.strip()]


CLI = [sys.executable, "-m", "rocketstore.cli.main"]


def run_cli(
    *args: str | os.PathLike[str],
    input_text: str | None = None,
    extra_env: dict[str, str] | None = None,
) -> Run:
    """Run the real console script (as a subprocess, UTC so times print the same)."""
    env = {**os.environ, "TZ": "UTC", "COLUMNS": "200", **(extra_env or {})}
    done = subprocess.run(
        [*CLI, *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        input=input_text,
        timeout=120,
        check=False,
    )
    return Run(done.returncode, done.stdout, done.stderr)


def commitlog_file(root: Path, offset: int) -> Path:
    """The CommitLog file holding ``offset`` (64 KiB files in these tests)."""
    size = CONFIG.mapped_file_size_commit_log
    return root / "commitlog" / f"{offset - offset % size:020d}"


def flip_byte(path: Path, position: int) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        value = f.read(1)[0]
        f.seek(position)
        f.write(bytes([value ^ 0xFF]))
