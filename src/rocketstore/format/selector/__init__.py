"""SQL92 message selectors: RocketMQ's ``MessageSelector.bySql`` language, which a consumer
subscribes with (``expressionType`` SQL92) and a broker with ``enablePropertyFilter``
evaluates against each message's properties.

Pure. :func:`compile_selector` parses an expression (``SelectorError`` when RocketMQ would
refuse it); :meth:`Selector.matches` tells whether a message with these properties is
delivered: only when the expression is TRUE, not when it is FALSE or unknown (NULL), and
not when evaluating it fails in Java (``'abc' > 5``: RocketMQ logs it and skips the
message). docs/selectors.md describes the language and its Java rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from rocketstore.format.selector.java_values import EvaluationError
from rocketstore.format.selector.nodes import Node
from rocketstore.format.selector.parser import parse_selector

# RocketMQ's names for the subscription expression types (ExpressionType.java).
TAG = "TAG"
SQL92 = "SQL92"


@dataclass(frozen=True)
class Selector:
    expression: str
    condition: Node

    def evaluate(self, properties: Mapping[str, str]) -> bool | None:
        """TRUE, FALSE or unknown (None); raises EvaluationError where Java throws."""
        value = self.condition.evaluate(properties)
        return value if value is None or isinstance(value, bool) else False

    def matches(self, properties: Mapping[str, str]) -> bool:
        try:
            return self.evaluate(properties) is True
        except (EvaluationError, RecursionError):
            return False

    def __str__(self) -> str:
        return str(self.condition)


@lru_cache(maxsize=1024)  # every pull names its expression; a Selector is immutable
def compile_selector(expression: str) -> Selector:
    return Selector(expression, parse_selector(expression))


__all__ = ["SQL92", "TAG", "EvaluationError", "Selector", "compile_selector"]
