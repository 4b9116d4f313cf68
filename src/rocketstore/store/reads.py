"""The MessageStore facade's reads: pulls (get_messages), look-ups by offset, id, key and
time, queue and CommitLog bounds, and what a stopped store lacks.

Layer: store (the facade's package; see base.py).
"""

from __future__ import annotations

from rocketstore.errors import ConfigError
from rocketstore.format.cq_ext import ExtUnit, is_ext_address
from rocketstore.format.message import MessageExt
from rocketstore.format.message_id import decode_offset_msg_id
from rocketstore.format.selector import TAG
from rocketstore.format.subscription import Subscription, build_subscription
from rocketstore.java_ints import JAVA_INT_MAX, JAVA_LONG_MAX, int_argument
from rocketstore.read_path import GetResult, PulledRecords
from rocketstore.recovery.recover import missing_files
from rocketstore.status import Boundary
from rocketstore.store.base import StoreBase, queue_arguments
from rocketstore.store.queue_table import UndispatchedRecord, first_undispatched


class StoreReads(StoreBase):
    """MessageStore's reads."""

    def get_messages(
        self,
        group: str,
        topic: str,
        queue_id: int,
        queue_offset: int,
        max_count: int = 32,
        tags: str | None = None,
        expression_type: str = TAG,
    ) -> GetResult:
        """RocketMQ's getMessage: statuses, batch limits and next_begin_offset as spec 10.
        ``tags`` is the subscription's expression: tags (``TagA || TagB``) or, with
        ``expression_type`` SQL92, a selector on the messages' properties (SelectorError
        when it does not parse)."""
        if tags is not None and not isinstance(tags, str):
            raise ConfigError(f"tags must be a str or None, got {type(tags).__name__}")
        if not isinstance(expression_type, str):
            raise ConfigError(
                "expression_type must be a str (TAG or SQL92), got "
                f"{type(expression_type).__name__}"
            )
        subscription = build_subscription(tags, expression_type)
        return self.get_matching_messages(
            group, topic, queue_id, queue_offset, max_count, subscription
        )

    def get_matching_messages(
        self,
        group: str,
        topic: str,
        queue_id: int,
        queue_offset: int,
        max_count: int,
        subscription: Subscription,
    ) -> GetResult:
        """``get_messages`` with a subscription already built (``build_subscription``, or
        one whose property filter a broker supplies)."""
        queue_arguments(topic, queue_id)
        queue_offset = int_argument("queue_offset", queue_offset)
        max_count = int_argument("max_count", max_count)
        self._check_open((topic, queue_id))
        if max_count <= 0:
            raise ConfigError(f"max_count must be positive, got {max_count}")
        # (RocketMQ's maxMsgNums is a Java int; more cannot change the answer)
        max_count = min(max_count, JAVA_INT_MAX)
        return self.reader.get(self._queue(topic, queue_id), queue_offset, max_count, subscription)

    def get_matching_records(
        self,
        group: str,
        topic: str,
        queue_id: int,
        queue_offset: int,
        max_count: int,
        subscription: Subscription,
    ) -> PulledRecords:
        """``get_matching_messages`` answered as a broker answers a pull: the same status and
        offsets, with the found records' stored bytes back to back instead of messages (a
        pull for every tag decodes none)."""
        queue_arguments(topic, queue_id)
        queue_offset = int_argument("queue_offset", queue_offset)
        max_count = int_argument("max_count", max_count)
        self._check_open((topic, queue_id))
        if max_count <= 0:
            raise ConfigError(f"max_count must be positive, got {max_count}")
        max_count = min(max_count, JAVA_INT_MAX)
        return self.reader.get_records(
            self._queue(topic, queue_id), queue_offset, max_count, subscription
        )

    def look_message(self, commit_log_offset: int) -> MessageExt | None:
        commit_log_offset = int_argument("commit_log_offset", commit_log_offset)
        self._check_open(queues=False)
        return self.reader.look(commit_log_offset)

    def missing_commitlog_files(self) -> str | None:
        """What CommitLog files are missing (a gap, or queues and index pointing past the
        last file: a storePathCommitLog directory not there), or None. A writer opened
        with ``cut_damaged_commitlog=False`` refuses such a store; a reader reads what is
        there, and the CLI warns with this."""
        self._check_open(queues=False)
        return missing_files(self.commitlog, self.queues, self.index)

    def undispatched_record(self, probe: int = 64) -> UndispatchedRecord | None:
        """The first record past every consume queue's last unit that should have a unit
        of its own (not a PREPARED or ROLLBACK one), or None when the queues cover the
        CommitLog. Such a record in a store that was shut down cleanly means its queues are
        gone (removed, or never written: a RocketMQ 5 broker keeping its queues in RocksDB)
        or the broker stopped before building them. Looks at ``probe`` records at most
        past the queues' end, so it costs little on a store whose queues are all gone."""
        probe = int_argument("probe", probe)
        # No refresh of every queue: the question is about a stopped store, whose queues
        # the open has just read (a live writer's would move on anyway).
        self._check_open(queues=False)
        if self.config.enable_dledger_commit_log:
            return None  # DLedger entries frame the records; recovery dispatches those
        return first_undispatched(self.commitlog, self._queue_table, probe)

    def ext_unit(self, topic: str, queue_id: int, address: int) -> ExtUnit | None:
        """The ConsumeQueueExt unit a unit's tagsCode points to, when it is an extension
        address (a broker with enableConsumeQueueExt wrote the queue: format.cq_ext);
        None when it is not one or the unit cannot be found or read (logged; `check`
        reports damaged units)."""
        queue_arguments(topic, queue_id)
        address = int_argument("address", address)
        self._check_open(queues=False)
        if not is_ext_address(address):
            return None
        return self._queue_table.ext_unit(topic, queue_id, address)

    def view_message(self, msg_id: str) -> MessageExt | None:
        """Find a message by offsetMsgId (store host + CommitLog offset)."""
        if not isinstance(msg_id, str):
            raise ConfigError(f"msg_id must be a str, got {type(msg_id).__name__}")
        self._check_open(queues=False)
        _host, offset = decode_offset_msg_id(msg_id)
        return self.reader.look(offset)

    def query_messages(
        self,
        topic: str,
        key: str,
        max_count: int = 32,
        begin_ms: int = 0,
        end_ms: int = JAVA_LONG_MAX,
    ) -> list[MessageExt]:
        """Messages of ``topic`` whose KEYS contain ``key`` and whose store time lies in
        [begin_ms, end_ms], oldest first (at most ``max_count``, the newest ones)."""
        if self._closed or self.read_only:  # (the common case without a call)
            self._check_open(queues=False)
        return self.queries.by_key(topic, key, max_count, begin_ms, end_ms)

    def query_by_unique_key(
        self, topic: str, uniq_key: str, max_count: int | None = None
    ) -> list[MessageExt]:
        """Messages of ``topic`` whose UNIQ_KEY is ``uniq_key``, oldest first: at most
        ``max_count`` (default ``default_query_max_num``, RocketMQ's 32)."""
        self._check_open(queues=False)
        return self.queries.by_unique_key(topic, uniq_key, max_count)

    def offset_by_time(
        self, topic: str, queue_id: int, timestamp_ms: int, boundary: str | Boundary = "lower"
    ) -> int:
        queue_arguments(topic, queue_id)
        timestamp_ms = int_argument("timestamp_ms", timestamp_ms)
        if not isinstance(boundary, (str, Boundary)):
            raise ConfigError(
                f"boundary must be 'lower', 'upper' or a Boundary, got {type(boundary).__name__}"
            )
        self._check_open((topic, queue_id))
        which = Boundary.parse(boundary)
        queue = self._queue(topic, queue_id)
        if queue is None:
            return 0
        return queue.offset_by_time(
            timestamp_ms,
            which,
            self.commitlog.store_time_at,
            max(self.commitlog.min_offset(), 0),
            self.commitlog.files,
        )

    def min_offset(self, topic: str, queue_id: int) -> int:
        queue_arguments(topic, queue_id)
        self._check_open((topic, queue_id))
        queue = self._queue(topic, queue_id)
        return queue.min_offset() if queue else 0

    def max_offset(self, topic: str, queue_id: int) -> int:
        queue_arguments(topic, queue_id)
        self._check_open((topic, queue_id))
        queue = self._queue(topic, queue_id)
        return queue.max_offset() if queue else 0

    def min_commit_log_offset(self) -> int:
        self._check_open(queues=False)
        return self.commitlog.min_offset()

    def max_commit_log_offset(self) -> int:
        self._check_open(queues=False)
        return self.commitlog.max_offset()

    def topics(self) -> dict[str, list[int]]:
        self._check_open()
        result: dict[str, list[int]] = {}
        for topic, qid in sorted(self.queues):
            result.setdefault(topic, []).append(qid)
        return result

    def message_store_time(self, topic: str, queue_id: int, queue_offset: int) -> int:
        """Store time of the message at a queue offset, -1 if there is none."""
        queue_arguments(topic, queue_id)
        queue_offset = int_argument("queue_offset", queue_offset)
        self._check_open((topic, queue_id))
        queue = self._queue(topic, queue_id)
        unit = queue.unit(queue_offset) if queue else None
        if unit is None or not unit.is_valid:
            return -1
        return self.commitlog.store_time_at(unit.commit_log_offset, unit.size)
