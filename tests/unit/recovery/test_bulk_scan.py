"""Recovery's bulk scan (record_scan over the mapping, CRC per body) with scan windows far
smaller than a record, so every record straddles window edges: it must find the same end,
count and first bad record as a record-by-record walk."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.format import record as rec
from rocketstore.paths import ABORT_FILE, COMMITLOG_DIR
from rocketstore.recovery import recover

CONFIG = StoreConfig(mapped_file_size_commit_log=8 * 1024)


def _records(root: Path) -> list[tuple[int, rec.RecordView]]:
    """(offset, view) of every record, walked one by one."""
    found = []
    for name in sorted(os.listdir(root / COMMITLOG_DIR)):
        data = (root / COMMITLOG_DIR / name).read_bytes()
        position = 0
        while position + 8 <= len(data) and any(data[position : position + 8]):
            view = rec.read_record(data, position)
            if isinstance(view, rec.Blank):
                break
            found.append((int(name) + position, view))
            position += view.size
    return found


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(recover, "SCAN_WINDOW_BYTES", 97)
    root = tmp_path / "store"
    with MessageStore.open(root, CONFIG) as store:
        for i in range(60):
            host = "[::1]:4000" if i % 3 == 0 else "10.0.0.1:4000"
            store.put(
                Message("T", os.urandom(i * 7 % 300), queue_id=i % 2, born_host=host),
                store_host="[::2]:10911" if i % 5 == 0 else None,
            )
    (root / ABORT_FILE).touch()
    return root


def test_small_windows_scan_every_record(root: Path) -> None:
    records = _records(root)
    with MessageStore.open(root, CONFIG) as store:
        report = store.recovery_report
        assert report.stop_reason == "end of data"
        last_offset, last = records[-1]
        assert report.commit_log_end == last_offset + last.size
        # The scan starts at the third-last file (or the checkpoint's file).
        first_file = int(os.path.basename(report.start_file))
        assert report.records_scanned == sum(1 for offset, _ in records if offset >= first_file)
        assert report.records_scanned > 10


def test_a_bad_body_crc_stops_the_scan_at_its_record(root: Path) -> None:
    records = _records(root)
    offset, victim = next((o, v) for o, v in records[-8:] if v.body_length > 4)
    file_size = CONFIG.mapped_file_size_commit_log
    path = root / COMMITLOG_DIR / f"{offset - offset % file_size:020d}"
    data = bytearray(path.read_bytes())
    data[offset % file_size + (victim.body_position - victim.position) + 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with MessageStore.open(root, CONFIG) as store:
        report = store.recovery_report
        assert report.commit_log_end == offset
        assert report.stop_offset == offset
        assert "body CRC mismatch" in report.stop_reason
