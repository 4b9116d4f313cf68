"""MappedFileQueue and MappedFile, after RocketMQ's MappedFileQueueTest and MappedFileTest
(spec section 11): file rolling, lookup by offset, flushing file by file, truncation."""

from __future__ import annotations

import os
import struct

import pytest

from rocketstore.errors import CorruptDataError, FileRemovedError, StoreError
from rocketstore.files.mapped_file import PAGE_SIZE, MappedFile
from rocketstore.files.mapped_file_queue import MappedFileQueue, detect_file_size

FILE_SIZE = 1024


def _queue(tmp_path, file_size: int = FILE_SIZE) -> MappedFileQueue:
    return MappedFileQueue(str(tmp_path / "queue"), file_size, writable=True)


def _append_many(queue: MappedFileQueue, chunk: bytes, count: int, start: int = 0) -> None:
    for _ in range(count):
        mapped = queue.last_file_for_write(start)
        assert mapped.free_bytes >= len(chunk)
        mapped.append(chunk)


def _names(queue: MappedFileQueue) -> list[str]:
    return sorted(os.listdir(queue.directory))


# --- MappedFileQueueTest --------------------------------------------------------------------


def test_get_last_mapped_file_rolls_to_new_files(tmp_path):
    queue = _queue(tmp_path)
    chunk = b"0123456789abcdef"  # 16 bytes: 64 per file
    _append_many(queue, chunk, 1024)

    assert len(queue.files) == 16
    assert [f.file_from_offset for f in queue.files] == [i * FILE_SIZE for i in range(16)]
    assert _names(queue) == [f"{i * FILE_SIZE:020d}" for i in range(16)]
    assert all(f.is_full for f in queue.files)
    assert queue.max_offset() == 16 * FILE_SIZE
    assert queue.min_offset() == 0
    queue.close()


def test_last_file_for_write_reuses_a_file_with_room(tmp_path):
    queue = _queue(tmp_path)
    first = queue.last_file_for_write(0)
    first.append(b"x" * 10)
    assert queue.last_file_for_write(0) is first
    first.append(b"y" * (FILE_SIZE - 10))
    second = queue.last_file_for_write(0)
    assert second is not first
    assert second.file_from_offset == FILE_SIZE
    queue.close()


def test_find_mapped_file_by_offset(tmp_path):
    queue = _queue(tmp_path)
    _append_many(queue, b"abcd", 1024)  # 4 files

    assert len(queue.files) == 4
    assert queue.mapped_memory_size() == 4 * FILE_SIZE
    for offset, start in [(0, 0), (100, 0), (1024, 1024), (1124, 1024), (2048, 2048)]:
        found = queue.find(offset)
        assert found is not None
        assert found.file_from_offset == start
    assert (found := queue.find(2148)) is not None and found.file_from_offset == 2048
    assert (found := queue.find(4095)) is not None and found.file_from_offset == 3072
    assert queue.find(4096) is None
    assert queue.find(4196) is None
    assert queue.find(-1) is None
    queue.close()


def test_find_mapped_file_when_start_offset_is_not_zero(tmp_path):
    queue = _queue(tmp_path)
    first = queue.last_file_for_write(1024 + 200)  # the first file starts at its boundary
    first.append(b"z" * 16)

    assert first.file_from_offset == 1024
    assert queue.find(1025) is first
    assert queue.find(0) is None
    assert queue.find(123) is None
    assert queue.find(123, return_first_if_not_found=True) is first
    assert queue.find(0, return_first_if_not_found=True) is first
    assert queue.find(2048) is None
    assert queue.min_offset() == 1024
    assert queue.max_offset() == 1024 + 16
    queue.close()


def test_find_falls_back_to_a_scan_when_the_list_is_out_of_order(tmp_path):
    queue = _queue(tmp_path)
    _append_many(queue, b"q" * 64, 48)  # three full files at 0 / 1024 / 2048
    assert len(queue.files) == 3
    queue.files[1], queue.files[2] = queue.files[2], queue.files[1]

    found = queue.find(1028)
    assert found is not None
    assert found.file_from_offset == 1024
    queue.close()


def test_flush_moves_flushed_where_one_file_per_call(tmp_path):
    queue = _queue(tmp_path)
    _append_many(queue, b"0123456789abcdef", 1024)  # 16 full files

    for i in range(1, 7):
        assert queue.flush(0) is False  # something moved
        assert queue.flushed_where == i * FILE_SIZE
    queue.close()


