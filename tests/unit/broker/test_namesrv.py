"""The name server's route table and request handling, without sockets."""

from __future__ import annotations

import json
from typing import Any

from rocketstore.broker.codes import RequestCode, ResponseCode
from rocketstore.broker.namesrv import NameServer, RouteTable
from rocketstore.broker.remoting import RemotingCommand

TOPIC_A = {"topicName": "A", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6}
TBW102 = {"topicName": "TBW102", "readQueueNums": 8, "writeQueueNums": 8, "perm": 7}


def _register(
    table: RouteTable,
    name: str,
    addr: str,
    topics: dict[str, Any],
    conn: object = None,
    now: int = 0,
) -> None:
    table.register(
        cluster="DefaultCluster",
        broker_name=name,
        broker_addr=addr,
        broker_id=0,
        topic_configs=topics,
        connection=conn,
        now_ms=now,
    )


def test_route_matches_the_layout_clients_accept() -> None:
    table = RouteTable()
    _register(table, "broker-a", "127.0.0.1:10911", {"A": TOPIC_A, "TBW102": TBW102})
    assert table.route("A") == {
        "orderTopicConf": None,
        "queueDatas": [
            {
                "brokerName": "broker-a",
                "readQueueNums": 4,
                "writeQueueNums": 4,
                "perm": 6,
                "topicSysFlag": 0,
            }
        ],
        "brokerDatas": [
            {
                "cluster": "DefaultCluster",
                "brokerName": "broker-a",
                "brokerAddrs": {"0": "127.0.0.1:10911"},
            }
        ],
        "filterServerTable": {},
    }
    route = table.route("TBW102")
    assert route is not None and route["queueDatas"][0]["perm"] == 7
    assert table.route("B") is None


def test_two_brokers_share_a_topic_and_leave_separately() -> None:
    table = RouteTable()
    conn_b = object()
    _register(table, "broker-a", "127.0.0.1:1", {"A": TOPIC_A})
    _register(table, "broker-b", "127.0.0.1:2", {"A": TOPIC_A}, conn=conn_b)
    route = table.route("A")
    assert route is not None
    assert [q["brokerName"] for q in route["queueDatas"]] == ["broker-a", "broker-b"]
    assert [b["brokerAddrs"]["0"] for b in route["brokerDatas"]] == ["127.0.0.1:1", "127.0.0.1:2"]
    table.connection_closed(conn_b)  # a killed broker's connection drops
    route = table.route("A")
    assert route is not None and [q["brokerName"] for q in route["queueDatas"]] == ["broker-a"]
    table.unregister("broker-a", "127.0.0.1:1", 0)
    assert table.route("A") is None


def test_reregistration_replaces_the_topic_set() -> None:
    table = RouteTable()
    _register(table, "broker-a", "127.0.0.1:1", {"A": TOPIC_A})
    _register(
        table, "broker-a", "127.0.0.1:1", {"B": {**TOPIC_A, "topicName": "B", "readQueueNums": 2}}
    )
    assert table.route("A") is None
    route = table.route("B")
    assert route is not None and route["queueDatas"][0]["readQueueNums"] == 2


def test_brokers_expire_without_heartbeats() -> None:
    table = RouteTable(broker_timeout_ms=1000)
    _register(table, "broker-a", "127.0.0.1:1", {"A": TOPIC_A}, now=0)
    _register(table, "broker-b", "127.0.0.1:2", {"A": TOPIC_A}, now=900)
    assert table.expire(now_ms=1500) == ["127.0.0.1:1"]
    route = table.route("A")
    assert route is not None and len(route["queueDatas"]) == 1


def test_retry_topic_resolves_before_any_broker_knows_it() -> None:
    table = RouteTable()
    _register(table, "broker-a", "127.0.0.1:1", {})
    route = table.route("%RETRY%G")
    assert route is not None
    assert route["queueDatas"][0]["readQueueNums"] == 1
    assert table.route("%DLQ%G") is None


