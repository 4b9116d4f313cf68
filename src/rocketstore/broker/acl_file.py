"""plain_acl.yml as text: a small YAML reader and writer for that file's shape.

Layer: broker; pure (text in, values out; the file I/O is :mod:`rocketstore.broker.acl`).

RocketMQ reads the file with SnakeYAML and writes it back with ``Yaml.dumpAsMap``. The
file holds block mappings and block lists of scalars or of flat mappings, one level of
lists inside an account (topicPerms, groupPerms) and ``dataVersion``'s list of maps; that
is what this reader takes (plus ``[a, b]`` / ``{k: v}`` flow collections of scalars, and
comments), without a YAML library at runtime. Plain values are typed as SnakeYAML 1.x's
YAML 1.1 resolver types them. What it writes SnakeYAML reads back (block style, strings
quoted where YAML 1.1 would read them as something else). tests/property/test_acl_yaml.py
holds both to PyYAML.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from rocketstore.errors import ConfigError

__all__ = ["dump_acl_document", "parse_acl_document"]

# Plain scalars as SnakeYAML 1.x's Resolver (YAML 1.1) types them, which is how RocketMQ
# reads the file: `yes`/`on` are true, `0777` octal, `0x1F` hex, `1_000` 1000, `1:30` 90.
# A float or a date fits no ACL field: refused, to be quoted.
_INT = re.compile(
    r"[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+"
    r"|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+\Z"
)
_FLOAT = re.compile(
    r"([-+]?(\.[0-9]+|[0-9_]+(\.[0-9_]*)?)([eE][-+]?[0-9]+)?"
    r"|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))\Z"
)
_TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}([Tt \t].*)?\Z")
_NULLS = {"", "~", "null", "Null", "NULL"}
_TRUE = {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"}
# YAML's white space and line breaks (YAML 1.1's: SnakeYAML 1.x, PyYAML), not Python's:
# str.strip() would also take a no-break space from a value, str.splitlines() split at
# form feeds and other controls.
_BLANK = " \t"
_LINE_BREAK = re.compile("\r\n|[\r\n\x85\u2028\u2029]")
# YAML's double-quoted escapes (YAML 1.1 and 1.2 alike).
_ESCAPES = {
    "0": "\0",
    "a": "\a",
    "b": "\b",
    "t": "\t",
    "\t": "\t",
    "n": "\n",
    "v": "\v",
    "f": "\f",
    "r": "\r",
    "e": "\x1b",
    " ": " ",
    '"': '"',
    "/": "/",
    "\\": "\\",
    "N": "\x85",
    "_": "\xa0",
    "L": "\u2028",
    "P": "\u2029",
}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}
_HEX = re.compile(r"[0-9A-Fa-f]+\Z")
# What the writer leaves unquoted: text no YAML 1.1 reader (SnakeYAML 1.x, which RocketMQ
# reads the file with; PyYAML) takes for anything but this string. A first character
# that is no digit, sign, dot or indicator rules out numbers, dates and YAML syntax; the
# words are YAML 1.1's booleans and nulls.
_PLAIN_WRITE = re.compile(r"[A-Za-z_/][A-Za-z0-9_./%|=@*{},:-]*\Z")
_YAML11_WORDS = frozenset(
    [
        "y",
        "Y",
        "yes",
        "Yes",
        "YES",
        "n",
        "N",
        "no",
        "No",
        "NO",
        "true",
        "True",
        "TRUE",
        "false",
        "False",
        "FALSE",
        "on",
        "On",
        "ON",
        "off",
        "Off",
        "OFF",
        "null",
        "Null",
        "NULL",
    ]
)
_FALSE = {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"}


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


# What cannot start a plain key: an anchor, tag or alias, or a reserved indicator.
_KEY_INDICATORS = frozenset("&*!|>%@`?,]}")


def _key_split(text: str) -> tuple[str, str] | None:
    """``key: value`` -> (key, value text); None when the text is not a mapping entry."""
    if text[:1] in ("'", '"'):
        end = _quoted_end(text)
        if end < 0 or text[end : end + 1] != ":":
            return None
        if text[end + 1 : end + 2] not in ("", " "):
            return None
        return str(_scalar(text[:end], 0)), text[end + 1 :].strip(_BLANK)
    if text[:1] in ("[", "{", "#"):
        return None
    if text[:1] in _KEY_INDICATORS:  # YAML reads an anchor, tag or alias there, not a name
        return None
    at = text.find(": ")
    if at < 0:
        return (text[:-1].strip(_BLANK), "") if text.endswith(":") else None
    return text[:at].strip(_BLANK), text[at + 2 :].strip(_BLANK)


def _plain(value: str, number: int) -> Any:
    if value in _NULLS:
        return None
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    # (SnakeYAML tries these patterns only on a scalar starting with a digit, sign or dot.)
    if value[0] not in "-+0123456789.":
        return value
    if _INT.fullmatch(value):
        return _yaml11_int(value)
    if _FLOAT.fullmatch(value) or _TIMESTAMP.match(value):
        raise ConfigError(f"line {number}: {value!r} reads as a YAML number or date: quote it")
    return value


def _yaml11_int(value: str) -> int:
    """SnakeYAML's SafeConstructor.ConstructYamlInt."""
    sign = -1 if value[0] == "-" else 1
    digits = value.lstrip("+-").replace("_", "")
    if digits == "0":
        return 0
    if digits.startswith("0b"):
        return sign * int(digits[2:], 2)
    if digits.startswith("0x"):
        return sign * int(digits[2:], 16)
    if digits.startswith("0"):
        return sign * int(digits[1:], 8)
    if ":" in digits:
        total = 0
        for part in digits.split(":"):
            total = total * 60 + int(part)
        return sign * total
    return sign * int(digits)


