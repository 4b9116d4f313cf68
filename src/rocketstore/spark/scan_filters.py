"""What the Spark scans share: rows into Arrow batches, and the pushed filters applied to
a row or to a whole batch.

Layer: spark (top). One verdict for every scan: a row the per-record path keeps
(``accepts``) is the row the column-wise path keeps (``apply_pushed``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from rocketstore.format.message import MessageExt
from rocketstore.spark.columns import RowBuffer
from rocketstore.spark.pushdown import Pushed

NOTHING_PUSHED = Pushed()


def row_batches(
    rows: Iterator[tuple[MessageExt, int]],
    include_body: bool,
    queue: tuple[str, int] | None = None,
) -> Iterator[Any]:
    """Rows in Arrow batches; ``queue``: the (topic, queue id) they were read through."""
    buffer = RowBuffer(include_body)
    for message, queue_offset in rows:
        buffer.append(message, queue_offset, queue)
        if buffer.full:
            yield buffer.take()
    if len(buffer):
        yield buffer.take()


def accepts(
    pushed: Pushed, message: MessageExt, queue_offset: int, queue: tuple[str, int] | None = None
) -> bool:
    topic, queue_id = queue if queue is not None else (message.topic, message.queue_id)
    return pushed.accepts_row(
        topic,
        queue_id,
        queue_offset,
        message.store_timestamp,
        message.keys,
        message.uniq_key,
    )


def apply_pushed(batch: Any, pushed: Pushed) -> Any:
    """The rows of ``batch`` that every pushed filter accepts (as ``Pushed.accepts_row``):
    offset and time bounds, topics and queues, and the ``key`` / ``uniqKey`` values (a
    light queue read with pushed key filters is scanned, not looked up in the index)."""
    if pushed == NOTHING_PUSHED:
        return batch
    import pyarrow as pa  # noqa: PLC0415

    offsets = batch.column("offset").to_numpy()
    times_ms = batch.column("timestamp").cast(pa.int64()).to_numpy() // 1000
    keep = np.ones(batch.num_rows, dtype=bool)
    if pushed.offset_min is not None:
        keep &= offsets >= pushed.offset_min
    if pushed.offset_max is not None:
        keep &= offsets < pushed.offset_max
    if pushed.time_min_ms is not None:
        keep &= times_ms >= pushed.time_min_ms
    if pushed.time_max_ms is not None:
        keep &= times_ms < pushed.time_max_ms
    if pushed.topics is not None or pushed.queue_ids is not None:
        topics = batch.column("topic").to_pylist()
        queue_ids = batch.column("partition").to_numpy()
        keep &= np.array(
            [
                (pushed.topics is None or t in pushed.topics)
                and (pushed.queue_ids is None or int(q) in pushed.queue_ids)
                for t, q in zip(topics, queue_ids, strict=True)
            ],
            dtype=bool,
        )
    for values, column in ((pushed.keys, "key"), (pushed.uniq_keys, "uniqKey")):
        if values is not None:
            keep &= np.asarray(is_in(batch.column(column), sorted(values)), dtype=bool)
    return batch if keep.all() else batch.filter(pa.array(keep))


def is_in(values: Any, wanted: list[Any]) -> Any:
    """Whether each value is one of ``wanted`` (a null is never)."""
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.compute as pc  # noqa: PLC0415

    found = pc.is_in(values, value_set=pa.array(wanted, values.type))
    return pc.fill_null(found, False).to_numpy(zero_copy_only=False)
