"""Stores written by RocketMQ 4.9.8's own DefaultMessageStore, checked against rocketstore.

The corpus (tests/golden/rocketmq-4.9.8/, see tests/golden/README.md) holds, per store, a
tar.gz of the store directory and a JSON manifest of every message put (inputs and what
RocketMQ answered) plus a few getMessage/queryMessage results. Two kinds of checks:

* read: rocketstore opens RocketMQ's store and finds every message by queue offset, key,
  UNIQ_KEY and msgId with every field equal; the crashed store recovers.
* write: rocketstore re-puts the same inputs (same store timestamps, same file sizes) and its
  CommitLog, ConsumeQueue and index files must be byte for byte RocketMQ's. A difference is
  reported as file, offset and field name (spec tables 1.2, 3.1 and 4.1).
"""

from __future__ import annotations

import base64
import json
import os
import struct
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketstore import MessageStore
from rocketstore.config import StoreConfig
from rocketstore.format import properties as props
from rocketstore.format.checkpoint import decode_checkpoint, encode_checkpoint
from rocketstore.format.message import Message, MessageExt
from rocketstore.status import GetStatus

CORPUS = Path(__file__).parent / "rocketmq-4.9.8"
# "recovered" is "crashed" reopened by RocketMQ itself; its manifest has no puts of its own.
STORES = ("basic", "crashed", "recovered")
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
TRANSACTION_MASK = 0xC
PREPARED, ROLLBACK = 0x4, 0xC

Manifest = dict[str, Any]


# --- corpus access --------------------------------------------------------------------------


def load_manifest(name: str) -> Manifest:
    with open(CORPUS / f"{name}.json", encoding="utf-8") as f:
        manifest: Manifest = json.load(f)
    if name == "recovered":
        manifest["messages"] = load_manifest("crashed")["messages"]
    return manifest


def extract(name: str, into: Path) -> Path:
    """Unpack ``name.tar.gz`` under ``into``; the archive holds one directory, ``name/``."""
    with tarfile.open(CORPUS / f"{name}.tar.gz") as tar:
        tar.extractall(into, filter="data")
    return into / name


def store_config(manifest: Manifest) -> StoreConfig:
    c = manifest["config"]
    return StoreConfig(
        mapped_file_size_commit_log=c["mappedFileSizeCommitLog"],
        mapped_file_size_consume_queue=c["mappedFileSizeConsumeQueue"],
        max_hash_slot_num=c["maxHashSlotNum"],
        max_index_num=c["maxIndexNum"],
        store_host=c["storeHost"],
    )


def to_message(entry: Manifest) -> Message:
    return Message(
        topic=entry["topic"],
        body=base64.b64decode(entry["body"]),
        queue_id=entry["queueId"],
        flag=entry["flag"],
        sys_flag=entry["sysFlag"],
        # Kept in the order RocketMQ wrote them (decode preserves order).
        properties=props.decode_properties_str(entry["properties"]),
        born_timestamp=entry["bornTimestamp"],
        born_host=entry["bornHost"],
        reconsume_times=entry["reconsumeTimes"],
        prepared_transaction_offset=entry["preparedTransactionOffset"],
    )


def delay_level(entry: Manifest) -> int:
    level = props.decode_properties_str(entry["properties"]).get(props.DELAY)
    if level is None or transaction_type(entry) in (PREPARED, ROLLBACK):
        return 0
    return int(level)


def stored_place(entry: Manifest) -> tuple[str, int]:
    """Topic and queue the record was stored under (delayed ones are rewritten, spec 1.7)."""
    level = delay_level(entry)
    if level > 0:
        return SCHEDULE_TOPIC, level - 1
    return entry["topic"], entry["queueId"]


def transaction_type(entry: Manifest) -> int:
    sys_flag: int = entry["sysFlag"]
    return sys_flag & TRANSACTION_MASK


def in_consume_queue(entry: Manifest) -> bool:
    return transaction_type(entry) not in (PREPARED, ROLLBACK)


def indexed(entry: Manifest) -> bool:
    return transaction_type(entry) != ROLLBACK


# --- read checks ----------------------------------------------------------------------------


@pytest.fixture(scope="module", params=STORES)
def rocketmq_store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Manifest, MessageStore]]:
    name: str = request.param
    manifest = load_manifest(name)
    root = extract(name, tmp_path_factory.mktemp(name))
    store = MessageStore.open(root, store_config(manifest), read_only=True)
    try:
        yield manifest, store
    finally:
        store.close()


