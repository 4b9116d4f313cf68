"""The name server's own settings (NamesrvConfig, and the listen port) and its KV config
table (KVConfigManager): what mqadmin's getNamesrvConfig, updateNamesrvConfig,
updateKvConfig, deleteKvConfig and updateOrderConf read and change.

Layer: broker. The KV table is kept as RocketMQ keeps it, ``{"configTable": {namespace:
{key: value}}}`` (KVConfigSerializeWrapper), written atomically after each change when the
name server has a ``kvConfigPath`` (``rocketstore serve``: ``<store>/config/kvConfig.json``;
``rocketstore namesrv``: RocketMQ's ``~/namesrv/kvConfig.json`` unless told otherwise).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from dataclasses import dataclass, fields, replace
from typing import Any

from rocketstore.errors import ConfigError
from rocketstore.files.atomic import read_json_with_backup, write_atomic
from rocketstore.settings_file import parse_java_properties

log = logging.getLogger(__name__)

# The namespace updateOrderConf and updateTopic -o write a topic's order config into.
ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"
# NamesrvConfig.configBlackList's default: keys updateNamesrvConfig refuses.
CONFIG_BLACK_LIST = "configBlackList;configStorePath;kvConfigPath"
# Settings the name server reads at each use, so an update takes effect at once.
LIVE_KEYS = frozenset(("orderMessageEnable", "clusterTest", "productEnvName"))
# The file updateNamesrvConfig writes (RocketMQ's configStorePath's name).
NAMESRV_PROPERTIES = "namesrv.properties"


@dataclass(frozen=True)
class NamesrvConfig:
    """RocketMQ 4.9.8's NamesrvConfig fields (Java names), and the listen port."""

    rocketmqHome: str = ""  # noqa: N815 - the Java property names are the contract
    kvConfigPath: str = ""  # noqa: N815
    configStorePath: str = ""  # noqa: N815
    productEnvName: str = "center"  # noqa: N815
    clusterTest: bool = False  # noqa: N815
    orderMessageEnable: bool = False  # noqa: N815
    configBlackList: str = CONFIG_BLACK_LIST  # noqa: N815
    listenPort: int = 9876  # noqa: N815

    def properties(self) -> dict[str, str]:
        """Every setting as text (what getNamesrvConfig shows)."""
        return {f.name: _text(getattr(self, f.name)) for f in fields(self)}

    def black_list(self) -> list[str]:
        return [key.strip() for key in self.configBlackList.split(";") if key.strip()]

    def updated(self, text: str) -> tuple[NamesrvConfig, list[str]]:
        """The settings after an updateNamesrvConfig body (``key=value`` lines), and the
        keys that changed. ConfigError names what is refused: a key on the black list, a
        key the name server lacks or can only take at start, a bad value."""
        try:
            given = parse_java_properties(text)
        except ConfigError as e:
            raise ConfigError(f"string2Properties error: {e}") from e
        barred = [key for key in given if key in self.black_list()]
        if barred:
            raise ConfigError("Can not update config in black list.")
        known = {f.name: f for f in fields(self)}
        changes: dict[str, Any] = {}
        for key, value in given.items():
            if key not in known:
                raise ConfigError(f"the name server has no setting {key!r}")
            if key not in LIVE_KEYS:
                raise ConfigError(f"{key} is read at start only: change it and restart")
            current = getattr(self, key)
            changes[key] = _parse(key, value, current)
        return replace(self, **changes), sorted(changes)


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _parse(key: str, value: str, current: object) -> object:
    text = value.strip()
    if isinstance(current, bool):
        if text.lower() not in ("true", "false"):
            raise ConfigError(f"{key}={value!r} must be true or false")
        return text.lower() == "true"
    if isinstance(current, int):
        try:
            return int(text)
        except ValueError as e:
            raise ConfigError(f"{key}={value!r} must be an integer") from e
    return text


def namesrv_config(listen_port: int, kv_config_path: str | None) -> NamesrvConfig:
    """The settings of a name server listening on ``listen_port``; ``kv_config_path``
    None keeps the KV table in memory only, and the settings unwritten. Otherwise
    updateNamesrvConfig writes the settings to ``namesrv.properties`` beside the KV file
    (RocketMQ's ``configStorePath``: ``~/namesrv/namesrv.properties`` by default, beside
    its default ``kvConfigPath``)."""
    store_path = ""
    if kv_config_path:
        store_path = os.path.join(os.path.dirname(kv_config_path), NAMESRV_PROPERTIES)
    return NamesrvConfig(
        rocketmqHome=os.environ.get("ROCKETMQ_HOME", ""),
        kvConfigPath=kv_config_path or "",
        configStorePath=store_path,
        listenPort=listen_port,
    )


def persist_namesrv_config(config: NamesrvConfig) -> None:
    """Write every setting to ``configStorePath`` as ``key=value`` lines, as RocketMQ's
    Configuration.persist does after each update. As in RocketMQ, the name server does
    not read the file back at start: it is the record of what was changed while running
    (put the keys in the start settings to keep them)."""
    if not config.configStorePath:
        return
    path = config.configStorePath
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    lines = "".join(f"{key}={value}\n" for key, value in sorted(config.properties().items()))
    write_atomic(path, lines.encode("utf-8"))


class KvConfigTable:
    """Namespace -> key -> value, persisted after each change when it has a path."""

    def __init__(self, path: str | None = None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._table: dict[str, dict[str, str]] = {}
        if path:
            self._table = _load(path)

    def get(self, namespace: str, key: str) -> str | None:
        with self._lock:
            return self._table.get(namespace, {}).get(key)

    def namespace(self, namespace: str) -> dict[str, str] | None:
        """A copy of one namespace's table (getKVListByNamespace), None when it has none."""
        with self._lock:
            table = self._table.get(namespace)
            return dict(table) if table is not None else None

    def put(self, namespace: str, key: str, value: str) -> None:
        with self._lock:
            self._table.setdefault(namespace, {})[key] = value
            self._persist()
        log.info("KV config put: %s %s %s", namespace, key, value)

    def delete(self, namespace: str, key: str) -> None:
        with self._lock:
            table = self._table.get(namespace)
            if table is None or key not in table:
                return
            del table[key]
            if not table:
                del self._table[namespace]
            self._persist()
        log.info("KV config deleted: %s %s", namespace, key)

    def _persist(self) -> None:
        if not self.path:
            return
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        body = json.dumps({"configTable": self._table}, indent="\t", ensure_ascii=False)
        write_atomic(self.path, body.encode("utf-8"))


def _load(path: str) -> dict[str, dict[str, str]]:
    """The table of a kvConfig.json (its ``.bak`` if it is gone); a file that is not one
    is refused with the reason, rather than replaced by an empty table at the next put."""
    document = read_json_with_backup(path, f"KV config file {path}")
    if document is None:
        return {}
    table = document.get("configTable") if isinstance(document, dict) else None
    if not isinstance(table, dict) or not all(
        isinstance(ns, dict) and all(isinstance(v, str) for v in ns.values())
        for ns in table.values()
    ):
        raise ConfigError(f"KV config file {path} has no configTable of text values")
    return {str(ns): {str(k): v for k, v in keys.items()} for ns, keys in table.items()}
