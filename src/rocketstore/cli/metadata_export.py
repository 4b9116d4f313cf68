"""``exportMetadata``: the store's topic and subscription-group configs, written as
mqadmin's exportMetadata writes what a broker gives it.

Layer: cli. mqadmin asks a broker for its topics (GET_ALL_TOPIC_CONFIG) and groups
(GET_ALL_SUBSCRIPTIONGROUP_CONFIG) and keeps the users' ones: system topics (the broker's
list, which holds its cluster and broker name), retry and DLQ topics unless ``-s``, and
system groups go. Offline the same tables come from ``config/topics.json`` and
``config/subscriptionGroup.json`` with the broker's built-in entries, so the result is
what mqadmin writes for a broker serving this store.

The files are fastjson's pretty JSON (tabs, beans' fields by name, maps in the order of
the Java map that held them):

* ``-b``: the broker's wrappers as mqadmin decoded them (``dataVersion`` plus the table,
  in a ConcurrentHashMap's order), to ``topic.json`` (``-t``) or ``subscriptionGroup.json``
  (``-g``);
* otherwise (mqadmin's ``-c``): a HashMap with the tables (``-t``: topics only, ``-g``:
  groups only, else both, to ``metadata.json``) and ``exportTime``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import click

from rocketstore.broker.broker_config import BrokerConfig, dump_pretty
from rocketstore.broker.subscription_groups import SubscriptionGroupManager, is_system_group
from rocketstore.broker.topic_config import TopicConfigManager, topic_manager_for
from rocketstore.cli.context import CliContext, CliError
from rocketstore.cli.topic_admin import check_config_store_dir
from rocketstore.format.javahash import (
    concurrent_hashmap_capacity,
    iteration_order,
    java_hashmap_order,
)
from rocketstore.paths import DLQ_PREFIX, RETRY_PREFIX

DEFAULT_FILE_PATH = "/tmp/rocketmq/export"  # ExportMetadataCommand's
# DefaultMQAdminExtImpl.SYSTEM_GROUP_SET: groups mqadmin leaves out besides CID_RMQ_SYS_*.
SYSTEM_GROUPS = frozenset(
    (
        "DEFAULT_CONSUMER",
        "DEFAULT_PRODUCER",
        "TOOLS_CONSUMER",
        "FILTERSRV_CONSUMER",
        "__MONITOR_CONSUMER",
        "CLIENT_INNER_PRODUCER",
        "SELF_TEST_P_GROUP",
        "SELF_TEST_C_GROUP",
        "CID_ONS-HTTP-PROXY",
        "CID_ONSAPI_PERMISSION",
        "CID_ONSAPI_OWNER",
        "CID_ONSAPI_PULL",
        "CID_RMQ_SYS_TRANS",
    )
)
# A broker's topic and group tables: ConcurrentHashMap(1024), so 2048 buckets.
BROKER_TABLE_CAPACITY = 2048


@dataclass(frozen=True)
class ExportRequest:
    """What to export: ``topics_only`` (-t), ``groups_only`` (-g), ``special_topics``
    (-s: retry and DLQ topics too), ``broker_layout`` (-b given)."""

    file_path: str
    topics_only: bool
    groups_only: bool
    special_topics: bool
    broker_layout: bool


def user_topics(manager: TopicConfigManager, special_topics: bool) -> list[str]:
    """DefaultMQAdminExtImpl.getUserTopicConfig's topics: the broker's system topics out,
    retry and DLQ topics out unless asked for."""
    system = set(manager.system_topics())
    return [
        config.topic_name
        for config in manager.all()
        if config.topic_name not in system
        and (special_topics or not config.topic_name.startswith((RETRY_PREFIX, DLQ_PREFIX)))
    ]


def user_groups(groups: SubscriptionGroupManager) -> list[str]:
    """getUserSubscriptionGroup's groups: system ones out."""
    return [
        config.group_name
        for config in groups.all()
        if not is_system_group(config.group_name) and config.group_name not in SYSTEM_GROUPS
    ]


