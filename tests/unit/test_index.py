"""IndexFile and IndexService, after RocketMQ's IndexFileTest plus the index rules of spec
section 4 (header, numbering from 1, slot chains, rollover, ROLLBACK and dedup)."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore import index as index_module
from rocketstore import index_chain
from rocketstore import index_file as index_file_module
from rocketstore.errors import ConfigError, StoreError
from rocketstore.format import index_layout as layout
from rocketstore.format import native as native_registry
from rocketstore.format import sysflag
from rocketstore.index import DispatchedKeys, IndexFile, IndexService
from rocketstore.index_chain import EntryPoint, RunChainer, write_blocks

BASE_MS = 1_700_000_000_000
LONG_MAX = 2**63 - 1


def _java_hash(text: str) -> int:
    """String.hashCode for ASCII text, written out independently of the package."""
    h = 0
    for char in text:
        h = (31 * h + ord(char)) & 0xFFFFFFFF
    return h - 2**32 if h & 0x80000000 else h


def _key_hash(text: str) -> int:
    h = _java_hash(text)
    return 0 if h == -(2**31) else abs(h)


def _new_file(tmp_path, slots: int = 100, number: int = 400) -> IndexFile:
    return IndexFile(str(tmp_path / "100"), slots, number, writable=True, create=True)


def _file_bytes(index_file: IndexFile) -> bytes:
    with open(index_file.path, "rb") as f:
        return f.read()


def _fill(index_file: IndexFile, count: int = 399) -> list[bool]:
    return [index_file.put_key(str(i), i, BASE_MS + 1000 * i) for i in range(count)]


# --- IndexFileTest --------------------------------------------------------------------------


def test_put_key_until_full(tmp_path):
    index_file = _new_file(tmp_path)
    assert os.path.getsize(index_file.path) == 40 + 100 * 4 + 400 * 20

    assert all(_fill(index_file))  # "0" .. "398": 399 entries
    assert index_file.is_write_full
    assert index_file.put_key("400", 400, BASE_MS) is False
    assert index_file.entry_count == 399
    index_file.close()


def test_select_phy_offset_finds_exactly_one(tmp_path):
    index_file = _new_file(tmp_path)
    _fill(index_file)

    assert _key_hash("60") == 1722  # slot 22, shared with keys of other hashes
    found = index_file.select_phy_offsets("60", 10, 0, LONG_MAX)
    assert found == [60]
    index_file.close()


def test_select_phy_offset_of_an_absent_key_and_an_empty_file(tmp_path):
    index_file = _new_file(tmp_path)
    assert index_file.select_phy_offsets("60", 10, 0, LONG_MAX) == []
    _fill(index_file, 10)
    assert index_file.select_phy_offsets("nope", 10, 0, LONG_MAX) == []
    index_file.close()


def test_select_phy_offset_walks_the_chain_newest_first(tmp_path):
    index_file = _new_file(tmp_path)
    for i in range(5):
        assert index_file.put_key("same", 1000 + i, BASE_MS + 1000 * i)
    assert index_file.select_phy_offsets("same", 10, 0, LONG_MAX) == [1004, 1003, 1002, 1001, 1000]
    assert index_file.select_phy_offsets("same", 2, 0, LONG_MAX) == [1004, 1003]
    # Index time = begin + timeDiff * 1000; the window keeps entries 1..3 only.
    window = index_file.select_phy_offsets("same", 10, BASE_MS + 1000, BASE_MS + 3000)
    assert window == [1003, 1002, 1001]
    index_file.close()


def test_header_after_puts(tmp_path):
    index_file = _new_file(tmp_path)
    _fill(index_file)
    header = layout.decode_header(_file_bytes(index_file))

    expected_slots = len({_key_hash(str(i)) % 100 for i in range(399)})
    assert header.index_count == 399 + 1  # numbering starts at 1
    assert header.hash_slot_count == expected_slots
    assert header.begin_timestamp == BASE_MS
    assert header.end_timestamp == BASE_MS + 1000 * 398
    assert header.begin_phy_offset == 0
    assert header.end_phy_offset == 398
    index_file.close()


def test_header_after_first_put(tmp_path):
    index_file = _new_file(tmp_path)
    header = layout.decode_header(_file_bytes(index_file))
    assert header == layout.IndexHeader(0, 0, 0, 0, 0, 0)

    index_file.put_key("FooBar#Hello", 4242, BASE_MS + 7)
    header = layout.decode_header(_file_bytes(index_file))
    assert header == layout.IndexHeader(BASE_MS + 7, BASE_MS + 7, 4242, 4242, 1, 2)
    index_file.close()


def test_entries_and_slots_at_their_positions(tmp_path):
    index_file = _new_file(tmp_path)
    _fill(index_file)
    data = _file_bytes(index_file)

    newest_in_slot: dict[int, int] = {}
    for i in range(399):
        key = str(i)
        number = i + 1
        slot = _key_hash(key) % 100
        entry = layout.decode_entry(data, 40 + 100 * 4 + number * 20)
        assert entry == layout.IndexEntry(
            key_hash=_key_hash(key),
            phy_offset=i,
            time_diff=i,  # seconds since the first entry's store time
            prev_index=newest_in_slot.get(slot, 0),
        )
        newest_in_slot[slot] = number
    for slot in range(100):
        assert layout.decode_slot(data, 40 + 4 * slot) == newest_in_slot.get(slot, 0)
    # Entry 0 is never used.
    assert data[40 + 400 : 40 + 400 + 20] == bytes(20)
    index_file.close()


def test_time_diff_is_whole_seconds(tmp_path):
    index_file = _new_file(tmp_path)
    index_file.put_key("a", 1, BASE_MS)
    index_file.put_key("b", 2, BASE_MS + 1999)
    index_file.put_key("c", 3, BASE_MS - 5000)  # older than begin: clamped to 0
    data = _file_bytes(index_file)
    assert layout.decode_entry(data, layout.entry_position(100, 1)).time_diff == 0
    assert layout.decode_entry(data, layout.entry_position(100, 2)).time_diff == 1
    assert layout.decode_entry(data, layout.entry_position(100, 3)).time_diff == 0
    index_file.close()


def test_hash_of_min_value_key_goes_to_slot_zero(tmp_path):
    index_file = _new_file(tmp_path)
    assert _java_hash("polygenelubricants") == -(2**31)
    index_file.put_key("polygenelubricants", 77, BASE_MS)
    data = _file_bytes(index_file)
    assert layout.decode_slot(data, layout.slot_position(0)) == 1
    assert layout.decode_entry(data, layout.entry_position(100, 1)).key_hash == 0
    assert index_file.select_phy_offsets("polygenelubricants", 10, 0, LONG_MAX) == [77]
    index_file.close()


def test_index_file_reloads_its_header(tmp_path):
    index_file = _new_file(tmp_path)
    _fill(index_file, 50)
    index_file.flush()
    index_file.close()

    again = IndexFile(str(tmp_path / "100"), 100, 400, writable=False)
    assert again.index_count == 51
    assert again.end_phy_offset == 49
    assert again.select_phy_offsets("7", 10, 0, LONG_MAX) == [7]
    again.close()


# --- IndexService ---------------------------------------------------------------------------


def _record(offset: int, timestamp: int, *, keys=None, uniq=None, flag=0, topic="T"):
    return DispatchedKeys(
        topic=topic,
        commit_log_offset=offset,
        store_timestamp=timestamp,
        sys_flag=flag,
        uniq_key=uniq,
        keys=keys,
    )


def _service(tmp_path, slots: int = 4, number: int = 5) -> IndexService:
    return IndexService(str(tmp_path), slots, number, writable=True)


def test_service_indexes_uniq_key_then_each_key_token(tmp_path):
    service = _service(tmp_path, slots=16, number=64)
    service.build_index(_record(100, BASE_MS, keys="k1  k2", uniq="U1"))

    current = service.files[-1]
    assert current.entry_count == 3  # UNIQ_KEY, k1, k2 (the empty token is dropped)
    assert list(service.candidates("T#U1")) == [100]
    assert list(service.candidates("T#k1")) == [100]
    assert list(service.candidates("T#k2")) == [100]
    assert list(service.candidates("Other#k1")) == []
    service.close()


def test_service_creates_a_file_even_for_a_keyless_record(tmp_path):
    service = _service(tmp_path)
    service.build_index(_record(0, BASE_MS))
    assert len(service.files) == 1
    assert service.files[0].entry_count == 0
    service.close()


def test_rollover_inherits_end_offset_and_timestamp(tmp_path):
    service = _service(tmp_path, slots=4, number=5)  # 4 entries per file
    for i in range(4):
        service.build_index(_record(100 * i, BASE_MS + 1000 * i, keys=f"k{i}"))
    first = service.files[0]
    assert first.is_write_full
    assert len(service.files) == 1

    # The next dispatched record, keyless, creates the next file.
    service.build_index(_record(400, BASE_MS + 4000))
    assert len(service.files) == 2
    second = service.files[1]
    header = layout.decode_header(_file_bytes(second))
    assert header.begin_timestamp == header.end_timestamp == BASE_MS + 3000
    assert header.begin_phy_offset == header.end_phy_offset == 300
    assert header.hash_slot_count == 0
    assert header.index_count == 0  # stays 0 until the first put

    # The first entry's timeDiff is relative to the previous file's end time.
    service.build_index(_record(500, BASE_MS + 3000 + 5000, keys="k5"))
    data = _file_bytes(second)
    assert layout.decode_entry(data, layout.entry_position(4, 1)).time_diff == 5
    header = layout.decode_header(data)
    assert header.begin_timestamp == BASE_MS + 8000
    assert header.begin_phy_offset == 500
    assert header.index_count == 2

    # Queries span both files, newest file first.
    assert list(service.candidates("T#k0")) == [0]
    assert list(service.candidates("T#k5")) == [500]
    service.close()


def test_rollover_in_the_middle_of_one_records_keys(tmp_path):
    service = _service(tmp_path, slots=4, number=3)  # 2 entries per file
    service.build_index(_record(0, BASE_MS, keys="a b c d e"))
    assert [f.entry_count for f in service.files] == [2, 2, 1]
    for key in "abcde":
        assert list(service.candidates(f"T#{key}")) == [0]
    service.close()


def test_index_file_names_strictly_increase(tmp_path):
    service = _service(tmp_path, slots=2, number=2)  # one entry per file
    for i in range(6):
        service.build_index(_record(i, BASE_MS + i, keys=f"k{i}"))
    names = [f.name for f in service.files]
    assert len(names) == 6
    assert all(len(n) == 17 and n.isdigit() for n in names)
    assert names == sorted(names)
    assert len(set(names)) == len(names)
    assert sorted(os.listdir(service.directory)) == names
    service.close()


def _one_file_named(tmp_path, name: str) -> IndexService:
    """A loaded service over one full file (one entry a file) renamed ``name``."""
    service = _service(tmp_path, slots=2, number=2)
    service.build_index(_record(0, BASE_MS, keys="k0"))
    service.close()
    (only,) = os.listdir(service.directory)
    os.rename(os.path.join(service.directory, only), os.path.join(service.directory, name))
    service = _service(tmp_path, slots=2, number=2)
    service.load()
    return service


@pytest.mark.parametrize(
    ("last", "following"),
    [
        ("29991231235959999", "30000101000000000"),  # a clock far ahead: the next ms
        ("20991231235959998", "20991231235959999"),
    ],
)
def test_a_new_file_follows_a_last_name_ahead_of_the_clock(tmp_path, last, following):
    """A store from a machine whose clock ran fast: the next file is named for the
    moment right after the last name, at once (counting up to it, one ms at a time,
    never ended)."""
    service = _one_file_named(tmp_path, last)
    service.build_index(_record(1, BASE_MS + 1, keys="k1"))
    assert [f.name for f in service.files] == [last, following]
    assert list(service.candidates("T#k1")) == [1]
    service.close()


@pytest.mark.parametrize("last", ["9" * 17, "99991231235959999"])  # no time; the last ms
def test_a_last_name_no_time_can_follow_is_refused_with_a_way_out(tmp_path, last):
    service = _one_file_named(tmp_path, last)
    with pytest.raises(StoreError, match="named for no time a new file can follow"):
        service.build_index(_record(1, BASE_MS + 1, keys="k1"))
    service.close()


def _full_files_then_an_empty_one(tmp_path, records: int) -> IndexService:
    """Two entries a file, ``records`` keys at offsets 0, 100, ..., then the empty file a
    crash can leave after a roll."""
    service = _service(tmp_path, slots=2, number=3)
    for i in range(records):
        service.build_index(_record(100 * i, BASE_MS + i, keys=f"k{i}"))
    service.current_file()  # the last is full: a new, empty one
    assert [f.entry_count for f in service.files] == [2] * (records // 2) + [0]
    return service


def test_truncation_looks_past_an_empty_newest_file(tmp_path):
    """Recovery cut the CommitLog at 250: an empty newest file (made just before a
    crash) must not hide the entries past 250 in the file before it."""
    service = _full_files_then_an_empty_one(tmp_path, 4)
    assert service.truncate_from(250, lambda offset: BASE_MS) == 1
    assert [f.entry_count for f in service.files] == [2, 1]
    assert list(service.candidates("T#k3")) == []
    assert list(service.candidates("T#k2")) == [200]
    assert service.files[-1].end_phy_offset == 200
    service.close()


def test_truncation_past_everything_keeps_an_empty_newest_file(tmp_path):
    service = _full_files_then_an_empty_one(tmp_path, 2)
    assert service.truncate_from(10_000, lambda offset: BASE_MS) == 0
    assert [f.entry_count for f in service.files] == [2, 0]
    service.close()


def test_rollback_records_are_not_indexed(tmp_path):
    service = _service(tmp_path, slots=16, number=64)
    rollback = sysflag.TRANSACTION_ROLLBACK_TYPE
    service.build_index(_record(0, BASE_MS, keys="rb", uniq="U-rb", flag=rollback))
    assert service.files[-1].entry_count == 0
    assert list(service.candidates("T#rb")) == []

    service.build_index(_record(10, BASE_MS, keys="pr", flag=sysflag.TRANSACTION_PREPARED_TYPE))
    service.build_index(_record(20, BASE_MS, keys="cm", flag=sysflag.TRANSACTION_COMMIT_TYPE))
    service.build_index(_record(30, BASE_MS, keys="no"))
    assert list(service.candidates("T#pr")) == [10]
    assert list(service.candidates("T#cm")) == [20]
    assert list(service.candidates("T#no")) == [30]
    service.close()


def test_records_below_the_end_offset_are_skipped(tmp_path):
    service = _service(tmp_path, slots=16, number=64)
    service.build_index(_record(500, BASE_MS, keys="new"))
    assert service.files[-1].end_phy_offset == 500

    service.build_index(_record(400, BASE_MS, keys="old"))  # re-dispatch of an older record
    assert list(service.candidates("T#old")) == []
    # RocketMQ lets a record *at* the end offset in again; rocketstore indexes a record's
    # keys in one call, so a second dispatch of it (recovery) would only add duplicates.
    service.build_index(_record(500, BASE_MS, keys="again"))
    assert list(service.candidates("T#again")) == []
    assert service.files[-1].entry_count == 1
    service.build_index(_record(501, BASE_MS, keys="next"))
    assert list(service.candidates("T#next")) == [501]
    service.close()


def test_first_record_at_offset_zero_is_indexed(tmp_path):
    service = _service(tmp_path, slots=16, number=64)
    service.build_index(_record(0, BASE_MS, keys="first"))
    assert list(service.candidates("T#first")) == [0]
    service.close()


def test_hash_collisions_are_all_candidates(tmp_path):
    service = _service(tmp_path, slots=16, number=64)
    assert _java_hash("Aa") == _java_hash("BB") == 2112
    service.build_index(_record(0, BASE_MS, topic="AaTopic", keys="Aa"))
    service.build_index(_record(100, BASE_MS, topic="BBTopic", keys="BB"))
    # The index holds hashes only: both offsets come back for either key.
    assert sorted(service.candidates("AaTopic#Aa")) == [0, 100]
    assert sorted(service.candidates("BBTopic#BB")) == [0, 100]
    service.close()


def test_service_reload_and_last_update(tmp_path):
    service = _service(tmp_path, slots=4, number=5)
    for i in range(6):
        service.build_index(_record(100 * i, BASE_MS + 1000 * i, keys=f"k{i}"))
    service.flush()
    service.close()

    again = IndexService(str(tmp_path), 4, 5, writable=False)
    again.load()
    assert len(again.files) == 2
    assert again.last_update() == (BASE_MS + 5000, 500)
    assert list(again.candidates("T#k2")) == [200]
    again.close()


def test_delete_expired_never_removes_the_last_file(tmp_path):
    service = _service(tmp_path, slots=4, number=3)  # 2 entries per file
    for i in range(6):
        service.build_index(_record(100 * i, BASE_MS + i, keys=f"k{i}"))
    assert len(service.files) == 3
    assert service.delete_expired(250) == 1  # first file ends at 100
    assert service.delete_expired(10_000) == 1  # the last file stays
    assert len(service.files) == 1
    service.close()


def _random_records(seed: int, count: int) -> list[DispatchedKeys]:
    import random

    from rocketstore.format import sysflag

    rng = random.Random(seed)
    records = []
    offset = 0
    stamp = 1_700_000_000_000
    for i in range(count):
        offset += rng.randint(100, 400)
        stamp += rng.choice([0, 1, 999, 1000, 1500, 60_000])
        keys = " ".join(f"k{rng.randint(0, 40)}" for _ in range(rng.randint(0, 3))) or None
        uniq = f"{i:032X}" if rng.random() < 0.8 else None
        flag = rng.choice(
            [0, 0, 0, sysflag.TRANSACTION_ROLLBACK_TYPE, sysflag.TRANSACTION_PREPARED_TYPE]
        )
        records.append(DispatchedKeys("T", offset, stamp, flag, uniq, keys))
    return records


def _index_bytes(directory: Path) -> list[bytes]:
    return [(directory / name).read_bytes() for name in sorted(os.listdir(directory))]


@pytest.mark.parametrize("seed", range(8))
def test_bulk_indexing_writes_the_same_bytes_as_one_by_one(tmp_path: Path, seed: int) -> None:
    records = _random_records(seed, 300)
    one = IndexService(str(tmp_path / "one"), 7, 40, writable=True)
    bulk = IndexService(str(tmp_path / "bulk"), 7, 40, writable=True)
    for record in records:
        one.build_index(record)
    for start in range(0, len(records), 37):  # batches that cut through rollovers
        bulk.build_index_batch(records[start : start + 37])
    one.flush()
    bulk.flush()
    assert len(one.files) == len(bulk.files) > 3
    assert _index_bytes(tmp_path / "one" / "index") == _index_bytes(tmp_path / "bulk" / "index")
    one.close()
    bulk.close()


# --- puts cut short by a crash ----------------------------------------------------------------


def _cut_short(index_file: IndexFile, put: Callable[[], object]) -> None:
    """Run ``put`` but leave the header as it was, as a kill between the entry and slot
    writes and the header write does."""
    header = bytes(index_file._file.mm[: layout.HEADER_SIZE])
    put()
    index_file._file.mm[: layout.HEADER_SIZE] = header


def _reopened(index_file: IndexFile) -> IndexFile:
    path, slots, number = index_file.path, index_file.hash_slot_num, index_file.index_num
    index_file.close()
    return IndexFile(path, slots, number, writable=True, create=False)


@pytest.mark.parametrize("bulk", [False, True])
def test_repair_restores_chains_cut_short_puts_left(tmp_path, bulk):
    """Counted entries stay reachable after a put of several keys of the same slots was cut
    short: each slot gets back the head it had (a bulk put links its own entries of one
    slot to each other, so the walk must go through all of them)."""
    index_file = _new_file(tmp_path, slots=4, number=100)
    keys = [f"k{i}" for i in range(12)]  # 12 keys over 4 slots: several per slot
    for i, key in enumerate(keys):
        assert index_file.put_key(key, 1000 + i, BASE_MS)
    before = _file_bytes(index_file)
    late = [f"late{i}" for i in range(10)]
    hashes = np.array([_key_hash(k) for k in late], dtype=np.int64)
    offsets = np.arange(5000, 5010, dtype=np.int64)
    stamps = np.full(10, BASE_MS, dtype=np.int64)
    if bulk:
        _cut_short(index_file, lambda: index_file.put_keys_bulk(hashes, offsets, stamps))
    else:
        _cut_short(index_file, lambda: index_file.put_key(late[0], 5000, BASE_MS))
    index_file = _reopened(index_file)
    assert index_file.repair_uncounted_writes() > 0
    assert _file_bytes(index_file) == before, "the file is as before the cut-short put"
    for i, key in enumerate(keys):
        assert index_file.select_phy_offsets(key, 10, 0, 2**62) == [1000 + i]
    # And it goes on: the next puts link to the restored heads.
    assert index_file.put_keys_bulk(hashes, offsets, stamps) == 10
    for i, key in enumerate(late):
        assert index_file.select_phy_offsets(key, 10, 0, 2**62) == [5000 + i]
    for i, key in enumerate(keys):
        assert index_file.select_phy_offsets(key, 10, 0, 2**62) == [1000 + i]


# --- blocks written apart, then linked (the parallel rebuild) -----------------------------


@settings(max_examples=60, deadline=None)
@given(
    hashes=st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=300),
    cuts=st.lists(st.integers(1, 299), max_size=5),
    chunk=st.integers(1, 40),
    inherited=st.sampled_from([0, BASE_MS - 5_000]),
    slots=st.sampled_from([1, 7, 64]),
)
def test_parts_chained_apart_then_linked_equal_one_bulk_put(
    tmp_path_factory: pytest.TempPathFactory,
    hashes: list[int],
    cuts: list[int],
    chunk: int,
    inherited: int,
    slots: int,
) -> None:
    """A file's entries cut into parts, each chained alone (in chunks, as a rebuild
    part does), written by ``write_block`` and joined by ``link_blocks``: the bytes of one
    ``put_keys_bulk`` of them all into a new file."""
    directory = tmp_path_factory.mktemp("parts")
    count = len(hashes)
    key_hashes = np.array(hashes, dtype=np.int64)
    offsets = np.arange(count, dtype=np.int64) * 100 + 7_000
    stamps = BASE_MS + np.arange(count, dtype=np.int64) * 777
    number = count + 1 + 3  # room to spare
    first_file = 20_000_000_000_000_000
    expected = IndexFile(str(directory / str(first_file)), slots, number, writable=True,
                         create=True, end_phy_offset=6_000, end_timestamp=inherited)  # fmt: skip
    assert expected.put_keys_bulk(key_hashes, offsets, stamps) == count
    path = str(directory / str(first_file + 1))
    bounds = sorted({0, count, *(c for c in cuts if c < count)})
    runs = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(index_chain, "CHAIN_CHUNK", chunk)
        for low, high in itertools.pairwise(bounds):
            # Each part in up to three segments, as a part made of several ranges' spills.
            middle = (low + high) // 2
            segments = [
                (key_hashes[a:b], offsets[a:b], stamps[a:b])
                for a, b in ((low, middle), (middle, middle), (middle, high))
            ]
            chainer = RunChainer(
                hash_slot_num=slots,
                first_number=1 + low,
                begin_timestamp=inherited if low == 0 else int(stamps[0]),
                opens_file=low == 0,
            )
            blocks = (block for seg in segments for block in chainer.chunks(*seg))
            assert write_blocks(path, slots, blocks) == high - low
            assert chainer.first == EntryPoint(int(offsets[low]), int(stamps[low]))
            assert chainer.last == EntryPoint(int(offsets[high - 1]), int(stamps[high - 1]))
            runs.append(chainer.runs)
    os.truncate(path, layout.file_size(slots, number))
    linked = IndexFile(path, slots, number, writable=True, create=True,
                       end_phy_offset=6_000, end_timestamp=inherited)  # fmt: skip
    linked.link_blocks(
        runs,
        first=EntryPoint(int(offsets[0]), int(stamps[0])),
        last=EntryPoint(int(offsets[-1]), int(stamps[-1])),
        entries=count,
    )
    assert _file_bytes(linked) == _file_bytes(expected)
    linked.close()
    expected.close()


def test_link_blocks_needs_a_fresh_file_and_room(tmp_path: Path) -> None:
    index_file = _new_file(tmp_path, slots=4, number=5)
    point = EntryPoint(1, BASE_MS)
    with pytest.raises(ConfigError, match="do not fit 4"):
        index_file.link_blocks([], first=point, last=point, entries=5)
    assert index_file.put_key("k", 1, BASE_MS)
    with pytest.raises(ConfigError, match="needs a fresh file"):
        index_file.link_blocks([], first=point, last=point, entries=1)


@pytest.mark.parametrize("native", ["native", "python"])
@pytest.mark.parametrize("garbage", [0, 3, 6, 10_000])
def test_bulk_put_is_put_key_per_entry_even_over_garbage_slots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, native: str, garbage: int
) -> None:
    """A leftover slot value (a crash between slot and header writes, before repair) is a
    valid head exactly when put_key would take it: a number below the new entry's own."""
    if native == "python":
        for name in ("index_put", "chain_private", "index_chain"):
            monkeypatch.setattr(native_registry, name, None)
    hashes = [0, 7, 3, 3, 10, 3, 17]  # slot 3 of 7: entries 3, 4 and 6 (and 10 -> 3)
    files = []
    for name in ("one-by-one", "bulk"):
        (tmp_path / name).mkdir()
        index_file = _new_file(tmp_path / name, slots=7, number=20)
        index_file._file.mm[layout.slot_position(3) : layout.slot_position(3) + 4] = (
            garbage.to_bytes(4, "big")
        )
        if name == "bulk":
            count = index_file.put_keys_bulk(
                np.array(hashes, dtype=np.int64),
                np.arange(len(hashes), dtype=np.int64) + 100,
                np.full(len(hashes), BASE_MS, dtype=np.int64),
            )
            assert count == len(hashes)
        else:
            for i, key_hash in enumerate(hashes):
                assert index_file.put_key("", 100 + i, BASE_MS, key_hash=key_hash)
        files.append(_file_bytes(index_file))
    assert files[0] == files[1]


