"""paths: index file names and the times they stand for."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketstore.errors import ConfigError
from rocketstore.paths import (
    CommitLogDirs,
    index_file_ms,
    index_file_name,
    is_index_file_name,
    is_offset_file_name,
    no_commitlog,
    split_paths,
)

# 2001-09-09 .. 2286-11-20: every name has 17 digits.
EPOCH_MS = st.integers(min_value=1_000_000_000_000, max_value=9_999_999_999_999)


@given(EPOCH_MS)
def test_a_name_reads_back_as_its_time(epoch_ms: int) -> None:
    name = index_file_name(epoch_ms)
    assert is_index_file_name(name)
    back = index_file_ms(name)
    assert back is not None
    # The same wall-clock time (a repeated local hour reads as its first occurrence).
    assert index_file_name(back) == name
    assert index_file_name(back + 1) > name


def test_names_that_stand_for_no_time() -> None:
    assert index_file_ms("99999999999999999") is None  # month 99
    assert index_file_ms("2026112606") is None  # not a name
    assert index_file_ms("20261301000000000") is None  # month 13


def test_an_offset_past_a_java_long_is_no_file_name() -> None:
    """RocketMQ never names a file past Long.MAX_VALUE; such a name would overflow every
    offset computed from it (the C decoder refused it with an OverflowError)."""
    assert is_offset_file_name(f"{2**63 - 1:020d}")
    assert not is_offset_file_name("99999999999999999999")
    assert not is_offset_file_name(f"{2**63:020d}")


# --- CommitLog directories (storePathCommitLog, readOnlyCommitLogStorePaths) -----------------


def test_no_setting_is_the_commitlog_directory_of_the_root() -> None:
    dirs = CommitLogDirs.of("/s")
    assert dirs.all == ("/s/commitlog",)
    assert not dirs.multi_path
    assert no_commitlog(dirs) == "no commitlog/"


def test_one_path_is_the_whole_commitlog_and_read_only_paths_need_a_comma() -> None:
    # RocketMQ makes a plain MappedFileQueue unless the setting holds the splitter.
    dirs = CommitLogDirs.of("/s", " /data/log ", "/old")
    assert dirs.all == ("/data/log",)
    assert no_commitlog(dirs) == "no CommitLog directory: /data/log"


def test_several_paths_split_as_java_splits_them() -> None:
    dirs = CommitLogDirs.of("/s", "/c,/a,/b,/x/../a,/a/,", "/old,/b/")
    assert dirs.writable == ("/c", "/a", "/b")  # one directory, however spelled
    assert dirs.read_only == ("/b", "/old")
    assert dirs.all == ("/c", "/a", "/b", "/old")
    assert dirs.multi_path
    assert split_paths(" x, y ,") == ("x", " y ")  # trim() is of the whole setting only
    one = CommitLogDirs.of("/s", "/a,")  # a comma makes it multi-path, with one path
    assert one.multi_path and one.all == ("/a",)


@pytest.mark.parametrize("setting", [",", ",/a", "/a,,/b", " , "])
def test_a_list_with_an_empty_path_is_refused(setting: str) -> None:
    # Java keeps a leading or middle empty part: files would go to the file-system root.
    with pytest.raises(ConfigError, match=r"storePathCommitLog=.* has an empty path"):
        CommitLogDirs.of("/s", setting)
    with pytest.raises(ConfigError, match=r"readOnlyCommitLogStorePaths=.* has an empty path"):
        CommitLogDirs.of("/s", "/a,/b", setting)


def test_file_n_goes_to_path_n_mod_count_of_the_sorted_available_paths() -> None:
    # MultiPathMappedFileQueueTest: three paths, file i in the i % 3-th.
    dirs = CommitLogDirs.of("/s", "/c,/a,/b")
    assert [dirs.directory_for(i * 1024, 1024) for i in range(5)] == [
        "/a",
        "/b",
        "/c",
        "/a",
        "/b",
    ]
    # A read-only path is never written; a full one is skipped while another has room.
    ro = CommitLogDirs.of("/s", "/a,/b,/c", "/b")
    assert [ro.directory_for(i * 1024, 1024) for i in range(3)] == ["/a", "/c", "/a"]
    full = frozenset({"/b"})
    assert dirs.placement(full) == ("/a", "/c")
    assert dirs.placement(frozenset({"/a", "/b", "/c"})) == ("/a", "/b", "/c")


def test_paths_sort_by_utf16_code_units_as_java_strings_do() -> None:
    # U+1F600 is the surrogate pair D83D DE00, before U+FF5E in Java's order.
    dirs = CommitLogDirs.of("/s", "/\uff5e,/\U0001f600")
    assert dirs.placement() == ("/\U0001f600", "/\uff5e")


def test_every_path_read_only_leaves_nowhere_to_write() -> None:
    dirs = CommitLogDirs.of("/s", "/a,/b", "/a,/b")
    assert dirs.all == ("/a", "/b")
    assert CommitLogDirs.of("/s", "a,", "./a").placement() == ()
    with pytest.raises(ConfigError, match="every storePathCommitLog path is also in"):
        dirs.directory_for(0, 1024)
