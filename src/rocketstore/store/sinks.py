"""Where dispatched records go: the consume queues and the index, each a ``DispatchSink``
(RocketMQ's CommitLogDispatcher: CommitLogDispatcherBuildConsumeQueue and
CommitLogDispatcherBuildIndex), behind one ``StoreDispatch`` the dispatcher thread calls
with each run, which then tells the run's listeners (a broker's long polling).

Layer: store (the facade's package). The dispatcher (services.dispatcher) reads and checks
the CommitLog; this decides what a run of records writes. A failure marks the store
unwriteable (RocketMQ's WRITE_LOGICS_QUEUE_ERROR / WRITE_INDEX_FILE_ERROR) and stops the
dispatcher; nothing acknowledged is lost, since the CommitLog holds it and recovery
re-dispatches.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

import numpy as np
import numpy.typing as npt

from rocketstore.config import StoreConfig
from rocketstore.crashpoints import AFTER_DISPATCH_QUEUE_BEFORE_INDEX, crash_point
from rocketstore.format.dispatch_facts import DispatchFacts, dispatch_facts
from rocketstore.format.multi_dispatch import ExtraUnits, extra_units, merge_units
from rocketstore.format.record_scan import queue_runs
from rocketstore.index import IndexService
from rocketstore.paths import is_queue_dir_name
from rocketstore.services.dispatcher import DispatchRun
from rocketstore.status import RunningFlags
from rocketstore.store.queue_table import QueueTable

log = logging.getLogger(__name__)

# Called with each run once every sink has written it (``MessageStore.add_dispatch_listener``).
DispatchListener = Callable[[DispatchRun], None]


class DispatchSink(Protocol):
    """One structure built from the CommitLog, written a run of records at a time."""

    # What the store's running flags get when ``dispatch`` fails.
    failure_flag: RunningFlags

    def dispatch(
        self, run: DispatchRun, facts: DispatchFacts, offsets: npt.NDArray[np.int64]
    ) -> None:
        """Write what ``run``'s records (at CommitLog ``offsets``) give this structure."""


class QueueSink:
    """Consume queue units for a run: each queue's units in one write."""

    failure_flag = RunningFlags.WRITE_LOGICS_QUEUE_ERROR

    def __init__(self, root: str, table: QueueTable, config: Callable[[], StoreConfig]) -> None:
        self.root = root
        self.table = table
        self.config = config
        # The store time of the last record with units (the checkpoint's logics time).
        self.live_logics_timestamp = 0

    def dispatch(
        self, run: DispatchRun, facts: DispatchFacts, offsets: npt.NDArray[np.int64]
    ) -> None:
        records = run.records
        config = self.config()
        extra: dict[tuple[str, int], ExtraUnits] = {}
        if config.enable_multi_dispatch:
            extra = self._extra_units(run, enable_lmq=config.enable_lmq)
        for unit_run in queue_runs(records, offsets, facts.tags_codes):
            topic = run.topics.names[unit_run.topic_id]
            key = (topic, unit_run.queue_id)
            if key in extra or self.table.deleted_cutoff(*key) is not None:
                # Units of this queue's own records and those other records name, in
                # CommitLog order (RocketMQ writes both as it goes, record by record);
                # or a queue deleted on purpose, whose older records _put_units drops.
                own = unit_run.row_numbers()
                units = ExtraUnits(own, records.queue_offset[own])
                more = extra.pop(key, None)
                if more is not None:
                    units = merge_units(own, records.queue_offset[own], more)
                self._put_units(topic, unit_run.queue_id, run, offsets, facts, units)
                continue
            if not is_queue_dir_name(topic):
                log.warning(
                    "%s: %d record(s) from CommitLog offset %d name topic %r, which can "
                    "be no queue directory: left out of the queues (run `rocketstore "
                    "check`)",
                    self.root,
                    len(unit_run.row_numbers()),
                    int(offsets[unit_run.row_numbers()[0]]),
                    topic,
                )
                continue
            queue = self.table.get(topic, unit_run.queue_id, create=True)
            assert queue is not None
            if not queue.append_run(unit_run):
                rows = unit_run.row_numbers()
                queue.put_many(
                    offsets[rows],
                    records.size[rows],
                    facts.tags_codes[rows],
                    records.queue_offset[rows],
                )
        for (name, queue_id), units in extra.items():
            self._put_units(name, queue_id, run, offsets, facts, units)

    def _extra_units(
        self, run: DispatchRun, *, enable_lmq: bool
    ) -> dict[tuple[str, int], ExtraUnits]:
        """The units a run's multi-dispatch records add to the queues they name."""
        extra, problems = extra_units(run.data, run.records, enable_lmq=enable_lmq)
        for problem in problems:
            log.warning("%s: CommitLog offset %d + %s", self.root, run.base, problem)
        return extra

    def _put_units(
        self,
        topic: str,
        queue_id: int,
        run: DispatchRun,
        offsets: npt.NDArray[np.int64],
        facts: DispatchFacts,
        units: ExtraUnits,
    ) -> None:
        """Write units for records ``units.rows`` of ``run`` at ``units.queue_offsets``
        into one queue; the queue's rules drop repeats (a record naming its own queue).
        A queue deleted on purpose gets none for records from before its deletion (a
        re-dispatch from an earlier offset passes them)."""
        if not is_queue_dir_name(topic):
            log.warning(
                "%s: multi-dispatch queue %r can be no queue directory: left out", self.root, topic
            )
            return
        cutoff = self.table.deleted_cutoff(topic, queue_id)
        if cutoff is not None:
            keep = offsets[units.rows] >= cutoff
            units = ExtraUnits(units.rows[keep], units.queue_offsets[keep])
            if not len(units.rows):
                return
        queue = self.table.get(topic, queue_id, create=True)
        assert queue is not None
        rows = units.rows
        queue.put_many(
            offsets[rows], run.records.size[rows], facts.tags_codes[rows], units.queue_offsets
        )


