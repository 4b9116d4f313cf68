"""Topic administration with mqadmin's names: updateTopic, deleteTopic, topicRoute.

Layer: cli. Offline, these work on ``config/topics.json`` of a stopped store (the file a
broker reads at start). Changing it takes the store's writer lock for the moment of the
edit, so it fails cleanly while a broker or writer runs. With ``-n NAMESRV`` they talk to
running brokers through that name server instead (``rocketstore.broker.admin_client``),
as mqadmin does. Each command parses its options into a small dataclass that both paths
take.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from rocketstore.broker import admin_client
from rocketstore.broker.broker_config import dump_pretty
from rocketstore.broker.perm_name import PERM_INHERIT, PERM_PRIORITY, PERM_READ, PERM_WRITE
from rocketstore.broker.topic_config import (
    MAX_QUEUE_NUMS,
    TopicConfig,
    TopicConfigManager,
    route_data,
    topic_name_problem,
)
from rocketstore.cli.context import CliContext, CliError, through_namesrv
from rocketstore.cli.credentials import credential_options
from rocketstore.config import parse_host
from rocketstore.errors import ConfigError, StoreLockedError
from rocketstore.files.lock import DirectoryLock
from rocketstore.files.store_dir import missing_commitlog
from rocketstore.paths import COMMITLOG_DIR, CONFIG_DIR, CONSUME_QUEUE_DIR, INDEX_DIR
from rocketstore.remoting.acl_signing import SessionCredentials

T = TypeVar("T")

# mqadmin's UpdateTopicSubCommand starts from 8 read and 8 write queues, perm 6.
MQADMIN_DEFAULT_QUEUE_NUMS = 8
DEFAULT_BROKER_ADDR = "127.0.0.1:10911"
DEFAULT_BROKER_NAME = "broker-a"
DEFAULT_CLUSTER = "DefaultCluster"
# TopicSysFlag bits set by mqadmin's -u / -s.
FLAG_UNIT = 1
FLAG_UNIT_SUB = 2
# mqadmin's topicRoute -l table.
ROUTE_LIST_FORMAT = "{:<45} {:<32} {:<50} {:<10} {:<11} {:<5}"


@dataclass(frozen=True)
class UpdateTopicOptions:
    """updateTopic's options; None means "not given"."""

    topic: str
    read_queue_nums: int | None = None
    write_queue_nums: int | None = None
    perm: int | None = None
    order: bool | None = None
    unit: bool | None = None
    has_unit_sub: bool | None = None


@dataclass(frozen=True)
class RouteOptions:
    topic: str
    broker_addr: str = DEFAULT_BROKER_ADDR
    broker_name: str = DEFAULT_BROKER_NAME
    cluster: str = DEFAULT_CLUSTER


# --- offline operations --------------------------------------------------------------


def check_config_store_dir(root: str, *, create: bool) -> None:
    """A CliError unless ``root`` is a store directory, or one that may become one (a
    broker's config/ with no CommitLog yet counts; ``create``: made when missing)."""
    if not os.path.exists(root):
        if not create:
            raise CliError(f"store directory {root} does not exist (use --store DIR)")
        os.makedirs(root)
        return
    if not os.path.isdir(root):
        raise CliError(f"{root} is not a directory")
    # (consumequeue/ and index/ too: a broker whose CommitLog is elsewhere, by
    # storePathCommitLog, may have neither commitlog/ nor config/ here)
    known = (COMMITLOG_DIR, CONFIG_DIR, CONSUME_QUEUE_DIR, INDEX_DIR)
    if os.listdir(root) and not any(os.path.isdir(os.path.join(root, d)) for d in known):
        raise CliError(f"{root} is not a store directory (no {COMMITLOG_DIR}/ or {CONFIG_DIR}/)")


@contextlib.contextmanager
def offline_edit(root: str, edited: str = "topics.json") -> Iterator[None]:
    """Hold the store's writer lock while the config file ``edited`` is changed."""
    lock = DirectoryLock(root)
    try:
        lock.acquire()
    except StoreLockedError as e:
        raise CliError(
            f"{e}: a broker or writer is running on this store; stop it first "
            f"({edited} is read at start and rewritten by the broker)"
        ) from e
    try:
        yield
    finally:
        lock.release()


