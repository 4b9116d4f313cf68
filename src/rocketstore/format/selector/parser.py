"""RocketMQ's SQL92 selector grammar (SelectorParser.jj, RocketMQ 5.3 with CONTAINS,
STARTSWITH and ENDSWITH), as a recursive-descent parser, with the checks RocketMQ's
expression factories make while building the tree.

Pure. Precedence, loosest first (each level a left-to-right loop)::

    or:         and (OR and)*
    and:        equality (AND equality)*
    equality:   comparison ( = comparison | <> comparison | IS NULL | IS NOT NULL )*
    comparison: unary ( > unary | >= unary | < unary | <= unary
                      | [NOT] BETWEEN unary AND unary | [NOT] IN (string, ...)
                      | [NOT] CONTAINS string | [NOT] STARTSWITH string
                      | [NOT] ENDSWITH string )*
    unary:      + unary | - unary | NOT unary | primary
    primary:    literal | identifier | ( or )

So ``NOT`` binds tighter than ``=``: ``NOT a = 1`` is ``(NOT a) = 1``, as in RocketMQ.
Like RocketMQ, parsing stops at the first token that cannot continue the expression and
ignores the rest (``a = 1 b`` selects ``a = 1``).

The checks (RocketMQ raises them while parsing, so a consumer with such a selector is
refused): ``>``/``<``/``>=``/``<=`` and BETWEEN take no string, boolean or NULL literal and
no condition as operand; ``=``/``<>`` take no NULL literal (IS NULL is for that) and no
boolean literal on the left of another literal; IN needs a property on its left; a
BETWEEN of two literals needs low <= high; a decimal literal must fit a Java long and a
floating point literal must be finite and not below Double.MIN_VALUE (so ``0.0`` is
refused); AND, OR and NOT take conditions or bare properties.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from rocketstore.errors import SelectorError
from rocketstore.format.selector.java_values import (
    EvaluationError,
    JavaNumber,
    JavaType,
    java_compare,
)
from rocketstore.format.selector.lexer import (
    DECIMAL,
    EOF,
    FLOAT,
    ID,
    STRING,
    Lexer,
    Token,
    string_value,
)
from rocketstore.format.selector.nodes import (
    And,
    BooleanCast,
    Compare,
    Constant,
    Equal,
    In,
    Negate,
    Node,
    Not,
    Or,
    Property,
    StringTest,
)
from rocketstore.java_ints import JAVA_INT_MAX, JAVA_INT_MIN, JAVA_LONG_MAX

NULL = Constant(None, is_boolean=True)
TRUE = Constant(True, is_boolean=True)
FALSE = Constant(False, is_boolean=True)

_ORDERING = (">", ">=", "<", "<=")
_STRING_TESTS = ("CONTAINS", "STARTSWITH", "ENDSWITH")
_COMPARISON_START = frozenset(("NOT", "BETWEEN", "IN", *_STRING_TESTS, *_ORDERING))
_DOUBLE_MIN_VALUE = 5e-324  # Double.MIN_VALUE, the smallest positive double


def decimal_literal(text: str, position: int) -> Constant:
    """An Integer when it fits one, else a Long (createFromDecimal)."""
    digits = text.rstrip("lL")
    value = int(digits)
    if value > JAVA_LONG_MAX:
        raise SelectorError(f"decimal literal {text} does not fit a Java long", position=position)
    kind = JavaType.INTEGER if JAVA_INT_MIN <= value <= JAVA_INT_MAX else JavaType.LONG
    return Constant(JavaNumber(kind, value))


def float_literal(text: str, position: int) -> Constant:
    """A Double, refused when infinite or below Double.MIN_VALUE (createFloat)."""
    value = float(text)
    if value == float("inf"):
        raise SelectorError(f"{text} is greater than Double.MAX_VALUE", position=position)
    if value < _DOUBLE_MIN_VALUE:
        raise SelectorError(f"{text} is less than Double.MIN_VALUE (4.9E-324)", position=position)
    return Constant(JavaNumber(JavaType.DOUBLE, value))


def _check_orderable(node: Node, token: Token) -> None:
    if isinstance(node, Constant):
        if isinstance(node.value, JavaNumber):
            return
        raise SelectorError(
            f"value {node} cannot be compared by {token.text}", position=token.position
        )
    if node.is_condition():
        raise SelectorError(
            f"condition {node} cannot be compared by {token.text}", position=token.position
        )


def _equal(left: Node, right: Node, token: Token) -> Node:
    for side in (left, right):
        if isinstance(side, Constant) and side.value is None:
            raise SelectorError(
                "NULL cannot be compared with = or <> (use IS NULL)", position=token.position
            )
    if (
        isinstance(left, Constant)
        and isinstance(right, Constant)
        and left.is_condition()
        and not right.is_condition()
    ):
        raise SelectorError(f"{left} cannot be compared with {right}", position=token.position)
    return Equal(left, right)


def _ordered(symbol: str, left: Node, right: Node, token: Token) -> Node:
    _check_orderable(left, token)
    _check_orderable(right, token)
    return Compare(symbol, left, right)


class _Parser:
    def __init__(self, text: str):
        self.lexer = Lexer(text)

    def expect(self, kind: str, what: str) -> Token:
        token = self.lexer.next()
        if token.kind != kind:
            raise SelectorError(
                f"expected {what}, found {token.describe()}", position=token.position
            )
        return token

    def condition(self, node: Node, token: Token) -> Node:
        """RocketMQ's asBooleanExpression: conditions as they are, a bare property cast."""
        if node.is_condition():
            return node
        if isinstance(node, Property):
            return BooleanCast(node)
        raise SelectorError(f"{node} is not a condition", position=token.position)

    def _chain(self, keyword: str, operand: Callable[[], Node], build: type[And | Or]) -> Node:
        """``operand (keyword operand)*`` as one And or Or node (or the lone operand)."""
        start = self.lexer.peek()
        left = operand()
        operands: list[Node] = []
        while self.lexer.peek().kind == keyword:
            token = self.lexer.next()
            if not operands:
                operands.append(self.condition(left, start))
            operands.append(self.condition(operand(), token))
        return build(tuple(operands)) if operands else left

    def or_expression(self) -> Node:
        return self._chain("OR", self.and_expression, Or)

    def and_expression(self) -> Node:
        return self._chain("AND", self.equality, And)

    def equality(self) -> Node:
        left = self.comparison()
        lexer = self.lexer
        while True:
            token = lexer.peek()
            if token.kind == "=":
                lexer.next()
                left = _equal(left, self.comparison(), token)
            elif token.kind == "<>":
                lexer.next()
                left = Not(_equal(left, self.comparison(), token))
            elif token.kind == "IS":
                lexer.next()
                if lexer.peek().kind == "NULL":
                    lexer.next()
                    left = Equal(left, NULL)
                else:
                    self.expect("NOT", "NULL or NOT NULL after IS")
                    self.expect("NULL", "NULL after IS NOT")
                    left = Not(Equal(left, NULL))
            else:
                return left

    def comparison(self) -> Node:
        left = self.unary()
        lexer = self.lexer
        while lexer.peek().kind in _COMPARISON_START:
            token = lexer.next()
            negated = token.kind == "NOT"
            kind = token.kind
            if negated:
                follower = lexer.next()
                if follower.kind not in ("BETWEEN", "IN", *_STRING_TESTS):
                    raise SelectorError(
                        "expected BETWEEN, IN, CONTAINS, STARTSWITH or ENDSWITH after NOT, "
                        f"found {follower.describe()}",
                        position=follower.position,
                    )
                kind = follower.kind
            if kind in _ORDERING:
                left = _ordered(kind, left, self.unary(), token)
            elif kind in _STRING_TESTS:
                search = string_value(self.expect(STRING, f"a string literal after {kind}").text)
                left = StringTest(kind, left, search, negated)
            elif kind == "BETWEEN":
                left = self.between(left, negated, token)
            else:
                left = self.in_list(left, negated, token)
        return left

    def between(self, value: Node, negated: bool, token: Token) -> Node:
        low = self.unary()
        self.expect("AND", "AND in BETWEEN")
        high = self.unary()
        if negated:
            return Or((_ordered("<", value, low, token), _ordered(">", value, high, token)))
        if isinstance(low, Constant) and isinstance(high, Constant):
            if low.value is None or high.value is None:
                raise SelectorError("BETWEEN values cannot be NULL", position=token.position)
            try:
                reversed_range = java_compare(high.value, low.value) < 0
            except EvaluationError as e:
                raise SelectorError(
                    f"BETWEEN {low} AND {high}: {e}", position=token.position
                ) from e
            if reversed_range:
                raise SelectorError(
                    f"BETWEEN {low} AND {high}: the low value must not exceed the high one",
                    position=token.position,
                )
        return And((_ordered(">=", value, low, token), _ordered("<=", value, high, token)))

    def in_list(self, value: Node, negated: bool, token: Token) -> Node:
        self.expect("(", "( after IN")
        values = [string_value(self.expect(STRING, "a string literal in IN ( )").text)]
        while self.lexer.peek().kind == ",":
            self.lexer.next()
            values.append(string_value(self.expect(STRING, "a string literal in IN ( )").text))
        self.expect(")", ") closing IN ( )")
        if not isinstance(value, Property):
            raise SelectorError(
                f"IN needs a property on its left, got {value}", position=token.position
            )
        return In(value, frozenset(values), negated)

    def unary(self) -> Node:
        token = self.lexer.peek()
        if token.kind == "+":
            self.lexer.next()
            return self.unary()
        if token.kind == "-":
            self.lexer.next()
            return Negate(self.unary())
        if token.kind == "NOT":
            self.lexer.next()
            operand_start = self.lexer.peek()
            return Not(self.condition(self.unary(), operand_start))
        return self.primary()

    def primary(self) -> Node:
        token = self.lexer.next()
        kind = token.kind
        if kind == STRING:
            return Constant(string_value(token.text))
        if kind == DECIMAL:
            return decimal_literal(token.text, token.position)
        if kind == FLOAT:
            return float_literal(token.text, token.position)
        if kind in ("TRUE", "FALSE", "NULL"):
            return {"TRUE": TRUE, "FALSE": FALSE, "NULL": NULL}[kind]
        if kind == ID:
            return Property(token.text)
        if kind == "(":
            inner = self.or_expression()
            self.expect(")", "a closing )")
            return inner
        found = token.describe()
        raise SelectorError(
            f"expected a literal, a property or ( , found {found}", position=token.position
        )


def parse_selector(text: str) -> Node:
    """The condition ``text`` selects by; SelectorError says why RocketMQ would refuse it."""
    if not text.strip():
        raise SelectorError("the SQL92 expression is empty")
    parser = _Parser(text)
    start = parser.lexer.peek()
    if start.kind == EOF:  # (only comments)
        raise SelectorError("the SQL92 expression is empty")
    try:
        root = parser.or_expression()
    except RecursionError as e:
        raise SelectorError(
            f"the SQL92 expression nests deeper than {sys.getrecursionlimit() // 8} levels"
        ) from e
    return parser.condition(root, start)
