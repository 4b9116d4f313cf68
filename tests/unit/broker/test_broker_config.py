"""The config/ JSON files' common I/O: fastjson-tolerant parsing, atomic writes with a
.bak, and RocketMQ's fallback to the .bak on load."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketstore.broker.broker_config import (
    BrokerConfig,
    broker_config_from_settings,
    dump_pretty,
    load_config_file,
    parse_fastjson,
    persist_config_file,
)
from rocketstore.errors import ConfigError, CorruptDataError


def identity(obj: Any) -> Any:
    return obj


def must_be_dict(obj: Any) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise ValueError("not an object")
    return obj


def test_parse_fastjson_unquoted_integer_keys() -> None:
    # As fastjson pretty-prints ConsumerOffsetManager's Map<Integer, Long>.
    text = '{\n\t"offsetTable":{\n\t\t"T@G":{0:7,1:-3,12:26\n\t\t}\n\t}\n}'
    assert parse_fastjson(text) == {"offsetTable": {"T@G": {"0": 7, "1": -3, "12": 26}}}


def test_parse_fastjson_leaves_strings_alone() -> None:
    text = '{"a":"{0:1,2:3}","b\\"{4:":{5:6}}'
    assert parse_fastjson(text) == {"a": "{0:1,2:3}", 'b"{4:': {"5": 6}}


def test_parse_fastjson_rejects_other_garbage() -> None:
    with pytest.raises(ValueError):
        parse_fastjson('{"a":}')


def test_dump_pretty_is_fastjson_layout() -> None:
    assert dump_pretty({"b": {"0": 1}, "a": True}) == '{\n\t"b":{\n\t\t"0":1\n\t},\n\t"a":true\n}'


json_scalars = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63 - 1), st.booleans(), st.text(max_size=20)
)
json_trees = st.recursive(
    json_scalars,
    lambda children: (
        st.dictionaries(st.text(max_size=10), children, max_size=4)
        | st.dictionaries(st.integers(0, 1000).map(str), children, max_size=4)
    ),
    max_leaves=20,
)


@given(json_trees)
def test_dump_then_parse_round_trips(tree: Any) -> None:
    assert parse_fastjson(dump_pretty(tree)) == tree


@given(st.dictionaries(st.integers(0, 2**31), st.integers(0, 2**62), max_size=8))
def test_fastjson_integer_keys_round_trip(table: dict[int, int]) -> None:
    # The layout fastjson writes: bare integer keys.
    body = ",".join(f"{k}:{v}" for k, v in table.items())
    parsed = parse_fastjson('{"offsetTable":{"T@G":{' + body + "\n\t\t}}}")
    assert {int(k): v for k, v in parsed["offsetTable"]["T@G"].items()} == table


def test_missing_file_and_backup_is_a_fresh_table(tmp_path: Path) -> None:
    assert load_config_file(str(tmp_path / "x.json"), "test", identity) is None


def test_persist_keeps_previous_file_as_bak(tmp_path: Path) -> None:
    path = str(tmp_path / "config" / "x.json")
    persist_config_file(path, {"v": 1})
    assert not Path(path + ".bak").exists()
    persist_config_file(path, {"v": 2})
    assert json.loads(Path(path).read_text()) == {"v": 2}
    assert json.loads(Path(path + ".bak").read_text()) == {"v": 1}
    assert not Path(path + ".tmp").exists()
    assert load_config_file(path, "test", identity) == {"v": 2}


@pytest.mark.parametrize("damage", ["", "   \n", '{"v": 2', "\xff\xfe"])
def test_bad_or_empty_file_falls_back_to_bak(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "x.json"
    persist_config_file(str(path), {"v": 1})
    persist_config_file(str(path), {"v": 2})
    path.write_bytes(damage.encode("latin-1"))
    assert load_config_file(str(path), "test", identity) == {"v": 1}


def test_a_write_after_falling_back_keeps_the_good_backup(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # RocketMQ's persist would copy the bad file over the only good copy of the table.
    path = tmp_path / "x.json"
    persist_config_file(str(path), {"v": 1})
    persist_config_file(str(path), {"v": 2})
    path.write_text("garbage{")
    assert load_config_file(str(path), "test", identity) == {"v": 1}
    assert any(
        r.levelname == "ERROR" and "test loaded from the backup" in r.getMessage()
        for r in caplog.records
    )
    persist_config_file(str(path), {"v": 3})
    assert json.loads(Path(str(path) + ".bak").read_text()) == {"v": 1}
    assert json.loads(path.read_text()) == {"v": 3}
    persist_config_file(str(path), {"v": 4})  # the file is good again: backed up as usual
    assert json.loads(Path(str(path) + ".bak").read_text()) == {"v": 3}


def test_content_the_decoder_refuses_falls_back_to_bak(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    persist_config_file(str(path), {"v": 1})
    persist_config_file(str(path), {"v": 2})
    path.write_text("[1, 2]")
    assert load_config_file(str(path), "test", must_be_dict) == {"v": 1}


def test_corrupt_file_without_backup_is_an_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text('{"offsetTable": ')
    with pytest.raises(CorruptDataError) as info:
        load_config_file(str(path), "consumer offset", identity)
    message = str(info.value)
    assert "consumer offset file is unusable (not valid JSON" in message
    assert str(path) in message and "x.json.bak (missing)" in message


def test_corrupt_file_and_corrupt_backup_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text("{")
    Path(str(path) + ".bak").write_text("[")
    with pytest.raises(CorruptDataError, match=r"x.json.bak \(not valid JSON"):
        load_config_file(str(path), "test", identity)


def test_only_a_backup_left_is_loaded(tmp_path: Path) -> None:
    # A crash between RocketMQ-style "delete then rename" steps leaves only the .bak.
    path = tmp_path / "x.json"
    Path(str(path) + ".bak").write_text('{"v": 1}')
    assert load_config_file(str(path), "test", identity) == {"v": 1}


def test_broker_config_validation() -> None:
    assert BrokerConfig().validate().broker_name == "broker-a"
    with pytest.raises(ConfigError, match="broker_name"):
        BrokerConfig(broker_name=" ").validate()
    with pytest.raises(ConfigError, match="default_topic_queue_nums"):
        BrokerConfig(default_topic_queue_nums=0).validate()
    with pytest.raises(ConfigError, match="transaction_check_interval_ms"):
        BrokerConfig(transaction_check_interval_ms=0).validate()
    with pytest.raises(ConfigError, match="transaction_check_max"):
        BrokerConfig(transaction_check_max=-1).validate()


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"server_channel_max_idle_time_seconds": -1}, "server_channel_max_idle_time_seconds"),
        ({"write_buffer_high_water_mark": 0}, "write_buffer_high_water_mark"),
        ({"write_buffer_low_water_mark": 2048, "write_buffer_high_water_mark": 1024}, "above"),
        ({"server_channel_max_unsent_bytes": 0}, "server_channel_max_unsent_bytes"),
        ({"server_partial_frames_max_bytes": True}, "server_partial_frames_max_bytes"),
        ({"heartbeat_max_body_bytes": 0}, "heartbeat_max_body_bytes"),
        ({"max_queue_nums": 0}, "max_queue_nums"),
        ({"max_queue_nums": 65536}, "max_queue_nums must be 1..65535"),
    ],
)
def test_the_connection_bounds_are_validated(settings: dict[str, Any], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        BrokerConfig(**settings).validate()


def test_the_connection_bounds_from_broker_conf_keys() -> None:
    settings = {
        "serverChannelMaxIdleTimeSeconds": "0",  # RocketMQ's names where it has the setting
        "writeBufferHighWaterMark": "131072",
        "writeBufferLowWaterMark": "65536",
        "serverChannelMaxUnsentBytes": "1048576",
        "serverPartialFramesMaxBytes": "2097152",
        "maxQueueNums": "65535",
        "heartbeatMaxBodyBytes": "4096",
    }
    broker = broker_config_from_settings(settings, source="broker.conf")
    assert broker.server_channel_max_idle_time_seconds == 0
    assert (broker.write_buffer_high_water_mark, broker.write_buffer_low_water_mark) == (
        131072,
        65536,
    )
    assert broker.server_channel_max_unsent_bytes == 1 << 20
    assert broker.server_partial_frames_max_bytes == 2 << 20
    assert (broker.max_queue_nums, broker.heartbeat_max_body_bytes) == (65535, 4096)


def test_transaction_settings_from_broker_conf_keys() -> None:
    settings = {
        "rejectTransactionMessage": "true",
        "transactionTimeOut": "3000",
        "transactionCheckMax": "5",
        "transactionCheckInterval": "30000",
    }
    broker = broker_config_from_settings(settings, source="broker.conf")
    assert broker.reject_transaction_message is True
    assert (broker.transaction_timeout_ms, broker.transaction_check_max) == (3000, 5)
    assert broker.transaction_check_interval_ms == 30_000
    with pytest.raises(ConfigError, match="transactionCheckInterval"):
        broker_config_from_settings({"transactionCheckInterval": "soon"}, source="broker.conf")


@given(st.text(alphabet='{}[]:,"0123456789-\\ ab\t\n', max_size=200) | st.text(max_size=100))
def test_parse_fastjson_fuzz_only_value_errors(text: str) -> None:
    # Whatever the bytes, a bad file is a ValueError (the loader falls back to .bak).
    with contextlib.suppress(ValueError):
        parse_fastjson(text)


def test_parse_fastjson_names_nesting_past_the_recursion_limit() -> None:
    """json.loads raises RecursionError there; callers catch ValueError for bad files."""
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(ValueError, match="nested too deeply"):
        parse_fastjson(deep)
    value = parse_fastjson("[" * 50 + "]" * 50)  # real files nest a few levels
    for _ in range(49):
        (value,) = value
    assert value == []
