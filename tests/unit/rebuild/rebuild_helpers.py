"""Stores for the rebuild tests, written by the store's own dispatcher (the reference), and
byte-for-byte comparison of their consume queues, index files and checkpoint.

Also imported by tests/spark/test_rebuild.py and tests/cli/test_rebuild_engines.py.
"""

from __future__ import annotations

import os
from pathlib import Path

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.format import sysflag
from rocketstore.format.checkpoint import decode_checkpoint
from rocketstore.paths import CHECKPOINT_FILE, CONSUME_QUEUE_DIR, INDEX_DIR

# The one-record-at-a-time dispatch reference lives with the dispatcher's tests.
from tests.unit.services.per_record_dispatch import dispatch_per_record

BASE_MS = 1_700_000_000_000
LAYOUT = {"Orders": 4, "Payments": 2, "%RETRY%groupA": 1}


def small_config(**changes: object) -> StoreConfig:
    config = StoreConfig(
        mapped_file_size_commit_log=16 * 1024,  # many files, each ending in a blank
        mapped_file_size_consume_queue=8 * 20,  # 8 units a file
        max_hash_slot_num=10,
        max_index_num=40,  # 39 entries a file: many rolled index files (4 per slot, so
        # the engine and the CLI find this geometry from the file size)
    )
    return config.replace(**changes) if changes else config


def _keys(i: int) -> str | None:
    """0 to 3 KEYS tokens, with empty tokens and a non-ASCII one now and then."""
    kind = i % 6
    if kind == 0:
        return None
    if kind == 1:
        return f"k{i}"
    if kind == 2:
        return f"k{i}  shared"  # an empty token between the two
    if kind == 3:
        return f"a{i} b{i} c{i}"
    if kind == 4:
        return f"ключ{i}"
    return " "  # only separators: no key


def message(topic: str, qid: int, i: int) -> Message:
    properties: dict[str, str] = {"TAGS": ("TagA", "TagB", "Tág")[i % 3]}
    keys = _keys(i)
    if keys is not None:
        properties["KEYS"] = keys
    if i % 4 != 1:
        properties["UNIQ_KEY"] = f"U{topic}{qid:02d}{i:05d}"
    return Message(
        topic=topic,
        body=f"body {topic} {qid} {i} ".encode() * (1 + i % 5),
        queue_id=qid,
        flag=i % 4,
        properties=properties,
        born_timestamp=BASE_MS - 5_000 + i,
        born_host="10.0.0.7:4321",
    )


