"""Times on the command line: epoch milliseconds, ``now``, or mqadmin's
``yyyy-MM-dd#HH:mm:ss:SSS`` in local time; and the way mqadmin prints them
(``UtilAll.timeMillisToHumanString2``: ``yyyy-MM-dd HH:mm:ss,SSS``, local time).

Layer: cli. Pure string work plus the local clock for ``now``.
"""

from __future__ import annotations

import datetime as _dt
import re
import time
from typing import Any

import click

from rocketstore.java_ints import fits_java_long

_EPOCH_MS = re.compile(r"-?[0-9]+")  # ASCII digits only: "²" is a digit to str.isdigit
_HUMAN = re.compile(r"^(\d{4})-(\d{2})-(\d{2})#(\d{2}):(\d{2}):(\d{2}):(\d{3})$")
HUMAN_FORMAT_HELP = "epoch ms, 'now' or yyyy-MM-dd#HH:mm:ss:SSS (local time)"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def parse_time(text: str) -> int:
    """Epoch milliseconds from ``text``; ValueError with the reason if it is neither form."""
    value = text.strip()
    if value.lower() == "now":
        return now_ms()
    if _EPOCH_MS.fullmatch(value):
        number = int(value)
        if not fits_java_long(number):
            raise ValueError(f"{text!r} is past what a Java long holds (epoch ms)")
        return number
    match = _HUMAN.match(value)
    if match is None:
        raise ValueError(f"{text!r} is not {HUMAN_FORMAT_HELP}")
    year, month, day, hour, minute, second, millis = (int(g) for g in match.groups())
    try:
        moment = _dt.datetime(year, month, day, hour, minute, second)
        return int(moment.timestamp()) * 1000 + millis
    except (ValueError, OverflowError, OSError) as e:  # month 13; year 1 before the epoch's zone
        raise ValueError(f"{text!r}: {e}") from e


def format_time(epoch_ms: int) -> str:
    """``2024-05-01 10:00:00,123`` in local time, as mqadmin prints store times."""
    seconds = format_seconds(epoch_ms)
    return seconds if seconds == str(epoch_ms) else seconds + f",{epoch_ms % 1000:03d}"


def format_seconds(epoch_ms: int) -> str:
    """``2024-05-01 10:00:00`` in local time (mqadmin's yyyy-MM-dd HH:mm:ss, as its
    trace and consumer-progress tables print times); the number itself when no date is."""
    try:
        moment = _dt.datetime.fromtimestamp(epoch_ms / 1000)
    except (OverflowError, OSError, ValueError):
        return str(epoch_ms)
    return moment.strftime("%Y-%m-%d %H:%M:%S")


class TimeParam(click.ParamType):  # type: ignore[type-arg]
    """A click option type accepting every form :func:`parse_time` does."""

    name = "TIME"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        try:
            return parse_time(str(value))
        except ValueError as e:
            self.fail(str(e), param, ctx)


TIME = TimeParam()


def format_hash_time(epoch_ms: int) -> str:
    """``2024-05-01#10:00:00:123`` in local time (UtilAll's yyyy-MM-dd#HH:mm:ss:SSS, the
    form -b/-e take, as mqadmin's decodeMessageId prints a date)."""
    seconds = format_seconds(epoch_ms)
    if seconds == str(epoch_ms):
        return seconds
    return seconds.replace(" ", "#") + f":{epoch_ms % 1000:03d}"
