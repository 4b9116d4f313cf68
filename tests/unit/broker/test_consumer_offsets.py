"""config/consumerOffset.json and the committed-offset table (ConsumerOffsetManager)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketstore.broker.consumer_offsets import (
    ConsumerOffsets,
    decode_offset_file,
    encode_offset_file,
    split_key,
)
from rocketstore.errors import ConfigError, CorruptDataError

# consumerOffset.json as RocketMQ 4.9 writes it: fastjson PrettyFormat puts the Integer
# queue ids unquoted and closes each inner map on its own line.
ROCKETMQ_OFFSETS_JSON = """{
\t"offsetTable":{
\t\t"%RETRY%please_rename_unique_group_name_4@please_rename_unique_group_name_4":{0:0
\t\t},
\t\t"TopicTest@please_rename_unique_group_name_4":{0:250,1:251,2:249,3:250
\t\t}
\t}
}"""

GROUP = "please_rename_unique_group_name_4"


def offsets_path(root: Path) -> Path:
    return root / "config" / "consumerOffset.json"


def test_rocketmq_written_file_is_read(tmp_path: Path) -> None:
    offsets_path(tmp_path).parent.mkdir()
    offsets_path(tmp_path).write_text(ROCKETMQ_OFFSETS_JSON)
    offsets = ConsumerOffsets(tmp_path)
    assert offsets.query(GROUP, "TopicTest", 1) == 251
    assert offsets.query(GROUP, f"%RETRY%{GROUP}", 0) == 0
    assert offsets.query(GROUP, "TopicTest", 4) is None
    assert offsets.query("other", "TopicTest", 0) is None
    assert offsets.groups() == {GROUP}
    assert offsets.topics_of_group(GROUP) == {"TopicTest", f"%RETRY%{GROUP}"}
    assert offsets.groups_of_topic("TopicTest") == {GROUP}


def test_commit_persist_reload(tmp_path: Path) -> None:
    offsets = ConsumerOffsets(tmp_path)
    offsets.commit("g", "T", 0, 12)
    offsets.commit("g", "T", 3, 40)
    assert not offsets_path(tmp_path).exists()  # commits stay in memory until persist
    assert offsets.persist() is True
    document = json.loads(offsets_path(tmp_path).read_text())
    assert document == {"offsetTable": {"T@g": {"0": 12, "3": 40}}}
    reloaded = ConsumerOffsets(tmp_path)
    assert reloaded.table() == {("T", "g"): {0: 12, 3: 40}}


def test_persist_skips_an_unchanged_table(tmp_path: Path) -> None:
    offsets = ConsumerOffsets(tmp_path)
    assert offsets.persist() is False
    offsets.commit("g", "T", 0, 1)
    assert offsets.dirty
    assert offsets.persist() is True
    assert not offsets.dirty
    assert offsets.persist() is False
    offsets.commit("g", "T", 0, 1)  # same value: not a change
    assert offsets.persist() is False
    assert offsets.persist(force=True) is True


def test_lower_offset_is_taken(tmp_path: Path) -> None:
    offsets = ConsumerOffsets(tmp_path)
    offsets.commit("g", "T", 0, 100)
    offsets.commit("g", "T", 0, 5)  # a consumer reset: RocketMQ logs it and stores it
    assert offsets.query("g", "T", 0) == 5


def test_clean_remove_clone(tmp_path: Path) -> None:
    offsets = ConsumerOffsets(tmp_path)
    offsets.commit("g1", "A", 0, 1)
    offsets.commit("g1", "B", 0, 2)
    offsets.commit("g2", "A", 1, 3)
    assert offsets.clone_offset("g1", "g3", "A") is True
    assert offsets.query_queues("g3", "A") == {0: 1}
    assert offsets.clone_offset("nobody", "g4", "A") is False
    assert offsets.clean("g1", "B") is True
    assert offsets.clean("g1", "B") is False
    assert offsets.remove_topic("A") == 3
    assert offsets.table() == {}
    offsets.commit("g1", "C", 0, 9)
    assert offsets.remove_group("g1") == 1
    assert offsets.groups() == set()


def test_bad_arguments_are_refused(tmp_path: Path) -> None:
    offsets = ConsumerOffsets(tmp_path)
    with pytest.raises(ConfigError, match="queue id"):
        offsets.commit("g", "T", -1, 0)
    with pytest.raises(ConfigError, match="offset"):
        offsets.commit("g", "T", 0, "5")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="topic/group"):
        offsets.commit("g", "a@b", 0, 0)


def test_bak_fallback_and_corrupt_file(tmp_path: Path) -> None:
    offsets = ConsumerOffsets(tmp_path)
    offsets.commit("g", "T", 0, 1)
    offsets.persist()
    offsets.commit("g", "T", 0, 2)
    offsets.persist()
    offsets_path(tmp_path).write_text('{"offsetTable":{"T@g":{0:')  # torn by hand
    assert ConsumerOffsets(tmp_path).query("g", "T", 0) == 1  # from the .bak
    Path(str(offsets_path(tmp_path)) + ".bak").unlink()
    with pytest.raises(CorruptDataError, match="consumer offset file is unusable"):
        ConsumerOffsets(tmp_path)


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"offsetTable": {"NoSeparator": {"0": 1}}}, "not TOPIC@GROUP"),
        ({"offsetTable": {"T@g": {"x": 1}}}, "queue id 'x'"),
        ({"offsetTable": {"T@g": {"0": "1"}}}, "is not an integer"),
        ({"offsetTable": {"T@g": [1]}}, "must be an object"),
        ({"offsetTable": []}, "offsetTable must be an object"),
    ],
)
def test_bad_content_is_named(document: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        decode_offset_file(document)


def test_split_key_uses_the_first_at() -> None:
    assert split_key("T@group@x") == ("T", "group@x")


def test_concurrent_commits_and_persists_lose_nothing(tmp_path: Path) -> None:
    offsets = ConsumerOffsets(tmp_path)

    def commit_many(queue_id: int) -> None:
        for value in range(200):
            offsets.commit("g", "T", queue_id, value)
            if value % 50 == 0:
                offsets.persist()

    threads = [threading.Thread(target=commit_many, args=(q,)) for q in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    offsets.persist()
    assert ConsumerOffsets(tmp_path).query_queues("g", "T") == {q: 199 for q in range(4)}


names = st.text(alphabet="abcXYZ_-%|019", min_size=1, max_size=20)


@given(
    st.dictionaries(
        st.tuples(names, names),
        st.dictionaries(st.integers(0, 1023), st.integers(0, 2**63 - 1), max_size=5),
        max_size=5,
    )
)
def test_offset_file_round_trip(table: dict[tuple[str, str], dict[int, int]]) -> None:
    assert decode_offset_file(json.loads(json.dumps(encode_offset_file(table)))) == table
