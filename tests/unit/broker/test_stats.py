"""Message rates over 10 s / 1 min / 10 min windows with an injected clock."""

from __future__ import annotations

from rocketstore.broker.stats import BrokerStats, RateCounter


class Clock:
    def __init__(self) -> None:
        self.now = 1000

    def __call__(self) -> int:
        return self.now


def test_rates_cover_their_windows_only() -> None:
    clock = Clock()
    counter = RateCounter(clock)
    counter.add(30)
    clock.now += 5
    counter.add(30)
    assert counter.tps(10) == 6.0 and counter.tps(60) == 1.0 and counter.tps(600) == 0.1
    clock.now += 20  # the first 10 s window has passed
    assert counter.tps(10) == 0.0 and counter.tps(60) == 1.0
    assert counter.tps_text() == "0.00 1.00 0.10"
    clock.now += 600  # everything aged out; the total stays
    assert counter.tps(600) == 0.0 and counter.total == 60
    counter.add(0)
    counter.add(-3)
    assert counter.total == 60


def test_group_rates_are_per_group_and_topic() -> None:
    clock = Clock()
    stats = BrokerStats(clock)
    stats.pulled("G", "T", 120)
    stats.pulled("G", "U", 60)
    assert stats.group_get_tps("G", "T") == 2.0 and stats.group_get_tps("G", "U") == 1.0
    assert stats.group_get_tps("H", "T") == 0.0
    assert stats.get.total == 180
