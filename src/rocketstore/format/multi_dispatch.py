"""LMQ multi-dispatch (RocketMQ 4.9.8's ``MultiDispatch``; spec 1.7): one message, units in
several consume queues. Pure functions: which queues, which offsets, what the record's
properties become, and which extra units a run of records carries.

With ``enableMultiDispatch``, a message whose ``INNER_MULTI_DISPATCH`` property is not blank
names queues, comma separated. Under the put lock each gets its next offset (a queue
named ``%LMQ%...`` is always queue 0 when ``enableLmq``; any other name takes the
message's queue id); the offsets go into ``INNER_MULTI_QUEUE_OFFSET``, the properties are
serialised again from the message's HashMap with WAIT left out, and the record is
encoded from them. Dispatch then writes, after the message's own unit, one unit at that
offset into each named queue (same CommitLog offset, size and tags code). Batches are not
wrapped, and PREPARED/ROLLBACK records get no units at all.

Layer: format.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from rocketstore.format import properties as props
from rocketstore.format import sysflag
from rocketstore.format.javahash import java_hashmap_order
from rocketstore.format.record_scan import Records
from rocketstore.java_ints import fits_java_long

INNER_MULTI_DISPATCH = "INNER_MULTI_DISPATCH"
INNER_MULTI_QUEUE_OFFSET = "INNER_MULTI_QUEUE_OFFSET"
LMQ_PREFIX = "%LMQ%"
SPLITTER = ","

# A record's extra units are found by the offsets property, at C speed over the run's bytes.
# The offsets property's name as it starts a name\x01value pair in a record's bytes.
OFFSETS_NAME_BYTES = INNER_MULTI_QUEUE_OFFSET.encode() + b"\x01"
_OFFSETS_NAME = re.compile(re.escape(OFFSETS_NAME_BYTES))
_JAVA_LONG = re.compile(r"[+-]?[0-9]+")
# Characters str.isspace() takes that Java's Character.isWhitespace does not.
_NOT_JAVA_WHITESPACE = frozenset("\u0085\u00a0\u2007\u202f")


def _is_java_long(text: str) -> bool:
    """What ``Long.parseLong`` takes (ASCII digits; Java also takes other scripts' digits,
    which no writer puts here)."""
    return bool(_JAVA_LONG.fullmatch(text)) and fits_java_long(int(text))


def java_is_blank(text: str | None) -> bool:
    """Commons-lang ``StringUtils.isBlank``: None, empty, or only Java whitespace."""
    return text is None or all(c.isspace() and c not in _NOT_JAVA_WHITESPACE for c in text)


def java_split(text: str) -> list[str]:
    """``String.split(",")``: trailing empty parts are dropped, leading ones kept; no
    comma gives the text itself (even ""), only commas give nothing."""
    if SPLITTER not in text:
        return [text]
    parts = text.split(SPLITTER)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def is_multi_dispatch(properties: Mapping[str, str]) -> bool:
    """Whether a put wraps this message (when the store has multi-dispatch on)."""
    return not java_is_blank(properties.get(INNER_MULTI_DISPATCH))


def target_queue_id(name: str, queue_id: int, *, enable_lmq: bool) -> int:
    """The queue id a named queue takes: 0 for an LMQ queue (with ``enableLmq``), else the
    message's own."""
    return 0 if enable_lmq and name.startswith(LMQ_PREFIX) else queue_id


def queue_keys(properties: Mapping[str, str], queue_id: int, *, enable_lmq: bool) -> list[str]:
    """The ``name-queueId`` offset-table keys of the queues a message names, in its order
    (a name given twice is two entries with the same offset, as in RocketMQ)."""
    names = java_split(properties[INNER_MULTI_DISPATCH])
    return [f"{n}-{target_queue_id(n, queue_id, enable_lmq=enable_lmq)}" for n in names]


def wrapped_properties(properties: Mapping[str, str], offsets: list[int]) -> dict[str, str]:
    """The properties a wrapped record stores: the message's with INNER_MULTI_QUEUE_OFFSET
    added, in the iteration order of the Java HashMap they live in (the mapping's order
    taken as insertion order), WAIT left out (``removeWaitStorePropertyString``)."""
    values = dict(properties)
    values[INNER_MULTI_QUEUE_OFFSET] = SPLITTER.join(str(o) for o in offsets)
    order = java_hashmap_order(list(values))
    return {k: values[k] for k in order if k != props.WAIT}