def _bit(flags: int, bit: int, value: bool | None) -> int:
    if value is None:
        return flags
    return flags | bit if value else flags & ~bit


def update_topic_offline(root: str, options: UpdateTopicOptions) -> TopicConfig:
    """Create or change a topic in ``root/config/topics.json``.

    A new topic starts from mqadmin's defaults (8 read and 8 write queues, perm 6); an
    existing one keeps every value not given (mqadmin would reset them to the defaults).
    """
    problem = topic_name_problem(options.topic)
    if problem is not None:
        raise CliError(f"topic {options.topic!r}: {problem}")
    check_config_store_dir(root, create=True)
    with offline_edit(root):
        manager = TopicConfigManager(root)
        if manager.is_system_topic(options.topic):
            raise CliError(f"The topic[{options.topic}] is conflict with system topic.")
        current = manager.get(options.topic) or TopicConfig(
            options.topic, MQADMIN_DEFAULT_QUEUE_NUMS, MQADMIN_DEFAULT_QUEUE_NUMS
        )
        sys_flag = _bit(current.topic_sys_flag, FLAG_UNIT, options.unit)
        sys_flag = _bit(sys_flag, FLAG_UNIT_SUB, options.has_unit_sub)
        config = TopicConfig(
            topic_name=options.topic,
            read_queue_nums=_given(options.read_queue_nums, current.read_queue_nums),
            write_queue_nums=_given(options.write_queue_nums, current.write_queue_nums),
            perm=_given(options.perm, current.perm),
            topic_sys_flag=sys_flag,
            order=_given(options.order, current.order),
            topic_filter_type=current.topic_filter_type,
            extra=current.extra,
        )
        try:
            manager.update(config)
        except ConfigError as e:
            raise CliError(str(e)) from e
        return config


def _given(value: T | None, default: T) -> T:
    return default if value is None else value


def delete_topic_offline(root: str, topic: str) -> None:
    """Remove a topic from ``root/config/topics.json`` (its queues are the store's to
    delete: ``MessageStore.delete_topic_queues``)."""
    problem = topic_name_problem(topic)
    if problem is not None:
        raise CliError(f"topic {topic!r}: {problem}")
    check_config_store_dir(root, create=False)
    with offline_edit(root):
        manager = TopicConfigManager(root)
        if manager.is_system_topic(topic):
            raise CliError(f"The topic[{topic}] is conflict with system topic.")
        if not manager.delete(topic):
            raise CliError(f"topic {topic!r} is not in {manager.path}")


def topic_route_offline(root: str, options: RouteOptions) -> dict[str, Any]:
    """The route a name server would give for the topic, from the store's topic config
    (built-in topics such as TBW102 included)."""
    try:
        parse_host(options.broker_addr, what="--broker-addr")
    except ConfigError as e:
        raise CliError(str(e)) from e
    check_config_store_dir(root, create=False)
    manager = TopicConfigManager(
        root, cluster_name=options.cluster, broker_name=options.broker_name
    )
    config = manager.get(options.topic)
    if config is None:
        raise CliError(f"No topic route info in name server for the topic: {options.topic}")
    return route_data([config], {options.broker_name: {0: options.broker_addr}}, options.cluster)


# --- through a name server (-n) -------------------------------------------------------


