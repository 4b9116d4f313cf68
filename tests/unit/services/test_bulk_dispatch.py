"""The bulk dispatcher against dispatching one record at a time: on random stores (blanks
and CommitLog rollovers, consume-queue and index rollovers, delayed, transactional and
IPv6 records, non-ASCII properties) both must write the same consume-queue and index bytes,
live and when recovery re-dispatches after the queues and the index are lost."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import numpy as np
import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.consume_queue import ConsumeQueue
from rocketstore.format import sysflag
from rocketstore.paths import (
    ABORT_FILE,
    COMMITLOG_DIR,
    CONSUME_QUEUE_DIR,
    INDEX_DIR,
    SCHEDULE_TOPIC,
)
from tests.unit.rebuild.rebuild_helpers import assert_same_index, assert_same_queues, index_files
from tests.unit.services.per_record_dispatch import commitlog_records, dispatch_per_record

CONFIG = StoreConfig(
    mapped_file_size_commit_log=16 * 1024,  # many files, each ending in a blank
    mapped_file_size_consume_queue=8 * 20,  # 8 units a file
    max_hash_slot_num=10,
    max_index_num=40,  # 39 entries a file: many index rollovers
)
TOPICS = ["orders", "pay-ments", "t_3"]


def _properties(rng: random.Random) -> dict[str, str]:
    found: dict[str, str] = {}
    kind = rng.randrange(8)
    if kind:
        found["TAGS"] = rng.choice(["a", "tag-b", "标签", "x y"])
    if rng.random() < 0.8:
        found["UNIQ_KEY"] = f"{rng.getrandbits(64):016X}"
    if rng.random() < 0.7:
        tokens = [
            rng.choice(["k1", "key-2", "", "ключ", f"k{rng.randrange(99)}"]) for _ in range(3)
        ]
        found["KEYS"] = " ".join(tokens[: rng.randrange(1, 4)])
    if rng.random() < 0.1:
        found["DELAY"] = str(rng.choice([1, 3, 18]))
    return found


def _message(rng: random.Random) -> Message:
    flag = rng.choice(
        [sysflag.TRANSACTION_NOT_TYPE] * 6
        + [
            sysflag.TRANSACTION_PREPARED_TYPE,
            sysflag.TRANSACTION_COMMIT_TYPE,
            sysflag.TRANSACTION_ROLLBACK_TYPE,
        ]
    )
    return Message(
        topic=rng.choice(TOPICS),
        body=rng.randbytes(rng.choice([0, 10, 100, 700])),
        queue_id=rng.randrange(3),
        sys_flag=flag,
        properties=_properties(rng),
        born_host=rng.choice(["10.0.0.1:4000", "[::1]:5000", "[2001:db8::7]:6000"]),
    )


def _fill(store: MessageStore, rng: random.Random, count: int) -> None:
    """Random singles and batches (IPv4 and IPv6 store hosts), delayed messages, a
    SCHEDULE_TOPIC record stored as it is, with dispatch runs cut at random points."""
    done = 0
    while done < count:
        host = rng.choice([None, "[::2]:10911"])
        if rng.random() < 0.3:
            batch = [
                Message(
                    rng.choice(TOPICS),
                    rng.randbytes(rng.randrange(200)),
                    queue_id=rng.randrange(3),
                    properties={k: v for k, v in _properties(rng).items() if k != "DELAY"},
                )
                for _ in range(rng.randrange(1, 12))
            ]
            store.put_batch(batch, store_host=host)
            done += len(batch)
        elif rng.random() < 0.03:
            raw = Message(SCHEDULE_TOPIC, b"due", properties={"DELAY": "99", "TAGS": "t"})
            store.put(raw, store_host=host, delay=False)
            done += 1
        else:
            store.put(_message(rng), store_host=host)
            done += 1
        if rng.random() < 0.1:
            store.wait_dispatched()


def _reference(source: Path, target: Path) -> None:
    """Dispatch ``source``'s CommitLog one record at a time into an empty store."""
    with MessageStore.open(target, CONFIG) as store:
        commitlog = source / COMMITLOG_DIR
        for name in sorted(os.listdir(commitlog)):
            data = (commitlog / name).read_bytes()
            dispatch_per_record(store, data, commitlog_records(data))


def _assert_same_dispatch(root: Path, reference: Path) -> None:
    assert_same_queues(root, reference)
    assert_same_index(root, reference)