def assert_same_message(entry: Manifest, found: MessageExt) -> None:
    topic, queue_id = stored_place(entry)
    expected_props = props.decode_properties_str(entry["properties"])
    where = f"message at {entry['commitLogOffset']}"
    assert found.commit_log_offset == entry["commitLogOffset"], where
    assert found.topic == topic, where
    assert found.queue_id == queue_id, where
    assert found.queue_offset == entry["queueOffset"], where
    assert found.size == entry["wroteBytes"], where
    assert found.msg_id == entry["msgId"], where
    assert found.body == base64.b64decode(entry["body"]), where
    assert found.flag == entry["flag"], where
    assert found.sys_flag == entry["sysFlag"], where
    assert found.born_timestamp == entry["bornTimestamp"], where
    assert found.born_host == entry["bornHost"], where
    assert found.store_timestamp == entry["storeTimestamp"], where
    assert found.store_host == entry["storeHost"], where
    assert found.reconsume_times == entry["reconsumeTimes"], where
    assert found.prepared_transaction_offset == entry["preparedTransactionOffset"], where
    if topic == SCHEDULE_TOPIC:
        # The CommitLog appends the real destination to the properties (spec 1.7).
        expected_props |= {props.REAL_TOPIC: entry["topic"], props.REAL_QID: str(entry["queueId"])}
    assert found.properties == expected_props, where


def test_every_message_by_msg_id(rocketmq_store: tuple[Manifest, MessageStore]) -> None:
    manifest, store = rocketmq_store
    assert manifest["messages"], "empty manifest"
    for entry in manifest["messages"]:
        found = store.view_message(entry["msgId"])
        assert found is not None, f"msgId {entry['msgId']} not found"
        assert_same_message(entry, found)


def test_every_queued_message_by_queue_offset(
    rocketmq_store: tuple[Manifest, MessageStore],
) -> None:
    manifest, store = rocketmq_store
    for entry in filter(in_consume_queue, manifest["messages"]):
        topic, queue_id = stored_place(entry)
        result = store.get_messages("golden", topic, queue_id, entry["queueOffset"], 1)
        assert result.status is GetStatus.FOUND, (entry["msgId"], result.status)
        assert_same_message(entry, result.messages[0])


def test_every_indexed_message_by_key_and_unique_key(
    rocketmq_store: tuple[Manifest, MessageStore],
) -> None:
    manifest, store = rocketmq_store
    for entry in filter(indexed, manifest["messages"]):
        topic, _ = stored_place(entry)
        properties = props.decode_properties_str(entry["properties"])
        for key in props.split_keys(properties.get(props.KEYS)):
            offsets = {m.commit_log_offset for m in store.query_messages(topic, key, 64)}
            assert entry["commitLogOffset"] in offsets, (topic, key)
        uniq = properties.get(props.UNIQ_KEY)
        if uniq:
            offsets = {m.commit_log_offset for m in store.query_by_unique_key(topic, uniq)}
            assert entry["commitLogOffset"] in offsets, (topic, uniq)


def test_rolled_back_and_prepared_records_stay_out_of_queues(
    rocketmq_store: tuple[Manifest, MessageStore],
) -> None:
    manifest, store = rocketmq_store
    queued = {
        (stored_place(e), e["queueOffset"]) for e in manifest["messages"] if in_consume_queue(e)
    }
    for entry in manifest["messages"]:
        if in_consume_queue(entry):
            continue
        found = store.look_message(entry["commitLogOffset"])
        assert found is not None
        assert_same_message(entry, found)
        # Their queue offset is 0 and does not take a place in the queue (spec 3.3).
        assert entry["queueOffset"] == 0
        place = stored_place(entry)
        if store.max_offset(*place) > 0:
            head = store.get_messages("golden", *place, 0, 1).messages[0]
            assert head.commit_log_offset != entry["commitLogOffset"]
            assert (place, 0) in queued


def test_get_message_answers_match_rocketmq(
    rocketmq_store: tuple[Manifest, MessageStore],
) -> None:
    manifest, store = rocketmq_store
    for call in manifest["getMessage"]:
        result = store.get_messages(
            "GoldenGroup", call["topic"], call["queueId"], call["queueOffset"], call["maxCount"]
        )
        got = {
            "status": result.status.name,
            "nextBeginOffset": result.next_begin_offset,
            "minOffset": result.min_offset,
            "maxOffset": result.max_offset,
            "commitLogOffsets": [m.commit_log_offset for m in result.messages],
        }
        want = {k: call[k] for k in got}
        assert got == want, call


