"""Write tests/golden/selectors/corpus.txt: SQL92 selectors and message property sets for
RocketMQ's own filter classes to judge (build_selectors.sh) and rocketstore's to match
(tests/golden/test_rocketmq_selectors.py).

Deterministic (seeded): hand-picked cases for each rule of the language and of Java's
conversions, then generated expressions (well-formed trees over every operator and
operand kind, and token soups for the lexer and the parser's checks).

Usage: python tests/golden/harness/selector_corpus.py
"""

from __future__ import annotations

import random
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "selectors" / "corpus.txt"

PROPERTY_SETS: list[dict[str, str]] = [
    {},
    {"a": "10", "b": "5", "c": "x"},
    {"a": "abc", "b": "", "c": "TagA"},
    {"a": "5.0", "b": "5", "c": "5L"},
    {"a": "true", "b": "TRUE", "c": "yes"},
    {"a": "-3", "b": "2147483648", "c": "-2147483648"},
    {"a": " 7 ", "b": "+5", "c": "-0"},
    {"a": "NaN", "b": "Infinity", "c": "-Infinity"},
    {"a": "x'y", "b": "x", "c": "'"},
    {"a": "1e3", "b": "0x10", "c": "1.5f"},
    {"a": "3000000000", "b": "9223372036854775807", "c": "9223372036854775808"},
    {"a": "\u0663", "b": "\u00e9t\u00e9", "c": "\U0001f600"},
    {"a": "0", "b": "0.0", "c": "-0.0"},
    {"a": "2", "b": "2", "c": "2"},
    {"a": "1", "TAGS": "TagA", "KEYS": "k1 k2"},
    {"a": "false", "b": "False", "c": "null"},
    {"a": "0x1p3", "b": "1.", "c": ".5"},
    {"a": "abcdef", "b": "abc", "c": "def"},
]

