"""The streaming reader through name servers (option ``namesrv``):
``spark.readStream.format("rocketstore").option("namesrv", ...).load()``.

Layer: spark (top). The driver asks the name servers for the routes and the brokers for
the queue bounds at every trigger (so queues and brokers that appear are read from their
first offset on); the executors pull a micro-batch's ranges as a batch read does
(:mod:`.network_scan`). Admission control (``maxOffsetsPerTrigger``,
``minOffsetsPerTrigger``/``maxTriggerDelay``, ``Trigger.AvailableNow``) is the file mode's
(:mod:`.offsets`, over (topic, broker, queue id) keys here).

Offsets live in Spark's checkpoint as ``{"Orders": {"broker-a:0": 12, ...}}`` (the next
queue offset per broker queue, the form the offsets options take), so a restarted query
reads each message once into an idempotent sink. With option ``group`` each committed
micro-batch's end offsets are also sent to that consumer group (UPDATE_CONSUMER_OFFSET) so
RocketMQ's tools show the lag; that is a report, never read back: the checkpoint stays the
source of truth.

The reader is pickled to the executors: it holds data only, and opens a :class:`Cluster`
per call.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from rocketstore.errors import ConfigError
from rocketstore.remoting.blocking import RemotingClientError
from rocketstore.spark import offsets as offs
from rocketstore.spark.network_cluster import (
    AccessDeniedError,
    Backoff,
    BrokerRoute,
    Cluster,
    ClusterError,
    readable_brokers,
)
from rocketstore.spark.network_plan import BrokerRange, ClusterView, resolve, selected_topics, split
from rocketstore.spark.network_scan import read_network_partition
from rocketstore.spark.options import StreamOptions

log = logging.getLogger(__name__)

NetKey = tuple[str, str, int]  # (topic, broker name, queue id)
NetOffsets = dict[NetKey, int]


class StreamCluster(ClusterView, Protocol):
    """What the stream asks a cluster: planning's questions plus the group commit."""

    def commit_offset(
        self, address: str, group: str, topic: str, queue_id: int, offset: int
    ) -> None: ...

    def register_group(self, address: str, group: str) -> None: ...

    def __enter__(self) -> StreamCluster: ...

    def __exit__(self, *exc: object) -> None: ...


def to_json(offsets: Mapping[NetKey, int]) -> dict[str, dict[str, int]]:
    """The checkpoint form, sorted (topic, broker, queue id): Spark compares it as text."""
    result: dict[str, dict[str, int]] = {}
    for topic, broker, qid in sorted(offsets):
        result.setdefault(topic, {})[f"{broker}:{qid}"] = offsets[(topic, broker, qid)]
    return result


def from_json(value: object) -> NetOffsets:
    """An offset Spark hands back; a malformed one (an edited checkpoint, or a file-mode
    checkpoint given to a network query) names itself."""
    if not isinstance(value, dict):
        raise ConfigError(f"streaming offset {value!r} is not a JSON object of topics")
    result: NetOffsets = {}
    for topic, queues in value.items():
        if not isinstance(queues, dict):
            raise ConfigError(f"streaming offset {value!r}: topic {topic!r} has no queue map")
        for name, offset in queues.items():
            broker, _, qid = str(name).rpartition(":")
            if not broker or not qid.isdigit():
                raise ConfigError(
                    f"streaming offset {value!r}: queue {name!r} is not 'broker:queueId' (a "
                    "checkpoint of a query that read a store directory cannot be resumed "
                    "through name servers)"
                )
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
                raise ConfigError(f"streaming offset {value!r}: {topic}/{name} is not >= 0")
            result[(str(topic), broker, int(qid))] = offset
    return result


@dataclass(frozen=True)
class BrokerLoss(offs.Loss):
    broker: str = ""

    def describe(self) -> str:
        return (
            f"topic {self.topic!r} queue {self.broker}:{self.queue_id}: offsets "
            f"[{self.first}, {self.end}) are gone ({self.why})"
        )


def latest_ends(
    start: Mapping[NetKey, int], maxes: Mapping[NetKey, int], fail_on_data_loss: bool
) -> NetOffsets:
    """As :func:`.offsets.latest_ends`: the brokers' max offsets; a queue whose max fell
    below the start (re-created) keeps the start, and is data loss."""
    ends: NetOffsets = dict(start)
    losses = []
    for key, high in maxes.items():
        begin = start.get(key, 0)
        if high < begin:
            why = f"the queue went back to {high}"
            losses.append(BrokerLoss(key[0], key[2], high, begin, why, broker=key[1]))
            ends[key] = begin
        else:
            ends[key] = high
    offs.report_losses(losses, fail_on_data_loss)
    return ends


