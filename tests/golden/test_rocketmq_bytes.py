"""Byte for byte against RocketMQ: rocketstore re-putting the 4.9.8 `basic` inputs writes
RocketMQ's CommitLog, ConsumeQueue and index files, and its recovery of `crashed` (both
corpora) leaves the files RocketMQ's own recovery leaves. A difference is reported as file,
offset and field name (spec tables 1.2, 3.1 and 4.1). A rebuild of RocketMQ's own queues and
index from its CommitLog (both corpora, both rebuild engines) gives RocketMQ's bytes back."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

from rocketstore import MessageStore
from tests.golden.golden_helpers import (
    BOTH,
    CORPUS,
    compare_files,
    describe_differences,
    extract,
    load_manifest,
    rewrite_with_rocketstore,
    store_config,
    store_files,
)


@pytest.fixture(scope="module")
def rewritten(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, int]:
    manifest = load_manifest("basic")
    theirs = extract("basic", tmp_path_factory.mktemp("rocketmq"))
    ours = tmp_path_factory.mktemp("rocketstore") / "basic"
    rewrite_with_rocketstore(manifest, ours)
    return ours, theirs, manifest["config"]["maxHashSlotNum"]


@pytest.mark.parametrize("kind", ["commitlog", "consumequeue", "index"])
def test_rewrite_is_byte_identical(kind: str, rewritten: tuple[Path, Path, int]) -> None:
    ours, theirs, slots = rewritten
    problems = compare_files(kind, ours, theirs, slots)
    assert not problems, "\n".join(problems)


class Recovered(NamedTuple):
    ours: Path  # `crashed` after rocketstore's recovery
    theirs: Path  # `recovered`: `crashed` after RocketMQ's own recovery
    slots: int
    rebuilt: int  # how many of the newest index files RocketMQ destroys and rebuilds


@pytest.fixture(scope="module", params=BOTH)
def recovered(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Recovered:
    """rocketstore's recovery of `crashed` next to RocketMQ's recovery of the same files.
    Both corpora: RocketMQ 5.3.3's abnormal recovery leaves the same bytes as 4.9.8's."""
    corpus: Path = request.param
    manifest = load_manifest("crashed", corpus)
    rebuilt = index_files_rocketmq_rebuilds(
        extract("crashed", tmp_path_factory.mktemp("crashed"), corpus)
    )
    ours = extract("crashed", tmp_path_factory.mktemp("rocketstore"), corpus)
    with MessageStore.open(ours, store_config(manifest)) as store:
        store.wait_dispatched()
    theirs = extract("recovered", tmp_path_factory.mktemp("rocketmq"), corpus)
    return Recovered(ours, theirs, manifest["config"]["maxHashSlotNum"], rebuilt)


def index_files_rocketmq_rebuilds(crashed: Path) -> int:
    """How many of the newest index files RocketMQ's abnormal load destroys: those whose
    endTimestamp is past the checkpoint's indexMsgTimestamp (spec 4.4, RocketMQ #8007)."""
    index_msg_timestamp = struct.unpack_from(">q", (crashed / "checkpoint").read_bytes(), 16)[0]
    ends = [
        struct.unpack_from(">q", (crashed / name).read_bytes(), 8)[0]
        for name in store_files(crashed)["index"]
    ]
    return sum(1 for end in ends if end > index_msg_timestamp)


@pytest.mark.parametrize("kind", ["commitlog", "consumequeue", "index"])
def test_recovery_leaves_the_files_rocketmq_leaves(kind: str, recovered: Recovered) -> None:
    ours, theirs, slots, rebuilt = recovered
    assert rebuilt >= 1, "the corpus should exercise the index rebuild"
    only = slice(None, -rebuilt) if kind == "index" else slice(None)
    problems = compare_files(kind, ours, theirs, slots, only)
    assert not problems, "\n".join(problems)


def index_entries(path: Path, slots: int) -> list[tuple[int, int]]:
    """(keyHash, phyOffset) of every counted entry of an index file, in number order."""
    data = path.read_bytes()
    count = struct.unpack_from(">i", data, 36)[0]
    first = 40 + 4 * slots
    return [struct.unpack_from(">iq", data, first + 20 * n) for n in range(1, count)]


def test_recovery_keeps_the_newest_index_files_rocketmq_rebuilds(recovered: Recovered) -> None:
    """The one documented difference (docs/recovery.md): after a crash RocketMQ (4.9.8 and
    5.3.3 alike) destroys the index files newer than the checkpoint and re-indexes from its recovery
    start, which indexes the keys of the record at the previous file's endPhyOffset a
    second time; rocketstore keeps those files and drops only entries past the recovered
    end. So RocketMQ's rebuilt files hold exactly our entries plus duplicates of keys of
    that one record, and a key query finds the same messages in both."""
    ours, theirs, slots, rebuilt = recovered
    our_entries = [
        e
        for name in store_files(ours)["index"][-rebuilt:]
        for e in index_entries(ours / name, slots)
    ]
    their_names = store_files(theirs)["index"]
    their_entries = [
        e for name in their_names[-rebuilt:] for e in index_entries(theirs / name, slots)
    ]
    previous_end = struct.unpack_from(">q", (theirs / their_names[-rebuilt - 1]).read_bytes(), 24)[
        0
    ]
    extra = list(their_entries)
    for entry in our_entries:
        assert entry in extra, f"our entry {entry} is not in RocketMQ's rebuilt index"
        extra.remove(entry)
    assert extra, "RocketMQ's rebuild duplicates the boundary record's keys"
    assert {offset for _, offset in extra} == {previous_end}
    assert set(extra) <= set(their_entries[: len(extra)]), "the duplicates come first"


def test_differences_are_named_by_field() -> None:
    """The diff helper itself: a changed byte is reported with the spec's field name."""
    theirs = (CORPUS / "basic.tar.gz").read_bytes()
    assert theirs  # the corpus is present
    cq = bytes(20 * 3)
    changed = bytearray(cq)
    changed[20 + 9] = 1
    (line,) = describe_differences("consumequeue", "cq", bytes(changed), cq, 16)
    assert "unit 1: size" in line
    index = bytes(744)
    changed = bytearray(index)
    changed[36] = 2
    changed[40 + 16 * 4 + 20 + 5] = 7
    lines = describe_differences("index", "ix", bytes(changed), index, 16)
    assert "header indexCount" in lines[0] and "entry 1: phyOffset" in lines[1]


@pytest.mark.parametrize("engine", ["single", "local"])
@pytest.mark.parametrize("corpus", BOTH)
def test_rebuild_writes_rocketmqs_queues_and_index(
    corpus: Path, engine: str, tmp_path: Path
) -> None:
    """`rocketstore rebuild` of RocketMQ's `basic` store (consume queues and index thrown
    away and made again from the CommitLog, v2 records of 5.x included) gives back the
    files RocketMQ's own dispatcher wrote, byte for byte (index files by name order)."""
    manifest = load_manifest("basic", corpus)
    theirs = extract("basic", tmp_path / "rocketmq", corpus)
    ours = extract("basic", tmp_path / "rocketstore", corpus)
    command = [sys.executable, "-m", "rocketstore.cli.main", "--store", str(ours), "rebuild"]
    done = subprocess.run(
        [*command, "--engine", engine], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    assert f"{len(manifest['messages'])} records dispatched" in done.stdout
    slots = manifest["config"]["maxHashSlotNum"]
    for kind in ("consumequeue", "index"):
        problems = compare_files(kind, ours, theirs, slots)
        assert not problems, "\n".join(problems)
