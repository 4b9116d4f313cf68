"""Message rates the admin requests report (RocketMQ's StoreStatsService and
BrokerStatsManager, reduced to what mqadmin and rocketmq-exporter show): messages put,
messages pulled, messages and bytes put per topic and pulled per consumer group and topic
(with minute, hour and day sums for VIEW_BROKER_STATS_DATA), and the totals, pull offsets
and request latencies the Prometheus endpoint (:mod:`rocketstore.broker.metrics`) reads
when scraped.

Layer: broker, plain synchronous state. Counts go into one-second buckets over the last
ten minutes; a rate is the count over a window divided by its length, as RocketMQ's
"10 s / 1 min / 10 min" TPS figures are.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

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

    def per_second(self) -> list[tuple[int, int]]:
        """(second of ``clock``, count) of the last ten minutes' seconds that had events,
        oldest first: the web console's rate charts."""
        with self._lock:
            self._trim(self.clock())
            return [(second, count) for second, count in self._buckets]

    def tps_text(self, *others: RateCounter) -> str:
        """RocketMQ's "<10 s> <1 min> <10 min>" form (two decimals); with ``others``, the
        sum of the rates (getTotalTps = found + miss)."""
        return " ".join(
            f"{self.tps(window) + sum(o.tps(window) for o in others):.2f}"
            for window in TPS_WINDOWS_S
        )


@dataclass(frozen=True)
class Snapshot:
    """BrokerStatsItem: the sum over a window, per second, and per recorded event."""

    sum: int
    tps: float
    avgpt: float

    def to_json(self) -> dict[str, float | int]:
        return {"avgpt": self.avgpt, "sum": self.sum, "tps": self.tps}


class StatsItem:
    """One StatsItem (e.g. SNDBCK_PUT_NUMS of a topic and group): counts and the number of
    times they were recorded, per minute over the last day."""

    def __init__(self, clock: Callable[[], int] = now_s) -> None:
        self.clock = clock
        self._minutes: deque[list[int]] = deque()  # [minute, value, times], oldest first
        self._lock = threading.Lock()

    def add(self, value: int, times: int = 1) -> None:
        minute = self.clock() // 60
        with self._lock:
            if self._minutes and self._minutes[-1][0] == minute:
                self._minutes[-1][1] += value
                self._minutes[-1][2] += times
            else:
                self._minutes.append([minute, value, times])
            while self._minutes and self._minutes[0][0] <= minute - DAY_MINUTES:
                self._minutes.popleft()

    def snapshot(self, minutes: int) -> Snapshot:
        """The last ``minutes`` minutes, the current one included."""
        now = self.clock() // 60
        with self._lock:
            recent = [(v, t) for m, v, t in self._minutes if m > now - minutes]
        return _snapshot(recent, minutes)


def _snapshot(recent: list[tuple[int, int]], minutes: int) -> Snapshot:
    """StatsItem.computeStatsData: the sum, per second over the window, and per time
    recorded (0 when nothing was recorded times, as BROKER_PUT_NUMS's never are)."""
    total = sum(v for v, _ in recent)
    times = sum(t for _, t in recent)
    return Snapshot(total, total / (minutes * 60), total / times if times else 0.0)


class StatsSource(Protocol):
    """What VIEW_BROKER_STATS_DATA reads of a stats item."""

    def snapshot(self, minutes: int) -> Snapshot: ...


# A Traffic minute row: [minute, messages, bytes, records, latency_ms, latency_records].
_MESSAGES, _BYTES, _RECORDS, _LATENCY, _LATENCY_RECORDS = 1, 2, 3, 4, 5


