"""Topic administration of running brokers through a name server (what mqadmin's
``updateTopic -n``, ``deleteTopic -n``, ``topicList -n`` and ``topicRoute -n`` do).

Layer: broker. Blocking calls for command-line tools: each is a few one-shot requests
(:func:`~rocketstore.broker.client.invoke_sync`). Failures raise :class:`AdminError`
naming the server and its remark. With ``credentials`` every request is signed as a Java
tool with an ``AclClientRPCHook`` signs it (name server requests too): a broker with ACL on
checks the signature and the account's rights.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from rocketstore.broker.client import invoke_sync, request
from rocketstore.broker.codes import RequestCode, ResponseCode
from rocketstore.broker.remoting import RemotingCommand
from rocketstore.broker.topic_config import TopicConfig
from rocketstore.errors import StoreError
from rocketstore.remoting.acl_signing import SessionCredentials, sign_request

MASTER_ID = "0"


class AdminError(StoreError):
    """A broker or name server refused an admin request, or answered nonsense."""


def _invoke(
    address: str, cmd: RemotingCommand, timeout_s: float, credentials: SessionCredentials | None
) -> RemotingCommand:
    if credentials is not None:
        cmd = sign_request(cmd, credentials)
    return invoke_sync(address, cmd, timeout_s)


def _call(
    address: str,
    cmd: RemotingCommand,
    timeout_s: float,
    credentials: SessionCredentials | None = None,
) -> RemotingCommand:
    answer = _invoke(address, cmd, timeout_s, credentials)
    if answer.code != ResponseCode.SUCCESS:
        raise AdminError(
            f"{address} refused request {cmd.code}: code {answer.code}, {answer.remark or ''}"
        )
    return answer


def _json(answer: RemotingCommand, what: str) -> Any:
    try:
        return json.loads(answer.body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise AdminError(f"{what}: the answer is not JSON: {e}") from e


def topic_route(
    namesrv: str,
    topic: str,
    timeout_s: float = 5.0,
    *,
    credentials: SessionCredentials | None = None,
) -> dict[str, Any] | None:
    """The topic's route (TopicRouteData), None when no broker serves it."""
    cmd = request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    answer = _invoke(namesrv, cmd, timeout_s, credentials)
    if answer.code == ResponseCode.TOPIC_NOT_EXIST:
        return None
    if answer.code != ResponseCode.SUCCESS:
        raise AdminError(f"{namesrv}: route of {topic}: code {answer.code}, {answer.remark}")
    route: dict[str, Any] = _json(answer, f"route of {topic}")
    return route


def topic_list(
    namesrv: str, timeout_s: float = 5.0, *, credentials: SessionCredentials | None = None
) -> list[str]:
    cmd = request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    answer = _call(namesrv, cmd, timeout_s, credentials)
    topics = _json(answer, "topic list").get("topicList", [])
    return sorted(str(t) for t in topics)


def master_addresses(
    namesrv: str,
    cluster: str | None = None,
    timeout_s: float = 5.0,
    *,
    credentials: SessionCredentials | None = None,
) -> dict[str, str]:
    """Broker name -> master address, of one cluster or of all."""
    answer = _call(namesrv, request(RequestCode.GET_BROKER_CLUSTER_INFO), timeout_s, credentials)
    info = _json(answer, "cluster info")
    names: set[str] | None = None
    if cluster is not None:
        clusters = info.get("clusterAddrTable", {})
        if cluster not in clusters:
            raise AdminError(f"{namesrv}: no cluster {cluster!r} (known: {sorted(clusters)})")
        names = set(clusters[cluster])
    masters = {}
    for name, data in info.get("brokerAddrTable", {}).items():
        address = data.get("brokerAddrs", {}).get(MASTER_ID)
        if address and (names is None or name in names):
            masters[name] = address
    return masters


def update_topic(
    namesrv: str,
    config: TopicConfig,
    *,
    cluster: str | None = None,
    broker_addr: str | None = None,
    timeout_s: float = 5.0,
    credentials: SessionCredentials | None = None,
) -> list[str]:
    """Create or change ``config`` on one broker (``broker_addr``) or on every master (of
    ``cluster``); the addresses changed."""
    config.validate()
    targets = (
        [broker_addr]
        if broker_addr
        else sorted(master_addresses(namesrv, cluster, credentials=credentials).values())
    )
    if not targets:
        raise AdminError(f"{namesrv}: no broker is registered")
    ext = {
        "topic": config.topic_name,
        "defaultTopic": "TBW102",
        "readQueueNums": str(config.read_queue_nums),
        "writeQueueNums": str(config.write_queue_nums),
        "perm": str(config.perm),
        "topicFilterType": config.topic_filter_type,
        "topicSysFlag": str(config.topic_sys_flag),
        "order": "true" if config.order else "false",
    }
    for address in targets:
        _call(address, request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext), timeout_s, credentials)
    return targets


def clean_expired_consume_queue(
    broker: str, timeout_s: float = 30.0, *, credentials: SessionCredentials | None = None
) -> None:
    """CLEAN_EXPIRED_CONSUMEQUEUE (306) on the broker at ``broker`` (mqadmin cleanExpiredCQ
    -b)."""
    _call(broker, request(RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE, {}), timeout_s, credentials)


