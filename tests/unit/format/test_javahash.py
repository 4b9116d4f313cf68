"""Java hashing rules: String.hashCode, the index key hash, tagsCode and HashMap order.

Expected values are spec Appendix A vectors (JDK 17) unless a comment says otherwise.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketstore.format.javahash import (
    concurrent_hashmap_capacity,
    hashmap_bucket,
    hashmap_capacity,
    index_key_hash,
    index_key_hash_many,
    iteration_order,
    java_hash_set_order,
    java_hashmap_order,
    java_hashmap_ordered,
    java_string_hash,
    java_string_hash_many,
    message_queue_hash,
    tags_code,
    tags_code_many,
    utf16_units,
)

INT_MIN = -(2**31)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("TAG1", 2_567_159),
        ("TagA", 2_598_919),
        ("60", 1_722),
        ("Aa", 2_112),
        ("BB", 2_112),
        ("AaTopic#BB", -10_606_476),
        ("BBTopic#Aa", -10_606_476),
        ("AaTopic#Aa", -10_606_476),
        ("BBTopic#BB", -10_606_476),
        ("polygenelubricants", INT_MIN),
        ("FooBar#Hello", -101_609_924),
        ("", 0),
        # Not in Appendix A; computed with JDK 17 String.hashCode while writing these tests.
        ("TagB", 2_598_920),
        ("KEYS", 2_303_476),
        ("UNIQ_KEY", 488_471_169),
        ("CLUSTER", 1_590_074_842),
        ("WAIT", 2_656_629),
        ("TAGS", 2_567_193),
        ("héllo", 103_094_734),
        ("日本語", 25_921_943),
        ("a\U0001f600b", 57_849_694),
        ("abc#key 1", -1_460_188_337),
    ],
)
def test_java_string_hash_vectors(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def test_java_string_hash_small_strings_by_formula() -> None:
    # h = c0 * 31 + c1 for two characters.
    assert java_string_hash("60") == ord("6") * 31 + ord("0")
    assert java_string_hash("A") == 65


def test_surrogate_pair_hashes_as_two_utf16_units() -> None:
    # U+1F600 is the UTF-16 pair D83D DE00; Java hashes both units: h = 0xD83D * 31 + 0xDE00.
    assert utf16_units("\U0001f600") == [0xD83D, 0xDE00]
    expected = 0xD83D * 31 + 0xDE00
    assert expected == 1_772_899  # also what JDK 17 prints for "😀".hashCode()
    assert java_string_hash("\U0001f600") == expected


def test_astral_character_is_not_hashed_as_its_code_point() -> None:
    assert java_string_hash("\U0001f600") != 0x1F600


def test_utf16_units() -> None:
    assert utf16_units("") == []
    assert utf16_units("Ab") == [0x41, 0x62]
    assert utf16_units("é") == [0xE9]
    assert utf16_units("a\U0001f600") == [0x61, 0xD83D, 0xDE00]
    # A lone surrogate is one unit, as in a Java String.
    assert utf16_units("\ud83d") == [0xD83D]


def test_hash_wraps_to_signed_32_bits() -> None:
    long_text = "x" * 1000
    h = java_string_hash(long_text)
    assert INT_MIN <= h < 2**31


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("AaTopic#BB", 10_606_476),
        ("BBTopic#Aa", 10_606_476),
        ("FooBar#Hello", 101_609_924),
        ("60", 1_722),
        # hashCode == Integer.MIN_VALUE: Math.abs stays negative, RocketMQ maps it to 0.
        ("polygenelubricants", 0),
    ],
)
def test_index_key_hash(key: str, expected: int) -> None:
    assert index_key_hash(key) == expected


def test_index_key_hash_default_slots() -> None:
    slots = 5_000_000
    assert index_key_hash("AaTopic#BB") % slots == 606_476
    assert index_key_hash("FooBar#Hello") % slots == 1_609_924
    assert index_key_hash("polygenelubricants") % slots == 0


def test_tags_code_is_the_signed_hash() -> None:
    assert tags_code("TAG1") == 2_567_159
    assert tags_code("TagA") == 2_598_919
    # Negative hashes stay negative (sign-extended into the CQ's long).
    assert tags_code("AaTopic#BB") == -10_606_476
    # The whole TAGS value is hashed, not each tag.
    assert tags_code("TagA||TagB") == java_string_hash("TagA||TagB")


@pytest.mark.parametrize("tags", [None, ""])
def test_tags_code_without_tags_is_zero(tags: str | None) -> None:
    assert tags_code(tags) == 0


# --- vectorised -------------------------------------------------------------------------

MIXED = [
    "",
    "TAG1",
    "",
    "polygenelubricants",
    "\U0001f600",
    "a\U0001f600b",
    "日本語",
    "AaTopic#BB",
    "x" * 300,
    "",
]


def test_java_string_hash_many_equals_scalar() -> None:
    got = java_string_hash_many(MIXED)
    assert got.dtype == np.int32
    assert got.tolist() == [java_string_hash(t) for t in MIXED]


def test_java_string_hash_many_edge_inputs() -> None:
    assert java_string_hash_many([]).tolist() == []
    assert java_string_hash_many(["", ""]).tolist() == [0, 0]
    assert java_string_hash_many(["TAG1"]).tolist() == [2_567_159]


def test_java_string_hash_many_grows_power_cache() -> None:
    # A longer string than any before forces the cached powers of 31 to grow.
    texts = ["y" * 5000, "ab"]
    assert java_string_hash_many(texts).tolist() == [java_string_hash(t) for t in texts]


def test_index_key_hash_many_equals_scalar() -> None:
    got = index_key_hash_many(MIXED)
    assert got.dtype == np.int64
    assert got.tolist() == [index_key_hash(t) for t in MIXED]
    assert index_key_hash_many(["polygenelubricants"]).tolist() == [0]


def test_tags_code_many_equals_scalar() -> None:
    tags = [None, "", "TAG1", "AaTopic#BB", "\U0001f600"]
    got = tags_code_many(tags)
    assert got.dtype == np.int64
    assert got.tolist() == [tags_code(t) for t in tags]


# --- java.util.HashMap iteration order ---------------------------------------------------


def test_hashmap_order_appendix_a_example() -> None:
    assert java_hashmap_order(["TAGS", "KEYS", "WAIT", "UNIQ_KEY"]) == [
        "KEYS",
        "UNIQ_KEY",
        "WAIT",
        "TAGS",
    ]


def test_hashmap_order_49_broker_flow() -> None:
    # Client string order KEYS, UNIQ_KEY, WAIT, TAGS; broker puts CLUSTER (peak size 5), then
    # removes WAIT. Removal does not move other entries.
    inserted = ["KEYS", "UNIQ_KEY", "WAIT", "TAGS", "CLUSTER"]
    order = [k for k in java_hashmap_order(inserted) if k != "WAIT"]
    assert order == ["KEYS", "UNIQ_KEY", "CLUSTER", "TAGS"]


def test_hashmap_order_capacity_128() -> None:
    inserted = ["KEYS", "UNIQ_KEY", "WAIT", "TAGS", "CLUSTER"]
    order = [k for k in java_hashmap_order(inserted, initial_capacity=128) if k != "WAIT"]
    assert order == ["UNIQ_KEY", "CLUSTER", "TAGS", "KEYS"]


def test_hashmap_order_ties_keep_insertion_order() -> None:
    # "Aa" and "BB" have the same hash, hence the same bucket at every capacity.
    assert java_hashmap_order(["BB", "Aa"]) == ["BB", "Aa"]
    assert java_hashmap_order(["Aa", "BB"]) == ["Aa", "BB"]
    # UNIQ_KEY and CLUSTER share bucket 12 of 16 (and 28 of 128).
    assert hashmap_bucket("UNIQ_KEY", 16) == hashmap_bucket("CLUSTER", 16) == 12
    assert java_hashmap_order(["CLUSTER", "UNIQ_KEY"]) == ["CLUSTER", "UNIQ_KEY"]


def test_hashmap_order_duplicate_keys_keep_first_position() -> None:
    # Re-putting an existing key keeps its node where it is.
    assert java_hashmap_order(["BB", "Aa", "BB"]) == ["BB", "Aa"]


def test_hashmap_order_peak_size_fixes_the_table() -> None:
    # 13 keys ever held -> table 32, even if fewer remain.
    keys = ["KEYS", "UNIQ_KEY", "TAGS", "CLUSTER"]
    assert java_hashmap_order(keys, peak_size=13) == sorted(
        keys, key=lambda k: (hashmap_bucket(k, 32), keys.index(k))
    )


@pytest.mark.parametrize(
    ("capacity", "inserted", "expected"),
    [
        # Recorded from JDK 17 java.util.HashMap (new HashMap<>() / new HashMap<>(cap)) with
        # random keys while writing these tests: 16 keys -> one resize from 16 to 32.
        (
            16,
            "2dHHdFPQIVe,JLU9AOdWCmpk,y9OKA2Vi,W7Rm0,Eoq,zfx_aX,IweAZ_8B1D,ebVETOQ,"
            "NlnSIqPo1dz,OpLHxw94j8%J,Z_N7TxnGbL,NNdJ,6K,tM49,Y0GJxT2mLq8,i0UGqB#jJAek",
            "NNdJ,i0UGqB#jJAek,Eoq,ebVETOQ,JLU9AOdWCmpk,tM49,Y0GJxT2mLq8,zfx_aX,W7Rm0,"
            "NlnSIqPo1dz,6K,IweAZ_8B1D,OpLHxw94j8%J,Z_N7TxnGbL,2dHHdFPQIVe,y9OKA2Vi",
        ),
        (
            4,
            "cbmH3gPOb%,Q,2UHhq,1B74QEzo",
            "Q,cbmH3gPOb%,1B74QEzo,2UHhq",
        ),
        (
            49,
            "6mRH%w4,GWj_Gk27e8,k0U,Cz0h3C47,b6QqG,Hd,OvFgRBH,H,A",
            "6mRH%w4,A,OvFgRBH,H,b6QqG,GWj_Gk27e8,k0U,Hd,Cz0h3C47",
        ),
        (
            128,
            "AdADcbzzV,t,87#%nq_ql,Z5fLZjFUHu,#,wr,Ip,1p7aXvFDon2l,j0fJf8YT,1ir,VNmNgQU2InY",
            "AdADcbzzV,1ir,#,VNmNgQU2InY,1p7aXvFDon2l,87#%nq_ql,Ip,Z5fLZjFUHu,wr,j0fJf8YT,t",
        ),
    ],
)
def test_hashmap_order_matches_recorded_jdk_order(
    capacity: int, inserted: str, expected: str
) -> None:
    assert java_hashmap_order(inserted.split(","), initial_capacity=capacity) == expected.split(",")


@pytest.mark.parametrize(
    ("peak", "initial", "expected"),
    [
        (0, 16, 16),
        (12, 16, 16),  # threshold 12: still fits
        (13, 16, 32),  # 13th put resizes
        (24, 16, 32),
        (25, 16, 64),
        (5, 128, 128),
        (97, 128, 256),
        (1, 1, 2),  # HashMap(1): threshold (int)(1 * 0.75) = 0
        (3, 4, 4),
        (4, 4, 8),
        (1, 49, 64),  # tableSizeFor(49) = 64
    ],
)
def test_hashmap_capacity(peak: int, initial: int, expected: int) -> None:
    assert hashmap_capacity(peak, initial) == expected


def test_hashmap_bucket_spreads_high_bits() -> None:
    # bucket = (h ^ (h >>> 16)) & (cap - 1) on the unsigned 32-bit hash.
    h = java_string_hash("polygenelubricants") & 0xFFFFFFFF
    assert hashmap_bucket("polygenelubricants", 16) == (h ^ (h >> 16)) & 15
    h = 2_303_476  # "KEYS"
    assert hashmap_bucket("KEYS", 16) == (h ^ (h >> 16)) & 15 == 7


@given(st.dictionaries(st.text(max_size=6), st.text(max_size=3), max_size=20), st.booleans())
def test_hashmap_ordered_is_the_map_in_hashmap_order(values: dict[str, str], reverse: bool) -> None:
    keys = list(values)[::-1] if reverse else None
    ordered = java_hashmap_ordered(values, keys)
    assert ordered == values
    assert list(ordered) == java_hashmap_order(keys if keys is not None else list(values))


def test_concurrent_hash_map_grows_one_entry_sooner_than_hash_map() -> None:
    """HashMap resizes when its size passes 0.75 * capacity, ConcurrentHashMap when its
    count reaches it: 12 entries fit 16 slots of one and need 32 of the other."""
    assert (hashmap_capacity(12), concurrent_hashmap_capacity(12)) == (16, 32)
    assert (hashmap_capacity(13), concurrent_hashmap_capacity(11)) == (32, 16)
    assert concurrent_hashmap_capacity(0, initial_capacity=2048) == 2048


@given(st.lists(st.text(max_size=6), unique=True, max_size=40))
def test_iteration_order_is_java_hashmap_order_at_the_same_capacity(keys: list[str]) -> None:
    assert iteration_order(keys, hashmap_capacity(len(keys))) == java_hashmap_order(keys)


def test_message_queue_hash_and_set_order() -> None:
    """MessageQueue.hashCode folds brokerName, queueId and topic; printMsg's queue order
    for TopicA on broker-a, as the real mqadmin printed it, is 3, 1, 2, 0."""
    h = message_queue_hash("TopicA", "broker-a", 0)
    expected = 31 * (31 * (31 + java_string_hash("broker-a")) + 0) + java_string_hash("TopicA")
    assert h == ((expected + 2**31) % 2**32) - 2**31
    hashes = [message_queue_hash("TopicA", "broker-a", q) for q in range(4)]
    assert java_hash_set_order(hashes) == [3, 1, 2, 0]
