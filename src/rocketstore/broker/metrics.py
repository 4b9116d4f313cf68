"""The Prometheus endpoint (``--metrics-listen``): RocketMQ 5's metric names and labels
(BrokerMetricsManager, DefaultStoreMetricsManager, RemotingMetricsManager) where they
exist, and rocketstore's own beside them.

Layer: broker. A prometheus_client collector reads the broker's counters
(:class:`~rocketstore.broker.stats.BrokerStats`), the consumer offsets and the store's
public methods when scraped, so the send and pull paths do no more than count; only
request latencies are timed per request, and only while an endpoint is on. The HTTP
server is prometheus_client's (a thread of its own): a slow scrape never holds up the
broker's event loop.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import (
    CollectorRegistry,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    start_http_server,
)
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from rocketstore.broker.codes import RequestCode, ResponseCode
from rocketstore.broker.stats import MESSAGE_SIZE_BUCKETS
from rocketstore.config import parse_host
from rocketstore.store.timer import TIMER_TOPIC

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from rocketstore.broker.context import BrokerContext

log = logging.getLogger(__name__)

RETRY_PREFIX = "%RETRY%"
SYSTEM_GROUP_PREFIX = "CID_RMQ_SYS_"  # MixAll.CID_RMQ_SYS_PREFIX
# Queues whose lag latency a scrape looks up (one store read each): past this, the
# gauge covers the first ones of each group and topic.
LAG_LATENCY_MAX_QUEUES = 64

# The labels every RocketMQ 5 broker metric carries (BrokerMetricsManager.LABEL_MAP).
BASE_LABELS = ("cluster", "node_type", "node_id")


def _code_name(code: int, names: type[RequestCode] | type[ResponseCode]) -> str:
    """RemotingHelper.getRequestCodeDesc / getResponseCodeDesc: the field's name in lower
    case, the number for a code without one."""
    try:
        return names(code).name.lower()
    except ValueError:
        return str(code)


def _bool(value: bool) -> str:
    return "true" if value else "false"


class BrokerCollector(Collector):
    """Everything /metrics shows, read at scrape time."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    def _base(self) -> list[str]:
        return [self.ctx.cluster_name, "broker", self.ctx.broker_name]

    def _is_system(self, topic: str, group: str = "") -> bool:
        return self.ctx.topics.is_system_topic(topic) or group.startswith(SYSTEM_GROUP_PREFIX)

    def collect(self) -> Iterator[Metric]:
        started = time.perf_counter()
        yield from self._broker()
        yield from self._traffic()
        yield from self._consumers()
        yield from self._latency()
        yield from self._store()
        yield from self._timer()
        yield from self._replication()
        took = GaugeMetricFamily(
            "rocketstore_metrics_scrape_seconds",
            "Time this scrape took to gather the broker's and store's figures",
            labels=BASE_LABELS,
        )
        took.add_metric(self._base(), time.perf_counter() - started)
        yield took

    # --- the broker ---------------------------------------------------------------------

    def _broker(self) -> Iterator[Metric]:
        ctx, base = self.ctx, self._base()
        perm = GaugeMetricFamily(
            "rocketmq_broker_permission", "Broker permission", labels=BASE_LABELS
        )
        perm.add_metric(base, ctx.config.broker_permission)
        yield perm
        topics = GaugeMetricFamily(
            "rocketmq_topic_number", "Active topic number", labels=BASE_LABELS
        )
        topics.add_metric(base, len(ctx.topics.all()))
        yield topics
        groups = GaugeMetricFamily(
            "rocketmq_consumer_group_number",
            "Active subscription group number",
            labels=BASE_LABELS,
        )
        groups.add_metric(base, len(ctx.groups.all()))
        yield groups
        labels: tuple[str, ...] = (*BASE_LABELS, "language", "version")
        producers = GaugeMetricFamily(
            "rocketmq_producer_connections", "Producer connections", labels=labels
        )
        counts: dict[tuple[str, str], int] = {}
        for group in ctx.clients.producer_groups():
            for channel in ctx.clients.producer_channels(group):
                key = (channel.language.lower(), str(channel.version))
                counts[key] = counts.get(key, 0) + 1
        for (language, version), count in sorted(counts.items()):
            producers.add_metric([*base, language, version], count)
        yield producers
        labels = (*BASE_LABELS, "consumer_group", "language", "version", "consume_mode")
        consumers = GaugeMetricFamily(
            "rocketmq_consumer_connections", "Consumer connections", labels=labels
        )
        for group in sorted(ctx.clients.consumer_groups()):
            info = ctx.clients.consumer_group(group)
            if info is None:
                continue
            mode = "push" if info.consume_type == "CONSUME_PASSIVELY" else "pull"
            per: dict[tuple[str, str], int] = {}
            for channel in info.clients.values():
                key = (channel.language.lower(), str(channel.version))
                per[key] = per.get(key, 0) + 1
            for (language, version), count in sorted(per.items()):
                consumers.add_metric([*base, group, language, version, mode], count)
        yield consumers

    # --- messages in and out --------------------------------------------------------------

    def _traffic(self) -> Iterator[Metric]:
        base, stats = self._base(), self.ctx.stats
        labels: tuple[str, ...] = (*BASE_LABELS, "topic", "is_system")
        messages_in = CounterMetricFamily(
            "rocketmq_messages_in", "Total number of incoming messages", labels=labels
        )
        bytes_in = CounterMetricFamily(
            "rocketmq_throughput_in", "Total traffic of incoming messages", labels=labels
        )
        for topic, traffic in sorted(stats.topic_traffic().items()):
            values = [*base, topic, _bool(self._is_system(topic))]
            messages_in.add_metric(values, traffic.messages)
            bytes_in.add_metric(values, traffic.bytes)
        yield messages_in
        yield bytes_in
        sizes = HistogramMetricFamily(
            "rocketmq_message_size",
            "Incoming messages size (bytes as written, per message of each send)",
            labels=labels,
        )
        bounds = [*(f"{b:g}" for b in MESSAGE_SIZE_BUCKETS), "+Inf"]
        for topic, (counts, total) in sorted(stats.message_size_histograms().items()):
            cumulative, buckets = 0, []
            for bound, count in zip(bounds, counts, strict=True):
                cumulative += count
                buckets.append((bound, float(cumulative)))
            sizes.add_metric([*base, topic, _bool(self._is_system(topic))], buckets, total)
        yield sizes
        labels = (*BASE_LABELS, "topic", "consumer_group", "is_retry", "is_system")
        messages_out = CounterMetricFamily(
            "rocketmq_messages_out", "Total number of outgoing messages", labels=labels
        )
        bytes_out = CounterMetricFamily(
            "rocketmq_throughput_out", "Total traffic of outgoing messages", labels=labels
        )
        for (group, topic), traffic in sorted(stats.group_traffic().items()):
            values = [
                *base,
                topic,
                group,
                _bool(topic.startswith(RETRY_PREFIX)),
                _bool(self._is_system(topic, group)),
            ]
            messages_out.add_metric(values, traffic.messages)
            bytes_out.add_metric(values, traffic.bytes)
        yield messages_out
        yield bytes_out
        labels = (*BASE_LABELS, "topic", "consumer_group")
        dlq = CounterMetricFamily(
            "rocketmq_send_to_dlq_messages", "Consumer send to DLQ messages", labels=labels
        )
        back = CounterMetricFamily(
            "rocketstore_send_back_messages",
            "Messages consumers sent back for a retry (DLQ ones included)",
            labels=labels,
        )
        sent_back: dict[tuple[str, str], int] = {}
        for (group, topic, to_dlq), count in sorted(stats.send_backs().items()):
            sent_back[(group, topic)] = sent_back.get((group, topic), 0) + count
            if to_dlq:
                dlq.add_metric([*base, topic, group], count)
        for (group, topic), count in sorted(sent_back.items()):
            back.add_metric([*base, topic, group], count)
        yield dlq
        yield back
        yield from self._transactions()

    def _timer(self) -> Iterator[Metric]:
        """RocketMQ 5's timer gauges (DefaultStoreMetricsManager: getEnqueueBehindMessages,
        getDequeueBehindMillis) and the wheel's totals, when the timer store runs; its
        counters read as they are (runtime_info's rates move a mark, so not through it)."""
        timer = self.ctx.timer
        if timer is None:
            return
        base = self._base()
        queue = self.ctx.store.queue_view(TIMER_TOPIC, 0)
        high = queue.max_offset() if queue is not None else 0
        gauges = (
            ("rocketmq_timer_enqueue_lag", "Timer enqueue messages lag",
             max(high - timer.queue_offset, 0)),
            ("rocketmq_timer_dequeue_latency", "Timer dequeue latency (ms the wheel's read "
             "time is behind now)", max(timer.clock() - timer.read_time_ms, 0)),
        )  # fmt: skip
        for name, text, value in gauges:
            gauge = GaugeMetricFamily(name, text, labels=BASE_LABELS)
            gauge.add_metric(base, value)
            yield gauge
        for name, text, total in (
            ("rocketstore_timer_enqueued", "Timer messages put into the wheel", timer.enqueued),
            ("rocketstore_timer_delivered", "Timer messages put into their topics when due",
             timer.delivered),
        ):  # fmt: skip
            counter = CounterMetricFamily(name, text, labels=BASE_LABELS)
            counter.add_metric(base, total)
            yield counter

    def _transactions(self) -> Iterator[Metric]:
        """RocketMQ 5's EndTransactionProcessor counts, by the messages' real topic."""
        base, labels = self._base(), (*BASE_LABELS, "topic")
        commits = CounterMetricFamily(
            "rocketmq_commit_messages", "Total number of commit messages", labels=labels
        )
        rollbacks = CounterMetricFamily(
            "rocketmq_rollback_messages", "Total number of rollback messages", labels=labels
        )
        service = self.ctx.transactions
        ended = service.ended_counts() if service is not None else {}
        for (topic, committed), count in sorted(ended.items()):
            (commits if committed else rollbacks).add_metric([*base, topic], count)
        yield commits
        yield rollbacks

    # --- consumers' progress --------------------------------------------------------------

    def _consumers(self) -> Iterator[Metric]:
        """ConsumerLagCalculator for pull consumers: lag = max offset - committed offset,
        inflight = pulled to - committed, ready = max - pulled to (per group and topic);
        lag latency = how long the oldest unconsumed message has waited."""
        ctx, base = self.ctx, self._base()
        labels = (*BASE_LABELS, "topic", "consumer_group", "is_retry", "is_system")
        lag = GaugeMetricFamily(
            "rocketmq_consumer_lag_messages", "Consumer lag messages", labels=labels
        )
        inflight = GaugeMetricFamily(
            "rocketmq_consumer_inflight_messages", "Consumer inflight messages", labels=labels
        )
        ready = GaugeMetricFamily(
            "rocketmq_consumer_ready_messages", "Consumer ready messages", labels=labels
        )
        latency = GaugeMetricFamily(
            "rocketmq_consumer_lag_latency",
            "Consumer lag time (milliseconds the oldest unconsumed message has waited)",
            labels=labels,
        )
        pulled_to = ctx.stats.pull_offsets()
        now_ms = int(time.time() * 1000)
        for (topic, group), committed in sorted(ctx.offsets.table().items()):
            config = ctx.topics.get(topic)
            if config is None:
                continue
            total_lag = total_inflight = total_ready = 0
            oldest_ms = 0
            looked = 0
            for queue_id in range(config.read_queue_nums):
                high = max(ctx.store.max_offset(topic, queue_id), 0)
                done = committed.get(queue_id)
                if done is None:
                    done = max(ctx.store.min_offset(topic, queue_id), 0)
                done = min(max(done, 0), high)
                pulled = min(max(pulled_to.get((group, topic, queue_id), done), done), high)
                total_lag += high - done
                total_inflight += pulled - done
                total_ready += high - pulled
                if high > done and looked < LAG_LATENCY_MAX_QUEUES:
                    looked += 1
                    stored_ms = ctx.store.message_store_time(topic, queue_id, done)
                    if stored_ms > 0:
                        oldest_ms = max(oldest_ms, now_ms - stored_ms)
            values = [
                *base,
                topic,
                group,
                _bool(topic.startswith(RETRY_PREFIX)),
                _bool(self._is_system(topic, group)),
            ]
            lag.add_metric(values, total_lag)
            inflight.add_metric(values, total_inflight)
            ready.add_metric(values, total_ready)
            latency.add_metric(values, oldest_ms)
        yield lag
        yield inflight
        yield ready
        yield latency

    # --- request latency ------------------------------------------------------------------

    def _latency(self) -> Iterator[Metric]:
        histogram = self.ctx.stats.rpc_latency
        if histogram is None:
            return
        labels = (*BASE_LABELS, "protocol_type", "request_code", "response_code")
        family = HistogramMetricFamily(
            "rocketmq_rpc_latency",
            "Request latency from read to answer, milliseconds",
            labels=labels,
        )
        bounds = [*(f"{b:g}" for b in histogram.buckets_ms), "+Inf"]
        for (request, response), (counts, total) in sorted(histogram.snapshot().items()):
            cumulative, buckets = 0, []
            for bound, count in zip(bounds, counts, strict=True):
                cumulative += count
                buckets.append((bound, float(cumulative)))
            values = [
                *self._base(),
                "remoting",
                _code_name(request, RequestCode),
                _code_name(response, ResponseCode),
            ]
            family.add_metric(values, buckets, total)
        yield family

    # --- the store ------------------------------------------------------------------------

    def _store(self) -> Iterator[Metric]:
        store, base = self.ctx.store, self._base()
        stats = store.stats()
        labels = (*BASE_LABELS, "storage_type", "storage_medium")
        values = [*base, "local", "disk"]

        def gauge(name: str, text: str, value: float) -> GaugeMetricFamily:
            family = GaugeMetricFamily(name, text, labels=labels)
            family.add_metric(values, value)
            return family

        def counter(name: str, text: str, value: float) -> CounterMetricFamily:
            family = CounterMetricFamily(name, text, labels=labels)
            family.add_metric(values, value)
            return family

        usage = shutil.disk_usage(store.commitlog_dirs.writable[0])
        yield gauge("rocketmq_storage_size", "Broker storage size", usage.total - usage.free)
        yield gauge(
            "rocketstore_disk_ratio",
            "Share of the CommitLog's disk in use (brokerStatus's commitLogDiskRatio)",
            (usage.total - usage.free) / usage.total if usage.total else 0.0,
        )
        yield gauge(
            "rocketmq_storage_flush_behind_bytes",
            "Broker flush behind bytes",
            max(0, stats.commit_log_max_offset - stats.commit_log_flushed_offset),
        )
        yield gauge(
            "rocketmq_storage_dispatch_behind_bytes",
            "Broker dispatch behind bytes",
            stats.dispatch_lag_bytes,
        )
        low, high = stats.commit_log_min_offset, stats.commit_log_max_offset
        earliest = store.commitlog_store_time(low) if high > low else 0
        if earliest > 0:
            yield gauge(
                "rocketmq_storage_message_reserve_time",
                "Broker message reserve time (milliseconds since the oldest message)",
                int(time.time() * 1000) - earliest,
            )
        yield gauge("rocketstore_commitlog_min_offset", "CommitLog min offset", low)
        yield gauge("rocketstore_commitlog_max_offset", "CommitLog max offset", high)
        yield gauge("rocketstore_commitlog_files", "CommitLog files", stats.commit_log_files)
        yield counter(
            "rocketstore_messages_put",
            "Messages the broker stored since start (every topic)",
            self.ctx.stats.put.total,
        )
        yield counter("rocketstore_flushes", "CommitLog flushes (msyncs)", stats.flushes)
        yield counter(
            "rocketstore_flush_seconds",
            "Time spent in CommitLog flushes (over rocketstore_flushes: the mean latency)",
            stats.flush_seconds,
        )
        yield counter(
            "rocketstore_group_commit_requests",
            "SYNC_FLUSH puts handed to the group commit",
            stats.group_commit_requests,
        )
        yield counter(
            "rocketstore_group_commit_syncs",
            "Group commit syncs (requests over syncs: the mean batch)",
            stats.group_commit_syncs,
        )
        yield gauge("rocketstore_index_files", "Index files", stats.index_files)
        yield gauge(
            "rocketstore_index_fill_ratio",
            "Entries in the newest index file over its capacity (maxIndexNum)",
            stats.index_entries / stats.index_capacity if stats.index_capacity else 0.0,
        )
        yield gauge(
            "rocketstore_recovery_seconds",
            "How long the recovery at open took",
            stats.recovery_seconds,
        )
        yield gauge(
            "rocketstore_recovery_abnormal",
            "1 when the store was opened after a crash (abnormal recovery)",
            int(stats.recovery_abnormal),
        )
        yield gauge(
            "rocketstore_recovery_records_scanned",
            "CommitLog records the recovery at open checked",
            stats.recovery_records_scanned,
        )
        yield counter(
            "rocketstore_damaged_records_skipped",
            "Pulled units whose CommitLog record was unreadable",
            stats.damaged_records_skipped,
        )
        yield gauge(
            "rocketstore_writeable", "1 while the store accepts writes", int(stats.writeable)
        )

    # --- replication ----------------------------------------------------------------------

    def _replication(self) -> Iterator[Metric]:
        master, slave, base = self.ctx.replication, self.ctx.replication_slave, self._base()
        if master is not None:
            info = master.runtime_info()
            slaves = GaugeMetricFamily(
                "rocketstore_ha_slave_connections", "Slaves connected", labels=BASE_LABELS
            )
            slaves.add_metric(base, int(info["haConnections"]))
            yield slaves
            behind = GaugeMetricFamily(
                "rocketstore_ha_slave_behind_bytes",
                "Bytes the furthest-behind slave still lacks (0 without a slave)",
                labels=BASE_LABELS,
            )
            behind.add_metric(base, int(info["haSlaveFallBehindBytes"]))
            yield behind
        if slave is not None:
            info = slave.runtime_info()
            connected = GaugeMetricFamily(
                "rocketstore_ha_connected_to_master",
                "1 while this slave is connected to its master",
                labels=BASE_LABELS,
            )
            connected.add_metric(base, int(info["haConnectedToMaster"] == "true"))
            yield connected
            reported = GaugeMetricFamily(
                "rocketstore_ha_reported_offset",
                "CommitLog offset this slave last reported to its master",
                labels=BASE_LABELS,
            )
            reported.add_metric(base, int(info["haReportedOffset"]))
            yield reported


