"""Consume queues RocketMQ 4.9.8 wrote with enableConsumeQueueExt (`cqext`: the basic
workload, every unit's tagsCode field an address into consumequeue_ext/, TopicA's units
with a filter bitmap; tests/golden/README.md). rocketstore finds the real tagsCode there,
filters pulls by tag as RocketMQ and its client do, checks the store, shows the extension
as mqadmin queryCq does, and delivers delayed messages by the extension's time. (Every
read check of test_rocketmq_written.py runs on it too.)"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketstore import MessageStore
from rocketstore.broker.schedule import ScheduleService
from rocketstore.config import delay_levels_ms
from rocketstore.format import properties as props
from rocketstore.format.cq_ext import is_ext_address
from rocketstore.format.javahash import tags_code
from rocketstore.paths import CONSUME_QUEUE_EXT_DIR
from rocketstore.status import GetStatus
from tests.golden.golden_helpers import (
    SCHEDULE_TOPIC,
    Manifest,
    delay_level,
    extract,
    in_consume_queue,
    load_manifest,
    run_cli,
    store_config,
    stored_place,
)


@pytest.fixture(scope="module")
def manifest() -> Manifest:
    return load_manifest("cqext")


@pytest.fixture(scope="module")
def theirs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return extract("cqext", tmp_path_factory.mktemp("rocketmq"))


@pytest.fixture(scope="module")
def store(manifest: Manifest, theirs: Path) -> Iterator[MessageStore]:
    with MessageStore.open(theirs, store_config(manifest), read_only=True) as opened:
        yield opened


def _queued(manifest: Manifest) -> dict[tuple[str, int], list[Manifest]]:
    """The manifest's queued records by the queue they are in, in queue order."""
    queues: dict[tuple[str, int], list[Manifest]] = {}
    for entry in filter(in_consume_queue, manifest["messages"]):
        queues.setdefault(stored_place(entry), []).append(entry)
    for entries in queues.values():
        entries.sort(key=lambda e: e["queueOffset"])
    return queues


def test_every_unit_points_to_an_extension_with_the_records_tag_code(
    manifest: Manifest, store: MessageStore
) -> None:
    levels = delay_levels_ms(store.config.message_delay_level)
    bitmaps = 0
    for (topic, queue_id), entries in _queued(manifest).items():
        queue = store.queues[(topic, queue_id)]
        for entry in entries:
            unit = queue.unit(entry["queueOffset"])
            assert unit is not None and unit.commit_log_offset == entry["commitLogOffset"]
            assert is_ext_address(unit.tags_code), (topic, queue_id, entry["queueOffset"])
            ext = store.ext_unit(topic, queue_id, unit.tags_code)
            assert ext is not None
            assert ext.msg_store_time == entry["storeTimestamp"]
            if topic == SCHEDULE_TOPIC:  # the delivery time, as without the extension
                want = entry["storeTimestamp"] + levels[delay_level(entry) - 1]
            else:
                want = tags_code(props.decode_properties_str(entry["properties"]).get("TAGS"))
            assert ext.tags_code == want
            if topic == "TopicA":  # the harness's bitmap: the CommitLog offset times 31
                assert ext.bitmap == (entry["commitLogOffset"] * 31).to_bytes(8, "big")
                bitmaps += 1
            else:
                assert ext.bitmap == b""
    assert bitmaps > 50
    # Some queues' extensions fill more than one 1 KiB file (the files end with -1).
    assert len(list(Path(store.root).glob(f"{CONSUME_QUEUE_EXT_DIR}/*/*/*"))) > 20


def test_tag_filtered_pulls_take_the_records_with_the_tag(
    manifest: Manifest, store: MessageStore
) -> None:
    for (topic, queue_id), entries in _queued(manifest).items():
        if topic == SCHEDULE_TOPIC:
            continue
        for tag in ("Tag0", "Tag3", "Tag0 || Tag4", "NoSuchTag"):
            wanted = set(tag.split(" || "))
            want = [
                e["commitLogOffset"]
                for e in entries
                if props.decode_properties_str(e["properties"]).get("TAGS") in wanted
            ]
            got: list[int] = []
            offset = store.min_offset(topic, queue_id)
            while True:
                result = store.get_messages("g", topic, queue_id, offset, 32, tags=tag)
                got += [m.commit_log_offset for m in result.messages]
                if (
                    result.status is GetStatus.NO_MATCHED_MESSAGE
                    and result.next_begin_offset > offset
                ):
                    offset = result.next_begin_offset
                    continue
                if result.status is not GetStatus.FOUND:
                    break
                offset = result.next_begin_offset
            assert got == want, (topic, queue_id, tag)


def test_check_finds_the_store_sound(manifest: Manifest, theirs: Path) -> None:
    done = run_cli("--store", theirs, "check")
    assert done.returncode == 0, done.stdout + done.stderr
    units = sum(len(v) for v in _queued(manifest).values())
    assert f"{units} queue units keep their tagsCode in consumequeue_ext/" in done.stdout


