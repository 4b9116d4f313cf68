"""Subscription expressions as RocketMQ's FilterAPI builds them: a TAG expression (``*``,
``TagA || TagB``) or a SQL92 selector (``expressionType`` SQL92, :mod:`.selector`).

Pure. For tags, a queue unit matches when its tagsCode (as a Java int) is one of the tags'
hash codes, and a record when its TAGS value is one of the tags. A SQL92 selector passes
every unit (RocketMQ's bloom-filter bitmap, ``enableCalcFilterBitMap``, is not kept) and
decides on the record's properties.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

from rocketstore.errors import ConfigError, SelectorError
from rocketstore.format import properties as props
from rocketstore.format.cq_ext import MAX_ADDRESS
from rocketstore.format.javahash import java_string_hash
from rocketstore.format.selector import SQL92, TAG, compile_selector

SUB_ALL = "*"


def _to_int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - 0x1_0000_0000 if value & 0x8000_0000 else value


class PropertyFilter(Protocol):
    """What decides on a record by its properties: a :class:`~.selector.Selector`, or a
    broker's filter for retry messages (by the selector of their original topic)."""

    def matches(self, properties: Mapping[str, str]) -> bool: ...


@dataclass(frozen=True)
class Subscription:
    expression: str
    tags: frozenset[str]
    codes: frozenset[int]
    selector: PropertyFilter | None = None  # a SQL92 subscription's
    # A TAG expression whose every tag is blank (" ", "a||" is not): RocketMQ keeps it with
    # no tag code, so a broker matches no unit with it.
    matches_none: bool = False

    @property
    def matches_all(self) -> bool:
        return not self.tags and self.selector is None and not self.matches_none

    @property
    def expression_type(self) -> str:
        return TAG if self.selector is None else SQL92

    def match_code(self, tags_code: int) -> bool:
        """Whether a unit's tagsCode may be one of the tags. An extension address (a
        broker with enableConsumeQueueExt, format.cq_ext) says nothing of the tag: it
        passes, as RocketMQ passes a unit whose extension it cannot read, and the
        record's TAGS decide (``match_tags``)."""
        if not self.tags:
            return not self.matches_none
        return tags_code <= MAX_ADDRESS or _to_int32(tags_code) in self.codes

    def match_tags(self, tags: str | None) -> bool:
        """A TAG subscription's check of a record's TAGS (a selector's decides on
        ``match_properties``)."""
        if not self.tags:
            return not self.matches_none
        return tags is not None and tags in self.tags

    def match_properties(self, properties: Mapping[str, str]) -> bool:
        """Whether a record with these properties is delivered: its TAGS for a TAG
        subscription, the selector (TRUE only) for a SQL92 one."""
        if self.selector is not None:
            return self.selector.matches(properties)
        return self.match_tags(properties.get(props.TAGS))


@lru_cache(maxsize=1024)  # every pull parses its expression; Subscription is immutable
def parse_subscription(expression: str | None) -> Subscription:
    """FilterAPI's TAG expression: ``None``, ``""`` and ``"*"`` match everything; anything
    else is split on ``||`` as Java's ``String.split`` does (trailing empty parts dropped)
    and each part trimmed. ConfigError when nothing is left of the split (``"||"``:
    RocketMQ's "subString split error"); parts that are all blank (``" "``) leave no tag,
    and match no message."""
    if not expression or expression == SUB_ALL:
        return Subscription(SUB_ALL, frozenset(), frozenset())
    parts = expression.split("||")
    while parts and not parts[-1]:
        parts.pop()
    if not parts:
        raise ConfigError(
            f"subscription {expression!r} names no tag (RocketMQ: subString split error)"
        )
    tags = frozenset(t.strip() for t in parts if t.strip())
    if not tags:
        return Subscription(expression, frozenset(), frozenset(), matches_none=True)
    return Subscription(expression, tags, frozenset(java_string_hash(t) for t in tags))


def build_subscription(expression: str | None, expression_type: str | None = TAG) -> Subscription:
    """FilterAPI.build: a TAG expression (``None`` or empty type means TAG, any case) or a
    SQL92 selector; SelectorError for a SQL92 expression RocketMQ refuses, ConfigError
    (its parent) for a type RocketMQ has no filter for."""
    kind = (expression_type or TAG).strip().upper()
    if kind == TAG:
        return parse_subscription(expression)
    if kind != SQL92:
        raise ConfigError(f"expression type {expression_type!r} is not supported: TAG or SQL92")
    if expression is None or not expression.strip():
        raise SelectorError("a SQL92 subscription needs an expression")
    return _sql92_subscription(expression)


@lru_cache(maxsize=1024)
def _sql92_subscription(expression: str) -> Subscription:
    return Subscription(expression, frozenset(), frozenset(), compile_selector(expression))