def build_store(root: Path, rounds: int = 40, config: StoreConfig | None = None) -> int:
    """Messages round-robin over every queue, plus transaction records (PREPARED, COMMIT,
    ROLLBACK), delayed messages (SCHEDULE_TOPIC_XXXX), IPv6 hosts and a batch. Returns the
    number of records."""
    n = 0
    with MessageStore.open(root, config or small_config()) as store:

        def put(msg: Message, host: str | None = None) -> int:
            nonlocal n
            result = store.put(msg, BASE_MS + 7 * n + (n // 50) * 3_600_000, host)
            assert result.ok, result
            n += 1
            return result.commit_log_offset

        for i in range(rounds):
            for topic, count in LAYOUT.items():
                for qid in range(count):
                    put(message(topic, qid, i), "[::1]:10911" if i % 5 == 4 else None)
            if i % 3 == 1:
                prepared = message("Orders", 1, 1000 + i)
                prepared.sys_flag = sysflag.TRANSACTION_PREPARED_TYPE
                at = put(prepared)
                end = message("Orders", 1, 2000 + i)
                end.sys_flag = (
                    sysflag.TRANSACTION_COMMIT_TYPE if i % 2 else sysflag.TRANSACTION_ROLLBACK_TYPE
                )
                end.prepared_transaction_offset = at
                put(end)
            if i % 4 == 2:
                delayed = message("Payments", 0, 3000 + i)
                delayed.properties["DELAY"] = str(1 + i % 20)  # 19, 20: clamped to 18
                put(delayed)
        batch = [message("Payments", 1, 4000 + k) for k in range(3)]
        results = store.put_batch(batch, BASE_MS + 7 * n + 1)
        assert all(r.ok for r in results)
        n += len(batch)
        store.wait_dispatched()
    return n


def lmq_config() -> StoreConfig:
    return small_config(enable_multi_dispatch=True, enable_lmq=True)


def build_lmq_store(root: Path, count: int = 300) -> None:
    """Messages of two topics, most naming LMQ queues in INNER_MULTI_DISPATCH (one, two,
    a name twice, a plain queue that takes the message's queue id, a blank), so the
    dispatcher writes their extra units; through the store's own multi-dispatch put."""
    lists = ["%LMQ%a", "%LMQ%a,%LMQ%b", "%LMQ%b,%LMQ%c", "%LMQ%c,%LMQ%c", "PlainQ", " ", ""]
    with MessageStore.open(root, lmq_config()) as store:
        for i in range(count):
            msg = message("Orders" if i % 3 else "Payments", i % 2, i)
            names = lists[i % len(lists)]
            if names:
                msg.properties["INNER_MULTI_DISPATCH"] = names
            assert store.put(msg, BASE_MS + 11 * i).ok
        store.wait_dispatched()


def files_under(root: Path, part: str) -> dict[str, bytes]:
    base = root / part
    found: dict[str, bytes] = {}
    for directory, _dirs, names in os.walk(base):
        for name in names:
            path = Path(directory) / name
            found[str(path.relative_to(base))] = path.read_bytes()
    return found


def index_files(root: Path) -> list[bytes]:
    """Index file contents in name order (names are creation times, so not compared)."""
    base = root / INDEX_DIR
    if not base.is_dir():
        return []
    return [(base / n).read_bytes() for n in sorted(os.listdir(base))]


def assert_same_queues(rebuilt: Path, reference: Path) -> None:
    got, want = files_under(rebuilt, CONSUME_QUEUE_DIR), files_under(reference, CONSUME_QUEUE_DIR)
    assert sorted(got) == sorted(want)
    for name in want:
        assert got[name] == want[name], f"consume queue file {name} differs"


def assert_same_index(rebuilt: Path, reference: Path) -> None:
    got, want = index_files(rebuilt), index_files(reference)
    assert len(got) == len(want)
    for number, (a, b) in enumerate(zip(got, want, strict=True)):
        assert a == b, f"index file #{number} differs"


def checkpoint_of(root: Path) -> tuple[int, int, int]:
    value = decode_checkpoint((root / CHECKPOINT_FILE).read_bytes())
    return value.physic_msg_timestamp, value.logics_msg_timestamp, value.index_msg_timestamp


def last_store_timestamp(root: Path) -> int:
    with MessageStore.open(root, small_config(), read_only=True) as store:
        return store.commitlog.last_store_timestamp()


def dispatch_reference(
    source: Path, target: Path, skip: dict[int, int], config: StoreConfig
) -> None:
    """What the store's own dispatcher writes for ``source``'s CommitLog without the records
    in ``skip`` (offset -> size before they were damaged): every other record, in CommitLog
    order, dispatched one by one (``per_record_dispatch``) into an empty store at ``target``."""
    from rocketstore.format import record as rec

    with MessageStore.open(target, config) as store:
        commitlog = source / "commitlog"
        for name in sorted(os.listdir(commitlog)):
            data = (commitlog / name).read_bytes()
            views = []
            position = 0
            base = int(name)
            while position + 8 <= len(data):
                if base + position in skip:
                    position += skip[base + position]
                    continue
                if not any(data[position : position + 8]):
                    break  # the end of the data
                view = rec.read_record(data, position)
                if isinstance(view, rec.Blank):
                    break
                views.append(view)
                position += view.size
            if views:
                dispatch_per_record(store, data, views)


def record_offsets(root: Path, config: StoreConfig) -> list[tuple[int, int]]:
    """(offset, size) of every record, in CommitLog order."""
    with MessageStore.open(root, config, read_only=True) as store:
        found = []
        offset = store.min_commit_log_offset()
        end = store.max_commit_log_offset()
        while offset < end:
            got = store.commitlog.read_record(offset)
            if got is None:
                offset = store.commitlog.roll_next_file(offset)
                continue
            found.append((offset, got[1].size))
            offset += got[1].size
        return found


def damage(root: Path, offset: int, at: int, value: bytes, file_size: int) -> None:
    """Overwrite bytes ``at`` bytes into the record at CommitLog ``offset``."""
    path = root / "commitlog" / f"{offset - offset % file_size:020d}"
    with open(path, "r+b") as f:
        f.seek(offset % file_size + at)
        f.write(value)