def test_query_message_answers_match_rocketmq(
    rocketmq_store: tuple[Manifest, MessageStore],
) -> None:
    """RocketMQ's store returns every index hit unfiltered and its client keeps the records
    of the queried topic whose KEYS hold the key (spec 4.5); rocketstore filters itself.
    So ours must equal RocketMQ's answer after the client's filter, and a UNIQ_KEY lookup
    goes through query_by_unique_key."""
    manifest, store = rocketmq_store
    by_offset = {e["commitLogOffset"]: e for e in manifest["messages"]}
    uniq_keys = {
        props.decode_properties_str(e["properties"]).get(props.UNIQ_KEY)
        for e in manifest["messages"]
    }
    assert manifest["queryMessage"]
    for call in manifest["queryMessage"]:
        topic, key = call["topic"], call["key"]
        if key in uniq_keys:
            found = store.query_by_unique_key(topic, key)
            want = sorted(call["commitLogOffsets"])
            assert want, call
        else:
            found = store.query_messages(topic, key, call["maxCount"])
            want = sorted(
                offset
                for offset in call["commitLogOffsets"]
                if stored_place(by_offset[offset])[0] == topic
                and key
                in props.split_keys(
                    props.decode_properties_str(by_offset[offset]["properties"]).get(props.KEYS)
                )
            )
        # RocketMQ lists newest index entries first; ours are oldest first. Same set.
        assert sorted(m.commit_log_offset for m in found) == want, call


def test_corpus_is_what_the_readme_says() -> None:
    basic = load_manifest("basic")
    crashed = load_manifest("crashed")
    assert basic["cleanShutdown"] is True and crashed["cleanShutdown"] is False
    with tarfile.open(CORPUS / "basic.tar.gz") as tar:
        names = tar.getnames()
    assert "basic/checkpoint" in names and "basic/abort" not in names
    with tarfile.open(CORPUS / "crashed.tar.gz") as tar:
        assert "crashed/abort" in tar.getnames()
    entries = basic["messages"]
    sys_flags = {e["sysFlag"] for e in entries}
    assert {0x1, 0x10, 0x30, 0x4, 0x8, 0xC} <= sys_flags
    assert any(e["kind"] == "batch" for e in entries)
    assert any(delay_level(e) for e in entries)
    assert any(e["body"] == "" for e in entries)
    # At least one END_OF_FILE blank: some record starts a file that another did not fill.
    size = basic["config"]["mappedFileSizeCommitLog"]
    ends = {e["commitLogOffset"] + e["wroteBytes"] for e in entries}
    starts = {e["commitLogOffset"] for e in entries}
    assert any(s % size == 0 and s > 0 and s not in ends for s in starts)


def test_crashed_store_recovers_every_message(tmp_path: Path) -> None:
    manifest = load_manifest("crashed")
    root = extract("crashed", tmp_path)
    assert (root / "abort").exists()
    with MessageStore.open(root, store_config(manifest)) as store:
        for entry in manifest["messages"]:
            found = store.view_message(entry["msgId"])
            assert found is not None, entry["msgId"]
            assert_same_message(entry, found)
            topic, queue_id = stored_place(entry)
            result = store.get_messages("golden", topic, queue_id, entry["queueOffset"], 1)
            assert result.messages[0].commit_log_offset == entry["commitLogOffset"]
        last = max(manifest["messages"], key=lambda e: e["commitLogOffset"])
        assert store.max_commit_log_offset() == last["commitLogOffset"] + last["wroteBytes"]
    assert not (root / "abort").exists()


# --- write checks: rocketstore's bytes against RocketMQ's -------------------------------------

RECORD_FIELDS = (
    (0, 4, "TOTALSIZE"),
    (4, 4, "MAGICCODE"),
    (8, 4, "BODYCRC"),
    (12, 4, "QUEUEID"),
    (16, 4, "FLAG"),
    (20, 8, "QUEUEOFFSET"),
    (28, 8, "PHYSICALOFFSET"),
    (36, 4, "SYSFLAG"),
    (40, 8, "BORNTIMESTAMP"),
)
CQ_FIELDS = ((0, 8, "commitLogOffset"), (8, 4, "size"), (12, 8, "tagsCode"))
INDEX_HEADER_FIELDS = (
    (0, 8, "beginTimestamp"),
    (8, 8, "endTimestamp"),
    (16, 8, "beginPhyOffset"),
    (24, 8, "endPhyOffset"),
    (32, 4, "hashSlotCount"),
    (36, 4, "indexCount"),
)
INDEX_ENTRY_FIELDS = ((0, 4, "keyHash"), (4, 8, "phyOffset"), (12, 4, "timeDiff"), (16, 4, "prev"))