def test_flush_returns_true_when_nothing_moves(tmp_path):
    queue = _queue(tmp_path)
    assert queue.flush(0) is True  # no files at all
    queue.last_file_for_write(0).append(b"a" * 100)
    assert queue.flush(0) is False
    assert queue.flushed_where == 100
    assert queue.flush(0) is True
    assert queue.flushed_where == 100
    queue.close()


def test_flush_all_reaches_the_max_offset(tmp_path):
    queue = _queue(tmp_path)
    _append_many(queue, b"0123456789abcdef", 100)  # 1600 bytes, two files
    queue.flush_all()
    assert queue.flushed_where == 1600
    assert [f.flushed_position for f in queue.files] == [FILE_SIZE, 1600 - FILE_SIZE]
    queue.close()


def test_mapped_memory_size(tmp_path):
    queue = _queue(tmp_path)
    assert queue.mapped_memory_size() == 0
    _append_many(queue, b"abcd", 1024)
    assert queue.mapped_memory_size() == 4 * FILE_SIZE
    queue.close()


def test_truncate_dirty_files_keeps_the_file_holding_the_offset(tmp_path):
    queue = _queue(tmp_path)
    _append_many(queue, b"0123456789abcdef", 160)  # 2560 bytes: files 0, 1024, 2048
    queue.flush_all()

    queue.truncate_dirty_files(1500)

    assert [f.file_from_offset for f in queue.files] == [0, 1024]
    assert _names(queue) == [f"{0:020d}", f"{1024:020d}"]  # the third file is deleted
    assert queue.files[0].wrote_position == FILE_SIZE
    assert queue.files[1].wrote_position == 1500 - 1024
    assert queue.files[1].flushed_position == 1500 - 1024
    assert queue.max_offset() == 1500
    assert queue.flushed_where == 1500
    # The next write continues at the truncation point.
    assert queue.last_file_for_write(0) is queue.files[1]
    queue.close()


def test_truncate_dirty_files_at_a_file_boundary_empties_that_file(tmp_path):
    queue = _queue(tmp_path)
    _append_many(queue, b"0123456789abcdef", 160)

    queue.truncate_dirty_files(1024)

    # As RocketMQ: the file starting at the offset stays (empty), later ones go.
    assert [f.file_from_offset for f in queue.files] == [0, 1024]
    assert queue.files[1].wrote_position == 0
    assert queue.max_offset() == 1024
    assert _names(queue) == [f"{0:020d}", f"{1024:020d}"]
    queue.close()


def test_load_maps_files_as_full_and_sorted(tmp_path):
    queue = _queue(tmp_path)
    _append_many(queue, b"0123456789abcdef", 100)
    queue.close()

    again = _queue(tmp_path)
    again.load()
    assert [f.file_from_offset for f in again.files] == [0, 1024]
    assert all(f.wrote_position == FILE_SIZE for f in again.files)
    assert detect_file_size(again.directory) == FILE_SIZE
    assert (found := again.find(1500)) is not None
    assert found.read(0, 16) == b"0123456789abcdef"
    again.close()


def test_delete_first_and_last(tmp_path):
    queue = _queue(tmp_path)
    _append_many(queue, b"q" * 64, 48)
    queue.delete_first()
    assert queue.min_offset() == 1024
    queue.delete_last()
    assert [f.file_from_offset for f in queue.files] == [1024]
    assert _names(queue) == [f"{1024:020d}"]
    queue.close()


# --- MappedFileTest -------------------------------------------------------------------------


def _mapped(tmp_path, size: int = 64 * 1024, name: str = "00000000000000000000") -> MappedFile:
    return MappedFile(str(tmp_path / name), size, writable=True, create=True)


def test_mapped_file_is_pre_sized_and_named_by_offset(tmp_path):
    mapped = _mapped(tmp_path, name=f"{4096:020d}")
    assert os.path.getsize(mapped.path) == 64 * 1024
    assert mapped.file_from_offset == 4096
    assert mapped.wrote_position == 0
    assert mapped.free_bytes == 64 * 1024
    mapped.close()


