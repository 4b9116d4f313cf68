"""The ACL file a broker runs with: reloaded when it changes, and edited by the ACL admin
requests (RocketMQ 4.9's ``PlainPermissionManager`` with ``AclFileWatchService``).

Layer: broker. File I/O here; the rules are :mod:`rocketstore.broker.acl`, the YAML
:mod:`rocketstore.broker.acl_file`.

As RocketMQ does, an edit re-reads the file, changes the account (or the global white
list), bumps ``dataVersion`` (counter + 1, timestamp now) and writes it back; here the
write is atomic (``.tmp`` then rename, mode 0600 from the start: the file holds secrets)
and the broker uses the new rules at once. A file edited by hand is reloaded at the next
poll when its content changed (RocketMQ compares an MD5 every 5 s); a file that no longer
reads is logged and the rules in use are kept.
"""

from __future__ import annotations

import hashlib
import logging
import os
import stat
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rocketstore.broker.acl import AclConfig, parse_document
from rocketstore.broker.acl_addresses import address_pattern
from rocketstore.broker.acl_file import dump_acl_document
from rocketstore.broker.acl_permissions import check_resource_perms
from rocketstore.errors import ConfigError
from rocketstore.files.atomic import write_atomic
from rocketstore.files.regular_file import open_regular_file

__all__ = ["WATCH_INTERVAL_MS", "AclFile"]

log = logging.getLogger(__name__)

# AclFileWatchService.WATCH_INTERVAL
WATCH_INTERVAL_MS = 5000

# createAclAccessConfigMap's keys, in its order
_ACCOUNT_KEYS = (
    "accessKey",
    "secretKey",
    "whiteRemoteAddress",
    "admin",
    "defaultTopicPerm",
    "defaultGroupPerm",
    "topicPerms",
    "groupPerms",
)


def _read(path: str) -> bytes:
    try:
        with open_regular_file(path, "ACL file") as f:
            return f.read()
    except OSError as e:
        raise ConfigError(f"ACL file {path}: cannot read it: {e}") from e


class AclFile:
    """One ACL file and the rules read from it; ``on_change`` gets each new config."""

    def __init__(self, path: str, on_change: Callable[[AclConfig], None] | None = None) -> None:
        self.path = os.path.abspath(path)
        self.on_change = on_change
        data = _read(self.path)
        self.config = self._parse(data)
        self._digest = hashlib.md5(data, usedforsecurity=False).digest()
        self._stat = self._signature()

    def _parse(self, data: bytes) -> AclConfig:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ConfigError(f"ACL file {self.path}: not UTF-8: {e}") from e
        config = AclConfig.from_document(parse_document(text, self.path), self.path)
        config.path = self.path
        return config

    def _signature(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size, st.st_ino

    def _use(self, config: AclConfig, data: bytes) -> None:
        self.config = config
        self._digest = hashlib.md5(data, usedforsecurity=False).digest()
        self._stat = self._signature()
        if self.on_change is not None:
            self.on_change(config)

    def poll(self) -> bool:
        """Reload the file if its content changed; True when new rules are in use."""
        signature = self._signature()
        if signature == self._stat:
            return False
        self._stat = signature
        try:
            data = _read(self.path)
        except ConfigError as e:
            log.error("%s; the ACL rules in use are kept", e)
            return False
        if hashlib.md5(data, usedforsecurity=False).digest() == self._digest:
            return False
        try:
            config = self._parse(data)
        except ConfigError as e:
            log.error("ACL file changed but cannot be used, the rules in use are kept: %s", e)
            return False
        self._use(config, data)
        log.info(
            "ACL file %s reloaded: %d accounts, %d global white addresses",
            self.path,
            len(config.accounts),
            len(config.global_white_addresses),
        )
        return True

    # The admin requests (AdminBrokerProcessor -> PlainPermissionManager)

    def _document(self) -> dict[str, Any]:
        data = _read(self.path)
        return parse_document(data.decode("utf-8", "replace"), self.path)

    def _write(self, document: dict[str, Any]) -> None:
        versions = document.get("dataVersion")
        first = versions[0] if isinstance(versions, list) and versions else {}
        counter = first.get("counter", 0) if isinstance(first, dict) else 0
        document["dataVersion"] = [
            {
                "counter": (int(counter) if str(counter).isdigit() else 0) + 1,
                "timestamp": time.time_ns() // 1_000_000,
            }
        ]
        data = dump_acl_document(document).encode("utf-8")
        config = self._parse(data)  # what is written must read back
        write_atomic(self.path, data, keep_backup=False, create_mode=0o600)
        self._use(config, data)

    def update_account(self, fields: Mapping[str, Any]) -> None:
        """UPDATE_AND_CREATE_ACL_CONFIG: create the account or change the fields given
        (``fields`` as ``PlainAccessConfig``: topicPerms / groupPerms as lists)."""
        access_key, secret_key = fields.get("accessKey"), fields.get("secretKey")
        if not access_key or not secret_key or len(access_key) <= 6 or len(secret_key) <= 6:
            # (RocketMQ's message also shows the secret; it stays out of answers and logs)
            raise ConfigError(
                f"The accessKey={access_key} and secretKey cannot be null and length should "
                "longer than 6"
            )
        for key in ("topicPerms", "groupPerms"):
            check_resource_perms(fields.get(key) or [])
        if fields.get("whiteRemoteAddress"):
            address_pattern(fields["whiteRemoteAddress"])
        document = self._document()
        accounts = document.get("accounts")
        if not isinstance(accounts, list):
            accounts = []
        old = next(
            (a for a in accounts if isinstance(a, dict) and a.get("accessKey") == access_key),
            None,
        )
        account: dict[str, Any] = dict(old) if old is not None else {}
        account["accessKey"] = access_key
        account["secretKey"] = secret_key
        if fields.get("whiteRemoteAddress") is not None:
            account["whiteRemoteAddress"] = fields["whiteRemoteAddress"]
        account["admin"] = bool(fields.get("admin"))
        for key in ("defaultTopicPerm", "defaultGroupPerm"):
            if fields.get(key):
                account[key] = fields[key]
        for key in ("topicPerms", "groupPerms"):
            if fields.get(key) is not None:
                account[key] = list(fields[key])
        ordered = {k: account[k] for k in _ACCOUNT_KEYS if k in account}
        ordered.update({k: v for k, v in account.items() if k not in ordered})
        # As RocketMQ: an updated account moves to the end of the list.
        document["accounts"] = [a for a in accounts if a is not old] + [ordered]
        self._write(document)

    def delete_account(self, access_key: str) -> bool:
        """DELETE_ACL_CONFIG: False when the file has no such account."""
        if not access_key:
            return False
        document = self._document()
        accounts = document.get("accounts")
        if not isinstance(accounts, list):
            return False
        kept = [
            a for a in accounts if not (isinstance(a, dict) and a.get("accessKey") == access_key)
        ]
        if len(kept) == len(accounts):
            return False
        document["accounts"] = kept
        self._write(document)
        return True

    def update_global_white_addresses(self, addresses: Sequence[str]) -> None:
        """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: the global white list replaced."""
        for address in addresses:
            address_pattern(address)
        document = self._document()
        document["globalWhiteRemoteAddresses"] = list(addresses)
        self._write(document)

    def readable_by_others(self) -> bool:
        try:
            mode = os.stat(self.path).st_mode
        except OSError:
            return False
        return bool(stat.S_IMODE(mode) & 0o044)
