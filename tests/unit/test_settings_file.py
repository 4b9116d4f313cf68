"""broker.conf parsing (Java properties) and applying it to the store's and broker's
settings."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketstore.config import StoreConfig
from rocketstore.errors import ConfigError
from rocketstore.settings_file import (
    STORE_KEYS,
    apply_settings,
    camel_case,
    camel_keys,
    escape_property,
    parse_java_properties,
    store_config_from_settings,
    update_properties_text,
)

BROKER_CONF = """\
# A broker.conf as RocketMQ ships it, plus the store settings operators change.
brokerClusterName = DefaultCluster
brokerName = broker-a
brokerId = 0
deleteWhen = 04
fileReservedTime = 48
brokerRole = ASYNC_MASTER
flushDiskType = SYNC_FLUSH
storePathRootDir=/var/rocketmq/store
maxHashSlotNum: 16
maxIndexNum 32
mappedFileSizeCommitLog=1073741824
messageIndexEnable=TRUE
checkCRCOnRecover=false
destroyMapedFileIntervalForcibly=60000
"""


def test_a_broker_conf_sets_the_store_settings_it_names() -> None:
    settings = parse_java_properties(BROKER_CONF)
    assert settings["brokerName"] == "broker-a"
    assert settings["storePathRootDir"] == "/var/rocketmq/store"
    config = store_config_from_settings(settings)
    assert config.index_geometry == (16, 32)
    assert config.flush_disk_type == "SYNC_FLUSH"
    assert config.file_reserved_time == 48
    assert config.mapped_file_size_commit_log == 1024 * 1024 * 1024
    assert config.message_index_enable is True
    assert config.check_crc_on_recover is False  # RocketMQ's spelling: checkCRCOnRecover
    assert config.destroy_mapped_file_interval_forcibly == 60_000  # and its "Maped"
    # Everything not named keeps RocketMQ's default.
    assert config.mapped_file_size_consume_queue == StoreConfig().mapped_file_size_consume_queue


def test_keys_rocketmq_does_not_have_are_left_alone() -> None:
    """RocketMQ 4.3 renamed mapedFileSizeCommitLog (no setter reads the old key since), and
    rocketstore's own settings (storeHost, commitLogPrefaultBytes...) are not RocketMQ's:
    a broker.conf that names them sets nothing, as for RocketMQ."""
    settings = {
        "mapedFileSizeCommitLog": "65536",
        "storeHost": "10.0.0.9:1",
        "commitLogPrefaultBytes": "0",
        "maxDispatchLagMs": "5",
        "brokerRole": "SLAVE",
        "maxIndexNum": "64",
    }
    config, used = apply_settings(StoreConfig(), settings, STORE_KEYS)
    assert used == ["maxIndexNum"]
    assert config == StoreConfig(max_index_num=64)
    assert store_config_from_settings(settings) == StoreConfig(max_index_num=64)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("maxIndexNum", "lots", "maxIndexNum must be a Java int, got 'lots'"),
        ("maxIndexNum", "1_000", "maxIndexNum must be a Java int"),
        # Integer.parseInt takes no blanks: RocketMQ would keep its default of 20,000,000.
        ("maxIndexNum", "400 ", "maxIndexNum must be a Java int, got '400 '"),
        ("maxHashSlotNum", "3000000000", "past"),
        ("messageIndexEnable", "yes", "messageIndexEnable must be true or false"),
        ("messageIndexEnable", "true ", "RocketMQ reads anything but 'true' as false"),
        ("flushDiskType", "SOMETIMES", "flush_disk_type must be one of"),
        ("flushDiskType", "SYNC_FLUSH ", "flush_disk_type must be one of"),
        ("maxHashSlotNum", "0", "max_hash_slot_num must be a positive integer"),
    ],
)
def test_a_value_rocketmq_would_not_read_names_the_file_and_the_key(
    key: str, value: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=r"broker\.conf") as raised:
        store_config_from_settings({key: value}, source="broker.conf")
    text = str(raised.value)
    assert message in text or (message == "past" and "must be a Java int" in text)


def test_camel_keys_of_a_dataclass_of_rocketmq_settings() -> None:
    keys = camel_keys(StoreConfig(), {"odd": "max_index_num"})
    assert keys["maxIndexNum"] == "max_index_num" and keys["odd"] == "max_index_num"
    assert "extra" not in keys.values()


def test_java_properties_syntax() -> None:
    text = (
        "  ! a comment\n"
        "a=1\n"
        "b : two words \n"
        "c\tthree\n"
        "long = first, \\\n"
        "       second\n"
        "escaped\\ key = tab\\there \\u00e9t\\u00E9\n"
        "empty=\n"
        "novalue\n"
        "a=again\n"
        "ends.with.backslash=x\\\\\n"
    )
    assert parse_java_properties(text) == {
        "a": "again",  # a later duplicate wins
        "b": "two words ",
        "c": "three",
        "long": "first, second",
        "escaped key": "tab\there été",
        "empty": "",
        "novalue": "",
        "ends.with.backslash": "x\\",
    }
    with pytest.raises(ConfigError, match="malformed"):
        parse_java_properties("k=\\u12\n")


def test_camel_case() -> None:
    assert camel_case("max_index_num") == "maxIndexNum"
    assert camel_case("flush_interval_commit_log") == "flushIntervalCommitLog"


_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=20)


@given(st.dictionaries(_TEXT.filter(bool), _TEXT, max_size=8))
def test_what_java_stores_parses_back(entries: dict[str, str]) -> None:
    """Properties.store's escaping, read back: every key and value as written (characters
    outside the BMP as two \\u escapes, a surrogate pair)."""
    text = "#comment\n" + "".join(
        f"{escape_property(k, key=True)}={escape_property(v)}\n" for k, v in entries.items()
    )
    assert parse_java_properties(text) == entries


def test_lines_end_where_javas_line_reader_ends_them() -> None:
    """Only \\n, \\r and \\r\\n end a line: \\x85, a byte of much UTF-8 text read as Latin-1
    (允 is E5 85 81), and \\f (a blank to Java) do not."""
    text = "brokerName=\xe5\x85\x81x\r\nk=a\fb\rlast=1"
    assert parse_java_properties(text) == {"brokerName": "\xe5\x85\x81x", "k": "a\fb", "last": "1"}


_LINE = st.text(st.sampled_from(list("ab=: #!\\\t\r\nxé")), max_size=12)


@given(
    st.lists(_LINE, max_size=8).map("".join),
    st.dictionaries(_TEXT, _TEXT, max_size=4),
)
def test_updating_a_file_sets_those_keys_and_keeps_the_others(
    base: str, entries: dict[str, str]
) -> None:
    """Whatever the file (comments, continuations, odd separators, a continuation cut by
    the end of the file), the update reads back as the old entries with the new ones set."""
    updated = update_properties_text(base, entries)
    assert parse_java_properties(updated) == parse_java_properties(base) | entries


def test_an_update_rewrites_the_deciding_entry_in_place() -> None:
    base = "# c\na=1\nb = 2\\\n  3\na=4\n! end"
    assert update_properties_text(base, {"a": "5", "b": "6", "c": " 7"}) == (
        "# c\na=1\nb=6\na=5\n! end\nc=\\ 7\n"
    )
    assert update_properties_text("", {"k": "v"}) == "k=v\n"
