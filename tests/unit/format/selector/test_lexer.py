from __future__ import annotations

import pytest

from rocketstore.errors import SelectorError
from rocketstore.format.selector.lexer import DECIMAL, EOF, FLOAT, ID, STRING, Lexer, string_value


def _tokens(text: str) -> list[tuple[str, str]]:
    lexer = Lexer(text)
    out = []
    while (token := lexer.next()).kind != EOF:
        out.append((token.kind, token.text))
    return out


def test_keywords_any_case_and_identifiers_that_only_start_like_them() -> None:
    assert _tokens("not Not NOTa is_ $x _1 In") == [
        ("NOT", "not"),
        ("NOT", "Not"),
        (ID, "NOTa"),
        (ID, "is_"),
        (ID, "$x"),
        (ID, "_1"),
        ("IN", "In"),
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", [(DECIMAL, "0")]),
        ("10L", [(DECIMAL, "10L")]),
        ("0L", [(DECIMAL, "0"), (ID, "L")]),  # the suffix is for [1-9][0-9]* only
        ("007", [(DECIMAL, "0"), (DECIMAL, "0"), (DECIMAL, "7")]),
        ("5.", [(FLOAT, "5.")]),
        (".5e-3", [(FLOAT, ".5e-3")]),
        ("5E10", [(FLOAT, "5E10")]),
        ("1e", [(DECIMAL, "1"), (ID, "e")]),
        ("1.5f", [(FLOAT, "1.5"), (ID, "f")]),
    ],
)
def test_numbers_take_the_longest_match(text: str, expected: list[tuple[str, str]]) -> None:
    assert _tokens(text) == expected


def test_operators_and_strings() -> None:
    assert _tokens("a<>'x''y'>=(1,2)") == [
        (ID, "a"),
        ("<>", "<>"),
        (STRING, "'x''y'"),
        (">=", ">="),
        ("(", "("),
        (DECIMAL, "1"),
        (",", ","),
        (DECIMAL, "2"),
        (")", ")"),
    ]
    assert string_value("'x''y'") == "x'y"
    assert string_value("'a\nb'") == "a\nb"


def test_comments_are_skipped_but_a_line_comment_needs_its_line_end() -> None:
    assert _tokens("a -- note\r\n= /* x\n*/ 1") == [(ID, "a"), ("=", "="), (DECIMAL, "1")]
    assert _tokens("a --x") == [(ID, "a"), ("-", "-"), ("-", "-"), (ID, "x")]


@pytest.mark.parametrize(
    ("text", "position"), [("a ! b", 2), ("'open", 0), ("/* open", 0), ("a.b", 1)]
)
def test_a_character_outside_the_language_is_a_lexical_error(text: str, position: int) -> None:
    lexer = Lexer(text)
    with pytest.raises(SelectorError, match="lexical error") as caught:
        while lexer.next().kind != EOF:
            pass
    assert caught.value.position == position


def test_tokens_are_read_only_when_asked_for() -> None:
    lexer = Lexer("a = ! ")
    assert lexer.next().kind == ID
    assert lexer.peek().kind == "="
    with pytest.raises(SelectorError):
        lexer.peek(1)
