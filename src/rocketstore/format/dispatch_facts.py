"""What dispatching a run of records writes, computed in bulk: each record's consume-queue
tagsCode and the index entries (hashed ``topic#key``) in the order they are put.

Layer: format. Pure functions over a buffer holding the records (an mmap or a copied
chunk) and their :class:`~rocketstore.format.record_scan.Records`; no files are opened
here. The one implementation used by the live dispatcher, recovery's re-dispatch and the
parallel rebuild, so the three write the same bytes.

Most records are handled with numpy (:mod:`.properties_scan`). Records whose properties hold
a byte >= 0x80 (Java hashes UTF-16 units, not bytes) and SCHEDULE_TOPIC records (their
tagsCode is a delivery time) go one by one through :func:`record_facts`, which follows the
dispatcher's rules on the decoded properties exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rocketstore.format import native, sysflag
from rocketstore.format import properties as props
from rocketstore.format import properties_scan as bulk
from rocketstore.format.javahash import index_key_hash_many, tags_code
from rocketstore.format.record_scan import GATHER_RECORDS, Records, TopicTable
from rocketstore.java_ints import wrap_java_long
from rocketstore.paths import SCHEDULE_TOPIC

# One index entry to put: ``offset`` is the record's position in the buffer (callers add
# the buffer's CommitLog offset), ``record`` its number in the run, ``order`` its place
# among the record's keys (-1 for UNIQ_KEY, which goes first; then KEYS tokens).
ENTRY_DTYPE = np.dtype(
    [
        ("key_hash", "<i8"),
        ("offset", "<i8"),
        ("store_timestamp", "<i8"),
        ("record", "<i8"),
        ("order", "<i8"),
    ]
)
_UNIQ = b"\x02" + props.UNIQ_KEY.encode() + b"\x01"
_KEYS = b"\x02" + props.KEYS.encode() + b"\x01"
_TAGS = b"\x02" + props.TAGS.encode() + b"\x01"
_DELAY = b"\x02" + props.DELAY.encode() + b"\x01"


@dataclass
class DispatchFacts:
    """tagsCode per record, and the index entries in put order (record, then order)."""

    tags_codes: npt.NDArray[np.int64]
    entries: npt.NDArray[np.void]  # ENTRY_DTYPE

    def records_after_last_key(self, count: int) -> int:
        """Records of the run after the last one with index entries (all if none)."""
        if not len(self.entries):
            return count
        return count - 1 - int(self.entries["record"][-1])


def property_value(data: bytes, marker: bytes) -> bytes | None:
    """The value of a property in ``b"\\x02" + properties``, as RocketMQ's decoder keeps it:
    the last well-formed ``name\\x01value`` segment wins; an empty value is no value."""
    high = len(data)
    while True:
        at = data.rfind(marker, 0, high)
        if at < 0:
            return None
        begin = at + len(marker)
        finish = data.find(b"\x02", begin)
        if finish < 0:
            finish = len(data)
        if finish > begin:
            return data[begin:finish]
        high = at + len(marker) - 1


def _text(value: bytes) -> str:
    # The dispatcher decodes the whole properties string with replacement; 0x01 and 0x02
    # are never swallowed by a replacement, so decoding one value gives the same text.
    return value.decode("utf-8", errors="replace")


def delayed_tags_code(
    value: bytes | None, store_timestamp: int, levels_ms: Sequence[int]
) -> int | None:
    """tagsCode of a SCHEDULE_TOPIC record with a DELAY value: its delivery time (spec
    3.2); None when the level is not a positive number (TAGS decides then)."""
    if value is None:
        return None
    try:
        level = min(int(_text(value)), len(levels_ms))
    except ValueError:
        return None
    if level <= 0:
        return None
    # computeDeliverTimestamp adds in Java longs: a store time no put could give (a flipped
    # bit: the CRC covers only the body) wraps there, and must not stop the dispatcher here.
    return wrap_java_long(store_timestamp + levels_ms[level - 1])


def record_facts(
    data: bytes, topic: str, sys_flag: int, store_timestamp: int, levels_ms: Sequence[int]
) -> tuple[int, list[str]]:
    """tagsCode and ``topic#key`` index keys (in put order) of one record, from
    ``b"\\x02" + properties``: the dispatcher's rules, one record at a time."""
    code: int | None = None
    if topic == SCHEDULE_TOPIC:
        code = delayed_tags_code(property_value(data, _DELAY), store_timestamp, levels_ms)
    if code is None:
        tags = property_value(data, _TAGS)
        code = tags_code(_text(tags)) if tags else 0
    if not sysflag.gets_index_entry(sys_flag):
        return code, []
    texts: list[str] = []
    uniq = property_value(data, _UNIQ)
    if uniq:
        texts.append(f"{topic}#{_text(uniq)}")
    keys = property_value(data, _KEYS)
    if keys:
        texts.extend(f"{topic}#{k}" for k in props.split_keys(_text(keys)))
    return code, texts


