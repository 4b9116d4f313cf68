"""mqadmin's ACL requests (AdminBrokerProcessor, 4.9.8): UPDATE_AND_CREATE_ACL_CONFIG (50,
updateAclConfig), DELETE_ACL_CONFIG (51, deleteAclConfig), GET_BROKER_CLUSTER_ACL_INFO
(52, clusterAclConfigVersion) and UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53,
updateGlobalWhiteAddr).

Layer: broker processors. The headers are RocketMQ's (CreateAccessConfigRequestHeader,
DeleteAccessConfigRequestHeader, UpdateGlobalWhiteAddrsConfigRequestHeader; topicPerms and
groupPerms comma-separated); the file work is :class:`~rocketstore.broker.acl_store.AclFile`.
Only an admin account may send them here (4.9.8 lets any account: see acl_permissions).
"""

from __future__ import annotations

import json
import logging

from rocketstore.broker.acl_store import AclFile
from rocketstore.broker.codes import ResponseCode
from rocketstore.broker.context import BrokerContext
from rocketstore.broker.remoting import RemotingCommand, RequestFieldError
from rocketstore.errors import ConfigError
from rocketstore.remoting.peer import Peer

log = logging.getLogger(__name__)

NOT_ENABLED = "ACL is not enabled on this broker (start it with --acl FILE)"


def _acl_file(ctx: BrokerContext) -> AclFile | None:
    found = ctx.extra.get("acl_file")
    return found if isinstance(found, AclFile) else None


def _split(value: str | None) -> list[str] | None:
    # UtilAll.split: null stays null, anything else String.split(",") (trailing empties go)
    if value is None:
        return None
    items = value.split(",")
    while items and items[-1] == "":
        items.pop()
    return items


def _required(cmd: RemotingCommand, name: str) -> str:
    value = cmd.ext_fields.get(name)
    if value is None:
        raise RequestFieldError(f"the custom field <{name}> is null")
    return value


async def update_acl_config(
    ctx: BrokerContext, cmd: RemotingCommand, conn: Peer
) -> RemotingCommand:
    failed = ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED
    acl_file = _acl_file(ctx)
    if acl_file is None:
        return cmd.response(failed, NOT_ENABLED)
    ext = cmd.ext_fields
    access_key = _required(cmd, "accessKey")
    fields = {
        "accessKey": access_key,
        "secretKey": _required(cmd, "secretKey"),
        "whiteRemoteAddress": ext.get("whiteRemoteAddress"),
        "admin": ext.get("admin", "false").strip().lower() == "true",
        "defaultTopicPerm": ext.get("defaultTopicPerm"),
        "defaultGroupPerm": ext.get("defaultGroupPerm"),
        "topicPerms": _split(ext.get("topicPerms")),
        "groupPerms": _split(ext.get("groupPerms")),
    }
    try:
        acl_file.update_account(fields)
    except (ConfigError, OSError) as e:
        log.warning("updateAclConfig of accessKey %s from %s failed: %s", access_key, conn.peer, e)
        return cmd.response(failed, str(e))
    log.info("ACL account %s created or updated by %s", access_key, conn.peer)
    return cmd.response(ResponseCode.SUCCESS)


async def delete_acl_config(
    ctx: BrokerContext, cmd: RemotingCommand, conn: Peer
) -> RemotingCommand:
    failed = ResponseCode.DELETE_ACL_CONFIG_FAILED
    acl_file = _acl_file(ctx)
    if acl_file is None:
        return cmd.response(failed, NOT_ENABLED)
    access_key = _required(cmd, "accessKey")
    log.info("DeleteAccessConfig called by %s", conn.peer)
    try:
        deleted = acl_file.delete_account(access_key)
    except (ConfigError, OSError) as e:
        return cmd.response(failed, str(e))
    if not deleted:
        message = (
            f"The accesskey[{access_key}] corresponding to accessConfig has been deleted failed."
        )
        log.warning(message)
        return cmd.response(failed, message)
    return cmd.response(ResponseCode.SUCCESS)


async def update_global_white_addrs(
    ctx: BrokerContext, cmd: RemotingCommand, conn: Peer
) -> RemotingCommand:
    failed = ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED
    acl_file = _acl_file(ctx)
    if acl_file is None:
        return cmd.response(failed, NOT_ENABLED)
    addresses = _required(cmd, "globalWhiteAddrs")
    # 4.9.8's optional aclFileFullPath names one of the broker's ACL files: here the one.
    path = cmd.ext_fields.get("aclFileFullPath")
    if path and path != acl_file.path:
        return cmd.response(failed, f"{path} is not this broker's ACL file ({acl_file.path})")
    try:
        acl_file.update_global_white_addresses(_split(addresses) or [])
    except (ConfigError, OSError) as e:
        log.warning("updateGlobalWhiteAddr from %s failed: %s", conn.peer, e)
        return cmd.response(failed, str(e))
    log.info("ACL global white list set to %s by %s", addresses, conn.peer)
    return cmd.response(ResponseCode.SUCCESS)


def _version_json(version: dict[str, int]) -> dict[str, int]:
    # DataVersion as fastjson writes it (counter, timestamp); a file without one: 0s.
    return {"counter": version.get("counter", 0), "timestamp": version.get("timestamp", 0)}


async def get_acl_info(ctx: BrokerContext, cmd: RemotingCommand, conn: Peer) -> RemotingCommand:
    """GetBrokerAclConfigResponseHeader: version, allAclFileVersion, brokerName,
    brokerAddr, clusterName."""
    acl_file = _acl_file(ctx)
    if acl_file is None:
        return cmd.response(ResponseCode.SYSTEM_ERROR, NOT_ENABLED)
    version = _version_json(acl_file.config.data_version)
    header = {
        "version": json.dumps(version, separators=(",", ":")),
        "allAclFileVersion": json.dumps({acl_file.path: version}, separators=(",", ":")),
        "brokerName": ctx.broker_name,
        "brokerAddr": ctx.broker_addr,
        "clusterName": ctx.cluster_name,
    }
    return cmd.response(ResponseCode.SUCCESS, ext_fields=header)
