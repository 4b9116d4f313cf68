"""RocketMQ 4.x ACL checking (``PlainAccessValidator``) and the ACL file.

Layer: broker; pure functions apart from :meth:`AclConfig.load`. The signing (content and
HMAC) is :mod:`rocketstore.remoting.acl_signing`, shared with the clients that sign; its
names are re-exported here.

The broker (``PlainAccessValidator``) recomputes a request's signature leaving out
``Signature`` and ``_UNIQUE_KEY_QUERY``; some clients sign that flag of QUERY_MESSAGE too,
so both forms are accepted here.

Only authentication is implemented: a configured access key with the right secret may do
everything (RocketMQ's per-topic and per-group permissions and white-lists are not).
"""

from __future__ import annotations

import enum
import hmac
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from rocketstore.errors import ConfigError
from rocketstore.files.regular_file import open_regular_file

# The signing itself is shared with the clients that sign (the Spark source's network
# mode): rocketstore.remoting.acl_signing. Its names stay importable from here.
from rocketstore.remoting.acl_signing import (
    ACCESS_KEY,
    ONS_CHANNEL,
    SECRET_KEY,
    SECURITY_TOKEN,
    SIGNATURE,
    UNIQUE_MSG_QUERY_FLAG,
    field_text,
    sign,
    sign_content,
    signing_content,
)

__all__ = [
    "ACCESS_KEY",
    "ONS_CHANNEL",
    "SECRET_KEY",
    "SECURITY_TOKEN",
    "SIGNATURE",
    "UNIQUE_MSG_QUERY_FLAG",
    "AclCheck",
    "AclConfig",
    "parse_plain_acl_accounts",
    "sign",
    "sign_content",
    "signing_content",
    "verify",
]


class AclCheck(enum.Enum):
    """Outcome of :func:`verify` (the broker answers NO_PERMISSION on anything not OK)."""

    OK = "OK"
    NO_ACCESS_KEY = "NO_ACCESS_KEY"
    UNKNOWN_ACCESS_KEY = "UNKNOWN_ACCESS_KEY"
    NO_SIGNATURE = "NO_SIGNATURE"
    BAD_SIGNATURE = "BAD_SIGNATURE"

    @property
    def ok(self) -> bool:
        return self is AclCheck.OK


@dataclass
class AclConfig:
    """Access keys and their secrets."""

    accounts: dict[str, str] = field(default_factory=dict)  # access key -> secret key

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> AclConfig:
        """Read a JSON file ``{"accounts": [{"accessKey": .., "secretKey": ..}, ...]}`` or
        RocketMQ's ``plain_acl.yml`` (its ``accounts`` list; other keys are ignored)."""
        name = os.fspath(path)
        try:
            with open_regular_file(name, "ACL file") as f:
                text = f.read().decode("utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"ACL file {name}: cannot read it: {e}") from e
        if text.lstrip().startswith("{"):
            try:
                document = json.loads(text)
            except (ValueError, RecursionError) as e:
                raise ConfigError(f"ACL file {name}: not valid JSON: {e}") from e
            if not isinstance(document, dict):
                raise ConfigError(f"ACL file {name}: expected a JSON object")
            entries = document.get("accounts")
        else:
            entries = parse_plain_acl_accounts(text, name)
        return cls.from_entries(entries, name)

    @classmethod
    def from_entries(cls, entries: object, where: str = "ACL config") -> AclConfig:
        if not isinstance(entries, list) or not entries:
            raise ConfigError(f"{where}: 'accounts' must be a non-empty list")
        accounts: dict[str, str] = {}
        for number, entry in enumerate(entries, 1):
            if not isinstance(entry, dict):
                raise ConfigError(f"{where}: account {number} is not a mapping")
            access_key = entry.get("accessKey")
            secret_key = entry.get("secretKey")
            for label, value in (("accessKey", access_key), ("secretKey", secret_key)):
                if not isinstance(value, str | int) or isinstance(value, bool) or value == "":
                    raise ConfigError(f"{where}: account {number} has no {label}")
            # PlainPermissionManager refuses keys of 6 characters or fewer.
            if len(str(access_key)) <= 6 or len(str(secret_key)) <= 6:
                raise ConfigError(
                    f"{where}: account {number}: accessKey and secretKey need at least "
                    "7 characters (as RocketMQ requires)"
                )
            if str(access_key) in accounts:
                raise ConfigError(f"{where}: accessKey {access_key} appears twice")
            accounts[str(access_key)] = str(secret_key)
        return cls(accounts=accounts)


def _yaml_scalar(text: str) -> str:
    """A plain or quoted YAML scalar, without a trailing ``# comment``."""
    value = text.strip()
    if value[:1] in ("'", '"'):
        closing = value.find(value[0], 1)
        return value[1:closing] if closing > 0 else value[1:]
    if value.startswith("#"):
        return ""
    return value.split(" #", 1)[0].rstrip()


def parse_plain_acl_accounts(text: str, where: str) -> list[dict[str, str]]:
    """The ``accounts`` list of a ``plain_acl.yml`` as a list of {key: scalar}.

    A deliberately small reader for that file's shape (block lists of flat mappings, as
    RocketMQ's distribution ships it); nested lists inside an account (topicPerms,
    groupPerms) are skipped. No YAML library is needed at runtime.
    """
    accounts: list[dict[str, str]] = []
    in_accounts = False
    item_indent: int | None = None
    current: dict[str, str] | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        line = raw.strip()
        if indent == 0 and not line.startswith("-"):
            key, _, rest = line.partition(":")
            in_accounts = key.strip() == "accounts"
            if in_accounts and _yaml_scalar(rest):
                raise ConfigError(f"{where} line {number}: accounts must be a block list")
            item_indent = None
            current = None
            continue
        if not in_accounts:
            continue
        if line.startswith("- ") or line == "-":
            if item_indent is None:
                item_indent = indent
            if indent == item_indent:
                current = {}
                accounts.append(current)
                line = line[1:].strip()
                indent += 2
                if not line:
                    continue
            elif current is None:
                raise ConfigError(f"{where} line {number}: unexpected list item")
            else:
                continue  # an item of a nested list (topicPerms ...)
        if current is None or item_indent is None or indent <= item_indent:
            raise ConfigError(f"{where} line {number}: expected '- key: value' under accounts")
        key, sep, value = line.partition(":")
        if not sep:
            raise ConfigError(f"{where} line {number}: expected 'key: value', got {line!r}")
        if indent == item_indent + 2:
            current[key.strip()] = _yaml_scalar(value)
    return accounts


def verify(ext_fields: Mapping[str, object], body: bytes | None, acl: AclConfig) -> AclCheck:
    """Check a request's AccessKey and Signature against ``acl``."""
    access_key = ext_fields.get(ACCESS_KEY)
    if access_key is None or access_key == "":
        return AclCheck.NO_ACCESS_KEY
    secret = acl.accounts.get(field_text(access_key))
    if secret is None:
        return AclCheck.UNKNOWN_ACCESS_KEY
    signature = ext_fields.get(SIGNATURE)
    if not isinstance(signature, str) or not signature:
        return AclCheck.NO_SIGNATURE
    candidates = [signing_content(ext_fields, body, exclude=(UNIQUE_MSG_QUERY_FLAG,))]
    if UNIQUE_MSG_QUERY_FLAG in ext_fields:
        candidates.append(signing_content(ext_fields, body))
    for content in candidates:
        if hmac.compare_digest(sign_content(content, secret), signature):
            return AclCheck.OK
    return AclCheck.BAD_SIGNATURE
