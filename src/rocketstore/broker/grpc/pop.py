"""POP consumption's state: which messages a group was handed, until when they are
invisible, and receipt handles.

Layer: broker.grpc. Pure bookkeeping (no I/O, the clock passed in): the service reads the
store and calls these on the event loop.

A queue of a group has a cursor (the next offset never handed out) and the offsets handed
out but not acknowledged, each with its delivery attempt and the time it becomes visible
again. A receive first takes the overdue ones (their attempt plus one), then new ones;
an ack removes one; the group's consumer offset is the lowest offset not acknowledged,
committed to the broker's consumer offsets. RocketMQ 5 keeps the same facts in its
revive topic (checkpoints and acks, rmq_sys_REVIVE_LOG_*); here the service writes them to
a JSON file of its own (:func:`to_document`, config/grpcPopState.json) now and then and at
shutdown, and reads them back at start (:func:`from_document`), so a restart keeps the
messages in flight, their handles and invisible times (docs/format.md).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# ExtraInfoUtil's topic types: a message of the topic itself (no retry topic here).
TOPIC_TYPE_NORMAL = "0"


@dataclass(frozen=True)
class ReceiptHandle:
    """RocketMQ 5's receipt handle fields (ReceiptHandle.decode: space-separated
    startOffset, retrieveTime, invisibleTime, reviveQueueId, topicType, brokerName,
    queueId, offset, commitLogOffset)."""

    start_offset: int
    pop_ms: int
    invisible_ms: int
    revive_queue_id: int
    topic_type: str
    broker_name: str
    queue_id: int
    offset: int
    commit_log_offset: int

    def encode(self) -> str:
        return " ".join(
            str(part)
            for part in (
                self.start_offset,
                self.pop_ms,
                self.invisible_ms,
                self.revive_queue_id,
                self.topic_type,
                self.broker_name,
                self.queue_id,
                self.offset,
                self.commit_log_offset,
            )
        )

    @classmethod
    def decode(cls, text: str) -> ReceiptHandle | None:
        """None for what is not a receipt handle."""
        parts = text.split(" ")
        if len(parts) < 8:
            return None
        try:
            return cls(
                start_offset=int(parts[0]),
                pop_ms=int(parts[1]),
                invisible_ms=int(parts[2]),
                revive_queue_id=int(parts[3]),
                topic_type=parts[4],
                broker_name=parts[5],
                queue_id=int(parts[6]),
                offset=int(parts[7]),
                commit_log_offset=int(parts[8]) if len(parts) > 8 else -1,
            )
        except ValueError:
            return None

    @property
    def expires_ms(self) -> int:
        return self.pop_ms + self.invisible_ms


@dataclass
class InFlight:
    """A message handed out and not acknowledged."""

    offset: int
    commit_log_offset: int
    attempt: int  # 1 for the first delivery
    pop_ms: int
    visible_at_ms: int
    # The client whose auto-renewing receive (a PushConsumer's) took it: its invisible
    # time is extended while that client's telemetry stream is open ("" none; in memory).
    renew_client: str = ""
    # The %DLQ% queue's max offset when a move there began and is not journaled as done
    # (-1: none): a copy stored from there on is this message (see PopState.dlq_moves).
    dlq_from: int = -1


@dataclass
class QueueCursor:
    next_offset: int
    in_flight: dict[int, InFlight] = field(default_factory=dict)
    # (group, topic, queue id): what the journal records name.
    key: tuple[str, str, int] = ("", "", 0)

    def overdue(self, now_ms: int) -> list[InFlight]:
        return sorted(
            (m for m in self.in_flight.values() if m.visible_at_ms <= now_ms),
            key=lambda m: m.offset,
        )

    def blocked(self, now_ms: int) -> bool:
        """A message in flight that is still invisible: a FIFO group's queue waits."""
        return any(m.visible_at_ms > now_ms for m in self.in_flight.values())

    def next_visible_ms(self) -> int | None:
        return min((m.visible_at_ms for m in self.in_flight.values()), default=None)

    @property
    def lowest_unacked(self) -> int:
        return min(self.in_flight, default=self.next_offset)