def delete_topic(
    namesrv: str,
    topic: str,
    *,
    cluster: str | None = None,
    timeout_s: float = 5.0,
    credentials: SessionCredentials | None = None,
) -> list[str]:
    """Delete ``topic`` from every master (of ``cluster``) and from the name server."""
    targets = sorted(master_addresses(namesrv, cluster, credentials=credentials).values())
    topic_field = {"topic": topic}
    for address in targets:
        cmd = request(RequestCode.DELETE_TOPIC_IN_BROKER, topic_field)
        _call(address, cmd, timeout_s, credentials)
    _call(
        namesrv, request(RequestCode.DELETE_TOPIC_IN_NAMESRV, topic_field), timeout_s, credentials
    )
    return targets


def cluster_addresses(
    namesrv: str,
    cluster: str,
    *,
    slaves: bool,
    timeout_s: float = 5.0,
    credentials: SessionCredentials | None = None,
) -> list[str]:
    """The addresses of a cluster's brokers: masters, and with ``slaves`` their slaves too
    (mqadmin's CommandUtil.fetchMasterAddrByClusterName / fetchMasterAndSlaveAddrByClusterName)."""
    cmd = request(RequestCode.GET_BROKER_CLUSTER_INFO)
    info = _json(_call(namesrv, cmd, timeout_s, credentials), "cluster info")
    clusters = info.get("clusterAddrTable", {})
    if cluster not in clusters:
        raise AdminError(f"{namesrv}: no cluster {cluster!r} (known: {sorted(clusters)})")
    addresses: set[str] = set()
    for name in clusters[cluster]:
        for broker_id, address in (
            info.get("brokerAddrTable", {}).get(name, {}).get("brokerAddrs", {}).items()
        ):
            if str(broker_id) == MASTER_ID or slaves:
                addresses.add(str(address))
    return sorted(addresses)


@dataclass(frozen=True)
class AclAccount:
    """An account for UPDATE_AND_CREATE_ACL_CONFIG (mqadmin updateAclConfig's
    PlainAccessConfig); None: not given (the broker keeps what the account had). The
    secret never appears in a repr."""

    access_key: str
    secret_key: str = field(repr=False)
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    topic_perms: tuple[str, ...] | None = None
    group_perms: tuple[str, ...] | None = None

    def header(self) -> dict[str, str]:
        """CreateAccessConfigRequestHeader as MQClientAPIImpl fills it (perm lists joined
        with commas; admin always sent, a Java boolean)."""
        fields = {
            "accessKey": self.access_key,
            "secretKey": self.secret_key,
            "admin": "true" if self.admin else "false",
            "whiteRemoteAddress": self.white_remote_address,
            "defaultTopicPerm": self.default_topic_perm,
            "defaultGroupPerm": self.default_group_perm,
            "topicPerms": None if self.topic_perms is None else ",".join(self.topic_perms),
            "groupPerms": None if self.group_perms is None else ",".join(self.group_perms),
        }
        return {k: v for k, v in fields.items() if v is not None}


def update_acl_config(
    broker: str,
    account: AclAccount,
    *,
    timeout_s: float = 5.0,
    credentials: SessionCredentials | None = None,
) -> None:
    """UPDATE_AND_CREATE_ACL_CONFIG (50) to the broker at ``broker``."""
    cmd = request(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, account.header())
    _call(broker, cmd, timeout_s, credentials)


def delete_acl_config(
    broker: str,
    access_key: str,
    *,
    timeout_s: float = 5.0,
    credentials: SessionCredentials | None = None,
) -> None:
    """DELETE_ACL_CONFIG (51): remove the account ``access_key`` from the broker's file."""
    cmd = request(RequestCode.DELETE_ACL_CONFIG, {"accessKey": access_key})
    _call(broker, cmd, timeout_s, credentials)


def update_global_white_addrs(
    broker: str,
    addresses: str,
    *,
    acl_file_path: str | None = None,
    timeout_s: float = 5.0,
    credentials: SessionCredentials | None = None,
) -> None:
    """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53): the file's globalWhiteRemoteAddresses become
    ``addresses`` (comma-separated patterns)."""
    ext = {"globalWhiteAddrs": addresses}
    if acl_file_path:
        ext["aclFileFullPath"] = acl_file_path
    _call(
        broker, request(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, ext), timeout_s, credentials
    )


@dataclass(frozen=True)
class AclVersion:
    """GET_BROKER_CLUSTER_ACL_INFO's answer (ClusterAclVersionInfo)."""

    cluster_name: str
    broker_name: str
    broker_addr: str
    # ACL file path -> DataVersion ({"counter": ..., "timestamp": ...})
    file_versions: dict[str, dict[str, int]]


def acl_version(
    broker: str, *, timeout_s: float = 5.0, credentials: SessionCredentials | None = None
) -> AclVersion:
    """GET_BROKER_CLUSTER_ACL_INFO (52): the broker's ACL file versions."""
    answer = _call(broker, request(RequestCode.GET_BROKER_CLUSTER_ACL_INFO), timeout_s, credentials)
    ext = answer.ext_fields
    try:
        versions = json.loads(ext.get("allAclFileVersion") or "{}")
        files = {
            str(path): {
                "counter": int(v.get("counter", 0)),
                "timestamp": int(v.get("timestamp", 0)),
            }
            for path, v in versions.items()
        }
    except (ValueError, AttributeError, TypeError) as e:
        raise AdminError(f"{broker}: ACL versions: allAclFileVersion is not read: {e}") from e
    return AclVersion(
        ext.get("clusterName", ""), ext.get("brokerName", ""), ext.get("brokerAddr", ""), files
    )
