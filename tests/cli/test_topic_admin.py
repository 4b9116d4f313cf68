"""updateTopic, deleteTopic, topicRoute and topicList over config/topics.json, through the
console script."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from rocketstore import Message, MessageStore
from rocketstore.broker.consumer_offsets import ConsumerOffsets
from rocketstore.broker.topic_config import TopicConfig, TopicConfigManager, read_topics_file
from rocketstore.cli.queues import name_server_order
from rocketstore.format.javahash import java_hashmap_order
from tests.cli.cli_helpers import CONFIG, Run

Cli = Callable[..., Run]


def small_store(root: Path) -> Path:
    with MessageStore.open(root, CONFIG) as store:
        for queue_id in range(2):
            assert store.put(Message("Existing", b"x", queue_id=queue_id)).ok
        store.wait_dispatched()
    return root


def configured(root: Path) -> dict[str, TopicConfig]:
    loaded = read_topics_file(root)
    assert loaded is not None
    return loaded.topics


def test_update_topic_creates_with_mqadmin_defaults(tmp_path: Path, cli: Cli) -> None:
    root = tmp_path / "new-store"  # topics may be created before the first message
    run = cli("--store", root, "updateTopic", "-t", "OrderEvents")
    assert run.code == 0, run.err
    assert run.out.splitlines() == [
        f"create topic to {root} success.",
        "TopicConfig [topicName=OrderEvents, readQueueNums=8, writeQueueNums=8, perm=RW-, "
        "topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false]",
    ]
    topics = configured(root)
    assert topics["OrderEvents"] == TopicConfig("OrderEvents", 8, 8, 6)
    assert topics["TBW102"].perm == 7  # the built-in topics are written with it


def test_update_topic_changes_only_what_is_given(tmp_path: Path, cli: Cli) -> None:
    root = small_store(tmp_path / "store")
    assert cli("--store", root, "updateTopic", "-t", "T", "-r", "4", "-w", "4").code == 0
    run = cli("--store", root, "updateTopic", "-t", "T", "-w", "2", "-p", "4", "-o", "true")
    assert run.code == 0, run.err
    run = cli("--store", root, "updateTopic", "-t", "T", "-u", "true", "-s", "TRUE")
    assert run.code == 0, run.err
    assert configured(root)["T"] == TopicConfig("T", 4, 2, 4, topic_sys_flag=3, order=True)
    run = cli("--store", root, "--json", "updateTopic", "-t", "T", "-s", "false")
    assert run.json_lines()[0]["topicSysFlag"] == 1
    assert run.json_lines()[0]["readQueueNums"] == 4


def test_update_topic_keeps_a_rocketmq_files_other_entries(tmp_path: Path, cli: Cli) -> None:
    root = small_store(tmp_path / "store")
    (root / "config").mkdir()
    (root / "config" / "topics.json").write_text(
        '{"dataVersion":{"counter":7,"timestamp":1},"topicConfigTable":{"Old":{'
        '"order":false,"perm":6,"readQueueNums":2,"topicFilterType":"SINGLE_TAG",'
        '"topicName":"Old","topicSysFlag":0,"writeQueueNums":2}}}'
    )
    assert cli("--store", root, "updateTopic", "-t", "New", "-r", "1", "-w", "1").code == 0
    loaded = read_topics_file(root)
    assert loaded is not None
    assert loaded.topics["Old"] == TopicConfig("Old", 2, 2, 6)
    assert loaded.topics["New"] == TopicConfig("New", 1, 1, 6)
    assert loaded.data_version.counter == 8
    assert (root / "config" / "topics.json.bak").exists()


def test_update_topic_refusals(tmp_path: Path, cli: Cli) -> None:
    root = small_store(tmp_path / "store")
    run = cli("--store", root, "updateTopic", "-t", "TBW102", "-p", "6")
    assert run.code == 1
    assert run.err.strip() == (
        "rocketstore: error: The topic[TBW102] is conflict with system topic."
    )
    run = cli("--store", root, "updateTopic", "-t", "bad.name")
    assert run.code == 1 and "illegal characters" in run.err
    run = cli("--store", root, "updateTopic", "-t", "T", "-o", "yes")
    assert run.code == 2 and "expected true or false" in run.err
    run = cli("--store", root, "updateTopic", "-t", "T", "-p", "99")
    assert run.code == 2
    not_a_store = tmp_path / "other"
    not_a_store.mkdir()
    (not_a_store / "notes.txt").write_text("x")
    run = cli("--store", not_a_store, "updateTopic", "-t", "T")
    assert run.code == 1 and "is not a store directory" in run.err


def test_running_store_is_refused(tmp_path: Path, cli: Cli) -> None:
    root = small_store(tmp_path / "store")
    with MessageStore.open(root, CONFIG):
        for args in (("updateTopic", "-t", "T"), ("deleteTopic", "-t", "Existing")):
            run = cli("--store", root, *args)
            assert run.code == 1
            assert "a broker or writer is running on this store; stop it first" in run.err
        # Reading the route does not need the lock.
        assert cli("--store", root, "topicRoute", "-t", "TBW102").code == 0
    assert read_topics_file(root) is None


def test_delete_topic(tmp_path: Path, cli: Cli) -> None:
    root = small_store(tmp_path / "store")
    TopicConfigManager(root).update(TopicConfig("Existing", 2, 2))
    run = cli("--store", root, "deleteTopic", "-t", "Existing")
    assert run.code == 0, run.err
    assert run.out.strip() == f"delete topic [Existing] from store [{root}] success."
    assert "Existing" not in configured(root)
    # Its queues go, as a broker's deleteTopic deletes them, and stay gone after a
    # restart; its messages stay in the CommitLog until retention.
    with MessageStore.open(root, CONFIG, read_only=True) as store:
        assert "Existing" not in store.topics()
        assert store.commitlog.max_offset() > 0
    with MessageStore.open(root, CONFIG):
        pass
    with MessageStore.open(root, CONFIG, read_only=True) as store:
        assert "Existing" not in store.topics()
    run = cli("--store", root, "deleteTopic", "-t", "Existing")
    assert run.code == 1 and "'Existing' is not in" in run.err
    run = cli("--store", root, "deleteTopic", "-t", "SCHEDULE_TOPIC_XXXX")
    assert run.code == 1 and "conflict with system topic" in run.err
    run = cli("--store", tmp_path / "missing", "deleteTopic", "-t", "X")
    assert run.code == 1 and "does not exist" in run.err


def test_topic_route(tmp_path: Path, cli: Cli) -> None:
    root = small_store(tmp_path / "store")
    TopicConfigManager(root).update(TopicConfig("Orders", 4, 2, 6))
    run = cli("--store", root, "topicRoute", "-t", "Orders", "--broker-addr", "10.0.0.5:10911")
    assert run.code == 0, run.err
    # fastjson's pretty JSON as mqadmin prints it: the broker id unquoted, no nulls.
    assert run.out == (
        '{\n\t"brokerDatas":[\n\t\t{\n\t\t\t"brokerAddrs":{\n\t\t\t\t0:"10.0.0.5:10911"\n\t\t\t},'
        '\n\t\t\t"brokerName":"broker-a",\n\t\t\t"cluster":"DefaultCluster"\n\t\t}\n\t],'
        '\n\t"filterServerTable":{},\n\t"queueDatas":[\n\t\t{\n\t\t\t"brokerName":"broker-a",'
        '\n\t\t\t"perm":6,\n\t\t\t"readQueueNums":4,\n\t\t\t"topicSysFlag":0,'
        '\n\t\t\t"writeQueueNums":2\n\t\t}\n\t]\n}\n'
    )
    route = cli(
        "--store", root, "--json", "topicRoute", "-t", "Orders", "--broker-addr", "10.0.0.5:10911"
    ).json_lines()[0]
    assert route["queueDatas"] == [
        {
            "brokerName": "broker-a",
            "perm": 6,
            "readQueueNums": 4,
            "topicSysFlag": 0,
            "writeQueueNums": 2,
        }
    ]
    assert route["brokerDatas"][0]["brokerAddrs"] == {"0": "10.0.0.5:10911"}
    run = cli("--store", root, "topicRoute", "-t", "Orders", "-l")
    lines = run.out.splitlines()
    assert lines[0].split() == [
        "#ClusterName",
        "#BrokerName",
        "#BrokerAddrs",
        "#ReadQueue",
        "#WriteQueue",
        "#Perm",
    ]
    assert lines[1].split() == ["DefaultCluster", "broker-a", "{0=127.0.0.1:10911}", "4", "2", "6"]
    # Without the options, the broker of the -c settings file.
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=broker-x\nbrokerClusterName=ClusterX\nbrokerIP1=10.1.1.1\n")
    named = cli("-c", conf, "--store", root, "topicRoute", "-t", "Orders", "-l").out.splitlines()
    assert named[1].split() == ["ClusterX", "broker-x", "{0=10.1.1.1:10911}", "4", "2", "6"]
    assert lines[2] == "-" * 158
    assert lines[3].split() == ["Total:", "1", "4", "2"]
    # Built-in topics resolve without any topics.json.
    tbw = cli("--store", small_store(tmp_path / "fresh"), "--json", "topicRoute", "-t", "TBW102")
    assert tbw.json_lines()[0]["queueDatas"][0]["perm"] == 7
    run = cli("--store", root, "topicRoute", "-t", "Nope")
    assert run.code == 1
    assert "No topic route info in name server for the topic: Nope" in run.err
    run = cli("--store", root, "topicRoute", "-t", "Orders", "--broker-addr", "nohost")
    assert run.code == 1 and "--broker-addr" in run.err


def test_topic_list_adds_configured_topics(tmp_path: Path, cli: Cli) -> None:
    root = small_store(tmp_path / "store")
    TopicConfigManager(root).update(TopicConfig("Planned", 2, 2, 6))
    run = cli("--store", root, "topicList")
    assert run.code == 0, run.err
    # As mqadmin lists them: the configured topics the name server knows (built-in ones
    # too), in its topic list's order; "Existing" has queues but no config.
    listed = run.out.split()
    configured = read_topics_file(root)
    assert configured is not None
    assert listed == name_server_order(configured.topics)
    assert {"Planned", "TBW102", "SCHEDULE_TOPIC_XXXX"} <= set(listed)
    assert "Existing" not in listed
    # --json: every topic, configured or with queues.
    rows = {row["topic"]: row for row in cli("--store", root, "--json", "topicList").json_lines()}
    assert rows["Existing"] == {"topic": "Existing", "queueIds": [0, 1], "configured": False}
    assert rows["Planned"] == {
        "topic": "Planned",
        "queueIds": [],
        "configured": True,
        "readQueueNums": 2,
        "writeQueueNums": 2,
        "perm": 6,
    }
    # Without a topic config, the topics with queues, sorted.
    bare = cli("--store", small_store(tmp_path / "bare"), "topicList").out.split()
    assert bare == sorted(bare) and "Existing" in bare


def test_topic_list_of_a_store_with_only_config(tmp_path: Path, cli: Cli) -> None:
    root = tmp_path / "store"
    assert cli("--store", root, "updateTopic", "-t", "Planned").code == 0
    run = cli("--store", root, "topicList")
    assert run.code == 0, run.err
    assert "Planned" in run.out.split()


# --- through a running name server (-n) ----------------------------------------------


def test_topic_commands_through_a_running_name_server(tmp_path: Path, cli: Cli) -> None:
    from rocketstore.broker.app import BackgroundServer, BrokerOptions

    store = tmp_path / "served"
    options = BrokerOptions(str(store), listen="127.0.0.1:0", store_config=CONFIG)
    with BackgroundServer(options) as server:
        namesrv = server.namesrv_address
        run = cli("updateTopic", "-n", namesrv, "-t", "Remote", "-r", "3", "-w", "3")
        assert run.code == 0, run.err
        assert run.out.splitlines()[0] == f"create topic to {server.broker_address} success."

        run = cli("--json", "topicRoute", "-n", namesrv, "-t", "Remote")
        assert run.code == 0, run.err
        (route,) = run.json_lines()
        (queue_data,) = route["queueDatas"]
        assert (queue_data["readQueueNums"], queue_data["writeQueueNums"]) == (3, 3)
        assert route["brokerDatas"][0]["brokerAddrs"] == {"0": server.broker_address}

        run = cli("topicRoute", "-n", namesrv, "-t", "Remote", "-l")
        assert run.code == 0, run.err
        assert server.broker_address in run.out and "Total:" in run.out

        run = cli("topicList", "-n", namesrv)
        assert run.code == 0, run.err
        assert "Remote" in run.out.splitlines()

        run = cli("deleteTopic", "-n", namesrv, "-t", "Remote")
        assert run.code == 0, run.err
        run = cli("topicRoute", "-n", namesrv, "-t", "Remote")
        assert run.code == 1
        assert "No topic route info in name server for the topic: Remote" in run.err
    # The broker persisted the change in the store's own topic config.
    assert "Remote" not in configured(store)


def test_a_name_server_that_is_not_there_is_named(tmp_path: Path, cli: Cli) -> None:
    run = cli("topicList", "-n", "127.0.0.1:1")
    assert run.code == 1
    assert "topicList through 127.0.0.1:1" in run.err


def test_broker_flags_need_a_name_server(tmp_path: Path, cli: Cli) -> None:
    run = cli("--store", tmp_path / "s", "updateTopic", "-t", "T", "-b", "127.0.0.1:10911")
    assert run.code == 1
    assert "-b and -c need -n NAMESRV" in run.err


@pytest.mark.parametrize("engine", ["single", "local"])
def test_a_rebuild_leaves_a_deleted_topics_queues_out(
    tmp_path: Path, cli: Cli, engine: str
) -> None:
    """`rebuild --queues` builds the queues from the CommitLog, but not a deleted
    topic's from the records it had when it was deleted."""
    root = small_store(tmp_path / "store")
    TopicConfigManager(root).update(TopicConfig("Existing", 2, 2))
    assert cli("--store", root, "deleteTopic", "-t", "Existing").code == 0
    run = cli("--store", root, "rebuild", "--queues", "--engine", engine)
    assert run.code == 0, run.err
    assert "Existing" not in cli("--store", root, "topicList").out.split()
    assert cli("--store", root, "check").code == 0


