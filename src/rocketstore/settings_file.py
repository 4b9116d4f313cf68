"""RocketMQ's settings files (``broker.conf``): Java properties text, and applying its
entries to a settings dataclass (:class:`~rocketstore.config.StoreConfig`, the broker's
``BrokerConfig``).

Lowest layer, pure: text in, values out; the caller reads the file (and resolves host
names). RocketMQ's broker (``mqbroker -c broker.conf``) loads the file with
``java.util.Properties`` and hands it to ``MixAll.properties2Object``, which sets every
field whose setter matches a key from the value as loaded (trailing blanks included:
``Integer.parseInt``, ``Boolean.parseBoolean``, ``Enum.valueOf``); keys that match nothing
(another component's settings, typos) are ignored. This module does the same for the keys
RocketMQ has (``STORE_KEYS``), with one difference: where Java swallows a failed
conversion and keeps the default (``maxIndexNum=lots``, ``maxIndexNum=400 `` with a
trailing blank, a number past a Java int), or reads anything but ``true`` as false, this
raises a :class:`~rocketstore.errors.ConfigError` naming the key: the file does not say
what the broker runs with, and guessing either way could open its files with the wrong
geometry.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any, TypeVar

from rocketstore.config import StoreConfig
from rocketstore.errors import ConfigError
from rocketstore.java_ints import JAVA_INT_MAX, JAVA_INT_MIN

T = TypeVar("T")

# Where the CommitLog files are: with --store naming another root than the file's, the
# CLI moves those inside the file's root to it and leaves the others out (cli.context).
COMMITLOG_PATH_KEYS = {
    "storePathCommitLog": "store_path_commit_log",
    "readOnlyCommitLogStorePaths": "read_only_commit_log_store_paths",
    "storePathDLedgerCommitLog": "store_path_dledger_commit_log",
}
# The MessageStoreConfig keys (4.9.8's setters; the three disk and delete settings are
# 5.x's) that StoreConfig has, by the field they set. Other StoreConfig fields are
# rocketstore's own and no broker.conf sets them.
STORE_KEYS = COMMITLOG_PATH_KEYS | {
    "mappedFileSizeCommitLog": "mapped_file_size_commit_log",
    "mappedFileSizeConsumeQueue": "mapped_file_size_consume_queue",
    "maxHashSlotNum": "max_hash_slot_num",
    "maxIndexNum": "max_index_num",
    "maxMessageSize": "max_message_size",
    "messageDelayLevel": "message_delay_level",
    "messageIndexEnable": "message_index_enable",
    "maxMsgsNumBatch": "max_msgs_num_batch",
    "defaultQueryMaxNum": "default_query_max_num",
    "flushDiskType": "flush_disk_type",
    "flushIntervalCommitLog": "flush_interval_commit_log",
    "flushCommitLogLeastPages": "flush_commit_log_least_pages",
    "flushCommitLogThoroughInterval": "flush_commit_log_thorough_interval",
    "flushIntervalConsumeQueue": "flush_interval_consume_queue",
    "flushConsumeQueueLeastPages": "flush_consume_queue_least_pages",
    "flushConsumeQueueThoroughInterval": "flush_consume_queue_thorough_interval",
    "syncFlushTimeout": "sync_flush_timeout",
    "checkCRCOnRecover": "check_crc_on_recover",
    "enableLmq": "enable_lmq",
    # RocketMQ's spelling ("DLeger") in both.
    "enableDLegerCommitLog": "enable_dledger_commit_log",
    "dLegerSelfId": "dledger_self_id",
    "enableMultiDispatch": "enable_multi_dispatch",
    "maxTransferBytesOnMessageInMemory": "max_transfer_bytes_on_message_in_memory",
    "maxTransferCountOnMessageInMemory": "max_transfer_count_on_message_in_memory",
    "maxTransferBytesOnMessageInDisk": "max_transfer_bytes_on_message_in_disk",
    "maxTransferCountOnMessageInDisk": "max_transfer_count_on_message_in_disk",
    "accessMessageInMemoryMaxRatio": "access_message_in_memory_max_ratio",
    "fileReservedTime": "file_reserved_time",
    "deleteWhen": "delete_when",
    "diskMaxUsedSpaceRatio": "disk_max_used_space_ratio",
    "diskSpaceCleanForciblyRatio": "disk_space_clean_forcibly_ratio",
    "diskSpaceWarningLevelRatio": "disk_space_warning_level_ratio",
    "cleanResourceInterval": "clean_resource_interval",
    "deleteFileBatchMax": "delete_file_batch_max",
    "deleteCommitLogFilesInterval": "delete_commit_log_files_interval",
    "deleteConsumeQueueFilesInterval": "delete_consume_queue_files_interval",
    # RocketMQ's own misspelling, kept in its setter.
    "destroyMapedFileIntervalForcibly": "destroy_mapped_file_interval_forcibly",
    "cleanFileForciblyEnable": "clean_file_forcibly_enable",
    # RocketMQ 5's timer wheel.
    "timerWheelEnable": "timer_wheel_enable",
    "timerPrecisionMs": "timer_precision_ms",
    "mappedFileSizeTimerLog": "mapped_file_size_timer_log",
    "timerMaxDelaySec": "timer_max_delay_sec",
    "timerRollWindowSlot": "timer_roll_window_slot",
    "timerFlushIntervalMs": "timer_flush_interval_ms",
}

# Integer.parseInt's syntax (Python's int() would also take "1_000", " 5" and "٣").
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
    # Java's LineReader ends lines at \n, \r and \r\n only (str.splitlines would also
    # split at \f, \x1c-\x1e and \x85, a byte of much UTF-8 text read as Latin-1).
    spans, _ = _entry_spans(re.split(r"\r\n|\r|\n", text))
    return [joined for _first, _last, joined in spans]


def _entry_spans(lines: list[str]) -> tuple[list[tuple[int, int, str]], bool]:
    """The entries of ``lines`` (physical lines, their ends removed): (first line, last
    line, the text joined across continuations) each, comments and blank lines skipped;
    and whether the last line leaves an entry continued."""
    spans: list[tuple[int, int, str]] = []
    start: int | None = None
    pending = ""
    for number, raw in enumerate(lines):
        line = raw.lstrip(" \t\f")
        if start is None and (not line or line[0] in "#!"):
            continue
        if start is None:
            start, pending = number, ""
        trailing = len(line) - len(line.rstrip("\\"))
        continued = trailing % 2 == 1
        pending += line[:-1] if continued else line
        if not continued:
            spans.append((start, number, pending))
            start = None
    if start is not None:
        spans.append((start, len(lines) - 1, pending))
    return spans, start is not None


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
    every ``MessageStoreConfig`` key rocketstore has (``STORE_KEYS``: ``maxHashSlotNum``,
    ``maxIndexNum``, ``mappedFileSizeCommitLog``, ``flushDiskType``...). Validated; a
    ConfigError names ``source``. The store host (``brokerIP1``, ``listenPort``) is the
    caller's, since a host name must be resolved."""
    config, _used = apply_settings(base or StoreConfig(), settings, STORE_KEYS, source=source)
    try:
        return config.validate()
    except ConfigError as e:
        raise ConfigError(f"{source}: {e}") from e


