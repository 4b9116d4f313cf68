"""mqadmin's ACL commands against running brokers: updateAclConfig, deleteAclConfig,
clusterAclConfigVersion (also as getAclConfig) and updateGlobalWhiteAddr, over the four
admin requests a broker with ``--acl`` serves (UPDATE_AND_CREATE_ACL_CONFIG,
DELETE_ACL_CONFIG, GET_BROKER_CLUSTER_ACL_INFO, UPDATE_GLOBAL_WHITE_ADDRS_CONFIG).

Layer: cli (top). ``-b BROKER`` or ``-c CLUSTER`` (with ``-n NAMESRV``) as mqadmin takes
them; requests are signed with ``--access-key/--secret-key`` (rocketstore brokers accept
these requests from admin accounts only). Unlike mqadmin, updateAclConfig never prints the
account's secret key.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import click

from rocketstore.broker import admin_client
from rocketstore.broker.admin_client import AclAccount
from rocketstore.cli.context import CliContext, CliError, hidden_alias, through_namesrv
from rocketstore.cli.credentials import credential_options
from rocketstore.remoting.acl_signing import SessionCredentials

# mqadmin's clusterAclConfigVersion table.
VERSION_FORMAT = "{:<16}  {:<22}  {:<22}  {:<20}  {:<22}  {:<22}"


def _targets(
    broker: str | None,
    cluster: str | None,
    namesrv: str | None,
    credentials: SessionCredentials | None,
    *,
    slaves: bool,
    what: str,
) -> list[str]:
    """The brokers a command acts on: ``-b``, or those of ``-c`` as ``-n`` lists them."""
    if bool(broker) == bool(cluster):
        raise CliError(f"{what}: give one of -b BROKER_ADDR or -c CLUSTER_NAME")
    if broker:
        return [broker.strip()]
    if not namesrv:
        raise CliError(f"{what}: -c needs -n NAMESRV (where the cluster's brokers are listed)")
    assert cluster is not None
    with through_namesrv(what, namesrv):
        found = admin_client.cluster_addresses(
            namesrv, cluster.strip(), slaves=slaves, credentials=credentials
        )
    if not found:
        raise CliError(f"{what}: no broker of cluster {cluster.strip()!r} is registered")
    return found


def _target_options(verb: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed(
            [
                click.option(
                    "-b",
                    "--brokerAddr",
                    "broker",
                    help=f"{verb} this broker. Example: -b 127.0.0.1:10911",
                ),
                click.option(
                    "-c",
                    "--clusterName",
                    "cluster",
                    help=f"{verb} every broker of this cluster (with -n). "
                    "Example: -c DefaultCluster",
                ),
                click.option(
                    "-n",
                    "--namesrvAddr",
                    "namesrv",
                    help="Name server listing the cluster's brokers (for -c). "
                    "Example: -n 127.0.0.1:9876",
                ),
            ]
        ):
            func = option(func)
        return func

    return decorate


def _perm_list(value: str | None) -> tuple[str, ...] | None:
    # mqadmin: value.trim().split(",")
    return None if value is None else tuple(value.strip().split(","))


def _parse_admin(value: str | None) -> bool:
    # mqadmin reads -m with Boolean.parseBoolean; here anything but true/false is an error.
    if value is None:
        return False
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise click.BadParameter(f"expected true or false, got {value!r}", param_hint="-m")
    return lowered == "true"


@click.command("updateAclConfig", short_help="Create or change an ACL account on brokers.")
@_target_options("Change the ACL file of")
@click.option("-a", "--accessKey", "account_key", required=True, help="Account. Example: -a app1")
@click.option(
    "-s",
    "--secretKey",
    "account_secret",
    required=True,
    help="The account's secret key (never printed). Example: -s 12345678",
)
@click.option(
    "-w",
    "--whiteRemoteAddress",
    "white_remote_address",
    help="The account's IP white list pattern. Example: -w 192.168.0.*",
)
@click.option(
    "-i",
    "--defaultTopicPerm",
    "default_topic_perm",
    help="DENY, PUB, SUB or PUB|SUB. Example: -i PUB",
)
@click.option(
    "-u",
    "--defaultGroupPerm",
    "default_group_perm",
    help="DENY, PUB, SUB or PUB|SUB. Example: -u SUB",
)
@click.option(
    "-t",
    "--topicPerms",
    "topic_perms",
    help="Per-topic permissions. Example: -t topicA=DENY,topicB=PUB|SUB",
)
@click.option(
    "-g",
    "--groupPerms",
    "group_perms",
    help="Per-group permissions. Example: -g groupA=DENY,groupB=SUB",
)
@click.option("-m", "--admin", "admin", help="Admin account, true|false [false]. Example: -m true")
@credential_options
@click.pass_obj
def update_acl_config(
    ctx: CliContext,
    broker: str | None,
    cluster: str | None,
    namesrv: str | None,
    account_key: str,
    account_secret: str,
    white_remote_address: str | None,
    default_topic_perm: str | None,
    default_group_perm: str | None,
    topic_perms: str | None,
    group_perms: str | None,
    admin: str | None,
    credentials: SessionCredentials | None,
) -> None:
    """Create an account in the broker's plain_acl.yml, or change it (fields not given
    keep their value), as mqadmin updateAclConfig does; with -c on every master and slave
    of the cluster.

    \b
    Example:
      ROCKETSTORE_ACCESS_KEY=RocketMQ ROCKETSTORE_SECRET_KEY=... \\
        rocketstore updateAclConfig -b 127.0.0.1:10911 -a app1 -s 12345678 -t Orders=PUB
    """
    account = AclAccount(
        access_key=account_key.strip(),
        secret_key=account_secret.strip(),
        white_remote_address=None if white_remote_address is None else white_remote_address.strip(),
        admin=_parse_admin(admin),
        default_topic_perm=None if default_topic_perm is None else default_topic_perm.strip(),
        default_group_perm=None if default_group_perm is None else default_group_perm.strip(),
        topic_perms=_perm_list(topic_perms),
        group_perms=_perm_list(group_perms),
    )
    what = "updateAclConfig"
    targets = _targets(broker, cluster, namesrv, credentials, slaves=True, what=what)
    for address in targets:
        with through_namesrv(what, address):
            admin_client.update_acl_config(address, account, credentials=credentials)
        if not ctx.as_json:
            click.echo(f"create or update plain access config to {address} success.")
    if ctx.as_json:
        ctx.emit({"brokers": targets, "accessKey": account.access_key, "admin": account.admin})


@click.command("deleteAclConfig", short_help="Delete an ACL account from brokers.")
@_target_options("Change the ACL file of")
@click.option(
    "-a", "--accessKey", "account_key", required=True, help="Account to delete. Example: -a app1"
)
@credential_options
@click.pass_obj
def delete_acl_config(
    ctx: CliContext,
    broker: str | None,
    cluster: str | None,
    namesrv: str | None,
    account_key: str,
    credentials: SessionCredentials | None,
) -> None:
    """Delete an account from the broker's plain_acl.yml (mqadmin deleteAclConfig); with
    -c from every master and slave of the cluster.

    \b
    Example:
      rocketstore deleteAclConfig -b 127.0.0.1:10911 -a app1
    """
    what = "deleteAclConfig"
    access_key = account_key.strip()
    targets = _targets(broker, cluster, namesrv, credentials, slaves=True, what=what)
    for address in targets:
        with through_namesrv(what, address):
            admin_client.delete_acl_config(address, access_key, credentials=credentials)
        if not ctx.as_json:
            click.echo(f"delete plain access config account from {address} success.")
    if ctx.as_json:
        ctx.emit({"brokers": targets, "accessKey": access_key, "deleted": True})
    else:
        click.echo(f"account's accesskey is:{access_key}")


@click.command("updateGlobalWhiteAddr", short_help="Set the ACL file's global IP white list.")
@_target_options("Change the ACL file of")
@click.option(
    "-g",
    "--globalWhiteRemoteAddresses",
    "addresses",
    required=True,
    help="Comma-separated address patterns. Example: -g 10.10.103.*,192.168.0.*",
)
@click.option(
    "-p",
    "--aclFileFullPath",
    "acl_file_path",
    help="The broker's ACL file (checked against the one it serves). "
    "Example: -p /opt/rocketmq/conf/plain_acl.yml",
)
@credential_options
@click.pass_obj
def update_global_white_addr(
    ctx: CliContext,
    broker: str | None,
    cluster: str | None,
    namesrv: str | None,
    addresses: str,
    acl_file_path: str | None,
    credentials: SessionCredentials | None,
) -> None:
    """Replace globalWhiteRemoteAddresses in the broker's plain_acl.yml (mqadmin
    updateGlobalWhiteAddr); with -c on every master and slave of the cluster.

    \b
    Example:
      rocketstore updateGlobalWhiteAddr -b 127.0.0.1:10911 -g 10.10.103.*,192.168.0.*
    """
    what = "updateGlobalWhiteAddr"
    targets = _targets(broker, cluster, namesrv, credentials, slaves=True, what=what)
    for address in targets:
        with through_namesrv(what, address):
            admin_client.update_global_white_addrs(
                address, addresses.strip(), acl_file_path=acl_file_path, credentials=credentials
            )
        if not ctx.as_json:
            click.echo(f"update global white remote addresses to {address} success.")
    if ctx.as_json:
        ctx.emit({"brokers": targets, "globalWhiteRemoteAddresses": addresses.strip()})


def _time_text(ms: int) -> str:
    # UtilAll.YYYY_MM_DD_HH_MM_SS in the local time zone, as mqadmin prints it
    return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S")


def _version(
    ctx: CliContext,
    broker: str | None,
    cluster: str | None,
    namesrv: str | None,
    credentials: SessionCredentials | None,
    what: str,
) -> None:
    targets = _targets(broker, cluster, namesrv, credentials, slaves=False, what=what)
    if cluster and not ctx.as_json:
        click.echo(
            VERSION_FORMAT.format(
                "#Cluster Name",
                "#Broker Name",
                "#Broker Addr",
                "#AclFilePath",
                "#AclConfigVersionNum",
                "#AclLastUpdateTime",
            ).rstrip()
        )
    for address in targets:
        with through_namesrv(what, address):
            info = admin_client.acl_version(address, credentials=credentials)
        for path, version in info.file_versions.items():
            if ctx.as_json:
                ctx.emit(
                    {
                        "clusterName": info.cluster_name,
                        "brokerName": info.broker_name,
                        "brokerAddr": info.broker_addr,
                        "aclFilePath": path,
                        "version": version["counter"],
                        "timestamp": version["timestamp"],
                    }
                )
                continue
            line = VERSION_FORMAT.format(
                info.cluster_name,
                info.broker_name,
                info.broker_addr,
                path,
                str(version["counter"]),
                _time_text(version["timestamp"]),
            )
            click.echo(line.rstrip())
    if not ctx.as_json:
        kind = "cluster" if cluster else "broker"
        click.echo(f"get {kind}'s plain access config version success.")


@click.command("clusterAclConfigVersion", short_help="The version of the brokers' ACL files.")
@_target_options("Ask")
@credential_options
@click.pass_obj
def cluster_acl_config_version(
    ctx: CliContext,
    broker: str | None,
    cluster: str | None,
    namesrv: str | None,
    credentials: SessionCredentials | None,
) -> None:
    """The version (change counter and time) of each broker's plain_acl.yml, as mqadmin
    clusterAclConfigVersion prints it; with -c of every master of the cluster.

    \b
    Example:
      rocketstore clusterAclConfigVersion -b 127.0.0.1:10911
      rocketstore clusterAclConfigVersion -n 127.0.0.1:9876 -c DefaultCluster
    """
    _version(ctx, broker, cluster, namesrv, credentials, "clusterAclConfigVersion")


def register(group: click.Group) -> None:
    group.add_command(update_acl_config)
    group.add_command(delete_acl_config)
    group.add_command(update_global_white_addr)
    group.add_command(cluster_acl_config_version)
    # What the issue and later RocketMQ tools call it.
    group.add_command(hidden_alias(cluster_acl_config_version, "getAclConfig"))