def dispatch_facts(
    buf: bytes | memoryview,
    records: Records,
    topics: TopicTable,
    levels_ms: Sequence[int],
    *,
    index: bool,
) -> DispatchFacts:
    """tagsCodes of every record of ``records`` (all in ``buf``) and, with ``index``, the
    index entries of every record not rolled back, in dispatch order. Vectorised in chunks
    of GATHER_RECORDS; the few records it does not cover go one by one."""
    if native.dispatch_facts is not None:
        return _dispatch_facts_native(buf, records, topics, levels_ms, index=index)
    raw = np.frombuffer(buf, dtype=np.uint8)
    count = len(records)
    codes = np.zeros(count, dtype=np.int64)
    parts: list[npt.NDArray[np.void]] = []
    schedule = topics.ids.get(SCHEDULE_TOPIC.encode(), -1)
    prefixes = topics.prefix_hashes()
    transaction = records.sys_flag & sysflag.TRANSACTION_MASK
    rollback = transaction == sysflag.TRANSACTION_ROLLBACK_TYPE
    for first in range(0, count, GATHER_RECORDS):
        last = min(count, first + GATHER_RECORDS)
        chunk = slice(first, last)
        data, block_start = bulk.gather(
            raw, records.properties_position[chunk], records.properties_length[chunk]
        )
        slow = np.maximum.reduceat(data, block_start) >= 0x80
        slow |= records.topic_id[chunk] == schedule
        found = bulk.segments(data, block_start)
        tags = bulk.find_last(data, found, b"TAGS", last - first)
        has = (tags >= 0) & ~slow
        picked = tags[has]
        codes[first:last][has] = bulk.to_signed(
            bulk.hash_spans(data, found.value_start[picked], found.value_length[picked])
        )
        if index:
            parts.append(_entries_bulk(data, found, records, chunk, slow, rollback, prefixes))
        for i in np.flatnonzero(slow).tolist():
            code, rows = _one_slowly(buf, records, first + i, topics, levels_ms)
            codes[first + i] = code
            if index and rows is not None:
                parts.append(rows)
    return _joined(codes, parts)


def _joined(codes: npt.NDArray[np.int64], parts: list[npt.NDArray[np.void]]) -> DispatchFacts:
    """The facts from index entry parts (each in put order), merged into put order."""
    if not parts:
        return DispatchFacts(codes, np.empty(0, dtype=ENTRY_DTYPE))
    # Callers may shift the offsets in place: a lone part is the caller's own array.
    entries = parts[0] if len(parts) == 1 else np.concatenate(parts)
    if len(parts) > 1:
        entries = entries[np.lexsort((entries["order"], entries["record"]))]
    return DispatchFacts(codes, entries)


