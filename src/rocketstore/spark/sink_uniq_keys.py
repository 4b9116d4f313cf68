"""The UNIQ_KEY the ``rocketstore`` sink gives every message it writes (docs/spark.md,
"Message ids").

Layer: spark (top). pyarrow and numpy (imported inside the functions); pyspark only in
:func:`task_scope`, which reads the running task's context. No store access.

A RocketMQ producer puts a UNIQ_KEY on every message (the client's msgId: consumers see
it as ``getMsgId()``, tools look messages up by it); the sink does too, in the client's
format (32 upper-case hex digits, ``MessageClientIDSetter``; :mod:`rocketstore.format.message_id`)
but derived, not drawn, so that a task Spark runs again writes the same ids::

    bytes 0..9    SHA-256(job, partition id, row index // 65536), first 10 bytes
                  (where the client puts its IP, pid and class-loader hash)
    bytes 10..13  ms since the start of the month (driver's local time) at which the job
                  started: a batch write's job, a streaming query's run
    bytes 14..15  row index % 65536 (the client's counter)

*job* is a batch write's job id (made on the driver, shared by all its tasks and their
retries), or a micro-batch's ``<query id>:<batch id>`` (Spark's ids, which a restarted
query keeps); *row index* counts the task's input rows from 0. The time field is a real
time before the messages are stored, as RocketMQ's ``queryMsgByUniqueKey`` needs (it
searches the index from the key's time on). A row that already has a UNIQ_KEY property
(a ``rocketstore`` read written back) keeps it.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import Any

from rocketstore.format.properties import UNIQ_KEY

log = logging.getLogger(__name__)

_BLOCK_BITS = 16  # the counter's width: rows per derived prefix
# Local properties Spark sets on a micro-batch's tasks (StreamExecution).
QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"


@dataclass(frozen=True)
class KeyScope:
    """What one task's UNIQ_KEYs derive from (see the module docstring)."""

    job: str
    partition: int
    month_ms: int  # ms since the month's start when the job started

    def prefix(self, block: int) -> bytes:
        text = f"{self.job}\x00{self.partition}\x00{block}".encode()
        return hashlib.sha256(text).digest()[:10]

    def keys(self, first_row: int, rows: int) -> Any:
        """The UNIQ_KEYs of the task's rows ``first_row`` .. ``first_row + rows - 1``, as
        an Arrow string array."""
        import numpy as np  # noqa: PLC0415
        import pyarrow as pa  # noqa: PLC0415

        index = np.arange(first_row, first_row + rows, dtype=np.int64)
        raw = np.empty((rows, 16), dtype=np.uint8)
        blocks = index >> _BLOCK_BITS
        for block in np.unique(blocks):
            raw[blocks == block, :10] = np.frombuffer(self.prefix(int(block)), dtype=np.uint8)
        raw[:, 10:14] = np.frombuffer((self.month_ms & 0xFFFFFFFF).to_bytes(4, "big"), np.uint8)
        raw[:, 14] = (index >> 8) & 0xFF
        raw[:, 15] = index & 0xFF
        text = _HEX_DIGITS[raw].tobytes()  # (rows, 16, 2) ASCII hex digits
        offsets = np.arange(0, 32 * (rows + 1), 32, dtype=np.int32)
        return pa.StringArray.from_buffers(rows, pa.py_buffer(offsets), pa.py_buffer(text))


def _hex_digits() -> Any:
    import numpy as np  # noqa: PLC0415

    table = b"".join(f"{i:02X}".encode() for i in range(256))
    return np.frombuffer(table, dtype=np.uint8).reshape(256, 2)


_HEX_DIGITS = _hex_digits()


def task_scope(job: str, month_ms: int, *, streaming: bool) -> KeyScope:
    """The running task's scope: its partition id, and for a stream the micro-batch's
    query and batch ids from the task's local properties (``job`` when Spark set none)."""
    from pyspark import TaskContext  # noqa: PLC0415

    context = TaskContext.get()
    if context is None:  # not in a Spark task (a test calling the writer directly)
        return KeyScope(job, 0, month_ms)
    if streaming:
        query = context.getLocalProperty(QUERY_ID_PROPERTY)
        batch = context.getLocalProperty(BATCH_ID_PROPERTY)
        if query and batch is not None:
            job = f"{query}:{batch}"
        else:
            log.warning("no micro-batch id in the task: UNIQ_KEYs derive from %s", job)
    return KeyScope(job, context.partitionId(), month_ms)


def with_uniq_keys(properties: Any, keys: Any) -> Any:
    """``properties`` (a map<string,string> array, nulls allowed) with ``UNIQ_KEY`` set to
    ``keys[i]`` in every row that has none; each row's other entries keep their order.
    Null maps become maps."""
    import numpy as np  # noqa: PLC0415
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.compute as pc  # noqa: PLC0415

    kind = pa.map_(pa.string(), pa.string())
    rows = len(properties)
    # As a list of (key, value) structs: that flattens with the batch's slice respected.
    listed = properties.cast(pa.list_(pa.struct([kind.key_field, kind.item_field])))
    lengths = pc.fill_null(pc.list_value_length(listed), 0).to_numpy().astype(np.int64)
    entries = listed.flatten()
    names, values = entries.field(0), entries.field(1)
    parents = np.repeat(np.arange(rows), lengths)
    has = np.zeros(rows, dtype=bool)
    has[parents[pc.equal(names, UNIQ_KEY).to_numpy(zero_copy_only=False)]] = True
    add = (~has).astype(np.int64)
    new_offsets = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(lengths + add, out=new_offsets[1:])
    old_total, added = int(lengths.sum()), int(add.sum())
    take = np.empty(old_total + added, dtype=np.int64)
    added_before = np.cumsum(add) - add
    take[np.arange(old_total) + added_before[parents]] = np.arange(old_total)
    take[new_offsets[1:][~has] - 1] = old_total + np.arange(added)
    mask = pa.array(~has)
    new_names = pa.concat_arrays(
        [names.cast(pa.string()), pa.array([UNIQ_KEY] * added, pa.string())]
    ).take(pa.array(take))
    new_values = pa.concat_arrays([values.cast(pa.string()), keys.filter(mask)]).take(
        pa.array(take)
    )
    result = pa.MapArray.from_arrays(pa.array(new_offsets, pa.int32()), new_names, new_values)
    return result.cast(kind)
