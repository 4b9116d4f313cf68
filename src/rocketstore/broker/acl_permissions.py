"""RocketMQ 4.9's ACL permissions (``Permission``) and which resource each request needs
(``PlainAccessValidator.parse``).

Layer: broker; pure functions.

A resource is a topic, or a consumer group spelled as its retry topic ``%RETRY%group``
(RocketMQ keeps both in one map and tells them apart by that prefix). A permission is a
bit set: DENY 1, ANY 2, PUB 4, SUB 8.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rocketstore.broker.broker_config import parse_fastjson
from rocketstore.broker.codes import RequestCode
from rocketstore.broker.remoting import RequestFieldError
from rocketstore.errors import ConfigError
from rocketstore.paths import RETRY_PREFIX

__all__ = [
    "ADMIN_CODES",
    "ANY",
    "DENY",
    "EXTRA_ADMIN_CODES",
    "NAMESRV_WRITE_CODES",
    "PUB",
    "SUB",
    "TRACE_TOPIC",
    "check_permission",
    "check_resource_perms",
    "is_group",
    "needs_admin",
    "parse_perm",
    "parse_resource_perms",
    "perm_text",
    "request_resources",
    "resource_text",
]

DENY = 1
ANY = 1 << 1
PUB = 1 << 2
SUB = 1 << 3

# RMQ_SYS_TRACE_TOPIC: publishing message traces is let through without a permission.
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"

# Permission.ADMIN_CODE (4.9.8): only an ``admin: true`` account may send these.
ADMIN_CODES = frozenset(
    {
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        RequestCode.UPDATE_BROKER_CONFIG,
        RequestCode.DELETE_TOPIC_IN_BROKER,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        RequestCode.DELETE_SUBSCRIPTIONGROUP,
    }
)

# rocketstore's addition (4.9.8 lets any authenticated account send these): requests that
# delete data or change the ACL itself. Without it a non-admin account could run
# DELETE_EXPIRED_COMMITLOG, or grant itself admin with UPDATE_AND_CREATE_ACL_CONFIG.
EXTRA_ADMIN_CODES = frozenset(
    {
        RequestCode.DELETE_EXPIRED_COMMITLOG,
        RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE,
        RequestCode.CLEAN_UNUSED_TOPIC,
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
        RequestCode.UPDATE_AND_CREATE_ACL_CONFIG,
        RequestCode.DELETE_ACL_CONFIG,
        RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
        RequestCode.GET_BROKER_CLUSTER_ACL_INFO,
    }
)

# A name server with an ACL (rocketstore's; 4.9.8's name server checks nothing): the
# requests that change routes or settings need an admin account (or a white-listed
# address), so a rogue address cannot take over a broker's route.
NAMESRV_WRITE_CODES = frozenset(
    {
        RequestCode.REGISTER_BROKER,
        RequestCode.UNREGISTER_BROKER,
        RequestCode.PUT_KV_CONFIG,
        RequestCode.DELETE_KV_CONFIG,
        RequestCode.UPDATE_NAMESRV_CONFIG,
        RequestCode.WIPE_WRITE_PERM_OF_BROKER,
        RequestCode.ADD_WRITE_PERM_OF_BROKER,
        RequestCode.DELETE_TOPIC_IN_NAMESRV,
    }
)

_PERMS = {"PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB, "DENY": DENY}


def needs_admin(code: int) -> bool:
    """Whether only an admin account may send ``code`` (RocketMQ's set and ours)."""
    return code in ADMIN_CODES or code in EXTRA_ADMIN_CODES or code in NAMESRV_WRITE_CODES


def parse_perm(text: object) -> int:
    """``Permission.parsePermFromString``: PUB, SUB, PUB|SUB, SUB|PUB, DENY; anything else
    (a missing value included) is DENY."""
    if text is None:
        return DENY
    return _PERMS.get(str(text).strip(), DENY)


def perm_text(perm: int) -> str:
    if perm & DENY:
        return "DENY"
    return {PUB: "PUB", SUB: "SUB", PUB | SUB: "PUB|SUB"}.get(perm & (PUB | SUB), "DENY")


def check_permission(needed: int, owned: int) -> bool:
    """``Permission.checkPermission``."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


def is_group(resource: str) -> bool:
    return resource.startswith(RETRY_PREFIX)


def resource_text(resource: str) -> str:
    """``PlainAccessResource.printStr``: ``topic:T`` or ``group:G``."""
    if is_group(resource):
        return f"group:{resource[len(RETRY_PREFIX) :]}"
    return f"topic:{resource}"


def _split_entry(entry: object) -> list[str]:
    # StringUtils.split drops empty pieces: "a==PUB" is two items, as in RocketMQ.
    return [piece for piece in str(entry).split("=") if piece]


def parse_resource_perms(entries: object, *, topics: bool, where: str) -> dict[str, int]:
    """``Permission.parseResourcePerms``: ``["topicA=PUB", ...]`` -> {resource: perm}
    (groups as their retry topic)."""
    if not entries:
        return {}
    if not isinstance(entries, list):
        raise ConfigError(f"{where}: {'topicPerms' if topics else 'groupPerms'} must be a list")
    perms: dict[str, int] = {}
    for entry in entries:
        items = _split_entry(entry)
        if len(items) != 2:
            kind = "topic" if topics else "group"
            raise ConfigError(f"{where}: Parse resource permission failed for {kind}:{entry}")
        name = items[0].strip()
        perms[name if topics else RETRY_PREFIX + name] = parse_perm(items[1])
    return perms


def check_resource_perms(entries: Sequence[str]) -> None:
    """``Permission.checkResourcePerms`` (an admin request's lists): each ``Res=Perm`` with
    a permission RocketMQ knows."""
    for entry in entries:
        items = _split_entry(entry)
        if len(items) != 2:
            raise ConfigError(
                f"Parse Resource format error for {entry}.\n"
                "The expected resource format is 'Res=Perm'. For example: topicA=SUB"
            )
        if items[1].strip() != "DENY" and parse_perm(items[1]) == DENY:
            raise ConfigError(
                f"Parse resource permission error for {entry}.\n"
                "The expected permissions are 'SUB' or 'PUB' or 'SUB|PUB' or 'PUB|SUB'."
            )


def _required(ext: Mapping[str, str], name: str) -> str:
    # RemotingCommand.decodeCommandCustomHeader's @CFNotNull check, in its words.
    value = ext.get(name)
    if value is None:
        raise RequestFieldError(f"the custom field <{name}> is null")
    return value


def _heartbeat_resources(body: bytes) -> dict[str, int]:
    try:
        data: Any = parse_fastjson(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise RequestFieldError(f"heartbeat body is not JSON: {e}") from e
    if not isinstance(data, dict):
        raise RequestFieldError("heartbeat body is not a JSON object")
    needed: dict[str, int] = {}
    consumers = data.get("consumerDataSet") or []
    if not isinstance(consumers, list):
        raise RequestFieldError("heartbeat consumerDataSet must be an array")
    for consumer in consumers:
        if not isinstance(consumer, dict):
            raise RequestFieldError("heartbeat consumerDataSet holds a non-object")
        group = consumer.get("groupName")
        if isinstance(group, str):
            needed[RETRY_PREFIX + group] = SUB
        subscriptions = consumer.get("subscriptionDataSet") or []
        if not isinstance(subscriptions, list):
            raise RequestFieldError("heartbeat subscriptionDataSet must be an array")
        for subscription in subscriptions:
            topic = subscription.get("topic") if isinstance(subscription, dict) else None
            if isinstance(topic, str):
                needed[topic] = SUB
    return needed


def _send(needed: dict[str, int], ext: Mapping[str, str], topic_key: str, group_key: str) -> None:
    topic = ext.get(topic_key)
    if topic is not None and is_group(topic):
        group = ext.get(group_key)
        if group is not None:
            needed[RETRY_PREFIX + group] = SUB
    elif topic is not None:
        needed[topic] = PUB


def request_resources(code: int, ext: Mapping[str, str], body: bytes | None) -> dict[str, int]:
    """The resources a request needs and with which permission, as
    ``PlainAccessValidator.parse`` finds them; a request it cannot read raises
    :class:`RequestFieldError` (RocketMQ refuses it with an AclException)."""
    needed: dict[str, int] = {}
    if code == RequestCode.SEND_MESSAGE:
        _send(needed, ext, "topic", "group")
    elif code == RequestCode.SEND_MESSAGE_V2:
        _send(needed, ext, "b", "a")
    elif code == RequestCode.CONSUMER_SEND_MSG_BACK:
        if ext.get("group") is not None:
            needed[RETRY_PREFIX + ext["group"]] = SUB
    elif code == RequestCode.PULL_MESSAGE:
        if ext.get("topic") is not None:
            needed[ext["topic"]] = SUB
        if ext.get("consumerGroup") is not None:
            needed[RETRY_PREFIX + ext["consumerGroup"]] = SUB
    elif code == RequestCode.QUERY_MESSAGE:
        if ext.get("topic") is not None:
            needed[ext["topic"]] = SUB
    elif code == RequestCode.HEART_BEAT:
        needed = _heartbeat_resources(body or b"")
    elif code == RequestCode.UNREGISTER_CLIENT:
        _required(ext, "clientID")
        if ext.get("consumerGroup") is not None:
            needed[RETRY_PREFIX + ext["consumerGroup"]] = SUB
    elif code == RequestCode.GET_CONSUMER_LIST_BY_GROUP:
        needed[RETRY_PREFIX + _required(ext, "consumerGroup")] = SUB
    elif code == RequestCode.UPDATE_CONSUMER_OFFSET:
        group = _required(ext, "consumerGroup")
        topic = _required(ext, "topic")
        for name in ("queueId", "commitOffset"):
            try:
                int(_required(ext, name))
            except ValueError as e:
                raise RequestFieldError(f'For input string: "{ext[name]}"') from e
        needed[RETRY_PREFIX + group] = SUB
        needed[topic] = SUB
    return needed