def _flow_items(inner: str) -> list[str]:
    return [item.strip(_BLANK) for item in inner.split(",") if item.strip(_BLANK)]


def _double_quoted(body: str, number: int) -> str:
    """A one-line double-quoted scalar's text with YAML's escapes (JSON's and \\x, \\U,
    \\0, \\a, \\e, \\N, \\_, \\L, \\P...: what SnakeYAML and PyYAML write)."""
    out: list[str] = []
    i = 0
    while i < len(body):
        char = body[i]
        if char != "\\":
            out.append(char)
            i += 1
            continue
        code = body[i + 1 : i + 2]
        if code in _ESCAPES:
            out.append(_ESCAPES[code])
            i += 2
            continue
        width = _HEX_ESCAPES.get(code, 0)
        digits = body[i + 2 : i + 2 + width]
        if not width or len(digits) != width or not _HEX.match(digits):
            raise ConfigError(f"line {number}: bad escape {body[i : i + 2 + width]!r}")
        point = int(digits, 16)
        if point > 0x10FFFF or 0xD800 <= point <= 0xDFFF:
            raise ConfigError(f"line {number}: bad escape {body[i : i + 2 + width]!r}")
        out.append(chr(point))
        i += 2 + width
    return "".join(out)


def _scalar(text: str, number: int) -> Any:
    value = text.strip(_BLANK)
    if not value or value.startswith("#"):
        return None
    if value[0] in ("'", '"'):
        end = _quoted_end(value)
        if end < 0:
            raise ConfigError(f"line {number}: unclosed quote")
        rest = value[end:].strip(_BLANK)
        if rest and not rest.startswith("#"):
            raise ConfigError(f"line {number}: text after a quoted value")
        if value[0] == "'":
            return value[1 : end - 1].replace("''", "'")
        return _double_quoted(value[1 : end - 1], number)
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
    return _plain(value.split(" #", 1)[0].rstrip(_BLANK), number)


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
        rest = line.text[1:].lstrip(_BLANK)
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
    for number, raw in enumerate(_LINE_BREAK.split(text), 1):
        stripped = raw.strip(_BLANK)
        if not stripped or stripped.startswith("#") or stripped in ("---", "..."):
            continue
        body = raw.lstrip(" ")
        if body.startswith("\t"):
            raise ConfigError(f"{where} line {number}: tabs cannot indent YAML")
        lines.append(_Line(number, len(raw) - len(body), body.rstrip(_BLANK)))
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
    if _PLAIN_WRITE.match(text) and not text.endswith(":") and text not in _YAML11_WORDS:
        return text
    if all(_printable(char) for char in text):
        return "'" + text.replace("'", "''") + "'"
    # Control and other unprintable characters: double quotes with escapes (a YAML reader
    # refuses them raw).
    return '"' + "".join(_escaped(char) for char in text) + '"'


def _printable(char: str) -> bool:
    point = ord(char)
    # U+2028 / U+2029 are line breaks to YAML (and to the reader): escaped, not written raw.
    return 0x20 <= point <= 0x7E or (
        point >= 0xA0
        and not 0xD800 <= point <= 0xDFFF
        and point not in (0x2028, 0x2029, 0xFEFF, 0xFFFE, 0xFFFF)
    )


def _escaped(char: str) -> str:
    if char in ('"', "\\"):
        return "\\" + char
    if _printable(char):
        return char
    point = ord(char)
    if point <= 0xFF:
        return f"\\x{point:02X}"
    return f"\\u{point:04X}" if point <= 0xFFFF else f"\\U{point:08X}"


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
        elif isinstance(item, dict):
            out.append(f"{pad}- {{}}")
        elif isinstance(item, list):
            raise ConfigError("a list inside a list cannot be written to plain_acl.yml")
        else:
            out.append(f"{pad}- {_dump_scalar(item)}")


def dump_acl_document(document: dict[str, Any]) -> str:
    """The block-style YAML of ``document`` (RocketMQ's ``dumpAsMap`` layout)."""
    out: list[str] = []
    _dump(document, 0, out)
    return "\n".join(out) + "\n"