def update_topic_online(
    namesrv: str,
    options: UpdateTopicOptions,
    *,
    cluster: str | None,
    broker_addr: str | None,
    credentials: SessionCredentials | None = None,
) -> tuple[TopicConfig, list[str]]:
    """Create or change the topic on running brokers. As with mqadmin, values not given
    take its defaults (8 read and 8 write queues, perm 6), whatever the broker had."""
    problem = topic_name_problem(options.topic)
    if problem is not None:
        raise CliError(f"topic {options.topic!r}: {problem}")
    sys_flag = _bit(0, FLAG_UNIT, options.unit)
    config = TopicConfig(
        topic_name=options.topic,
        read_queue_nums=_given(options.read_queue_nums, MQADMIN_DEFAULT_QUEUE_NUMS),
        write_queue_nums=_given(options.write_queue_nums, MQADMIN_DEFAULT_QUEUE_NUMS),
        perm=_given(options.perm, PERM_READ | PERM_WRITE),
        topic_sys_flag=_bit(sys_flag, FLAG_UNIT_SUB, options.has_unit_sub),
        order=_given(options.order, False),
    )
    with through_namesrv("updateTopic", namesrv):
        changed = admin_client.update_topic(
            namesrv, config, cluster=cluster, broker_addr=broker_addr, credentials=credentials
        )
    return config, changed


_NAMESRV_HELP = (
    "Name server of running brokers: act on them instead of the store directory. "
    "Example: -n 127.0.0.1:9876"
)


# --- commands ------------------------------------------------------------------------


def _parse_bool(name: str, value: str | None) -> bool | None:
    """mqadmin reads these with Boolean.parseBoolean; here anything but true/false is an
    error rather than a silent false."""
    if value is None:
        return None
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise click.BadParameter(f"expected true or false, got {value!r}", param_hint=name)
    return lowered == "true"


_PERM_HELP = "Permission: 2 (write), 4 (read), 6 (read and write); +1 lets topics inherit it."


@click.command("updateTopic", short_help="Create a topic or change its queues and perm.")
@click.option("-t", "--topic", required=True, help="Topic name. Example: -t OrderEvents")
@click.option(
    "-r",
    "--readQueueNums",
    "read_queue_nums",
    type=click.IntRange(min=0, max=MAX_QUEUE_NUMS),
    help="Read queue count [new topics: 8]. Example: -r 4",
)
@click.option(
    "-w",
    "--writeQueueNums",
    "write_queue_nums",
    type=click.IntRange(min=0, max=MAX_QUEUE_NUMS),
    help="Write queue count [new topics: 8]. Example: -w 4",
)
@click.option(
    "-p",
    "--perm",
    type=click.IntRange(min=0, max=PERM_PRIORITY | PERM_READ | PERM_WRITE | PERM_INHERIT),
    help=f"{_PERM_HELP} [new topics: 6]. Example: -p 6",
)
@click.option("-o", "--order", help="Orderly topic, true|false. Example: -o true")
@click.option("-u", "--unit", help="Unit topic, true|false (a topicSysFlag bit). Example: -u false")
@click.option(
    "-s",
    "--hasUnitSub",
    "has_unit_sub",
    help="Has unit sub, true|false (a topicSysFlag bit). Example: -s false",
)
@click.option("-n", "--namesrvAddr", "namesrv", help=_NAMESRV_HELP)
@click.option(
    "-b",
    "--brokerAddr",
    "broker_addr",
    help="With -n: only this broker (default: every master). Example: -b 127.0.0.1:10911",
)
@click.option(
    "-c",
    "--clusterName",
    "cluster",
    help="With -n: the masters of this cluster only. Example: -c DefaultCluster",
)
@credential_options
@click.pass_obj
def update_topic(
    ctx: CliContext,
    topic: str,
    read_queue_nums: int | None,
    write_queue_nums: int | None,
    perm: int | None,
    order: str | None,
    unit: str | None,
    has_unit_sub: str | None,
    namesrv: str | None,
    broker_addr: str | None,
    cluster: str | None,
    credentials: SessionCredentials | None,
) -> None:
    """Create TOPIC in the store's config/topics.json, or change it. The store must not
    be running (the command takes its writer lock). A new topic gets mqadmin's defaults
    (8 read and 8 write queues, perm 6); an existing one keeps what is not given.

    With -n, the topic is created or changed on running brokers (every master, those of
    -c, or the one of -b), and values not given take mqadmin's defaults.

    \b
    Example:
      rocketstore --store ./store updateTopic -t OrderEvents -r 8 -w 8 -p 6
      rocketstore updateTopic -n 127.0.0.1:9876 -t OrderEvents -r 4 -w 4
    """
    options = UpdateTopicOptions(
        topic=topic.strip(),
        read_queue_nums=read_queue_nums,
        write_queue_nums=write_queue_nums,
        perm=perm,
        order=_parse_bool("-o", order),
        unit=_parse_bool("-u", unit),
        has_unit_sub=_parse_bool("-s", has_unit_sub),
    )
    if namesrv:
        config, changed = update_topic_online(
            namesrv, options, cluster=cluster, broker_addr=broker_addr, credentials=credentials
        )
        if ctx.as_json:
            ctx.emit({"namesrv": namesrv, "brokers": changed, **config.to_json()})
            return
        for address in changed:
            click.echo(f"create topic to {address} success.")
        click.echo(config.describe())
        return
    if broker_addr or cluster:
        raise CliError("-b and -c need -n NAMESRV (offline, the store directory is the target)")
    config = update_topic_offline(ctx.store_dir, options)
    if ctx.as_json:
        ctx.emit({"store": ctx.store_dir, **config.to_json()})
        return
    click.echo(f"create topic to {ctx.store_dir} success.")
    click.echo(config.describe())


