"""Staged writes: what a write task leaves for the job commit (Arrow IPC files).

Layer: spark (top). pyarrow only (imported inside the functions); no store access. A task
turns its input batches into one file of the staging schema below, under
``<store>/.rocketstore-staging/<job id>/``; the driver's commit reads the files back and
appends the messages through the store (:mod:`.commit`); commit and abort remove the job's
directory, so an aborted job leaves nothing behind.

Staging keeps a task's output off the driver's memory until the commit and needs the
store directory to be visible to the executors, which reading needs anyway.

Staging schema: ``topic`` string, ``queue_id`` int32 (null: the commit chooses), ``keys``
string (KEYS as stored), ``tags`` string, ``properties`` map<string,string>, ``body``
binary. Rows are checked here so a bad row fails its task, naming the column and value,
before anything reaches the store.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import uuid
from collections.abc import Iterator
from typing import Any, NamedTuple

from rocketstore.config import StoreConfig
from rocketstore.errors import ConfigError
from rocketstore.format import properties as props
from rocketstore.spark.sink_uniq_keys import KeyScope, with_uniq_keys
from rocketstore.spark.write_options import WriteColumns, WriteOptions, check_topic

STAGING_DIR = ".rocketstore-staging"
MAX_QUEUE_ID = 0x7FFFFFFF


def staging_schema() -> Any:
    import pyarrow as pa  # noqa: PLC0415

    return pa.schema(
        [
            pa.field("topic", pa.string()),
            pa.field("queue_id", pa.int32()),
            pa.field("keys", pa.string()),
            pa.field("tags", pa.string()),
            pa.field("properties", pa.map_(pa.string(), pa.string())),
            pa.field("body", pa.binary()),
        ]
    )


def job_dir(store_path: str, job_id: str) -> str:
    return os.path.join(os.path.abspath(store_path), STAGING_DIR, job_id)


def new_job_id() -> str:
    return uuid.uuid4().hex


def sink_job_id(sink_id: str) -> str:
    """A streaming sink's staging directory name. Spark pickles the stream writer for the
    tasks once but builds a new one for every micro-batch commit, so the name comes from
    the sink id, which both know; micro-batches run one after another, and each commit or
    abort empties the directory."""
    return "sink-" + hashlib.sha256(sink_id.encode("utf-8")).hexdigest()[:24]


def remove_job(store_path: str, job_id: str) -> None:
    """Remove a job's staged files (and the staging directory once no job uses it)."""
    directory = job_dir(store_path, job_id)
    shutil.rmtree(directory, ignore_errors=True)
    with contextlib.suppress(OSError):  # another job is staging, or it is already gone
        os.rmdir(os.path.dirname(directory))


def _column(batch: Any, name: str | None) -> Any:
    return None if name is None else batch.column(batch.schema.get_field_index(name))


