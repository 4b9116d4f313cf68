"""The values a SQL92 selector computes with, and how Java compares them.

Pure. RocketMQ evaluates selectors in Java, and which messages a consumer gets depends on
Java's rules: a literal ``5`` is an ``Integer`` and ``5000000000`` a ``Long``, a message
property is always a ``String``, and a comparison between two types converts one side the
way RocketMQ's ComparisonExpression does (with string conversion on, as its parser always
sets it): ``'10' > 5`` parses ``'10'`` with ``Integer.valueOf``, ``'10' = 5.0`` with
``Double.valueOf``, ``'true' = TRUE`` with ``Boolean.valueOf``. A conversion that fails
(``'abc' > 5``, ``'3000000000' = 5``) makes the whole evaluation fail, which RocketMQ
treats as "no match" (:class:`EvaluationError`).

A value is ``None`` (SQL NULL), ``bool``, ``str`` or a :class:`JavaNumber`.
"""

from __future__ import annotations

import enum
import math
import re
import struct
from dataclasses import dataclass

from rocketstore.errors import StoreError
from rocketstore.java_ints import JAVA_INT_MAX, JAVA_INT_MIN, JAVA_LONG_MAX, JAVA_LONG_MIN


class EvaluationError(StoreError):
    """Evaluating a selector threw in Java (a failed conversion, a Boolean cast to a
    String): the message does not match. Never leaves :mod:`rocketstore.format.selector`."""


class JavaType(enum.Enum):
    BOOLEAN = "Boolean"
    STRING = "String"
    INTEGER = "Integer"
    LONG = "Long"
    DOUBLE = "Double"


@dataclass(frozen=True, slots=True)
class JavaNumber:
    """An ``Integer``, ``Long`` or ``Double``: Python's int and float lose which of the
    first two a value is, and Java converts ``'3000000000'`` to a Long but not to an
    Integer."""

    type: JavaType
    value: int | float

    def __str__(self) -> str:
        if self.type is JavaType.DOUBLE:
            return java_double_text(float(self.value))
        return str(self.value)


Value = None | bool | str | JavaNumber


def java_type(value: bool | str | JavaNumber) -> JavaType:
    if isinstance(value, bool):
        return JavaType.BOOLEAN
    if isinstance(value, str):
        return JavaType.STRING
    return value.type


def java_double_text(value: float) -> str:
    """Roughly Java's Double.toString, for messages: ``5.0``, ``1.0E10``, ``NaN``."""
    if math.isnan(value):
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    if value == int(value) and abs(value) < 1e7:
        return f"{value:.1f}"
    return repr(value).replace("e+", "E").replace("e", "E")


# --- Java's String -> value conversions -----------------------------------------------

# Integer.parseInt / Long.parseLong: a sign, then decimal digits (any Unicode digit, as
# Character.digit takes them); nothing else, not even spaces.
_JAVA_INTEGER = re.compile(r"[+-]?\d+\Z")
# Double.valueOf after String.trim(): NaN, Infinity, decimal (with an optional type
# suffix) or hexadecimal floating point.
_JAVA_DECIMAL = re.compile(
    r"[+-]?(?:NaN|Infinity|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[fFdD]?)\Z", re.ASCII
)
_JAVA_HEX = re.compile(
    r"[+-]?0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?\d+[fFdD]?\Z"
)


def _parse_integral(text: str, low: int, high: int, kind: JavaType) -> JavaNumber:
    if not _JAVA_INTEGER.match(text):
        raise EvaluationError(f'For input string: "{text}" ({kind.value})')
    number = int(text)
    if not low <= number <= high:
        raise EvaluationError(f'For input string: "{text}" (out of {kind.value} range)')
    return JavaNumber(kind, number)


def parse_java_int(text: str) -> JavaNumber:
    """``Integer.valueOf(text)``."""
    return _parse_integral(text, JAVA_INT_MIN, JAVA_INT_MAX, JavaType.INTEGER)


def parse_java_long(text: str) -> JavaNumber:
    """``Long.valueOf(text)``."""
    return _parse_integral(text, JAVA_LONG_MIN, JAVA_LONG_MAX, JavaType.LONG)


def java_trim(text: str) -> str:
    # String.trim() drops every char up to U+0020 at both ends (not Unicode spaces).
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