def test_query_cq_shows_the_extension_as_mqadmin(theirs: Path) -> None:
    done = run_cli("--store", theirs, "--json", "queryCq", "-t", "TopicA", "-q", "1", "-c", "2")
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert [sorted(r["ext"]) for r in rows] == [
        ["filterBitMap", "msgStoreTime", "size", "tagsCode"]
    ] * 2
    assert all(r["ext"]["size"] == 28 for r in rows)
    text = run_cli("--store", theirs, "queryCq", "-t", "TopicB", "-q", "0", "-c", "1").stdout
    assert 'extendDataJson=\'{"msgStoreTime":' in text and "bitMap='null'" in text


@pytest.mark.parametrize("with_ext", [True, False])
def test_delayed_messages_come_due_at_the_extensions_time(
    manifest: Manifest, theirs: Path, tmp_path: Path, with_ext: bool
) -> None:
    """The extension's tagsCode is the delivery time; without the extension files RocketMQ
    computes it from the record's store time, which gives the same time."""
    root = tmp_path / "store"
    shutil.copytree(theirs, root)
    if not with_ext:
        shutil.rmtree(root / CONSUME_QUEUE_EXT_DIR)
    delayed = [e for e in manifest["messages"] if delay_level(e) == 3]
    assert len(delayed) == 1
    due = delayed[0]["storeTimestamp"] + 10_000  # level 3: 10 s
    now = [due - 1]
    with MessageStore.open(root, store_config(manifest)) as store:
        before = store.max_offset(delayed[0]["topic"], delayed[0]["queueId"])
        service = ScheduleService(store, clock=lambda: now[0])
        service.run_once()
        assert store.max_offset(delayed[0]["topic"], delayed[0]["queueId"]) == before
        now[0] = due
        service.run_once()
        store.wait_dispatched()
        assert store.max_offset(delayed[0]["topic"], delayed[0]["queueId"]) == before + 1


def test_a_damaged_or_missing_extension_is_read_around(
    manifest: Manifest, theirs: Path, tmp_path: Path
) -> None:
    """As RocketMQ: a unit whose extension cannot be read passes pulls, is shown as
    missing by queryCq, and its delayed message comes due by the store time; `check`
    reports the damaged unit, and only notes a queue whose extension directory is gone."""
    root = tmp_path / "store"
    shutil.copytree(theirs, root)
    first = root / CONSUME_QUEUE_EXT_DIR / SCHEDULE_TOPIC / "2" / f"{0:020d}"
    data = bytearray(first.read_bytes())
    data[0:2] = (7).to_bytes(2, "big")  # a size no unit has
    first.write_bytes(bytes(data))
    shown = run_cli("--store", root, "queryCq", "-t", SCHEDULE_TOPIC, "-q", "2", "-c", "1")
    assert shown.returncode == 0, shown.stderr
    assert "msg='Cq extend not exist!addr: -9223372036854775808'" in shown.stdout
    checked = run_cli("--store", root, "check")
    assert checked.returncode == 1
    assert "a ConsumeQueueExt unit claims 7 bytes" in checked.stdout
    delayed = next(e for e in manifest["messages"] if delay_level(e) == 3)
    now = [delayed["storeTimestamp"] + 10_000]
    with MessageStore.open(root, store_config(manifest)) as store:
        before = store.max_offset(delayed["topic"], delayed["queueId"])
        ScheduleService(store, clock=lambda: now[0]).run_once()
        store.wait_dispatched()
        assert store.max_offset(delayed["topic"], delayed["queueId"]) == before + 1
    gone = tmp_path / "gone"
    shutil.copytree(theirs, gone)
    shutil.rmtree(gone / CONSUME_QUEUE_EXT_DIR / "TopicB")
    noted = run_cli("--store", gone, "check")
    assert noted.returncode == 0, noted.stdout
    assert "TopicB-0: " in noted.stdout and "consumequeue_ext/TopicB/0 is gone" in noted.stdout


def test_an_extension_path_that_is_no_file_is_read_around(theirs: Path, tmp_path: Path) -> None:
    root = tmp_path / "store"
    shutil.copytree(theirs, root)
    first = root / CONSUME_QUEUE_EXT_DIR / "TopicA" / "0" / f"{0:020d}"
    first.unlink()
    first.mkdir()  # a directory where the first extension file was
    shown = run_cli("--store", root, "queryCq", "-t", "TopicA", "-q", "0", "-c", "1")
    assert shown.returncode == 0, shown.stderr
    assert "Cq extend not exist!addr:" in shown.stdout
    checked = run_cli("--store", root, "check")
    # (a unit there cannot be told: the directory is named, as every odd store file is)
    assert checked.returncode == 1
    assert f"address, where a directory, not a regular file ({first})" in checked.stdout
    with MessageStore.open(root, read_only=True) as store:
        pulled = store.get_messages("g", "TopicA", 0, 0, 32, tags="Tag0")
        assert pulled.status is GetStatus.FOUND
        assert {m.tags for m in pulled.messages} == {"Tag0"}