def test_mapped_file_append_and_read(tmp_path):
    mapped = _mapped(tmp_path)
    text = b"Once, there was a chance for me!"
    assert len(text) == 32

    assert mapped.append(text) == 0
    assert mapped.append(b"more") == 32
    assert mapped.wrote_position == 36
    assert mapped.read(0, 32) == text
    assert mapped.read(32, 4) == b"more"
    # Reads are clipped at the file end.
    assert mapped.read(64 * 1024 - 2, 10) == b"\0\0"
    # The bytes are in the file itself.
    with open(mapped.path, "rb") as f:
        assert f.read(36) == text + b"more"
    mapped.close()


def test_mapped_file_refuses_an_append_past_its_end(tmp_path):
    mapped = _mapped(tmp_path, size=128)
    mapped.append(b"a" * 120)
    with pytest.raises(StoreError, match="past the file end"):
        mapped.append(b"b" * 9)
    assert mapped.wrote_position == 120
    mapped.append(b"b" * 8)
    assert mapped.is_full
    mapped.close()


def test_mapped_file_write_at_overwrites_in_place(tmp_path):
    mapped = _mapped(tmp_path, size=128)
    mapped.append(b"abcdefgh")
    mapped.write_at(2, b"XY")
    assert mapped.read(0, 8) == b"abXYefgh"
    assert mapped.wrote_position == 8
    mapped.close()


def test_mapped_file_flush_respects_least_pages(tmp_path):
    mapped = _mapped(tmp_path)
    mapped.append(b"a" * 100)
    assert mapped.flush(1) == 0  # less than a page dirty
    assert mapped.flush(0) == 100
    mapped.append(b"b" * PAGE_SIZE)
    assert mapped.flush(2) == 100  # one page boundary crossed, two asked
    assert mapped.flush(1) == 100 + PAGE_SIZE
    mapped.close()


def test_full_mapped_file_is_always_flushable(tmp_path):
    mapped = _mapped(tmp_path, size=1024)
    mapped.append(b"c" * 1024)
    assert mapped.flush(4) == 1024
    mapped.close()


def test_mapped_file_hold_release_and_destroy(tmp_path):
    mapped = _mapped(tmp_path)
    mapped.append(b"Once, there was a chance for me!")

    assert mapped.hold() is True
    assert mapped.in_use
    assert mapped.read(0, 32) == b"Once, there was a chance for me!"
    mapped.release()
    assert not mapped.in_use
    mapped.release()  # an extra release never goes negative
    assert not mapped.in_use

    mapped.destroy()
    assert not os.path.exists(mapped.path)
    assert mapped.hold() is False  # unavailable once destroyed
    with pytest.raises(StoreError, match="closed"):
        mapped.read(0, 1)


def test_a_held_file_stays_mapped_after_destroy_until_released(tmp_path):
    """MappedFileTest.testSelectMappedBuffer: a destroyed file is unavailable to new readers
    at once, but is unmapped only when the reader holding it lets go."""
    mapped = _mapped(tmp_path)
    mapped.append(b"Once, there was a chance for me!")
    assert mapped.hold()

    mapped.destroy()
    assert not os.path.exists(mapped.path)
    assert not mapped.available
    assert mapped.hold() is False
    assert mapped.read_held(0, 4) is None  # a new reader sees it as removed
    assert mapped.read(0, 32) == b"Once, there was a chance for me!"  # the holder still reads

    mapped.release()
    with pytest.raises(FileRemovedError):
        mapped.read(0, 1)


def test_retire_refuses_new_readers_and_reports_holders(tmp_path):
    mapped = _mapped(tmp_path)
    mapped.append(b"abcd")
    assert mapped.read_held(0, 4) == b"abcd"
    assert mapped.hold()
    assert mapped.retire() is False  # still held
    assert mapped.read_held(0, 4) is None
    mapped.release()
    assert mapped.retire() is True
    assert os.path.exists(mapped.path)  # retiring deletes nothing by itself
    mapped.destroy()
    assert not os.path.exists(mapped.path)


def test_copy_out_reads_without_a_reference_and_sees_a_closed_file_as_gone(tmp_path):
    mapped = _mapped(tmp_path)
    mapped.append(b"abcd")
    assert mapped.copy_out(0, 4) == b"abcd"
    assert mapped.copy_out(mapped.file_size - 2, 10) == b"\0\0"  # clipped at the file end
    assert not mapped.in_use  # no reference was taken
    assert mapped.retire() is True
    assert mapped.copy_out(0, 4) is None  # retired: new readers see it as removed
    mapped.destroy()
    assert mapped.copy_out(0, 4) is None


