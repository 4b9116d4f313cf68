"""StoreConfig.validate: every field's type and range, named in the ConfigError."""

from __future__ import annotations

import dataclasses

import pytest

from rocketstore import StoreConfig
from rocketstore.config import delay_levels_ms, delete_hours, parse_host
from rocketstore.errors import ConfigError

FIELDS = {f.name: f for f in dataclasses.fields(StoreConfig)}


@pytest.mark.parametrize(
    ("name", "value"),
    [
        # str settings: an AttributeError from .strip()/.split() before
        ("store_path_commit_log", None),
        ("read_only_commit_log_store_paths", 5),
        ("dledger_self_id", 0),
        ("store_path_dledger_commit_log", []),
        ("store_host", None),
        ("message_delay_level", 5),
        ("max_delay_level_message", None),
        ("delete_when", 4),
        # bools: "no" and "false" are true to Python
        ("enable_dledger_commit_log", "no"),
        ("enable_lmq", 1),
        ("enable_multi_dispatch", None),
        ("message_index_enable", "false"),
        ("check_crc_on_recover", 0),
        ("cut_damaged_commitlog", "no"),
        ("clean_file_forcibly_enable", "x"),
        # ints checked nowhere before: TypeErrors at put, dead service threads
        ("max_topic_length", "x"),
        ("max_topic_length", 0),
        ("max_msgs_num_batch", -1),
        ("max_filter_message_count", None),
        ("dispatch_interval_ms", "x"),
        ("dispatch_interval_ms", -1),
        ("default_query_max_num", 0),
        ("extra", None),
    ],
)
def test_a_field_of_the_wrong_type_is_named(name: str, value: object) -> None:
    with pytest.raises(ConfigError, match=name):
        StoreConfig(**{name: value}).validate()  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "name",
    [
        "mapped_file_size_commit_log",  # OverflowError in the C encoder at put
        "mapped_file_size_consume_queue",  # acknowledged puts left out of their queue
        "max_message_size",  # OverflowError in the C encoder at put
        "clean_resource_interval",  # the retention thread died on its wait
        "flush_interval_commit_log",  # the flusher thread died on its wait
        "dispatch_interval_ms",  # the dispatcher thread died on its wait
        "max_dispatch_lag_ms",
        "file_reserved_time",
    ],
)
def test_an_int_field_past_a_java_int_is_refused(name: str) -> None:
    with pytest.raises(ConfigError, match=f"{name} must be at most 2147483647"):
        StoreConfig(**{name: 2**31}).validate()  # type: ignore[arg-type]
    StoreConfig(**{name: 2**31 - 1}).validate()  # type: ignore[arg-type]


def test_a_topic_length_over_a_records_byte_is_refused() -> None:
    with pytest.raises(ConfigError, match="max_topic_length must be at most 127"):
        StoreConfig(max_topic_length=128).validate()
    StoreConfig(max_topic_length=127).validate()


def test_a_delay_level_a_store_time_cannot_be_added_to_is_refused() -> None:
    """Such a level killed the dispatcher (OverflowError) at the first delayed message,
    and every later open of the store."""
    with pytest.raises(ConfigError, match="message_delay_level: level '106751991167d'"):
        StoreConfig(message_delay_level="1s 106751991167d").validate()
    assert delay_levels_ms("1s 2h") == [1000, 7_200_000]


def test_digits_of_other_scripts_are_not_numbers() -> None:
    """``str.isdigit`` takes "١" and int() reads it: a port of 3 that nobody wrote."""
    with pytest.raises(ConfigError, match="bad port"):
        parse_host("1.2.3.4:\u0663", what="store_host")
    with pytest.raises(ConfigError, match="bad hour"):
        delete_hours("\u0660\u0664")
    with pytest.raises(ConfigError, match="bad level"):
        delay_levels_ms("\uff11s")
    assert parse_host("1.2.3.4:5") == ("1.2.3.4", 5)


def test_parse_host_names_a_value_that_is_no_str() -> None:
    with pytest.raises(ConfigError, match="born_host: expected a str 'ip:port', got int"):
        parse_host(5, what="born_host")  # type: ignore[arg-type]


def test_the_defaults_validate() -> None:
    assert StoreConfig().validate() == StoreConfig()
    assert set(FIELDS) >= {"extra", "dispatch_interval_ms"}
