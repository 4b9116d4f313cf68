"""Turn a store rocketstore wrote into the store a DLedger broker would have written with
the same records (enableDLegerCommitLog), for tests of the DLedger reader.

The framing follows format.dledger_entry's facts, checked against a store RocketMQ 4.9.8
itself wrote (tests/golden, the `dledger` store): each record becomes the body of one
entry at the next position of ``dledger-<selfId>/data`` (its PHYSICALOFFSET set to
position + 48, as RocketMQ's append hook does), an entry that would leave fewer than 8
bytes in its file goes to the next one after a blank, and the consume-queue units and
index entries are moved to the records' new offsets. ``keep_plain`` records stay in the
plain CommitLog, as when a broker turned DLedger on over an old log (the DLedger log then
starts at the file after the last plain one).
"""

from __future__ import annotations

import os
import shutil
import struct
from dataclasses import dataclass, field
from pathlib import Path

from rocketstore.check.scan import CommitLogScan
from rocketstore.format import dledger_entry as dl
from rocketstore.format import index_layout
from rocketstore.format import record as rec
from rocketstore.paths import offset_to_file_name

PHYSICAL_OFFSET_AT = 28
_LONG = struct.Struct(">q")


@dataclass
class Framed:
    """Where each record went (old offset -> new offset) and the entries written."""

    moved: dict[int, int] = field(default_factory=dict)
    entries: list[dl.EntryHeader] = field(default_factory=list)
    divided_offset: int = 0


def frame_as_dledger(
    root: Path,
    *,
    self_id: str = "n0",
    term: int = 1,
    keep_plain: int = 0,
    hash_slot_num: int,
    committed: int | None = None,
) -> Framed:
    """Rewrite ``root`` in place (see the module's doc). ``hash_slot_num`` is the index
    geometry the store was written with; ``committed`` the checkpoint's committedIndex
    (default: the last entry)."""
    scan = CommitLogScan(str(root), check_crc=False)
    file_size = scan.file_size
    records = [
        (r.offset, bytes(r.buf[r.view.position : r.view.position + r.view.size]))
        for r in scan.records()
    ]
    framed = Framed()
    plain, wrapped = records[:keep_plain], records[keep_plain:]
    commitlog = root / "commitlog"
    if plain:
        last_plain = plain[-1][0] + len(plain[-1][1])
        # RocketMQ's mixed recovery ends the old log with a blank and starts DLedger at
        # the next file.
        start = (last_plain // file_size + 1) * file_size
        cut_plain_log(commitlog, last_plain, file_size)
        for offset, _ in plain:
            framed.moved[offset] = offset
    else:
        start = 0
        shutil.rmtree(commitlog)
    framed.divided_offset = start
    data = bytearray()
    position = start
    for number, (offset, record) in enumerate(wrapped):
        size = dl.BODY_OFFSET + len(record)
        room = file_size - position % file_size
        if size + dl.MIN_BLANK_LENGTH > room:
            data += dl.encode_blank(room) + bytes(room - 8)
            position += room
        body = bytearray(record)
        _LONG.pack_into(body, PHYSICAL_OFFSET_AT, position + dl.BODY_OFFSET)
        data += dl.encode_entry(number, term, position, bytes(body))
        framed.entries.append(dl.decode_entry_header(data, len(data) - size))
        framed.moved[offset] = position + dl.BODY_OFFSET
        position += size
    home = root / f"dledger-{self_id}"
    write_files(home / dl.DATA_DIR, start, bytes(data), file_size)
    units = b"".join(
        dl.encode_index_unit(dl.IndexUnit(e.magic, e.pos, e.size, e.index, e.term))
        for e in framed.entries
    )
    write_files(home / dl.INDEX_DIR, 0, units, dl.INDEX_UNIT_SIZE * 1024)
    last = len(framed.entries) - 1
    (home / dl.CHECKPOINT_FILE).write_text(
        "#Thu Nov 26 17:00:00 UTC 2026\n"
        f"endIndex={last}\ncommittedIndex={last if committed is None else committed}\n",
        encoding="latin-1",
    )
    move_queue_units(root / "consumequeue", framed.moved)
    move_index_entries(root / "index", framed.moved, hash_slot_num)
    return framed


def cut_plain_log(commitlog: Path, end: int, file_size: int) -> None:
    """Keep the plain log up to ``end``, ended by a CommitLog blank in its file."""
    for path in sorted(commitlog.iterdir()):
        start = int(path.name)
        if start >= end:
            path.unlink()
        elif start + file_size > end:
            with open(path, "r+b") as f:
                f.seek(end - start)
                remaining = file_size - (end - start)
                f.write(struct.pack(">ii", remaining, rec.BLANK_MAGIC) + bytes(remaining - 8))


def write_files(directory: Path, start: int, data: bytes, file_size: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for first in range(0, max(len(data), 1), file_size):
        chunk = data[first : first + file_size]
        name = offset_to_file_name(start + first)
        (directory / name).write_bytes(chunk + bytes(file_size - len(chunk)))


def move_queue_units(base: Path, moved: dict[int, int]) -> None:
    for path in sorted(base.rglob("*")):
        if not path.is_file():
            continue
        data = bytearray(path.read_bytes())
        for at in range(0, len(data) - 19, 20):
            offset = _LONG.unpack_from(data, at)[0]
            if offset in moved and data[at : at + 20] != bytes(20):
                _LONG.pack_into(data, at, moved[offset])
        path.write_bytes(bytes(data))


def move_index_entries(base: Path, moved: dict[int, int], hash_slot_num: int) -> None:
    for path in sorted(base.iterdir()):
        data = bytearray(path.read_bytes())
        begin_ts, end_ts, begin, end, slots, count = index_layout._HEADER.unpack_from(data, 0)
        index_layout._HEADER.pack_into(
            data, 0, begin_ts, end_ts, moved.get(begin, begin), moved.get(end, end), slots, count
        )
        for number in range(1, count):
            at = index_layout.HEADER_SIZE + hash_slot_num * index_layout.SLOT_SIZE + number * 20
            offset = _LONG.unpack_from(data, at + 4)[0]
            _LONG.pack_into(data, at + 4, moved.get(offset, offset))
        path.write_bytes(bytes(data))
        os.utime(path)