def test_read_only_mapped_file_cannot_be_created(tmp_path):
    with pytest.raises(StoreError, match="read-only"):
        MappedFile(str(tmp_path / f"{0:020d}"), 1024, writable=False, create=True)


def test_mapped_file_of_the_wrong_size_is_rejected(tmp_path):
    path = tmp_path / f"{0:020d}"
    path.write_bytes(b"\0" * 100)
    with pytest.raises(CorruptDataError, match="expected 1024"):
        MappedFile(str(path), 1024, writable=True)


# --- the spare file (RocketMQ's AllocateMappedFileService) ---------------------------------


def test_the_roll_takes_the_spare_made_ahead(tmp_path):
    queue = _queue(tmp_path)
    first = queue.prepare_next(0)
    assert queue.prepare_next(0) is first  # made once
    assert queue.files == [] and queue.spare is first
    assert queue.last_file_for_write(0) is first
    assert queue.spare is None
    first.append(b"x" * FILE_SIZE)
    second = queue.prepare_next(0)
    assert second.file_from_offset == FILE_SIZE
    assert _names(queue) == [f"{0:020d}", f"{FILE_SIZE:020d}"]
    assert queue.last_file_for_write(0) is second
    assert queue.max_offset() == FILE_SIZE
    queue.close()


def test_a_spare_for_another_offset_is_replaced(tmp_path):
    queue = _queue(tmp_path)
    stale = queue.prepare_next(5 * FILE_SIZE)
    assert stale.file_from_offset == 5 * FILE_SIZE
    fresh = queue.last_file_for_write(0)  # the queue starts at 0 after all
    assert fresh is not stale and fresh.file_from_offset == 0
    assert _names(queue) == [f"{0:020d}"]
    queue.close()


def test_close_deletes_the_spare_and_a_directory_made_for_it(tmp_path):
    queue = _queue(tmp_path)
    queue.prepare_next(0)
    assert _names(queue) == [f"{0:020d}"]
    queue.close()
    assert not os.path.exists(queue.directory)  # opened and closed without data: no trace

    queue = _queue(tmp_path)
    queue.last_file_for_write(0).append(b"data")
    queue.prepare_next(0)
    queue.close()
    assert _names(queue) == [f"{0:020d}"]


def test_truncation_drops_the_spare(tmp_path):
    queue = _queue(tmp_path)
    _append_many(queue, b"y" * 16, 100)  # two files, the second part-filled
    queue.prepare_next(0)
    assert len(_names(queue)) == 3
    queue.truncate_dirty_files(100)
    assert queue.spare is None
    assert _names(queue) == [f"{0:020d}"]
    queue.close()


def test_a_read_only_queue_makes_no_spare(tmp_path):
    queue = MappedFileQueue(str(tmp_path / "queue"), FILE_SIZE, writable=False)
    with pytest.raises(StoreError, match="read-only"):
        queue.prepare_next(0)
    assert not os.path.exists(queue.directory)


# --- read-around ----------------------------------------------------------------------------


def _vm_flags(path: str) -> list[str] | None:
    """The VmFlags of this process's mapping of ``path`` (Linux's /proc/self/smaps)."""
    try:
        with open("/proc/self/smaps") as smaps:
            lines = smaps.read().splitlines()
    except OSError:
        return None
    in_mapping = False
    for line in lines:
        head = line.split()
        if head and "-" in head[0] and len(head) >= 5:  # a mapping's first line
            in_mapping = line.endswith(" " + path)
        elif in_mapping and line.startswith("VmFlags:"):
            return line.split()[1:]
    return None


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="Linux /proc needed")
@pytest.mark.parametrize("read_around", [True, False])
def test_a_queue_without_read_around_advises_each_new_file(tmp_path, read_around: bool):
    queue = MappedFileQueue(
        str(tmp_path / "queue"), 64 * PAGE_SIZE, writable=True, read_around=read_around
    )
    try:
        first = queue.last_file_for_write(0)
        first.append(b"x" * (64 * PAGE_SIZE))
        second = queue.last_file_for_write(0)
        for mapped in (first, second):
            flags = _vm_flags(mapped.path)
            assert flags is not None, f"{mapped.path} is not mapped"
            assert ("rr" in flags) is not read_around  # rr: MADV_RANDOM, no read-around
        assert bytes(second.mm[:16]) == bytes(16)  # the advice changes no bytes
    finally:
        queue.close()


