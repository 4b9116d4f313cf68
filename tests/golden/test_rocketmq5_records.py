"""Records only RocketMQ 5.x writes, in the 5.3.3 corpus: MESSAGE_VERSION_V2 (topics past
127 characters, a 2-byte topic length) and the property CRC of enabledAppendPropCRC."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from rocketstore import MessageStore
from rocketstore.check import check_store
from rocketstore.format import properties as props
from rocketstore.format.record import MESSAGE_MAGIC_V2
from rocketstore.status import GetStatus
from tests.golden.golden_helpers import (
    CRC32_RESERVED_BYTES,
    V5,
    assert_same_message,
    extract,
    load_manifest,
    prop_crc,
    raw_record,
    store_config,
    stored_place,
    topic_field,
)


@pytest.mark.parametrize("name", ["basic", "crashed", "propcrc"])
def test_long_topics_are_v2_records_read_with_every_field(name: str, tmp_path: Path) -> None:
    """RocketMQ 5.x writes a topic longer than 127 characters as a MESSAGE_VERSION_V2 record
    (2-byte topic length) and every other record as v1; rocketstore reads both, by msgId,
    queue offset and key, with every field as the manifest has it."""
    manifest = load_manifest(name, V5)
    root = extract(name, tmp_path, V5)
    file_size = manifest["config"]["mappedFileSizeCommitLog"]
    long_ones = [e for e in manifest["messages"] if len(e["topic"]) > 127]
    assert long_ones, "the corpus should hold v2 records"
    for entry in manifest["messages"]:
        width, length = topic_field(raw_record(root, entry, file_size))
        topic, _ = stored_place(entry)
        assert (width, length) == ((2 if len(topic) > 127 else 1), len(topic)), entry["msgId"]
    with MessageStore.open(root, store_config(manifest), read_only=name != "crashed") as store:
        for entry in long_ones:
            found = store.view_message(entry["msgId"])
            assert found is not None, entry["msgId"]
            assert found.magic_code == MESSAGE_MAGIC_V2, entry["msgId"]
            assert_same_message(entry, found, prop_crc(manifest))
            topic, queue_id = stored_place(entry)
            result = store.get_messages("golden", topic, queue_id, entry["queueOffset"], 1)
            assert result.status is GetStatus.FOUND, (entry["msgId"], result.status)
            assert_same_message(entry, result.messages[0], prop_crc(manifest))
            properties = props.decode_properties_str(entry["properties"])
            for key in props.split_keys(properties.get(props.KEYS)):
                offsets = {m.commit_log_offset for m in store.query_messages(topic, key, 64)}
                assert entry["commitLogOffset"] in offsets, (topic, key)


def test_prop_crc_is_rocketmqs_crc_of_the_record(tmp_path: Path) -> None:
    """enabledAppendPropCRC: every record ends with "__CRC32#" \\x01, ten decimal digits of
    the CRC32 (as UtilAll.crc32, the low 31 bits) of all the record's bytes before it, least
    significant digit first, and \\x02. rocketstore reads it as a property of that value."""
    manifest = load_manifest("propcrc", V5)
    root = extract("propcrc", tmp_path, V5)
    file_size = manifest["config"]["mappedFileSizeCommitLog"]
    tail = len(props.CRC32_PROPERTY) + 1
    with MessageStore.open(root, store_config(manifest), read_only=True) as store:
        for entry in manifest["messages"]:
            record = raw_record(root, entry, file_size)
            head, crc_part = record[:-CRC32_RESERVED_BYTES], record[-CRC32_RESERVED_BYTES:]
            assert crc_part[:tail] == props.CRC32_PROPERTY.encode() + b"\x01", entry["msgId"]
            assert crc_part[-1:] == b"\x02", entry["msgId"]
            digits = crc_part[tail:-1].decode()
            assert int(digits[::-1]) == zlib.crc32(head) & 0x7FFFFFFF, entry["msgId"]
            found = store.view_message(entry["msgId"])
            assert found is not None, entry["msgId"]
            assert found.properties[props.CRC32_PROPERTY] == digits, entry["msgId"]
            assert_same_message(entry, found, with_crc=True)


def test_check_verifies_the_property_crc(tmp_path: Path) -> None:
    """`rocketstore check` finds the propcrc store whole, and a flipped byte the body CRC
    cannot see (a record's FLAG) as a property CRC mismatch at that record."""
    manifest = load_manifest("propcrc", V5)
    root = extract("propcrc", tmp_path, V5)
    result = check_store(str(root))
    assert result.ok, [p.line() for p in result.problems]
    assert result.records == len(manifest["messages"])
    file_size = manifest["config"]["mappedFileSizeCommitLog"]
    victim = manifest["messages"][len(manifest["messages"]) // 2]
    start = victim["commitLogOffset"]
    path = root / "commitlog" / f"{start - start % file_size:020d}"
    with open(path, "r+b") as f:
        f.seek(start % file_size + 19)  # FLAG's low byte (spec 1.2)
        byte = f.read(1)[0]
        f.seek(start % file_size + 19)
        f.write(bytes([byte ^ 0x10]))
    damaged = check_store(str(root))
    (problem,) = damaged.problems
    assert problem.offset == start
    assert problem.reason.startswith("property CRC mismatch: stored ")
