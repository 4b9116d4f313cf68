"""The write path: puts, batches, columns and submits appended to the CommitLog and
acknowledged as the flush policy says.

Layer: store (the facade's package). Checks (put_path), encoding (the C extension through
put_path) and the append (commitlog) live in the parts; this joins them: a put's arguments
checked, the store's running flags honoured, the message encoded or prepared, appended,
and answered once durable enough (SYNC_FLUSH: after the flusher's sync, or through the
group commit for a put that must not block) and, for a submit on a store given a
replication gate (a SYNC_MASTER broker's), once a slave has it. The facade checks that the
store is open and writable first.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Protocol

from rocketstore.commitlog_appends import Appended, EncodedBatch, PreparedMessage
from rocketstore.crashpoints import AFTER_APPEND_BEFORE_FLUSH, MID_BATCH_WRITE, armed, crash_point
from rocketstore.errors import ConfigError, StoreError
from rocketstore.format import record as rec
from rocketstore.format.message import BODY_TYPES, Message, message_problem
from rocketstore.format.multi_dispatch import (
    INNER_MULTI_DISPATCH,
    is_multi_dispatch,
    java_split,
    queue_keys,
    wrapped_properties,
)
from rocketstore.java_ints import JAVA_LONG_MAX, int_argument
from rocketstore.paths import is_queue_dir_name
from rocketstore.put_columns import (
    Columns,
    ColumnsResult,
    put_rows,
)
from rocketstore.put_path import PutResult, Refusal, encoded_results
from rocketstore.status import AppendStatus, PutStatus

if TYPE_CHECKING:
    from rocketstore.store.message_store import MessageStore

log = logging.getLogger(__name__)

Answer = Callable[[PutStatus], None]


class ReplicationGate(Protocol):
    """What a submit waits for besides the flush (``MessageStore.set_replication_gate``):
    a SYNC_MASTER's slaves (broker.ha_master.ReplicationMaster)."""

    def request(self, end_offset: int, done: Answer) -> None:
        """Call ``done(status)`` exactly once, from any thread, once the CommitLog up to
        ``end_offset`` is replicated (PUT_OK) or will not be in time (RocketMQ's
        FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE). Called from any thread; must not
        block."""
        ...


