"""What the golden-corpus tests share: the corpora, reading a manifest and a store, the
fields of a message as RocketMQ put it, and naming the field of a differing byte."""

from __future__ import annotations

import base64
import json
import os
import struct
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from rocketstore import MessageStore
from rocketstore.config import StoreConfig
from rocketstore.format import properties as props
from rocketstore.format.message import Message, MessageExt
from rocketstore.format.record import MESSAGE_MAGIC_V1, MESSAGE_MAGIC_V2

V4 = Path(__file__).parent / "rocketmq-4.9.8"
V5 = Path(__file__).parent / "rocketmq-5.3.3"
CORPUS = V4  # the corpus of the write checks (and the default of the helpers)
# "recovered" is "crashed" reopened by RocketMQ itself; its manifest has no puts of its own.
STORES = ("basic", "crashed", "recovered")
CORPORA = {
    V4: (*STORES, "multipath", "cqext", "dledger", "dledgermixed"),
    V5: (*STORES, "propcrc", "dledger"),
}
# The `multipath` store's storePathCommitLog, under its root, in the order it was given.
MULTIPATH_DIRS = ("commitlog/b", "commitlog/a")
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
TRANSACTION_MASK = 0xC
PREPARED, ROLLBACK = 0x4, 0xC
# enabledAppendPropCRC (5.x): "__CRC32#" \x01 ten digits \x02 ends every record (20 bytes).
CRC32_RESERVED_BYTES = len(props.CRC32_PROPERTY) + 1 + 10 + 1

Manifest = dict[str, Any]


def version_of(corpus: Path) -> str:
    return corpus.name.removeprefix("rocketmq-")


def corpus_params(*, as_tuple: bool = False) -> list[Any]:
    """(corpus, store) pairs as pytest params, with ids such as ``5.3.3-basic``; a fixture's
    params take each pair as one value (``as_tuple``)."""
    return [
        pytest.param(
            *([(corpus, name)] if as_tuple else [corpus, name]), id=f"{version_of(corpus)}-{name}"
        )
        for corpus, names in CORPORA.items()
        for name in names
    ]


BOTH = [pytest.param(corpus, id=version_of(corpus)) for corpus in CORPORA]


# --- corpus access --------------------------------------------------------------------------


def load_manifest(name: str, corpus: Path = CORPUS) -> Manifest:
    with open(corpus / f"{name}.json", encoding="utf-8") as f:
        manifest: Manifest = json.load(f)
    if name == "recovered":
        manifest["messages"] = load_manifest("crashed", corpus)["messages"]
    return manifest


def extract(name: str, into: Path, corpus: Path = CORPUS) -> Path:
    """Unpack ``name.tar.gz`` under ``into``; the archive holds one directory, ``name/``."""
    with tarfile.open(corpus / f"{name}.tar.gz") as tar:
        tar.extractall(into, filter="data")
    return into / name


def run_cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """The rocketstore command, as an operator runs it."""
    return subprocess.run(
        [sys.executable, "-m", "rocketstore.cli.main", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def prop_crc(manifest: Manifest) -> bool:
    """Whether the store was written with enabledAppendPropCRC (5.x manifests say so)."""
    return bool(manifest["config"].get("enabledAppendPropCRC", False))


def store_config(manifest: Manifest, root: Path | None = None) -> StoreConfig:
    """The settings the manifest's store was written with; for the `multipath` store at
    ``root``, its CommitLog paths there."""
    c = manifest["config"]
    paths = ""
    if manifest["mode"] == "multipath":
        assert root is not None, "the multipath store's paths are under its root"
        paths = ",".join(str(root / d) for d in MULTIPATH_DIRS)
    return StoreConfig(
        mapped_file_size_commit_log=c["mappedFileSizeCommitLog"],
        mapped_file_size_consume_queue=c["mappedFileSizeConsumeQueue"],
        max_hash_slot_num=c["maxHashSlotNum"],
        max_index_num=c["maxIndexNum"],
        store_host=c["storeHost"],
        store_path_commit_log=paths,
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


def assert_same_message(entry: Manifest, found: MessageExt, with_crc: bool = False) -> None:
    """Every field of ``found`` as the manifest has it. ``with_crc``: the store appends a
    __CRC32# property to every record (checked in value by test_prop_crc_*)."""
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
    found_props = dict(found.properties)
    if with_crc:
        crc = found_props.pop(props.CRC32_PROPERTY, "")
        assert len(crc) == 10 and crc.isdigit(), (where, crc)
    assert found_props == expected_props, where


# --- raw records ---------------------------------------------------------------------------


def raw_record(root: Path, entry: Manifest, file_size: int) -> bytes:
    """The record's bytes as RocketMQ wrote them, read straight from its CommitLog file."""
    start = entry["commitLogOffset"]
    path = root / "commitlog" / f"{start - start % file_size:020d}"
    with open(path, "rb") as f:
        f.seek(start % file_size)
        return f.read(entry["wroteBytes"])


def topic_field(record: bytes) -> tuple[int, int]:
    """(width of the topic length field, topic length) of a record (spec 1.2: v1 has 1 byte,
    v2 has 2)."""
    sys_flag = struct.unpack_from(">i", record, 36)[0]
    cursor = 48 + (20 if sys_flag & 0x10 else 8) + 8 + (20 if sys_flag & 0x20 else 8) + 12
    body_len = struct.unpack_from(">i", record, cursor)[0]
    cursor += 4 + body_len
    magic = struct.unpack_from(">i", record, 4)[0]
    if magic == MESSAGE_MAGIC_V2:
        return 2, struct.unpack_from(">h", record, cursor)[0]
    assert magic == MESSAGE_MAGIC_V1, magic
    return 1, record[cursor]


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
    with MessageStore.open(root, store_config(manifest, root)) as store:
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
