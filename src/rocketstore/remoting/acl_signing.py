"""RocketMQ 4.x ACL request signing (``AclClientRPCHook`` / ``AclUtils`` / ``AclSigner``),
shared by the broker's checker (rocketstore.broker.acl) and the clients that sign (the
Spark source's network mode): one implementation of the content and the HMAC.

Layer: remoting, pure: no sockets, no clock, no files.

How a client signs a request (4.9.8):

1. it adds ``AccessKey`` (and ``SecurityToken`` when it has one; Alibaba's clients also
   ``OnsChannel``) to the request's ext fields;
2. content = the VALUES of all ext fields except ``Signature``, concatenated in the order
   of their KEYS as a Java ``TreeMap`` sorts them (``String.compareTo``: UTF-16 code
   units), as UTF-8 bytes, followed by the raw body bytes (if any);
3. ``Signature`` = base64(HmacSHA1(key = UTF-8 secret key, content)).

A Java client with an RPC hook signs every request it sends, to brokers and name servers
alike (the hook sits on the remoting client both share); a name server ignores the fields.
``AclClientRPCHook`` signs the request's custom header fields, before
``_UNIQUE_KEY_QUERY`` (an ext field added beside the header) is on the wire, and a broker
(``PlainAccessValidator``) leaves that flag out when it recomputes: :func:`sign_request`
leaves it out too.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from rocketstore.remoting.codec import RemotingCommand

ACCESS_KEY = "AccessKey"
SECRET_KEY = "SecretKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
ONS_CHANNEL = "OnsChannel"
UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"


def java_string_order(key: str) -> bytes:
    """A sort key that orders strings as Java's ``String.compareTo`` does."""
    # Java compares strings by UTF-16 code units; UTF-16-BE bytes sort the same way
    # (they differ from code point order only for characters above U+FFFF).
    return key.encode("utf-16-be", "surrogatepass")


def field_text(value: object) -> str:
    """An ext field's value as the text that is signed."""
    # Ext fields are strings on the wire from Java; other clients send JSON numbers and
    # booleans, which they signed in their JSON spelling.
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else str(value)


def signing_content(
    ext_fields: Mapping[str, object], body: bytes | None, *, exclude: tuple[str, ...] = ()
) -> bytes:
    """``AclUtils.combineRequestContent``: sorted ext field values (without Signature and
    ``exclude``) as UTF-8, then the body."""
    skipped = {SIGNATURE, *exclude}
    values = [
        field_text(ext_fields[key])
        for key in sorted(ext_fields, key=java_string_order)
        if key not in skipped and ext_fields[key] is not None
    ]
    return "".join(values).encode("utf-8") + (bytes(body) if body else b"")


def sign_content(content: bytes, secret_key: str) -> str:
    """``AclSigner.calSignature``: base64(HmacSHA1(secret, content))."""
    digest = hmac.new(secret_key.encode("utf-8"), content, hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


def sign(ext_fields: Mapping[str, object], body: bytes | None, secret_key: str) -> str:
    """The ``Signature`` a RocketMQ client puts on a request with these ext fields (which
    must already hold ``AccessKey``) and body."""
    return sign_content(signing_content(ext_fields, body), secret_key)


@dataclass(frozen=True)
class SessionCredentials:
    """An ACL account as a client holds it (RocketMQ's ``SessionCredentials``). The secret
    never appears in a repr."""

    access_key: str
    secret_key: str = field(repr=False)
    security_token: str | None = field(default=None, repr=False)


def sign_request(cmd: RemotingCommand, credentials: SessionCredentials) -> RemotingCommand:
    """``cmd`` with ``AccessKey`` (``SecurityToken``) and ``Signature`` added, as
    ``AclClientRPCHook.doBeforeRequest`` adds them (a copy; ``cmd`` is not changed)."""
    ext: dict[str, str] = dict(cmd.ext_fields)
    ext[ACCESS_KEY] = credentials.access_key
    if credentials.security_token is not None:
        ext[SECURITY_TOKEN] = credentials.security_token
    content = signing_content(ext, cmd.body, exclude=(UNIQUE_MSG_QUERY_FLAG,))
    ext[SIGNATURE] = sign_content(content, credentials.secret_key)
    return replace(cmd, ext_fields=ext)
