"""Message rates over time for the console's charts.

Layer: console. Live, from the broker's own counters (messages put and pulled per second
over the last ten minutes, the figures its metrics and stats items report); offline, the
messages stored per interval over the store's whole span, counted from the consume
queues by store time (no get rate: a store keeps no history of its reads).
"""

from __future__ import annotations

import time

from rocketstore.broker.stats import RateCounter
from rocketstore.console.charts import Point
from rocketstore.console.source import Snapshot

STEP_S = 10  # live: one point per ten seconds
LIVE_WINDOW_S = 600
BUCKETS = 60  # offline: the store's span in this many intervals
# Offline: queues counted at most (each interval is a binary search per queue).
MAX_QUEUES = 256


def live_series(counter: RateCounter) -> list[Point]:
    """Messages per second, averaged over each STEP_S of the last ten minutes; the points
    carry wall-clock times."""
    now_clock = counter.clock()
    now_ms = int(time.time() * 1000)
    first = now_clock - LIVE_WINDOW_S + 1
    sums = [0] * (LIVE_WINDOW_S // STEP_S)
    for second, count in counter.per_second():
        if second >= first:
            sums[min((second - first) // STEP_S, len(sums) - 1)] += count
    points = []
    for index, total in enumerate(sums):
        end_clock = first + (index + 1) * STEP_S - 1
        points.append((now_ms - (now_clock - end_clock) * 1000, total / STEP_S))
    return points


def stored_series(snap: Snapshot) -> tuple[list[Point], int]:
    """Messages stored per second in each of BUCKETS intervals over the store's span, and
    the interval's length in ms (0: no message)."""
    store = snap.store
    queues = [
        (topic, queue_id)
        for topic, ids in sorted(store.topics().items())
        for queue_id in ids
        if store.max_offset(topic, queue_id) > store.min_offset(topic, queue_id)
    ][:MAX_QUEUES]
    if not queues:
        return [], 0
    firsts, lasts = [], []
    for topic, queue_id in queues:
        low, high = store.min_offset(topic, queue_id), store.max_offset(topic, queue_id)
        firsts.append(store.message_store_time(topic, queue_id, low))
        lasts.append(store.message_store_time(topic, queue_id, high - 1))
    begin = min((t for t in firsts if t > 0), default=0)
    end = max(lasts) + 1
    if begin <= 0 or end <= begin:
        return [], 0
    step = max((end - begin + BUCKETS - 1) // BUCKETS, 1)
    edges = [begin + i * step for i in range(BUCKETS + 1)]
    counts = [0] * BUCKETS
    for topic, queue_id in queues:
        offsets = [store.offset_by_time(topic, queue_id, edge) for edge in edges[1:-1]]
        offsets = [store.min_offset(topic, queue_id), *offsets, store.max_offset(topic, queue_id)]
        for i in range(BUCKETS):
            counts[i] += max(offsets[i + 1] - offsets[i], 0)
    return [(edges[i], counts[i] * 1000 / step) for i in range(BUCKETS)], step
