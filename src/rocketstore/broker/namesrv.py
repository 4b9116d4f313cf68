"""The name server: brokers register their topics here, clients look routes up.

Layer: broker. :class:`RouteTable` is plain synchronous state (RouteInfoManager's rules,
unit-tested without sockets); :class:`NameServer` answers the requests over it.

Several brokers may register the same topic: its route then lists each broker's queues,
and producers and consumers spread over them (RocketMQ's way to outgrow one machine).
A broker leaves the table when it unregisters, when the connection it registered on closes,
or when it has not re-registered for ``broker_timeout_ms`` (RocketMQ: 120 s).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rocketstore.broker.acl import AclConfig, authorize
from rocketstore.broker.acl_addresses import client_ip
from rocketstore.broker.acl_permissions import NAMESRV_WRITE_CODES
from rocketstore.broker.codes import RequestCode, ResponseCode
from rocketstore.broker.namesrv_config import (
    ORDER_TOPIC_CONFIG,
    KvConfigTable,
    NamesrvConfig,
    persist_namesrv_config,
)
from rocketstore.broker.perm_name import PERM_READ, PERM_WRITE
from rocketstore.broker.remoting import RemotingCommand, ext_int, ext_str, loads_json
from rocketstore.broker.server import Connection
from rocketstore.errors import ConfigError
from rocketstore.format.javahash import java_hashmap_order
from rocketstore.paths import RETRY_PREFIX

log = logging.getLogger(__name__)

BROKER_TIMEOUT_MS = 120_000
MASTER_ID = 0
PERM_READ_WRITE = PERM_READ | PERM_WRITE


@dataclass
class BrokerEntry:
    cluster: str
    name: str
    addrs: dict[int, str] = field(default_factory=dict)  # broker id -> "ip:port"


@dataclass
class LiveBroker:
    name: str
    broker_id: int
    last_update_ms: int
    data_version: dict[str, Any]
    ha_server_addr: str
    connection: object | None


def queue_data(broker_name: str, topic_config: dict[str, Any]) -> dict[str, Any]:
    """A route's QueueData from a TopicConfig as brokers serialise it."""

    def number(name: str, default: int) -> int:
        value = topic_config.get(name, default)
        return (
            int(value)
            if isinstance(value, int | str) and str(value).lstrip("-").isdigit()
            else default
        )

    return {
        "brokerName": broker_name,
        "readQueueNums": number("readQueueNums", 4),
        "writeQueueNums": number("writeQueueNums", 4),
        "perm": number("perm", PERM_READ_WRITE),
        "topicSysFlag": number("topicSysFlag", 0),
    }


