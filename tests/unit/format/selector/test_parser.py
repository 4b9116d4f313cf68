from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketstore.errors import SelectorError
from rocketstore.format.selector import compile_selector
from rocketstore.format.selector.java_values import EvaluationError
from rocketstore.format.selector.lexer import KEYWORDS, OPERATORS
from rocketstore.format.selector.nodes import And, BooleanCast, Equal, Not, Or
from rocketstore.format.selector.parser import parse_selector


def test_precedence_or_and_equality_comparison_unary() -> None:
    tree = parse_selector("a = 1 OR b > 2 AND NOT c IS NULL")
    assert isinstance(tree, Or)
    assert isinstance(tree.operands[1], And)
    # NOT binds tighter than IS NULL / =: (NOT c) IS NULL.
    is_null = tree.operands[1].operands[1]
    assert isinstance(is_null, Equal) and isinstance(is_null.left, Not)


def test_chains_are_one_node_and_evaluate_without_deep_recursion() -> None:
    expression = " OR ".join(f"a = {i}" for i in range(5000))
    selector = compile_selector(expression)
    assert isinstance(selector.condition, Or) and len(selector.condition.operands) == 5000
    assert selector.matches({"a": "4999"})
    assert not selector.matches({"a": "5000"})


def test_a_bare_property_is_cast_and_never_true() -> None:
    selector = compile_selector("a")
    assert isinstance(selector.condition, BooleanCast)
    assert selector.evaluate({"a": "true"}) is False
    assert selector.evaluate({}) is None


def test_parsing_stops_at_the_first_token_that_cannot_continue() -> None:
    assert str(compile_selector("a = 1 b = 2")) == str(compile_selector("a = 1"))
    assert str(compile_selector("a = 1 ) ! @")) == str(compile_selector("a = 1"))
    with pytest.raises(SelectorError, match="lexical"):
        compile_selector("a = 1 !")  # the token right after is still read


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("", "empty"),
        ("/* nothing */", "empty"),
        ("5", "not a condition"),
        ("a > 'x'", "cannot be compared"),
        ("a >= TRUE", "cannot be compared"),
        ("a < (b = 1)", "cannot be compared"),
        ("a = NULL", "IS NULL"),
        ("TRUE = 'x'", "cannot be compared"),
        ("a BETWEEN 5 AND 1", "must not exceed"),
        ("a BETWEEN NULL AND 1", "NULL"),
        ("1 IN ('1')", "property"),
        ("a IN ()", "string literal"),
        ("a NOT LIKE 'x'", "after NOT"),
        ("a IS 1", "NULL"),
        ("a > 0.0", "MIN_VALUE"),
        ("a > 1e999", "MAX_VALUE"),
        ("a = 9223372036854775808", "long"),
        ("(a = 1", "closing"),
        ("a = ", "literal"),
        ("a CONTAINS b", "string literal"),
    ],
)
def test_refusals_name_the_problem(expression: str, message: str) -> None:
    with pytest.raises(SelectorError, match=message):
        compile_selector(expression)


def test_deep_nesting_is_a_selector_error() -> None:
    with pytest.raises(SelectorError, match="nests deeper"):
        compile_selector("(" * 5000 + "a = 1" + ")" * 5000)


def test_compiled_selectors_are_cached() -> None:
    assert compile_selector("a = 1") is compile_selector("a = 1")


@given(st.text(max_size=40))
def test_any_text_parses_or_is_a_selector_error(text: str) -> None:
    try:
        selector = compile_selector(text)
    except SelectorError:
        return
    with contextlib.suppress(EvaluationError):
        selector.evaluate({"a": text, "b": "1"})
    assert selector.matches({"a": text}) in (True, False)


_atoms = st.sampled_from(["a", "b", "1", "-2", "1.5", "'x'", *sorted(KEYWORDS), *OPERATORS])


@given(
    st.lists(_atoms, min_size=1, max_size=12),
    st.dictionaries(st.sampled_from("abc"), st.text(max_size=5)),
)
def test_token_soup_parses_or_is_refused_and_matching_never_raises(
    tokens: list[str], properties: dict[str, str]
) -> None:
    try:
        selector = compile_selector(" ".join(tokens))
    except SelectorError:
        return
    assert selector.matches(properties) in (True, False)