_LINK = st.integers(-1, 14)  # entry numbers, some out of [1, index_count]


@pytest.mark.skipif(native_registry.native is None, reason="compares the C walk with Python's")
@settings(max_examples=300, deadline=None)
@given(
    st.lists(_LINK, min_size=5, max_size=5),
    st.lists(
        st.tuples(st.sampled_from([3, 8, -3]), st.integers(0, 99), st.integers(-2, 5), _LINK),
        min_size=13,
        max_size=13,
    ),
    st.integers(0, 13),
)
def test_the_chain_walk_in_c_is_the_python_walk_over_any_bytes(
    tmp_path_factory: pytest.TempPathFactory,
    slots: list[int],
    entries: list[tuple[int, int, int, int]],
    count: int,
) -> None:
    """Slots and entries of any value (links out of range, to themselves, in loops,
    negative time diffs): both walks find the same entries and stop at the same place."""
    index_file = _new_file(tmp_path_factory.mktemp("chain"), slots=5, number=13)
    try:
        mm = index_file._file.mm
        for slot, value in enumerate(slots):
            layout.pack_slot_into(mm, layout.slot_position(slot), value)
        for number, (key_hash, offset, diff, prev) in enumerate(entries):
            at = layout.entry_position(5, number)
            mm[at : at + 20] = (
                key_hash.to_bytes(4, "big", signed=True)
                + offset.to_bytes(8, "big")
                + diff.to_bytes(4, "big", signed=True)
                + prev.to_bytes(4, "big", signed=True)
            )
        index_file.index_count = count
        fast = index_file.raw_chain(3)  # slot 3; entries of hash 8 share it
        with native_registry.python_only("index_chain"):
            slow = index_file.raw_chain(3)
        assert fast == slow
    finally:
        index_file.close()