def camel_case(field_name: str) -> str:
    """``max_index_num`` -> ``maxIndexNum``."""
    head, *rest = field_name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def camel_keys(target: object, aliases: Mapping[str, str] | None = None) -> dict[str, str]:
    """Keys for a dataclass whose fields are all RocketMQ settings: each field's camelCase
    name (``extra`` aside), plus ``aliases`` (key -> field) for irregular spellings."""
    names = [f.name for f in dataclasses.fields(target) if f.name != "extra"]  # type: ignore[arg-type]
    return {camel_case(name): name for name in names} | dict(aliases or {})


def apply_settings(
    target: T, settings: Mapping[str, str], keys: Mapping[str, str], *, source: str = "settings"
) -> tuple[T, list[str]]:
    """``target`` (a dataclass instance) with the field of every key of ``keys`` (RocketMQ
    key -> field name) that ``settings`` has set from its text, and the keys used, in file
    order. ``source`` names the file in errors."""
    changes: dict[str, Any] = {}
    used: list[str] = []
    for key, text in settings.items():
        name = keys.get(key)
        if name is None:
            continue
        current = getattr(target, name)
        changes[name] = _convert(text, current, key, source)
        used.append(key)
    return dataclasses.replace(target, **changes), used  # type: ignore[type-var]


