"""Kills during a recovery that re-dispatches (issue #33, item 1): the open of a store whose
queues or index must be rebuilt, ``rocketstore rebuild`` and ``rocketstore check --repair``
each die partway through the re-dispatch (``os._exit`` at a named crash point, as a
SIGKILL would leave things). The next open must not take the half-written queues and index
for a clean shutdown: every message the store held must be reachable again by queue, key
and unique key."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rocketstore import GetStatus, MessageStore
from rocketstore import crashpoints as cp
from tests.crash.crash_writer import PROJECT_ROOT, TOPIC, config, message

CHILD = [sys.executable, "-m", "tests.crash.recovery_child"]
ROUNDS = int(os.environ.get("ROCKETSTORE_CRASH_ROUNDS", "50"))
# About 10 CommitLog files of 256 KiB: recovery's window (the last three files) is a
# part of what a rebuild re-dispatches.
COUNT = 8_000


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("redispatch") / "store"
    # A second of store time per batch: the checkpoint then vouches for all but the last
    # few files, and an abnormal recovery scans only those (as on a real broker), so the
    # rest of a half-done re-dispatch lies before its window.
    first_ms = int(time.time() * 1000) - COUNT * 10 - 60_000
    with MessageStore.open(root, config("ASYNC_FLUSH")) as store:
        for start in range(0, COUNT, 100):
            batch = [message(n) for n in range(start, start + 100)]
            results = store.put_batch(batch, store_timestamp=first_ms + start * 10)
            assert all(r.ok for r in results)
    assert len(os.listdir(root / "commitlog")) > 6
    return root


def _remove_queues(root: Path) -> None:
    shutil.rmtree(root / "consumequeue")


def _remove_index(root: Path) -> None:
    shutil.rmtree(root / "index")


def _remove_one_queue(root: Path) -> None:
    shutil.rmtree(root / "consumequeue" / TOPIC / "1")


def _open(root: Path) -> list[str]:
    return [*CHILD, str(root), "ASYNC_FLUSH"]


def _cli(*args: str) -> Callable[[Path], list[str]]:
    return lambda root: [sys.executable, "-m", "rocketstore.cli.main", "--store", str(root), *args]


# (damage before the run, the command that re-dispatches)
ATTACKS: dict[str, tuple[Callable[[Path], None] | None, Callable[[Path], list[str]]]] = {
    "open-without-queues": (_remove_queues, _open),
    "open-without-index": (_remove_index, _open),
    "open-without-one-queue": (_remove_one_queue, _open),
    "rebuild": (None, _cli("rebuild")),
    "rebuild-queues": (None, _cli("rebuild", "--queues")),
    "check-repair": (_remove_one_queue, _cli("check", "--repair")),
}


def _verify_everything(root: Path) -> None:
    """Reopen as the CLI's writers do; every message must be in its queue once, and
    found by its key and by its unique key."""
    with MessageStore.open(root, config("ASYNC_FLUSH").replace(cut_damaged_commitlog=False)) as s:
        seen: set[int] = set()
        for queue_id in range(3):
            offset, top = s.min_offset(TOPIC, queue_id), s.max_offset(TOPIC, queue_id)
            while offset < top:
                got = s.get_messages("check", TOPIC, queue_id, offset, max_count=32)
                assert got.status is GetStatus.FOUND, (queue_id, offset, got.status)
                for m in got.messages:
                    n = int(m.properties["N"])
                    assert n not in seen, f"message {n} twice in its queue"
                    seen.add(n)
                offset = got.next_begin_offset
        missing = set(range(COUNT)) - seen
        assert not missing, f"{len(missing)} messages in no queue, e.g. {sorted(missing)[:5]}"
        lost_key = [n for n in range(COUNT) if len(s.query_messages(TOPIC, f"key-{n}")) != 1]
        assert not lost_key, f"{len(lost_key)} not found by key, e.g. {lost_key[:5]}"
        lost_uniq = [n for n in range(COUNT) if len(s.query_by_unique_key(TOPIC, f"{n:032X}")) != 1]
        assert not lost_uniq, f"{len(lost_uniq)} not found by unique key, e.g. {lost_uniq[:5]}"


@pytest.mark.parametrize("attack", sorted(ATTACKS))
@pytest.mark.parametrize("point", [cp.MID_REDISPATCH, cp.AFTER_DISPATCH_QUEUE_BEFORE_INDEX])
def test_kill_during_a_redispatching_recovery(
    tmp_path: Path, template: Path, attack: str, point: str
) -> None:
    damage, command = ATTACKS[attack]
    files = len(os.listdir(template / "commitlog"))
    # The n-th run of the re-dispatch (one per CommitLog file here): early, middle, late.
    more = list(range(2, files - 2))[: ROUNDS // 10]  # every run, given enough rounds
    counts = sorted({1, files // 2, files - 2, *more})
    for count in counts:
        root = tmp_path / f"store-{count}"
        shutil.copytree(template, root)
        if damage is not None:
            damage(root)
        run = subprocess.run(
            command(root),
            env={**os.environ, cp.ENV_VAR: f"{point}:{count}"},
            cwd=PROJECT_ROOT,
            check=False,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert run.returncode == 137, (count, run.returncode, run.stdout, run.stderr[-2000:])
        _verify_everything(root)
        if attack.startswith("rebuild") and count == counts[0]:
            # The next rebuild removes what the killed one set aside.
            again = subprocess.run(
                command(root), cwd=PROJECT_ROOT, check=False, capture_output=True, text=True
            )
            assert again.returncode == 0, again.stderr[-2000:]
            assert not [p.name for p in root.iterdir() if p.name.startswith(".rebuild-")]
            _verify_everything(root)
        shutil.rmtree(root)