# --- made ahead of need (the prefaulter's thread) ----------------------------------------------


needs_prefault = pytest.mark.skipif(
    native_registry.native is None, reason="prefaulting needs the C extension"
)


def _prefaulting(tmp_path: Path, slots: int = 7, number: int = 40) -> IndexService:
    service = IndexService(str(tmp_path), slots, number, writable=True)
    if not service.prefault_ahead() and not service._can_prefault:
        service.close()
        pytest.skip("this kernel cannot prefault (MADV_POPULATE_WRITE)")
    return service


def _spare_path(tmp_path: Path) -> Path:
    return tmp_path / "index" / index_module.SPARE_NAME


@needs_prefault
@pytest.mark.parametrize("seed", range(4))
def test_files_taken_from_spares_hold_the_same_bytes(tmp_path: Path, seed: int) -> None:
    """Each roll takes the spare made ahead of it; the index is byte for byte the one built
    without spares."""
    records = _random_records(seed, 300)
    plain = IndexService(str(tmp_path / "plain"), 7, 40, writable=True)
    ahead = _prefaulting(tmp_path / "ahead")
    taken = 0
    for record in records:  # a record has at most 4 keys: no more than the spare margin
        plain.build_index_batch([record])
        had_spare = _spare_path(tmp_path / "ahead").exists()
        files_before = len(ahead.files)
        ahead.build_index_batch([record])
        if had_spare and len(ahead.files) > files_before:
            taken += 1
            assert not _spare_path(tmp_path / "ahead").exists()  # renamed, not copied
        while ahead.prefault_ahead():
            pass
    plain.flush()
    ahead.flush()
    assert taken == len(ahead.files) > 3  # every file came from a spare
    assert [f.name for f in ahead.files] == sorted(f.name for f in ahead.files)
    plain_index, ahead_index = tmp_path / "plain" / "index", tmp_path / "ahead" / "index"
    files = sorted(p for p in os.listdir(ahead_index) if p != index_module.SPARE_NAME)
    assert [(ahead_index / name).read_bytes() for name in files] == _index_bytes(plain_index)
    assert list(ahead.candidates("T#k7")) == list(plain.candidates("T#k7"))
    plain.close()
    ahead.close()


