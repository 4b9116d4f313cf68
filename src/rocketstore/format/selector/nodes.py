"""The expression tree of a SQL92 selector and how each node evaluates (RocketMQ's
filter.expression classes, as behaviour: three-valued logic, Java's conversions).

Pure. ``evaluate`` takes a message's properties (every value a string, as RocketMQ's
MessageEvaluationContext hands them) and returns a :data:`~.java_values.Value`; it raises
:class:`~.java_values.EvaluationError` where RocketMQ's evaluation throws.

``is_condition`` tells RocketMQ's BooleanExpressions (comparisons, logic, and the TRUE, FALSE and
NULL literals): the parser accepts only those, or a bare property, where a condition goes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rocketstore.format.selector.java_values import (
    EvaluationError,
    JavaNumber,
    Value,
    java_compare,
    negate,
    parse_java_double,
)

Properties = Mapping[str, str]


class Node:
    def is_condition(self) -> bool:
        """Whether RocketMQ types this node a BooleanExpression."""
        return True

    def evaluate(self, properties: Properties) -> Value:
        raise NotImplementedError


def _fold(operands: tuple[Node, ...], properties: Properties, decisive: bool) -> Value:
    """OR (``decisive`` True) or AND (False) of ``operands``, left to right as RocketMQ's
    nested LogicExpressions evaluate: the first decisive value ends it; otherwise unknown
    if any operand was, else the other value."""
    unknown = False
    for operand in operands:
        value = operand.evaluate(properties)
        if value is decisive:
            return decisive
        if value is None:
            unknown = True
        elif value is not (not decisive):
            _as_condition(value)  # raises: not a boolean
    return None if unknown else not decisive


def _as_condition(value: Value) -> bool | None:
    """A boolean node's result (only ever a bool or None)."""
    if value is None or isinstance(value, bool):
        return value
    raise EvaluationError(f"{value!r} is not a boolean")


@dataclass(frozen=True, slots=True)
class Constant(Node):
    value: Value
    is_boolean: bool = False  # TRUE, FALSE and NULL are BooleanConstantExpressions

    def is_condition(self) -> bool:
        return self.is_boolean

    def evaluate(self, properties: Properties) -> Value:
        return self.value

    def __str__(self) -> str:
        if self.value is None:
            return "NULL"
        if isinstance(self.value, bool):
            return "TRUE" if self.value else "FALSE"
        if isinstance(self.value, str):
            return "'" + self.value.replace("'", "''") + "'"
        return str(self.value)


@dataclass(frozen=True, slots=True)
class Property(Node):
    name: str

    def is_condition(self) -> bool:
        return False

    def evaluate(self, properties: Properties) -> Value:
        return properties.get(self.name)

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class Negate(Node):
    operand: Node

    def is_condition(self) -> bool:
        return False

    def evaluate(self, properties: Properties) -> Value:
        value = self.operand.evaluate(properties)
        # Only numbers negate; anything else (a property's string, too) is NULL.
        return negate(value) if isinstance(value, JavaNumber) else None

    def __str__(self) -> str:
        return f"(- {self.operand})"


@dataclass(frozen=True, slots=True)
class Not(Node):
    operand: Node

    def evaluate(self, properties: Properties) -> Value:
        value = _as_condition(self.operand.evaluate(properties))
        return None if value is None else not value

    def __str__(self) -> str:
        return f"(NOT {self.operand})"


@dataclass(frozen=True, slots=True)
class BooleanCast(Node):
    """A bare property where a condition goes: true only for a Boolean true, which a
    property (a string) never is."""

    operand: Node

    def evaluate(self, properties: Properties) -> Value:
        value = self.operand.evaluate(properties)
        if value is None:
            return None
        return value if isinstance(value, bool) else False

    def __str__(self) -> str:
        return str(self.operand)