class IndexSink:
    """Index entries for a run's keys, through ``put_keys_bulk``."""

    failure_flag = RunningFlags.WRITE_INDEX_FILE_ERROR

    def __init__(self, index: IndexService, after: Callable[[], None]) -> None:
        self.index = index
        self.after = after  # (the prefaulter's wake: the index may want its next file)

    def dispatch(
        self, run: DispatchRun, facts: DispatchFacts, offsets: npt.NDArray[np.int64]
    ) -> None:
        entries = facts.entries
        self.index.build_index_hashed(
            entries["key_hash"],
            entries["offset"] + run.base,
            entries["store_timestamp"],
            last_offset=int(offsets[-1]),
        )
        self.after()


class StoreDispatch:
    """The dispatcher's handler: one run's facts decoded once, each sink written in turn
    (queues first, so the checkpoint's logics time never runs ahead of the queues), then
    the listeners told."""

    def __init__(
        self,
        queues: QueueSink,
        index: IndexSink,
        config: Callable[[], StoreConfig],
        delay_levels_ms: list[int],
        on_failure: Callable[[RunningFlags], None],
    ) -> None:
        self.queues = queues
        self.index = index
        self.config = config
        self.delay_levels_ms = delay_levels_ms
        self.on_failure = on_failure
        self.listeners: list[DispatchListener] = []

    def __call__(self, run: DispatchRun) -> None:
        records = run.records
        index = self.config().message_index_enable
        try:
            facts = dispatch_facts(run.data, records, run.topics, self.delay_levels_ms, index=index)
            offsets = records.commit_log_offsets(run.base)
            self.queues.dispatch(run, facts, offsets)
        except Exception:
            # Any failure (a bug's too): the dispatcher stops, so puts must stop being
            # acknowledged rather than pile up where no queue shows them.
            self.on_failure(self.queues.failure_flag)
            raise
        self.queues.live_logics_timestamp = int(records.store_timestamp[-1])
        crash_point(AFTER_DISPATCH_QUEUE_BEFORE_INDEX)
        if index:
            self._write(self.index, run, facts, offsets)
        for listener in self.listeners:
            listener(run)

    def _write(
        self,
        sink: DispatchSink,
        run: DispatchRun,
        facts: DispatchFacts,
        offsets: npt.NDArray[np.int64],
    ) -> None:
        try:
            sink.dispatch(run, facts, offsets)
        except Exception:
            self.on_failure(sink.failure_flag)
            raise
