"""consumerProgress, resetOffsetByTime, skipAccumulatedMessage and cloneGroupOffset on a
stopped store's config/consumerOffset.json."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.broker.broker_config import parse_fastjson
from rocketstore.broker.consumer_offsets import ConsumerOffsets
from rocketstore.broker.topic_config import TopicConfig, TopicConfigManager, read_topics_file
from rocketstore.cli.queues import name_server_order
from tests.cli.cli_helpers import BASE_MS, Run

Cli = Callable[..., Run]
PROGRESS = "{:<64}  {:<32}  {:<4}  {:<20}  {:<20}  {:<20}  {}".format
ROLLBACK = "{:<20}  {:<20}  {:<20}  {:<20}  {:<20}  {:<20}".format


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """Topic T: 40 messages over queues 0-3, stored a second apart from BASE_MS; its
    config says 5 read queues (queue 4 is empty). G1 has consumed queue 0 to 5 and queue
    1 to 10; G2 has only a retry topic."""
    root = tmp_path / "store"
    with MessageStore.open(root, StoreConfig(mapped_file_size_commit_log=1 << 20)) as store:
        for i in range(40):
            message = Message("T", b"m%d" % i, queue_id=i % 4)
            assert store.put(message, store_timestamp=BASE_MS + i * 1000).ok
        assert store.put(Message("%RETRY%G2", b"r"), store_timestamp=BASE_MS).ok
    TopicConfigManager(root).update(TopicConfig("T", read_queue_nums=5, write_queue_nums=5))
    offsets = ConsumerOffsets(root)
    offsets.commit("G1", "T", 0, 5)
    offsets.commit("G1", "T", 1, 10)
    offsets.persist(force=True)
    return root


def _configured(root: Path) -> list[str]:
    configured = read_topics_file(root)
    assert configured is not None
    return list(configured.topics)


def _offsets(root: Path) -> dict[str, dict[str, int]]:
    text = (root / "config" / "consumerOffset.json").read_text()
    table: dict[str, dict[str, int]] = parse_fastjson(text)["offsetTable"]
    return {key: {str(q): o for q, o in queues.items()} for key, queues in table.items()}


def test_consumer_progress_of_a_group(root: Path, cli: Cli) -> None:
    run = cli("--store", root, "consumerProgress", "-g", "G1")
    assert run.code == 0, run.err
    header = ("#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff")
    assert run.out.splitlines() == [
        PROGRESS(*header, "#LastTime"),
        # The last consumed message of queue 0 is message 16 (offset 4), stored at +16 s.
        PROGRESS("T", "localStore", 0, 10, 5, 5, "2023-11-14 22:13:36"),
        PROGRESS("T", "localStore", 1, 10, 10, 0, "2023-11-14 22:13:57"),
        PROGRESS("T", "localStore", 2, 10, 0, 10, "N/A"),
        PROGRESS("T", "localStore", 3, 10, 0, 10, "N/A"),
        PROGRESS("T", "localStore", 4, 0, 0, 0, "N/A"),  # in the topic config, never written
        "",
        "Consume TPS: 0.00",
        "Diff Total: 25",
    ]
    # -s true: mqadmin's #Client IP column, N/A with no consumer connected.
    shown = cli("--store", root, "consumerProgress", "-g", "G1", "-s", "TRUE").out.splitlines()
    ip_row = "{:<64}  {:<32}  {:<4}  {:<20}  {:<20}  {:<20} {:<20}  {}"
    assert shown[0] == ip_row.format(*header[:5], "#Client IP", "#Diff", "#LastTime")
    assert shown[1] == ip_row.format("T", "localStore", 0, 10, 5, "N/A", 5, "2023-11-14 22:13:36")
    assert cli("--store", root, "consumerProgress", "-g", "G1", "-s", "no").out == run.out
    # Without -g, as mqadmin: the groups of the %RETRY% topics the broker has configured
    # (none yet: the offsets alone do not list a group), in its topic list's order.
    assert cli("--store", root, "--json", "consumerProgress").json_lines() == []
    configs = TopicConfigManager(root)
    for name in ("G1", "G2", "G3"):
        configs.update(TopicConfig(f"%RETRY%{name}", 1, 1, 6))
    groups = cli("--store", root, "--json", "consumerProgress").json_lines()
    expected = {"G1": 25, "G2": 0, "G3": 0}  # G3 has no offsets: mqadmin shows 0
    order = [t[7:] for t in name_server_order(_configured(root)) if t.startswith("%RETRY%")]
    assert groups == [{"group": g, "diffTotal": expected[g]} for g in order]
    assert cli("--store", root, "consumerProgress", "-t", "T").code == 2  # -t needs -g


def test_reset_offset_by_time_back_only_or_forced(root: Path, cli: Cli) -> None:
    at = BASE_MS + 20_000  # message 20: offset 5 in every queue
    back = cli(
        "--store", root, "resetOffsetByTime", "-g", "G1", "-t", "T", "-s", str(at), "-f", "false"
    )
    assert back.code == 0, back.err
    lines = back.out.splitlines()
    assert lines[0] == (
        "rollback consumer offset by specified consumerGroup[G1], topic[T], force[false], "
        f"timestamp(string)[{at}], timestamp(long)[{at}]"
    )
    assert lines[2:] == [
        ROLLBACK("localStore", 0, 10, 5, 5, 5),
        ROLLBACK("localStore", 1, 10, 10, 5, 5),  # moved back
        ROLLBACK("localStore", 2, 10, 0, 5, 0),  # not moved forward without -f
        ROLLBACK("localStore", 3, 10, 0, 5, 0),
        ROLLBACK("localStore", 4, 0, 0, 0, 0),
    ]
    assert _offsets(root)["T@G1"] == {"0": 5, "1": 5, "4": 0}
    forced = cli("--store", root, "resetOffsetByTime", "-g", "G1", "-t", "T", "-s", str(at))
    assert forced.code == 0, forced.err
    assert _offsets(root)["T@G1"] == {"0": 5, "1": 5, "2": 5, "3": 5, "4": 0}


def test_skip_and_clone(root: Path, cli: Cli) -> None:
    skip = cli("--store", root, "skipAccumulatedMessage", "-g", "G3", "-t", "T")
    assert skip.code == 0, skip.err
    # G3 never consumed T: its rows start from each queue's min offset, as mqadmin's do.
    assert skip.out.splitlines()[1] == ROLLBACK("localStore", 0, 10, 0, 10, 10)
    assert _offsets(root)["T@G3"] == {"0": 10, "1": 10, "2": 10, "3": 10, "4": 0}
    clone = cli("--store", root, "cloneGroupOffset", "-s", "G1", "-d", "G4", "-t", "T")
    assert clone.out == "clone group offset success. srcGroup[G1], destGroup=[G4], topic[T]\n"
    assert _offsets(root)["T@G4"] == {"0": 5, "1": 10, "2": 0, "3": 0, "4": 0}
    assert _offsets(root)["T@G1"] == {"0": 5, "1": 10}


def test_changing_offsets_needs_a_stopped_store(root: Path, cli: Cli) -> None:
    before = (root / "config" / "consumerOffset.json").read_bytes()
    with MessageStore.open(root):
        run = cli("--store", root, "skipAccumulatedMessage", "-g", "G1", "-t", "T")
        assert run.code == 1
        assert "consumerOffset.json is read at start and rewritten by the broker" in run.err
        assert cli("--store", root, "consumerProgress", "-g", "G1").code == 0  # reading is fine
    assert (root / "config" / "consumerOffset.json").read_bytes() == before
    missing = cli("--store", root, "resetOffsetByTime", "-g", "G1", "-t", "Nope", "-s", "now")
    assert missing.code == 1 and "topic 'Nope' not found" in missing.err
    assert json.loads(json.dumps(_offsets(root))) == {"T@G1": {"0": 5, "1": 10}}


def test_reset_offset_by_time_names_a_bad_timestamp_option(root: Path, cli: Cli) -> None:
    before = (root / "config" / "consumerOffset.json").read_bytes()
    run = cli("--store", root, "resetOffsetByTime", "-g", "G1", "-t", "T", "-s", "yesterday")
    assert run.code == 2
    assert "Invalid value for '-s' / '--timestamp': 'yesterday' is not epoch ms" in run.err
    assert (root / "config" / "consumerOffset.json").read_bytes() == before
