"""TAGS, UNIQ_KEY and KEYS of many records at once, with numpy: tagsCodes and index key
hashes without a Python loop over records.

Layer: format. Pure functions over the bytes of a CommitLog file. The properties of every
record are gathered into one array, each prefixed with a 0x02 so that every property
segment starts after a 0x02. Then, exactly as RocketMQ's ``string2messageProperties``
(and :func:`rocketstore.format.properties.decode_properties_str`): a segment's name runs to
its first 0x01, its value to the next 0x02; a segment with an empty name or value is
dropped, and for a name that occurs twice the last segment wins.

Java's ``String.hashCode`` counts UTF-16 units, which are the bytes only for ASCII; a record
with any byte >= 0x80 in its properties is reported in ``fallback`` for the caller to
handle one by one (as are the records the caller excludes, e.g. delayed messages, whose
tagsCode is a delivery time).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rocketstore.format.javahash import java_string_hash

_MASK = np.uint64(0xFFFFFFFF)
_SEGMENT = 0x02
_NAME_END = 0x01
_SPACE = 0x20
_POW31: list[npt.NDArray[np.uint64]] = [np.ones(1, dtype=np.uint64)]


def powers_of_31(n: int) -> npt.NDArray[np.uint64]:
    """31**k mod 2**32 for k in [0, n), as uint64 (products stay exact before masking)."""
    cached = _POW31[0]
    if len(cached) >= n:
        return cached[:n]
    out = np.empty(max(n, 2 * len(cached)), dtype=np.uint64)
    acc = 1
    for k in range(len(out)):
        out[k] = acc
        acc = (acc * 31) & 0xFFFFFFFF
    _POW31[0] = out
    return out[:n]


def hash_spans(
    data: npt.NDArray[np.uint8], starts: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64]
) -> npt.NDArray[np.uint64]:
    """Java's String.hashCode (mod 2**32, unsigned) of the ASCII spans ``data[s:s+l]``.

    Spans are grouped by length (keys of one kind mostly share it): each group is one
    (spans x length) matrix times the powers of 31, summed per row; a sum of at most
    32767 products below 2**40 cannot overflow 64 bits."""
    out = np.zeros(len(starts), dtype=np.uint64)
    if not len(starts):
        return out
    for length in np.unique(lengths).tolist():
        if length <= 0:
            continue
        rows = np.flatnonzero(lengths == length)
        matrix = data[starts[rows][:, None] + np.arange(length, dtype=np.int64)]
        weights = powers_of_31(length)[::-1]
        out[rows] = (matrix.astype(np.uint64) * weights).sum(axis=1, dtype=np.uint64) & _MASK
    return out


def combine(
    prefix_hash: npt.NDArray[np.uint64],
    value_hash: npt.NDArray[np.uint64],
    value_length: npt.NDArray[np.int64],
) -> npt.NDArray[np.uint64]:
    """hash(prefix + value) from the two hashes: h(p) * 31**len(v) + h(v), mod 2**32."""
    scale = powers_of_31(int(value_length.max()) + 1 if len(value_length) else 1)[value_length]
    return ((prefix_hash * scale) & _MASK) + value_hash & _MASK


def to_signed(h: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
    signed = h.astype(np.int64)
    signed[signed >= 2**31] -= 2**32
    return signed


def index_hash(h: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
    """The IndexFile key hash: abs(hashCode), Integer.MIN_VALUE -> 0 (spec 4.2)."""
    signed = to_signed(h)
    out = np.abs(signed)
    out[signed == -(2**31)] = 0
    return out


@dataclass
class Segments:
    """Well-formed property segments of a batch of records (the last per name kept)."""

    owner: npt.NDArray[np.int64]  # record number
    name_start: npt.NDArray[np.int64]
    name_length: npt.NDArray[np.int64]
    value_start: npt.NDArray[np.int64]
    value_length: npt.NDArray[np.int64]


def gather(
    raw: npt.NDArray[np.uint8], position: npt.NDArray[np.int64], length: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
    """All records' properties in one (read-only) array, each after a 0x02; returns it and
    where each record's block starts.

    The blocks are joined by ``bytes.join`` over memoryview slices: one C copy per record,
    five times faster than a numpy gather through per-byte index arrays."""
    block = length + 1
    block_start = np.cumsum(block) - block
    source = raw.data  # a memoryview of the bytes: slices copy nothing
    ends = position + length
    joined = b"\x02" + b"\x02".join(
        [source[a:b] for a, b in zip(position.tolist(), ends.tolist(), strict=True)]
    )
    return np.frombuffer(joined, dtype=np.uint8), block_start


def segments(data: npt.NDArray[np.uint8], block_start: npt.NDArray[np.int64]) -> Segments:
    starts = np.flatnonzero(data == _SEGMENT)
    ends = np.append(starts[1:], len(data))
    ones = np.flatnonzero(data == _NAME_END)
    if len(ones):
        at = np.searchsorted(ones, starts, side="left")
        separator = np.where(at < len(ones), ones[np.minimum(at, len(ones) - 1)], len(data))
    else:
        separator = np.full(len(starts), len(data), dtype=np.int64)
    name_length = separator - starts - 1
    value_length = ends - separator - 1
    ok = (separator < ends) & (name_length >= 1) & (value_length >= 1)
    owner = np.searchsorted(block_start, starts, side="right") - 1
    return Segments(owner[ok], starts[ok] + 1, name_length[ok], separator[ok] + 1, value_length[ok])


def find_last(
    data: npt.NDArray[np.uint8], found: Segments, name: bytes, records: int
) -> npt.NDArray[np.int64]:
    """Per record, the index (into ``found``) of the last segment named ``name``; -1 if
    none."""
    last = np.full(records, -1, dtype=np.int64)
    candidates = np.flatnonzero(found.name_length == len(name))
    if not len(candidates):
        return last
    letters = data[found.name_start[candidates][:, None] + np.arange(len(name))]
    match = candidates[np.all(letters == np.frombuffer(name, dtype=np.uint8), axis=1)]
    np.maximum.at(last, found.owner[match], match)
    return last


@dataclass
class KeyTokens:
    """Index key material: for each token, its record, a sort key within the record, and
    the hash of the token alone with its length (to be combined with ``topic#``)."""

    owner: npt.NDArray[np.int64]
    order: npt.NDArray[np.int64]
    value_hash: npt.NDArray[np.uint64]
    length: npt.NDArray[np.int64]


def key_tokens(
    data: npt.NDArray[np.uint8],
    owner: npt.NDArray[np.int64],
    value_start: npt.NDArray[np.int64],
    value_length: npt.NDArray[np.int64],
) -> KeyTokens:
    """Split KEYS values on spaces (empty tokens dropped, as ``split_keys``)."""
    value_end = value_start + value_length
    spaces = np.flatnonzero(data == _SPACE)
    span = np.searchsorted(value_start, spaces, side="right") - 1
    inside = span >= 0
    inside[inside] &= spaces[inside] < value_end[span[inside]]
    spaces, span = spaces[inside], span[inside]
    # Token boundaries: each value's start - 1, its spaces and its end, sorted.
    bounds = np.concatenate((value_start - 1, spaces, value_end))
    span_of = np.concatenate((np.arange(len(value_start)), span, np.arange(len(value_start))))
    is_end = np.concatenate(
        (np.zeros(len(value_start) + len(spaces), bool), np.ones(len(value_start), bool))
    )
    order = np.argsort(bounds, kind="stable")
    bounds, span_of, is_end = bounds[order], span_of[order], is_end[order]
    token_start = bounds[:-1] + 1
    token_length = bounds[1:] - bounds[:-1] - 1
    keep = ~is_end[:-1] & (token_length >= 1)
    token_start, token_length = token_start[keep], token_length[keep]
    spans = span_of[:-1][keep]
    return KeyTokens(
        owner[spans], token_start, hash_spans(data, token_start, token_length), token_length
    )


def prefix_hashes(names: list[str]) -> npt.NDArray[np.uint64]:
    """hash(topic + "#") per topic id (topics may be any Unicode: hashed by Java's rules)."""
    return np.array([java_string_hash(n + "#") & 0xFFFFFFFF for n in names], dtype=np.uint64)
