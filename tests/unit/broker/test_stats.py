"""Message rates over 10 s / 1 min / 10 min windows with an injected clock."""

from __future__ import annotations

from rocketstore.broker.stats import GROUP_GET_NUMS, TOPIC_PUT_NUMS, BrokerStats, RateCounter


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


def test_stats_items_sum_minute_hour_and_day() -> None:
    clock = Clock()
    stats = BrokerStats(clock)
    assert stats.stats_item(TOPIC_PUT_NUMS, "T") is None  # nothing recorded: no item
    stats.stored("T", 3)
    clock.now += 60 * 30
    stats.stored("T", 2)
    stats.stored("T", 1)
    item = stats.stats_item(TOPIC_PUT_NUMS, "T")
    assert item is not None
    minute, hour, day = item.snapshot(1), item.snapshot(60), item.snapshot(24 * 60)
    assert (minute.sum, minute.tps, minute.avgpt) == (3, 3 / 60, 1.5)  # 3 in 2 puts
    assert (hour.sum, day.sum) == (6, 6) and day.avgpt == 2.0
    clock.now += 60 * 60
    assert item.snapshot(60).sum == 0 and item.snapshot(24 * 60).sum == 6
    clock.now += 24 * 60 * 60
    stats.stored("T", 1)  # recording drops what is older than a day
    assert item.snapshot(24 * 60).sum == 1
    stats.pulled("G", "T", 4)
    pulled = stats.stats_item(GROUP_GET_NUMS, "T@G")
    assert pulled is not None and pulled.snapshot(1).to_json() == {
        "avgpt": 4.0,
        "sum": 4,
        "tps": 4 / 60,
    }
