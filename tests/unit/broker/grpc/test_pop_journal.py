import asyncio
import json
import time
from typing import Any

import pytest

pytest.importorskip("grpc")

from rocketstore.broker.grpc.pop_journal import PopJournal


def test_lines_of_records_by_generation(tmp_path):
    journal = PopJournal(str(tmp_path))
    journal.start(3)
    journal.append([["n", "g", "t", 0, 0], ["h", "g", "t", 0, 0, 0, 1, 5, 10]])
    journal.append([])  # nothing to write: no line
    journal.start(4)
    journal.append([["a", "g", "t", 0, 0]])
    journal.close()
    assert journal.generations() == [3, 4]
    lines = (tmp_path / "grpcPopState.journal.3").read_bytes().splitlines()
    assert [json.loads(line) for line in lines] == [
        [["n", "g", "t", 0, 0], ["h", "g", "t", 0, 0, 0, 1, 5, 10]]
    ]
    assert journal.read(3) == [
        ["n", "g", "t", 0, 0],
        ["h", "g", "t", 0, 0, 0, 1, 5, 10],
        ["a", "g", "t", 0, 0],
    ]
    assert journal.read(4) == [["a", "g", "t", 0, 0]]
    journal.remove_before(4)
    assert journal.generations() == [4]


def test_a_torn_line_is_skipped(tmp_path, caplog):
    journal = PopJournal(str(tmp_path), sync=True)
    journal.start(1)
    journal.append([["a", "g", "t", 0, 1]])
    journal.close()
    with open(tmp_path / "grpcPopState.journal.1", "ab") as f:
        f.write(b'[["a","g","t",0')  # a power loss mid-line
    (tmp_path / "grpcPopState.journal.x").write_bytes(b"not ours")
    assert journal.read(0) == [["a", "g", "t", 0, 1]]
    assert "line 2 is not a journal line" in caplog.text


class _Journal:
    """A PopJournal's part the service uses: lines counted, fsyncs slow and recorded with
    how many lines they cover."""

    sync = True

    def __init__(self) -> None:
        self.lines = 0
        self.fsyncs: list[int] = []
        self.synced = 0

    def append(self, records: list[Any]) -> None:
        self.lines += 1

    def fsync(self) -> None:
        covered = self.lines
        time.sleep(0.02)
        self.fsyncs.append(covered)
        self.synced = max(self.synced, covered)


class _Changes:
    def take_changes(self) -> list[Any]:
        return [["x"]]


class _Ctx:
    async def run(self, fn: Any, *args: Any) -> Any:
        return await asyncio.to_thread(fn, *args)


def test_concurrent_journal_lines_share_fsyncs_and_none_is_answered_before_its_own():
    """Group commit under SYNC_FLUSH: each caller returns only once an fsync that began
    after its line was written has finished; callers arriving while one runs share the
    next, so 40 lines take a few fsyncs, not 40."""
    from rocketstore.broker.grpc.service_core import ServiceCore

    core = ServiceCore.__new__(ServiceCore)
    journal = _Journal()
    core.ctx = _Ctx()  # type: ignore[assignment]
    core.pop = _Changes()  # type: ignore[assignment]
    core.journal = journal  # type: ignore[assignment]
    core._journal_written = core._journal_synced_to = 0
    core._journal_syncing = None

    async def caller(delay: float) -> int:
        await asyncio.sleep(delay)
        line = core._journal_write()
        await core._journal_synced(line)
        assert journal.synced >= line  # an fsync that began after the write has finished
        return line

    async def run() -> list[int]:
        return await asyncio.gather(*(caller(i * 0.002) for i in range(40)))

    lines = asyncio.run(run())
    assert sorted(lines) == list(range(1, 41))
    assert journal.synced == 40
    assert 2 <= len(journal.fsyncs) < 20, journal.fsyncs
    assert journal.fsyncs == sorted(journal.fsyncs) and journal.fsyncs[-1] == 40