class WritePath:
    """The facade's puts, for one open writer (``store``: its settings and running flags,
    read at each put, and the parts it appends through)."""

    def __init__(self, store: MessageStore, delay_levels_ms: list[int]) -> None:
        self.store = store
        self.commitlog = store.commitlog
        self.preparer = store.preparer
        self.flusher = store.flusher
        self.group_commit = store.group_commit
        self.delay_levels_ms = delay_levels_ms
        # Submits wait for it besides the flush (MessageStore.set_replication_gate).
        self.replication_gate: ReplicationGate | None = None

    def put(
        self, msg: Message, store_timestamp: int | None, store_host: str | None, delay: bool
    ) -> PutResult:
        """``MessageStore.put`` past its one-call fast path."""
        results, end_offset = self.append_one(msg, store_timestamp, store_host, delay)
        return self.acknowledged(results, end_offset)[0]

    def put_batch(
        self,
        msgs: Sequence[Message],
        store_timestamp: int | None = None,
        store_host: str | None = None,
    ) -> list[PutResult]:
        """``MessageStore.put_batch`` once the store takes writes."""
        store_timestamp = self.checked_arguments(store_timestamp, store_host)
        results, end_offset = self._append_batch(msgs, store_timestamp, store_host)
        return self.acknowledged(results, end_offset)

    def put_columns(
        self, columns: Columns, store_timestamp: int | None, store_host: str | None
    ) -> ColumnsResult:
        """``MessageStore.put_columns`` once the store takes writes and its arguments
        passed their checks (``checked_arguments``, ``Columns.of``)."""
        if not self.store.running_flags.writeable:
            reason = self.store.running_flags.unwriteable_reason()
            return ColumnsResult(PutStatus.SERVICE_NOT_AVAILABLE, reason=reason)
        if not len(columns):
            return ColumnsResult(PutStatus.PUT_OK)
        # (The torn write a crash test arms is the Python append's: no C encoding then.)
        native_ok = not armed(MID_BATCH_WRITE)
        appends = put_rows(
            self.preparer, self.commitlog, columns, store_host, store_timestamp, native_ok=native_ok
        )
        status = PutStatus.PUT_OK
        if appends.end_offset is not None:
            crash_point(AFTER_APPEND_BEFORE_FLUSH)
            if self.store.config.flush_disk_type == "SYNC_FLUSH":
                status = self.flusher.flush_sync(appends.end_offset)
        # (A store host that encodes: rows were stored with it. Else prepare refused it.)
        stored_by = (
            self.preparer.host_bytes(store_host or self.store.config.store_host)
            if appends.stored
            else b""
        )
        return appends.result(status, stored_by)

    def submit(
        self,
        msg: Message,
        store_timestamp: int | None = None,
        store_host: str | None = None,
        *,
        delay: bool = True,
    ) -> Future[PutResult]:
        """``MessageStore.submit`` once the store takes submits."""
        store_timestamp = self.checked_arguments(store_timestamp, store_host)
        single: Future[PutResult] = _running_future()
        results, end_offset = self.append_one(msg, store_timestamp, store_host, delay)
        self._on_acknowledged(results, end_offset, lambda done: single.set_result(done[0]))
        return single

    def submit_batch(
        self,
        msgs: Sequence[Message],
        store_timestamp: int | None = None,
        store_host: str | None = None,
    ) -> Future[list[PutResult]]:
        """``MessageStore.submit_batch`` once the store takes submits."""
        store_timestamp = self.checked_arguments(store_timestamp, store_host)
        batch: Future[list[PutResult]] = _running_future()
        results, end_offset = self._append_batch(msgs, store_timestamp, store_host)
        self._on_acknowledged(results, end_offset, batch.set_result)
        return batch

    def checked_arguments(self, store_timestamp: object, store_host: object) -> int | None:
        """``store_timestamp`` as an int, after ConfigError for a put's arguments that no
        record can take: a store time that is not an int, is negative, or leaves no room
        for the longest delay level in a Java long (the dispatcher adds them for a delayed
        message's delivery time), and a ``store_host`` that is not a str."""
        if store_host is not None and not isinstance(store_host, str):
            raise ConfigError(
                f"store_host must be a str 'ip:port' or None, got {type(store_host).__name__}"
            )
        if store_timestamp is None:
            return None
        stamp = int_argument("store_timestamp", store_timestamp)
        latest = JAVA_LONG_MAX - max(self.delay_levels_ms)
        if not 0 <= stamp <= latest:
            raise ConfigError(
                f"store_timestamp must be in 0..{latest} (epoch ms; a store time plus the "
                f"longest delay level must fit a Java long), got {stamp}"
            )
        return stamp

    def append_one(
        self, msg: Message, store_timestamp: int | None, store_host: str | None, delay: bool
    ) -> tuple[list[PutResult], int | None]:
        """Append ``msg`` without waiting for a sync: its result (as a list of one) and
        the CommitLog end it needs durable (None: nothing appended)."""
        if not self.store.running_flags.writeable:
            reason = self.store.running_flags.unwriteable_reason()
            return [PutResult(PutStatus.SERVICE_NOT_AVAILABLE, reason=reason)], None
        if self.wraps(msg):
            return self._append_wrapped(msg, store_timestamp, store_host, delay)
        encoded = self._encode((msg,), store_host, in_batch=False)
        if encoded is not None:
            return self._append_encoded(encoded, store_timestamp)
        prepared = self.preparer.prepare(msg, store_host, delay=delay)
        if isinstance(prepared, Refusal):
            return [prepared.result()], None
        return self._append([prepared], store_timestamp)

    def wraps(self, msg: Message) -> bool:
        """A multi-dispatch message (``enable_multi_dispatch`` on and INNER_MULTI_DISPATCH
        not blank): its record depends on offsets known only under the put lock, so it
        takes ``_append_wrapped``, not the C encoder."""
        return (
            self.store.config.enable_multi_dispatch
            and isinstance(msg, Message)
            and isinstance(msg.properties, dict)
            # (a value that is no str is refused by prepare on the general path)
            and isinstance(msg.properties.get(INNER_MULTI_DISPATCH), str)
            and is_multi_dispatch(msg.properties)
        )

    def _append_wrapped(
        self, msg: Message, store_timestamp: int | None, store_host: str | None, delay: bool
    ) -> tuple[list[PutResult], int | None]:
        """``append_one`` for a multi-dispatch message (format.multi_dispatch), after the
        delay rewrite, as RocketMQ wraps it in doAppend."""
        # prepare checks the types too, but the rewrite and the queue names below read
        # the properties first.
        problem = message_problem(msg)
        if problem is not None:
            return [PutResult(PutStatus.MESSAGE_ILLEGAL, reason=problem)], None
        message = self.preparer.rewrite_delay(msg, delay=delay)
        names = java_split(message.properties[INNER_MULTI_DISPATCH])
        unusable = next((n for n in names if not is_queue_dir_name(n)), None)
        if unusable is not None:
            # RocketMQ would take it and fail (or stray outside consumequeue/) at dispatch,
            # leaving the store unwritable: refused before anything is appended.
            reason = f"{INNER_MULTI_DISPATCH} names {unusable!r}, which can be no queue directory"
            return [PutResult(PutStatus.MESSAGE_ILLEGAL, reason=reason)], None
        keys = queue_keys(
            message.properties, message.queue_id, enable_lmq=self.store.config.enable_lmq
        )

        def make(offsets: list[int]) -> PreparedMessage | Refusal:
            wrapped = dataclasses.replace(
                message, properties=wrapped_properties(message.properties, offsets)
            )
            return self.preparer.prepare(wrapped, store_host, delay=False)

        try:
            outcome = self.commitlog.append_wrapped(make, keys, store_timestamp)
        except (OSError, StoreError) as e:
            log.error("append failed: %s", e)
            return [PutResult(PutStatus.CREATE_MAPEDFILE_FAILED, reason=str(e))], None
        if isinstance(outcome, Refusal):
            return [outcome.result()], None
        return self._results([outcome])

    def _append_batch(
        self, msgs: Sequence[Message], store_timestamp: int | None, store_host: str | None
    ) -> tuple[list[PutResult], int | None]:
        """``append_one`` for ``put_batch`` and ``submit_batch`` (which check that the
        store takes writes)."""
        msgs = _batch_messages(msgs)
        if not msgs:
            return [], None
        if not self.store.running_flags.writeable:
            reason = self.store.running_flags.unwriteable_reason()
            status = PutStatus.SERVICE_NOT_AVAILABLE
            return [PutResult(status, reason=reason) for _ in msgs], None
        encoded = self._encode(msgs, store_host, in_batch=True)
        if encoded is not None:
            misfit = self._batch_misfit(encoded.body_bytes, len(encoded.blob))
            if misfit is not None:
                return [misfit.result() for _ in msgs], None
            return self._append_encoded(encoded, store_timestamp)
        prepared: list[PreparedMessage] = []
        for i, msg in enumerate(msgs):
            item = self.preparer.prepare(msg, store_host, in_batch=True)
            if isinstance(item, Refusal):
                refused = PutResult(item.status, reason=f"message {i} of the batch: {item.reason}")
                return [refused for _ in msgs], None
            prepared.append(item)
        body_bytes = sum(len(m.body) for m in msgs)
        misfit = self._batch_misfit(body_bytes, sum(p.length for p in prepared))
        if misfit is not None:
            return [misfit.result() for _ in msgs], None
        return self._append(prepared, store_timestamp)

    def _batch_misfit(self, body_bytes: int, record_bytes: int) -> Refusal | None:
        """Why a batch cannot be put whole, or None: its bodies must be within
        max_message_size and its records, with the 8 bytes of an END_OF_FILE blank, within
        one CommitLog file."""
        if body_bytes > self.store.config.max_message_size:
            return Refusal(
                PutStatus.MESSAGE_ILLEGAL,
                f"the batch's bodies take {body_bytes} bytes, over max_message_size "
                f"({self.store.config.max_message_size})",
            )
        file_size = self.store.config.mapped_file_size_commit_log
        if record_bytes + rec.END_FILE_MIN_BLANK_LENGTH > file_size:
            return Refusal(
                PutStatus.MESSAGE_ILLEGAL,
                f"the batch's records take {record_bytes} bytes, more than a CommitLog file "
                f"of {file_size} bytes holds",
            )
        return None

    def _encode(
        self, msgs: Sequence[Message], store_host: str | None, *, in_batch: bool
    ) -> EncodedBatch | None:
        """The C extension's encoding of ``msgs``, or None for the Python path (also
        taken while a crash test tears batches: that tear lives in the Python append)."""
        if armed(MID_BATCH_WRITE):
            return None
        return self.preparer.encode(msgs, store_host, in_batch=in_batch)

    def _append_encoded(
        self, encoded: EncodedBatch, store_timestamp: int | None
    ) -> tuple[list[PutResult], int | None]:
        """``_append`` for a batch the C extension encoded."""
        try:
            appended = self.commitlog.append_encoded(encoded, store_timestamp)
        except (OSError, StoreError) as e:
            log.error("append failed: %s", e)
            failed = PutResult(PutStatus.CREATE_MAPEDFILE_FAILED, reason=str(e))
            return [failed for _ in range(len(encoded))], None
        if appended is None:
            return [PutResult(PutStatus.UNKNOWN_ERROR) for _ in range(len(encoded))], None
        # The results are made before the wait: with SYNC_FLUSH the disk is already
        # writing the batch (MappedFile.write_batch started it), so this costs nothing.
        return encoded_results(encoded, appended, PutStatus.PUT_OK), appended.end_offset

    def _append(
        self, prepared: list[PreparedMessage], store_timestamp: int | None
    ) -> tuple[list[PutResult], int | None]:
        """Append prepared messages; their results, and the CommitLog end to make durable
        before they are acknowledged (None: nothing appended)."""
        try:
            appended = self.commitlog.append(prepared, store_timestamp)
        except (OSError, StoreError) as e:
            # Creating the next file failed (disk full, I/O error): nothing of this put
            # was written; the store stays usable for a retry once space is back.
            log.error("append failed: %s", e)
            return [
                PutResult(PutStatus.CREATE_MAPEDFILE_FAILED, reason=str(e)) for _ in prepared
            ], None
        return self._results(appended)

    @staticmethod
    def _results(appended: list[Appended]) -> tuple[list[PutResult], int | None]:
        """Put results of appended records, and the CommitLog end to make durable."""
        results = []
        end_offset: int | None = None
        for item in appended:
            if item.status is not AppendStatus.PUT_OK:
                results.append(PutResult(PutStatus.UNKNOWN_ERROR))
                continue
            end_offset = item.commit_log_offset + item.size
            results.append(
                PutResult(
                    PutStatus.PUT_OK,
                    commit_log_offset=item.commit_log_offset,
                    queue_offset=item.queue_offset,
                    msg_id=item.msg_id,
                    store_timestamp=item.store_timestamp,
                    size=item.size,
                )
            )
        return results, end_offset

    def acknowledged(self, results: list[PutResult], end_offset: int | None) -> list[PutResult]:
        """``results`` once the flush policy allows answering: the crash point between
        append and flush, then, with SYNC_FLUSH, the wait until the CommitLog is durable
        up to ``end_offset`` (None: nothing appended, nothing to wait for)."""
        if end_offset is None:
            return results
        crash_point(AFTER_APPEND_BEFORE_FLUSH)
        if self.store.config.flush_disk_type != "SYNC_FLUSH":
            return results
        return _with_status(results, self.flusher.flush_sync(end_offset))

    def _on_acknowledged(
        self,
        results: list[PutResult],
        end_offset: int | None,
        answer: Callable[[list[PutResult]], None],
    ) -> None:
        """``acknowledged`` without blocking: ``answer(results)`` now, or from the group
        commit thread once its sync covered ``end_offset``; with a replication gate, once
        the gate has answered too (the flush and the replication run side by side, as
        4.9.8's asyncPutMessage combines them; a failed flush keeps its status, else a
        failed replication gives its own)."""
        if end_offset is None:
            answer(results)
            return
        crash_point(AFTER_APPEND_BEFORE_FLUSH)
        gate = self.replication_gate
        if gate is not None:
            both = _BothAnswers(results, answer)
            gate.request(end_offset, both.replicated)
            answer = both.flushed
        if self.store.config.flush_disk_type != "SYNC_FLUSH":
            answer(results)
            return
        if not self.group_commit.request(
            end_offset, lambda status: answer(_with_status(results, status))
        ):
            # The store began closing after the append: sync here, as put does.
            answer(_with_status(results, self.flusher.flush_sync(end_offset)))


