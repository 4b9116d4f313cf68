"""Planning a batch read through name servers (option ``namesrv``): routes and queue
bounds -> small, picklable input partitions.

Layer: spark (top). Runs on the driver; every question goes to the cluster through a
:class:`ClusterView` (the real one is :class:`.network_cluster.Cluster`), so planning is
tested with an in-memory cluster, without Spark or sockets.

Two kinds of partition:

- :class:`NetworkPartition` ``(topic, broker, queue_id, start, end)``: queue offsets
  [start, end) of one broker's queue, pulled by an executor; split like the file mode's
  queue partitions (``maxRecordsPerPartition``, ``minPartitions``).
- :class:`NetworkKeyPartition`: the ``keys`` / ``uniqKeys`` options answered by
  QUERY_MESSAGE on one broker of one topic (no pull), the rows kept only inside that
  broker's planned queue ranges.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

from pyspark.sql.datasource import InputPartition

from rocketstore.errors import ConfigError
from rocketstore.spark.network_cluster import BrokerRoute, readable_brokers
from rocketstore.spark.options import EARLIEST, LATEST, Bound, ReadOptions

Addresses = tuple[tuple[int, str], ...]  # (broker id, address), master (id 0) first


class ClusterView(Protocol):
    """What planning asks a cluster (name servers and brokers)."""

    def topic_list(self) -> list[str]: ...

    def route(self, topic: str) -> list[BrokerRoute]: ...

    def min_offset(self, address: str, topic: str, queue_id: int) -> int: ...

    def max_offset(self, address: str, topic: str, queue_id: int) -> int: ...

    def offset_by_time(self, address: str, topic: str, queue_id: int, timestamp_ms: int) -> int: ...


@dataclass(frozen=True)
class NetworkPartition(InputPartition):
    topic: str
    broker: str  # brokerName
    addresses: Addresses
    queue_id: int
    start: int  # first queue offset
    end: int  # exclusive
    # A stream's partition: messages the broker no longer has fail the read (DataLossError)
    # instead of being stepped over (network_scan._cut_short).
    fail_on_data_loss: bool = False

    @property
    def count(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class NetworkKeyPartition(InputPartition):
    topic: str
    broker: str
    addresses: Addresses
    ranges: tuple[tuple[int, int, int], ...]  # (queue_id, start, end) to keep
    keys: tuple[str, ...]  # KEYS tokens looked up (when no uniq_keys) and then required
    uniq_keys: tuple[str, ...]  # UNIQ_KEYs looked up (the more selective lookup)


@dataclass(frozen=True)
class BrokerRange:
    topic: str
    broker: BrokerRoute
    queue_id: int
    start: int
    end: int


def selected_topics(cluster: ClusterView, options: ReadOptions) -> list[str]:
    """The topics named by ``topics`` / ``assign``, else the name servers' topic list less
    what the file mode leaves out by default (system topics), filtered by ``topicPattern``."""
    selection = options.selection
    if selection.topics is not None:
        return sorted(selection.topics)
    if selection.assign is not None:
        return sorted(selection.assign)
    return [t for t in cluster.topic_list() if selection.accepts_topic(t)]


def resolve(
    cluster: ClusterView,
    bound: Bound,
    topic: str,
    broker: BrokerRoute,
    queue_id: int,
    low: int,
    high: int,
) -> int:
    """A bound's queue offset for one broker's queue, clamped into [low, high]."""
    key = (topic, broker.name, queue_id)
    stamp = bound.broker_timestamps.get(key, bound.timestamp_ms)
    if stamp is not None:
        found = cluster.offset_by_time(broker.preferred, topic, queue_id, stamp)
        return min(max(found, low), high)
    value = bound.broker_offsets.get(key, bound.default)
    if value == EARLIEST:
        return low
    if value == LATEST:
        return high
    return min(max(value, low), high)


def _check_named_queues(
    options: ReadOptions, routes: dict[str, list[BrokerRoute]], explicit: bool
) -> None:
    """Queues named in the offsets options or ``assign`` that no broker of the topic has
    are mistakes in the options (a typo'd broker name), named rather than read as
    nothing."""
    have = {
        (topic, b.name, qid)
        for topic, brokers in routes.items()
        for b in brokers
        for qid in range(b.read_queue_nums)
    }
    named = [
        (which, key)
        for which, bound in (("startingOffsets", options.start), ("endingOffsets", options.end))
        for key in [*bound.broker_offsets, *bound.broker_timestamps]
    ]
    missing = sorted(f"{which} {t}/{b}:{q}" for which, (t, b, q) in named if (t, b, q) not in have)
    if missing:
        raise ConfigError(
            f"the offsets options name queues no broker serves: {', '.join(missing)} "
            f"(brokers: {_describe(routes)})"
        )
    assign = options.selection.assign
    if assign is not None and explicit:
        absent = [
            f"{topic} queue {qid}"
            for topic, qids in sorted(assign.items())
            for qid in sorted(qids)
            if not any(qid < b.read_queue_nums for b in routes.get(topic, []))
        ]
        if absent:
            raise ConfigError(
                f"option assign names queues no broker has: {'; '.join(absent)} "
                f"(brokers: {_describe(routes)})"
            )


def _describe(routes: dict[str, list[BrokerRoute]]) -> str:
    return "; ".join(
        f"{topic}: " + ", ".join(f"{b.name} ({b.read_queue_nums} queues)" for b in brokers)
        for topic, brokers in sorted(routes.items())
    )


def broker_ranges(cluster: ClusterView, options: ReadOptions) -> list[BrokerRange]:
    """The non-empty [start, end) of every broker queue to read, bounds resolved on the
    brokers that hold them (GET_MIN_OFFSET, GET_MAX_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP)."""
    explicit = options.selection.topics is not None or options.selection.assign is not None
    routes: dict[str, list[BrokerRoute]] = {}
    for topic in selected_topics(cluster, options):
        try:
            routes[topic] = readable_brokers(cluster.route(topic))
        except ConfigError:
            if explicit:
                raise
            continue  # listed, then deleted before its route was asked: nothing to read
    _check_named_queues(options, routes, explicit)
    ranges = []
    for topic, brokers in sorted(routes.items()):
        for broker in brokers:
            for qid in range(broker.read_queue_nums):
                if not options.selection.accepts(topic, qid):
                    continue
                address = broker.preferred
                low = cluster.min_offset(address, topic, qid)
                high = cluster.max_offset(address, topic, qid)
                start = resolve(cluster, options.start, topic, broker, qid, low, high)
                end = resolve(cluster, options.end, topic, broker, qid, low, high)
                if end > start:
                    ranges.append(BrokerRange(topic, broker, qid, start, end))
    return ranges


def split(
    ranges: list[BrokerRange],
    max_records: int | None,
    min_partitions: int | None,
    fail_on_data_loss: bool = False,
) -> list[NetworkPartition]:
    """One partition per range, cut as the file mode cuts queue ranges (plan.split_ranges):
    none longer than ``max_records``; pieces of about total / ``min_partitions`` when that
    asks for more partitions."""
    total = sum(r.end - r.start for r in ranges)
    piece: int | None = max_records
    if min_partitions and total and len(ranges) < min_partitions:
        even = math.ceil(total / min_partitions)
        piece = even if piece is None else min(piece, even)
    partitions = []
    for r in ranges:
        step = piece or (r.end - r.start)
        for first in range(r.start, r.end, step):
            last = min(first + step, r.end)
            partitions.append(
                NetworkPartition(
                    r.topic,
                    r.broker.name,
                    r.broker.addresses,
                    r.queue_id,
                    first,
                    last,
                    fail_on_data_loss,
                )
            )
    return partitions


def key_partitions(ranges: list[BrokerRange], options: ReadOptions) -> list[NetworkKeyPartition]:
    """One partition per (topic, broker): the keys are queried on every broker that holds
    the topic (a message is on one broker only, and its index is that broker's)."""
    by_broker: dict[tuple[str, str], list[BrokerRange]] = {}
    for r in ranges:
        by_broker.setdefault((r.topic, r.broker.name), []).append(r)
    uniq = tuple(sorted(options.uniq_keys)) if options.uniq_keys is not None else ()
    keys = tuple(sorted(options.keys)) if options.keys is not None else ()
    return [
        NetworkKeyPartition(
            topic,
            broker,
            group[0].broker.addresses,
            tuple((r.queue_id, r.start, r.end) for r in group),
            keys,
            uniq,
        )
        for (topic, broker), group in sorted(by_broker.items())
    ]


def plan_network_read(
    cluster: ClusterView, options: ReadOptions
) -> list[NetworkPartition | NetworkKeyPartition]:
    """The partitions of a batch read through name servers."""
    ranges = broker_ranges(cluster, options)
    if options.keys is not None or options.uniq_keys is not None:
        return [*key_partitions(ranges, options)]
    return [*split(ranges, options.max_records_per_partition, options.min_partitions)]
