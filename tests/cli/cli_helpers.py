"""Helpers for the CLI tests: the store they build (small files, so it spans several
CommitLog, queue and index files) and two runners of the CLI: ``run_cli`` in this process
(what almost every test uses: no interpreter start per command) and ``run_cli_process``,
the real console script as a subprocess (smoke tests, and what needs a process of its own:
argv bytes, PYTHONPATH, ``serve``, kill and hang tests)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click.formatting
from click.testing import CliRunner

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.cli.main import main

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
# What both runners set: times print in UTC, help wraps at 200 columns.
ENV = {"TZ": "UTC", "COLUMNS": "200"}


def run_cli(
    *args: str | os.PathLike[str],
    input_text: str | None = None,
    extra_env: dict[str, str] | None = None,
) -> Run:
    """Run the CLI in this process as the console script runs it (``main(argv)``): the
    same stdout, stderr and exit code as ``run_cli_process`` gives, without starting an
    interpreter. What a process would start afresh is set and put back around the call:
    standard streams and stdin, environment (and the time zone from TZ), the root logger's
    handlers and level (``cli`` calls logging.basicConfig), the ``rocketstore`` logger's
    level (``serve`` sets INFO: later commands would log what they do not), click's help
    width."""
    env = {**ENV, **(extra_env or {})}
    if "PYTHONPATH" in env:
        raise ValueError("PYTHONPATH only takes effect in a new process: use run_cli_process")
    root, ours = logging.getLogger(), logging.getLogger("rocketstore")
    saved_handlers, saved_level, saved_ours = root.handlers[:], root.level, ours.level
    threads_before = set(threading.enumerate())
    with CliRunner().isolation(input=input_text, env=env) as (out, err, _):
        click.formatting.FORCED_WIDTH = None  # the isolation's 80 columns; COLUMNS decides
        time.tzset()
        root.handlers = []  # so that basicConfig logs to this run's stderr, as it would
        # A new process's levels: an earlier in-process serve (tests/unit/broker) leaves
        # the rocketstore logger at INFO, and its lines would reach this run's stderr.
        root.setLevel(logging.WARNING)
        ours.setLevel(logging.NOTSET)
        try:
            code = main([str(arg) for arg in args])
        except SystemExit as e:  # as the interpreter ends on it
            if isinstance(e.code, str):
                print(e.code, file=sys.stderr)
            code = e.code if isinstance(e.code, int) else int(e.code is not None)
        except Exception:  # --debug re-raises: Python would print it and exit 1
            traceback.print_exc()
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            root.handlers = saved_handlers
            root.setLevel(saved_level)
            ours.setLevel(saved_ours)
    time.tzset()
    left = [t for t in set(threading.enumerate()) - threads_before if t.is_alive()]
    assert not left, f"the command left threads running: {left}"
    return Run(code, _text(out.getvalue()), _text(err.getvalue()))


def _text(data: bytes) -> str:
    """As ``subprocess.run(text=True)`` decodes (universal newlines)."""
    return data.decode("utf-8", "replace").replace("\r\n", "\n")


def run_cli_process(
    *args: str | os.PathLike[str],
    input_text: str | None = None,
    extra_env: dict[str, str] | None = None,
) -> Run:
    """Run the real console script as a subprocess (``python -m rocketstore.cli.main``)."""
    env = {**os.environ, **ENV, **(extra_env or {})}
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