def test_name_server_requests() -> None:
    ns = NameServer()
    body = json.dumps(
        {
            "topicConfigSerializeWrapper": {
                "topicConfigTable": {"A": TOPIC_A},
                "dataVersion": {"counter": 1},
            }
        }
    ).encode()
    ext = {
        "brokerName": "broker-a",
        "brokerAddr": "127.0.0.1:1",
        "clusterName": "C",
        "brokerId": "0",
        "compressed": "false",
    }
    answer = ns.handle_sync(
        RemotingCommand(RequestCode.REGISTER_BROKER, 1, ext_fields=ext, body=body), None
    )
    assert answer.code == ResponseCode.SUCCESS and answer.opaque == 1
    answer = ns.handle_sync(
        RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext_fields={"topic": "A"}), None
    )
    assert answer.code == ResponseCode.SUCCESS
    assert json.loads(answer.body)["brokerDatas"][0]["cluster"] == "C"
    answer = ns.handle_sync(
        RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext_fields={"topic": "Z"}), None
    )
    assert answer.code == ResponseCode.TOPIC_NOT_EXIST and "Z" in (answer.remark or "")
    answer = ns.handle_sync(RemotingCommand(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER), None)
    assert json.loads(answer.body) == {"topicList": ["A"]}
    answer = ns.handle_sync(RemotingCommand(RequestCode.GET_BROKER_CLUSTER_INFO), None)
    assert json.loads(answer.body)["clusterAddrTable"] == {"C": ["broker-a"]}
    answer = ns.handle_sync(
        RemotingCommand(RequestCode.DELETE_TOPIC_IN_NAMESRV, ext_fields={"topic": "A"}), None
    )
    assert answer.code == ResponseCode.SUCCESS and ns.table.route("A") is None
    answer = ns.handle_sync(RemotingCommand(RequestCode.UNREGISTER_BROKER, ext_fields=ext), None)
    assert answer.code == ResponseCode.SUCCESS and not ns.table.brokers
    answer = ns.handle_sync(RemotingCommand(9999), None)
    assert answer.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    bad = RemotingCommand(RequestCode.REGISTER_BROKER, ext_fields=ext, body=b"{not json")
    assert ns.handle_sync(bad, None).code == ResponseCode.SYSTEM_ERROR


def _register_version(table: RouteTable, topics: dict[str, Any], counter: int) -> None:
    table.register(
        cluster="DefaultCluster",
        broker_name="broker-a",
        broker_addr="127.0.0.1:1",
        broker_id=0,
        topic_configs=topics,
        data_version={"counter": counter, "timestamp": 1},
        now_ms=0,
    )


def _perm(table: RouteTable, topic: str) -> int:
    route = table.route(topic)
    assert route is not None
    return int(route["queueDatas"][0]["perm"])


def test_a_registration_with_the_same_data_version_keeps_the_routes() -> None:
    table = RouteTable()
    _register_version(table, {"A": TOPIC_A}, 1)
    _register_version(table, {"A": {**TOPIC_A, "perm": 4}}, 1)  # the 30 s heartbeat
    assert _perm(table, "A") == 6
    _register_version(table, {"A": {**TOPIC_A, "perm": 4}}, 2)
    assert _perm(table, "A") == 4


