"""Crash tests with real processes: a writer is killed (SIGKILL at random moments, or
os._exit at named crash points), the store is reopened, and nothing acknowledged may be
missing, duplicated or corrupt; queues and index must agree with the CommitLog."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from rocketstore import GetStatus, MessageStore
from rocketstore import crashpoints as cp
from rocketstore.format.message_id import decode_offset_msg_id
from tests.crash.crash_writer import PATHS_ENV, TOPIC, config

WRITER = str(Path(__file__).parent / "crash_writer.py")
ROUNDS = int(os.environ.get("ROCKETSTORE_CRASH_ROUNDS", "50"))


def run_writer(
    root: Path,
    flush: str,
    mode: str,
    start: int,
    *,
    kill_after_s: float | None,
    env: dict[str, str],
) -> tuple[set[int], int]:
    """Run one writer until it dies; return the acknowledged numbers and its exit code."""
    proc = subprocess.Popen(
        [sys.executable, WRITER, str(root), flush, mode, str(start), "100000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, **env},
    )
    assert proc.stdout is not None
    acked: set[int] = set()
    first = proc.stdout.readline()
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or []), daemon=True)
    reader.start()
    if first.startswith("READY") and kill_after_s is not None:
        try:
            proc.wait(timeout=kill_after_s)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    reader.join(timeout=30)
    buffer = "".join(lines)
    for line in buffer.splitlines():
        if line.startswith("ACK "):
            acked.add(int(line[4:]))
    return acked, proc.returncode


def verify(root: Path, flush: str, acked: set[int]) -> int:
    """Reopen and check every acknowledged message; return the next number to write.

    Reopened as the CLI's writers and the broker open a store (``cut_damaged_commitlog``
    off): a kill leaves a torn tail, never damage that recovery refuses to cut."""
    with MessageStore.open(root, config(flush).replace(cut_damaged_commitlog=False)) as store:
        report = store.recovery_report
        assert report.abnormal, "a killed writer leaves the abort file behind"
        seen: dict[int, tuple[int, int]] = {}
        for queue_id in store.topics().get(TOPIC, []):
            offset = store.min_offset(TOPIC, queue_id)
            top = store.max_offset(TOPIC, queue_id)
            while offset < top:
                got = store.get_messages("check", TOPIC, queue_id, offset, max_count=32)
                assert got.status is GetStatus.FOUND, (queue_id, offset, got.status)
                for m in got.messages:
                    n = int(m.properties["N"])
                    assert m.queue_offset == offset + got.messages.index(m)
                    assert n not in seen, f"message {n} stored twice"
                    assert m.body == (b"%d;" % n) * (n % 40 + 1)
                    assert m.queue_id == n % 3
                    seen[n] = (m.commit_log_offset, queue_id)
                offset = got.next_begin_offset
        missing = acked - set(seen)
        assert not missing, f"acknowledged but lost: {sorted(missing)[:10]}"
        sample = sorted(acked)[-3:] + random.sample(sorted(acked), min(3, len(acked)))
        for n in sample:
            by_key = store.query_messages(TOPIC, f"key-{n}")
            assert [int(m.properties["N"]) for m in by_key] == [n], _index_diagnosis(store, n, seen)
            by_uniq = store.query_by_unique_key(TOPIC, f"{n:032X}")
            assert [int(m.properties["N"]) for m in by_uniq] == [n]
            viewed = store.view_message(by_key[0].msg_id)
            assert viewed is not None and viewed.properties["N"] == str(n)
            assert decode_offset_msg_id(viewed.msg_id)[1] == seen[n][0]
        return max(seen, default=-1) + 1


def _index_diagnosis(store: MessageStore, n: int, seen: dict[int, tuple[int, int]]) -> str:
    offset = seen[n][0]
    lines = [f"message {n} at {offset}; report {store.recovery_report}"]
    for key in (f"{TOPIC}#key-{n}", f"{TOPIC}#{n:032X}", f"{TOPIC}#all"):
        found = [o for o in store.index.candidates(key) if o == offset]
        lines.append(f"{key}: candidate present={bool(found)}")
    for f in store.index.files:
        lines.append(
            f"{f.name} count={f.index_count} begin={f.begin_phy_offset} end={f.end_phy_offset}"
        )
    return "\n".join(lines)


def kill_rounds(root: Path, seed: str, flushes: list[str]) -> None:
    """One writer per entry of ``flushes`` (each mode in turn), killed with SIGKILL at a
    random moment, and the store checked after each."""
    rng = random.Random(seed)
    next_n = 0
    total_acked: set[int] = set()
    for round_no, flush in enumerate(flushes):
        mode = ("single", "batch", "submit")[round_no % 3]
        acked, code = run_writer(
            root, flush, mode, next_n, kill_after_s=rng.uniform(0.0, 0.25), env={}
        )
        assert code == -signal.SIGKILL
        total_acked |= acked
        next_n = verify(root, flush, total_acked)


@pytest.mark.parametrize("flush", ["SYNC_FLUSH", "ASYNC_FLUSH"])
def test_sigkill_at_random_moments(tmp_path: Path, flush: str) -> None:
    kill_rounds(tmp_path / "store", f"{flush}-kill", [flush] * ROUNDS)


def test_sigkill_with_the_commitlog_over_two_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """storePathCommitLog with two paths: the torn tail may be in either directory, and the
    file made ahead of need in the other."""
    paths = f"{tmp_path / 'disk-b'},{tmp_path / 'disk-a'}"
    monkeypatch.setenv(PATHS_ENV, paths)  # the writers inherit it; verify's config reads it
    root = tmp_path / "store"
    kill_rounds(root, "two-paths", ["ASYNC_FLUSH", "SYNC_FLUSH"] * max(3, ROUNDS // 4))
    files = {d: os.listdir(tmp_path / d) for d in ("disk-a", "disk-b")}
    assert files["disk-a"] and files["disk-b"], files
    assert not (root / "commitlog").exists()
    for directory, names in files.items():
        for name in names:  # file n in the n % 2-th of the sorted paths
            assert (int(name) // (256 * 1024)) % 2 == ("disk-a", "disk-b").index(directory)


@pytest.mark.parametrize("point", cp.ALL_POINTS)
def test_named_crash_points(tmp_path: Path, point: str) -> None:
    rng = random.Random(point)
    root = tmp_path / "store"
    next_n = 0
    total_acked: set[int] = set()
    crashed = 0
    for round_no in range(max(3, ROUNDS // 4)):
        flush = "SYNC_FLUSH" if round_no % 2 else "ASYNC_FLUSH"
        mode = "batch" if point == cp.MID_BATCH_WRITE or round_no % 3 == 0 else "single"
        rare = point in (cp.DURING_INDEX_ROLLOVER, cp.DURING_FILE_PREALLOCATION)
        env = {cp.ENV_VAR: f"{point}:{rng.randint(1, 3) if rare else rng.randint(1, 40)}"}
        acked, code = run_writer(root, flush, mode, next_n, kill_after_s=3.0, env=env)
        crashed += code == 137
        total_acked |= acked
        next_n = verify(root, flush, total_acked)
    assert crashed > 0, f"crash point {point} was never reached"