@needs_prefault
def test_the_spare_is_made_only_when_the_last_file_is_nearly_full(tmp_path: Path) -> None:
    service = _prefaulting(tmp_path, slots=4, number=41)  # 40 entries; 10 %: 4 left
    assert _spare_path(tmp_path).exists()  # no file yet: the first one is due
    service.build_index(_record(0, BASE_MS, keys="a"))
    assert not _spare_path(tmp_path).exists() and len(service.files) == 1
    for i in range(1, 35):
        service.build_index(_record(100 * i, BASE_MS, keys=f"k{i}"))
        service.prefault_ahead()
        assert not _spare_path(tmp_path).exists(), i  # 5 or more entries left
    service.build_index(_record(3500, BASE_MS, keys="k35"))  # 4 left
    assert service.wants_prefault()
    service.prefault_ahead()
    assert _spare_path(tmp_path).exists()
    service.close()


@needs_prefault
def test_entries_are_faulted_in_ahead_of_the_writer(tmp_path: Path) -> None:
    service = _prefaulting(tmp_path, slots=64, number=1_000_000)  # 20 MB of entries
    service.build_index(_record(0, BASE_MS, keys="a"))
    assert service.wants_prefault()  # the new file's entries: none faulted in yet
    while service.prefault_ahead():
        pass
    assert not service.wants_prefault()
    ahead = index_file_module.ENTRIES_AHEAD_BYTES // layout.ENTRY_SIZE
    keys = np.arange(ahead // 2 + 1, dtype=np.int64)
    service.build_index_hashed(keys, keys + 100, np.full(len(keys), BASE_MS), last_offset=1 << 40)
    assert service.wants_prefault()  # half of them used: time for the next step
    assert bytes(service.files[-1]._file.mm[-20:]) == bytes(20)  # prefaulting wrote nothing
    service.close()


@needs_prefault
def test_an_unused_spare_leaves_no_trace(tmp_path: Path) -> None:
    service = _prefaulting(tmp_path / "store")
    assert _spare_path(tmp_path / "store").exists()
    service.close()
    assert not (tmp_path / "store" / "index").exists()  # the spare made the directory


@needs_prefault
def test_a_spare_a_crash_left_is_deleted_and_never_loaded(tmp_path: Path) -> None:
    service = _prefaulting(tmp_path)
    service.build_index(_record(0, BASE_MS, keys="a"))
    service._spare = None  # as a crash would leave it: on disk, known to nobody
    (tmp_path / "index" / index_module.SPARE_NAME).write_bytes(b"\0" * 100)
    service.close()
    reader = IndexService(str(tmp_path), 7, 40, writable=False)
    reader.load()
    assert [f.name for f in reader.files] == [f.name for f in service.files]
    reader.close()
    assert _spare_path(tmp_path).exists()  # a reader deletes nothing
    writer = IndexService(str(tmp_path), 7, 40, writable=True)
    writer.load()
    assert not _spare_path(tmp_path).exists()
    assert list(writer.candidates("T#a")) == [0]
    writer.close()


def test_a_spare_that_cannot_be_made_turns_prefaulting_off_quietly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_space(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(index_module, "IndexMapping", no_space)
    service = IndexService(str(tmp_path), 7, 40, writable=True)
    assert not service.prefault_ahead()  # no exception reaches the prefaulter thread
    assert not service.wants_prefault()  # and it is not woken for it again
    monkeypatch.undo()
    service.build_index(_record(0, BASE_MS, keys="a"))  # the roll makes its own file
    assert list(service.candidates("T#a")) == [0]
    service.close()