def test_wipe_and_add_write_perm_last_until_the_broker_has_news() -> None:
    server = NameServer()
    _register_version(server.table, {"A": TOPIC_A, "TBW102": TBW102}, 1)

    def ask(code: int, name: str) -> RemotingCommand:
        return server.handle_sync(RemotingCommand(code, ext_fields={"brokerName": name}), None)

    wiped = ask(RequestCode.WIPE_WRITE_PERM_OF_BROKER, "broker-a")
    assert wiped.code == ResponseCode.SUCCESS and wiped.ext_fields == {"wipeTopicCount": "2"}
    assert (_perm(server.table, "A"), _perm(server.table, "TBW102")) == (4, 5)
    _register_version(server.table, {"A": TOPIC_A, "TBW102": TBW102}, 1)
    assert _perm(server.table, "A") == 4  # a heartbeat does not undo it
    added = ask(RequestCode.ADD_WRITE_PERM_OF_BROKER, "broker-a")
    assert added.ext_fields == {"addTopicCount": "2"}
    # RocketMQ sets read and write, whatever the perm was (TBW102 loses its inherit bit).
    assert (_perm(server.table, "A"), _perm(server.table, "TBW102")) == (6, 6)
    ask(RequestCode.WIPE_WRITE_PERM_OF_BROKER, "broker-a")
    _register_version(server.table, {"A": TOPIC_A, "TBW102": TBW102}, 2)
    assert _perm(server.table, "A") == 6  # new topic data from the broker wins
    nobody = ask(RequestCode.WIPE_WRITE_PERM_OF_BROKER, "broker-x")
    assert nobody.ext_fields == {"wipeTopicCount": "0"}


def _ask(ns: NameServer, code: int, **ext: str) -> RemotingCommand:
    return ns.handle_sync(RemotingCommand(code, ext_fields=dict(ext)), None)


def test_the_topic_lists_the_dashboard_asks_for() -> None:
    """GET_TOPICS_BY_CLUSTER (224), GET_SYSTEM_TOPIC_LIST_FROM_NS (304), the unit-topic
    lists (311-313) and GET_KVLIST_BY_NAMESPACE (219), with 4.9.8's TopicList and
    KVTable bodies."""
    ns = NameServer()
    unit = {"topicName": "U", "perm": 6, "topicSysFlag": 1}
    unit_sub = {"topicName": "S", "perm": 6, "topicSysFlag": 2}
    _register(ns.table, "broker-a", "127.0.0.1:10911", {"A": TOPIC_A, "U": unit, "S": unit_sub})
    ns.table.register(
        cluster="Other",
        broker_name="broker-b",
        broker_addr="127.0.0.1:10921",
        broker_id=0,
        topic_configs={"B": {"topicName": "B"}, "A": TOPIC_A},
        connection=None,
        now_ms=0,
    )

    def topics(code: int, **ext: str) -> dict[str, Any]:
        answer = _ask(ns, code, **ext)
        assert answer.code == ResponseCode.SUCCESS
        body = json.loads(answer.body)
        assert isinstance(body, dict)
        return body

    by_cluster = topics(RequestCode.GET_TOPICS_BY_CLUSTER, cluster="DefaultCluster")
    assert sorted(by_cluster["topicList"]) == ["A", "S", "U"]
    assert sorted(topics(RequestCode.GET_TOPICS_BY_CLUSTER, cluster="Other")["topicList"]) == [
        "A",
        "B",
    ]
    assert topics(RequestCode.GET_TOPICS_BY_CLUSTER, cluster="Nope") == {"topicList": []}
    system = topics(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS)
    assert sorted(system["topicList"]) == ["DefaultCluster", "Other", "broker-a", "broker-b"]
    assert system["brokerAddr"] in ("127.0.0.1:10911", "127.0.0.1:10921")
    assert topics(RequestCode.GET_UNIT_TOPIC_LIST)["topicList"] == ["U"]
    assert topics(RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST)["topicList"] == ["S"]
    assert topics(RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST)["topicList"] == ["S"]
    missing = _ask(ns, RequestCode.GET_KVLIST_BY_NAMESPACE, namespace="NS")
    assert missing.code == ResponseCode.QUERY_NOT_FOUND
    assert missing.remark == "No config item, Namespace: NS"
    ns.kv.put("NS", "k1", "v1")
    ns.kv.put("NS", "k2", "v2")
    assert topics(RequestCode.GET_KVLIST_BY_NAMESPACE, namespace="NS") == {
        "table": {"k1": "v1", "k2": "v2"}
    }
