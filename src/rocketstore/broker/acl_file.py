"""plain_acl.yml as text: a small YAML reader and writer for that file's shape.

Layer: broker; pure (text in, values out; the file I/O is :mod:`rocketstore.broker.acl`).

RocketMQ reads the file with SnakeYAML and writes it back with ``Yaml.dumpAsMap``. The
file holds block mappings and block lists of scalars or of flat mappings, one level of
lists inside an account (topicPerms, groupPerms) and ``dataVersion``'s list of maps; that
is what this reader takes (plus ``[a, b]`` / ``{k: v}`` flow collections of scalars, and
comments), without a YAML library at runtime. What it writes SnakeYAML reads back (block
style, strings quoted where YAML would read them as something else).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from rocketstore.errors import ConfigError

__all__ = ["dump_acl_document", "parse_acl_document"]

_INT = re.compile(r"[-+]?(0|[1-9][0-9]*)\Z")
_PLAIN_SAFE = re.compile(r"[A-Za-z0-9_./%|=@-][A-Za-z0-9_./%|=@*{},:-]*\Z")
_NULLS = {"", "~", "null", "Null", "NULL"}
_TRUE = {"true", "True", "TRUE"}
_FALSE = {"false", "False", "FALSE"}


@dataclass
class _Line:
    number: int
    indent: int
    text: str


def _dash(text: str) -> bool:
    return text == "-" or text.startswith("- ")


def _quoted_end(text: str) -> int:
    """Index just past the quoted scalar that starts ``text``, or -1."""
    quote = text[0]
    i = 1
    while i < len(text):
        if quote == "'" and text[i] == "'":
            if text[i + 1 : i + 2] == "'":
                i += 2
                continue
            return i + 1
        if quote == '"' and text[i] == "\\":
            i += 2
            continue
        if quote == '"' and text[i] == '"':
            return i + 1
        i += 1
    return -1


def _key_split(text: str) -> tuple[str, str] | None:
    """``key: value`` -> (key, value text); None when the text is not a mapping entry."""
    if text[:1] in ("'", '"'):
        end = _quoted_end(text)
        if end < 0 or text[end : end + 1] != ":":
            return None
        if text[end + 1 : end + 2] not in ("", " "):
            return None
        return str(_scalar(text[:end], 0)), text[end + 1 :].strip()
    if text[:1] in ("[", "{", "#"):
        return None
    at = text.find(": ")
    if at < 0:
        return (text[:-1].strip(), "") if text.endswith(":") else None
    return text[:at].strip(), text[at + 2 :].strip()


def _plain(value: str) -> Any:
    if value in _NULLS:
        return None
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    if _INT.match(value):
        return int(value)
    return value


def _flow_items(inner: str) -> list[str]:
    return [item.strip() for item in inner.split(",") if item.strip()]


def _scalar(text: str, number: int) -> Any:
    value = text.strip()
    if not value or value.startswith("#"):
        return None
    if value[0] in ("'", '"'):
        end = _quoted_end(value)
        if end < 0:
            raise ConfigError(f"line {number}: unclosed quote")
        rest = value[end:].strip()
        if rest and not rest.startswith("#"):
            raise ConfigError(f"line {number}: text after a quoted value")
        if value[0] == "'":
            return value[1 : end - 1].replace("''", "'")
        try:
            return json.loads(value[:end])
        except ValueError as e:
            raise ConfigError(f"line {number}: bad double-quoted value: {e}") from e
    if value[0] == "[":
        if not value.endswith("]"):
            raise ConfigError(f"line {number}: unclosed '['")
        return [_scalar(item, number) for item in _flow_items(value[1:-1])]
    if value[0] == "{":
        if not value.endswith("}"):
            raise ConfigError(f"line {number}: unclosed '{{'")
        mapping: dict[str, Any] = {}
        for item in _flow_items(value[1:-1]):
            entry = _key_split(item)
            if entry is None:
                raise ConfigError(f"line {number}: {item!r} is not 'key: value'")
            mapping[entry[0]] = _scalar(entry[1], number)
        return mapping
    if value[0] in ("&", "!", "|", ">"):
        raise ConfigError(f"line {number}: YAML anchors, tags and block scalars are not read")
    return _plain(value.split(" #", 1)[0].rstrip())


def _block(lines: list[_Line], pos: int, indent: int) -> tuple[Any, int]:
    if _dash(lines[pos].text):
        return _sequence(lines, pos, indent)
    return _mapping(lines, pos, indent)


def _nested(lines: list[_Line], pos: int, indent: int, *, same_level_list: bool) -> tuple[Any, int]:
    """The value of an entry written on the lines after it (or None)."""
    if pos < len(lines) and lines[pos].indent > indent:
        return _block(lines, pos, lines[pos].indent)
    # SnakeYAML writes a mapping's list at the key's own indentation ("key:\n- a").
    at_level = pos < len(lines) and lines[pos].indent == indent
    if same_level_list and at_level and _dash(lines[pos].text):
        return _sequence(lines, pos, indent)
    return None, pos


def _sequence(lines: list[_Line], pos: int, indent: int) -> tuple[list[Any], int]:
    items: list[Any] = []
    while pos < len(lines) and lines[pos].indent == indent and _dash(lines[pos].text):
        line = lines[pos]
        rest = line.text[1:].lstrip()
        if not rest or rest.startswith("#"):
            value, pos = _nested(lines, pos + 1, indent, same_level_list=False)
        elif _dash(rest):
            raise ConfigError(f"line {line.number}: a list inside a list item is not read")
        elif _key_split(rest) is not None:
            # "- key: value": a mapping whose first entry is on the dash's line.
            column = indent + len(line.text) - len(rest)
            lines[pos] = _Line(line.number, column, rest)
            value, pos = _mapping(lines, pos, column)
        else:
            value, pos = _scalar(rest, line.number), pos + 1
        items.append(value)
    return items, pos


def _mapping(lines: list[_Line], pos: int, indent: int) -> tuple[dict[str, Any], int]:
    result: dict[str, Any] = {}
    while pos < len(lines) and lines[pos].indent == indent and not _dash(lines[pos].text):
        line = lines[pos]
        entry = _key_split(line.text)
        if entry is None:
            raise ConfigError(f"line {line.number}: expected 'key: value', got {line.text!r}")
        key, value_text = entry
        if value_text and not value_text.startswith("#"):
            value, pos = _scalar(value_text, line.number), pos + 1
        else:
            value, pos = _nested(lines, pos + 1, indent, same_level_list=True)
        result[key] = value
    if pos < len(lines) and lines[pos].indent > indent:
        raise ConfigError(f"line {lines[pos].number}: unexpected indentation")
    return result, pos


def parse_acl_document(text: str, where: str) -> dict[str, Any]:
    """plain_acl.yml's text -> its top-level mapping ({} for an empty file)."""
    lines: list[_Line] = []
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#") or stripped in ("---", "..."):
            continue
        body = raw.lstrip(" ")
        if body.startswith("\t"):
            raise ConfigError(f"{where} line {number}: tabs cannot indent YAML")
        lines.append(_Line(number, len(raw) - len(body), body.rstrip()))
    if not lines:
        return {}
    try:
        document, pos = _block(lines, 0, lines[0].indent)
        if pos < len(lines):
            raise ConfigError(f"line {lines[pos].number}: unexpected text {lines[pos].text!r}")
    except ConfigError as e:
        raise ConfigError(f"{where} {e}") from e
    if not isinstance(document, dict):
        raise ConfigError(f"{where}: expected a mapping at the top (accounts: ...)")
    return document


