"""Java's hashing rules that RocketMQ's files depend on (pure functions).

* ``java_string_hash``: ``String.hashCode`` over UTF-16 code units (surrogate pairs count as
  two units), wrapping at 32 bits, signed.
* ``index_key_hash``: the IndexFile's ``abs(hashCode)`` with Integer.MIN_VALUE mapped to 0.
* ``tags_code``: the ConsumeQueue tagsCode, the hash sign-extended to a long (0 for no tags).
* ``java_hashmap_order``: the iteration order of a ``java.util.HashMap`` (what decides the
  order of properties a 4.9 broker writes).

Vectorised variants work on numpy arrays for batches.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from rocketstore.format import native

_MASK32 = 0xFFFFFFFF
_INT_MIN = -(2**31)


def _to_signed32(value: int) -> int:
    value &= _MASK32
    return value - 0x1_0000_0000 if value & 0x8000_0000 else value


def utf16_units(text: str) -> list[int]:
    """The UTF-16 code units Java sees for ``text`` (astral characters become two units)."""
    if text.isascii():
        return [ord(c) for c in text]
    raw = text.encode("utf-16-be", "surrogatepass")
    return [(raw[i] << 8) | raw[i + 1] for i in range(0, len(raw), 2)]


def java_string_hash(text: str) -> int:
    """``String.hashCode()``: h = sum(c[i] * 31**(n-1-i)) mod 2**32, as a signed int."""
    if native.java_hash is not None:
        found: int = native.java_hash(text)
        return found
    h = 0
    for unit in utf16_units(text):
        h = (31 * h + unit) & _MASK32
    return _to_signed32(h)


def index_key_hash(key: str) -> int:
    """IndexFile key hash: ``abs(hashCode)``; MIN_VALUE stays negative in Java, so it is 0."""
    h = java_string_hash(key)
    if h == _INT_MIN:
        return 0
    return abs(h)


@functools.lru_cache(maxsize=4096)
def tags_code(tags: str | None) -> int:
    """ConsumeQueue tagsCode of a TAGS value: the whole string's hash, sign-extended."""
    if not tags:
        return 0
    return java_string_hash(tags)


# --- vectorised ---------------------------------------------------------------------------

_POW_CACHE: list[npt.NDArray[np.uint32]] = [np.ones(1, dtype=np.uint32)]


def _powers_of_31(n: int) -> npt.NDArray[np.uint32]:
    """31**k mod 2**32 for k in [0, n)."""
    cached = _POW_CACHE[0]
    if len(cached) >= n:
        return cached[:n]
    size = max(n, 2 * len(cached))
    out = np.empty(size, dtype=np.uint32)
    acc = 1
    for k in range(size):
        out[k] = acc
        acc = (acc * 31) & _MASK32
    _POW_CACHE[0] = out
    return out[:n]