@dataclass(frozen=True, slots=True)
class Or(Node):
    """``a OR b OR c`` as one node: evaluated left to right as RocketMQ's nested ORs are
    (the first true operand ends it), without one Python frame per operand."""

    operands: tuple[Node, ...]

    def evaluate(self, properties: Properties) -> Value:
        return _fold(self.operands, properties, decisive=True)

    def __str__(self) -> str:
        return "(" + " OR ".join(map(str, self.operands)) + ")"


@dataclass(frozen=True, slots=True)
class And(Node):
    """``a AND b AND c`` as one node (see :class:`Or`)."""

    operands: tuple[Node, ...]

    def evaluate(self, properties: Properties) -> Value:
        return _fold(self.operands, properties, decisive=False)

    def __str__(self) -> str:
        return "(" + " AND ".join(map(str, self.operands)) + ")"


@dataclass(frozen=True, slots=True)
class Equal(Node):
    """``=`` (and IS NULL, an Equal with the NULL literal). NULL on the left with a value on
    the right is unknown; a value on the left with NULL on the right is false."""

    left: Node
    right: Node

    def evaluate(self, properties: Properties) -> Value:
        lv = self.left.evaluate(properties)
        rv = self.right.evaluate(properties)
        if lv is None or rv is None:
            if lv is None and rv is None:
                return True
            return None if lv is None else False
        if type(lv) is str and type(rv) is str:
            return lv == rv  # (the common case, without java_compare's dispatch)
        return java_compare(lv, rv) == 0

    def __str__(self) -> str:
        return f"({self.left} == {self.right})"


@dataclass(frozen=True, slots=True)
class Compare(Node):
    """``> >= < <=``. Two strings (two properties) compare as the doubles they spell."""

    symbol: str
    left: Node
    right: Node

    def evaluate(self, properties: Properties) -> Value:
        lv = self.left.evaluate(properties)
        if lv is None:
            return None
        rv = self.right.evaluate(properties)
        if rv is None:
            return None
        if isinstance(lv, str) and isinstance(rv, str):
            sign = java_compare(parse_java_double(lv), parse_java_double(rv))
        else:
            sign = java_compare(lv, rv)
        if self.symbol == ">":
            return sign > 0
        if self.symbol == ">=":
            return sign >= 0
        if self.symbol == "<":
            return sign < 0
        return sign <= 0

    def __str__(self) -> str:
        return f"({self.left} {self.symbol} {self.right})"


@dataclass(frozen=True, slots=True)
class In(Node):
    """``p IN ('a', 'b')`` / ``NOT IN``: NULL when the property is missing."""

    operand: Property
    values: frozenset[str]
    negated: bool

    def evaluate(self, properties: Properties) -> Value:
        value = self.operand.evaluate(properties)
        if not isinstance(value, str):
            return None
        return (value in self.values) != self.negated

    def __str__(self) -> str:
        words = "NOT IN" if self.negated else "IN"
        listed = ", ".join("'" + v.replace("'", "''") + "'" for v in sorted(self.values))
        return f"{self.operand} {words} ( {listed} )"


@dataclass(frozen=True, slots=True)
class StringTest(Node):
    """RocketMQ 5's ``CONTAINS``, ``STARTSWITH``, ``ENDSWITH`` and their NOT forms: false
    (never NULL) for a missing property or an empty search string, negated or not."""

    symbol: str  # CONTAINS, STARTSWITH or ENDSWITH
    operand: Node
    search: str
    negated: bool

    def evaluate(self, properties: Properties) -> Value:
        if not self.search:
            return False
        value = self.operand.evaluate(properties)
        if not isinstance(value, str):
            return False
        if self.symbol == "CONTAINS":
            found = self.search in value
        elif self.symbol == "STARTSWITH":
            found = value.startswith(self.search)
        else:
            found = value.endswith(self.search)
        return found != self.negated

    def __str__(self) -> str:
        words = f"NOT {self.symbol}" if self.negated else self.symbol
        return f"{self.operand} {words} '{self.search}'"
