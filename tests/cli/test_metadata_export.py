"""exportMetadata: the store's user topics and groups, written as mqadmin writes them."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from rocketstore.broker.broker_config import BrokerConfig
from rocketstore.broker.subscription_groups import SubscriptionGroupConfig, SubscriptionGroupManager
from rocketstore.broker.topic_config import TopicConfig, TopicConfigManager
from rocketstore.cli.metadata_export import ExportRequest, export_documents
from rocketstore.format.javahash import (
    concurrent_hashmap_capacity,
    iteration_order,
    java_hashmap_order,
)
from tests.cli.cli_helpers import Run

Cli = Callable[..., Run]
USER_TOPICS = ["Orders", "Payments", "%RETRY%billing", "%DLQ%billing"]


def _configure(root: Path, broker: BrokerConfig) -> None:
    """Topics and groups as a broker with these settings leaves them: its built-in ones,
    users', a retry and a DLQ topic, a system group."""
    topics = TopicConfigManager(
        root, cluster_name=broker.broker_cluster_name, broker_name=broker.broker_name
    )
    for name in USER_TOPICS:
        topics.update(TopicConfig(name, read_queue_nums=2, write_queue_nums=2))
    topics.persist()
    groups = SubscriptionGroupManager(root)
    for name in ("billing", "audit", "CID_RMQ_SYS_TRANS", "CID_RMQ_SYS_OTHER"):
        groups.update(SubscriptionGroupConfig(name))


def _request(tmp_path: Path, **flags: bool) -> ExportRequest:
    options = {"topics_only": False, "groups_only": False, "special_topics": False}
    options.update(flags)
    return ExportRequest(
        str(tmp_path / "out"),
        options["topics_only"],
        options["groups_only"],
        options["special_topics"],
        options.get("broker_layout", False),
    )


def test_metadata_holds_user_topics_and_groups_in_hash_map_order(tmp_path: Path) -> None:
    broker = BrokerConfig(broker_name="broker-x", broker_cluster_name="ClusterX")
    _configure(tmp_path, broker)
    path, document = export_documents(str(tmp_path), broker, _request(tmp_path), 1_700_000_000_000)
    assert path == str(tmp_path / "out" / "metadata.json")
    # Built-in topics (TBW102, SCHEDULE_TOPIC_XXXX...), the cluster and broker name topics,
    # retry and DLQ topics and the system groups are left out.
    topics = document["topicConfigTable"]
    assert list(topics) == java_hashmap_order(["Orders", "Payments"])
    assert topics["Orders"] == {
        "order": False, "perm": 6, "readQueueNums": 2, "topicFilterType": "SINGLE_TAG",
        "topicName": "Orders", "topicSysFlag": 0, "writeQueueNums": 2,
    }  # fmt: skip
    assert list(document["subscriptionGroupTable"]) == java_hashmap_order(["audit", "billing"])
    assert document["subscriptionGroupTable"]["billing"]["groupName"] == "billing"
    # The result is a HashMap of the two tables and the export time.
    assert list(document) == java_hashmap_order(
        ["topicConfigTable", "subscriptionGroupTable", "exportTime"]
    )
    assert document["exportTime"] == 1_700_000_000_000
    special = export_documents(str(tmp_path), broker, _request(tmp_path, special_topics=True), 0)
    assert sorted(special[1]["topicConfigTable"]) == sorted(USER_TOPICS)


def test_names_not_the_brokers_are_user_topics(tmp_path: Path) -> None:
    """The broker's own name and cluster are system topics; another broker's are not."""
    writer = BrokerConfig(broker_name="broker-x", broker_cluster_name="ClusterX")
    _configure(tmp_path, writer)
    other = BrokerConfig(broker_name="broker-y", broker_cluster_name="ClusterY")
    tables = export_documents(str(tmp_path), other, _request(tmp_path), 0)[1]
    assert {"broker-x", "ClusterX"} <= set(tables["topicConfigTable"])