class _LateCollector(Collector):
    """A BrokerCollector once the broker has its context (the endpoint listens before the
    store is opened, so a taken port fails the start before anything is opened)."""

    def __init__(self, context: Callable[[], BrokerContext | None]) -> None:
        self.context = context

    def collect(self) -> Iterator[Metric]:
        ctx = self.context()
        if ctx is not None:
            yield from BrokerCollector(ctx).collect()


class MetricsServer:
    """``--metrics-listen``: /metrics in Prometheus text format over HTTP, on a thread."""

    def __init__(self, context: Callable[[], BrokerContext | None], listen: str) -> None:
        self.context = context
        self.listen = listen
        self.registry = CollectorRegistry(auto_describe=False)
        self.address = ""
        self._server: WSGIServer | None = None

    def start(self) -> None:
        host, port = parse_host(self.listen, what="metrics listen address")
        # The process's CPU, memory, open files and GC beside the broker's own.
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self.registry.register(_LateCollector(self.context))
        try:
            self._server, _thread = start_http_server(port, host, self.registry)
        except OSError as e:
            raise OSError(e.errno, f"cannot listen on {self.listen}: {e.strerror}") from e
        bound_host, bound_port = self._server.server_address[:2]
        bound_host = bound_host.decode() if isinstance(bound_host, bytes) else bound_host
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        self.address = f"{shown}:{bound_port}"
        log.info("metrics at http://%s/metrics", self.address)

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