def test_a_buffer_call_gets_no_mapping_of_a_retired_file_and_keeps_the_one_it_has(tmp_path):
    path = str(tmp_path / f"{0:020d}")
    mapped = MappedFile(path, PAGE_SIZE, writable=True, create=True)
    mapped.append(b"abc")
    mm = mapped.mapping_for_buffer_call()
    assert mm is not None and bytes(mm[:3]) == b"abc"
    assert mapped.unpack_at(struct.Struct(">H"), 1) == (0x6263,)  # "bc", read in place
    view = memoryview(mm)  # a C call holding the buffer while another thread closes it
    mapped.close()
    assert mapped.mapping_for_buffer_call() is None  # no new reader of a retired file
    assert bytes(view[:3]) == b"abc"  # the close left the mapping to its holder
    view.release()

    held = MappedFile(path, PAGE_SIZE, writable=False)
    assert held.hold()
    held.close()  # retired while a reader holds it: still mapped, but not for new readers
    assert held.mapping_for_buffer_call() is None
    assert held.unpack_at(struct.Struct(">H"), 1) is None
    assert held.read(0, 3) == b"abc"
    held.release()


# --- several directories (MultiPathMappedFileQueueTest) --------------------------------------


def _spread(tmp_path, names: list[str], **kwargs) -> MappedFileQueue:
    dirs = [str(tmp_path / n) for n in names]
    return MappedFileQueue(
        dirs[0],
        FILE_SIZE,
        writable=True,
        also_read=dirs,
        place=lambda offset: dirs[(offset // FILE_SIZE) % len(dirs)],
        **kwargs,
    )


def test_files_go_where_place_says_and_load_back_in_offset_order(tmp_path):
    queue = _spread(tmp_path, ["a", "b", "c"])
    _append_many(queue, b"x" * 256, 4 * 5)  # five files
    assert [os.path.relpath(f.path, tmp_path) for f in queue.files] == [
        f"{'abcab'[i]}/{i * FILE_SIZE:020d}" for i in range(5)
    ]
    queue.close()
    again = _spread(tmp_path, ["a", "b", "c"])
    again.load()
    assert [f.file_from_offset for f in again.files] == [i * FILE_SIZE for i in range(5)]
    assert (found := again.find(3 * FILE_SIZE + 5)) is not None
    assert found.path == str(tmp_path / "a" / f"{3 * FILE_SIZE:020d}")
    assert detect_file_size(again.directories) == FILE_SIZE
    again.destroy()
    assert not any(os.path.exists(tmp_path / n) for n in "abc")


def test_a_spare_goes_where_its_file_will_be(tmp_path):
    queue = _spread(tmp_path, ["a", "b"])
    _append_many(queue, b"x" * 256, 3)
    spare = queue.prepare_next()
    assert spare.path == str(tmp_path / "b" / f"{FILE_SIZE:020d}")
    queue.close()  # deletes the spare and the directory made for it alone
    assert not os.path.exists(tmp_path / "b")
    again = _spread(tmp_path / "second", ["a", "b"])
    _append_many(again, b"x" * 256, 3)
    spare = again.prepare_next()
    _append_many(again, b"x" * 256, 1)  # the first file is full now
    assert again.last_file_for_write() is spare  # the roll takes it as it is
    assert spare.path == str(tmp_path / "second" / "b" / f"{FILE_SIZE:020d}")
    again.close()


def test_the_same_file_name_in_two_directories_is_refused(tmp_path):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / f"{0:020d}").write_bytes(bytes(FILE_SIZE))
    queue = _spread(tmp_path, ["a", "b"])
    with pytest.raises(CorruptDataError, match="two files for offset 0"):
        queue.load()


def test_a_reader_sees_files_added_in_any_directory(tmp_path):
    writer = _spread(tmp_path, ["a", "b"])
    _append_many(writer, b"x" * 256, 4)
    reader = MappedFileQueue(
        str(tmp_path / "a"), FILE_SIZE, writable=False, also_read=[str(tmp_path / "b")]
    )
    reader.load()
    assert len(reader.files) == 1
    _append_many(writer, b"y" * 256, 8)
    reader.refresh()
    assert [os.path.basename(os.path.dirname(f.path)) for f in reader.files] == ["a", "b", "a"]
    reader.close()
    writer.close()
