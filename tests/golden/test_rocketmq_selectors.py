"""SQL92 selectors against RocketMQ's own filter classes: for every expression of the
corpus (tests/golden/selectors/corpus.txt, hand-picked cases and generated ones), RocketMQ
5.3.3's SelectorParser refused it or evaluated it to TRUE, FALSE, NULL or a throw for each
property set (expected-5.3.3.txt, written by harness/build_selectors.sh), and rocketstore
must do the same. RocketMQ 4.9.8 agrees with 5.3.3 except where CONTAINS, STARTSWITH or
ENDSWITH (keywords only since RocketMQ 5) appear."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from rocketstore.errors import SelectorError
from rocketstore.format.selector import compile_selector
from rocketstore.format.selector.java_values import EvaluationError

HERE = Path(__file__).parent
CORPUS = HERE / "selectors" / "corpus.txt"
RMQ5_ONLY = re.compile(r"contains|startswith|endswith", re.IGNORECASE)


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"t": "\t", "n": "\n", "r": "\r"}.get(m[1], m[1]), text)


def _corpus() -> tuple[list[dict[str, str]], list[str]]:
    property_sets: list[dict[str, str]] = []
    expressions: list[str] = []
    for line in CORPUS.read_text(encoding="utf-8").splitlines():
        kind, *fields = line.split("\t")
        if kind == "P":
            pairs = [_unescape(f) for f in fields]
            property_sets.append(dict(zip(pairs[::2], pairs[1::2], strict=True)))
        else:
            expressions.append(_unescape(fields[0]))
    return property_sets, expressions


def _ours(expression: str, property_sets: list[dict[str, str]]) -> str:
    try:
        selector = compile_selector(expression)
    except SelectorError:
        return "ERR"
    letters = []
    for properties in property_sets:
        try:
            value = selector.evaluate(properties)
        except EvaluationError:
            letters.append("X")
            continue
        letters.append("N" if value is None else "T" if value else "F")
    return "OK\t" + "".join(letters)


def _judged(version: str) -> list[tuple[str, str, str]]:
    property_sets, expressions = _corpus()
    expected = (HERE / "selectors" / f"expected-{version}.txt").read_text(encoding="utf-8")
    lines = expected.splitlines()
    assert len(lines) == len(expressions)
    return [(e, want, _ours(e, property_sets)) for e, want in zip(expressions, lines, strict=True)]


def test_corpus_is_what_the_generator_writes() -> None:
    spec = importlib.util.spec_from_file_location(
        "selector_corpus", HERE / "harness" / "selector_corpus.py"
    )
    assert spec is not None and spec.loader is not None
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    property_sets, expressions = generator.corpus()
    assert (property_sets, expressions) == _corpus()
    assert len(expressions) > 1900 and len(property_sets) == 18


def test_every_verdict_is_rocketmq_5s() -> None:
    judged = _judged("5.3.3")
    wrong = [(e, want, got) for e, want, got in judged if want != got]
    assert not wrong, wrong[:10]
    # The corpus exercises every outcome, not just refusals.
    outcomes = "".join(want for _e, want, _got in judged)
    refused = sum(want == "ERR" for _e, want, _got in judged)
    assert 500 < refused < 1500
    for letter in "TFNX":
        assert outcomes.count(letter) > 1000


def test_rocketmq_4_differs_only_by_the_string_tests() -> None:
    judged = _judged("4.9.8")
    wrong = [(e, want, got) for e, want, got in judged if want != got and not RMQ5_ONLY.search(e)]
    assert not wrong, wrong[:10]
    assert any(want != got for _e, want, got in judged)  # 4.9.8 does not know CONTAINS


@pytest.mark.parametrize(
    ("expression", "properties", "delivered"),
    [
        ("a > 5", {"a": "10"}, True),
        ("a > 5", {"a": "abc"}, False),  # evaluation throws: not delivered
        ("a <> 1", {}, False),  # unknown: not delivered
        ("a IS NULL", {}, True),
        ("NOT a = 1", {"a": "1"}, False),  # (NOT a) = 1
        (
            "TAGS IN ('TagA', 'TagB') AND KEYS STARTSWITH 'order'",
            {"TAGS": "TagB", "KEYS": "order-7"},
            True,
        ),
    ],
)
def test_matches_delivers_only_true(
    expression: str, properties: dict[str, str], delivered: bool
) -> None:
    assert compile_selector(expression).matches(properties) is delivered
