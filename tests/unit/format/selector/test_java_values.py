from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketstore.format.selector.java_values import (
    EvaluationError,
    JavaNumber,
    JavaType,
    double_compare,
    java_compare,
    negate,
    parse_java_boolean,
    parse_java_double,
    parse_java_int,
    parse_java_long,
)

INT = JavaType.INTEGER
LONG = JavaType.LONG
DOUBLE = JavaType.DOUBLE


@pytest.mark.parametrize(
    ("text", "value"),
    [("5", 5), ("+5", 5), ("-0", 0), ("007", 7), ("2147483647", 2**31 - 1), ("\u0663", 3)],
)
def test_integer_value_of(text: str, value: int) -> None:
    assert parse_java_int(text) == JavaNumber(INT, value)


@pytest.mark.parametrize(
    "text", ["", " 5", "5 ", "5.0", "1e3", "0x10", "2147483648", "1_000", "+", "--1"]
)
def test_integer_value_of_refuses(text: str) -> None:
    with pytest.raises(EvaluationError):
        parse_java_int(text)


def test_long_value_of_range() -> None:
    assert parse_java_long("3000000000") == JavaNumber(LONG, 3_000_000_000)
    with pytest.raises(EvaluationError):
        parse_java_long("9223372036854775808")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (" 7 ", 7.0),
        ("1.5f", 1.5),
        ("1.5D", 1.5),
        ("1.", 1.0),
        (".5", 0.5),
        ("1e3", 1000.0),
        ("-Infinity", -math.inf),
        ("0x1p3", 8.0),
        ("0x.8P1", 1.0),
    ],
)
def test_double_value_of(text: str, value: float) -> None:
    assert parse_java_double(text) == JavaNumber(DOUBLE, value)


def test_double_value_of_nan_and_refusals() -> None:
    assert math.isnan(float(parse_java_double("NaN").value))
    for text in ("nan", "inf", "infinity", "1_0", "", ".", "1e", "0x10", "abc"):
        with pytest.raises(EvaluationError):
            parse_java_double(text)


def test_boolean_value_of() -> None:
    assert parse_java_boolean("TrUe") and parse_java_boolean("true")
    assert not parse_java_boolean("yes") and not parse_java_boolean(" true")


def test_double_compare_orders_nan_last_and_negative_zero_first() -> None:
    assert double_compare(math.nan, math.inf) == 1
    assert double_compare(math.nan, math.nan) == 0
    assert double_compare(-0.0, 0.0) == -1
    assert double_compare(1.0, 2.0) == -1


def test_java_compare_converts_like_rocketmq() -> None:
    assert java_compare("10", JavaNumber(INT, 5)) == 1
    assert java_compare(JavaNumber(INT, 5), "5") == 0
    assert java_compare("5", JavaNumber(DOUBLE, 5.0)) == 0
    assert java_compare(JavaNumber(INT, 5), JavaNumber(LONG, 5)) == 0
    assert java_compare(JavaNumber(LONG, 5), JavaNumber(DOUBLE, 5.5)) == -1
    assert java_compare("TRUE", True) == 0
    assert java_compare("x", False) == 0  # Boolean.valueOf("x") is false
    assert java_compare(JavaNumber(INT, 1), True) == -1  # not converted: "less"
    assert java_compare(True, JavaNumber(INT, 1)) == -1
    with pytest.raises(EvaluationError):
        java_compare(True, "true")  # RocketMQ casts the Boolean to a String
    with pytest.raises(EvaluationError):
        java_compare("5.0", JavaNumber(INT, 5))


def test_negate_wraps_like_java() -> None:
    assert negate(JavaNumber(INT, -(2**31))) == JavaNumber(INT, -(2**31))
    assert negate(JavaNumber(LONG, -(2**63))) == JavaNumber(LONG, -(2**63))
    assert negate(JavaNumber(DOUBLE, 1.5)) == JavaNumber(DOUBLE, -1.5)


@given(st.integers(min_value=-(2**31), max_value=2**31 - 1))
def test_integer_text_round_trips(value: int) -> None:
    assert parse_java_int(str(value)) == JavaNumber(INT, value)
    assert parse_java_long(str(value)) == JavaNumber(LONG, value)


@given(st.floats(allow_nan=False))
def test_double_text_round_trips(value: float) -> None:
    text = repr(value).replace("inf", "Infinity")
    assert parse_java_double(text) == JavaNumber(DOUBLE, value)


numbers = st.one_of(
    st.builds(JavaNumber, st.just(INT), st.integers(-(2**31), 2**31 - 1)),
    st.builds(JavaNumber, st.just(LONG), st.integers(-(2**63), 2**63 - 1)),
    st.builds(JavaNumber, st.just(DOUBLE), st.floats()),
)


@given(numbers, numbers)
def test_number_comparison_is_antisymmetric(a: JavaNumber, b: JavaNumber) -> None:
    assert java_compare(a, b) == -java_compare(b, a)