class RouteTable:
    """Brokers, their addresses and the queues each serves per topic. Thread-safe."""

    def __init__(self, broker_timeout_ms: int = BROKER_TIMEOUT_MS):
        self.broker_timeout_ms = broker_timeout_ms
        self._lock = threading.RLock()
        self.brokers: dict[str, BrokerEntry] = {}
        self.live: dict[str, LiveBroker] = {}  # by broker address
        self.topics: dict[str, dict[str, dict[str, Any]]] = {}  # topic -> broker -> queues

    def register(
        self,
        *,
        cluster: str,
        broker_name: str,
        broker_addr: str,
        broker_id: int,
        topic_configs: dict[str, dict[str, Any]],
        data_version: dict[str, Any] | None = None,
        ha_server_addr: str = "",
        connection: object | None = None,
        now_ms: int | None = None,
    ) -> str:
        """Record a broker's registration; return its master's address ("" if none)."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        with self._lock:
            entry = self.brokers.get(broker_name)
            if entry is None:
                entry = self.brokers[broker_name] = BrokerEntry(cluster, broker_name)
            entry.cluster = cluster
            # One address has one id (a restarted broker may come back with another id).
            for old_id, addr in list(entry.addrs.items()):
                if addr == broker_addr and old_id != broker_id:
                    del entry.addrs[old_id]
            entry.addrs[broker_id] = broker_addr
            previous = self.live.get(broker_addr)
            # RocketMQ takes a master's topics only from its first registration or one with
            # a new data version: what an operator changed here since (wipeWritePerm) stays
            # until the broker's topics change.
            changed = (
                previous is None
                or not data_version
                or previous.data_version != dict(data_version)
                or previous.name != broker_name
            )
            if broker_id == MASTER_ID and changed:
                for queues in self.topics.values():
                    queues.pop(broker_name, None)
                for topic, config in topic_configs.items():
                    self.topics.setdefault(topic, {})[broker_name] = queue_data(broker_name, config)
                self._drop_empty_topics()
            self.live[broker_addr] = LiveBroker(
                broker_name, broker_id, now, dict(data_version or {}), ha_server_addr, connection
            )
            return entry.addrs.get(MASTER_ID, "") if broker_id != MASTER_ID else ""

    def ha_server_addr(self, broker_addr: str) -> str:
        """The HA address a live broker registered (its slaves connect there)."""
        with self._lock:
            live = self.live.get(broker_addr)
            return live.ha_server_addr if live is not None else ""

    def unregister(self, broker_name: str, broker_addr: str, broker_id: int) -> None:
        with self._lock:
            self.live.pop(broker_addr, None)
            entry = self.brokers.get(broker_name)
            if entry is None:
                return
            if entry.addrs.get(broker_id) == broker_addr:
                del entry.addrs[broker_id]
            if not entry.addrs:
                del self.brokers[broker_name]
                for queues in self.topics.values():
                    queues.pop(broker_name, None)
                self._drop_empty_topics()
            log.info("broker %s (%s, id %d) left", broker_name, broker_addr, broker_id)

    def _drop_empty_topics(self) -> None:
        for topic in [t for t, queues in self.topics.items() if not queues]:
            del self.topics[topic]

    def connection_closed(self, connection: object) -> None:
        """Forget brokers that registered on a connection that is now closed."""
        with self._lock:
            for addr, live in list(self.live.items()):
                if live.connection is connection:
                    self.unregister(live.name, addr, live.broker_id)

    def expire(self, now_ms: int | None = None) -> list[str]:
        """Forget brokers that have not re-registered in time; their addresses."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        gone = []
        with self._lock:
            for addr, live in list(self.live.items()):
                if now - live.last_update_ms > self.broker_timeout_ms:
                    log.warning("broker %s (%s) expired", live.name, addr)
                    self.unregister(live.name, addr, live.broker_id)
                    gone.append(addr)
        return gone

    def route(self, topic: str) -> dict[str, Any] | None:
        """TopicRouteData for ``topic``; None when no broker serves it.

        A ``%RETRY%<group>`` topic nobody registered yet is served by every master: a
        consumer asks for it before its first heartbeat makes the broker create it.
        """
        with self._lock:
            queues = dict(self.topics.get(topic, {}))
            if not queues and topic.startswith(RETRY_PREFIX):
                queues = {
                    name: queue_data(name, {"readQueueNums": 1, "writeQueueNums": 1})
                    for name, entry in self.brokers.items()
                    if MASTER_ID in entry.addrs
                }
            if not queues:
                return None
            names = sorted(n for n in queues if n in self.brokers)
            if not names:
                return None
            return {
                "orderTopicConf": None,
                "queueDatas": [queues[name] for name in names],
                "brokerDatas": [self._broker_data(self.brokers[name]) for name in names],
                "filterServerTable": {},
            }

    @staticmethod
    def _broker_data(entry: BrokerEntry) -> dict[str, Any]:
        return {
            "cluster": entry.cluster,
            "brokerName": entry.name,
            "brokerAddrs": {str(i): addr for i, addr in sorted(entry.addrs.items())},
        }

    def cluster_info(self) -> dict[str, Any]:
        with self._lock:
            clusters: dict[str, list[str]] = {}
            for entry in self.brokers.values():
                clusters.setdefault(entry.cluster, []).append(entry.name)
            return {
                "brokerAddrTable": {n: self._broker_data(e) for n, e in self.brokers.items()},
                "clusterAddrTable": {c: sorted(names) for c, names in clusters.items()},
            }

    def topic_names(self) -> list[str]:
        with self._lock:
            return sorted(self.topics)

    def topics_by_cluster(self, cluster: str) -> list[str]:
        """getTopicsByCluster: topics with queues on a broker of ``cluster`` (none for a
        cluster not known)."""
        with self._lock:
            names = {e.name for e in self.brokers.values() if e.cluster == cluster}
            return [t for t, queues in self.topics.items() if names & queues.keys()]

    def system_topic_list(self) -> tuple[list[str], str | None]:
        """getSystemTopicList: every cluster name and broker name (the topics a broker
        makes of them), and the address of one broker (the first id of the first)."""
        with self._lock:
            names: list[str] = []
            for cluster in {e.cluster for e in self.brokers.values()}:
                names.append(cluster)
                names += [e.name for e in self.brokers.values() if e.cluster == cluster]
            entries = [self.brokers[n] for n in java_hashmap_order(list(self.brokers))]
            addr = next((e.addrs[min(e.addrs)] for e in entries if e.addrs), None)
            return names, addr

    def topics_by_sys_flag(self, pick: Callable[[int], bool]) -> list[str]:
        """topicQueueTableIter: topics whose first queue data's topicSysFlag ``pick``
        accepts (the unit-topic lists)."""
        with self._lock:
            return [
                topic
                for topic, queues in self.topics.items()
                if queues and pick(int(next(iter(queues.values())).get("topicSysFlag", 0)))
            ]

    def delete_topic(self, topic: str) -> bool:
        with self._lock:
            return self.topics.pop(topic, None) is not None

    def set_write_perm(self, broker_name: str, *, writable: bool) -> int:
        """wipeWritePerm / addWritePerm: every queue data of ``broker_name`` loses its
        write bit, or becomes read and write (RocketMQ sets 6 whatever it was); the number
        of topics touched. Lasts until the broker registers new topic data."""
        count = 0
        with self._lock:
            for queues in self.topics.values():
                data = queues.get(broker_name)
                if data is None:
                    continue
                perm = int(data.get("perm", PERM_READ_WRITE))
                data["perm"] = PERM_READ_WRITE if writable else perm & ~PERM_WRITE
                count += 1
        return count