def _convert(text: str, current: object, key: str, source: str) -> object:
    ignored = "RocketMQ ignores a value it cannot read and keeps its default"
    if isinstance(current, bool):
        if text.lower() not in ("true", "false"):
            raise ConfigError(
                f"{source}: {key} must be true or false, got {text!r} (RocketMQ reads "
                "anything but 'true' as false)"
            )
        return text.lower() == "true"
    if isinstance(current, int):
        low, high = JAVA_INT_MIN, JAVA_INT_MAX
        if not _JAVA_INT.fullmatch(text) or not low <= int(text) <= high:
            raise ConfigError(f"{source}: {key} must be a Java int, got {text!r} ({ignored})")
        return int(text)
    if isinstance(current, str):
        return text
    raise ConfigError(f"{source}: {key} cannot be set from a settings file")


def escape_property(text: str, *, key: bool = False) -> str:
    """``text`` as ``java.util.Properties.store`` writes a key or a value: backslash
    escapes for ``\\``, the separators, control characters and blanks (every blank of a
    key, a value's leading one), and ``\\uXXXX`` for anything outside printable ASCII (the
    file is read as ISO-8859-1)."""
    out: list[str] = []
    for i, char in enumerate(text):
        if char in _STORE_ESCAPES:
            out.append(_STORE_ESCAPES[char])
        elif char in "\\=:#!" or (char == " " and (key or i == 0)):
            out.append("\\" + char)
        elif " " <= char <= "~":
            out.append(char)
        else:
            out.extend(f"\\u{unit:04X}" for unit in _utf16_units(char))
    return "".join(out)


_STORE_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}


def _utf16_units(char: str) -> list[int]:
    data = char.encode("utf-16-be", "surrogatepass")
    return [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]


def update_properties_text(text: str, entries: Mapping[str, str]) -> str:
    """``text`` (a ``java.util.Properties`` file) with each key of ``entries`` set to its
    value: the entry that decides the key's value now (the last one) is rewritten in place
    as ``key=value``, comments, order and every other line kept; keys the text lacks are
    appended at the end."""
    lines = re.split(r"(?<=\n)|(?<=\r)(?!\n)", text)
    if lines and lines[-1] == "":
        lines.pop()
    spans, ends_continued = _entry_spans([raw.rstrip("\r\n") for raw in lines])
    keyed = ((first, last, _split_entry(logical)[0]) for first, last, logical in spans)
    # The last entry of a key wins (a later one replaces an earlier in the dict).
    deciding = {key: (first, last) for first, last, key in keyed if key in entries}
    newline = "\r\n" if "\r\n" in text else "\n"
    out: list[str] = []
    skip_until = -1
    by_first = {first: (last, key) for key, (first, last) in deciding.items()}
    for number, raw in enumerate(lines):
        if number <= skip_until:
            continue
        if number in by_first:
            last, key = by_first[number]
            ending = raw[len(raw.rstrip("\r\n")) :] or newline
            out.append(f"{escape_property(key, key=True)}={escape_property(entries[key])}{ending}")
            skip_until = last
            continue
        out.append(raw)
    if out and not out[-1].endswith(("\n", "\r")):
        out[-1] += newline
    if ends_continued:
        # The file ends inside a continuation, which would take in the next line: an
        # empty line ends it where the file did (a lone \r, when the file's last line
        # ends so, since \r\n would be a single line end).
        out.append("\r" if out[-1].endswith("\r") else newline)
    out.extend(
        f"{escape_property(key, key=True)}={escape_property(value)}{newline}"
        for key, value in entries.items()
        if key not in deciding
    )
    return "".join(out)