def test_one_table_and_the_broker_layout(tmp_path: Path) -> None:
    broker = BrokerConfig()
    _configure(tmp_path, broker)
    path, topics_only = export_documents(
        str(tmp_path), broker, _request(tmp_path, topics_only=True), 5
    )
    assert path.endswith("/topic.json") and list(topics_only) == java_hashmap_order(
        ["topicConfigTable", "exportTime"]
    )
    path, wrapper = export_documents(
        str(tmp_path), broker, _request(tmp_path, groups_only=True, broker_layout=True), 5
    )
    # -b: the broker's SubscriptionGroupWrapper, its dataVersion with it, no export time.
    assert path.endswith("/subscriptionGroup.json")
    assert list(wrapper) == ["dataVersion", "subscriptionGroupTable"]
    manager = SubscriptionGroupManager(tmp_path)
    assert wrapper["dataVersion"] == manager.data_version.to_json()
    # In the order of the ConcurrentHashMap mqadmin decodes the broker's table into: sized
    # by every group the broker has (the built-in ones too), written in the broker's
    # table's order.
    every = [config.group_name for config in manager.all()]
    written = java_hashmap_order(sorted(every), initial_capacity=2048)
    decoded = iteration_order(written, concurrent_hashmap_capacity(len(every)))
    assert list(wrapper["subscriptionGroupTable"]) == [
        g for g in decoded if g in ("audit", "billing")
    ]


def test_the_order_is_the_real_mqadmins() -> None:
    """What the real 4.9.8 mqadmin wrote (exportMetadata -b -t) for a broker with these
    18 topics: a ConcurrentHashMap of 32 slots (18 >= 0.75 * 16), and not a HashMap's
    order, which would differ."""
    names = [
        "AutoTopic", "BenchmarkTest", "DefaultCluster", "DefaultCluster_REPLY_TOPIC",
        "NewCrashTopic", "OFFSET_MOVED_EVENT", "OrderTopic", "RMQ_SYS_TRANS_HALF_TOPIC",
        "SCHEDULE_TOPIC_XXXX", "SELF_TEST_TOPIC", "TBW102", "TopicA", "TopicB", "TxTopic",
        "broker-a", "%RETRY%GroupA", "%RETRY%GroupB", "%RETRY%GroupC",
    ]  # fmt: skip
    written = java_hashmap_order(sorted(names), initial_capacity=2048)
    decoded = iteration_order(written, concurrent_hashmap_capacity(len(names)))
    users = ["NewCrashTopic", "OrderTopic", "TxTopic", "TopicB", "TopicA", "AutoTopic"]
    assert [n for n in decoded if n in users] == users


def test_export_metadata_command(tmp_path: Path, cli: Cli) -> None:
    root = tmp_path / "store"
    made = cli("--store", root, "updateTopic", "-t", "Orders", "-r", "2", "-w", "2")
    assert made.code == 0, made.err
    out = tmp_path / "export"
    run = cli("--store", root, "exportMetadata", "-f", out)
    assert run.code == 0, run.err
    assert run.out == f"export {out / 'metadata.json'} success\n"
    text = (out / "metadata.json").read_text()
    assert text.startswith("{\n\t") and '"topicName":"Orders"' in text  # fastjson's pretty
    assert list(json.loads(text)["topicConfigTable"]) == ["Orders"]
    wrapper = cli("--store", root, "exportMetadata", "-f", out, "-b", "127.0.0.1:10911", "-t")
    assert wrapper.code == 0, wrapper.err
    assert set(json.loads((out / "topic.json").read_text())) == {"dataVersion", "topicConfigTable"}
    for args, words in (
        (("-b", "127.0.0.1:10911"), "-b exports topics (-t) or subscription groups (-g)"),
        (("-t", "-g"), "-t and -g: give one"),
    ):
        refused = cli("--store", root, "exportMetadata", "-f", out, *args)
        assert refused.code != 0 and words in refused.err
    blocked = tmp_path / "file"
    blocked.write_text("")
    unwritable = cli("--store", root, "exportMetadata", "-f", blocked)
    assert unwritable.code == 1 and f"cannot write {blocked / 'metadata.json'}" in unwritable.err
