"""What a CommitLog append takes and gives back: a message encoded outside the writer
lock (:class:`PreparedMessage`), a batch the C extension encoded (:class:`EncodedBatch`),
an encoder appending in place under the lock (:class:`InPlaceTarget`, :class:`InPlaceBatch`)
and where records landed (:class:`AppendedBatch`, :class:`Appended`).

Layer: structures, below :mod:`rocketstore.commitlog`. Plain data; no I/O.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rocketstore.format import record as rec
from rocketstore.status import AppendStatus


@dataclass(slots=True)
class PreparedMessage:
    """A message encoded outside the writer lock: ``template`` is the whole record with
    zeros where QUEUEOFFSET, PHYSICALOFFSET and STORETIMESTAMP go, which only the append
    (under the lock) knows."""

    topic: str
    queue_id: int
    sys_flag: int
    store_host: bytes
    template: bytes
    queue_key: str = ""

    def __post_init__(self) -> None:
        self.queue_key = f"{self.topic}-{self.queue_id}"

    @property
    def length(self) -> int:
        return len(self.template)

    @classmethod
    def encode(
        cls,
        *,
        topic: str,
        topic_bytes: bytes,
        queue_id: int,
        body: bytes,
        body_crc: int,
        properties_bytes: bytes,
        flag: int,
        sys_flag: int,
        born_timestamp: int,
        born_host: bytes,
        store_host: bytes,
        reconsume_times: int,
        prepared_transaction_offset: int,
    ) -> PreparedMessage:
        template = rec.encode_record(
            topic=topic_bytes,
            body=body,
            properties=properties_bytes,
            queue_id=queue_id,
            flag=flag,
            queue_offset=0,
            physical_offset=0,
            sys_flag=sys_flag,
            born_timestamp=born_timestamp,
            born_host=born_host,
            store_timestamp=0,
            store_host=store_host,
            reconsume_times=reconsume_times,
            prepared_transaction_offset=prepared_transaction_offset,
            body_crc=body_crc,
        )
        flags = int.from_bytes(template[36:40], "big", signed=True)  # with the V6 bits
        return cls(topic, queue_id, flags, store_host, template)


# EncodedBatch and AppendedBatch are made on every put: plain slots classes, as a frozen
# dataclass's __init__ costs a microsecond more.
@dataclass(slots=True)
class EncodedBatch:
    """Messages encoded in one go by the C extension (see ``MessagePreparer.encode``):
    the records back to back in ``blob`` (all of it: a view of a reused buffer for
    put_columns), with zeros where QUEUEOFFSET, PHYSICALOFFSET and STORETIMESTAMP go;
    ``meta`` holds (length, sysflag) native int32 pairs and ``keys`` the "topic-queueId"
    of each record."""

    blob: bytearray | memoryview
    meta: bytes
    keys: list[str]
    body_bytes: int
    store_host: bytes

    def __len__(self) -> int:
        return len(self.keys)


@dataclass(slots=True)
class RowOutputs:
    """Arrays an encoded batch's per-record values go into (put_columns' result), from
    index ``row``: int64 ``offsets``, ``queue_offsets`` and ``stamps``, int32 ``sizes``
    (each long enough for every record)."""

    offsets: npt.NDArray[np.int64]
    queue_offsets: npt.NDArray[np.int64]
    sizes: npt.NDArray[np.int32]
    stamps: npt.NDArray[np.int64]
    row: int


@dataclass(frozen=True, slots=True)
class InPlaceTarget:
    """Where ``append_in_place``'s encoder appends, under the put lock: ``mapping`` from
    ``position`` (the write position), at most ``room`` bytes, the first at CommitLog
    offset ``physical_start``; each record stamped with ``timestamp`` and its queue
    offset from ``queue_table`` (which the encoder updates for the records it appends)."""

    mapping: mmap.mmap
    position: int
    room: int
    physical_start: int
    timestamp: int
    queue_table: dict[str, int]


@dataclass(frozen=True, slots=True)
class InPlaceBatch:
    """What an encoder appended in place: ``rows`` records, ``length`` bytes."""

    length: int
    rows: int


# append_in_place's encoder: appends a batch at the target, whole (every record stamped,
# its TOTALSIZE written last) and says what it appended; or False when the batch does not
# fit in the room with an END_OF_FILE blank's 8 to spare, None when it leaves the batch
# to another path. Either way it then leaves the room and the queue table as they were.
InPlaceEncoder = Callable[[InPlaceTarget], InPlaceBatch | bool | None]


@dataclass(slots=True)
class AppendedBatch:
    """Where an encoded batch landed: its records follow each other from
    ``commit_log_offset``; ``queue_offsets`` holds one native int64 per record (none
    after ``append_in_place``, whose encoder keeps them)."""

    commit_log_offset: int
    queue_offsets: bytes
    store_timestamp: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class Appended:
    """Where one message landed."""

    status: AppendStatus
    commit_log_offset: int = 0
    queue_offset: int = 0
    size: int = 0
    store_timestamp: int = 0
    msg_id: str = ""
