"""Filter pushdown: Spark's filters (``pyspark.sql.datasource.Filter``, Spark >= 4.1) turned
into :class:`Pushed` constraints the planner and the scans apply.

Layer: spark (top). A filter is claimed only when every row it would drop is dropped here:
``topic`` and ``partition`` (= and IN) prune queues; ``offset`` and ``timestamp`` ranges
narrow each queue's offset range *and* are checked on every row; ``key`` and ``uniqKey``
(= and IN) are answered through the index and checked on every row. Everything else, and
``offset IN (...)`` (which only narrows the range), goes back to Spark, which applies it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any, TypeGuard

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_US = dt.timedelta(microseconds=1)


@dataclass(frozen=True)
class Pushed:
    """The conjunction of the filters a reader claimed. Time bounds are in store-time ms
    and exact for the ``timestamp`` column (which holds ms * 1000 µs)."""

    topics: frozenset[str] | None = None
    queue_ids: frozenset[int] | None = None
    offset_min: int | None = None  # inclusive
    offset_max: int | None = None  # exclusive
    time_min_ms: int | None = None  # inclusive
    time_max_ms: int | None = None  # exclusive
    keys: frozenset[str] | None = None  # the `key` column (KEYS as stored) is one of these
    uniq_keys: frozenset[str] | None = None

    @property
    def by_index(self) -> bool:
        return self.keys is not None or self.uniq_keys is not None

    def accepts_row(
        self, topic: str, queue_id: int, queue_offset: int, store_ms: int, keys: str | None,
        uniq_key: str | None,
    ) -> bool:  # fmt: skip
        return (
            (self.topics is None or topic in self.topics)
            and (self.queue_ids is None or queue_id in self.queue_ids)
            and (self.offset_min is None or queue_offset >= self.offset_min)
            and (self.offset_max is None or queue_offset < self.offset_max)
            and (self.time_min_ms is None or store_ms >= self.time_min_ms)
            and (self.time_max_ms is None or store_ms < self.time_max_ms)
            and (self.keys is None or keys in self.keys)
            and (self.uniq_keys is None or uniq_key in self.uniq_keys)
        )


def _intersect(old: frozenset[Any] | None, new: Iterable[Any]) -> frozenset[Any]:
    values = frozenset(new)
    return values if old is None else old & values


def _max(old: int | None, new: int) -> int:
    return new if old is None else max(old, new)


def _min(old: int | None, new: int) -> int:
    return new if old is None else min(old, new)


def timestamp_us(value: object) -> int | None:
    """A pushed timestamp literal (a datetime; naive ones are taken as UTC) in epoch µs."""
    if not isinstance(value, dt.datetime):
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return (value - _EPOCH) // _US


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def push_filters(
    filters: Iterable[Any], pushed: Pushed, *, index_usable: bool
) -> tuple[Pushed, list[Any]]:
    """Fold the supported filters into ``pushed``; return it with the filters Spark must
    still apply (the very objects it passed in)."""
    from pyspark.sql import datasource as ds  # noqa: PLC0415

    rest: list[Any] = []
    for f in filters:
        attribute: tuple[str, ...] = getattr(f, "attribute", ())
        column = attribute[0] if len(attribute) == 1 else None
        value = getattr(f, "value", None)
        updated: Pushed | None = None
        keep = True
        if isinstance(f, ds.EqualTo):
            updated = _push_equal(pushed, column, value, index_usable)
            keep = updated is None
        elif isinstance(f, ds.In):
            updated, keep = _push_in(pushed, column, tuple(value or ()), index_usable)
        elif isinstance(f, ds.GreaterThan | ds.GreaterThanOrEqual | ds.LessThan):
            updated = _push_range(pushed, column, value, type(f).__name__)
            keep = updated is None
        elif isinstance(f, ds.LessThanOrEqual):
            updated = _push_range(pushed, column, value, "LessThanOrEqual")
            keep = updated is None
        if updated is not None:
            pushed = updated
        if keep:
            rest.append(f)
    return pushed, rest


def _push_equal(pushed: Pushed, column: str | None, value: object, index: bool) -> Pushed | None:
    if column == "topic" and isinstance(value, str):
        return replace(pushed, topics=_intersect(pushed.topics, [value]))
    if column == "partition" and _is_int(value):
        return replace(pushed, queue_ids=_intersect(pushed.queue_ids, [value]))
    if column in ("offset", "timestamp"):
        low = _push_range(pushed, column, value, "GreaterThanOrEqual")
        return _push_range(low, column, value, "LessThanOrEqual") if low else None
    if column == "key" and isinstance(value, str) and value.strip() and index:
        return replace(pushed, keys=_intersect(pushed.keys, [value]))
    if column == "uniqKey" and isinstance(value, str) and value and index:
        return replace(pushed, uniq_keys=_intersect(pushed.uniq_keys, [value]))
    return None


def _push_in(
    pushed: Pushed, column: str | None, values: tuple[object, ...], index: bool
) -> tuple[Pushed | None, bool]:
    """(new constraints or None, whether Spark must still apply the filter)."""
    if column == "topic" and all(isinstance(v, str) for v in values):
        return replace(pushed, topics=_intersect(pushed.topics, values)), False
    if column == "partition" and all(_is_int(v) for v in values):
        return replace(pushed, queue_ids=_intersect(pushed.queue_ids, values)), False
    if (
        column == "key"
        and values
        and index
        and all(isinstance(v, str) and v.strip() for v in values)
    ):
        return replace(pushed, keys=_intersect(pushed.keys, values)), False
    if column == "uniqKey" and values and index and all(isinstance(v, str) and v for v in values):
        return replace(pushed, uniq_keys=_intersect(pushed.uniq_keys, values)), False
    if column == "offset" and values and all(_is_int(v) for v in values):
        ints = [int(v) for v in values if _is_int(v)]  # narrow to [min, max]; Spark checks
        narrowed = replace(
            pushed,
            offset_min=_max(pushed.offset_min, min(ints)),
            offset_max=_min(pushed.offset_max, max(ints) + 1),
        )
        return narrowed, True
    return None, True


def _push_range(pushed: Pushed, column: str | None, value: object, op: str) -> Pushed | None:
    if column == "offset" and _is_int(value):
        v = int(value)
        if op == "GreaterThan":
            return replace(pushed, offset_min=_max(pushed.offset_min, v + 1))
        if op == "GreaterThanOrEqual":
            return replace(pushed, offset_min=_max(pushed.offset_min, v))
        if op == "LessThan":
            return replace(pushed, offset_max=_min(pushed.offset_max, v))
        return replace(pushed, offset_max=_min(pushed.offset_max, v + 1))
    if column == "timestamp":
        us = timestamp_us(value)
        if us is None:
            return None
        # The column holds ms * 1000: ts >= us <=> ms >= ceil(us / 1000), and so on.
        floor_ms, ceil_ms = us // 1000, -(-us // 1000)
        if op == "GreaterThan":
            return replace(pushed, time_min_ms=_max(pushed.time_min_ms, floor_ms + 1))
        if op == "GreaterThanOrEqual":
            return replace(pushed, time_min_ms=_max(pushed.time_min_ms, ceil_ms))
        if op == "LessThan":
            return replace(pushed, time_max_ms=_min(pushed.time_max_ms, ceil_ms))
        return replace(pushed, time_max_ms=_min(pushed.time_max_ms, floor_ms + 1))
    return None


def describe(pushed: Pushed) -> Iterator[str]:
    """Human-readable lines (for logs and tests)."""
    for name in (
        "topics", "queue_ids", "offset_min", "offset_max", "time_min_ms", "time_max_ms",
        "keys", "uniq_keys",
    ):  # fmt: skip
        value = getattr(pushed, name)
        if value is not None:
            yield f"{name}={sorted(value) if isinstance(value, frozenset) else value}"
