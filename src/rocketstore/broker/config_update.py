"""A running broker's settings changed by an operator: UPDATE_BROKER_CONFIG (25), what
``mqadmin updateBrokerConfig -k KEY -v VALUE`` sends, as RocketMQ's AdminBrokerProcessor
takes it, and stricter where RocketMQ is silent.

* The body is Java properties text (``MixAll.properties2String``).
* A key of the black list (``configBlackList``, and always ``brokerConfigPath``,
  ``rocketmqHome`` and ``configBlackList`` itself) refuses the whole request with
  NO_PERMISSION, in RocketMQ's words.
* Every key must be a setting this broker has and can change while it runs (``plan``),
  and every value must be valid; otherwise nothing changes and the answer names the key.
  RocketMQ answers success for keys it does not have and values it cannot read, changing
  nothing (or the field, but not what the code already read from it).
* The change is written into the broker.conf the broker was started with (``-c``) before
  it takes effect, so a failed write changes nothing: the entry is rewritten in place, the
  file's comments and other lines kept (RocketMQ rewrites the whole file with every
  setting). Without ``-c`` the change lasts until the broker stops (RocketMQ then writes
  ``~/store/config/broker.properties``, which no start reads).
* A new ``brokerPermission`` bumps the topic data version and registers the broker with
  its name servers at once, so the routes change now (RocketMQ's ``registerBrokerAll``).

Layer: broker (state, below the processors). ``plan`` is pure; ``persist`` writes the file;
``apply`` changes the live state.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass

from rocketstore.broker.broker_config import BROKER_ALIASES, RESTART_ONLY_FIELDS, BrokerConfig
from rocketstore.broker.context import BrokerContext
from rocketstore.config import LIVE_FIELDS, StoreConfig
from rocketstore.errors import ConfigError
from rocketstore.files.atomic import write_atomic
from rocketstore.settings_file import STORE_KEYS, apply_settings, camel_keys, update_properties_text

log = logging.getLogger(__name__)

SOURCE = "updateBrokerConfig"
# Keys no request may change, whatever configBlackList says (RocketMQ's initConfigBlackList).
ALWAYS_BLACK_LISTED = ("brokerConfigPath", "rocketmqHome", "configBlackList")
# Settings getBrokerConfig shows that are not BrokerConfig or store fields: where the
# broker listens and what it serves. They apply at the next start.
ADDRESS_KEYS = ("brokerIP1", "listenPort", "storePathRootDir")


@dataclass(frozen=True)
class SettingsChange:
    """What one request changes: BrokerConfig and StoreConfig fields with their new values,
    and each key's text as broker.conf gets it, in request order."""

    broker: dict[str, object]
    store: dict[str, object]
    text: dict[str, str]


def black_listed(keys: Mapping[str, str], config_black_list: str) -> list[str]:
    """The keys of the request that the black list forbids."""
    listed = {name.strip() for name in config_black_list.split(";")} | set(ALWAYS_BLACK_LISTED)
    return [key for key in keys if key in listed]


def java_text(value: object) -> str:
    """A setting's value as Java prints it (``true``, not ``True``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def plan(properties: Mapping[str, str], broker: BrokerConfig, store: StoreConfig) -> SettingsChange:
    """The change ``properties`` asks of a broker running with ``broker`` and ``store``;
    ConfigError naming every key it cannot take (unknown, or fixed until a restart) or the
    first value it cannot read or that fails validation. Nothing is changed here."""
    broker_keys = camel_keys(broker, BROKER_ALIASES)
    unknown: list[str] = []
    fixed: list[str] = []
    for key in properties:
        if key in broker_keys:
            if broker_keys[key] in RESTART_ONLY_FIELDS:
                fixed.append(key)
        elif key in STORE_KEYS:
            if STORE_KEYS[key] not in LIVE_FIELDS:
                fixed.append(key)
        elif key in ADDRESS_KEYS:
            fixed.append(key)
        else:
            unknown.append(key)
    if unknown:
        raise ConfigError(
            f"{SOURCE}: this broker has no setting {', '.join(unknown)} (getBrokerConfig "
            "lists the settings it has); nothing was changed"
        )
    if fixed:
        raise ConfigError(
            f"{SOURCE}: {', '.join(fixed)} cannot change while the broker runs: set "
            f"{'it' if len(fixed) == 1 else 'them'} in broker.conf and restart the broker; "
            "nothing was changed"
        )
    new_broker, _ = apply_settings(broker, properties, broker_keys, source=SOURCE)
    new_store, _ = apply_settings(store, properties, STORE_KEYS, source=SOURCE)
    try:
        new_broker.validate()
        new_store.validate()
    except ConfigError as e:
        raise ConfigError(f"{SOURCE}: {e}; nothing was changed") from e
    broker_changes: dict[str, object] = {}
    store_changes: dict[str, object] = {}
    text: dict[str, str] = {}
    for key in properties:
        if key in broker_keys:
            name = broker_keys[key]
            broker_changes[name] = getattr(new_broker, name)
            text[key] = java_text(broker_changes[name])
        else:
            name = STORE_KEYS[key]
            store_changes[name] = getattr(new_store, name)
            text[key] = java_text(store_changes[name])
    return SettingsChange(broker_changes, store_changes, text)


def persist(path: str, change: SettingsChange) -> None:
    """Write the change into the broker.conf at ``path`` (through a symlink to its
    target; atomically, the previous file kept as ``.bak``). The file is ISO-8859-1, as
    ``java.util.Properties.load`` reads it; new values are escaped to ASCII."""
    if not change.text:
        return
    real = os.path.realpath(path)
    with open(real, "rb") as f:
        text = f.read().decode("iso-8859-1")
    updated = update_properties_text(text, change.text)
    write_atomic(real, updated.encode("iso-8859-1"), keep_backup=True, keep_mode=True)


def apply(ctx: BrokerContext, change: SettingsChange) -> None:
    """Make the change live: the store's settings, the BrokerConfig (changed in place, so
    every holder of it sees the new values), and the components that keep a copy."""
    if change.store:
        ctx.store.update_config(**change.store)
    old_permission = ctx.config.broker_permission
    for name, value in change.broker.items():
        setattr(ctx.config, name, value)
    b = ctx.config
    ctx.topics.auto_create_topic_enable = b.auto_create_topic_enable
    ctx.topics.default_topic_queue_nums = b.default_topic_queue_nums
    ctx.groups.auto_create = b.auto_create_subscription_group
    if ctx.transactions is not None:
        ctx.transactions.timeout_ms = b.transaction_timeout_ms
        ctx.transactions.check_max = b.transaction_check_max
    ctx.config_version.next_version()
    if b.broker_permission != old_permission:
        log.warning(
            "brokerPermission %d -> %d: registering with the name servers now",
            old_permission,
            b.broker_permission,
        )
        ctx.topics.next_data_version()
        ctx.topics_changed()