@click.command("deleteTopic", short_help="Remove a topic from the store's topic config.")
@click.option("-t", "--topic", required=True, help="Topic name. Example: -t OrderEvents")
@click.option("-n", "--namesrvAddr", "namesrv", help=_NAMESRV_HELP)
@click.option(
    "-c",
    "--clusterName",
    "cluster",
    help="With -n: the masters of this cluster only. Example: -c DefaultCluster",
)
@credential_options
@click.pass_obj
def delete_topic(
    ctx: CliContext,
    topic: str,
    namesrv: str | None,
    cluster: str | None,
    credentials: SessionCredentials | None,
) -> None:
    """Remove TOPIC from the store's config/topics.json and delete its consume queues (the
    store must not be running). Its messages stay in the CommitLog until retention.

    With -n, the topic is deleted from the running masters (of -c) and the name server.

    \b
    Example:
      rocketstore --store ./store deleteTopic -t OrderEvents
      rocketstore deleteTopic -n 127.0.0.1:9876 -t OrderEvents
    """
    if namesrv:
        with through_namesrv("deleteTopic", namesrv):
            changed = admin_client.delete_topic(
                namesrv, topic.strip(), cluster=cluster, credentials=credentials
            )
        if ctx.as_json:
            ctx.emit({"namesrv": namesrv, "topic": topic.strip(), "brokers": changed})
            return
        click.echo(f"delete topic [{topic.strip()}] from cluster [{cluster or '*'}] success.")
        click.echo(f"delete topic [{topic.strip()}] from NameServer success.")
        return
    if cluster:
        raise CliError("-c needs -n NAMESRV (offline, the store directory is the target)")
    delete_topic_offline(ctx.store_dir, topic.strip())
    removed: list[tuple[str, int]] = []
    if missing_commitlog(ctx.store_dir, ctx.commitlog_dirs) is None:
        # As a broker's deleteTopic: the queues go too (recorded, so that recovery does
        # not build them again); the messages stay in the CommitLog until retention.
        with ctx.open_writer() as store:
            removed = store.delete_topic_queues(topic.strip())
    if ctx.as_json:
        queues = [queue_id for _, queue_id in removed]
        ctx.emit(
            {"store": ctx.store_dir, "topic": topic.strip(), "deleted": True, "queues": queues}
        )
        return
    click.echo(f"delete topic [{topic.strip()}] from store [{ctx.store_dir}] success.")


