"""broker.conf parsing (Java properties) and applying it to the store's and broker's
settings."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketstore.config import StoreConfig
from rocketstore.errors import ConfigError
from rocketstore.settings_file import (
    apply_settings,
    camel_case,
    parse_java_properties,
    store_config_from_settings,
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


def test_old_spellings_and_the_store_host() -> None:
    settings = {"mapedFileSizeCommitLog": "65536", "brokerIP1": "10.0.0.7", "listenPort": "10921"}
    config = store_config_from_settings(settings)
    assert config.mapped_file_size_commit_log == 65536
    assert config.store_host == "10.0.0.7:10921"
    assert store_config_from_settings({"listenPort": "10931"}).store_host == "127.0.0.1:10931"
    assert store_config_from_settings({"brokerIP1": "::1"}).store_host == "[::1]:10911"


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("maxIndexNum", "lots", "maxIndexNum must be an integer, got 'lots'"),
        ("maxIndexNum", "1_000", "maxIndexNum must be an integer"),
        ("messageIndexEnable", "yes", "messageIndexEnable must be true or false"),
        ("flushDiskType", "SOMETIMES", "flush_disk_type must be one of"),
        ("maxHashSlotNum", "0", "max_hash_slot_num must be a positive integer"),
        ("brokerIP1", "not-an-ip", "'not-an-ip' is not an IP address"),
    ],
)
def test_a_bad_value_names_the_file_and_the_key(key: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=r"broker\.conf") as raised:
        store_config_from_settings({key: value}, source="broker.conf")
    assert message in str(raised.value)


def test_unknown_keys_are_left_alone_as_rocketmq_does() -> None:
    config, used = apply_settings(
        StoreConfig(), {"brokerRole": "SLAVE", "maxIndexNum": " 64 ", "extra": "x"}
    )
    assert used == ["maxIndexNum"]
    assert config.max_index_num == 64  # values are trimmed, as properties2Object does
    assert config.extra == {}


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


def _java_escape(text: str, *, key: bool) -> str:
    """What java.util.Properties.store writes for ``text`` (ASCII-only output)."""
    out: list[str] = []
    for i, char in enumerate(text):
        if char == "\\":
            out.append("\\\\")
        elif char in "\t\n\r\f":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}[char])
        elif char in "=:#!" or (char == " " and (key or i == 0)):
            out.append("\\" + char)
        elif not 0x20 <= ord(char) <= 0x7E:
            out.extend(f"\\u{unit:04x}" for unit in _utf16_units(char))
        else:
            out.append(char)
    return "".join(out)


def _utf16_units(char: str) -> list[int]:
    data = char.encode("utf-16-be")
    return [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]


_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=20)


@given(st.dictionaries(_TEXT.filter(bool), _TEXT, max_size=8))
def test_what_java_stores_parses_back(entries: dict[str, str]) -> None:
    """Properties.store's escaping, read back: every key and value as written (characters
    outside the BMP as two \\u escapes, a surrogate pair)."""
    text = "#comment\n" + "".join(
        f"{_java_escape(k, key=True)}={_java_escape(v, key=False)}\n" for k, v in entries.items()
    )
    assert parse_java_properties(text) == entries
