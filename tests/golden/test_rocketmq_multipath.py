"""A CommitLog spread over two paths by RocketMQ 4.9.8's own MultiPathMappedFileQueue
(`multipath`: the basic workload with storePathCommitLog=<root>/commitlog/b,<root>/commitlog/a;
tests/golden/README.md). RocketMQ put file i in the i % 2-th of the sorted paths; rocketstore
re-putting the inputs with the same setting puts every file in the same place with the same
bytes, its consume queues and index equal RocketMQ's, and the CLI given the broker's
settings checks and rebuilds the store. (The read checks of every message and RocketMQ's
answers run on it in test_rocketmq_written.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.golden.golden_helpers import (
    MULTIPATH_DIRS,
    Manifest,
    compare_files,
    extract,
    load_manifest,
    rewrite_with_rocketstore,
    run_cli,
    store_files,
)


@pytest.fixture(scope="module")
def manifest() -> Manifest:
    return load_manifest("multipath")


def test_rocketmq_put_file_i_in_the_i_mod_2th_sorted_path(tmp_path: Path) -> None:
    theirs = extract("multipath", tmp_path)
    files = sorted(store_files(theirs)["commitlog"], key=lambda p: p.rsplit("/", 1)[1])
    assert len(files) >= 3  # the second round of the paths is taken
    for i, path in enumerate(files):
        assert path == f"{sorted(MULTIPATH_DIRS)[i % 2]}/{i * 65536:020d}"


@pytest.mark.parametrize("kind", ["commitlog", "consumequeue", "index"])
def test_rewrite_puts_the_same_bytes_in_the_same_places(
    kind: str, manifest: Manifest, tmp_path: Path
) -> None:
    theirs = extract("multipath", tmp_path / "rocketmq")
    ours = tmp_path / "rocketstore" / "multipath"
    rewrite_with_rocketstore(manifest, ours)
    problems = compare_files(kind, ours, theirs, manifest["config"]["maxHashSlotNum"])
    assert not problems, "\n".join(problems)


def _broker_conf(root: Path, manifest: Manifest) -> Path:
    conf = root.parent / "broker.conf"
    paths = ",".join(str(root / d) for d in MULTIPATH_DIRS)
    conf.write_text(
        f"storePathRootDir={root}\nstorePathCommitLog={paths}\n"
        f"mappedFileSizeCommitLog={manifest['config']['mappedFileSizeCommitLog']}\n"
    )
    return conf


@pytest.mark.parametrize("engine", ["single", "local"])
def test_check_and_rebuild_with_the_brokers_settings(
    engine: str, manifest: Manifest, tmp_path: Path
) -> None:
    ours = extract("multipath", tmp_path / "ours")
    reference = extract("multipath", tmp_path / "reference")
    conf = _broker_conf(ours, manifest)
    check = run_cli("-c", conf, "check")
    assert check.returncode == 0, check.stdout + check.stderr
    records = len(manifest["messages"])
    assert f"{records} records" in check.stdout
    done = run_cli("-c", conf, "rebuild", "--engine", engine)
    assert done.returncode == 0, done.stderr
    for kind in ("commitlog", "consumequeue"):
        problems = compare_files(kind, ours, reference, manifest["config"]["maxHashSlotNum"])
        assert not problems, "\n".join(problems)
    if engine == "single":  # the parallel engines name index files by the build's time
        problems = compare_files("index", ours, reference, manifest["config"]["maxHashSlotNum"])
        assert not problems, "\n".join(problems)


def test_stats_counts_only_the_commitlog_files_it_reads(manifest: Manifest, tmp_path: Path) -> None:
    ours = extract("multipath", tmp_path)
    conf = _broker_conf(ours, manifest)
    with_paths = run_cli("-c", conf, "--json", "stats")
    assert json.loads(with_paths.stdout)["commitLog"]["files"] == 3
    # Without them, commitlog/ holds the two paths' directories and no file of its own:
    # the queues would read as full of units (their files' size), so readers refuse.
    alone = run_cli("--store", ours, "--json", "stats")
    assert alone.returncode == 1
    assert "no CommitLog file in" in alone.stderr and "give its storePathCommitLog" in alone.stderr
