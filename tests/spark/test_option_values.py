"""The option value parsers shared by the read and write options."""

from __future__ import annotations

import pytest

from rocketstore.errors import ConfigError
from rocketstore.spark.option_values import (
    bool_option,
    credentials_option,
    duration_ms_option,
    int_option,
    json_option,
    key_list,
    namesrv_option,
)


def test_int_option_default_minimum_and_bad_text() -> None:
    assert int_option({}, "maxOffsetsPerTrigger", 1) is None
    assert int_option({}, "maxOffsetsPerTrigger", 1, 7) == 7
    assert int_option({"maxoffsetspertrigger": "12"}, "maxOffsetsPerTrigger", 1) == 12
    with pytest.raises(ConfigError, match=r"maxOffsetsPerTrigger='0' must be >= 1"):
        int_option({"maxoffsetspertrigger": "0"}, "maxOffsetsPerTrigger", 1)
    with pytest.raises(ConfigError, match=r"maxOffsetsPerTrigger='x' must be an integer"):
        int_option({"maxoffsetspertrigger": "x"}, "maxOffsetsPerTrigger", 1)


@pytest.mark.parametrize(("text", "value"), [("true", True), (" YES ", True), ("0", False)])
def test_bool_option_reads_the_usual_spellings(text: str, value: bool) -> None:
    assert bool_option({"pushdown": text}, "pushdown", not value) is value


def test_bool_option_refuses_anything_else() -> None:
    with pytest.raises(ConfigError, match=r"pushdown='maybe' must be true or false"):
        bool_option({"pushdown": "maybe"}, "pushdown", True)


@pytest.mark.parametrize(
    ("text", "ms"), [("500ms", 500), ("30s", 30_000), ("15m", 900_000), ("2", 2), ("1h", 3_600_000)]
)
def test_duration_reads_spark_time_strings(text: str, ms: int) -> None:
    assert duration_ms_option({"maxtriggerdelay": text}, "maxTriggerDelay", "15m") == ms


def test_duration_refuses_an_unknown_unit() -> None:
    with pytest.raises(ConfigError, match=r"maxTriggerDelay='3 weeks' must be a duration"):
        duration_ms_option({"maxtriggerdelay": "3 weeks"}, "maxTriggerDelay", "15m")


def test_json_option_names_the_option() -> None:
    assert json_option("assign", '{"A": [0]}') == {"A": [0]}
    with pytest.raises(ConfigError, match=r"option assign='\{' is not valid JSON"):
        json_option("assign", "{")


def test_key_list_one_key_or_a_json_array() -> None:
    assert key_list({"keys": "k1"}, "keys") == frozenset({"k1"})
    assert key_list({"keys": '["a", "b"]'}, "keys") == frozenset({"a", "b"})
    with pytest.raises(ConfigError, match=r"option keys='\[\]'"):
        key_list({"keys": "[]"}, "keys")


def test_namesrv_and_credentials() -> None:
    assert namesrv_option({"namesrv": " a:1 ; b:2 "}) == "a:1;b:2"
    with pytest.raises(ConfigError, match=r"'a' is not host:port"):
        namesrv_option({"namesrv": "a"})
    assert credentials_option({}, network=True) is None
    with pytest.raises(ConfigError, match="accessKey is given without option secretKey"):
        credentials_option({"accesskey": "ak"}, network=True)
    with pytest.raises(ConfigError, match="need option namesrv"):
        credentials_option({"accesskey": "ak", "secretkey": "sk"}, network=False)