def normalize(
    batch: Any,
    columns: WriteColumns,
    options: WriteOptions,
    first_row: int,
    scope: KeyScope | None = None,
) -> Any:
    """One input batch in the staging schema, checked; ``first_row`` numbers rows in errors
    and, with ``scope``, derives each row's UNIQ_KEY (:mod:`.sink_uniq_keys`)."""
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.compute as pc  # noqa: PLC0415

    rows = batch.num_rows
    value = _column(batch, columns.value)
    if value.null_count:
        bad = first_row + pc.index(pc.is_null(value), True).as_py()
        raise ConfigError(f"column {columns.value!r} is null in row {bad}: every message needs one")
    if pa.types.is_string(value.type) or pa.types.is_large_string(value.type):
        value = pc.cast(value, pa.binary())
    limit = StoreConfig().max_message_size
    lengths = pc.binary_length(value)
    if rows and pc.max(lengths).as_py() > limit:
        bad_at = pc.index(pc.greater(lengths, limit), True).as_py()
        raise ConfigError(
            f"column {columns.value!r} in row {first_row + bad_at} has "
            f"{lengths[bad_at].as_py()} bytes, more than the store's max message size {limit}"
        )
    if options.topic is not None:
        topic = pa.array([options.topic] * rows, pa.string())
    else:
        topic = _column(batch, columns.topic)
        if topic.null_count:
            bad = first_row + pc.index(pc.is_null(topic), True).as_py()
            raise ConfigError(f"column {columns.topic!r} is null in row {bad} (no option topic)")
        for name in pc.unique(topic).to_pylist():
            check_topic(name, f"column {columns.topic!r}")
    keys = _column(batch, columns.key)
    listed = _column(batch, columns.keys)
    if listed is not None:
        joined = _join_keys(listed)
        keys = joined if keys is None else pc.coalesce(_empty_as_null(keys), joined)
    keys = pa.nulls(rows, pa.string()) if keys is None else _empty_as_null(keys)
    _check_text(keys, columns.key or columns.keys, first_row)
    tags = _column(batch, columns.tags)
    tags = pa.nulls(rows, pa.string()) if tags is None else _empty_as_null(tags)
    _check_text(tags, columns.tags, first_row)
    properties = _column(batch, columns.properties)
    if properties is None:
        properties = pa.nulls(rows, pa.map_(pa.string(), pa.string()))
    else:
        _check_properties(properties, columns.properties, first_row)
    queue = _column(batch, columns.queue_id)
    if queue is None:
        queue = pa.nulls(rows, pa.int32())
    else:
        wide = pc.cast(queue, pa.int64())
        outside = pc.or_(pc.less(wide, 0), pc.greater(wide, MAX_QUEUE_ID))
        if pc.any(outside).as_py():
            bad_at = pc.index(outside, True).as_py()
            raise ConfigError(
                f"column {columns.queue_id!r} is {wide[bad_at].as_py()} in row "
                f"{first_row + bad_at}; queue ids are 0..{MAX_QUEUE_ID}"
            )
        queue = pc.cast(wide, pa.int32())
    if scope is not None:
        properties = with_uniq_keys(properties, scope.keys(first_row, rows))
    return pa.RecordBatch.from_arrays(
        [topic, queue, keys, tags, properties, value], schema=staging_schema()
    )


def _empty_as_null(text: Any) -> Any:
    """Empty text as null: the store cannot keep an empty KEYS or TAGS (a reader sees
    none)."""
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.compute as pc  # noqa: PLC0415

    empty = pc.equal(pc.binary_length(text), 0)
    return pc.if_else(empty, pa.scalar(None, text.type), text)


def _join_keys(listed: Any) -> Any:
    """A ``keys`` array column as KEYS text: the keys joined by spaces, null elements left
    out (as Spark's ``array_join``; Arrow's join would make the whole row null)."""
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.compute as pc  # noqa: PLC0415

    if listed.null_count or (len(listed) and pc.any(pc.is_null(listed.flatten())).as_py()):
        texts = [
            " ".join(k for k in keys if k is not None) if keys is not None else None
            for keys in listed.to_pylist()
        ]
        return pa.array(texts, pa.string())
    return pc.binary_join(listed, props.KEY_SEPARATOR)


def _first_bad(mask: Any) -> int | None:
    import pyarrow.compute as pc  # noqa: PLC0415

    if not len(mask) or not pc.any(mask).as_py():
        return None
    found: int = pc.index(mask, True).as_py()
    return found


def _check_text(text: Any, column: str | None, first_row: int) -> None:
    """KEYS and TAGS are property values: no separator character may be in them."""
    import pyarrow.compute as pc  # noqa: PLC0415

    bad = _first_bad(pc.fill_null(_holds_separator(text), False))
    if bad is not None:
        raise ConfigError(
            f"column {column!r} in row {first_row + bad} is {text[bad].as_py()!r}: "
            "RocketMQ's property separators \\x01 and \\x02 cannot be stored in it"
        )


def _holds_separator(text: Any) -> Any:
    """Whether each text holds one of RocketMQ's property separators: the record keeps
    properties as "name\\x01value\\x02" pairs, so it would be read back as others."""
    import pyarrow.compute as pc  # noqa: PLC0415

    return pc.or_(
        pc.match_substring(text, props.NAME_VALUE_SEPARATOR),
        pc.match_substring(text, props.PROPERTY_SEPARATOR),
    )