def _dump_scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    text = str(value)
    if _PLAIN_SAFE.match(text) and isinstance(_plain(text), str) and ": " not in text:
        return text
    return "'" + text.replace("'", "''") + "'"


def _dump(value: Any, indent: int, out: list[str]) -> None:
    pad = " " * indent
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, dict | list) and item:
                out.append(f"{pad}{_dump_scalar(key)}:")
                # Lists at the key's indentation, mappings one level in (as SnakeYAML).
                _dump(item, indent if isinstance(item, list) else indent + 2, out)
            elif isinstance(item, dict | list):
                out.append(f"{pad}{_dump_scalar(key)}: {'{}' if isinstance(item, dict) else '[]'}")
            else:
                out.append(f"{pad}{_dump_scalar(key)}: {_dump_scalar(item)}")
        return
    assert isinstance(value, list)
    for item in value:
        if isinstance(item, dict) and item:
            first = len(out)
            _dump(item, indent + 2, out)
            out[first] = f"{pad}- " + out[first][indent + 2 :]
        elif isinstance(item, list):
            raise ConfigError("a list inside a list cannot be written to plain_acl.yml")
        else:
            out.append(f"{pad}- {_dump_scalar(item)}")


def dump_acl_document(document: dict[str, Any]) -> str:
    """The block-style YAML of ``document`` (RocketMQ's ``dumpAsMap`` layout)."""
    out: list[str] = []
    _dump(document, 0, out)
    return "\n".join(out) + "\n"
