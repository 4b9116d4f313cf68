"""The rows of a columnar put: :class:`Columns` (many messages of one topic as columns,
each row exactly the Message :meth:`Columns.message` makes of it) and
:class:`ColumnsResult` (what ``put_columns`` stored, per row).

Layer: engine paths, below :mod:`rocketstore.put_columns`, which checks, encodes and
appends them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from rocketstore.errors import ConfigError
from rocketstore.format import native
from rocketstore.format import properties as props
from rocketstore.format.message import BODY_TYPES, Message
from rocketstore.format.message_id import joined_offset_msg_ids, offset_msg_id_from_bytes
from rocketstore.put_path import MessagePreparer, PutResult, Refusal
from rocketstore.status import PutStatus

DEFAULT_BORN_HOST = "127.0.0.1:50000"  # Message's default
_NO_INTS: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
_NO_SIZES: npt.NDArray[np.int32] = np.zeros(0, dtype=np.int32)

# A column: one value for every row, or a sequence with one value per row.
TextColumn = str | Sequence[str | None] | None
IntColumn = int | Sequence[int]


@dataclass(frozen=True, slots=True)
class ColumnsResult:
    """What ``put_columns`` stored. Rows ``0 .. stored - 1`` are in the CommitLog, row
    ``i`` at ``commit_log_offsets[i]`` with queue offset ``queue_offsets[i]`` (all rows
    when ``ok``; none when a check refused the call, ``refused_row`` then naming the row).
    ``status`` is PUT_OK, the refusal, or what failed (an I/O error between two batches,
    a SYNC_FLUSH sync that did not complete: then the rows are stored but not known to be
    durable, as ``put_batch``'s results say with the same status)."""

    status: PutStatus
    commit_log_offsets: npt.NDArray[np.int64] = field(default_factory=lambda: _NO_INTS)
    queue_offsets: npt.NDArray[np.int64] = field(default_factory=lambda: _NO_INTS)
    sizes: npt.NDArray[np.int32] = field(default_factory=lambda: _NO_SIZES)
    store_timestamps: npt.NDArray[np.int64] = field(default_factory=lambda: _NO_INTS)
    store_host: bytes = b""  # encoded (8 or 20 bytes): the first half of each offsetMsgId
    reason: str = ""
    refused_row: int | None = None
    ok: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "ok", self.status is PutStatus.PUT_OK)

    @property
    def stored(self) -> int:
        """How many rows (from the first) are in the CommitLog."""
        return len(self.commit_log_offsets)

    def __len__(self) -> int:
        return self.stored

    def msg_id(self, row: int) -> str:
        """Row ``row``'s offsetMsgId (what ``view_message`` takes)."""
        return offset_msg_id_from_bytes(self.store_host, int(self.commit_log_offsets[row]))

    def msg_ids(self) -> list[str]:
        return [offset_msg_id_from_bytes(self.store_host, int(o)) for o in self.commit_log_offsets]

    def joined_msg_ids(self) -> str:
        """Every stored row's offsetMsgId, joined by "," (a batch send's msgId answer)."""
        if native.offset_msg_ids is not None and len(self.store_host) in (8, 20):
            return native.offset_msg_ids(self.store_host, self.commit_log_offsets)
        return joined_offset_msg_ids(self.store_host, self.commit_log_offsets)

    def result(self, row: int) -> PutResult:
        """Row ``row`` as ``put_batch`` would have answered it."""
        return PutResult(
            self.status,
            commit_log_offset=int(self.commit_log_offsets[row]),
            queue_offset=int(self.queue_offsets[row]),
            msg_id=self.msg_id(row),
            store_timestamp=int(self.store_timestamps[row]),
            size=int(self.sizes[row]),
            reason=self.reason,
        )


def _text_column(name: str, value: object, rows: int) -> str | list[object] | None:
    """A text column as one str for every row, a list of one value per row, or None."""
    if value is None or isinstance(value, str):
        return value
    return _rows_of(name, value, rows)


def _rows_of(name: str, value: object, rows: int) -> list[object]:
    """``value`` as a list of ``rows`` values, or ConfigError naming the column."""
    if isinstance(value, np.ndarray):
        value = value.tolist()  # numpy ints are no Python ints to the checks
    if isinstance(value, (*BODY_TYPES, str, Mapping)) or not isinstance(value, Sequence):
        raise ConfigError(
            f"{name} must be a sequence with one value per row, got {type(value).__name__}"
        )
    if len(value) != rows:
        raise ConfigError(f"{name} has {len(value)} rows, bodies has {rows}")
    return value if isinstance(value, list) else list(value)


