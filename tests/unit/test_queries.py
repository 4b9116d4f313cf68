"""Key queries: the one-call C lookup (``record.fast_key_lookup``) answers exactly as the
candidate-by-candidate Python path, over stores with several index and CommitLog files,
crowded hash slots, shared keys across topics, time windows and non-ASCII text."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.errors import ConfigError
from rocketstore.format import record as rec
from rocketstore.format.native import native

STAMP = 1_700_000_000_000
TOPICS = ("TopicA", "TopicB", "Töpic")
KEYS = ("k1", "k2", "ключ", "shared", "x y")  # "x y" puts two tokens, x and y
ASKED = ("k1", "k2", "ключ", "shared", "x", "y", "x y", "absent", " ")

needs_c = pytest.mark.skipif(native is None, reason="the C extension is not built")


def _config() -> StoreConfig:
    # Eight slots and 40 entries a file: long chains, several index files; 8 KiB
    # CommitLog files: records in several.
    return StoreConfig(mapped_file_size_commit_log=8 * 1024, max_hash_slot_num=8, max_index_num=40)


@st.composite
def _messages(draw: st.DrawFn) -> list[tuple[str, dict[str, str], int]]:
    count = draw(st.integers(1, 60))
    made = []
    for number in range(count):
        properties = {"KEYS": " ".join(draw(st.lists(st.sampled_from(KEYS), max_size=3)))}
        if draw(st.booleans()):
            properties["UNIQ_KEY"] = draw(st.sampled_from(("u1", "u2", "ü3", f"u{number}")))
        if draw(st.booleans()):
            properties["note"] = draw(st.sampled_from(("plain", "ünï")))
        made.append((draw(st.sampled_from(TOPICS)), properties, draw(st.integers(0, 5))))
    return made


def _fill(root: Path, messages: list[tuple[str, dict[str, str], int]]) -> MessageStore:
    store = MessageStore.open(str(root), _config())
    for number, (topic, properties, second) in enumerate(messages):
        body = bytes([number % 256]) * (number % 300)
        store.put(Message(topic, body, properties=properties), store_timestamp=STAMP + second)
    store.wait_dispatched()
    return store


@needs_c
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(_messages(), st.data())
def test_the_c_lookup_answers_as_the_python_path(
    tmp_path_factory: pytest.TempPathFactory,
    messages: list[tuple[str, dict[str, str], int]],
    data: st.DataObject,
) -> None:
    store = _fill(tmp_path_factory.mktemp("store"), messages)
    try:
        queries = store.queries
        commitlog = store.commitlog
        for topic, queue_ids in store.topics().items():  # read once: the C decoder's
            for queue_id in queue_ids:  # caches learn every topic and host (by Python)
                store.get_messages("warm-up", topic, queue_id, 0, 64)
        for _ in range(12):
            topic = data.draw(st.sampled_from(TOPICS))
            unique = data.draw(st.booleans())
            key = data.draw(st.sampled_from(("u1", "u2", "ü3", "u7") if unique else ASKED))
            max_count = data.draw(st.integers(1, 70))
            begin = STAMP + data.draw(st.integers(0, 5))
            end = begin + data.draw(st.integers(-1, 5))
            assert rec.fast_key_lookup is not None
            quick = rec.fast_key_lookup(
                store.index.files,
                commitlog.files.files,
                commitlog.file_size,
                topic,
                key,
                unique,
                begin,
                end,
                max_count,
            )
            slow = queries._python_matches(topic, key, max_count, begin, end, unique)
            assert quick is not None  # the C path answered
            assert quick == slow
            assert [m.commit_log_offset for m in quick] == [m.commit_log_offset for m in slow]
    finally:
        store.close()


@needs_c
def test_the_c_lookup_hands_a_gone_file_to_python(tmp_path: Path) -> None:
    store = _fill(tmp_path, [("TopicA", {"KEYS": "k1"}, 0)] * 3)
    try:
        assert [m.keys for m in store.query_messages("TopicA", "k1")] == ["k1"] * 3
        commitlog = store.commitlog
        store.index.files[0]._file.retire()  # as retention does before deleting
        assert rec.fast_key_lookup is not None
        answer = rec.fast_key_lookup(
            store.index.files,
            commitlog.files.files,
            commitlog.file_size,
            "TopicA",
            "k1",
            False,
            0,
            2**63 - 1,
            32,
        )
        assert answer is None  # left to the Python path, which skips the retired file
    finally:
        store.close()


def test_query_arguments_are_checked(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path, _config()) as store:
        with pytest.raises(ConfigError, match="max_count"):
            store.query_messages("T", "k", max_count=0)
        with pytest.raises(ConfigError, match="non-empty"):
            store.query_messages("T", "")


def test_query_arguments_of_a_wrong_type_or_range_are_named_or_taken_whole(
    tmp_path: Path,
) -> None:
    """A key or count of the wrong type is a ConfigError naming it (not a TypeError from
    the C lookup); counts and times past Java's int and long ranges answer as the widest
    ones do (not an OverflowError)."""
    with MessageStore.open(tmp_path, _config()) as store:
        store.put(Message("T", b"x", properties={"KEYS": "k", "UNIQ_KEY": "u"}))
        store.wait_dispatched()
        with pytest.raises(ConfigError, match="key must be a non-empty str"):
            store.query_messages("T", 5)  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="key must be a non-empty str"):
            store.query_by_unique_key("T", None)  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="max_count must be an int"):
            store.query_messages("T", "k", "2")  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="begin_ms must be an int"):
            store.query_messages("T", "k", 32, "0")  # type: ignore[arg-type]
        huge = 1 << 70
        assert len(store.query_messages("T", "k", huge, -huge, huge)) == 1
        assert len(store.query_by_unique_key("T", "u", huge)) == 1
        assert store.query_messages("T", "k", 32, huge, huge) == []


def test_keys_are_tokens_and_unique_keys_whole(tmp_path: Path) -> None:
    messages = [
        ("T", {"KEYS": "a b", "UNIQ_KEY": "u"}, 0),
        ("T", {"KEYS": "ab"}, 1),
        ("U", {"KEYS": "a"}, 2),
        ("T", {"KEYS": "ünï a"}, 3),
    ]
    store = _fill(tmp_path, messages)
    try:
        assert [m.store_timestamp - STAMP for m in store.query_messages("T", "a")] == [0, 3]
        assert [m.keys for m in store.query_messages("T", "ünï")] == ["ünï a"]
        assert store.query_messages("T", "a b") == []  # a token, never a phrase
        assert [m.uniq_key for m in store.query_by_unique_key("T", "u")] == ["u"]
        assert store.query_by_unique_key("U", "u") == []
        window = store.query_messages("T", "a", begin_ms=STAMP + 1, end_ms=STAMP + 3)
        assert [m.store_timestamp - STAMP for m in window] == [3]
        newest = store.query_messages("T", "a", max_count=1)
        assert [m.store_timestamp - STAMP for m in newest] == [3]  # the newest ones
    finally:
        store.close()
