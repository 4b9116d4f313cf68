"""LMQ multi-dispatch against RocketMQ 4.9.8's own store (`lmq`, enableLmq and
enableMultiDispatch on; tests/golden/README.md): rocketstore reads every queue RocketMQ
wrote, re-putting the inputs writes RocketMQ's CommitLog, consume queues (LMQ ones
included) and index byte for byte, `check` finds the store sound and `rebuild` gives its
consume queues back."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from rocketstore import Message, MessageStore
from rocketstore.format import properties as props
from rocketstore.format.multi_dispatch import INNER_MULTI_QUEUE_OFFSET
from rocketstore.status import GetStatus
from tests.golden.golden_helpers import (
    compare_files,
    extract,
    load_manifest,
    run_cli,
    store_config,
    to_message,
)

Manifest = dict[str, Any]


@pytest.fixture(scope="module")
def manifest() -> Manifest:
    return load_manifest("lmq")


@pytest.fixture(scope="module")
def theirs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return extract("lmq", tmp_path_factory.mktemp("rocketmq"))


def _input(entry: Manifest, batch_text: str | None = None) -> Message:
    """The message RocketMQ was given. A record RocketMQ does not wrap keeps the given
    properties text as it is (empty values too), so it goes in verbatim."""
    message = to_message(entry)
    if batch_text is not None:
        message.properties = props.VerbatimProperties(
            props.join_batch_properties(entry["properties"], batch_text)
        )
    elif INNER_MULTI_QUEUE_OFFSET not in entry["storedProperties"]:
        message.properties = props.VerbatimProperties(entry["properties"])
    return message


@pytest.fixture(scope="module")
def ours(manifest: Manifest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The inputs put again in RocketMQ's order, with its store timestamps."""
    root = tmp_path_factory.mktemp("rocketstore") / "lmq"
    entries = manifest["messages"]
    config = store_config(manifest).replace(enable_lmq=True, enable_multi_dispatch=True)
    with MessageStore.open(root, config) as store:
        i = 0
        while i < len(entries):
            entry = entries[i]
            if entry["kind"] == "batch":
                group = [entry]
                while i + len(group) < len(entries) and entries[i + len(group)]["indexInBatch"]:
                    group.append(entries[i + len(group)])
                batch = [_input(e, e["batchProperties"]) for e in group]
                results = store.put_batch(batch, entry["storeTimestamp"], entry["storeHost"])
                got = [(r.status.name, r.commit_log_offset) for r in results]
                assert got == [("PUT_OK", e["commitLogOffset"]) for e in group]
                i += len(group)
                continue
            result = store.put(_input(entry), entry["storeTimestamp"], entry["storeHost"])
            assert (result.status.name, result.commit_log_offset, result.size) == (
                "PUT_OK",
                entry["commitLogOffset"],
                entry["wroteBytes"],
            ), f"message {i}"
            i += 1
        store.wait_dispatched()
    return root


@pytest.mark.parametrize("kind", ["commitlog", "consumequeue", "index"])
def test_rewrite_is_byte_identical(kind: str, manifest: Manifest, ours: Path, theirs: Path) -> None:
    problems = compare_files(kind, ours, theirs, manifest["config"]["maxHashSlotNum"])
    assert not problems, "\n".join(problems)


def test_wrapped_records_store_rocketmqs_properties(manifest: Manifest, ours: Path) -> None:
    """Every record's properties string as RocketMQ stored it (HashMap order with the
    offsets, WAIT left out of wrapped ones), the first difference named."""
    with MessageStore.open(ours, read_only=True) as store:
        for entry in manifest["messages"]:
            found = store.look_message(entry["commitLogOffset"])
            assert found is not None
            stored = props.decode_properties_str(entry["storedProperties"])
            assert list(found.properties.items()) == list(stored.items()), entry["commitLogOffset"]


def test_every_queue_rocketmq_wrote_reads_back(manifest: Manifest, theirs: Path) -> None:
    with MessageStore.open(theirs, read_only=True) as store:
        topics = store.topics()
        for queue in manifest["consumeQueues"]:
            topic, queue_id = queue["topic"], queue["queueId"]
            assert queue_id in topics[topic]
            assert (store.min_offset(topic, queue_id), store.max_offset(topic, queue_id)) == (
                queue["minOffset"],
                queue["maxOffset"],
            )
            offsets: list[int] = []
            while True:
                got = store.get_messages("g", topic, queue_id, len(offsets), 32)
                if got.status is not GetStatus.FOUND:
                    break
                offsets.extend(m.commit_log_offset for m in got.messages)
            assert offsets == [unit[0] for unit in queue["units"]], f"{topic}-{queue_id}"


def test_get_message_answers(manifest: Manifest, theirs: Path) -> None:
    with MessageStore.open(theirs, read_only=True) as store:
        for asked in manifest["getMessage"]:
            got = store.get_messages(
                "g", asked["topic"], asked["queueId"], asked["queueOffset"], asked["maxCount"]
            )
            assert got.status.name == asked["status"], asked
            assert got.next_begin_offset == asked["nextBeginOffset"], asked
            assert [m.commit_log_offset for m in got.messages] == asked.get(
                "commitLogOffsets", []
            ), asked


def test_bodies_and_keys_read_back(manifest: Manifest, theirs: Path) -> None:
    with MessageStore.open(theirs, read_only=True) as store:
        for entry in manifest["messages"]:
            found = store.look_message(entry["commitLogOffset"])
            assert found is not None and found.body == base64.b64decode(entry["body"])
        # RocketMQ's store answers by the key's hash; the client keeps the records whose
        # KEYS (or UNIQ_KEY) hold the key, as rocketstore's two queries do.
        uniq_keys = {props.decode_properties_str(e["properties"]).get(props.UNIQ_KEY)
                     for e in manifest["messages"]}  # fmt: skip
        for asked in manifest["queryMessage"]:
            topic, key = asked["topic"], asked["key"]
            if key in uniq_keys:
                queried = store.query_by_unique_key(topic, key)
            else:
                queried = store.query_messages(topic, key, asked["maxCount"])
            assert sorted(m.commit_log_offset for m in queried) == sorted(
                asked["commitLogOffsets"]
            ), asked


def test_check_finds_rocketmqs_store_sound(theirs: Path, manifest: Manifest) -> None:
    done = run_cli("--store", theirs, "check")
    assert done.returncode == 0, done.stdout + done.stderr
    units = sum(len(q["units"]) for q in manifest["consumeQueues"])
    assert f"{units} queue units" in done.stdout


@pytest.mark.parametrize("engine", ["single", "local"])
def test_rebuild_gives_rocketmqs_queues_back(
    manifest: Manifest, tmp_path: Path, engine: str
) -> None:
    ours = extract("lmq", tmp_path / "ours")
    reference = extract("lmq", tmp_path / "reference")
    conf = tmp_path / "broker.conf"
    conf.write_text("enableLmq=true\nenableMultiDispatch=true\n")
    refused = run_cli("--store", ours, "rebuild", "--engine", engine)
    assert refused.returncode == 1 and "enableMultiDispatch" in refused.stderr
    done = run_cli("-c", conf, "--store", ours, "rebuild", "--engine", engine)
    assert done.returncode == 0, done.stderr
    for kind in ("consumequeue", "index"):
        problems = compare_files(kind, ours, reference, manifest["config"]["maxHashSlotNum"])
        assert not problems, "\n".join(problems)