def java_string_hash_many(texts: Sequence[str]) -> npt.NDArray[np.int32]:
    """``java_string_hash`` for many strings at once (numpy, wrapping uint32 arithmetic)."""
    count = len(texts)
    result = np.zeros(count, dtype=np.uint32)
    if count == 0:
        return result.view(np.int32)
    joined = "".join(texts)
    # One encode for the whole batch; lengths in UTF-16 units (astral chars count twice).
    units = np.frombuffer(joined.encode("utf-16-be", "surrogatepass"), dtype=">u2").astype(
        np.uint32
    )
    if joined.isascii():
        lengths = np.fromiter((len(t) for t in texts), dtype=np.int64, count=count)
    else:
        lengths = np.fromiter(
            (len(t.encode("utf-16-be", "surrogatepass")) // 2 for t in texts),
            dtype=np.int64,
            count=count,
        )
    total = len(units)
    if total == 0:
        return result.view(np.int32)
    # Weight of unit i of a string of length n is 31**(n-1-i).
    ends = np.cumsum(lengths)
    starts = ends - lengths
    owner = np.repeat(np.arange(count), lengths)
    position = np.arange(total, dtype=np.int64) - starts[owner]
    exponent = lengths[owner] - 1 - position
    weights = _powers_of_31(int(lengths.max()))[exponent]
    products = units * weights  # uint32 multiply wraps mod 2**32
    nonempty = lengths > 0
    sums = np.add.reduceat(products, starts[nonempty], dtype=np.uint32)
    result[nonempty] = sums
    return result.view(np.int32)


def index_key_hash_many(keys: Sequence[str]) -> npt.NDArray[np.int64]:
    hashes = java_string_hash_many(keys).astype(np.int64)
    out = np.abs(hashes)
    out[hashes == _INT_MIN] = 0
    return out


def tags_code_many(tags: Sequence[str | None]) -> npt.NDArray[np.int64]:
    texts = [t or "" for t in tags]
    return java_string_hash_many(texts).astype(np.int64)


# --- java.util.HashMap iteration order ------------------------------------------------------


def _table_size_for(capacity: int) -> int:
    n = 1
    while n < capacity:
        n <<= 1
    return max(n, 1)


def hashmap_capacity(peak_size: int, initial_capacity: int = 16) -> int:
    """Table length of a HashMap(initial_capacity) that once held ``peak_size`` entries.

    The table doubles when size exceeds 0.75 * capacity and never shrinks.
    """
    cap = _table_size_for(initial_capacity)
    while peak_size > cap * 3 // 4:
        cap <<= 1
    return cap


def concurrent_hashmap_capacity(size: int, initial_capacity: int = 16) -> int:
    """Table length of a ``ConcurrentHashMap()`` after ``size`` puts: unlike HashMap it
    doubles as soon as the count reaches 0.75 * capacity (12 entries need 32 slots)."""
    cap = _table_size_for(initial_capacity)
    while size >= cap - (cap >> 2):
        cap <<= 1
    return cap


def iteration_order(keys: Sequence[str], capacity: int) -> list[str]:
    """The order a hash table of ``capacity`` slots iterates ``keys`` put in this order:
    by bucket, ties in insertion order."""
    return [
        keys[i]
        for i in sorted(range(len(keys)), key=lambda i: (hashmap_bucket(keys[i], capacity), i))
    ]


def hashmap_bucket(key: str, capacity: int) -> int:
    return hash_code_bucket(java_string_hash(key), capacity)


def hash_code_bucket(hash_code: int, capacity: int) -> int:
    """The bucket of a key with this ``hashCode()`` in a HashMap table of ``capacity``."""
    h = hash_code & _MASK32
    return (h ^ (h >> 16)) & (capacity - 1)


def message_queue_hash(topic: str, broker_name: str, queue_id: int) -> int:
    """``MessageQueue.hashCode()`` (4.x and 5.x alike): brokerName, queueId, topic folded
    by 31 from 1."""
    result = 31 + java_string_hash(broker_name)
    result = 31 * result + queue_id
    result = 31 * result + java_string_hash(topic)
    return _to_signed32(result)


def java_hash_set_order(hash_codes: Sequence[int], peak_size: int | None = None) -> list[int]:
    """The positions of keys with these hash codes, put into a ``java.util.HashSet`` (or
    HashMap) in this order, in its iteration order (see java_hashmap_order)."""
    cap = hashmap_capacity(max(peak_size or 0, len(hash_codes)))
    return sorted(range(len(hash_codes)), key=lambda i: (hash_code_bucket(hash_codes[i], cap), i))


def java_hashmap_order(
    keys: Iterable[str], initial_capacity: int = 16, peak_size: int | None = None
) -> list[str]:
    """Iteration order of a ``java.util.HashMap`` into which ``keys`` were put in this order.

    Order is by ascending bucket ``(h ^ (h >>> 16)) & (cap - 1)``, ties in insertion order
    (resizes keep relative order within a bucket). ``peak_size`` is the most entries the map
    ever held (default: the number of keys), which fixes the table size. Treeified bins
    (8+ keys in one bucket of a 64+ table) are not modelled: property maps never get there.
    """
    return list(_hashmap_order(tuple(keys), initial_capacity, peak_size))


@functools.lru_cache(maxsize=256)
def _hashmap_order(
    keys: tuple[str, ...], initial_capacity: int, peak_size: int | None
) -> tuple[str, ...]:
    """java_hashmap_order, remembered: a broker orders the same few property names on
    every send (UNIQ_KEY, KEYS, TAGS, WAIT, CLUSTER), a fifth of a send's handling."""
    ordered = list(dict.fromkeys(keys))
    cap = hashmap_capacity(max(peak_size or 0, len(ordered)), initial_capacity)
    decorated = sorted(enumerate(ordered), key=lambda item: (hashmap_bucket(item[1], cap), item[0]))
    return tuple(key for _, key in decorated)


def java_hashmap_ordered(
    values: Mapping[str, str], keys: Sequence[str] | None = None, peak_size: int | None = None
) -> dict[str, str]:
    """``values`` as a ``java.util.HashMap`` iterates them, the keys put in the order of
    ``keys`` (default: ``values``' own order); ``peak_size`` as for java_hashmap_order."""
    order = java_hashmap_order(list(values) if keys is None else keys, peak_size=peak_size)
    return {key: values[key] for key in order}
