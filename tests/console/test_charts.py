"""The SVG charts (pure) and the stored-rate series over the console store."""

from __future__ import annotations

import re

from rocketstore.broker.stats import RateCounter
from rocketstore.console.charts import _nice_top, line_chart
from rocketstore.console.rates import BUCKETS, live_series, stored_series
from rocketstore.console.source import OfflineSource
from tests.cli.cli_helpers import CONFIG


def test_axis_tops_are_one_two_or_five_times_a_power_of_ten():
    assert [_nice_top(v) for v in (0, 0.3, 1, 1.2, 3, 7, 12, 4500)] == [
        1.0, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 5000.0,
    ]  # fmt: skip


def test_a_chart_without_points_says_so():
    svg = line_chart({"put": []}, title="T", unit="msg/s")
    assert svg.startswith("<svg") and "no data" in svg and "<polyline" not in svg


def test_a_chart_draws_each_series_within_its_frame_and_escapes_names():
    svg = line_chart(
        {"put": [(0, 0.0), (1000, 10.0)], "<get>": [(0, 5.0), (1000, 0.0)]},
        title="Rates & more",
        unit="msg/s",
        width=400,
        height=200,
    )
    assert svg.count("<polyline") == 2 and "&lt;get&gt;" in svg and "Rates &amp; more" in svg
    for points in re.findall(r'points="([^"]+)"', svg):
        for pair in points.split():
            x, y = map(float, pair.split(","))
            assert 56 <= x <= 400 - 12 and 28 <= y <= 200 - 28


def test_live_series_averages_ten_second_steps():
    now = [1000]
    counter = RateCounter(clock=lambda: now[0])
    for second in range(990, 1001):
        now[0] = second
        counter.add(3)
    series = live_series(counter)
    assert len(series) == 60
    assert sum(v for _t, v in series) * 10 == 33  # 11 seconds x 3 messages
    assert series[-1][1] == 3.0  # the last step (991-1000) holds 10 of them: 30 / 10


def test_stored_series_counts_every_message_once(console_store):
    source = OfflineSource(str(console_store[0]), CONFIG)
    try:
        points, step_ms = stored_series(source.snapshot())
    finally:
        source.close()
    assert len(points) == BUCKETS and step_ms > 0
    assert round(sum(rate * step_ms / 1000 for _t, rate in points)) == 902