def plan_ranges(
    start: Mapping[NetKey, int],
    end: Mapping[NetKey, int],
    mins: Mapping[NetKey, int],
    fail_on_data_loss: bool,
) -> list[tuple[NetKey, int, int]]:
    """As :func:`.offsets.plan_ranges`: [first, end) per queue; a start below the broker's
    min offset (retention removed what the query still needed) is data loss. A queue new
    to the query (not in ``start``) starts at 0."""
    ranges = []
    losses = []
    for key in sorted(end):
        first, last = start.get(key, 0), end[key]
        if last <= first:
            continue
        low = mins.get(key, first)
        if low > first:
            losses.append(
                BrokerLoss(key[0], key[2], first, min(low, last), "removed by retention", key[1])
            )
            first = low
        if last > first:
            ranges.append((key, first, last))
    offs.report_losses(losses, fail_on_data_loss)
    return ranges


def _monotonic_ms() -> float:
    return time.monotonic() * 1000


class NetworkStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(
        self,
        options: StreamOptions,
        clock_ms: Callable[[], float] = _monotonic_ms,
        cluster: Callable[[str], StreamCluster] | None = None,
        sleep_s: Callable[[float], None] = time.sleep,
    ) -> None:
        self.options = options
        self._clock_ms = clock_ms
        self._sleep_s = sleep_s
        # (a partial, not a lambda: the reader is pickled to the executors)
        self._cluster: Callable[[str], StreamCluster] = cluster or functools.partial(
            Cluster,
            credentials=options.read.credentials,
            broker_down_wait_ms=options.read.broker_down_wait_ms,
        )
        # The brokers last routed, by (topic, broker name): where ranges are pulled from
        # and groups committed to.
        self._brokers: dict[tuple[str, str], BrokerRoute] = {}
        self._target: NetOffsets | None = None  # Trigger.AvailableNow's end
        self._latest: NetOffsets | None = None
        self._group_sent: NetOffsets | None = None  # the offsets last sent to option group
        self._registered: set[str] = set()  # masters that had option group's heartbeat
        self._gate = (
            None
            if options.min_offsets_per_trigger is None
            else offs.TriggerGate(options.min_offsets_per_trigger, options.max_trigger_delay_ms)
        )

    # --- the cluster --------------------------------------------------------------------

    def _queues(self, cluster: StreamCluster) -> dict[NetKey, BrokerRoute]:
        """Every queue to read now, from the routes (new brokers and queues included)."""
        read = self.options.read
        explicit = read.selection.topics is not None or read.selection.assign is not None
        queues: dict[NetKey, BrokerRoute] = {}
        for topic in selected_topics(cluster, read):
            try:
                brokers = readable_brokers(cluster.route(topic))
            except ConfigError:
                if explicit:
                    raise
                continue  # listed, then deleted
            for broker in brokers:
                self._brokers[(topic, broker.name)] = broker
                for qid in range(broker.read_queue_nums):
                    if read.selection.accepts(topic, qid):
                        queues[(topic, broker.name, qid)] = broker
        return queues

    def _bound(self, cluster: StreamCluster, broker: BrokerRoute, key: NetKey, which: str) -> int:
        """GET_MIN_OFFSET (``which`` "min") or GET_MAX_OFFSET of one queue; a broker that
        does not answer fails the call naming it."""
        topic, _, qid = key
        ask = cluster.min_offset if which == "min" else cluster.max_offset
        try:
            return ask(broker.preferred, topic, qid)
        except AccessDeniedError:
            raise  # the keys, not the broker: waiting or resuming would not help
        except (RemotingClientError, ClusterError) as e:
            raise ClusterError(
                f"broker {broker.name} ({broker.preferred}) of topic {topic!r} did not answer "
                f"for the {which} offset of queue {qid}: the micro-batch fails and nothing is "
                f"lost; the query resumes from its checkpoint once the broker is back "
                f"(option brokerDownWaitMs waits for it instead) ({e})"
            ) from e

    def _max_offsets(self, cluster: StreamCluster) -> NetOffsets:
        queues = self._queues(cluster)
        return {key: self._bound(cluster, broker, key, "max") for key, broker in queues.items()}

    def _broker(self, cluster: StreamCluster, topic: str, name: str) -> BrokerRoute:
        """The route of a broker a planned micro-batch reads; one the name servers no
        longer route is asked for again with backoff for up to brokerDownWaitMs."""
        found = self._brokers.get((topic, name))
        backoff = Backoff(self.options.read.broker_down_wait_ms, sleep_s=self._sleep_s)
        while found is None:
            self._queues(cluster)
            found = self._brokers.get((topic, name))
            if found is not None or not backoff.again():
                break
        if found is None:
            raise ClusterError(
                f"broker {name} is not routed for topic {topic!r} by the name servers "
                f"{self.options.read.namesrv}: the micro-batch that reads its queues fails "
                "(nothing is lost); the query resumes once the broker is back"
            )
        return found

    # --- Spark's calls ------------------------------------------------------------------

    def initialOffset(self) -> dict[str, Any]:  # noqa: N802
        """Where a new query starts (``startingOffsets`` etc.; default latest)."""
        start: NetOffsets = {}
        with self._cluster(self.options.read.namesrv) as cluster:
            for key, broker in self._queues(cluster).items():
                low = self._bound(cluster, broker, key, "min")
                high = self._bound(cluster, broker, key, "max")
                bound = self.options.read.start
                start[key] = resolve(cluster, bound, key[0], broker, key[2], low, high)
        return to_json(start)

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger is not None:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:  # noqa: N802
        """As the file mode's stream (:class:`.stream.RocketStoreStreamReader`)."""
        begin = from_json(start)
        with self._cluster(self.options.read.namesrv) as cluster:
            maxes = self._max_offsets(cluster)
            self._commit_group(cluster, begin)
        ends = latest_ends(begin, maxes, self.options.fail_on_data_loss)
        self._latest = maxes
        if self._target is not None:
            ends = offs.cap(ends, self._target)
        if isinstance(limit, ReadAllAvailable):
            return to_json(offs.admit(begin, ends, None))
        gate = self._gate if self._target is None else None
        if gate is not None and not gate.admits(offs.new_offsets(begin, ends), self._clock_ms()):
            return to_json(begin)
        max_rows = (
            limit.max_rows
            if isinstance(limit, ReadMaxRows)
            else self.options.max_offsets_per_trigger
        )
        return to_json(offs.admit(begin, ends, max_rows))

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802
        with self._cluster(self.options.read.namesrv) as cluster:
            self._target = self._max_offsets(cluster)

    def reportLatestOffset(self) -> dict[str, Any] | None:  # noqa: N802
        if self._latest is None:
            with self._cluster(self.options.read.namesrv) as cluster:
                self._latest = self._max_offsets(cluster)
        return to_json(self._latest)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin, finish = from_json(start), from_json(end)
        wanted = [key for key in sorted(finish) if finish[key] > begin.get(key, 0)]
        mins: NetOffsets = {}
        brokers: dict[NetKey, BrokerRoute] = {}
        with self._cluster(self.options.read.namesrv) as cluster:
            for key in wanted:
                broker = brokers[key] = self._broker(cluster, key[0], key[1])
                mins[key] = self._bound(cluster, broker, key, "min")
        ranges = plan_ranges(begin, finish, mins, self.options.fail_on_data_loss)
        read = self.options.read
        return split(
            [BrokerRange(key[0], brokers[key], key[2], first, last) for key, first, last in ranges],
            read.max_records_per_partition,
            read.min_partitions,
            self.options.fail_on_data_loss,
        )

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_network_partition(partition, self.options.read)

    def _commit_group(self, cluster: StreamCluster, done: NetOffsets) -> None:
        """With option ``group``: ``done`` to that consumer group, on each queue's master.

        Sent from latestOffset(), whose start is the end of the last micro-batch Spark
        has committed (batches run one after another; a restarted query re-runs an
        unfinished batch before it asks again). Spark's own commit(end) comes only when
        the next batch is planned, so the last batch of a Trigger.AvailableNow run would
        never reach the group. A failure is logged, not raised: the checkpoint has the
        offsets, and the next trigger sends them again."""
        group = self.options.group
        if group is None or done == self._group_sent:
            return
        failures = list(_commit_group(cluster, self._brokers, group, done, self._registered))
        for failure in failures:
            log.warning("option group=%s: %s (the checkpoint keeps the offsets)", group, failure)
        if not failures:
            self._group_sent = dict(done)


def _commit_group(
    cluster: StreamCluster,
    brokers: Mapping[tuple[str, str], BrokerRoute],
    group: str,
    offsets: Mapping[NetKey, int],
    registered: set[str],
) -> Iterable[str]:
    """UPDATE_CONSUMER_OFFSET for every queue; the failures, described. A master not in
    ``registered`` first gets the group's heartbeat (its retry topic; see
    ``register_group``), once per query run: a failed one is reported (and sent again
    with the next commit) and the commits go on."""
    for (topic, name, qid), offset in sorted(offsets.items()):
        broker = brokers.get((topic, name))
        master = broker.master if broker is not None else None
        if master is None:
            yield f"no master of broker {name} is routed: {topic} queue {qid} not committed"
            continue
        if master not in registered:
            try:
                cluster.register_group(master, group)
                registered.add(master)
            except (RemotingClientError, ClusterError) as e:
                yield f"heartbeat to broker {name} ({master}) failed: {e}"
        try:
            cluster.commit_offset(master, group, topic, qid, offset)
        except (RemotingClientError, ClusterError) as e:
            yield f"commit to broker {name} ({master}) failed: {e}"
