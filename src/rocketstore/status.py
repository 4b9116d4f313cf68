"""Status enums for expected outcomes (lowest layer).

Names and order follow RocketMQ 4.9 (``PutMessageStatus``, ``GetMessageStatus``,
``AppendMessageStatus``) so that callers and the broker map them one to one.
"""

from __future__ import annotations

import enum

from rocketstore.errors import ConfigError


class PutStatus(enum.Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPEDFILE_FAILED = "CREATE_MAPEDFILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGECACHE_BUSY = "OS_PAGECACHE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"
    LMQ_CONSUME_QUEUE_NUM_EXCEEDED = "LMQ_CONSUME_QUEUE_NUM_EXCEEDED"

    @property
    def ok(self) -> bool:
        return self is PutStatus.PUT_OK

    @property
    def stored(self) -> bool:
        """Whether the message is in the CommitLog: stored, only the flush or the
        replication wait fell short. A send is answered with its ids then (SendStatus
        tells the client the rest), and retrying the put would store it twice."""
        return self in _STORED

    @property
    def never_storable(self) -> bool:
        """Whether the message itself was refused: no retry of the same put can store it."""
        return self in _NEVER_STORABLE


class AppendStatus(enum.Enum):
    PUT_OK = "PUT_OK"
    END_OF_FILE = "END_OF_FILE"
    MESSAGE_SIZE_EXCEEDED = "MESSAGE_SIZE_EXCEEDED"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


class GetStatus(enum.Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


class Boundary(enum.Enum):
    """Which entry ``offset_by_time`` picks when no entry has exactly the time asked."""

    LOWER = "lower"  # first entry with time >= ts (or the max offset if none)
    UPPER = "upper"  # last entry with time <= ts (or the min offset if none)

    @classmethod
    def parse(cls, value: str | Boundary) -> Boundary:
        if isinstance(value, Boundary):
            return value
        try:
            return cls(value.lower())
        except ValueError as e:
            raise ConfigError(f"boundary must be 'lower' or 'upper', got {value!r}") from e


class RunningFlags(enum.IntFlag):
    """RocketMQ's RunningFlags bits: why a store refuses reads or writes."""

    NOT_READABLE = 1 << 0
    NOT_WRITEABLE = 1 << 1
    WRITE_LOGICS_QUEUE_ERROR = 1 << 2
    WRITE_INDEX_FILE_ERROR = 1 << 3
    DISK_FULL = 1 << 4

    @property
    def writeable(self) -> bool:
        # Plain int arithmetic: IntFlag's own operators build enum members, which costs
        # more than the rest of a single put's checks (it runs on every put).
        return not (int(self) & _BLOCKS_WRITES)

    def unwriteable_reason(self) -> str:
        """Why puts are refused, in words ("" when they are not)."""
        reasons = []
        if self & RunningFlags.DISK_FULL:
            reasons.append(
                "the disk is full (usage above disk_space_warning_level_ratio); puts resume "
                "once retention or the operator frees space"
            )
        if self & RunningFlags.NOT_WRITEABLE:
            reasons.append("a write or flush failed (I/O error); reopen the store")
        if self & RunningFlags.WRITE_LOGICS_QUEUE_ERROR:
            reasons.append("writing a consume queue failed")
        if self & RunningFlags.WRITE_INDEX_FILE_ERROR:
            reasons.append("writing an index file failed")
        return "; ".join(reasons)


_BLOCKS_WRITES = int(
    RunningFlags.NOT_WRITEABLE
    | RunningFlags.WRITE_LOGICS_QUEUE_ERROR
    | RunningFlags.WRITE_INDEX_FILE_ERROR
    | RunningFlags.DISK_FULL
)


_STORED = frozenset(
    {
        PutStatus.PUT_OK,
        PutStatus.FLUSH_DISK_TIMEOUT,
        PutStatus.FLUSH_SLAVE_TIMEOUT,
        PutStatus.SLAVE_NOT_AVAILABLE,
    }
)
_NEVER_STORABLE = frozenset({PutStatus.MESSAGE_ILLEGAL, PutStatus.PROPERTIES_SIZE_EXCEEDED})
