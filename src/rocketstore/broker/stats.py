"""Message rates the admin requests report (RocketMQ's StoreStatsService and
BrokerStatsManager, reduced to what mqadmin shows): messages put, messages pulled, messages
put per topic and pulled per consumer group and topic (with minute, hour and day sums for
VIEW_BROKER_STATS_DATA).

Layer: broker, plain synchronous state. Counts go into one-second buckets over the last
ten minutes; a rate is the count over a window divided by its length, as RocketMQ's
"10 s / 1 min / 10 min" TPS figures are.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

WINDOW_S = 600
TPS_WINDOWS_S = (10, 60, 600)


def now_s() -> int:
    return int(time.monotonic())


class RateCounter:
    """Event counts per second over the last ten minutes, and a total since start."""

    def __init__(self, clock: Callable[[], int] = now_s) -> None:
        self.clock = clock
        self.total = 0
        self._buckets: deque[list[int]] = deque()  # [second, count], oldest first
        self._lock = threading.Lock()

    def add(self, count: int = 1) -> None:
        if count <= 0:
            return
        second = self.clock()
        with self._lock:
            self.total += count
            if self._buckets and self._buckets[-1][0] == second:
                self._buckets[-1][1] += count
            else:
                self._buckets.append([second, count])
            self._trim(second)

    def _trim(self, second: int) -> None:
        while self._buckets and self._buckets[0][0] <= second - WINDOW_S:
            self._buckets.popleft()

    def tps(self, window_s: int) -> float:
        """Events per second over the last ``window_s`` seconds (the current one
        included)."""
        second = self.clock()
        with self._lock:
            self._trim(second)
            count = sum(c for s, c in self._buckets if s > second - window_s)
        return count / window_s

    def tps_text(self) -> str:
        """RocketMQ's "<10 s> <1 min> <10 min>" form (two decimals)."""
        return " ".join(f"{self.tps(window):.2f}" for window in TPS_WINDOWS_S)


@dataclass(frozen=True)
class Snapshot:
    """BrokerStatsItem: the sum over a window, per second, and per recorded event."""

    sum: int
    tps: float
    avgpt: float

    def to_json(self) -> dict[str, float | int]:
        return {"avgpt": self.avgpt, "sum": self.sum, "tps": self.tps}


class StatsItem:
    """One StatsItem (e.g. TOPIC_PUT_NUMS of a topic): counts and the number of times they
    were recorded, per minute over the last day."""

    def __init__(self, clock: Callable[[], int] = now_s) -> None:
        self.clock = clock
        self._minutes: deque[list[int]] = deque()  # [minute, value, times], oldest first
        self._lock = threading.Lock()

    def add(self, value: int) -> None:
        minute = self.clock() // 60
        with self._lock:
            if self._minutes and self._minutes[-1][0] == minute:
                self._minutes[-1][1] += value
                self._minutes[-1][2] += 1
            else:
                self._minutes.append([minute, value, 1])
            while self._minutes and self._minutes[0][0] <= minute - DAY_MINUTES:
                self._minutes.popleft()

    def snapshot(self, minutes: int) -> Snapshot:
        """The last ``minutes`` minutes, the current one included."""
        now = self.clock() // 60
        with self._lock:
            recent = [(v, t) for m, v, t in self._minutes if m > now - minutes]
        total = sum(v for v, _ in recent)
        times = sum(t for _, t in recent)
        return Snapshot(total, total / (minutes * 60), total / times if times else 0.0)


# BrokerStatsManager's item names that VIEW_BROKER_STATS_DATA serves.
TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
DAY_MINUTES = 24 * 60


class BrokerStats:
    """The broker's counters."""

    def __init__(self, clock: Callable[[], int] = now_s) -> None:
        self.clock = clock
        self.boot_ms = int(time.time() * 1000)
        self.put = RateCounter(clock)
        self.get = RateCounter(clock)
        self._group_get: dict[tuple[str, str], RateCounter] = {}
        self._items: dict[tuple[str, str], StatsItem] = {}
        self._lock = threading.Lock()

    def _item(self, name: str, key: str) -> StatsItem:
        with self._lock:
            item = self._items.get((name, key))
            if item is None:
                item = self._items[(name, key)] = StatsItem(self.clock)
            return item

    def stats_item(self, name: str, key: str) -> StatsItem | None:
        """getStatsItem: None for an item nothing was recorded in."""
        with self._lock:
            return self._items.get((name, key))

    def stored(self, topic: str, count: int) -> None:
        self.put.add(count)
        self._item(TOPIC_PUT_NUMS, topic).add(count)

    def pulled(self, group: str, topic: str, count: int) -> None:
        self.get.add(count)
        key = (group, topic)
        with self._lock:
            counter = self._group_get.get(key)
            if counter is None:
                counter = self._group_get[key] = RateCounter(self.clock)
        counter.add(count)
        self._item(GROUP_GET_NUMS, f"{topic}@{group}").add(count)

    def group_get_tps(self, group: str, topic: str) -> float:
        """GROUP_GET_NUMS per second over the last minute (what ConsumeStats sums)."""
        with self._lock:
            counter = self._group_get.get((group, topic))
        return counter.tps(60) if counter is not None else 0.0