@dataclass(frozen=True, slots=True)
class Columns:
    """``put_columns``'s arguments, with every column's shape checked."""

    topic: object
    bodies: list[object]
    queue_ids: int | list[object]
    # Property columns in the order they go into a row's properties: KEYS, TAGS, then
    # property_columns'; each a str for every row or a list with a value per row.
    names: tuple[object, ...]
    values: tuple[str | list[object], ...]
    labels: tuple[str, ...]  # the argument each came from, for refusals
    rows: list[object] | None  # each row's own properties (a mapping or None), first
    born_timestamp: object
    born_host: object
    flags: object = 0  # an int for every row, or a list with one per row
    sys_flag: object = 0
    reconsume_times: object = 0
    # Each row's stored properties string, as it is (VerbatimProperties), instead of the
    # property arguments: a broker's SEND_BATCH_MESSAGE entries.
    texts: list[object] | None = None

    @classmethod
    def of(
        cls,
        topic: object,
        bodies: object,
        *,
        queue_ids: object = 0,
        keys: object = None,
        tags: object = None,
        properties: object = None,
        property_columns: object = None,
        born_timestamp: object = None,
        born_host: object = DEFAULT_BORN_HOST,
        flags: object = 0,
        sys_flag: object = 0,
        reconsume_times: object = 0,
        property_texts: object = None,
    ) -> Columns:
        """ConfigError for a column that is no column (not a sequence, or not one value per
        body), or ``property_texts`` beside another property argument; what is wrong
        within a row is the put checks' to refuse."""
        if (
            isinstance(bodies, np.ndarray)
            or not isinstance(bodies, Sequence)
            or isinstance(bodies, (*BODY_TYPES, str))
        ):
            raise ConfigError(f"bodies must be a sequence of bytes, got {type(bodies).__name__}")
        rows = len(bodies)
        body_list = bodies if isinstance(bodies, list) else list(bodies)
        queues: int | list[object]
        if isinstance(queue_ids, int) and not isinstance(queue_ids, bool):
            queues = queue_ids
        else:
            queues = _rows_of("queue_ids", queue_ids, rows)
        if property_columns is None:
            property_columns = {}
        if not isinstance(property_columns, Mapping):
            raise ConfigError(
                "property_columns must be a mapping of property name to column, got "
                f"{type(property_columns).__name__}"
            )
        named: list[tuple[object, str | list[object], str]] = []
        given = [
            (props.KEYS, keys, "keys"),
            (props.TAGS, tags, "tags"),
            *(
                (name, value, f"property_columns[{name!r}]")
                for name, value in property_columns.items()
            ),
        ]
        for name, value, label in given:
            column = _text_column(label, value, rows)
            if column is not None:
                named.append((name, column, label))
        per_row = None if properties is None else _rows_of("properties", properties, rows)
        texts = None
        if property_texts is not None:
            if named or per_row is not None:
                raise ConfigError(
                    "property_texts are each row's whole properties string: no keys, tags, "
                    "properties or property_columns beside them"
                )
            texts = _rows_of("property_texts", property_texts, rows)
        flag_column = flags
        if not (isinstance(flags, int) and not isinstance(flags, bool)):
            flag_column = _rows_of("flags", flags, rows)
        return cls(
            topic=topic,
            bodies=body_list,
            queue_ids=queues,
            names=tuple(name for name, _, _ in named),
            values=tuple(column for _, column, _ in named),
            labels=tuple(label for _, _, label in named),
            rows=per_row,
            born_timestamp=born_timestamp,
            born_host=born_host,
            flags=flag_column,
            sys_flag=sys_flag,
            reconsume_times=reconsume_times,
            texts=texts,
        )

    def __len__(self) -> int:
        return len(self.bodies)

    def message(self, row: int) -> Message:
        """Row ``row`` as a Message: its own properties (in their order), then KEYS, TAGS
        and the property columns (a name already there keeps its place and takes the
        column's value; a None value leaves the name out)."""
        own = None if self.rows is None else self.rows[row]
        properties: object
        if self.texts is not None:
            text = self.texts[row]
            # (a text that is no str is refused by prepare, naming its type)
            properties = props.VerbatimProperties(text) if isinstance(text, str) else text
        elif own is None:
            properties = {}
        elif isinstance(own, Mapping):
            properties = dict(own)
        else:
            properties = own  # refused by prepare, naming its type
        if isinstance(properties, dict):
            for name, column in zip(self.names, self.values, strict=True):
                value = column if isinstance(column, str) else column[row]
                if value is not None:
                    properties[name] = value
        queue_id = self.queue_ids if isinstance(self.queue_ids, int) else self.queue_ids[row]
        # Values of any type: prepare refuses a row whose fields a record cannot take.
        fields: dict[str, Any] = {
            "topic": self.topic,
            "body": self.bodies[row],
            "queue_id": queue_id,
            "properties": properties,
            "born_timestamp": self.born_timestamp,
            "born_host": self.born_host,
            "flag": self.flags[row] if isinstance(self.flags, list) else self.flags,
            "sys_flag": self.sys_flag,
            "reconsume_times": self.reconsume_times,
        }
        return Message(**fields)

    def blame(self, preparer: MessagePreparer, row: int) -> str:
        """The argument that makes row ``row`` refused on its own: the first whose value,
        in an otherwise plain message, prepare refuses; "" when only their sum is (a
        record too large, properties too long together)."""
        topic = self.topic if preparer.topic_bytes(self.topic) is not None else "T"
        full = self.message(row)
        alone = [
            ("topic", _plain(self.topic)),
            ("bodies", _plain(topic, body=full.body)),
            ("queue_ids", _plain(topic, queue_id=full.queue_id)),
            ("born_timestamp", _plain(topic, born_timestamp=full.born_timestamp)),
            ("born_host", _plain(topic, born_host=full.born_host)),
            ("flags", _plain(topic, flag=full.flag)),
            ("sys_flag", _plain(topic, sys_flag=full.sys_flag)),
            ("reconsume_times", _plain(topic, reconsume_times=full.reconsume_times)),
        ]
        if self.texts is not None:
            alone.append(("property_texts", _plain(topic, properties=full.properties)))
        own = None if self.rows is None else self.rows[row]
        if own is not None:
            mapping = dict(own) if isinstance(own, Mapping) else own
            alone.append(("properties", _plain(topic, properties=mapping)))
        for name, column, label in zip(self.names, self.values, self.labels, strict=True):
            value = column if isinstance(column, str) else column[row]
            if value is not None:
                alone.append((label, _plain(topic, properties={name: value})))
        for label, message in alone:
            if isinstance(preparer.prepare(message, None, in_batch=True), Refusal):
                return label
        return ""


def _plain(topic: object, **fields: object) -> Message:
    """A message with only ``fields`` set (and an empty body), for ``Columns.blame``."""
    values: dict[str, Any] = {"topic": topic, "body": b"", **fields}
    return Message(**values)
