"""config/topics.json and the topic table: RocketMQ's layout, built-in topics,
auto-creation on send (createTopicInSendMessageMethod), retry and DLQ topics, routes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketstore.broker.perm_name import PERM_INHERIT, PERM_READ, PERM_WRITE
from rocketstore.broker.topic_config import (
    TopicConfig,
    TopicConfigManager,
    decode_topics_file,
    perm_to_string,
    read_topics_file,
    route_data,
    topic_name_problem,
)
from rocketstore.errors import ConfigError, CorruptDataError

# config/topics.json exactly as a RocketMQ 4.9 broker writes it (fastjson PrettyFormat:
# tabs, no space after ':', bean fields sorted by name), trimmed to three topics.
ROCKETMQ_TOPICS_JSON = """{
\t"dataVersion":{
\t\t"counter":3,
\t\t"timestamp":1700000123456
\t},
\t"topicConfigTable":{
\t\t"SCHEDULE_TOPIC_XXXX":{
\t\t\t"order":false,
\t\t\t"perm":6,
\t\t\t"readQueueNums":18,
\t\t\t"topicFilterType":"SINGLE_TAG",
\t\t\t"topicName":"SCHEDULE_TOPIC_XXXX",
\t\t\t"topicSysFlag":0,
\t\t\t"writeQueueNums":18
\t\t},
\t\t"TopicTest":{
\t\t\t"order":false,
\t\t\t"perm":6,
\t\t\t"readQueueNums":4,
\t\t\t"topicFilterType":"SINGLE_TAG",
\t\t\t"topicName":"TopicTest",
\t\t\t"topicSysFlag":0,
\t\t\t"writeQueueNums":4
\t\t},
\t\t"TBW102":{
\t\t\t"order":false,
\t\t\t"perm":7,
\t\t\t"readQueueNums":8,
\t\t\t"topicFilterType":"SINGLE_TAG",
\t\t\t"topicName":"TBW102",
\t\t\t"topicSysFlag":0,
\t\t\t"writeQueueNums":8
\t\t}
\t}
}"""


def write_topics(root: Path, text: str) -> Path:
    path = root / "config" / "topics.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_perm_names() -> None:
    assert (PERM_READ, PERM_WRITE, PERM_INHERIT) == (4, 2, 1)
    assert perm_to_string(6) == "RW-"
    assert perm_to_string(7) == "RWX"
    assert perm_to_string(2) == "-W-"
    assert perm_to_string(0) == "---"


def test_topic_name_rules() -> None:
    assert topic_name_problem("Topic_A-1%|x") is None
    assert topic_name_problem("") == "The specified topic is blank."
    assert "illegal characters" in (topic_name_problem("a.b") or "")
    assert "illegal characters" in (topic_name_problem("é") or "")
    assert topic_name_problem("a" * 127) is None
    assert "max length" in (topic_name_problem("a" * 128) or "")


def test_rocketmq_written_file_is_read(tmp_path: Path) -> None:
    write_topics(tmp_path, ROCKETMQ_TOPICS_JSON)
    loaded = read_topics_file(tmp_path)
    assert loaded is not None
    assert loaded.data_version.counter == 3
    assert loaded.data_version.timestamp == 1700000123456
    assert loaded.topics["TopicTest"] == TopicConfig("TopicTest", 4, 4, 6, 0, False)
    assert loaded.topics["TBW102"].perm == 7
    assert loaded.topics["SCHEDULE_TOPIC_XXXX"].read_queue_nums == 18

    manager = TopicConfigManager(tmp_path)
    assert manager.get("TBW102") == TopicConfig("TBW102", 8, 8, 7)  # the file wins
    assert manager.data_version.counter == 3


def test_file_written_is_rocketmq_layout(tmp_path: Path) -> None:
    manager = TopicConfigManager(tmp_path)
    manager.update(TopicConfig("TopicTest", 4, 4, 6))
    text = (tmp_path / "config" / "topics.json").read_text()
    assert '\t\t"TopicTest":{\n\t\t\t"order":false,\n\t\t\t"perm":6,\n' in text
    document = json.loads(text)
    assert set(document) == {"dataVersion", "topicConfigTable"}
    assert document["topicConfigTable"]["TopicTest"] == {
        "order": False,
        "perm": 6,
        "readQueueNums": 4,
        "topicFilterType": "SINGLE_TAG",
        "topicName": "TopicTest",
        "topicSysFlag": 0,
        "writeQueueNums": 4,
    }
    assert document["dataVersion"]["counter"] == 1


def test_builtin_topics_as_rocketmq_creates_them(tmp_path: Path) -> None:
    manager = TopicConfigManager(tmp_path, cluster_name="C1", broker_name="b1")
    tables = {c.topic_name: (c.read_queue_nums, c.write_queue_nums, c.perm) for c in manager.all()}
    assert tables == {
        "SELF_TEST_TOPIC": (1, 1, 6),
        "TBW102": (4, 4, 7),
        "BenchmarkTest": (1024, 1024, 6),
        "C1": (16, 16, 7),
        "b1": (1, 1, 7),
        "OFFSET_MOVED_EVENT": (1, 1, 6),
        "SCHEDULE_TOPIC_XXXX": (18, 18, 6),
        "C1_REPLY_TOPIC": (1, 1, 6),
    }
    assert manager.is_system_topic("C1") and manager.is_system_topic("rmq_sys_x")
    assert not manager.is_system_topic("TopicTest")
    # Nothing is written until something changes.
    assert not (tmp_path / "config").exists()


def test_the_timer_topic_with_the_timer_wheel(tmp_path: Path) -> None:
    # RocketMQ 5's TopicConfigManager with timerWheelEnable: TIMER_TOPIC, 1 queue, RW.
    manager = TopicConfigManager(tmp_path, timer_topic_enable=True)
    assert manager.get("rmq_sys_wheel_timer") == TopicConfig("rmq_sys_wheel_timer", 1, 1, 6)
    assert "rmq_sys_wheel_timer" in manager.system_topics()
    assert TopicConfigManager(tmp_path).get("rmq_sys_wheel_timer") is None


def test_no_tbw102_without_auto_create(tmp_path: Path) -> None:
    manager = TopicConfigManager(tmp_path, auto_create_topic_enable=False)
    assert manager.get("TBW102") is None
    assert manager.create_on_send("NewTopic", "TBW102", 4) is None


def test_update_delete_and_reload(tmp_path: Path) -> None:
    manager = TopicConfigManager(tmp_path)
    before = manager.data_version.counter
    manager.update(TopicConfig("Orders", 8, 8, 6, order=True))
    manager.update(TopicConfig("Orders", 8, 4, 4))
    assert manager.data_version.counter == before + 2
    reloaded = TopicConfigManager(tmp_path)
    assert reloaded.get("Orders") == TopicConfig("Orders", 8, 4, 4)
    assert reloaded.data_version.counter == before + 2
    assert reloaded.delete("Orders") is True
    assert reloaded.delete("Orders") is False
    assert TopicConfigManager(tmp_path).get("Orders") is None


def test_get_returns_a_copy(tmp_path: Path) -> None:
    manager = TopicConfigManager(tmp_path)
    config = manager.get("TBW102")
    assert config is not None
    config.perm = 0
    assert manager.get("TBW102") == TopicConfig("TBW102", 4, 4, 7)


def test_update_refuses_bad_config(tmp_path: Path) -> None:
    manager = TopicConfigManager(tmp_path)
    with pytest.raises(ConfigError, match="illegal characters"):
        manager.update(TopicConfig("bad topic"))
    with pytest.raises(ConfigError, match="read_queue_nums"):
        manager.update(TopicConfig("T", read_queue_nums=-1))
    with pytest.raises(ConfigError, match="perm"):
        manager.update(TopicConfig("T", perm=16))


def test_create_on_send_inherits_from_tbw102(tmp_path: Path) -> None:
    manager = TopicConfigManager(tmp_path, default_topic_queue_nums=8)
    created = manager.create_on_send("NewTopic", "TBW102", 4, topic_sys_flag=0)
    assert created == TopicConfig("NewTopic", 4, 4, 6)  # perm 7 without inherit
    # The client asked for more queues than TBW102 has: capped at TBW102's write queues.
    assert manager.create_on_send("Wide", "TBW102", 16) == TopicConfig("Wide", 8, 8, 6)
    # An existing topic is returned unchanged.
    manager.update(TopicConfig("Fixed", 2, 2, 4))
    assert manager.create_on_send("Fixed", "TBW102", 16) == TopicConfig("Fixed", 2, 2, 4)
    assert read_topics_file(tmp_path).topics["NewTopic"].perm == 6  # type: ignore[union-attr]


def test_create_on_send_refusals(tmp_path: Path) -> None:
    manager = TopicConfigManager(tmp_path)
    assert manager.create_on_send("A", "NoSuchDefault", 4) is None
    manager.update(TopicConfig("RwOnly", 4, 4, 6))  # readable, writable, not inheritable
    assert manager.create_on_send("B", "RwOnly", 4) is None
    assert manager.create_on_send("bad name", "TBW102", 4) is None
    assert manager.get("A") is None and manager.get("B") is None


def test_create_on_send_when_auto_create_is_off_but_file_has_tbw102(tmp_path: Path) -> None:
    # RocketMQ treats TBW102 as read/write only when autoCreateTopicEnable is off, even if
    # an old topics.json still has it with perm 7.
    write_topics(tmp_path, ROCKETMQ_TOPICS_JSON)
    manager = TopicConfigManager(tmp_path, auto_create_topic_enable=False)
    assert manager.get("TBW102") is not None
    assert manager.create_on_send("NewTopic", "TBW102", 4) is None


def test_retry_and_dlq_topics(tmp_path: Path) -> None:
    manager = TopicConfigManager(tmp_path)
    assert manager.create_retry_topic("g1") == TopicConfig("%RETRY%g1", 1, 1, 6)
    assert manager.create_dlq_topic("g1") == TopicConfig("%DLQ%g1", 1, 1, 2)
    counter = manager.data_version.counter
    manager.create_retry_topic("g1")  # existing: no change, no write
    assert manager.data_version.counter == counter
    reloaded = read_topics_file(tmp_path)
    assert reloaded is not None and set(reloaded.topics) >= {"%RETRY%g1", "%DLQ%g1"}


def test_bak_fallback_and_corrupt_file(tmp_path: Path) -> None:
    manager = TopicConfigManager(tmp_path)
    manager.update(TopicConfig("One"))
    manager.update(TopicConfig("Two"))
    path = tmp_path / "config" / "topics.json"
    path.write_text('{"topicConfigTable": {"One": ')
    recovered = TopicConfigManager(tmp_path)
    assert recovered.get("One") is not None and recovered.get("Two") is None  # the .bak
    Path(str(path) + ".bak").unlink()
    with pytest.raises(CorruptDataError, match="topic config file is unusable"):
        TopicConfigManager(tmp_path)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ('{"perm":"six"}', "perm must be an integer"),
        ('{"order":3}', "order must be true or false"),
        ('{"topicFilterType":"NONE"}', "unknown topicFilterType"),
        ("[]", "expected an object"),
    ],
)
def test_bad_entries_are_named(entry: str, message: str) -> None:
    document = json.loads('{"topicConfigTable":{"T":' + entry + "}}")
    with pytest.raises(ValueError, match=message):
        decode_topics_file(document)


def test_newer_fields_survive_a_rewrite(tmp_path: Path) -> None:
    write_topics(
        tmp_path,
        '{"topicConfigTable":{"T":{"topicName":"T","perm":6,"readQueueNums":2,'
        '"writeQueueNums":2,"attributes":{"+message.type":"NORMAL"}}},'
        '"dataVersion":{"counter":1,"timestamp":5,"stateVersion":0}}',
    )
    manager = TopicConfigManager(tmp_path)
    manager.update(TopicConfig("Other"))
    document = json.loads((tmp_path / "config" / "topics.json").read_text())
    assert document["topicConfigTable"]["T"]["attributes"] == {"+message.type": "NORMAL"}


topic_names = st.text(alphabet="%|-_abcXYZ019", min_size=1, max_size=127)


@given(
    name=topic_names,
    read=st.integers(0, 1024),
    write=st.integers(0, 1024),
    perm=st.integers(0, 15),
    flag=st.integers(0, 3),
    order=st.booleans(),
)
def test_topic_config_json_round_trip(
    name: str, read: int, write: int, perm: int, flag: int, order: bool
) -> None:
    config = TopicConfig(name, read, write, perm, flag, order).validate()
    assert TopicConfig.from_json(json.loads(json.dumps(config.to_json()))) == config


def test_describe_is_mqadmin_tostring() -> None:
    assert TopicConfig("T", 8, 8, 6).describe() == (
        "TopicConfig [topicName=T, readQueueNums=8, writeQueueNums=8, perm=RW-, "
        "topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false]"
    )


def test_route_data_as_clients_accept_it() -> None:
    route = route_data(
        [TopicConfig("T", 4, 4, 6)], {"broker-a": {0: "127.0.0.1:10911"}}, "DefaultCluster"
    )
    assert route == {
        "brokerDatas": [
            {
                "brokerAddrs": {"0": "127.0.0.1:10911"},
                "brokerName": "broker-a",
                "cluster": "DefaultCluster",
            }
        ],
        "filterServerTable": {},
        "orderTopicConf": None,
        "queueDatas": [
            {
                "brokerName": "broker-a",
                "perm": 6,
                "readQueueNums": 4,
                "topicSysFlag": 0,
                "writeQueueNums": 4,
            }
        ],
    }