@pytest.mark.parametrize("seed", range(6))
def test_bulk_dispatch_writes_what_per_record_dispatch_writes(tmp_path, seed):
    rng = random.Random(seed)
    root, reference = tmp_path / "store", tmp_path / "reference"
    with MessageStore.open(root, CONFIG) as store:
        _fill(store, rng, 300)
        assert store.dispatcher.corrupt_skipped_bytes == 0
    assert len(os.listdir(root / COMMITLOG_DIR)) > 3  # rollovers, each file ends in a blank
    _reference(root, reference)
    _assert_same_dispatch(root, reference)
    assert len(index_files(root)) > 3


@pytest.mark.parametrize("seed", range(3))
def test_recovery_redispatch_writes_what_per_record_dispatch_writes(tmp_path, seed):
    """Queues and index lost in a crash: recovery's bulk scan finds what is missing and
    the bulk re-dispatch rebuilds the same bytes."""
    rng = random.Random(100 + seed)
    root, reference = tmp_path / "store", tmp_path / "reference"
    with MessageStore.open(root, CONFIG) as store:
        _fill(store, rng, 250)
    _reference(root, reference)
    shutil.rmtree(root / INDEX_DIR)
    lost = sorted((root / CONSUME_QUEUE_DIR).iterdir())[rng.randrange(len(TOPICS))]
    shutil.rmtree(lost)
    (root / ABORT_FILE).touch()  # as a crash leaves it
    with MessageStore.open(root, CONFIG) as store:
        report = store.recovery_report
        # From the first record that has index keys or a unit in the lost queue.
        assert report.redispatch_from is not None
        assert report.redispatched_records > 0
    _assert_same_dispatch(root, reference)


def test_recovery_redispatches_only_the_undispatched_tail(tmp_path):
    rng = random.Random(7)
    root = tmp_path / "store"
    with MessageStore.open(root, CONFIG) as store:
        _fill(store, rng, 120)
        store.wait_dispatched()
        dispatched = store.max_commit_log_offset()
        store.dispatcher.shutdown(catch_up=False)
        for _ in range(20):
            store.put(Message("orders", b"late", properties={"KEYS": "late"}))
        end = store.max_commit_log_offset()
        store.commitlog.flush()
        # A crash: nothing else reaches the disk, the abort file stays.
        shutil.copytree(root, tmp_path / "crashed")
    crashed = tmp_path / "crashed"
    with MessageStore.open(crashed, CONFIG) as store:
        report = store.recovery_report
        assert report.commit_log_end == end
        assert report.redispatch_from is not None
        assert dispatched <= report.redispatch_from < end
        assert report.redispatched_records == 20
        found = store.query_messages("orders", "late", 100, 0, 2**62)
        assert len(found) == 20


# --- ConsumeQueue.put_many ------------------------------------------------------------


def _units(*rows: tuple[int, int, int, int]) -> tuple[np.ndarray, ...]:
    columns = list(zip(*rows, strict=True))
    return tuple(np.asarray(c, dtype=np.int64) for c in columns)


@pytest.mark.parametrize(
    "queue_offsets",
    [
        list(range(0, 30)),  # plain run across several files
        list(range(5, 30)),  # a first unit at 5: blank fill first
        [0, 1, 2, 2, 3, 4, 9, 10, 11],  # a duplicate and a gap
        [0, 1, 0, 2, 3],  # offset 0 again (appended anyway)
    ],
    ids=["run", "first-at-5", "duplicate-and-gap", "zero-again"],
)
def test_put_many_writes_what_put_writes(tmp_path, queue_offsets):
    rows = [(1000 + 100 * i, 90, i * 7 - 3, q) for i, q in enumerate(queue_offsets)]
    one = ConsumeQueue(str(tmp_path / "one"), "t", 0, 8 * 20, writable=True)
    bulk = ConsumeQueue(str(tmp_path / "bulk"), "t", 0, 8 * 20, writable=True)
    for row in rows[:3]:
        one.put(*row)
    for row in rows[3:]:
        one.put(*row)
    bulk.put_many(*_units(*rows[:3]))
    bulk.put_many(*_units(*rows[3:]))
    # A repeated run (re-dispatch after a crash) is all duplicates.
    bulk.put_many(*_units(*rows))
    for row in rows:
        one.put(*row)
    assert bulk.max_offset() == one.max_offset()
    assert bulk.max_physic_offset == one.max_physic_offset
    assert [m.file_from_offset for m in bulk.files.files] == [
        m.file_from_offset for m in one.files.files
    ]
    for a, b in zip(bulk.files.files, one.files.files, strict=True):
        assert a.wrote_position == b.wrote_position
        assert a.read(0, a.file_size) == b.read(0, b.file_size)
