"""RocketMQ 4.9's ACL (``PlainAccessValidator`` / ``PlainPermissionManager``): the ACL
file's accounts and white lists, and the check every request to the broker passes.

Layer: broker; pure functions apart from :meth:`AclConfig.load`. The signing (content and
HMAC) is :mod:`rocketstore.remoting.acl_signing`, shared with the clients that sign; its
names are re-exported here. Which resource a request needs is
:mod:`rocketstore.broker.acl_permissions`, the address patterns
:mod:`rocketstore.broker.acl_addresses`, the file's YAML :mod:`rocketstore.broker.acl_file`.

:func:`authorize` decides as ``PlainPermissionManager.validate`` does, in its order:

1. the request's resources are read (a request that cannot be read is refused);
2. a client whose IP matches ``globalWhiteRemoteAddresses`` may do anything, unsigned;
3. the AccessKey must be configured; a client whose IP matches the account's
   ``whiteRemoteAddress`` may then do anything that account could, unsigned;
4. the signature must verify (some clients sign ``_UNIQUE_KEY_QUERY`` of QUERY_MESSAGE
   too, which the broker leaves out: both forms are accepted), and the request must not
   have a shape only a shifted signature produces (rocketstore's: :mod:`.acl_shapes`);
5. publishing to RMQ_SYS_TRACE_TOPIC (message traces) is let through;
6. admin-only request codes need ``admin: true``; each resource needs its permission, from
   topicPerms / groupPerms, else defaultTopicPerm / defaultGroupPerm (missing: DENY); an
   admin account without topicPerms and groupPerms may use every resource.
"""

from __future__ import annotations

import enum
import hmac
import json
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rocketstore.broker.acl_addresses import AddressPattern, address_pattern
from rocketstore.broker.acl_file import parse_acl_document
from rocketstore.broker.acl_permissions import (
    PUB,
    TRACE_TOPIC,
    check_permission,
    is_group,
    needs_admin,
    parse_perm,
    parse_resource_perms,
    request_resources,
    resource_text,
)
from rocketstore.broker.acl_shapes import shifted_shape
from rocketstore.broker.remoting import ProtocolError
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
    "AclAccount",
    "AclCheck",
    "AclConfig",
    "AclVerdict",
    "authorize",
    "decide",
    "parse_plain_acl_accounts",
    "sign",
    "sign_content",
    "signing_content",
    "verify",
]

log = logging.getLogger(__name__)


class AclCheck(enum.Enum):
    """Outcome of :func:`verify` and :func:`authorize` (the broker answers NO_PERMISSION
    on anything not OK)."""

    OK = "OK"
    NO_ACCESS_KEY = "NO_ACCESS_KEY"
    UNKNOWN_ACCESS_KEY = "UNKNOWN_ACCESS_KEY"
    NO_SIGNATURE = "NO_SIGNATURE"
    BAD_SIGNATURE = "BAD_SIGNATURE"
    # authorize only:
    BAD_REQUEST = "BAD_REQUEST"  # its resources cannot be read (RocketMQ: AclException)
    NOT_ADMIN = "NOT_ADMIN"  # an admin-only request code from a non-admin account
    DENIED = "DENIED"  # a topic or group the account has no permission for

    @property
    def ok(self) -> bool:
        return self is AclCheck.OK


@dataclass(frozen=True)
class AclVerdict:
    """What :func:`authorize` decided; ``message`` is RocketMQ's AclException text."""

    check: AclCheck
    message: str = ""
    access_key: str | None = None

    @property
    def ok(self) -> bool:
        return self.check.ok


@dataclass(frozen=True)
class AclAccount:
    """One account of the ACL file (RocketMQ's ``PlainAccessConfig`` /
    ``PlainAccessResource``); the secret never appears in a repr."""

    access_key: str
    secret_key: str = field(repr=False)
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: int = 1  # DENY, as a missing defaultTopicPerm
    default_group_perm: int = 1
    # topics, and groups as their retry topic %RETRY%group -> permission bits
    resource_perms: Mapping[str, int] = field(default_factory=dict)
    white: AddressPattern = field(default_factory=lambda: address_pattern(None), repr=False)

    @classmethod
    def from_entry(cls, entry: Mapping[str, Any], where: str) -> AclAccount:
        access_key, secret_key = entry.get("accessKey"), entry.get("secretKey")
        for label, value in (("accessKey", access_key), ("secretKey", secret_key)):
            if not isinstance(value, str | int) or isinstance(value, bool) or value == "":
                raise ConfigError(f"{where} has no {label}")
        # PlainPermissionManager refuses keys of 6 characters or fewer.
        if len(str(access_key)) <= 6 or len(str(secret_key)) <= 6:
            raise ConfigError(
                f"{where}: accessKey and secretKey need at least 7 characters "
                "(as RocketMQ requires)"
            )
        white = entry.get("whiteRemoteAddress")
        perms = parse_resource_perms(entry.get("groupPerms"), topics=False, where=where)
        perms.update(parse_resource_perms(entry.get("topicPerms"), topics=True, where=where))
        admin = entry.get("admin")
        return cls(
            access_key=str(access_key),
            secret_key=str(secret_key),
            white_remote_address=None if white is None else str(white),
            admin=admin is True or str(admin).strip().lower() == "true",
            default_topic_perm=parse_perm(entry.get("defaultTopicPerm")),
            default_group_perm=parse_perm(entry.get("defaultGroupPerm")),
            resource_perms=perms,
            white=address_pattern(None if white is None else str(white)),
        )