HAND_PICKED = [
    # literals and the boolean cast
    "TRUE",
    "FALSE",
    "NULL",
    "a",
    "NOT a",
    "5",
    "'x'",
    "1.5",
    "TRUE AND a",
    "(TRUE)",
    "true",
    "tRuE or false",
    "NOT NULL",
    "NOT TRUE",
    "NOT (a = 1)",
    # equality, with Java's conversions
    "a = 10",
    "a = 10.0",
    "a = '10'",
    "a = b",
    "a = TRUE",
    "a = FALSE",
    "b = TRUE",
    "a = 5",
    "a = 5.0",
    "a = -3",
    "a = - 3",
    "a = -(-3)",
    "a = +10",
    "-a = -10",
    "a = 3000000000",
    "a = 3000000000L",
    "a = 10L",
    "a = 0L",
    "a <> 10",
    "a <> 'abc'",
    "TRUE = a",
    "TRUE = TRUE",
    "TRUE = FALSE",
    "5 = 5",
    "5 = 5.0",
    "5 = 5L",
    "5 = TRUE",
    "TRUE = 5",
    "'x' = 'x'",
    "a = NULL",
    "NULL = a",
    "NULL IS NULL",
    "a IS NULL",
    "a IS NOT NULL",
    "d IS NULL",
    "d IS NOT NULL",
    "d = 1",
    "1 = d",
    "d <> 1",
    "a = 9223372036854775807",
    "a = 9223372036854775808",
    "a = 2147483647",
    "a = 2147483648",
    "a = -2147483648",
    "a = 1E3",
    "a = 1000",
    "a = 1000.0",
    "b = 2147483648",
    "c = -2147483648",
    # ordering
    "a > 5",
    "a >= 10",
    "a < 11",
    "a <= 9",
    "a > b",
    "a < b",
    "b > a",
    "a > 5.5",
    "a > 'x'",
    "a > TRUE",
    "a > NULL",
    "a > (b = 1)",
    "5 > 3",
    "5 > 3.0",
    "3.0 < 5",
    "a > -5",
    "a > 0.0",
    "a > 0.1",
    "a > 1e-400",
    "a > 1e400",
    "a > 1E308",
    "a > .5",
    "a > 5.",
    "a > 5E0",
    "a > 5e+1",
    "a > 5e-1",
    "a > c",
    "c > a",
    "a >= a",
    "a < c",
    "a > 3000000000",
    "a > 2147483647",
    "b > 2147483647",
    "(a > 5) = TRUE",
    # BETWEEN
    "a BETWEEN 1 AND 20",
    "a BETWEEN 20 AND 1",
    "a NOT BETWEEN 1 AND 20",
    "a BETWEEN 1 AND a",
    "a BETWEEN b AND 20",
    "a BETWEEN 1.5 AND 20",
    "a BETWEEN 'x' AND 'y'",
    "a BETWEEN NULL AND 1",
    "a BETWEEN 1 AND 1",
    "a NOT BETWEEN 20 AND 1",
    "a BETWEEN TRUE AND FALSE",
    "a BETWEEN -5 AND -1",
    "a BETWEEN 1 AND 2 AND b = 5",
    "5 BETWEEN 1 AND 10",
    # IN
    "a IN ('10')",
    "a IN ('10', 'abc')",
    "a NOT IN ('10')",
    "a IN ('1','2','3','4','5')",
    "a NOT IN ('1','2','3','4','5', '10')",
    "d IN ('x')",
    "d NOT IN ('x')",
    "1 IN ('1')",
    "a IN ()",
    "a IN (10)",
    "a IN 'x'",
    "(a) IN ('10')",
    "a IN ('x''y')",
    "a in ('x''y')",
    # CONTAINS / STARTSWITH / ENDSWITH (RocketMQ 5)
    "a CONTAINS 'b'",
    "a CONTAINS ''",
    "a NOT CONTAINS 'z'",
    "a NOT CONTAINS ''",
    "d CONTAINS 'x'",
    "d NOT CONTAINS 'x'",
    "a STARTSWITH 'abc'",
    "a NOT STARTSWITH 'abc'",
    "a ENDSWITH 'def'",
    "a NOT ENDSWITH 'def'",
    "a CONTAINS b",
    "5 CONTAINS '5'",
    "a contains 'c' AND b startswith 'a'",
    "TRUE CONTAINS 'T'",
    "(a = 1) CONTAINS 'x'",
    # logic and NULL
    "a = 10 AND b = 5",
    "a = 10 OR b = 6",
    "d = 1 OR a = 10",
    "d = 1 AND a = 10",
    "d = 1 OR a = 11",
    "d = 1 AND a = 11",
    "NOT d = 1",
    "NOT (d = 1)",
    "a = 1 OR b",
    "a > 5 AND NOT b < 1",
    "(a = 10 OR b = 5) AND c = 'x'",
    "a = 10 AND (b = 5 OR c = 'y')",
    "a > 5 OR a = 'abc'",
    "a = 'abc' OR a > 5",
    "a > 5 AND a = 'abc'",
    "NOT NOT a = 10",
    "a = 10 AND TRUE",
    "FALSE OR NULL",
    "NULL AND FALSE",
    "NULL OR TRUE",
    "1 AND TRUE",
    "TRUE AND 1",
    "a AND b",
    "a OR b",
    "TAGS = 'TagA'",
    "KEYS = 'k1 k2'",
    # where parsing stops, comments, lexical errors
    "a = 10 b = 5",
    "a = 10 )",
    "a = 10 ) garbage",
    "a = 10 !",
    "a = 10 &&",
    "a == 10",
    "a != 10",
    "a = 10 -- comment\n",
    "a = 10 -- comment",
    "a = 10 /* c */ AND b = 5",
    "/* c */ a = 10",
    "a = 10 /* unterminated",
    "-- only\n",
    "",
    "   ",
    "a = 'x",
    "a.b = 1",
    "$a = 1",
    "_a IS NULL",
    "a1 IS NULL",
    "1a = 1",
    "a = 010",
    "a = 00",
    "a = 0x10",
    "a = 1.5f",
    "a = 1.5d",
    "a = 'a\nb'",
    "a =\t10",
    "a\n=\n10",
    "a = 10\r\n",
    "(a = 10",
    "a = 10)",
    "((a = 10))",
    "a IS",
    "a IS NOT",
    "a IS NOT 1",
    "a NOT",
    "NOT",
    "a NOT b",
    "a BETWEEN 1",
    "a BETWEEN 1 OR 2",
    "+a = 10",
    "+ 5 > 3",
    "- - 5 > 3",
    "a = -",
    "a = +",
    "AND",
    "a = 1 AND",
    "a = 1 OR OR b = 2",
    "is = 1",
    "nota = 1",
    "nullx IS NULL",
    "contains = 1",
    "startswith IS NULL",
    "a = ''",
    "b = ''",
    "a > ''",
    "a = 'ABC'",
    "a = 'abc' AND 'abc' = a",
    "'abc' = a",
    "a = 1E",
    "a = 1e+",
    "a = .e1",
    # beyond ASCII: identifiers, spaces, digits Java's parsers take, strings
    "\u0130 IS NULL",
    "\u017f IS NULL",
    "\u212a IS NULL",
    "\u00e9 IS NULL",
    "a\u00a0= 1",
    "a = 1\u00a0",
    "a = 3",
    "a > 2",
    "a = 3.0",
    "b = '\u00e9t\u00e9'",
    "b CONTAINS 't\u00e9'",
    "c = '\U0001f600'",
    "b = '\u00c9T\u00c9'",
]