def parse_java_double(text: str) -> JavaNumber:
    """``Double.valueOf(text)``."""
    trimmed = java_trim(text)
    if _JAVA_DECIMAL.match(trimmed):
        body = trimmed.rstrip("fFdD") if not trimmed.endswith(("NaN", "Infinity")) else trimmed
        return JavaNumber(JavaType.DOUBLE, float(body.replace("Infinity", "inf")))
    if _JAVA_HEX.match(trimmed):
        return JavaNumber(JavaType.DOUBLE, float.fromhex(trimmed.rstrip("fFdD")))
    raise EvaluationError(f'For input string: "{text}" (Double)')


def parse_java_boolean(text: str) -> bool:
    """``Boolean.valueOf(text)``: true for any case of "true", false for anything else."""
    return len(text) == 4 and text.lower() == "true"


# --- Java's compareTo -----------------------------------------------------------------


def _sign(a: int | float | bytes, b: int | float | bytes) -> int:
    return (a > b) - (a < b)  # type: ignore[operator]


def _double_bits(value: float) -> int:
    if math.isnan(value):
        return 0x7FF8_0000_0000_0000  # every NaN is one NaN to doubleToLongBits
    bits: int = struct.unpack(">q", struct.pack(">d", value))[0]
    return bits


def double_compare(a: float, b: float) -> int:
    """``Double.compare``: NaN above everything (and equal to itself), -0.0 below 0.0."""
    if a < b:
        return -1
    if a > b:
        return 1
    return _sign(_double_bits(a), _double_bits(b))


def _same_type_compare(lv: bool | str | JavaNumber, rv: bool | str | JavaNumber) -> int:
    if isinstance(lv, str) and isinstance(rv, str):
        if lv == rv:
            return 0
        # String.compareTo compares UTF-16 code units.
        return _sign(
            lv.encode("utf-16-be", "surrogatepass"), rv.encode("utf-16-be", "surrogatepass")
        )
    if isinstance(lv, JavaNumber) and isinstance(rv, JavaNumber):
        if lv.type is JavaType.DOUBLE:
            return double_compare(float(lv.value), float(rv.value))
        return _sign(lv.value, rv.value)
    return _sign(bool(lv), bool(rv))


_NUMBER_PARSERS = {
    JavaType.INTEGER: parse_java_int,
    JavaType.LONG: parse_java_long,
    JavaType.DOUBLE: parse_java_double,
}
_NUMBER_RANK = {JavaType.INTEGER: 0, JavaType.LONG: 1, JavaType.DOUBLE: 2}


def java_compare(lv: bool | str | JavaNumber, rv: bool | str | JavaNumber) -> int:
    """RocketMQ's ``ComparisonExpression.__compare`` with string conversion on: the sign of
    ``lv.compareTo(rv)`` after converting one side to the other's type. Mismatches it does
    not convert (a number against a Boolean) compare as "less" (-1)."""
    lc, rc = java_type(lv), java_type(rv)
    if lc is rc:
        return _same_type_compare(lv, rv)
    if lc is JavaType.BOOLEAN:
        if rc is JavaType.STRING:
            # RocketMQ casts the Boolean to a String here, which throws.
            raise EvaluationError(f"cannot compare Boolean {lv} with String '{rv}'")
        return -1
    if lc is JavaType.STRING:
        assert isinstance(lv, str)
        if rc is JavaType.BOOLEAN:
            return _same_type_compare(parse_java_boolean(lv), rv)
        return _same_type_compare(_NUMBER_PARSERS[rc](lv), rv)
    assert isinstance(lv, JavaNumber)
    if rc is JavaType.STRING:
        assert isinstance(rv, str)
        return _same_type_compare(lv, _NUMBER_PARSERS[lc](rv))
    if rc is JavaType.BOOLEAN:
        return -1
    assert isinstance(rv, JavaNumber)
    # Two numbers of different types: the narrower one widens (Integer -> Long -> Double).
    wider = lc if _NUMBER_RANK[lc] > _NUMBER_RANK[rc] else rc
    if wider is JavaType.DOUBLE:
        return double_compare(float(lv.value), float(rv.value))
    return _sign(lv.value, rv.value)


def negate(number: JavaNumber) -> JavaNumber:
    """Unary minus, with Java's wrap-around for ``-Integer.MIN_VALUE``."""
    if number.type is JavaType.DOUBLE:
        return JavaNumber(JavaType.DOUBLE, -float(number.value))
    bits = 32 if number.type is JavaType.INTEGER else 64
    value = -int(number.value) & ((1 << bits) - 1)
    if value >= 1 << (bits - 1):
        value -= 1 << bits
    return JavaNumber(number.type, value)
