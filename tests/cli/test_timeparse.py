"""The CLI's time formats: mqadmin's yyyy-MM-dd#HH:mm:ss:SSS (local time) and epoch ms."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from rocketstore.cli.timeparse import format_time, parse_time


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_human_and_epoch_forms(utc: None) -> None:
    assert parse_time("2023-11-14#22:13:20:007") == 1_700_000_000_007
    assert parse_time("1700000000007") == 1_700_000_000_007
    assert format_time(1_700_000_000_007) == "2023-11-14 22:13:20,007"
    assert abs(parse_time("now") - time.time() * 1000) < 5000


def test_local_time_zone_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "Asia/Shanghai")
    time.tzset()
    try:
        assert parse_time("2023-11-15#06:13:20:000") == 1_700_000_000_000
        assert format_time(1_700_000_000_000) == "2023-11-15 06:13:20,000"
    finally:
        monkeypatch.undo()
        time.tzset()


@pytest.mark.parametrize(
    "text",
    [
        "yesterday",
        "2023-11-14 22:13:20",
        "2023-13-01#00:00:00:000",
        "",
        "--5",
        "\u00b2",
        "1-2",
        "0001-01-01#00:00:00:000",
    ],
)
def test_bad_times_say_why(text: str) -> None:
    with pytest.raises(ValueError, match=repr(text)):
        parse_time(text)


@pytest.mark.parametrize("text", [str(2**63), str(-(2**63) - 1), "9" * 40])
def test_epoch_ms_past_a_java_long_say_so(text: str) -> None:
    with pytest.raises(ValueError, match="past what a Java long holds"):
        parse_time(text)


def test_the_java_long_bounds_themselves_are_times() -> None:
    assert parse_time(str(2**63 - 1)) == 2**63 - 1
    assert parse_time(str(-(2**63))) == -(2**63)
