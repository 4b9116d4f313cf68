"""An index file's geometry (hash slots, entries) read off its bytes (pure).

A file's size is 40 + 4 * slots + 20 * entries: one equation, two unknowns. RocketMQ's
default geometry has four entries per slot, and brokers configured otherwise
(``maxHashSlotNum``, ``maxIndexNum``) write files whose size alone does not say where
the entries begin. Their entries do:

* numbering starts at 1, so the 20 bytes of entry 0 are never written: zeros;
* a slot holds the number of the newest entry of its chain, so every slot value is at
  most the number of entries the file can hold (a bound the size sets, whatever the
  geometry: slots may name entries written after the header's indexCount, which a crash
  leaves behind), while entry 1's first word is a key hash (up to 2^31 - 1). The first
  word past the header above that bound is, but for a rare small hash, entry 1's hash,
  20 bytes after the entries' start;
* an entry's chain agrees with the slots: its hash modulo the slot count names a slot
  whose newest entry is at or after it, and its previous entry, if any, is older and
  hashes to the same slot. Under the true slot count all entries agree but damaged ones;
  under another, almost none do.

``infer_geometry`` tries the few slot counts near that first word which also fit the
size, and keeps the first under which entry 0 is zeros and nine in ten of the first and
last ``SAMPLE`` entries agree.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from rocketstore.format.buffers import ReadableBuffer
from rocketstore.format.index_layout import ENTRY_SIZE, HEADER_SIZE, SLOT_SIZE, decode_header
from rocketstore.java_ints import JAVA_INT_MAX

ENTRY = np.dtype([("hash", ">i4"), ("phy", ">i8"), ("diff", ">i4"), ("prev", ">i4")])
# Entries checked at each end of the used range.
SAMPLE = 4096
# Share of them that must agree with the geometry tried.
AGREEING = 0.9
# Words scanned per step while looking for the first word above indexCount.
_SCAN_WORDS = 1 << 20
# How far before that word the entries may begin, in words: entry 1's hash may be small,
# and then its offset's low word, or a later entry's hash, is the first one found.
_BACKTRACK_WORDS = 40


def infer_geometry(buf: ReadableBuffer) -> tuple[int, int] | None:
    """(hash_slot_num, index_num) of the index file whose bytes are ``buf``, or None
    when its entries do not settle it (no entries yet, or not a consistent file)."""
    size = len(memoryview(buf))
    body = size - HEADER_SIZE
    # RocketMQ computes an index file's size as a Java int: no larger file is one of its
    # (and scanning a huge sparse file for its first entry would take minutes).
    if body < SLOT_SIZE + 2 * ENTRY_SIZE or body % SLOT_SIZE or size > JAVA_INT_MAX:
        return None
    count = decode_header(buf).index_count
    if count <= 1:
        return None
    # No slot value can exceed the entries of a file with a single slot.
    most_entries = (body - SLOT_SIZE) // ENTRY_SIZE
    first = _first_word_above(buf, most_entries, body // SLOT_SIZE)
    if first is None:
        return None
    # Entry 1 begins 20 bytes (5 words) after the entries, so slots <= first - 5.
    for slots in range(first - ENTRY_SIZE // SLOT_SIZE, first - _BACKTRACK_WORDS, -1):
        if slots < 1:
            break
        rest = body - slots * SLOT_SIZE
        if rest % ENTRY_SIZE:
            continue
        entries = rest // ENTRY_SIZE
        if count <= entries and _consistent(buf, slots, entries, count):
            return slots, entries
    return None


def _first_word_above(buf: ReadableBuffer, bound: int, words: int) -> int | None:
    """Index (in 4-byte words after the header) of the first word above ``bound``."""
    for start in range(0, words, _SCAN_WORDS):
        chunk = np.frombuffer(
            buf, dtype=">u4", count=min(_SCAN_WORDS, words - start), offset=HEADER_SIZE + 4 * start
        )
        found = np.flatnonzero(chunk > bound)
        if len(found):
            return start + int(found[0])
    return None


def _consistent(buf: ReadableBuffer, slots: int, entries: int, count: int) -> bool:
    """Whether the entries 0..count-1, taken to begin after ``slots`` slots (of a file
    of ``entries`` entries), read as RocketMQ writes them: entry 0 all zeros, and at
    least ``AGREEING`` of the sampled entries agreeing with their chain and slot (a
    damaged entry or two must not hide the geometry from ``check``, which reports them;
    under a wrong slot count almost none agree)."""
    table = np.frombuffer(buf, dtype=ENTRY, count=count, offset=HEADER_SIZE + slots * SLOT_SIZE)
    if table[0].tobytes() != bytes(ENTRY_SIZE):
        return False
    numbers = _sample(count)
    sampled = table[numbers]
    hashes = sampled["hash"].astype(np.int64)
    previous = sampled["prev"].astype(np.int64)
    slot_of = hashes % slots
    agree = (hashes >= 0) & (previous >= 0) & (previous < numbers)
    linked = agree & (previous > 0)
    prev_hashes = table["hash"][previous[linked]].astype(np.int64)
    agree[linked] &= (prev_hashes >= 0) & (prev_hashes % slots == slot_of[linked])
    slot_values = np.frombuffer(buf, dtype=">i4", count=slots, offset=HEADER_SIZE)
    newest = slot_values[slot_of].astype(np.int64)
    # A crash may leave slots naming entries written before the count moved.
    agree &= (newest >= numbers) & (newest < entries)
    return bool(agree.mean() >= AGREEING)


def _sample(count: int) -> npt.NDArray[np.int64]:
    """Entry numbers 1..count-1, or the first and last SAMPLE of them."""
    if count - 1 <= 2 * SAMPLE:
        return np.arange(1, count, dtype=np.int64)
    return np.concatenate(
        [np.arange(1, SAMPLE + 1, dtype=np.int64), np.arange(count - SAMPLE, count, dtype=np.int64)]
    )