def export_documents(
    root: str, broker: BrokerConfig, request: ExportRequest, now_ms: int
) -> tuple[str, dict[str, Any]]:
    """The file mqadmin would write and its JSON document."""
    topics = topic_manager_for(root, broker)
    groups = SubscriptionGroupManager(root, auto_create=broker.auto_create_subscription_group)
    topic_configs = {config.topic_name: config for config in topics.all()}
    group_configs = {config.group_name: config for config in groups.all()}
    # The tables in the order mqadmin holds them after decoding the broker's answer.
    topic_names = _decoded_order(topic_configs, set(user_topics(topics, request.special_topics)))
    group_names = _decoded_order(group_configs, set(user_groups(groups)))
    topic_table = {name: topic_configs[name].to_json() for name in topic_names}
    group_table = {name: group_configs[name].to_json() for name in group_names}
    if request.broker_layout:
        if request.topics_only:
            wrapper = {
                "dataVersion": topics.data_version.to_json(),
                "topicConfigTable": topic_table,
            }
            return os.path.join(request.file_path, "topic.json"), wrapper
        wrapper = {
            "dataVersion": groups.data_version.to_json(),
            "subscriptionGroupTable": group_table,
        }
        return os.path.join(request.file_path, "subscriptionGroup.json"), wrapper
    # mqadmin's -c path copies each table into a HashMap, in the decoded order.
    result: dict[str, Any] = {}
    if request.topics_only:
        result["topicConfigTable"] = _ordered(topic_table)
        name = "topic.json"
    elif request.groups_only:
        result["subscriptionGroupTable"] = _ordered(group_table)
        name = "subscriptionGroup.json"
    else:
        result["topicConfigTable"] = _ordered(topic_table)
        result["subscriptionGroupTable"] = _ordered(group_table)
        name = "metadata.json"
    result["exportTime"] = now_ms
    return os.path.join(request.file_path, name), _ordered(result)


def _decoded_order(names: Iterable[str], kept: set[str]) -> list[str]:
    """The kept names in the order mqadmin iterates them: the broker writes its table
    (a ConcurrentHashMap(1024)) in its order; fastjson reads it into a new
    ConcurrentHashMap sized by all its entries; mqadmin then removes the system ones
    (the table keeps its size)."""
    written = java_hashmap_order(sorted(names), initial_capacity=BROKER_TABLE_CAPACITY)
    decoded = iteration_order(written, concurrent_hashmap_capacity(len(written)))
    return [name for name in decoded if name in kept]


def _ordered(table: dict[str, Any]) -> dict[str, Any]:
    """``table`` put in its order into a new HashMap, as that iterates it (fastjson writes a
    map in its iteration order)."""
    return {key: table[key] for key in java_hashmap_order(table)}


@click.command("exportMetadata", short_help="Topic and group configs as mqadmin exports them.")
@click.option(
    "-c",
    "--clusterName",
    "cluster",
    default=None,
    help="Accepted for mqadmin compatibility (offline the store is the cluster). "
    "Example: -c DefaultCluster",
)
@click.option(
    "-b",
    "--brokerAddr",
    "broker_addr",
    default=None,
    help="Write mqadmin's per-broker layout (the broker's wrapper with its dataVersion; "
    "needs -t or -g). The address itself is not used offline. Example: -b 127.0.0.1:10911",
)
@click.option(
    "-f",
    "--filePath",
    "file_path",
    default=DEFAULT_FILE_PATH,
    show_default=True,
    help="Directory to write metadata.json (or topic.json / subscriptionGroup.json) into. "
    "Example: -f ./export",
)
@click.option(
    "-t", "--topic", "topics_only", is_flag=True, help="Only the topics. Example: -t -f ./export"
)
@click.option(
    "-g",
    "--subscriptionGroup",
    "groups_only",
    is_flag=True,
    help="Only the subscription groups. Example: -g -f ./export",
)
@click.option(
    "-s",
    "--specialTopic",
    "special_topics",
    is_flag=True,
    help="Retry and DLQ topics too. Example: -s",
)
@click.pass_obj
def export_metadata(
    ctx: CliContext,
    cluster: str | None,
    broker_addr: str | None,
    file_path: str,
    topics_only: bool,
    groups_only: bool,
    special_topics: bool,
) -> None:
    """The store's user topics and subscription groups as mqadmin's exportMetadata writes
    them (system topics and groups left out, retry and DLQ topics unless -s). The
    broker's name and cluster (system topics) come from -c's settings file.

    \b
    Example:
      rocketstore --store ./store exportMetadata -f ./export
      rocketstore -c broker.conf exportMetadata -b 127.0.0.1:10911 -t -f ./export
    """
    if broker_addr is not None and not (topics_only or groups_only):
        # mqadmin's -b path writes nothing without one of them.
        raise CliError("-b exports topics (-t) or subscription groups (-g): give one")
    if topics_only and groups_only:
        raise CliError("-t and -g: give one (neither exports both)")
    if not file_path.strip():
        raise CliError("-f must name a directory")
    root = ctx.store_dir
    check_config_store_dir(root, create=False)
    request = ExportRequest(
        file_path.strip(), topics_only, groups_only, special_topics, broker_addr is not None
    )
    path, document = export_documents(root, ctx.broker_config(), request, int(time.time() * 1000))
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(dump_pretty(document))
    except OSError as e:
        raise CliError(f"cannot write {path}: {e}") from e
    if ctx.as_json:
        ctx.emit({"path": path, **document})
        return
    click.echo(f"export {path} success")


def register(group: click.Group) -> None:
    group.add_command(export_metadata)
