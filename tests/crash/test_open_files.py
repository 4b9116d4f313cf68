"""Open files per mapped file: a writer with 64 KiB CommitLog files stopped with
"dispatcher failed: [Errno 24] Too many open files" after about 4,000 files, because each
mapping kept a descriptor (CPython's mmap keeps a duplicate) and, with SYNC_FLUSH, each
full file kept the one its writes went through. A writer process under an open-file limit
of 128 writes 600 files, reopens them and reads them read-only."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

WRITER = str(Path(__file__).parent / "open_files_writer.py")
LIMIT = 128
FILES = 600


@pytest.mark.skipif(sys.platform != "linux", reason="counts descriptors in /proc/self/fd")
@pytest.mark.parametrize("flush_disk_type", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_many_files_under_a_small_open_file_limit(tmp_path: Path, flush_disk_type: str) -> None:
    run = subprocess.run(
        [sys.executable, WRITER, str(tmp_path / "store"), flush_disk_type, str(LIMIT), str(FILES)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Too many open files" not in run.stderr
    lines = run.stdout.splitlines()
    assert lines[-1] == "DONE"
    assert int(lines[0].split()[1]) >= FILES
    # Descriptors do not grow with the files: a few dozen at most, whatever their number.
    for line in lines:
        if line.startswith("OPEN_FDS"):
            assert int(line.split()[1]) < 40, line
