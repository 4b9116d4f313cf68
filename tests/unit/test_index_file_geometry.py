"""Index files of any geometry: ``file_geometry`` and the store's adoption of it, for
stores whose broker set maxHashSlotNum and maxIndexNum to other than 4 entries a slot."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.errors import ConfigError
from rocketstore.format import index_layout as layout
from rocketstore.index_catalog import file_geometry
from rocketstore.paths import index_dir

ODD: dict[str, Any] = {"max_hash_slot_num": 16, "max_index_num": 32}  # two a slot: no 1:4 size
ODD_SIZE = layout.file_size(16, 32)


def _write(root: Path, count: int, start: int = 0, **config: Any) -> None:
    with MessageStore.open(
        root, StoreConfig(mapped_file_size_commit_log=1 << 20, **config)
    ) as store:
        for n in range(start, start + count):
            assert store.put(Message("T", b"m%d" % n, properties={"KEYS": f"k{n}"})).ok


def _index_sizes(root: Path) -> set[int]:
    directory = index_dir(str(root))
    return {os.path.getsize(os.path.join(directory, name)) for name in os.listdir(directory)}


def test_a_reader_with_the_default_config_reads_files_of_another_geometry(tmp_path: Path) -> None:
    _write(tmp_path, 100, **ODD)  # 31 keys a file: four files
    assert _index_sizes(tmp_path) == {ODD_SIZE}
    with MessageStore.open(tmp_path, read_only=True) as store:
        assert {(f.hash_slot_num, f.index_num) for f in store.index.files} == {(16, 32)}
        for n in (0, 31, 62, 99):
            assert [m.body for m in store.query_messages("T", f"k{n}")] == [b"m%d" % n]


def test_a_writer_with_the_default_config_keeps_the_geometry_it_finds(tmp_path: Path) -> None:
    """New files take the newest file's geometry, so RocketMQ, configured as the broker
    that wrote them, reads every file."""
    _write(tmp_path, 40, **ODD)
    _write(tmp_path, 60, start=40)  # StoreConfig() defaults: 5M slots x 20M entries
    assert _index_sizes(tmp_path) == {ODD_SIZE}
    with MessageStore.open(tmp_path) as store:
        assert (store.config.max_hash_slot_num, store.config.max_index_num) == (16, 32)
        for n in (0, 39, 40, 99):
            assert [m.body for m in store.query_messages("T", f"k{n}")] == [b"m%d" % n]


def test_file_geometry_prefers_the_configured_then_the_entries_then_one_to_four(
    tmp_path: Path,
) -> None:
    _write(tmp_path, 5, **ODD)
    directory = index_dir(str(tmp_path))
    written = os.path.join(directory, sorted(os.listdir(directory))[0])
    assert file_geometry(written, (16, 32)) == (16, 32)
    assert file_geometry(written, (5_000_000, 20_000_000)) == (16, 32)
    empty = tmp_path / "empty"
    empty.write_bytes(bytes(layout.file_size(10, 40)))  # no entries: the 1:4 size it fits
    assert file_geometry(str(empty), (5_000_000, 20_000_000)) == (10, 40)


def test_an_empty_file_of_an_unusual_size_asks_for_the_geometry(tmp_path: Path) -> None:
    directory = Path(index_dir(str(tmp_path)))
    _write(tmp_path, 1)
    for name in os.listdir(directory):
        os.remove(directory / name)
    (directory / "20260101000000000").write_bytes(bytes(ODD_SIZE))
    with pytest.raises(ValueError, match="holds entries to tell its own") as raised:
        file_geometry(str(directory / "20260101000000000"), (5_000_000, 20_000_000))
    assert "max_hash_slot_num and max_index_num" in str(raised.value)
    with pytest.raises(ConfigError, match="20260101000000000 is 744 bytes"):
        MessageStore.open(tmp_path)  # a writer would write into it
    with MessageStore.open(tmp_path, read_only=True) as reader:
        assert reader.index.files == []  # nothing to read in it
        assert reader.query_messages("T", "k0") == []
    with MessageStore.open(tmp_path, StoreConfig(**ODD), read_only=True) as store:
        assert store.index.files[0].index_num == 32


@pytest.mark.parametrize("size", [0, 39])
def test_an_index_file_whose_creation_was_cut_short_holds_nothing(
    tmp_path: Path, size: int
) -> None:
    """A broker killed while making an index file can leave it shorter than its header.
    RocketMQ maps it (which extends it) and finds it empty; a reader passes over it, a
    writer removes it, and the geometry comes from the files before it."""
    _write(tmp_path, 40, **ODD)
    directory = Path(index_dir(str(tmp_path)))
    cut = directory / "29991231235959999"  # the newest name
    cut.write_bytes(bytes(size))
    with MessageStore.open(tmp_path, read_only=True) as reader:
        assert cut.name not in {f.name for f in reader.index.files}
        assert [m.body for m in reader.query_messages("T", "k39")] == [b"m39"]
    with pytest.raises(ValueError, match="shorter than its header"):
        file_geometry(str(cut), (16, 32))
    with MessageStore.open(tmp_path) as writer:
        assert not cut.exists()
        assert (writer.config.max_hash_slot_num, writer.config.max_index_num) == (16, 32)
        assert writer.put(Message("T", b"m40", properties={"KEYS": "k40"})).ok
        writer.wait_dispatched()
        assert [m.body for m in writer.query_messages("T", "k40")] == [b"m40"]
    assert _index_sizes(tmp_path) == {ODD_SIZE}


@pytest.mark.parametrize(
    "geometry",
    [(16, 32), (11, 23)],  # (11, 23) is the size of (6, 24): a 1:4 guess would be wrong
)
def test_an_empty_file_takes_the_geometry_of_its_siblings(
    tmp_path: Path, geometry: tuple[int, int]
) -> None:
    """A file without entries (a broker's newest, just made) of an unusual size: its
    siblings of the same size, which have entries, show the geometry it shares."""
    slots, entries = geometry
    _write(tmp_path, 30, max_hash_slot_num=slots, max_index_num=entries)
    directory = Path(index_dir(str(tmp_path)))
    fresh = directory / "29991231235959999"
    fresh.write_bytes(bytes(layout.file_size(slots, entries)))
    with MessageStore.open(tmp_path, read_only=True) as reader:
        assert {f.geometry for f in reader.index.files} == {geometry}
        assert fresh.name in {f.name for f in reader.index.files}
        assert [m.body for m in reader.query_messages("T", "k29")] == [b"m29"]
    with MessageStore.open(tmp_path) as writer:
        assert (writer.config.max_hash_slot_num, writer.config.max_index_num) == geometry
        assert writer.put(Message("T", b"new", properties={"KEYS": "fresh-key"})).ok
        writer.wait_dispatched()
        assert writer.index.files[-1].name == fresh.name  # written into, as RocketMQ would
        assert [m.body for m in writer.query_messages("T", "fresh-key")] == [b"new"]
        assert [m.body for m in writer.query_messages("T", "k29")] == [b"m29"]  # once
    assert _index_sizes(tmp_path) == {layout.file_size(slots, entries)}


def test_entries_that_read_as_no_geometry_are_not_guessed_at(tmp_path: Path) -> None:
    """A file of another size whose entries are damaged: a 1:4 guess would misread them
    (and a writer's repair rewrite the wrong bytes). A writer refuses, naming the way
    out; a reader passes over the file."""
    _write(tmp_path, 10, max_hash_slot_num=55, max_index_num=220)  # a 1:4 size
    directory = Path(index_dir(str(tmp_path)))
    (path,) = directory.iterdir()
    data = bytearray(path.read_bytes())
    entries_start = layout.entry_position(55, 0)
    data[entries_start + 20 : entries_start + 220] = bytes(range(200))  # entries 1..10
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="may be damaged"):
        file_geometry(str(path), (5_000_000, 20_000_000))
    with pytest.raises(ConfigError, match="rocketstore rebuild"):
        MessageStore.open(tmp_path)
    with MessageStore.open(tmp_path, read_only=True) as reader:
        assert reader.index.files == []
        assert len(reader.get_messages("g", "T", 0, 0, 32).messages) == 10


def test_a_file_larger_than_a_java_int_is_no_index_file(tmp_path: Path) -> None:
    """RocketMQ computes an index file's size as a Java int. A file extended past that
    (sparse, as damage or a stray truncate leaves it) is named as such at once: scanning
    its gigabytes of zeros for a first entry took minutes."""
    _write(tmp_path, 10)
    directory = Path(index_dir(str(tmp_path)))
    (path,) = directory.iterdir()
    os.truncate(path, 2**31 + 4)  # sparse: no disk space used
    with pytest.raises(ValueError, match="more than any index file RocketMQ makes"):
        file_geometry(str(path), (5_000_000, 20_000_000))
    with MessageStore.open(tmp_path, read_only=True) as reader:
        assert reader.index.files == []
        assert len(reader.get_messages("g", "T", 0, 0, 32).messages) == 10


@pytest.mark.parametrize(
    ("slots", "entries"), [(2**31 - 1, 2**31 - 1), (1, 107_374_181), (536_870_893, 2)]
)
def test_a_geometry_past_a_java_int_file_size_is_refused(slots: int, entries: int) -> None:
    with pytest.raises(ConfigError, match="more than the 2147483647 a Java int holds"):
        StoreConfig(max_hash_slot_num=slots, max_index_num=entries).validate()


def test_the_largest_geometry_rocketmq_can_make_is_taken() -> None:
    config = StoreConfig(max_hash_slot_num=1, max_index_num=107_374_180).validate()
    assert config.index_file_size <= 2**31 - 1
