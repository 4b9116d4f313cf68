"""The name server's KV config table and settings: updateKvConfig, deleteKvConfig,
updateOrderConf (and updateTopic -o), getNamesrvConfig, updateNamesrvConfig."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketstore.broker.codes import RequestCode, ResponseCode
from rocketstore.broker.namesrv import NameServer, RouteTable
from rocketstore.broker.namesrv_config import KvConfigTable, namesrv_config
from rocketstore.broker.remoting import RemotingCommand
from rocketstore.errors import ConfigError


def _call(server: NameServer, code: int, body: bytes = b"", **ext: str) -> RemotingCommand:
    return server.handle_sync(RemotingCommand(code, opaque=5, ext_fields=ext, body=body), None)


def _server(tmp_path: Path) -> NameServer:
    path = str(tmp_path / "kvConfig.json")
    return NameServer(RouteTable(), namesrv_config(9876, path), KvConfigTable(path))


def test_kv_config_put_get_delete_persisted(tmp_path: Path) -> None:
    server = _server(tmp_path)
    missing = _call(server, RequestCode.GET_KV_CONFIG, namespace="ns", key="k")
    assert (missing.code, missing.remark) == (
        ResponseCode.QUERY_NOT_FOUND,
        "No config item, Namespace: ns Key: k",
    )
    put = _call(server, RequestCode.PUT_KV_CONFIG, namespace="ns", key="k", value="v1")
    assert put.code == ResponseCode.SUCCESS
    got = _call(server, RequestCode.GET_KV_CONFIG, namespace="ns", key="k")
    assert (got.code, got.ext_fields) == (ResponseCode.SUCCESS, {"value": "v1"})
    saved = json.loads((tmp_path / "kvConfig.json").read_text())
    assert saved == {"configTable": {"ns": {"k": "v1"}}}
    again = _server(tmp_path)  # a restarted name server reads it back
    assert _call(again, RequestCode.GET_KV_CONFIG, namespace="ns", key="k").ext_fields == {
        "value": "v1"
    }
    no_key = _call(server, RequestCode.PUT_KV_CONFIG, namespace="ns", value="v")
    assert (no_key.code, no_key.remark) == (ResponseCode.SYSTEM_ERROR, "namespace or key is null")
    assert _call(server, RequestCode.DELETE_KV_CONFIG, namespace="ns", key="k").code == 0
    assert _call(server, RequestCode.DELETE_KV_CONFIG, namespace="ns", key="k").code == 0
    assert json.loads((tmp_path / "kvConfig.json").read_text()) == {"configTable": {}}


def test_a_damaged_kv_config_file_is_refused_not_overwritten(tmp_path: Path) -> None:
    (tmp_path / "kvConfig.json").write_text("{not json")
    with pytest.raises(ConfigError, match=r"kvConfig\.json is not JSON"):
        _server(tmp_path)
    (tmp_path / "kvConfig.json").write_text('{"configTable": {"ns": {"k": 1}}}')
    with pytest.raises(ConfigError, match="no configTable of text values"):
        _server(tmp_path)


def test_the_order_topic_config_is_in_routes_when_order_messages_are_on(tmp_path: Path) -> None:
    server = _server(tmp_path)
    topic = {"topicName": "OT", "readQueueNums": 8, "writeQueueNums": 8, "perm": 6}
    server.table.register(
        cluster="C",
        broker_name="broker-a",
        broker_addr="127.0.0.1:10911",
        broker_id=0,
        topic_configs={"OT": topic},
    )
    order = {"namespace": "ORDER_TOPIC_CONFIG", "key": "OT", "value": "broker-a:8"}
    assert _call(server, RequestCode.PUT_KV_CONFIG, b"", **order).code == 0

    def order_conf() -> object:
        route = _call(server, RequestCode.GET_ROUTEINFO_BY_TOPIC, topic="OT")
        return json.loads(route.body)["orderTopicConf"]

    assert order_conf() is None  # orderMessageEnable is off by default, as in RocketMQ
    body = b"orderMessageEnable=true\n"
    assert _call(server, RequestCode.UPDATE_NAMESRV_CONFIG, body).code == ResponseCode.SUCCESS
    assert order_conf() == "broker-a:8"


def test_get_and_update_namesrv_config(tmp_path: Path) -> None:
    server = _server(tmp_path)
    text = _call(server, RequestCode.GET_NAMESRV_CONFIG).body.decode()
    lines = dict(line.split("=", 1) for line in text.splitlines())
    assert lines["listenPort"] == "9876" and lines["orderMessageEnable"] == "false"
    assert lines["kvConfigPath"] == str(tmp_path / "kvConfig.json")
    assert lines["configBlackList"] == "configBlackList;configStorePath;kvConfigPath"
    cases = {
        b"kvConfigPath=/x\n": (ResponseCode.NO_PERMISSION, "Can not update config in black list."),
        b"noSuchKey=1\n": (ResponseCode.SYSTEM_ERROR, "the name server has no setting 'noSuchKey'"),
        b"listenPort=1\n": (
            ResponseCode.SYSTEM_ERROR,
            "listenPort is read at start only: change it and restart",
        ),
        b"clusterTest=maybe\n": (
            ResponseCode.SYSTEM_ERROR,
            "clusterTest='maybe' must be true or false",
        ),
    }
    for body, expected in cases.items():
        answer = _call(server, RequestCode.UPDATE_NAMESRV_CONFIG, body)
        assert (answer.code, answer.remark) == expected, body
    assert server.config.clusterTest is False  # nothing of a refused update applies
    ok = _call(
        server, RequestCode.UPDATE_NAMESRV_CONFIG, b"productEnvName = edge\nclusterTest=true"
    )
    assert ok.code == ResponseCode.SUCCESS
    assert (server.config.productEnvName, server.config.clusterTest) == ("edge", True)
    # Written, as RocketMQ's Configuration.persist writes it, beside the KV file; the
    # refused updates wrote nothing.
    assert lines["configStorePath"] == str(tmp_path / "namesrv.properties")
    saved = (tmp_path / "namesrv.properties").read_text().splitlines()
    assert saved == sorted(saved) and "productEnvName=edge" in saved
    assert {"clusterTest=true", "listenPort=9876", "orderMessageEnable=false"} <= set(saved)


def test_an_in_memory_name_server_writes_no_settings_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    server = NameServer(RouteTable(), namesrv_config(9876, None), KvConfigTable(None))
    assert server.config.configStorePath == ""
    answer = _call(server, RequestCode.UPDATE_NAMESRV_CONFIG, b"clusterTest=true\n")
    assert answer.code == ResponseCode.SUCCESS and server.config.clusterTest is True
    assert list(tmp_path.iterdir()) == []


def test_a_settings_file_that_cannot_be_written_leaves_the_update_live(tmp_path: Path) -> None:
    """RocketMQ logs a failed persist and answers success: the change is in effect."""
    server = _server(tmp_path)
    (tmp_path / "namesrv.properties").mkdir()  # a directory where the file should go
    answer = _call(server, RequestCode.UPDATE_NAMESRV_CONFIG, b"clusterTest=true\n")
    assert answer.code == ResponseCode.SUCCESS and server.config.clusterTest is True


@given(
    st.dictionaries(
        st.text(min_size=1, max_size=8),
        st.dictionaries(st.text(min_size=1, max_size=8), st.text(max_size=12), max_size=4),
        max_size=4,
    )
)
def test_the_kv_file_round_trips(table: dict[str, dict[str, str]]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        path = str(Path(directory) / "kv.json")
        kv = KvConfigTable(path)
        for namespace, keys in table.items():
            for key, value in keys.items():
                kv.put(namespace, key, value)
        reread = KvConfigTable(path)
        for namespace, keys in table.items():
            for key, value in keys.items():
                assert reread.get(namespace, key) == value