def _record_field(data: bytes, start: int, position: int) -> str:
    """Name the field of the record starting at ``start`` that holds ``position`` (spec 1.2)."""
    rel = position - start
    for offset, width, name in RECORD_FIELDS:
        if offset <= rel < offset + width:
            return name
    sys_flag = struct.unpack_from(">i", data, start + 36)[0]
    born = 20 if sys_flag & 0x10 else 8
    stored = 20 if sys_flag & 0x20 else 8
    layout = [("BORNHOST", born), ("STORETIMESTAMP", 8), ("STOREHOSTADDRESS", stored)]
    layout += [("RECONSUMETIMES", 4), ("PREPAREDTRANSACTIONOFFSET", 8), ("BODYLEN", 4)]
    cursor = 48
    for name, width in layout:
        if rel < cursor + width:
            return name
        cursor += width
    body_len = struct.unpack_from(">i", data, start + cursor - 4)[0]
    if rel < cursor + body_len:
        return "BODY"
    cursor += body_len
    topic_len = data[start + cursor]
    if rel <= cursor + topic_len:
        return "TOPICLEN+TOPIC"
    return "PROPLEN+PROPERTIES"


def name_commitlog_field(data: bytes, position: int) -> str:
    """Walk the records of a CommitLog file to the one holding ``position``."""
    start = 0
    while start + 8 <= len(data):
        size, magic = struct.unpack_from(">ii", data, start)
        if magic == -875286124:  # END_OF_FILE blank (spec 1.3)
            return f"END_OF_FILE blank at {start}"
        if size <= 0:
            return "after the last record"
        if position < start + size:
            return f"record at {start}: {_record_field(data, start, position)}"
        start += size
    return "after the last record"


def name_field(kind: str, data: bytes, position: int, slots: int) -> str:
    if kind == "commitlog":
        return name_commitlog_field(data, position)
    if kind == "consumequeue":
        unit, rel = divmod(position, 20)
        return f"unit {unit}: " + next(n for o, w, n in CQ_FIELDS if o <= rel < o + w)
    if position < 40:
        return "header " + next(n for o, w, n in INDEX_HEADER_FIELDS if o <= position < o + w)
    if position < 40 + 4 * slots:
        return f"slot {(position - 40) // 4}"
    entry, rel = divmod(position - 40 - 4 * slots, 20)
    return f"entry {entry}: " + next(n for o, w, n in INDEX_ENTRY_FIELDS if o <= rel < o + w)


def describe_differences(
    kind: str, path: str, ours: bytes, theirs: bytes, slots: int, limit: int = 12
) -> list[str]:
    out: list[str] = []
    if len(ours) != len(theirs):
        out.append(f"{path}: size {len(ours)} (ours) != {len(theirs)} (RocketMQ)")
    position = 0
    common = min(len(ours), len(theirs))
    while position < common and len(out) < limit:
        if ours[position] == theirs[position]:
            position += 1
            continue
        end = position
        while end < common and ours[end] != theirs[end]:
            end += 1
        field = name_field(kind, theirs, position, slots)
        out.append(
            f"{path} @{position}..{end}: {field}: ours {ours[position:end][:16].hex()} "
            f"RocketMQ {theirs[position:end][:16].hex()}"
        )
        position = end
    return out


def store_files(root: Path) -> dict[str, list[str]]:
    """Relative paths of the compared files by kind; index files in name (= time) order."""
    files: dict[str, list[str]] = {"commitlog": [], "consumequeue": [], "index": []}
    for kind, paths in files.items():
        for dirpath, _dirs, names in os.walk(root / kind):
            paths.extend(os.path.relpath(os.path.join(dirpath, n), root) for n in names)
        paths.sort()
    return files


def rewrite_with_rocketstore(manifest: Manifest, root: Path) -> None:
    """Put the manifest's inputs in RocketMQ's order with RocketMQ's store timestamps."""
    entries = manifest["messages"]
    with MessageStore.open(root, store_config(manifest)) as store:
        i = 0
        while i < len(entries):
            entry = entries[i]
            if entry["kind"] == "batch":
                group = [entry]
                while (
                    i + len(group) < len(entries)
                    and entries[i + len(group)]["kind"] == "batch"
                    and entries[i + len(group)]["indexInBatch"] > 0
                ):
                    group.append(entries[i + len(group)])
                results = store.put_batch(
                    [to_message(e) for e in group], entry["storeTimestamp"], entry["storeHost"]
                )
                got = [(r.status.name, r.commit_log_offset, r.msg_id) for r in results]
                want = [("PUT_OK", e["commitLogOffset"], e["msgId"]) for e in group]
                assert got == want, f"batch at {entry['commitLogOffset']}"
                i += len(group)
                continue
            result = store.put(to_message(entry), entry["storeTimestamp"], entry["storeHost"])
            got1 = (result.status.name, result.commit_log_offset, result.queue_offset)
            want1 = ("PUT_OK", entry["commitLogOffset"], entry["queueOffset"])
            assert got1 == want1, f"message {i}"
            assert result.msg_id == entry["msgId"]
            assert result.size == entry["wroteBytes"]
            i += 1
        store.wait_dispatched()


