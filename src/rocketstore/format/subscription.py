"""Subscription expressions (``*``, ``TagA || TagB``) as RocketMQ's FilterAPI parses them.

Pure. A queue unit matches when its tagsCode (as a Java int) is one of the tags' hash codes;
a record matches when its TAGS value is one of the tags.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from rocketstore.format.cq_ext import MAX_ADDRESS
from rocketstore.format.javahash import java_string_hash

SUB_ALL = "*"


def _to_int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - 0x1_0000_0000 if value & 0x8000_0000 else value


@dataclass(frozen=True)
class Subscription:
    expression: str
    tags: frozenset[str]
    codes: frozenset[int]

    @property
    def matches_all(self) -> bool:
        return not self.tags

    def match_code(self, tags_code: int) -> bool:
        """Whether a unit's tagsCode may be one of the tags. An extension address (a
        broker with enableConsumeQueueExt, format.cq_ext) says nothing of the tag: it
        passes, as RocketMQ passes a unit whose extension it cannot read, and the
        record's TAGS decide (``match_tags``)."""
        return self.matches_all or tags_code <= MAX_ADDRESS or _to_int32(tags_code) in self.codes

    def match_tags(self, tags: str | None) -> bool:
        return self.matches_all or (tags is not None and tags in self.tags)


@lru_cache(maxsize=1024)  # every pull parses its expression; Subscription is immutable
def parse_subscription(expression: str | None) -> Subscription:
    """``None``, ``""`` and ``"*"`` match everything; otherwise tags split on ``||``."""
    text = (expression or "").strip()
    if not text or text == SUB_ALL:
        return Subscription(SUB_ALL, frozenset(), frozenset())
    tags = frozenset(t.strip() for t in text.split("||") if t.strip())
    if not tags:
        return Subscription(SUB_ALL, frozenset(), frozenset())
    return Subscription(text, tags, frozenset(java_string_hash(t) for t in tags))