NAMES = ["a", "b", "c", "d", "TAGS"]
LITERALS = [
    "0",
    "1",
    "5",
    "10",
    "-3",
    "2147483648",
    "3000000000",
    "9223372036854775807",
    "10L",
    "1.5",
    "5.0",
    "0.5",
    ".5",
    "1e3",
    "5E-1",
    "TRUE",
    "FALSE",
    "NULL",
    "'x'",
    "'10'",
    "'abc'",
    "''",
    "'true'",
]
ORDERING = [">", ">=", "<", "<=", "=", "<>"]


def _operand(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.5:
        return rng.choice(NAMES)
    if roll < 0.9:
        return rng.choice(LITERALS)
    return f"-{rng.choice(NAMES + LITERALS[:6])}"


def _condition(rng: random.Random, depth: int) -> str:
    roll = rng.random()
    if depth > 0 and roll < 0.3:
        joiner = rng.choice([" AND ", " OR ", " and ", " or "])
        return _condition(rng, depth - 1) + joiner + _condition(rng, depth - 1)
    if depth > 0 and roll < 0.4:
        return f"({_condition(rng, depth - 1)})"
    if depth > 0 and roll < 0.45:
        return f"NOT {_condition(rng, depth - 1)}"
    left = _operand(rng)
    shape = rng.random()
    if shape < 0.55:
        return f"{left} {rng.choice(ORDERING)} {_operand(rng)}"
    if shape < 0.65:
        between = rng.choice(["BETWEEN", "NOT BETWEEN"])
        return f"{left} {between} {_operand(rng)} AND {_operand(rng)}"
    if shape < 0.75:
        values = ", ".join(
            rng.choice([*LITERALS[18:], "'5'", "'x''y'"]) for _ in range(rng.randint(1, 6))
        )
        return f"{left} {rng.choice(['IN', 'NOT IN'])} ({values})"
    if shape < 0.85:
        test = rng.choice(["CONTAINS", "STARTSWITH", "ENDSWITH"])
        neg = rng.choice(["", "NOT "])
        return f"{left} {neg}{test} {rng.choice([*LITERALS[18:], '5'])}"
    if shape < 0.93:
        return f"{left} IS {rng.choice(['', 'NOT '])}NULL"
    return left


# (Order matters: the seeded generator picks by position.)
_SOUP_OPERANDS = ["a", "b", "d", "5", "1.5", "'x'", "TRUE", "NULL", "=", "<>", ">", "<="]
_SOUP_WORDS = ["AND", "OR", "NOT", "IS", "IN", "BETWEEN", "CONTAINS", "(", ")", ",", "+", "-"]
SOUP = [*_SOUP_OPERANDS, *_SOUP_WORDS, "--c\n", "/*c*/"]


def _soup(rng: random.Random) -> str:
    tokens = [rng.choice(SOUP) for _ in range(rng.randint(1, 7))]
    return "".join(t + rng.choice([" ", " ", ""]) for t in tokens)


def escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def corpus(seed: int = 20261126) -> tuple[list[dict[str, str]], list[str]]:
    rng = random.Random(seed)
    expressions = list(HAND_PICKED)
    expressions += [_condition(rng, rng.randint(0, 3)) for _ in range(1500)]
    expressions += [_soup(rng) for _ in range(500)]
    return PROPERTY_SETS, list(dict.fromkeys(expressions))


def main() -> None:
    property_sets, expressions = corpus()
    lines = []
    for properties in property_sets:
        fields = [f"{escape(k)}\t{escape(v)}" for k, v in properties.items()]
        lines.append("\t".join(["P", *fields]))
    lines += [f"E\t{escape(e)}" for e in expressions]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {OUT}: {len(property_sets)} property sets, {len(expressions)} expressions")


if __name__ == "__main__":
    main()