class Traffic:
    """One topic's stored messages, or one group's pulls from one topic: totals since the
    broker started (the Prometheus counters) and per minute over the last day what the
    StatsItems of BrokerStatsManager sum (messages, bytes, pull latency), in one record
    per send or pull."""

    __slots__ = ("_lock", "_minutes", "bytes", "clock", "messages")

    def __init__(self, clock: Callable[[], int] = now_s) -> None:
        self.clock = clock
        self.messages = 0
        self.bytes = 0
        self._minutes: deque[list[int]] = deque()
        self._lock = threading.Lock()

    def record(self, messages: int, size: int, latency_ms: int = -1) -> None:
        minute = self.clock() // 60
        with self._lock:
            self.messages += messages
            self.bytes += size
            rows = self._minutes
            if rows and rows[-1][0] == minute:
                row = rows[-1]
                row[_MESSAGES] += messages
                row[_BYTES] += size
                row[_RECORDS] += 1
            else:
                row = [minute, messages, size, 1, 0, 0]
                rows.append(row)
                while rows[0][0] <= minute - DAY_MINUTES:
                    rows.popleft()
            if latency_ms >= 0:
                row[_LATENCY] += latency_ms
                row[_LATENCY_RECORDS] += 1

    def rows(self, minutes: int, value: int, times: int) -> list[tuple[int, int]]:
        """(value, times) of the last ``minutes`` minutes' rows (columns by index)."""
        now = self.clock() // 60
        with self._lock:
            return [(r[value], r[times]) for r in self._minutes if r[0] > now - minutes]


@dataclass(frozen=True)
class TrafficItem:
    """A StatsItem read from Traffic: TOPIC_PUT_NUMS (messages, one time a send),
    TOPIC_PUT_SIZE, GROUP_GET_NUMS, GROUP_GET_SIZE and GROUP_GET_LATENCY."""

    traffic: Traffic
    value: int
    times: int

    def snapshot(self, minutes: int) -> Snapshot:
        return _snapshot(self.traffic.rows(minutes, self.value, self.times), minutes)


@dataclass(frozen=True)
class BrokerItem:
    """BROKER_PUT_NUMS / BROKER_GET_NUMS: the sum over every topic's (group's) Traffic.
    RocketMQ adds to their value only, never their times: avgpt stays 0."""

    traffics: Callable[[], list[Traffic]]

    def snapshot(self, minutes: int) -> Snapshot:
        rows = [(v, 0) for t in self.traffics() for v, _ in t.rows(minutes, _MESSAGES, _RECORDS)]
        return _snapshot(rows, minutes)


# BrokerStatsManager's item names that VIEW_BROKER_STATS_DATA serves (what mqadmin statsAll
# and rocketmq-exporter ask for). Keys: the topic; "topic@group"; the cluster name.
TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
TOPIC_PUT_SIZE = "TOPIC_PUT_SIZE"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
GROUP_GET_SIZE = "GROUP_GET_SIZE"
GROUP_GET_LATENCY = "GROUP_GET_LATENCY"
SNDBCK_PUT_NUMS = "SNDBCK_PUT_NUMS"
BROKER_PUT_NUMS = "BROKER_PUT_NUMS"
BROKER_GET_NUMS = "BROKER_GET_NUMS"
DAY_MINUTES = 24 * 60

# RocketMQ 5's rpc latency buckets (RemotingMetricsManager), in milliseconds.
RPC_LATENCY_BUCKETS_MS = (1.0, 3.0, 5.0, 7.0, 10.0, 100.0, 1000.0, 2000.0, 3000.0)
# RocketMQ 5's message size buckets (BrokerMetricsManager): 1 KiB, 4 KiB, 512 KiB, 1-4 MiB.
MESSAGE_SIZE_BUCKETS = (1024.0, 4096.0, 524288.0, 1048576.0, 2097152.0, 4194304.0)