@pytest.fixture(scope="module")
def rewritten(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, int]:
    manifest = load_manifest("basic")
    theirs = extract("basic", tmp_path_factory.mktemp("rocketmq"))
    ours = tmp_path_factory.mktemp("rocketstore") / "basic"
    rewrite_with_rocketstore(manifest, ours)
    return ours, theirs, manifest["config"]["maxHashSlotNum"]


def compare_files(
    kind: str, ours: Path, theirs: Path, slots: int, only: slice = slice(None)
) -> list[str]:
    """Differences between the two stores' files of ``kind`` (``only``: which index files)."""
    our_files = store_files(ours)[kind]
    their_files = store_files(theirs)[kind]
    assert their_files, f"the corpus has no {kind} files"
    if kind == "index":
        # Names are creation times: compare the n-th file with the n-th file.
        if len(our_files) != len(their_files):
            return [f"index files: ours {our_files}, RocketMQ {their_files}"]
        pairs = list(zip(our_files, their_files, strict=True))[only]
    else:
        if our_files != their_files:
            return [f"{kind} files: ours {our_files}, RocketMQ {their_files}"]
        pairs = [(f, f) for f in our_files]
    problems: list[str] = []
    for mine, other in pairs:
        problems += describe_differences(
            kind, other, (ours / mine).read_bytes(), (theirs / other).read_bytes(), slots
        )
    return problems


@pytest.mark.parametrize("kind", ["commitlog", "consumequeue", "index"])
def test_rewrite_is_byte_identical(kind: str, rewritten: tuple[Path, Path, int]) -> None:
    ours, theirs, slots = rewritten
    problems = compare_files(kind, ours, theirs, slots)
    assert not problems, "\n".join(problems)


@pytest.fixture(scope="module")
def recovered(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, int]:
    """rocketstore's recovery of `crashed` next to RocketMQ's recovery of the same files."""
    manifest = load_manifest("crashed")
    ours = extract("crashed", tmp_path_factory.mktemp("rocketstore"))
    with MessageStore.open(ours, store_config(manifest)) as store:
        store.wait_dispatched()
    theirs = extract("recovered", tmp_path_factory.mktemp("rocketmq"))
    return ours, theirs, manifest["config"]["maxHashSlotNum"]


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
def test_recovery_leaves_the_files_rocketmq_leaves(
    kind: str, recovered: tuple[Path, Path, int], tmp_path: Path
) -> None:
    ours, theirs, slots = recovered
    rebuilt = index_files_rocketmq_rebuilds(extract("crashed", tmp_path))
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


def test_recovery_keeps_the_newest_index_files_rocketmq_rebuilds(
    recovered: tuple[Path, Path, int], tmp_path: Path
) -> None:
    """The one documented difference (docs/recovery.md): after a crash RocketMQ 4.9.8
    destroys the index files newer than the checkpoint and re-indexes from its recovery
    start, which indexes the keys of the record at the previous file's endPhyOffset a
    second time; rocketstore keeps those files and drops only entries past the recovered
    end. So RocketMQ's rebuilt files hold exactly our entries plus duplicates of keys of
    that one record, and a key query finds the same messages in both."""
    ours, theirs, slots = recovered
    rebuilt = index_files_rocketmq_rebuilds(extract("crashed", tmp_path))
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


@pytest.mark.parametrize("name", STORES)
def test_checkpoint_reads_and_encodes_as_rocketmq_wrote_it(name: str, tmp_path: Path) -> None:
    manifest = load_manifest(name)
    raw = (extract(name, tmp_path) / "checkpoint").read_bytes()
    checkpoint = decode_checkpoint(raw)
    assert encode_checkpoint(checkpoint) == raw
    times = [e["storeTimestamp"] for e in manifest["messages"]]
    for value in checkpoint[:3]:
        assert min(times) <= value <= max(times), (name, checkpoint)