@click.command("topicRoute", short_help="The route a name server gives for a topic.")
@click.option("-t", "--topic", required=True, help="Topic name. Example: -t OrderEvents")
@click.option(
    "-l",
    "--list",
    "as_list",
    is_flag=True,
    help="Print mqadmin's table instead of JSON. Example: -l",
)
@click.option("-n", "--namesrvAddr", "namesrv", help=_NAMESRV_HELP)
@click.option(
    "--broker-addr",
    default=None,
    help="Broker address to show [default: brokerIP1:listenPort of -c, else "
    f"{DEFAULT_BROKER_ADDR}]. Example: --broker-addr 10.0.0.5:10911",
)
@click.option(
    "--broker-name",
    default=None,
    help=f"Broker name to show [default: brokerName of -c, else {DEFAULT_BROKER_NAME}]. "
    "Example: --broker-name broker-b",
)
@click.option(
    "--cluster",
    default=None,
    help=f"Cluster name to show [default: brokerClusterName of -c, else {DEFAULT_CLUSTER}]. "
    "Example: --cluster ProdCluster",
)
@credential_options
@click.pass_obj
def topic_route(
    ctx: CliContext,
    topic: str,
    as_list: bool,
    namesrv: str | None,
    broker_addr: str | None,
    broker_name: str | None,
    cluster: str | None,
    credentials: SessionCredentials | None,
) -> None:
    """The TopicRouteData a name server would return for TOPIC, from the store's
    config/topics.json (read only; works beside a running broker).

    With -n, the route comes from that running name server.

    \b
    Example:
      rocketstore --store ./store topicRoute -t OrderEvents
      rocketstore topicRoute -n 127.0.0.1:9876 -t OrderEvents -l
    """
    if namesrv:
        with through_namesrv("topicRoute", namesrv):
            found = admin_client.topic_route(namesrv, topic.strip(), credentials=credentials)
        if found is None:
            raise CliError(f"No topic route info in name server for the topic: {topic.strip()}")
        route = found
    else:
        settings = ctx.broker_config()
        options = RouteOptions(
            topic.strip(),
            broker_addr or ctx.config.store_host,
            broker_name or settings.broker_name,
            cluster or settings.broker_cluster_name,
        )
        route = topic_route_offline(ctx.store_dir, options)
    if ctx.as_json:
        ctx.emit(route)
        return
    if not as_list:
        click.echo(fastjson_pretty_route(route))
        return
    click.echo(
        ROUTE_LIST_FORMAT.format(
            "#ClusterName", "#BrokerName", "#BrokerAddrs", "#ReadQueue", "#WriteQueue", "#Perm"
        )
    )
    brokers = {b["brokerName"]: b for b in route.get("brokerDatas", [])}
    total_read = total_write = 0
    queue_datas: list[dict[str, Any]] = route.get("queueDatas", [])
    for queue_data in queue_datas:
        name = queue_data["brokerName"]
        broker = brokers.get(name, {})
        addresses = ", ".join(f"{k}={v}" for k, v in sorted(broker.get("brokerAddrs", {}).items()))
        read, write = queue_data["readQueueNums"], queue_data["writeQueueNums"]
        total_read += read
        total_write += write
        click.echo(
            ROUTE_LIST_FORMAT.format(
                broker.get("cluster", ""), name, f"{{{addresses}}}", read, write, queue_data["perm"]
            )
        )
    click.echo("-" * 158)
    click.echo(
        ROUTE_LIST_FORMAT.format("Total:", len(queue_datas), "", total_read, total_write, "")
    )


def fastjson_pretty_route(route: Mapping[str, Any]) -> str:
    """TopicRouteData as mqadmin prints it (``JSON.toJSONString(route, true)``): nulls
    left out, and the broker ids of ``brokerAddrs`` (Long keys) unquoted, as fastjson
    writes a map key that is not a string."""
    text = dump_pretty(_without_nulls(route))
    return _QUOTED_ID_KEY.sub(r"\1\2:", text)


# A line of the pretty JSON that starts with a quoted integer key: only brokerAddrs has
# such keys (filterServerTable's are addresses, the rest bean properties).
_QUOTED_ID_KEY = re.compile(r'^(\t*)"(-?\d+)":', re.MULTILINE)


def _without_nulls(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def register(group: click.Group) -> None:
    for command in (update_topic, delete_topic, topic_route):
        group.add_command(command)