def _dispatch_facts_native(
    buf: bytes | memoryview,
    records: Records,
    topics: TopicTable,
    levels_ms: Sequence[int],
    *,
    index: bool,
) -> DispatchFacts:
    """``dispatch_facts`` with the per-record work in C; the records it leaves (non-ASCII
    properties, SCHEDULE_TOPIC) go one by one as in the numpy path."""
    assert native.dispatch_facts is not None
    count = len(records)
    codes = np.empty(count, dtype=np.int64)
    slow = np.empty(count, dtype=np.uint8)
    columns = [
        np.ascontiguousarray(column, dtype=np.int64)
        for column in (
            records.properties_position,
            records.properties_length,
            records.topic_id,
            records.sys_flag,
            records.position,
            records.store_timestamp,
        )
    ]
    schedule = topics.ids.get(SCHEDULE_TOPIC.encode(), -1)
    prefixes = np.ascontiguousarray(topics.prefix_hashes(), dtype=np.uint64)
    # Room for a UNIQ_KEY and one key per record, the usual case; C says when it needs more.
    entries = np.empty(2 * count if index else 0, dtype=ENTRY_DTYPE)
    needed = native.dispatch_facts(buf, columns, prefixes, schedule, index, codes, slow, entries)
    if needed > len(entries):
        entries = np.empty(needed, dtype=ENTRY_DTYPE)
        native.dispatch_facts(buf, columns, prefixes, schedule, index, codes, slow, entries)
    parts = [entries[:needed]] if index else []
    for i in np.flatnonzero(slow).tolist():
        code, rows = _one_slowly(buf, records, i, topics, levels_ms)
        codes[i] = code
        if index and rows is not None:
            parts.append(rows)
    return _joined(codes, parts)


def _entry_rows(
    records: Records,
    owners: npt.NDArray[np.int64],
    order: npt.NDArray[np.int64],
    hashes: npt.NDArray[np.int64],
) -> npt.NDArray[np.void]:
    rows = np.empty(len(owners), dtype=ENTRY_DTYPE)
    rows["key_hash"] = hashes
    rows["offset"] = records.position[owners]
    rows["store_timestamp"] = records.store_timestamp[owners]
    rows["record"] = owners
    rows["order"] = order
    return rows


def _entries_bulk(
    data: npt.NDArray[np.uint8],
    found: bulk.Segments,
    records: Records,
    chunk: slice,
    slow: npt.NDArray[np.bool_],
    rollback: npt.NDArray[np.bool_],
    prefixes: npt.NDArray[np.uint64],
) -> npt.NDArray[np.void]:
    """``topic#UNIQ_KEY`` (order -1, first) and each KEYS token (ordered by position) of the
    chunk's records; ROLLBACK records get none (spec 4.4)."""
    size = len(slow)
    first = chunk.start or 0
    eligible = ~slow & ~rollback[chunk]
    uniq = bulk.find_last(data, found, b"UNIQ_KEY", size)
    keys = bulk.find_last(data, found, b"KEYS", size)
    with_uniq = np.flatnonzero(eligible & (uniq >= 0))
    u = uniq[with_uniq]
    u_hash = bulk.hash_spans(data, found.value_start[u], found.value_length[u])
    with_keys = np.flatnonzero(eligible & (keys >= 0))
    k = keys[with_keys]
    tokens = bulk.key_tokens(data, with_keys, found.value_start[k], found.value_length[k])
    owners = np.concatenate((with_uniq, tokens.owner)) + first
    value_hash = np.concatenate((u_hash, tokens.value_hash))
    length = np.concatenate((found.value_length[u], tokens.length))
    order = np.concatenate((np.full(len(u), -1, dtype=np.int64), tokens.order))
    prefix = prefixes[records.topic_id[owners]] if len(owners) else np.zeros(0, np.uint64)
    hashes = bulk.index_hash(bulk.combine(prefix, value_hash, length))
    rows = _entry_rows(records, owners, order, hashes)
    # UNIQ_KEY entries come first in the concatenation: sort into (record, order).
    return rows[np.lexsort((rows["order"], rows["record"]))]


def _one_slowly(
    buf: bytes | memoryview,
    records: Records,
    i: int,
    topics: TopicTable,
    levels_ms: Sequence[int],
) -> tuple[int, npt.NDArray[np.void] | None]:
    start = int(records.properties_position[i])
    data = b"\x02" + bytes(buf[start : start + int(records.properties_length[i])])
    topic = topics.names[int(records.topic_id[i])]
    code, texts = record_facts(
        data, topic, int(records.sys_flag[i]), int(records.store_timestamp[i]), levels_ms
    )
    if not texts:
        return code, None
    owners = np.full(len(texts), i, dtype=np.int64)
    order = np.arange(len(texts), dtype=np.int64)
    return code, _entry_rows(records, owners, order, index_key_hash_many(texts))
