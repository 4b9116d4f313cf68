"""A CommitLog scan's rows for the other queues a multi-dispatch record went to.

Layer: spark (top). No I/O.

A record stored with ``INNER_MULTI_DISPATCH`` and ``INNER_MULTI_QUEUE_OFFSET`` (RocketMQ's
LMQ, spec 1.7) has a unit in each queue those name, besides its own. ``mode=queue`` reads
those queues (``%LMQ%...`` or a plain name) as rows of their own: the queue's topic, queue
id and offset, the record's other columns. ``mode=commitlog`` sees the record once, so it
adds the same rows from the two properties, which is what the dispatcher wrote the units
from: both modes then return the same rows.

The broker's ``enableLmq`` is not known from the files; it is taken as on (a ``%LMQ%``
queue is queue 0), as LMQ deployments run and as ``check`` takes it without settings.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from rocketstore.format import record as rec
from rocketstore.format.message import MessageExt
from rocketstore.format.multi_dispatch import (
    INNER_MULTI_QUEUE_OFFSET,
    OFFSETS_NAME_BYTES,
    dispatch_targets,
)


def may_have_copies(buf: memoryview | bytes, view: rec.RecordView) -> bool:
    """Whether the record's properties hold the offsets property at all (a byte search:
    most records have none, and decoding them to find out would cost a scan its speed)."""
    start = view.properties_position
    return OFFSETS_NAME_BYTES in bytes(buf[start : start + view.properties_length])


def targets(properties: dict[str, str], queue_id: int) -> list[tuple[str, int, int]]:
    """(queue name, queue id, queue offset) of each unit the record has in another queue,
    once each: a name given twice is one unit (the second write of an offset is skipped
    as a repeat), and properties that do not pair up give none (the dispatcher writes
    none for them either)."""
    found = dispatch_targets(properties, queue_id, enable_lmq=True) or []
    return list(dict.fromkeys(found))


def message_copies(message: MessageExt) -> list[tuple[MessageExt, int]]:
    """The record's rows in the other queues: (message as of that queue, queue offset)."""
    return [
        (dataclasses.replace(message, topic=name, queue_id=queue_id), offset)
        for name, queue_id, offset in targets(message.properties, message.queue_id)
    ]


def batch_copies(batch: Any) -> Any | None:
    """The rows a decoded batch's multi-dispatch records have in other queues (topic,
    partition and offset those of the queue; every other column the record's), or None
    when no record of the batch has any."""
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.compute as pc  # noqa: PLC0415

    column = batch.column("properties")
    bounds = np.asarray(column.offsets)
    # .keys are the whole child array, an offset slice or not: keep the batch's own.
    named = np.asarray(pc.equal(column.keys, INNER_MULTI_QUEUE_OFFSET).fill_null(False))
    hits = np.flatnonzero(named)
    hits = hits[(hits >= bounds[0]) & (hits < bounds[-1])]
    if not len(hits):
        return None
    rows = np.unique(np.searchsorted(bounds, hits, side="right") - 1)
    queue_ids = batch.column("partition")
    take: list[int] = []
    names: list[str] = []
    ids: list[int] = []
    offsets: list[int] = []
    for row in rows.tolist():
        properties = dict(column[row].as_py())
        for name, queue_id, offset in targets(properties, queue_ids[row].as_py()):
            take.append(row)
            names.append(name)
            ids.append(queue_id)
            offsets.append(offset)
    if not take:
        return None
    copies = batch.take(pa.array(take, pa.int64()))
    schema = copies.schema
    for field_name, values in (
        ("topic", pa.array(names, pa.string())),
        ("partition", pa.array(ids, pa.int32())),
        ("offset", pa.array(offsets, pa.int64())),
    ):
        index = schema.get_field_index(field_name)
        copies = copies.set_column(index, schema.field(index), values)
    return copies
