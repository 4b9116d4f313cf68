"""Stores written by RocketMQ's own DefaultMessageStore (4.9.8 and 5.3.3), read by
rocketstore.

Each corpus (tests/golden/rocketmq-VERSION/, see tests/golden/README.md) holds, per store, a
tar.gz of the store directory and a JSON manifest of every message put (inputs and what
RocketMQ answered) plus a few getMessage/queryMessage results. Here, for both corpora:
rocketstore opens RocketMQ's store and finds every message by queue offset, key, UNIQ_KEY
and msgId with every field equal, answers getMessage and queryMessage as RocketMQ did, reads
the checkpoint, and recovers the crashed store with every message kept. Beside this module:
test_rocketmq5_records.py (records only 5.x writes: MESSAGE_VERSION_V2, the property CRC)
and test_rocketmq_bytes.py (byte for byte: the 4.9.8 rewrite, and recovery on both).
"""

from __future__ import annotations

import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketstore import MessageStore
from rocketstore.format import properties as props
from rocketstore.format.checkpoint import decode_checkpoint, encode_checkpoint
from rocketstore.status import GetStatus
from tests.golden.golden_helpers import (
    BOTH,
    V5,
    Manifest,
    assert_same_message,
    corpus_params,
    delay_level,
    extract,
    in_consume_queue,
    indexed,
    load_manifest,
    prop_crc,
    store_config,
    stored_place,
    version_of,
)

# --- read checks ----------------------------------------------------------------------------


@pytest.fixture(scope="module", params=corpus_params(as_tuple=True))
def rocketmq_store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Manifest, MessageStore]]:
    corpus, name = request.param
    manifest = load_manifest(name, corpus)
    root = extract(name, tmp_path_factory.mktemp(name), corpus)
    store = MessageStore.open(root, store_config(manifest, root), read_only=True)
    try:
        yield manifest, store
    finally:
        store.close()


def test_every_message_by_msg_id(rocketmq_store: tuple[Manifest, MessageStore]) -> None:
    manifest, store = rocketmq_store
    assert manifest["messages"], "empty manifest"
    for entry in manifest["messages"]:
        found = store.view_message(entry["msgId"])
        assert found is not None, f"msgId {entry['msgId']} not found"
        assert_same_message(entry, found, prop_crc(manifest))


def test_every_queued_message_by_queue_offset(
    rocketmq_store: tuple[Manifest, MessageStore],
) -> None:
    manifest, store = rocketmq_store
    for entry in filter(in_consume_queue, manifest["messages"]):
        topic, queue_id = stored_place(entry)
        result = store.get_messages("golden", topic, queue_id, entry["queueOffset"], 1)
        assert result.status is GetStatus.FOUND, (entry["msgId"], result.status)
        assert_same_message(entry, result.messages[0], prop_crc(manifest))


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
        assert_same_message(entry, found, prop_crc(manifest))
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


@pytest.mark.parametrize("corpus", BOTH)
def test_corpus_is_what_the_readme_says(corpus: Path) -> None:
    basic = load_manifest("basic", corpus)
    crashed = load_manifest("crashed", corpus)
    assert basic["rocketmqVersion"] == version_of(corpus)
    assert basic["cleanShutdown"] is True and crashed["cleanShutdown"] is False
    with tarfile.open(corpus / "basic.tar.gz") as tar:
        names = tar.getnames()
    assert "basic/checkpoint" in names and "basic/abort" not in names
    with tarfile.open(corpus / "crashed.tar.gz") as tar:
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
    if corpus == V5:
        # Topics on both sides of the 1-byte length limit, singles and a batch past it.
        long_topics = {(len(e["topic"]), e["kind"]) for e in entries if len(e["topic"]) > 126}
        assert {(127, "single"), (128, "single"), (200, "single"), (200, "batch")} <= long_topics
        assert any(len(e["topic"]) > 127 for e in crashed["messages"])
        propcrc = load_manifest("propcrc", corpus)
        assert prop_crc(propcrc) and not prop_crc(basic)
        assert propcrc["cleanShutdown"] is True


@pytest.mark.parametrize("corpus", BOTH)
def test_crashed_store_recovers_every_message(corpus: Path, tmp_path: Path) -> None:
    manifest = load_manifest("crashed", corpus)
    root = extract("crashed", tmp_path, corpus)
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


@pytest.mark.parametrize(("corpus", "name"), corpus_params())
def test_checkpoint_reads_and_encodes_as_rocketmq_wrote_it(
    corpus: Path, name: str, tmp_path: Path
) -> None:
    """4.9 writes three longs, 5.x five (masterFlushedOffset and confirmPhyOffset too)."""
    manifest = load_manifest(name, corpus)
    raw = (extract(name, tmp_path, corpus) / "checkpoint").read_bytes()
    checkpoint = decode_checkpoint(raw)
    assert encode_checkpoint(checkpoint, with_5x_fields=corpus == V5) == raw
    times = [e["storeTimestamp"] for e in manifest["messages"]]
    for value in checkpoint[:3]:
        assert min(times) <= value <= max(times), (name, checkpoint)
