"""The tokens of RocketMQ's SQL92 selector language (SelectorParser.jj), read on demand.

Pure. Tokens are read lazily, one ahead of the parser, because that is what decides which
expressions RocketMQ accepts: its parser stops at the first token that cannot continue the
expression and never reads further, so ``a = 1 b`` is ``a = 1`` while ``a = 1 !`` is a
lexical error (``!`` is read as the token after ``1``).

The rules (JavaCC picks the longest match; between equal lengths, the first declared):

* skipped: space, tab, CR, LF, form feed; ``-- comment`` up to and including a line end
  (without one it is not a comment but two minus signs); ``/* comment */``;
* keywords, any case: NOT AND OR BETWEEN IN TRUE FALSE NULL IS, and RocketMQ 5's CONTAINS
  STARTSWITH ENDSWITH;
* a decimal literal: ``0``, or ``[1-9][0-9]*`` with an optional ``l``/``L``;
* a floating point literal: ``5.``, ``5.5``, ``.5``, ``5E10``, each with an optional
  exponent ``E[+-]digits`` (no type suffix, no hexadecimal);
* a string literal in single quotes, ``''`` standing for one quote (it may span lines);
* an identifier: ``[A-Za-z_$][A-Za-z0-9_$]*`` (no dots: ``a.b`` is not one property);
* ``= <> > >= < <= ( , ) + -``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rocketstore.errors import SelectorError

# JMS's reserved words, then the string tests RocketMQ 5 added.
_JMS_KEYWORDS = ("NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS")
_RMQ5_KEYWORDS = ("CONTAINS", "STARTSWITH", "ENDSWITH")
KEYWORDS = frozenset((*_JMS_KEYWORDS, *_RMQ5_KEYWORDS))

# Token kinds besides the keywords (which are their own kind, upper case) and operators
# (which are their own text).
DECIMAL = "decimal literal"
FLOAT = "floating point literal"
STRING = "string literal"
ID = "identifier"
EOF = "end of expression"

_WHITESPACE = " \t\n\r\f"
_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_DECIMAL = re.compile(r"0|[1-9][0-9]*[lL]?")
_EXPONENT = r"(?:[eE][+-]?[0-9]+)"
_FLOAT = re.compile(rf"[0-9]+\.[0-9]*{_EXPONENT}?|\.[0-9]+{_EXPONENT}?|[0-9]+{_EXPONENT}")
_STRING = re.compile(r"'(?:''|[^'])*'")
_LINE_COMMENT = re.compile(r"--[^\n\r]*(?:\r\n|\n|\r)")
_BLOCK_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)
OPERATORS = ("<>", ">=", "<=", "=", ">", "<", "(", ",", ")", "+", "-")


@dataclass(frozen=True, slots=True)
class Token:
    kind: str
    text: str
    position: int

    def describe(self) -> str:
        if self.kind == EOF:
            return EOF
        return f'"{self.text}"'


def string_value(text: str) -> str:
    """A string literal's value: the quotes dropped, ``''`` read as ``'``."""
    return text[1:-1].replace("''", "'")


class Lexer:
    """Tokens of ``text`` read as the parser asks for them (``peek`` reads ahead)."""

    def __init__(self, text: str):
        self.text = text
        self._position = 0
        self._ahead: list[Token] = []

    def peek(self, ahead: int = 0) -> Token:
        while len(self._ahead) <= ahead:
            self._ahead.append(self._read())
        return self._ahead[ahead]

    def next(self) -> Token:
        token = self.peek()
        self._ahead.pop(0)
        return token

    def _skip(self) -> None:
        text = self.text
        while self._position < len(text):
            if text[self._position] in _WHITESPACE:
                self._position += 1
                continue
            comment = _LINE_COMMENT.match(text, self._position) or _BLOCK_COMMENT.match(
                text, self._position
            )
            if comment is None:
                return
            self._position = comment.end()

    def _read(self) -> Token:
        self._skip()
        start = self._position
        text = self.text
        if start >= len(text):
            return Token(EOF, "", start)
        token = self._match(start)
        if token is None:
            char = text[start]
            what = "an unterminated string literal" if char == "'" else f'"{char}"'
            raise SelectorError(
                f"lexical error: {what} is not part of the language", position=start
            )
        self._position = start + len(token.text)
        return token

    def _match(self, start: int) -> Token | None:
        text = self.text
        candidates: list[Token] = []
        for kind, pattern in ((DECIMAL, _DECIMAL), (FLOAT, _FLOAT), (STRING, _STRING)):
            found = pattern.match(text, start)
            if found is not None:
                candidates.append(Token(kind, found.group(), start))
        word = _IDENTIFIER.match(text, start)
        if word is not None:
            upper = word.group().upper()
            candidates.append(Token(upper if upper in KEYWORDS else ID, word.group(), start))
        for operator in OPERATORS:
            if text.startswith(operator, start):
                candidates.append(Token(operator, operator, start))
                break
        if not candidates:
            return None
        # The longest match; the first declared among equals (max keeps the first).
        return max(candidates, key=lambda t: len(t.text))
