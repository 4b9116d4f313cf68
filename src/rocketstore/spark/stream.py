"""The streaming reader: ``spark.readStream.format("rocketstore").load(path)``.

Layer: spark (top). Offsets, admission control and data-loss rules are pure functions in
:mod:`.offsets`; this class asks the read-only store for queue offsets (on the driver,
in the long-lived Python process Spark keeps for a streaming source) and reads a
micro-batch's ranges like a batch read (:mod:`.scan`, on the executors).

The store is never written from here: a broker or another process may append while the
query runs; every call re-reads what it appended since the last one (the read-only
store's incremental refresh). Spark's ``commit(end)`` needs no action: the offsets live
in the query's checkpoint, not in the store.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from rocketstore.spark import offsets as offs
from rocketstore.spark.options import StreamOptions
from rocketstore.spark.plan import resolve_bound, split_ranges
from rocketstore.spark.pushdown import Pushed
from rocketstore.spark.scan import open_store, read_partition


class RocketStoreStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: StreamOptions) -> None:
        read = dataclasses.replace(options.read, path=os.path.abspath(options.read.path))
        self.options = dataclasses.replace(options, read=read)
        self._target: offs.Offsets | None = None  # Trigger.AvailableNow's end

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
        rows = self.options.max_offsets_per_trigger
        return ReadAllAvailable() if rows is None else ReadMaxRows(rows)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:  # noqa: N802
        begin = offs.from_json(start)
        ends = offs.latest_ends(begin, self._max_offsets(), self.options.fail_on_data_loss)
        if self._target is not None:
            ends = offs.cap(ends, self._target)
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return offs.to_json(offs.admit(begin, ends, max_rows))

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802
        self._target = self._max_offsets()

    def reportLatestOffset(self) -> dict[str, Any] | None:  # noqa: N802
        return offs.to_json(self._max_offsets())

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        store = open_store(self.options.read)
        begin, finish = offs.from_json(start), offs.from_json(end)
        present = {(t, q) for t, qids in store.topics().items() for q in qids}
        low = {key: store.min_offset(*key) for key in finish if key in present}
        ranges = offs.plan_ranges(begin, finish, low, self.options.fail_on_data_loss)
        read = self.options.read
        return split_ranges(
            ranges,
            read.max_records_per_partition,
            read.min_partitions,
            self.options.fail_on_data_loss,
        )

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_partition(partition, self.options.read, Pushed())