class _BothAnswers:
    """Joins a submit's two verdicts, the flush's (its results) and the replication's (a
    status), which come from different threads, into one answer."""

    def __init__(self, results: list[PutResult], answer: Callable[[list[PutResult]], None]):
        self._results = results
        self._answer = answer
        self._lock = threading.Lock()
        self._flushed: list[PutResult] | None = None
        self._replicated: PutStatus | None = None

    def flushed(self, results: list[PutResult]) -> None:
        with self._lock:
            self._flushed = results
            status = self._replicated
        if status is not None:
            self._answer(_with_status(results, status))

    def replicated(self, status: PutStatus) -> None:
        with self._lock:
            self._replicated = status
            results = self._flushed
        if results is not None:
            self._answer(_with_status(results, status))


def _batch_messages(msgs: object) -> Sequence[Message]:
    """A batch as a list or tuple: another iterable is read once here (a generator read by
    a first encoding attempt would leave nothing for the next), and a lone Message, a str
    or None is refused (ConfigError)."""
    if isinstance(msgs, (list, tuple)):
        return msgs
    if isinstance(msgs, (Message, str, dict, *BODY_TYPES)) or not isinstance(msgs, Iterable):
        raise ConfigError(f"a batch must be a list of Messages, got {type(msgs).__name__}")
    return list(msgs)


def _with_status(results: list[PutResult], status: PutStatus) -> list[PutResult]:
    """``results`` with every appended message's status ``status`` (a failed sync)."""
    if status is PutStatus.PUT_OK:
        return results
    return [dataclasses.replace(r, status=status) if r.ok else r for r in results]


def _running_future() -> Future[Any]:
    """A future already running, as a submitted put is: the append happens before it is
    returned, so a caller's cancel (an asyncio task's, through ``wrap_future``) must not
    take it back; ``cancel`` returns False and the answer still arrives."""
    future: Future[Any] = Future()
    future.set_running_or_notify_cancel()
    return future