@dataclass
class AclConfig:
    """The ACL file: accounts, global white list, data version.

    ``accounts`` (access key -> secret) is all a config built by hand needs: an account
    without an :class:`AclAccount` in ``rules`` may do everything once authenticated (an
    admin without resource permissions)."""

    accounts: dict[str, str] = field(default_factory=dict)  # access key -> secret key
    rules: dict[str, AclAccount] = field(default_factory=dict)
    global_white_addresses: list[str] = field(default_factory=list)
    global_white: list[AddressPattern] = field(default_factory=list, repr=False)
    # dataVersion's first element ({"timestamp": ms, "counter": n}), as in the file
    data_version: dict[str, int] = field(default_factory=dict)
    path: str | None = None

    def account(self, access_key: str) -> AclAccount | None:
        rule = self.rules.get(access_key)
        if rule is not None:
            return rule
        secret = self.accounts.get(access_key)
        if secret is None:
            return None
        return AclAccount(access_key, secret, admin=True)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> AclConfig:
        """Read RocketMQ's ``plain_acl.yml`` (or the same document as JSON)."""
        name = os.fspath(path)
        try:
            with open_regular_file(name, "ACL file") as f:
                text = f.read().decode("utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"ACL file {name}: cannot read it: {e}") from e
        config = cls.from_document(parse_document(text, name), name)
        config.path = name
        return config

    @classmethod
    def from_document(cls, document: Mapping[str, Any], where: str = "ACL config") -> AclConfig:
        entries = document.get("accounts")
        whites = document.get("globalWhiteRemoteAddresses")
        if whites is None:
            whites = []
        if not isinstance(whites, list):
            raise ConfigError(f"{where}: 'globalWhiteRemoteAddresses' must be a list")
        if entries is None and whites:
            entries = []
        config = cls.from_entries(entries, where, allow_empty=bool(whites))
        config.global_white_addresses = [str(w) for w in whites if w is not None]
        config.global_white = [address_pattern(w) for w in config.global_white_addresses]
        versions = document.get("dataVersion")
        if isinstance(versions, list) and versions and isinstance(versions[0], dict):
            config.data_version = {
                k: int(v)
                for k, v in versions[0].items()
                if isinstance(v, int | str)
                if str(v).lstrip("-").isdigit()
            }
        return config

    @classmethod
    def from_entries(
        cls, entries: object, where: str = "ACL config", *, allow_empty: bool = False
    ) -> AclConfig:
        if not isinstance(entries, list):
            raise ConfigError(
                f"{where}: 'accounts' must be a non-empty list (a block list of '- accessKey: ...')"
            )
        if not entries and not allow_empty:
            raise ConfigError(
                f"{where}: 'accounts' must be a non-empty list (or give globalWhiteRemoteAddresses)"
            )
        config = cls()
        for number, entry in enumerate(entries, 1):
            if not isinstance(entry, dict):
                raise ConfigError(f"{where}: account {number} is not a mapping")
            account = AclAccount.from_entry(entry, f"{where}: account {number}")
            if account.access_key in config.accounts:
                raise ConfigError(f"{where}: accessKey {account.access_key} appears twice")
            config.accounts[account.access_key] = account.secret_key
            config.rules[account.access_key] = account
        return config


def parse_document(text: str, where: str) -> dict[str, Any]:
    """The ACL file's text (YAML, or JSON when it starts with ``{``) as a mapping."""
    if text.lstrip().startswith("{"):
        try:
            document = json.loads(text)
        except (ValueError, RecursionError) as e:
            raise ConfigError(f"ACL file {where}: not valid JSON: {e}") from e
        if not isinstance(document, dict):
            raise ConfigError(f"ACL file {where}: expected a JSON object")
        return document
    return parse_acl_document(text, f"ACL file {where}")


def parse_plain_acl_accounts(text: str, where: str) -> list[dict[str, Any]]:
    """The ``accounts`` list of a ``plain_acl.yml`` (each a mapping of its keys)."""
    accounts = parse_acl_document(text, where).get("accounts")
    return [a for a in accounts if isinstance(a, dict)] if isinstance(accounts, list) else []


def verify(ext_fields: Mapping[str, object], body: bytes | None, acl: AclConfig) -> AclCheck:
    """Check a request's AccessKey and Signature against ``acl`` (authentication only)."""
    access_key = ext_fields.get(ACCESS_KEY)
    if access_key is None or access_key == "":
        return AclCheck.NO_ACCESS_KEY
    account = acl.account(field_text(access_key))
    if account is None:
        return AclCheck.UNKNOWN_ACCESS_KEY
    return _check_signature(ext_fields, body, account.secret_key)


def _check_signature(ext_fields: Mapping[str, object], body: bytes | None, secret: str) -> AclCheck:
    signature = ext_fields.get(SIGNATURE)
    if not isinstance(signature, str) or not signature:
        return AclCheck.NO_SIGNATURE
    candidates = [signing_content(ext_fields, body, exclude=(UNIQUE_MSG_QUERY_FLAG,))]
    if UNIQUE_MSG_QUERY_FLAG in ext_fields:
        candidates.append(signing_content(ext_fields, body))
    # compare_digest: the time taken does not tell how much of a guess was right.
    matched = False
    for content in candidates:
        matched |= hmac.compare_digest(sign_content(content, secret).encode(), signature.encode())
    return AclCheck.OK if matched else AclCheck.BAD_SIGNATURE


def authorize(
    code: int,
    ext_fields: Mapping[str, str],
    body: bytes | None,
    client_ip: str,
    acl: AclConfig,
) -> AclVerdict:
    """May this request be served? (``PlainAccessValidator.parse`` + ``validate``; the
    order is in the module's docstring.)"""
    try:
        needed = request_resources(code, ext_fields, body)
    except ProtocolError as e:
        return AclVerdict(AclCheck.BAD_REQUEST, str(e))
    return decide(
        needed,
        client_ip,
        acl,
        ext_fields.get(ACCESS_KEY),
        lambda secret: _check_signature(ext_fields, body, secret),
        code=code,
        shape=lambda: shifted_shape(code, ext_fields),
    )


def decide(
    needed: Mapping[str, int],
    client_ip: str,
    acl: AclConfig,
    access_key: str | None,
    signed: Callable[[str], AclCheck],
    *,
    code: int | None = None,
    shape: Callable[[], str | None] | None = None,
) -> AclVerdict:
    """The verdict on a request that needs ``needed`` (resource -> permission), once its
    resources are read: steps 2-6 of the module's docstring, for every protocol.
    ``signed(secret)`` checks the request's signature with the account's secret (each
    protocol signs its own content); ``code``: a remoting request code (admin-only
    codes), None for a gRPC call; ``shape``: what a shifted signature would have made
    of the request (remoting only)."""
    if any(pattern.matches(client_ip) for pattern in acl.global_white):
        return AclVerdict(AclCheck.OK)
    # (RocketMQ reads an empty AccessKey, which the C++ client sends when it has no
    # account, as an unknown one: the same refusal, in plainer words here.)
    if not access_key:
        return AclVerdict(AclCheck.NO_ACCESS_KEY, "No accessKey is configured")
    account = acl.account(access_key)
    if account is None:
        return AclVerdict(
            AclCheck.UNKNOWN_ACCESS_KEY, f"No acl config for {access_key}", access_key
        )
    if account.white.matches(client_ip):
        return AclVerdict(AclCheck.OK, access_key=access_key)
    checked = signed(account.secret_key)
    if not checked.ok:
        return AclVerdict(checked, f"Check signature failed for accessKey={access_key}", access_key)
    shifted = shape() if shape is not None else None
    if shifted is not None:
        return AclVerdict(
            AclCheck.BAD_REQUEST, f"refused as a shifted signature: {shifted}", access_key
        )
    if needed.get(TRACE_TOPIC) == PUB:
        return AclVerdict(AclCheck.OK, access_key=access_key)
    return _check_perms(code, needed, account)


def _check_perms(code: int | None, needed: Mapping[str, int], account: AclAccount) -> AclVerdict:
    """``PlainPermissionManager.checkPerm``."""
    key = account.access_key
    if code is not None and needs_admin(code) and not account.admin:
        return AclVerdict(
            AclCheck.NOT_ADMIN,
            f"Need admin permission for request code={code}, but accessKey={key} is not",
            key,
        )
    if not needed or (account.admin and not account.resource_perms):
        return AclVerdict(AclCheck.OK, access_key=key)
    for resource, perm in needed.items():
        owned = account.resource_perms.get(resource)
        if owned is None:
            owned = account.default_group_perm if is_group(resource) else account.default_topic_perm
        if not check_permission(perm, owned):
            # RocketMQ's words, "default" even when a resource's own permission refused.
            return AclVerdict(
                AclCheck.DENIED, f"No default permission for {resource_text(resource)}", key
            )
    return AclVerdict(AclCheck.OK, access_key=key)
