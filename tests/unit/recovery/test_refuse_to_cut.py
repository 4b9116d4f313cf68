"""``StoreConfig.cut_damaged_commitlog=False``: recovery refuses to cut readable records.

RocketMQ's recovery (our default) cuts the CommitLog at the first bad record, losing the
valid records after it. With the switch off, a writer's open raises CorruptDataError
instead, naming the damage and the first readable record, and leaves the CommitLog as it
was; a torn tail (the usual crash), after which nothing readable follows, is still cut.
"""

from __future__ import annotations

import hashlib
import random
import shutil
import struct
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from rocketstore import CorruptDataError, Message, MessageStore, StoreConfig

FILE_SIZE = 16 * 1024
COUNT = 300  # four or five files
POS_MAGIC = 4
POS_PHYSICALOFFSET = 28
POS_BODY = 88


def _config(**changes: object) -> StoreConfig:
    return StoreConfig(
        mapped_file_size_commit_log=FILE_SIZE, max_hash_slot_num=16, max_index_num=64
    ).replace(**changes)


STRICT = _config(cut_damaged_commitlog=False)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[tuple[int, int]]]:
    """A cleanly closed store and its records as (offset, size)."""
    root = tmp_path_factory.mktemp("refuse") / "store"
    records = []
    with MessageStore.open(root, _config()) as store:
        for n in range(COUNT):
            body = b"body-%d-" % n + random.Random(n).randbytes(n % 300)
            message = Message("T", body, queue_id=n % 2, properties={"KEYS": f"k{n}"})
            result = store.put(message, store_timestamp=1_700_000_000_000 + n)
            assert result.ok
            records.append((result.commit_log_offset, result.size))
    assert len(list((root / "commitlog").iterdir())) >= 4
    return root, records


@pytest.fixture
def root(template: tuple[Path, list[tuple[int, int]]], tmp_path: Path) -> Path:
    copy = tmp_path / "store"
    shutil.copytree(template[0], copy)
    return copy


def _file(root: Path, offset: int) -> Path:
    return root / "commitlog" / f"{offset - offset % FILE_SIZE:020d}"


def _patch(root: Path, offset: int, change: Callable[[bytearray], None]) -> None:
    path = _file(root, offset)
    data = bytearray(path.read_bytes())
    view = data[offset % FILE_SIZE :]
    change(view)
    data[offset % FILE_SIZE :] = view
    path.write_bytes(bytes(data))


def _digest(root: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted((root / "commitlog").iterdir())
    }


