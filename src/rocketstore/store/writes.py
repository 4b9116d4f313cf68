"""The MessageStore facade's puts: one message, a batch, columns, and their submitted
(future-answered) forms; the work is write_path.WritePath's.

Layer: store (the facade's package; see base.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import Future

from rocketstore.crashpoints import any_armed
from rocketstore.format.message import Message
from rocketstore.put_columns import (
    DEFAULT_BORN_HOST,
    Columns,
    ColumnsResult,
    IntColumn,
    TextColumn,
)
from rocketstore.put_path import PutResult
from rocketstore.store.base import StoreBase
from rocketstore.store.write_path import ReplicationGate


class StoreWrites(StoreBase):
    """MessageStore's puts."""

    def put(
        self,
        msg: Message,
        store_timestamp: int | None = None,
        store_host: str | None = None,
        *,
        delay: bool = True,
    ) -> PutResult:
        """Append one message. Expected failures come back as ``PutResult.status``.

        A message with a DELAY level goes to SCHEDULE_TOPIC_XXXX (spec 1.7) unless
        ``delay`` is False: the schedule service delivers due messages that way, with DELAY
        still in their properties, as RocketMQ's records have it."""
        if self._closed or self.read_only:  # (the common case without a call)
            self._check_writable()
        if store_timestamp is not None or store_host is not None:
            store_timestamp = self._writes.checked_arguments(store_timestamp, store_host)
        if (
            # (a broker names its own address, the store's host: the same record)
            (store_host is None or store_host == self.config.store_host)
            and self.config.flush_disk_type == "ASYNC_FLUSH"
            and not any_armed()
            and self.running_flags.writeable
            and not self._writes.wraps(msg)
        ):
            # The common single put in one C call: nothing to wait for after the append.
            # (Here rather than in the write path: a call less on the hottest put.)
            done = self.preparer.put_one(self.commitlog, msg, store_timestamp)
            if done is not None:
                return done
        return self._writes.put(msg, store_timestamp, store_host, delay)

    def put_batch(
        self,
        msgs: Sequence[Message],
        store_timestamp: int | None = None,
        store_host: str | None = None,
    ) -> list[PutResult]:
        """Append messages as one batch: one store timestamp, contiguous in one file.

        Any invalid message fails the whole batch (nothing is written).
        """
        self._check_writable()
        return self._writes.put_batch(msgs, store_timestamp, store_host)

    def put_columns(
        self,
        topic: str,
        bodies: Sequence[bytes],
        *,
        queue_ids: IntColumn = 0,
        keys: TextColumn = None,
        tags: TextColumn = None,
        properties: Sequence[Mapping[str, str] | None] | None = None,
        property_columns: Mapping[str, TextColumn] | None = None,
        born_timestamp: int | None = None,
        born_host: str = DEFAULT_BORN_HOST,
        store_timestamp: int | None = None,
        store_host: str | None = None,
        flags: IntColumn = 0,
        sys_flag: int = 0,
        reconsume_times: int = 0,
        property_texts: Sequence[str] | None = None,
    ) -> ColumnsResult:
        """Append many messages of ``topic`` given as columns, without a Message per row
        (docs/api.md). Row i is ``Message(topic, bodies[i], queue_id=queue_ids[i],
        properties=...)`` with ``properties[i]``'s names, then KEYS ``keys[i]``, TAGS
        ``tags[i]`` and each of ``property_columns`` (a str for a column is every row's
        value, an int ``queue_ids`` every row's queue; a None value leaves the name out).

        The rows go in as consecutive batches, each what ``put_batch`` of its rows writes;
        a batch is appended once its rows (and the row after it) pass ``put_batch``'s
        checks, so a refusal (the result's status, its reason naming the row and the
        argument) stops the call with the batches before it stored (``stored`` rows).
        ConfigError for a column that is not one value per body.

        ``flags`` (an int for every row or one per row), ``sys_flag`` and
        ``reconsume_times`` are the rows' Message fields; ``property_texts``, instead of
        the other property arguments, gives each row's properties string to store as it
        is (``VerbatimProperties``: how a broker stores the entries of a batch send)."""
        self._check_writable()
        store_timestamp = self._writes.checked_arguments(store_timestamp, store_host)
        columns = Columns.of(
            topic,
            bodies,
            queue_ids=queue_ids,
            keys=keys,
            tags=tags,
            properties=properties,
            property_columns=property_columns,
            born_timestamp=born_timestamp,
            born_host=born_host,
            flags=flags,
            sys_flag=sys_flag,
            reconsume_times=reconsume_times,
            property_texts=property_texts,
        )
        return self._writes.put_columns(columns, store_timestamp, store_host)

    def submit(
        self,
        msg: Message,
        store_timestamp: int | None = None,
        store_host: str | None = None,
        *,
        delay: bool = True,
    ) -> Future[PutResult]:
        """``put`` that appends now and answers through a future, for callers that must
        not block (an event loop): with SYNC_FLUSH the group commit thread completes it
        once the message is durable (its status FLUSH_DISK_TIMEOUT when that failed);
        otherwise it is complete on return. Messages submitted while a sync runs share
        the next one.

        With a replication gate (``set_replication_gate``: a SYNC_MASTER broker's) it
        also waits for the gate's verdict: PUT_OK once a slave has the message,
        otherwise FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE (the message stays stored,
        as RocketMQ answers)."""
        self._check_submittable()
        return self._writes.submit(msg, store_timestamp, store_host, delay=delay)

    def submit_batch(
        self,
        msgs: Sequence[Message],
        store_timestamp: int | None = None,
        store_host: str | None = None,
    ) -> Future[list[PutResult]]:
        """``put_batch`` answered through a future, as ``submit``."""
        self._check_submittable()
        return self._writes.submit_batch(msgs, store_timestamp, store_host)

    def set_replication_gate(self, gate: ReplicationGate | None) -> None:
        """Have ``submit`` and ``submit_batch`` answer only once ``gate`` has replicated
        what they appended (None: flushed as configured is enough). ``put`` and the
        other blocking puts do not wait for it: one made on the thread that serves the
        gate (a broker's event loop) could never be answered; a broker waits for its
        gate after such puts itself. Setting one on a closed or read-only store raises."""
        if gate is not None:
            self._check_writable()
        self._writes.replication_gate = gate