def test_topic_list_cluster_model(tmp_path: Path, cli: Cli) -> None:
    """topicList -c: mqadmin's table of cluster, topic and each group with offsets on it
    (retry and DLQ topics left out; a topic nobody consumes gets one row, no group)."""
    root = small_store(tmp_path / "store")
    configs = TopicConfigManager(root)
    for name in ("Orders", "%RETRY%billing", "%DLQ%billing"):
        configs.update(TopicConfig(name, 1, 1, 6))
    offsets = ConsumerOffsets(root)
    for group in ("billing", "audit"):
        offsets.commit(group, "Orders", 0, 1)
    offsets.persist()
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerClusterName=ClusterX\n")
    run = cli("-c", conf, "--store", root, "topicList", "-c")
    assert run.code == 0, run.err
    lines = run.out.splitlines()
    assert lines[0] == f"{'#Cluster Name':<20}  {'#Topic':<48}  {'#Consumer Group':<48}"
    row = "{:<20}  {:<64}  {:<64}"
    orders = [line for line in lines if " Orders " in line]
    assert orders == [
        row.format("ClusterX", "Orders", g) for g in java_hashmap_order(["audit", "billing"])
    ]
    assert row.format("ClusterX", "TBW102", "") in lines
    assert not any("%RETRY%" in line or "%DLQ%" in line for line in lines)