def _middle_of(records: list[tuple[int, int]], file_number: int) -> tuple[int, int]:
    """A record near the middle of CommitLog file ``file_number`` and the next one's offset."""
    file_number += records[-1][0] // FILE_SIZE + 1
    inside = [r for r in records if r[0] // FILE_SIZE == file_number]
    victim = inside[len(inside) // 2]
    return victim[0], victim[0] + victim[1]


def _flip(position: int, mask: int = 0xFF) -> Callable[[bytearray], None]:
    def change(view: bytearray) -> None:
        view[position] ^= mask

    return change


def _zero(start: int, length: int) -> Callable[[bytearray], None]:
    def change(view: bytearray) -> None:
        view[start : start + length] = bytes(len(view[start : start + length]))

    return change


# Damage with readable records after it: (file of the damaged record, counted from the
# end: -1 is the last, -3 the first that recovery after a clean close looks at; change;
# reason).
REFUSED: dict[str, tuple[int, Callable[[bytearray], None], str]] = {
    "body_byte_in_the_middle_file": (-2, _flip(POS_BODY + 3), "body CRC mismatch"),
    "magic_byte_in_the_last_file": (-1, _flip(POS_MAGIC + 1, 0x10), "illegal magic"),
    "zeroed_totalsize_in_the_third_last_file": (-3, _zero(0, 4), "record"),
    "physical_offset_in_the_middle_file": (-2, _flip(POS_PHYSICALOFFSET + 6, 1), "stale record"),
    "whole_header_zeroed": (-2, _zero(0, 8), "zeros where"),
    "a_zeroed_page_in_the_last_file": (-1, _zero(0, 1000), "zeros where"),
}


@pytest.mark.parametrize("abnormal", [False, True], ids=["normal", "abnormal"])
@pytest.mark.parametrize("damage", sorted(REFUSED))
def test_damage_before_readable_records_is_refused_and_left_alone(
    template: tuple[Path, list[tuple[int, int]]], root: Path, damage: str, abnormal: bool
) -> None:
    file_number, change, reason = REFUSED[damage]
    offset, following = _middle_of(template[1], file_number)
    _patch(root, offset, change)
    if abnormal:
        (root / "abort").touch()
    before = _digest(root)

    with pytest.raises(CorruptDataError) as refused:
        MessageStore.open(root, STRICT)

    message = str(refused.value)
    assert f"the CommitLog is damaged at offset {offset} (" in message
    assert reason in message
    # The first readable record: the next one, or the first after the zeroed range.
    records = template[1]
    expected = following
    if damage == "a_zeroed_page_in_the_last_file":
        expected = next(o for o, _ in records if o >= offset + 1000)
    assert f"a readable record follows at offset {expected}:" in message
    assert f"rocketstore dump --from {expected}" in message
    assert ("checkCRCOnRecover=false" in message) == (reason == "body CRC mismatch")
    assert _digest(root) == before
    assert (root / "abort").exists() == abnormal

    # The lock was released; RocketMQ's behaviour (the default) cuts there.
    with MessageStore.open(root, _config()) as store:
        assert store.recovery_report.commit_log_end == offset
        assert store.max_commit_log_offset() == offset


TORN: dict[str, Callable[[int, int], Callable[[bytearray], None]]] = {
    # (offset of the last record, its size) -> the change at that offset
    "cut_mid_body": lambda at, size: _zero(POS_BODY + 2, FILE_SIZE),
    "cut_mid_header": lambda at, size: _zero(20, FILE_SIZE),
    "garbage_after_the_last_record": lambda at, size: _garbage(size, fake_header=False),
    "fake_header_after_the_last_record": lambda at, size: _garbage(size, fake_header=True),
    "stale_copy_after_the_last_record": lambda at, size: _stale_copy(size),
    "intact": lambda at, size: lambda view: None,
}


def _garbage(size: int, *, fake_header: bool) -> Callable[[bytearray], None]:
    def change(view: bytearray) -> None:
        noise = bytearray(random.Random(size).randbytes(300))
        if fake_header:
            noise[:8] = struct.pack(">ii", 200, -626843481)  # a size and the magic
        view[size : size + 300] = noise

    return change


def _stale_copy(size: int) -> Callable[[bytearray], None]:
    """The last record copied after itself: intact, but its PHYSICALOFFSET is not its
    position (an earlier life of the file), so it is no readable record."""

    def change(view: bytearray) -> None:
        view[size : 2 * size] = view[:size]

    return change


@pytest.mark.parametrize("abnormal", [False, True], ids=["normal", "abnormal"])
@pytest.mark.parametrize("damage", sorted(TORN))
def test_a_torn_or_dirty_tail_is_still_cut(
    template: tuple[Path, list[tuple[int, int]]], root: Path, damage: str, abnormal: bool
) -> None:
    """After the last record nothing readable follows: strict recovery does what the
    default does."""
    last, size = template[1][-1]
    _patch(root, last, TORN[damage](last, size))
    if abnormal:
        (root / "abort").touch()
    torn = damage.startswith("cut_")
    with MessageStore.open(root, STRICT) as store:
        assert store.max_commit_log_offset() == (last if torn else last + size)
        assert store.max_offset("T", (COUNT - 1) % 2) == COUNT // 2 - (1 if torn else 0)
        assert store.put(Message("T", b"after")).ok


def test_records_left_behind_by_rocketmqs_own_cut_are_not_live(
    template: tuple[Path, list[tuple[int, int]]], root: Path
) -> None:
    """RocketMQ's recovery moves the write position back without zeroing: after it cut
    at a record and wrote a shorter one there, the old records after it are still whole,
    at their own offsets, but stored before the new one. They are no reason to refuse."""
    records = template[1]
    offset, _following = _middle_of(records, -1)
    with MessageStore.open(template[0], _config(), read_only=True) as store:
        old = store.look_message(offset)
    assert old is not None
    path = _file(root, offset)
    data = bytearray(path.read_bytes())
    position = offset % FILE_SIZE
    # What RocketMQ would leave: a new, shorter record at `offset` (the old bytes after
    # it kept), written later than everything before it.
    with MessageStore.open(root / "scratch", _config()) as scratch:
        scratch.put(Message("T", b"new"), store_timestamp=old.store_timestamp + 10_000)
    fresh = bytearray((root / "scratch" / "commitlog" / f"{0:020d}").read_bytes())
    size = struct.unpack_from(">i", fresh, 0)[0]
    record = fresh[:size]
    struct.pack_into(">q", record, POS_PHYSICALOFFSET, offset)
    struct.pack_into(">q", record, 20, 0)  # QUEUEOFFSET: T-0's next is not checked here
    struct.pack_into(">i", record, 8, zlib.crc32(b"new") & 0x7FFFFFFF)
    data[position : position + size] = record
    data[position + size : position + size + 8] = bytes(8)  # no record starts right after
    path.write_bytes(bytes(data))
    with MessageStore.open(root, STRICT) as store:
        assert store.recovery_report.commit_log_end == offset + size


@pytest.mark.parametrize("abnormal", [False, True], ids=["normal", "abnormal"])
def test_a_batch_whose_first_size_never_went_in_is_a_torn_tail(
    tmp_path: Path, abnormal: bool
) -> None:
    """SYNC_FLUSH writes a batch's records, then its first TOTALSIZE: a kill in between
    leaves that size zero and the batch's other records whole after it, all of one store
    time. They were never acknowledged: strict recovery cuts them like any torn tail, but
    a zeroed size followed by records of later times is damage and is refused."""
    root = tmp_path / "store"
    with MessageStore.open(root, _config()) as store:
        for n in range(30):
            assert store.put(Message("T", b"m%d" % n), store_timestamp=1000 + n).ok
        batch = store.put_batch([Message("T", b"b%d" % n) for n in range(4)], store_timestamp=5000)
    first = batch[0].commit_log_offset
    _patch(root, first, _zero(0, 4))
    if abnormal:
        (root / "abort").touch()
    damaged = tmp_path / "damaged"
    shutil.copytree(root, damaged)
    with MessageStore.open(root, STRICT) as store:
        assert store.max_commit_log_offset() == first
        assert store.max_offset("T", 0) == 30
    # The same zeroed size with one more record, of a later time, after the batch.
    with MessageStore.open(tmp_path / "later", _config()) as other:
        other.put(Message("T", b"x"), store_timestamp=9000)
    later_record = (tmp_path / "later" / "commitlog" / f"{0:020d}").read_bytes()
    size = struct.unpack_from(">i", later_record, 0)[0]
    record = bytearray(later_record[:size])
    after = batch[-1].commit_log_offset + batch[-1].size
    struct.pack_into(">q", record, POS_PHYSICALOFFSET, after)
    _patch(damaged, after, lambda view: view.__setitem__(slice(0, size), record))
    with pytest.raises(
        CorruptDataError, match=f"a readable record follows at offset {batch[1].commit_log_offset}"
    ):
        MessageStore.open(damaged, STRICT)
