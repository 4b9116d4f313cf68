"""The streaming reader: ``spark.readStream.format("rocketstore").load(path)``.

Layer: spark (top). Offsets, admission control and data-loss rules are pure functions in
:mod:`.offsets`; this class asks the read-only store for queue offsets (on the driver,
in the long-lived Python process Spark keeps for a streaming source) and reads a
micro-batch's ranges like a batch read (:mod:`.scan`, on the executors).

The store is never written from here: a broker or another process may append while the
query runs; every call re-reads what it appended since the last one (the read-only
store's incremental refresh). Spark's ``commit(end)`` needs no action: the offsets live
in the query's checkpoint, not in the store.

The reader object lives as long as the query run (Spark keeps the process), which is what
lets ``minOffsetsPerTrigger``/``maxTriggerDelay`` remember when the last batch ran.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NoReturn

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from rocketstore.errors import ConfigError
from rocketstore.spark import offsets as offs
from rocketstore.spark.options import StreamOptions
from rocketstore.spark.plan import pack_queue_partitions, resolve_bound, split_ranges
from rocketstore.spark.pushdown import Pushed
from rocketstore.spark.scan import open_store, read_partition


def _monotonic_ms() -> float:
    return time.monotonic() * 1000


class RocketStoreStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(
        self, options: StreamOptions, clock_ms: Callable[[], float] = _monotonic_ms
    ) -> None:
        read = dataclasses.replace(options.read, path=os.path.abspath(options.read.path))
        self.options = dataclasses.replace(options, read=read)
        self._target: offs.Offsets | None = None  # Trigger.AvailableNow's end
        # The store's offsets the last latestOffset() saw: what reportLatestOffset() gives
        # Spark's progress (as Kafka's source reports the offsets it fetched for the batch).
        self._latest: offs.Offsets | None = None
        self._clock_ms = clock_ms
        self._gate = (
            None
            if options.min_offsets_per_trigger is None
            else offs.TriggerGate(options.min_offsets_per_trigger, options.max_trigger_delay_ms)
        )

    def _queues(self) -> list[offs.QueueKey]:
        store = open_store(self.options.read)
        store.refresh()  # once per call from Spark: new queues show up at once
        return self.options.read.selection.select(store.topics())

    def _max_offsets(self) -> offs.Offsets:
        store = open_store(self.options.read)
        return {key: store.max_offset(*key) for key in self._queues()}

    def initialOffset(self) -> dict[str, Any]:  # noqa: N802
        """Where a new query starts (``startingOffsets`` / ``startingTimestamp``; default
        latest). A restarted query starts from its checkpoint instead."""
        store = open_store(self.options.read)
        start: offs.Offsets = {}
        for topic, qid in self._queues():
            low, high = store.min_offset(topic, qid), store.max_offset(topic, qid)
            start[(topic, qid)] = resolve_bound(
                store, self.options.read.start, topic, qid, low, high
            )
        return offs.to_json(start)

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802
        """pyspark's Python sources take one ReadLimit (no composite as Kafka's): the
        maximum when given, else the minimum. Spark hands it back to latestOffset(), which
        applies both options unless Spark asks for everything (ReadAllAvailable)."""
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger is not None:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:  # noqa: N802
        begin = offs.from_json(start)
        store_max = self._max_offsets()
        ends = offs.latest_ends(begin, store_max, self.options.fail_on_data_loss)
        # Reported as it is, past an AvailableNow target too (Kafka's source reports the
        # target there): the lag is the store's, whatever this run will read.
        self._latest = store_max
        if self._target is not None:
            ends = offs.cap(ends, self._target)
        if isinstance(limit, ReadAllAvailable):  # e.g. Trigger.Once: the options do not apply
            return offs.to_json(offs.admit(begin, ends, None))
        # Trigger.AvailableNow reads what is there and stops: holding a batch back would
        # end the run with the rest unread (pyspark's ReadMinRows warns of this).
        gate = self._gate if self._target is None else None
        if gate is not None and not gate.admits(offs.new_offsets(begin, ends), self._clock_ms()):
            return offs.to_json(begin)
        max_rows = (
            limit.max_rows
            if isinstance(limit, ReadMaxRows)
            else self.options.max_offsets_per_trigger
        )
        return offs.to_json(offs.admit(begin, ends, max_rows))

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802
        self._target = self._max_offsets()

    def reportLatestOffset(self) -> dict[str, Any] | None:  # noqa: N802
        """The ``latestOffset`` of the query's progress: the store's max offsets that
        latestOffset() saw (Spark asks right after it), so ``latestOffset`` minus
        ``endOffset`` is how far the query is behind (:mod:`.progress`)."""
        latest = self._max_offsets() if self._latest is None else self._latest
        return offs.to_json(latest)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        store = open_store(self.options.read)
        begin, finish = offs.from_json(start), offs.from_json(end)
        present = {(t, q) for t, qids in store.topics().items() for q in qids}
        low = {key: store.min_offset(*key) for key in finish if key in present}
        ranges = offs.plan_ranges(begin, finish, low, self.options.fail_on_data_loss)
        read = self.options.read
        parts = split_ranges(
            ranges,
            read.max_records_per_partition,
            read.min_partitions,
            self.options.fail_on_data_loss,
        )
        return pack_queue_partitions(store, parts, read)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_partition(partition, self.options.read, Pushed())


class RefusedStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """A stream reader for options a stream cannot take (``endingOffsets``,
    ``mode=commitlog``): it raises their error from the first call Spark makes.

    ``load()`` cannot refuse them (Spark hands ``schema()`` the same options for a batch
    read, which takes them), and ``streamReader()`` must not raise either: pyspark 4.3's
    stream runner calls ``reader.stop()`` in a ``finally`` around it, so the error would be
    followed by ``UnboundLocalError: cannot access local variable 'reader'``."""

    def __init__(self, error: ConfigError) -> None:
        self.error = error

    def _refuse(self) -> NoReturn:
        raise self.error

    def initialOffset(self) -> dict[str, Any]:  # noqa: N802
        self._refuse()

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802
        self._refuse()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:  # noqa: N802
        self._refuse()

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802
        self._refuse()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        self._refuse()

    def read(self, partition: InputPartition) -> Iterator[Any]:
        self._refuse()
