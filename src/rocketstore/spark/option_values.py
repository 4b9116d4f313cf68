"""The values of the Spark data source's options, one kind each (pure Python): integers,
booleans, JSON, Spark's time strings, key lists, column lists, name server addresses and
ACL credentials.

Layer: spark (top). Shared by the read options (:mod:`rocketstore.spark.options`) and the
write options (:mod:`rocketstore.spark.write_options`); every error is a
:class:`~rocketstore.errors.ConfigError` naming the option and its value. Option maps
arrive with their keys lower-cased, as Spark passes them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import overload

from rocketstore.errors import ConfigError
from rocketstore.remoting.acl_signing import SessionCredentials
from rocketstore.spark.columns import check_columns

# Spark's time strings (JavaUtils.timeStringAsMs): a number and an optional unit, ms if none.
_TIME_UNITS_MS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000,
                  "h": 3_600_000, "d": 86_400_000}  # fmt: skip
_TIME_STRING = re.compile(r"(\d+)\s*([a-z]+)?")


@overload
def int_option(options: Mapping[str, str], name: str, minimum: int) -> int | None: ...
@overload
def int_option(options: Mapping[str, str], name: str, minimum: int, default: int) -> int: ...
def int_option(
    options: Mapping[str, str], name: str, minimum: int, default: int | None = None
) -> int | None:
    raw = options.get(name.lower())
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError as e:
        raise ConfigError(f"option {name}={raw!r} must be an integer") from e
    if value < minimum:
        raise ConfigError(f"option {name}={raw!r} must be >= {minimum}")
    return value


def bool_option(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = options.get(name.lower())
    if raw is None:
        return default
    text = raw.strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ConfigError(f"option {name}={raw!r} must be true or false")


def json_option(name: str, raw: str) -> object:
    try:
        return json.loads(raw)
    except json.JSONDecodeError as e:
        raise ConfigError(f"option {name}={raw!r} is not valid JSON: {e.msg}") from e
    except RecursionError as e:
        raise ConfigError(f"option {name} is JSON nested too deeply") from e


def namesrv_option(options: Mapping[str, str]) -> str:
    """The namesrv option as ``host:port;host:port`` (blanks dropped), "" when not given."""
    raw = options.get("namesrv")
    if raw is None:
        return ""
    addresses = [a.strip() for a in raw.split(";") if a.strip()]
    if not addresses:
        raise ConfigError(f"option namesrv={raw!r} names no name server (give 'host:9876')")
    for address in addresses:
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) <= 65535:
            raise ConfigError(f"option namesrv={raw!r}: {address!r} is not host:port")
    return ";".join(addresses)


def credentials_option(options: Mapping[str, str], network: bool) -> SessionCredentials | None:
    """Options accessKey and secretKey (lower-cased keys): both or neither, and only
    through name servers (a store directory has no ACL)."""
    access_key, secret_key = options.get("accesskey"), options.get("secretkey")
    if access_key is None and secret_key is None:
        return None
    if access_key is None or secret_key is None:
        given, missing = (
            ("accessKey", "secretKey") if secret_key is None else ("secretKey", "accessKey")
        )
        raise ConfigError(f"option {given} is given without option {missing}: give both")
    if not network:
        raise ConfigError(
            "options accessKey and secretKey sign the requests sent to a running cluster's "
            "brokers (their ACL): they need option namesrv"
        )
    if not access_key.strip() or not secret_key:
        raise ConfigError(
            f"option {'accessKey' if not access_key.strip() else 'secretKey'} is empty"
        )
    return SessionCredentials(access_key, secret_key)


def column_list(options: Mapping[str, str], network: bool = False) -> tuple[str, ...] | None:
    raw = options.get("columns")
    if raw is None:
        return None
    names = [name.strip() for name in raw.split(",")]
    return check_columns([n for n in names if n], f"option columns={raw!r}", network)


def key_list(options: Mapping[str, str], name: str) -> frozenset[str] | None:
    """A keys/uniqKeys option: one key, or a JSON array of them (for several, or for a
    key that starts with '[')."""
    raw = options.get(name.lower())
    if raw is None:
        return None
    values = json_option(name, raw) if raw.lstrip().startswith("[") else [raw]
    if not isinstance(values, list) or not values:
        raise ConfigError(f"option {name}={raw!r} must be a key or a non-empty JSON array of keys")
    for value in values:
        # A blank KEYS token is never indexed; a blank unique key is never written.
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"option {name}={raw!r}: {value!r} is not a key")
    return frozenset(values)


def duration_ms_option(options: Mapping[str, str], name: str, default: str) -> int:
    """A time string as Spark reads one (``500ms``, ``30s``, ``15m``, ``1h``; a bare number
    is milliseconds), in milliseconds."""
    raw = options.get(name.lower(), default)
    found = _TIME_STRING.fullmatch(raw.strip().lower())
    if found is None or (found.group(2) or "ms") not in _TIME_UNITS_MS:
        raise ConfigError(f"option {name}={raw!r} must be a duration such as 500ms, 30s, 15m or 1h")
    return int(int(found.group(1)) * _TIME_UNITS_MS[found.group(2) or "ms"])