class AckStatus(enum.Enum):
    OK = "OK"
    # No such message handed out with this handle: forged, for another queue, or
    # already acknowledged or re-delivered since.
    INVALID = "INVALID"


QueueKey = tuple[str, str, int]  # (group, topic, queue id)

# The journal's records (lists, JSON as they are): what changed, keyed by the queue.
# ["n", group, topic, queue id, next offset]      the cursor moved (or was made)
# ["h", group, topic, queue id, offset, commit log offset, attempt, pop ms, visible at ms]
#                                                   handed out (again)
# ["v", group, topic, queue id, offset, pop ms, visible at ms]   invisible time changed
# ["a", group, topic, queue id, offset]             acknowledged, or dropped (DLQ, gone)
# ["d", group, topic, queue id, offset, DLQ offset]   a move to %DLQ% begins (its copy, if
#                                                   stored, is at or past the DLQ offset)
JournalRecord = list[Any]
RECORD_NEXT = "n"
RECORD_HAND_OUT = "h"
RECORD_VISIBLE = "v"
RECORD_ACK = "a"
RECORD_DLQ_MOVE = "d"


class PopState:
    def __init__(self, broker_name: str) -> None:
        self.broker_name = broker_name
        self._queues: dict[QueueKey, QueueCursor] = {}
        self._changes: list[JournalRecord] = []

    def take_changes(self) -> list[JournalRecord]:
        """The journal records of the changes since the last call (and forgets them)."""
        changes, self._changes = self._changes, []
        return changes

    def advance(self, cursor: QueueCursor, next_offset: int) -> None:
        """Move the cursor to ``next_offset`` (never back)."""
        if next_offset > cursor.next_offset:
            cursor.next_offset = next_offset
            self._changes.append([RECORD_NEXT, *cursor.key, next_offset])

    def drop(self, cursor: QueueCursor, offset: int) -> None:
        """Forget a message in flight that is done without an ack (moved to the DLQ,
        or gone with its CommitLog file)."""
        if cursor.in_flight.pop(offset, None) is not None:
            self._changes.append([RECORD_ACK, *cursor.key, offset])

    def begin_dlq_move(self, cursor: QueueCursor, offset: int, dlq_from: int) -> None:
        """A message in flight is about to be stored in %DLQ%, whose queue ends at
        ``dlq_from``: journaled first, so that a restart after the put and before its
        drop can tell whether the copy is there (:meth:`dlq_moves`)."""
        held = cursor.in_flight.get(offset)
        if held is not None:
            held.dlq_from = dlq_from
            self._changes.append([RECORD_DLQ_MOVE, *cursor.key, offset, dlq_from])

    def dlq_moves(self) -> list[tuple[QueueCursor, InFlight]]:
        """Messages whose move to %DLQ% began and was never journaled as done (read back
        after a crash): the service looks for each copy and drops the ones it finds."""
        return [
            (cursor, held)
            for cursor in self._queues.values()
            for held in cursor.in_flight.values()
            if held.dlq_from >= 0
        ]

    def cursor(
        self, group: str, topic: str, queue_id: int, start: Callable[[], int]
    ) -> QueueCursor:
        """The queue's cursor; a new one starts at ``start()``."""
        key = (group, topic, queue_id)
        found = self._queues.get(key)
        if found is None:
            found = self._queues[key] = QueueCursor(start(), key=key)
            self._changes.append([RECORD_NEXT, *key, found.next_offset])
        return found

    def find(self, group: str, topic: str, queue_id: int) -> QueueCursor | None:
        return self._queues.get((group, topic, queue_id))

    def hand_out(
        self,
        cursor: QueueCursor,
        queue_id: int,
        offset: int,
        commit_log_offset: int,
        attempt: int,
        now_ms: int,
        invisible_ms: int,
        renew_client: str = "",
    ) -> ReceiptHandle:
        cursor.in_flight[offset] = InFlight(
            offset, commit_log_offset, attempt, now_ms, now_ms + invisible_ms, renew_client
        )
        self._changes.append(
            [
                RECORD_HAND_OUT,
                *cursor.key,
                offset,
                commit_log_offset,
                attempt,
                now_ms,
                now_ms + invisible_ms,
            ]
        )
        return ReceiptHandle(
            start_offset=offset,
            pop_ms=now_ms,
            invisible_ms=invisible_ms,
            revive_queue_id=0,
            topic_type=TOPIC_TYPE_NORMAL,
            broker_name=self.broker_name,
            queue_id=queue_id,
            offset=offset,
            commit_log_offset=commit_log_offset,
        )

    def _matching(self, group: str, topic: str, handle: ReceiptHandle) -> InFlight | None:
        cursor = self._queues.get((group, topic, handle.queue_id))
        if cursor is None or handle.broker_name != self.broker_name:
            return None
        held = cursor.in_flight.get(handle.offset)
        if held is None or held.pop_ms != handle.pop_ms:
            return None
        return held

    def ack(self, group: str, topic: str, handle: ReceiptHandle) -> AckStatus:
        held = self._matching(group, topic, handle)
        if held is None:
            return AckStatus.INVALID
        del self._queues[(group, topic, handle.queue_id)].in_flight[handle.offset]
        self._changes.append([RECORD_ACK, group, topic, handle.queue_id, handle.offset])
        return AckStatus.OK

    def change_invisible(
        self, group: str, topic: str, handle: ReceiptHandle, invisible_ms: int, now_ms: int
    ) -> ReceiptHandle | None:
        """The message's new handle, invisible ``invisible_ms`` from now; None for a
        handle that names no message in flight."""
        held = self._matching(group, topic, handle)
        if held is None:
            return None
        held.pop_ms = now_ms
        held.visible_at_ms = now_ms + invisible_ms
        self._changes.append(
            [
                RECORD_VISIBLE,
                group,
                topic,
                handle.queue_id,
                handle.offset,
                now_ms,
                held.visible_at_ms,
            ]
        )
        # No longer renewed, as the proxy removes the handle from its renewal: a
        # PushConsumer's failed message (changed to its retry backoff) must come again.
        held.renew_client = ""
        return ReceiptHandle(
            start_offset=handle.offset,
            pop_ms=now_ms,
            invisible_ms=invisible_ms,
            revive_queue_id=handle.revive_queue_id,
            topic_type=handle.topic_type,
            broker_name=self.broker_name,
            queue_id=handle.queue_id,
            offset=handle.offset,
            commit_log_offset=held.commit_log_offset,
        )

    def renew(
        self, now_ms: int, live: Callable[[str], bool], ahead_ms: int, extend_ms: int, max_ms: int
    ) -> int:
        """The proxy's receipt handle renewal (DefaultReceiptHandleManager): a message an
        auto-renewing receive took, visible again within ``ahead_ms``, held by a client
        still connected (``live``), taken less than ``max_ms`` ago, stays invisible
        ``extend_ms`` from now; its receipt handle stays valid. How many were renewed."""
        renewed = 0
        for cursor in self._queues.values():
            for held in cursor.in_flight.values():
                if (
                    held.renew_client
                    and held.visible_at_ms - now_ms <= ahead_ms
                    and now_ms - held.pop_ms < max_ms
                    and live(held.renew_client)
                ):
                    held.visible_at_ms = now_ms + extend_ms
                    self._changes.append(
                        [
                            RECORD_VISIBLE,
                            *cursor.key,
                            held.offset,
                            held.pop_ms,
                            held.visible_at_ms,
                        ]
                    )
                    renewed += 1
        return renewed

    def to_document(self, journal: int = 0) -> dict[str, Any]:
        """The state as config/grpcPopState.json holds it; ``journal``: the generation of
        the journal file whose records come after it."""
        queues = []
        for (group, topic, queue_id), cursor in sorted(self._queues.items()):
            queues.append(
                {
                    "group": group,
                    "topic": topic,
                    "queueId": queue_id,
                    "nextOffset": cursor.next_offset,
                    "inFlight": [
                        {
                            "offset": m.offset,
                            "commitLogOffset": m.commit_log_offset,
                            "attempt": m.attempt,
                            "popMs": m.pop_ms,
                            "visibleAtMs": m.visible_at_ms,
                            **({"dlqFrom": m.dlq_from} if m.dlq_from >= 0 else {}),
                        }
                        for m in sorted(cursor.in_flight.values(), key=lambda m: m.offset)
                    ],
                }
            )
        return {
            "version": STATE_VERSION,
            "brokerName": self.broker_name,
            "journal": journal,
            "queues": queues,
        }

    def load_document(self, document: Any, committed: Callable[[str, str, int], int | None]) -> int:
        """Take the queues of a document ``to_document`` wrote (ValueError naming what is
        wrong with it); how many messages in flight it held. The consumer offsets may be
        newer than the file (a crash between two writes): what lies below a group's
        committed offset was acknowledged since, and is dropped."""
        if not isinstance(document, dict) or document.get("version") != STATE_VERSION:
            raise ValueError(f"not a version {STATE_VERSION} POP state document")
        try:
            for entry in document["queues"]:
                group, topic = str(entry["group"]), str(entry["topic"])
                queue_id = int(entry["queueId"])
                key = (group, topic, queue_id)
                cursor = QueueCursor(int(entry["nextOffset"]), key=key)
                for m in entry["inFlight"]:
                    held = InFlight(
                        int(m["offset"]),
                        int(m["commitLogOffset"]),
                        int(m["attempt"]),
                        int(m["popMs"]),
                        int(m["visibleAtMs"]),
                        dlq_from=int(m.get("dlqFrom", -1)),
                    )
                    cursor.in_flight[held.offset] = held
                self._queues[key] = cursor
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"bad POP state entry: {e!r}") from e
        loaded = self._settle(committed)
        self._changes.clear()
        return loaded

    def replay(
        self, records: list[JournalRecord], committed: Callable[[str, str, int], int | None]
    ) -> int:
        """Apply journal records written after the snapshot loaded, in their order (one
        that is not a record is skipped), then drop what the consumer offsets say was
        acknowledged since; how many messages are in flight after."""
        for record in records:
            try:
                self._apply(record)
            except (IndexError, TypeError, ValueError):
                continue
        loaded = self._settle(committed)
        self._changes.clear()
        return loaded

    def _apply(self, record: JournalRecord) -> None:
        kind = record[0]
        key = (str(record[1]), str(record[2]), int(record[3]))
        cursor = self._queues.get(key)
        if kind == RECORD_NEXT:
            if cursor is None:
                self._queues[key] = QueueCursor(int(record[4]), key=key)
            else:
                cursor.next_offset = max(cursor.next_offset, int(record[4]))
            return
        if cursor is None:  # (records of a cursor always follow its "n")
            cursor = self._queues[key] = QueueCursor(0, key=key)
        offset = int(record[4])
        if kind == RECORD_HAND_OUT:
            cursor.in_flight[offset] = InFlight(
                offset, int(record[5]), int(record[6]), int(record[7]), int(record[8])
            )
            cursor.next_offset = max(cursor.next_offset, offset + 1)
        elif kind == RECORD_VISIBLE:
            held = cursor.in_flight.get(offset)
            if held is not None:
                held.pop_ms, held.visible_at_ms = int(record[5]), int(record[6])
        elif kind == RECORD_ACK:
            cursor.in_flight.pop(offset, None)
        elif kind == RECORD_DLQ_MOVE:
            held = cursor.in_flight.get(offset)
            if held is not None:
                held.dlq_from = int(record[5])

    def _settle(self, committed: Callable[[str, str, int], int | None]) -> int:
        """The consumer offsets may be newer than the state (a remoting consumer of the
        group, an offset reset): what lies below a group's committed offset was
        acknowledged since, and is dropped. How many messages are in flight."""
        loaded = 0
        for (group, topic, queue_id), cursor in self._queues.items():
            floor = committed(group, topic, queue_id)
            floor = 0 if floor is None or floor < 0 else floor
            cursor.next_offset = max(cursor.next_offset, floor)
            for offset in [o for o in cursor.in_flight if not floor <= o < cursor.next_offset]:
                del cursor.in_flight[offset]
            loaded += len(cursor.in_flight)
        return loaded

    def cursors(self) -> list[QueueCursor]:
        return list(self._queues.values())


STATE_VERSION = 1