_TOPIC_LIST_CODES = (
    RequestCode.GET_TOPICS_BY_CLUSTER,
    RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS,
    RequestCode.GET_UNIT_TOPIC_LIST,
    RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST,
    RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST,
)
# TopicSysFlag's bits.
FLAG_UNIT = 1 << 0
FLAG_UNIT_SUB = 1 << 1
_KV_CODES = (RequestCode.PUT_KV_CONFIG, RequestCode.GET_KV_CONFIG, RequestCode.DELETE_KV_CONFIG)


def _json_body(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode("utf-8")


class NameServer:
    """Answers name server requests over a :class:`RouteTable`, with the name server's
    settings and KV config table (:mod:`.namesrv_config`)."""

    def __init__(
        self,
        table: RouteTable | None = None,
        config: NamesrvConfig | None = None,
        kv: KvConfigTable | None = None,
    ):
        self.table = table or RouteTable()
        self.config = config or NamesrvConfig()
        self.kv = kv or KvConfigTable()
        # The ACL in force (None: none): the requests that change routes or settings
        # must then come from an admin account or a white-listed address.
        self.acl: Callable[[], AclConfig | None] | None = None

    async def handle(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand | None:
        return self.handle_sync(cmd, conn)

    def handle_sync(self, cmd: RemotingCommand, conn: object | None) -> RemotingCommand:
        ext = cmd.ext_fields
        code = cmd.code
        acl = self.acl() if self.acl is not None and code in NAMESRV_WRITE_CODES else None
        if acl is not None:
            peer = str(getattr(conn, "peer", ""))
            verdict = authorize(code, ext, cmd.body, client_ip(peer), acl)
            if not verdict.ok:
                log.warning(
                    "name server request code %d from %s refused by ACL: %s: %s",
                    code,
                    peer,
                    verdict.check.value,
                    verdict.message,
                )
                return cmd.response(
                    ResponseCode.NO_PERMISSION,
                    f"ACL check failed: {verdict.check.value}: {verdict.message}",
                )
        if code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            topic = ext_str(ext, "topic")
            route = self.table.route(topic)
            if route is None:
                return cmd.response(
                    ResponseCode.TOPIC_NOT_EXIST,
                    f"No topic route info in name server for the topic: {topic}",
                )
            if self.config.orderMessageEnable:
                # The order config updateOrderConf (or updateTopic -o) put for the topic.
                route["orderTopicConf"] = self.kv.get(ORDER_TOPIC_CONFIG, topic)
            return cmd.response(ResponseCode.SUCCESS, body=_json_body(route))
        if code == RequestCode.REGISTER_BROKER:
            return self._register(cmd, conn)
        if code == RequestCode.UNREGISTER_BROKER:
            self.table.unregister(
                ext_str(ext, "brokerName"), ext_str(ext, "brokerAddr"), ext_int(ext, "brokerId")
            )
            return cmd.response(ResponseCode.SUCCESS)
        if code == RequestCode.GET_BROKER_CLUSTER_INFO:
            return cmd.response(ResponseCode.SUCCESS, body=_json_body(self.table.cluster_info()))
        if code == RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER:
            body = _json_body({"topicList": self.table.topic_names()})
            return cmd.response(ResponseCode.SUCCESS, body=body)
        if code in _TOPIC_LIST_CODES:
            return self._topic_list(cmd)
        if code == RequestCode.GET_KVLIST_BY_NAMESPACE:
            namespace = ext_str(ext, "namespace")
            table = self.kv.namespace(namespace)
            if table is None:
                return cmd.response(
                    ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {namespace}"
                )
            ordered = {key: table[key] for key in java_hashmap_order(list(table))}
            return cmd.response(ResponseCode.SUCCESS, body=_json_body({"table": ordered}))
        if code == RequestCode.DELETE_TOPIC_IN_NAMESRV:
            self.table.delete_topic(ext_str(ext, "topic"))
            return cmd.response(ResponseCode.SUCCESS)
        if code in (RequestCode.WIPE_WRITE_PERM_OF_BROKER, RequestCode.ADD_WRITE_PERM_OF_BROKER):
            writable = code == RequestCode.ADD_WRITE_PERM_OF_BROKER
            count = self.table.set_write_perm(ext_str(ext, "brokerName"), writable=writable)
            field = "addTopicCount" if writable else "wipeTopicCount"
            return cmd.response(ResponseCode.SUCCESS, ext_fields={field: str(count)})
        if code in _KV_CODES or code in (
            RequestCode.GET_NAMESRV_CONFIG,
            RequestCode.UPDATE_NAMESRV_CONFIG,
        ):
            return self._settings(cmd)
        return cmd.response(
            ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {code} not supported"
        )

    def _topic_list(self, cmd: RemotingCommand) -> RemotingCommand:
        """TopicList answers (4.9.8's DefaultRequestProcessor): topics of a cluster, the
        system topics (with one broker's address), the unit-topic lists. The topics are
        a HashSet there: written in its order."""
        code, addr = cmd.code, None
        if code == RequestCode.GET_TOPICS_BY_CLUSTER:
            topics = self.table.topics_by_cluster(ext_str(cmd.ext_fields, "cluster"))
        elif code == RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS:
            topics, addr = self.table.system_topic_list()
        elif code == RequestCode.GET_UNIT_TOPIC_LIST:
            topics = self.table.topics_by_sys_flag(lambda flag: bool(flag & FLAG_UNIT))
        elif code == RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST:
            topics = self.table.topics_by_sys_flag(lambda flag: bool(flag & FLAG_UNIT_SUB))
        else:
            topics = self.table.topics_by_sys_flag(
                lambda flag: not flag & FLAG_UNIT and bool(flag & FLAG_UNIT_SUB)
            )
        body: dict[str, object] = {"topicList": java_hashmap_order(sorted(set(topics)))}
        if addr is not None:
            body = {"brokerAddr": addr, **body}
        return cmd.response(ResponseCode.SUCCESS, body=_json_body(body))

    def _settings(self, cmd: RemotingCommand) -> RemotingCommand:
        """The KV config requests and getNamesrvConfig / updateNamesrvConfig."""
        ext = cmd.ext_fields
        namespace, key = ext.get("namespace"), ext.get("key")
        if cmd.code == RequestCode.GET_KV_CONFIG:
            value = self.kv.get(namespace or "", key or "")
            if value is None:
                return cmd.response(
                    ResponseCode.QUERY_NOT_FOUND,
                    f"No config item, Namespace: {namespace} Key: {key}",
                )
            return cmd.response(ResponseCode.SUCCESS, ext_fields={"value": value})
        if cmd.code == RequestCode.PUT_KV_CONFIG:
            if namespace is None or key is None:
                return cmd.response(ResponseCode.SYSTEM_ERROR, "namespace or key is null")
            try:
                self.kv.put(namespace, key, ext.get("value", ""))
            except OSError as e:
                return cmd.response(ResponseCode.SYSTEM_ERROR, f"KV config not saved: {e}")
            return cmd.response(ResponseCode.SUCCESS)
        if cmd.code == RequestCode.DELETE_KV_CONFIG:
            try:
                self.kv.delete(namespace or "", key or "")
            except OSError as e:
                return cmd.response(ResponseCode.SYSTEM_ERROR, f"KV config not saved: {e}")
            return cmd.response(ResponseCode.SUCCESS)
        if cmd.code == RequestCode.GET_NAMESRV_CONFIG:
            text = "".join(f"{k}={v}\n" for k, v in self.config.properties().items())
            return cmd.response(ResponseCode.SUCCESS, body=text.encode("utf-8"))
        # UPDATE_NAMESRV_CONFIG: a properties body.
        try:
            self.config, changed = self.config.updated(cmd.body.decode("utf-8"))
        except UnicodeDecodeError as e:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"UnsupportedEncodingException {e}")
        except ConfigError as e:
            code = (
                ResponseCode.NO_PERMISSION
                if str(e) == "Can not update config in black list."
                else ResponseCode.SYSTEM_ERROR
            )
            return cmd.response(code, str(e))
        log.info("name server config updated: %s", ", ".join(changed) or "nothing")
        try:
            persist_namesrv_config(self.config)
        except OSError as e:  # RocketMQ logs it too: the update is live all the same
            log.error("name server config not written to %s: %s", self.config.configStorePath, e)
        return cmd.response(ResponseCode.SUCCESS)

    def _register(self, cmd: RemotingCommand, conn: object | None) -> RemotingCommand:
        ext = cmd.ext_fields
        if ext.get("compressed", "false").lower() == "true":
            return cmd.response(
                ResponseCode.SYSTEM_ERROR, "compressed broker registration is not supported"
            )
        try:
            body = loads_json(cmd.body) if cmd.body else {}
        except (UnicodeDecodeError, ValueError) as e:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"bad registration body: {e}")
        wrapper = body.get("topicConfigSerializeWrapper", {}) if isinstance(body, dict) else {}
        wrapper = wrapper if isinstance(wrapper, dict) else {}
        table = wrapper.get("topicConfigTable", {})
        table = (
            {str(k): v for k, v in table.items() if isinstance(v, dict)}
            if isinstance(table, dict)
            else {}
        )
        version = wrapper.get("dataVersion")
        master = self.table.register(
            cluster=ext_str(ext, "clusterName"),
            broker_name=ext_str(ext, "brokerName"),
            broker_addr=ext_str(ext, "brokerAddr"),
            broker_id=ext_int(ext, "brokerId"),
            topic_configs=table,
            data_version=version if isinstance(version, dict) else None,
            ha_server_addr=ext.get("haServerAddr", ""),
            connection=conn,
        )
        # RouteInfoManager: a slave learns its master's address and HA address.
        ha_server = self.table.ha_server_addr(master) if master else ""
        return cmd.response(
            ResponseCode.SUCCESS, ext_fields={"haServerAddr": ha_server, "masterAddr": master}
        )
