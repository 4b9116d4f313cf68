"""RocketMQ's settings files (``broker.conf``): Java properties text, and applying its
entries to a settings dataclass (:class:`~rocketstore.config.StoreConfig`, the broker's
``BrokerConfig``).

Lowest layer, pure: text in, values out; the caller reads the file. RocketMQ's broker
(``mqbroker -c broker.conf``) loads the file with ``java.util.Properties`` and hands it to
``MixAll.properties2Object``, which sets every field whose setter matches a key, with the
trimmed value converted to the field's type; keys that match nothing (another component's
settings, typos) are ignored. This module does the same with two differences: a value
that does not convert (``maxIndexNum=lots``, ``messageIndexEnable=yes``) is a
:class:`~rocketstore.errors.ConfigError` naming the key, where Java would throw
NumberFormatException for the number and silently read the boolean as false; and keys are
matched against the dataclass's fields in camelCase (``max_index_num`` is
``maxIndexNum``) plus each class's own aliases for RocketMQ's irregular spellings.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any, TypeVar

from rocketstore.config import StoreConfig, parse_host
from rocketstore.errors import ConfigError

T = TypeVar("T")

# RocketMQ keys whose spelling is not the camelCase of our field name.
STORE_ALIASES = {
    "checkCRCOnRecover": "check_crc_on_recover",
    # RocketMQ's own misspelling, kept in its setter.
    "destroyMapedFileIntervalForcibly": "destroy_mapped_file_interval_forcibly",
    # The names before RocketMQ 4.4 fixed the spelling; old broker.conf files still have them.
    "mapedFileSizeCommitLog": "mapped_file_size_commit_log",
    "mapedFileSizeConsumeQueue": "mapped_file_size_consume_queue",
}

# Integer.parseInt's syntax (Python's int() would also take "1_000" and "٣").
_JAVA_INT = re.compile(r"[+-]?[0-9]+")
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_SEPARATORS = "=: \t\f"


def parse_java_properties(text: str) -> dict[str, str]:
    """The entries of a ``java.util.Properties`` text: ``#``/``!`` comments, ``key=value``,
    ``key: value`` or ``key value``, a backslash at the end of a line continuing it, and
    ``\\uXXXX`` and ``\\t``-style escapes. A later duplicate key wins, as in Java."""
    entries: dict[str, str] = {}
    for logical in _logical_lines(text):
        key, value = _split_entry(logical)
        entries[key] = value
    return entries


def _logical_lines(text: str) -> list[str]:
    """Joined continuation lines, with comments and blank lines dropped."""
    lines: list[str] = []
    pending: str | None = None
    for raw in text.splitlines():
        line = raw.lstrip(" \t\f")
        if pending is None and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        continued = trailing % 2 == 1
        if continued:
            line = line[:-1]
        pending = line if pending is None else pending + line
        if not continued:
            lines.append(pending)
            pending = None
    if pending is not None:
        lines.append(pending)
    return lines


def _split_entry(line: str) -> tuple[str, str]:
    key, i = _read_escaped(line, 0, _SEPARATORS)
    # Whitespace, then at most one '=' or ':', then whitespace separate key and value.
    while i < len(line) and line[i] in " \t\f":
        i += 1
    if i < len(line) and line[i] in "=:":
        i += 1
    while i < len(line) and line[i] in " \t\f":
        i += 1
    value, _end = _read_escaped(line, i, "")
    return key, value


def _read_escaped(line: str, i: int, stops: str) -> tuple[str, int]:
    """The unescaped text from ``line[i]`` up to the first unescaped character of
    ``stops`` (or the end), and the index where it stopped."""
    chars: list[str] = []
    while i < len(line) and line[i] not in stops:
        if line[i] == "\\" and i + 1 < len(line):
            char, i = _unescape(line, i)
            chars.append(char)
            continue
        chars.append(line[i])
        i += 1
    return _utf16_joined("".join(chars)), i


def _utf16_joined(text: str) -> str:
    """Java strings are UTF-16: a character outside the BMP comes as two \\u escapes (a
    surrogate pair), one character here."""
    if not any("\ud800" <= c <= "\udfff" for c in text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _unescape(line: str, i: int) -> tuple[str, int]:
    """The character the escape at ``line[i]`` (a backslash) stands for, and the index
    after it."""
    code = line[i + 1]
    if code == "u":
        digits = line[i + 2 : i + 6]
        if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
            raise ConfigError(f"malformed \\uxxxx escape in {line!r}")
        return chr(int(digits, 16)), i + 6
    return _ESCAPES.get(code, code), i + 2


def store_config_from_settings(
    settings: Mapping[str, str], base: StoreConfig | None = None, *, source: str = "settings"
) -> StoreConfig:
    """``base`` (default: RocketMQ's defaults) with the store settings of a broker.conf:
    every ``MessageStoreConfig`` key rocketstore has (``maxHashSlotNum``, ``maxIndexNum``,
    ``mappedFileSizeCommitLog``, ``flushDiskType``, ``fileReservedTime``...), and the store
    host from the broker's ``brokerIP1`` and ``listenPort`` (the address RocketMQ writes
    into every record). Validated; a ConfigError names ``source``."""
    config, _used = apply_settings(
        base or StoreConfig(), settings, aliases=STORE_ALIASES, source=source
    )
    ip, port = settings.get("brokerIP1", "").strip(), settings.get("listenPort", "").strip()
    if ip or port:
        host, default_port = parse_host(config.store_host)
        ip = ip or host
        address = f"[{ip}]" if ":" in ip else ip
        config = config.replace(store_host=f"{address}:{port or default_port}")
    try:
        return config.validate()
    except ConfigError as e:
        raise ConfigError(f"{source}: {e}") from e


def camel_case(field_name: str) -> str:
    """``max_index_num`` -> ``maxIndexNum``."""
    head, *rest = field_name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def apply_settings(
    target: T,
    settings: Mapping[str, str],
    *,
    aliases: Mapping[str, str] | None = None,
    source: str = "settings",
) -> tuple[T, list[str]]:
    """``target`` (a dataclass instance) with every field named in ``settings`` set from
    its text, and the keys used, in file order. Fields named ``extra`` are never set.
    ``source`` names the file in errors."""
    fields = {f.name: f for f in dataclasses.fields(target)}  # type: ignore[arg-type]
    by_key = {camel_case(name): name for name in fields if name != "extra"}
    by_key.update(aliases or {})
    changes: dict[str, Any] = {}
    used: list[str] = []
    for key, text in settings.items():
        name = by_key.get(key)
        if name is None:
            continue
        current = getattr(target, name)
        changes[name] = _convert(text.strip(), current, key, source)
        used.append(key)
    return dataclasses.replace(target, **changes), used  # type: ignore[type-var]


def _convert(text: str, current: object, key: str, source: str) -> object:
    if isinstance(current, bool):
        lowered = text.lower()
        if lowered not in ("true", "false"):
            raise ConfigError(f"{source}: {key} must be true or false, got {text!r}")
        return lowered == "true"
    if isinstance(current, int):
        if not _JAVA_INT.fullmatch(text):
            raise ConfigError(f"{source}: {key} must be an integer, got {text!r}")
        return int(text)
    if isinstance(current, str):
        return text
    raise ConfigError(f"{source}: {key} cannot be set from a settings file")