def _check_properties(properties: Any, column: str | None, first_row: int) -> None:
    """Every property needs a non-empty name and value without separator characters: the
    record's text could not hold anything else (an empty or null one would be dropped,
    a separator would split it into other properties)."""
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.compute as pc  # noqa: PLC0415

    # As a list of (key, value) structs: that flattens with the batch's slice respected.
    kind = properties.type
    entries = properties.cast(pa.list_(pa.struct([kind.key_field, kind.item_field])))
    flat = entries.flatten()
    names, values = flat.field(0), flat.field(1)
    parents = entries.value_parent_indices()
    for part, text in (("name", names), ("value", values)):
        missing = pc.or_(pc.is_null(text), pc.equal(pc.fill_null(pc.binary_length(text), 0), 0))
        bad = _first_bad(pc.or_(missing, pc.fill_null(_holds_separator(text), False)))
        if bad is not None:
            found = text[bad].as_py()
            what = "null" if found is None else repr(found)
            where = "a property name" if part == "name" else f"property {names[bad].as_py()!r}"
            raise ConfigError(
                f"column {column!r} in row {first_row + parents[bad].as_py()}: {where} is "
                f"{what}; RocketMQ stores only non-empty names and values without the "
                "separators \\x01 and \\x02"
            )


def stage(
    batches: Iterator[Any],
    columns: WriteColumns,
    options: WriteOptions,
    job_id: str,
    scope: KeyScope | None = None,
) -> tuple[str | None, int]:
    """Write a task's rows to one staged file; ``(path, rows)``, path None for no rows.

    Written under a temporary name and renamed when complete, so the commit never reads
    a half-written file; a failing task removes what it wrote."""
    import pyarrow as pa  # noqa: PLC0415

    directory = job_dir(options.path, job_id)
    final = os.path.join(directory, f"{uuid.uuid4().hex}.arrow")
    temporary = final + ".tmp"
    rows = 0
    writer = None
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            staged = normalize(batch, columns, options, rows, scope)
            if writer is None:
                os.makedirs(directory, exist_ok=True)
                writer = pa.ipc.new_file(temporary, staging_schema())
            writer.write_batch(staged)
            rows += batch.num_rows
        if writer is None:
            return None, 0
        writer.close()
        writer = None
        os.replace(temporary, final)
    except BaseException:
        if writer is not None:
            writer.close()
        for path in (temporary, final):
            if os.path.exists(path):
                os.remove(path)
        raise
    return final, rows


def read_staged(path: str) -> Iterator[Any]:
    """The record batches of one staged file."""
    import pyarrow as pa  # noqa: PLC0415

    # Read into memory, not mapped: the commit's messages outlive each batch.
    with pa.OSFile(path, "rb") as source:
        reader = pa.ipc.open_file(source)
        batches = [reader.get_batch(i) for i in range(reader.num_record_batches)]
    yield from batches


class StagedRow(NamedTuple):
    topic: str
    queue_id: int | None  # the row's queueId column (None: the sink chooses)
    keys: str | None  # the KEYS column
    properties: dict[str, str]  # the row's properties, KEYS and TAGS set from their columns
    body: bytes


def staged_rows(batch: Any) -> Iterator[StagedRow]:
    """A batch of the staging schema row by row, as both sinks (file and network) send
    its messages."""
    columns = batch.to_pydict()
    for topic, queue_id, keys, tags, properties, body in zip(
        columns["topic"],
        columns["queue_id"],
        columns["keys"],
        columns["tags"],
        columns["properties"],
        columns["body"],
        strict=True,
    ):
        mapping = dict(properties) if properties else {}
        if keys is not None:
            mapping[props.KEYS] = keys
        if tags is not None:
            mapping[props.TAGS] = tags
        yield StagedRow(topic, queue_id, keys, mapping, body)