def dispatch_targets(
    properties: Mapping[str, str], queue_id: int, *, enable_lmq: bool
) -> list[tuple[str, int, int]] | None:
    """The (queue name, queue id, queue offset) of each unit a stored record's two
    properties give other queues, as RocketMQ's dispatch reads them (``[]`` when either is
    blank; offsets below 0 are skipped as repeats). None when they do not pair up: not as
    many offsets as names, or one ``Long.parseLong`` refuses."""
    names_text = properties.get(INNER_MULTI_DISPATCH)
    offsets_text = properties.get(INNER_MULTI_QUEUE_OFFSET)
    if names_text is None or offsets_text is None:
        return []
    if java_is_blank(names_text) or java_is_blank(offsets_text):
        return []
    names, offsets = java_split(names_text), java_split(offsets_text)
    if len(names) != len(offsets) or not all(_is_java_long(o) for o in offsets):
        return None
    return [
        (name, target_queue_id(name, queue_id, enable_lmq=enable_lmq), int(offset))
        for name, offset in zip(names, offsets, strict=True)
        if int(offset) >= 0  # before any queue's start: RocketMQ skips it as a repeat
    ]


class ExtraUnits(NamedTuple):
    """The units a run's wrapped records add beyond their own queue's, by queue."""

    rows: npt.NDArray[np.int64]  # the records' rows in the run, ascending
    queue_offsets: npt.NDArray[np.int64]


def extra_units(
    data: bytes | memoryview, records: Records, *, enable_lmq: bool
) -> tuple[dict[tuple[str, int], ExtraUnits], list[str]]:
    """Per (queue name, queue id), the extra units of the wrapped records of a run, and
    the problems of records whose two properties disagree (RocketMQ logs "[bug]" or
    fails the dispatch on those; they get no extra units here)."""
    if len(records) == 0:
        return {}, []
    starts = records.properties_position
    ends = starts + records.properties_length
    rows: list[int] = []
    # Only the run's bytes (a rebuild's range is a part of a file ``data`` maps whole).
    first, last = int(starts[0]), int(ends.max())
    for match in _OFFSETS_NAME.finditer(data, first, last):
        row = int(np.searchsorted(starts, match.start(), side="right")) - 1
        if row >= 0 and match.end() <= ends[row] and (not rows or rows[-1] != row):
            rows.append(row)
    found: dict[tuple[str, int], tuple[list[int], list[int]]] = {}
    problems: list[str] = []
    for row in rows:
        if not sysflag.gets_queue_entry(int(records.sys_flag[row])):
            continue
        text = bytes(data[int(starts[row]) : int(ends[row])]).decode("utf-8", errors="replace")
        values = props.decode_properties_str(text)
        targets = dispatch_targets(values, int(records.queue_id[row]), enable_lmq=enable_lmq)
        if targets is None:
            problems.append(
                f"record at position {int(records.position[row])}: {INNER_MULTI_DISPATCH}="
                f"{values.get(INNER_MULTI_DISPATCH)!r} and {INNER_MULTI_QUEUE_OFFSET}="
                f"{values.get(INNER_MULTI_QUEUE_OFFSET)!r} do not pair up"
            )
            continue
        for name, queue_id, offset in targets:
            entry = found.setdefault((name, queue_id), ([], []))
            entry[0].append(row)
            entry[1].append(offset)
    units = {
        key: ExtraUnits(np.array(r, dtype=np.int64), np.array(o, dtype=np.int64))
        for key, (r, o) in found.items()
    }
    return units, problems


def merge_units(
    own_rows: npt.NDArray[np.int64], own_offsets: npt.NDArray[np.int64], extra: ExtraUnits
) -> ExtraUnits:
    """A queue's own units and the extra ones other records give it, in record order (a
    record's own unit before an extra one of the same record: that one is a repeat)."""
    rows = np.concatenate([own_rows, extra.rows])
    queue_offsets = np.concatenate([own_offsets, extra.queue_offsets])
    extra_first = np.concatenate(
        [np.zeros(len(own_rows), dtype=np.int64), np.ones(len(extra.rows), dtype=np.int64)]
    )
    order = np.lexsort((extra_first, rows))
    return ExtraUnits(rows[order], queue_offsets[order].astype(np.int64, copy=False))