class LatencyHistogram:
    """Request latencies per (request code, response code): bucket counts, their sum and
    count, kept by the router and read by the metrics endpoint at scrape time. One
    bisect and three additions a request, on the event loop's thread."""

    def __init__(self, buckets_ms: tuple[float, ...] = RPC_LATENCY_BUCKETS_MS) -> None:
        self.buckets_ms = buckets_ms
        # (request code, response code) -> [count per bucket (+Inf last)..., sum_ms]
        self._table: dict[tuple[int, int], list[float]] = {}

    def record(self, request_code: int, response_code: int, elapsed_ms: float) -> None:
        key = (request_code, response_code)
        row = self._table.get(key)
        if row is None:
            row = self._table[key] = [0.0] * (len(self.buckets_ms) + 2)
        row[bisect.bisect_left(self.buckets_ms, elapsed_ms)] += 1
        row[-1] += elapsed_ms

    def snapshot(self) -> dict[tuple[int, int], tuple[list[int], float]]:
        """Per key: the count in each bucket (not cumulative; +Inf last) and the sum."""
        return {
            key: ([int(c) for c in row[:-1]], row[-1]) for key, row in list(self._table.items())
        }


class BrokerStats:
    """The broker's counters."""

    def __init__(self, clock: Callable[[], int] = now_s) -> None:
        self.clock = clock
        self.boot_ms = int(time.time() * 1000)
        self.put = RateCounter(clock)
        self.get = RateCounter(clock)
        self.found = RateCounter(clock)  # pulls that found messages (getFoundTps)
        # store reads of pulls that found nothing (getMissTps): a held pull counts its
        # first read and the one after its wakeup or timeout, as RocketMQ's getMessage does
        self.missed = RateCounter(clock)
        # BrokerStats' totals at the last two midnights (roll_day moves them).
        self.put_today_morning = self.get_today_morning = 0
        self.put_yesterday_morning = self.get_yesterday_morning = 0
        self._day = time.localtime().tm_yday
        self._group_get: dict[tuple[str, str], RateCounter] = {}
        self._items: dict[tuple[str, str], StatsItem] = {}
        self._topic_put: dict[str, Traffic] = {}
        self._group_pulls: dict[tuple[str, str], Traffic] = {}  # (group, topic)
        # (group, topic, queue id) -> the next offset the group's last pull answered
        # (RocketMQ 5's pull offset: inflight = it - committed, ready = max - it).
        self._pull_offsets: dict[tuple[str, str, int], int] = {}
        self._send_backs: dict[tuple[str, str, bool], int] = {}  # (group, topic, to DLQ)
        # Set by the metrics endpoint: request latencies are timed only when scraped.
        self.rpc_latency: LatencyHistogram | None = None
        # Set with it: per topic, each send's bytes per message (rocketmq_message_size).
        self.message_sizes: dict[str, list[float]] | None = None
        self._lock = threading.Lock()

    def _item(self, name: str, key: str) -> StatsItem:
        with self._lock:
            item = self._items.get((name, key))
            if item is None:
                item = self._items[(name, key)] = StatsItem(self.clock)
            return item

    def stats_item(self, name: str, key: str) -> StatsSource | None:
        """getStatsItem: None for an item nothing was recorded in (BROKER_PUT_NUMS and
        BROKER_GET_NUMS always exist)."""
        if name in (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE):
            put = self._topic_put.get(key)
            if put is None:
                return None
            return TrafficItem(put, _MESSAGES if name == TOPIC_PUT_NUMS else _BYTES, _RECORDS)
        if name in (GROUP_GET_NUMS, GROUP_GET_SIZE, GROUP_GET_LATENCY):
            topic, _, group = key.rpartition("@")
            pulls = self._group_pulls.get((group, topic))
            if pulls is None:
                return None
            if name == GROUP_GET_LATENCY:
                return TrafficItem(pulls, _LATENCY, _LATENCY_RECORDS)
            return TrafficItem(pulls, _MESSAGES if name == GROUP_GET_NUMS else _BYTES, _RECORDS)
        if name in (BROKER_PUT_NUMS, BROKER_GET_NUMS):
            # (keyed by the cluster name: the caller checks the key)
            if name == BROKER_PUT_NUMS:
                return BrokerItem(lambda: list(self._topic_put.values()))
            return BrokerItem(lambda: list(self._group_pulls.values()))
        with self._lock:
            return self._items.get((name, key))

    def stored(self, topic: str, count: int, size: int = 0) -> None:
        """A send's ``count`` messages of ``size`` bytes (as written) stored in ``topic``."""
        self.put.add(count)
        put = self._topic_put.get(topic)
        if put is None:
            put = self._topic_put.setdefault(topic, Traffic(self.clock))
        put.record(count, size)
        sizes = self.message_sizes
        if sizes is not None and count > 0:
            # As BrokerMetricsManager records it: the send's bytes over its messages.
            row = sizes.get(topic)
            if row is None:
                row = sizes.setdefault(topic, [0.0] * (len(MESSAGE_SIZE_BUCKETS) + 2))
            average = size / count
            row[bisect.bisect_left(MESSAGE_SIZE_BUCKETS, average)] += 1
            row[-1] += average

    def pulled(
        self,
        group: str,
        topic: str,
        count: int,
        size: int = 0,
        queue_id: int = -1,
        next_offset: int = -1,
        latency_ms: int = -1,
    ) -> None:
        """A pull that found ``count`` messages (``size`` bytes); the queue's next offset
        and the time the pull took when the caller knows them."""
        self.get.add(count)
        self.found.add(1)
        key = (group, topic)
        counter = self._group_get.get(key)
        if counter is None:
            with self._lock:
                counter = self._group_get.setdefault(key, RateCounter(self.clock))
        counter.add(count)
        pulls = self._group_pulls.get(key)
        if pulls is None:
            pulls = self._group_pulls.setdefault(key, Traffic(self.clock))
        pulls.record(count, size, latency_ms)
        if next_offset >= 0:
            self._pull_offsets[(group, topic, queue_id)] = next_offset

    def sent_back(self, group: str, topic: str, to_dlq: bool) -> None:
        """A consumer's CONSUMER_SEND_MSG_BACK stored (incSendBackNums; RocketMQ 5's
        rocketmq_send_to_dlq_messages_total when it went to the DLQ)."""
        self._item(SNDBCK_PUT_NUMS, f"{topic}@{group}").add(1)
        key = (group, topic, to_dlq)
        self._send_backs[key] = self._send_backs.get(key, 0) + 1

    def group_get_tps(self, group: str, topic: str) -> float:
        """GROUP_GET_NUMS per second over the last minute (what ConsumeStats sums)."""
        with self._lock:
            counter = self._group_get.get((group, topic))
        return counter.tps(60) if counter is not None else 0.0

    def roll_day(self, day: int | None = None) -> None:
        """BrokerStats.record at midnight: today's morning totals become yesterday's and
        the current totals today's (the broker calls this every few seconds; only a new
        local day changes anything)."""
        day = time.localtime().tm_yday if day is None else day
        if day == self._day:
            return
        self._day = day
        self.put_yesterday_morning = self.put_today_morning
        self.get_yesterday_morning = self.get_today_morning
        self.put_today_morning = self.put.total
        self.get_today_morning = self.get.total

    # --- read by the metrics endpoint ---------------------------------------------------

    def topic_traffic(self) -> dict[str, Traffic]:
        """Messages and bytes stored per topic since start."""
        return dict(self._topic_put)

    def group_traffic(self) -> dict[tuple[str, str], Traffic]:
        """Messages and bytes pulled per (group, topic) since start."""
        return dict(self._group_pulls)

    def message_size_histograms(self) -> dict[str, tuple[list[int], float]]:
        """Per topic: sends per message-size bucket (not cumulative; +Inf last) and the
        sum of their bytes per message (empty unless the metrics endpoint is on)."""
        sizes = self.message_sizes or {}
        return {t: ([int(c) for c in row[:-1]], row[-1]) for t, row in list(sizes.items())}

    def pull_offsets(self) -> dict[tuple[str, str, int], int]:
        """(group, topic, queue id) -> the next offset its last pull answered."""
        return dict(self._pull_offsets)

    def send_backs(self) -> dict[tuple[str, str, bool], int]:
        """(group, topic, to DLQ) -> messages consumers sent back since start."""
        return dict(self._send_backs)
