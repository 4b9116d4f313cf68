"""``dump`` (CommitLog records as JSON lines) and ``export`` (jsonl or parquet files).

Layer: cli. Both read the CommitLog files directly (:mod:`rocketstore.check.scan`): no
lock, every record checked, and a record with a bad body CRC is still written
(``crcOk: false``), so they also serve to salvage a damaged store. Parquet goes through
pyarrow, an optional dependency imported only when asked for.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from typing import IO, Any

import click

from rocketstore.check.scan import CommitLogScan, ScannedRecord
from rocketstore.cli.context import CliContext, CliError, json_line
from rocketstore.cli.params import java_long
from rocketstore.cli.progress import progress
from rocketstore.cli.rebuild_engines import (
    check_spark_conf,
    spark_conf_option,
    spark_rebuild_module,
)
from rocketstore.config import StoreConfig
from rocketstore.format import record as rec
from rocketstore.format.message import MessageExt
from rocketstore.paths import MULTI_PATH_SPLITTER, split_paths

PARQUET_BATCH_ROWS = 8192


def record_json(record: ScannedRecord) -> dict[str, Any]:
    """Every field of a record (body base64, as stored) plus where it is and its CRC state."""
    message = rec.to_message_ext(record.buf, record.view)
    obj: dict[str, Any] = {"offset": record.offset, "crcOk": record.crc_ok}
    obj.update(message.to_dict())
    obj["magicCode"] = record.view.magic & 0xFFFFFFFF
    return obj


def scan_range(ctx: CliContext, start: int | None, end: int | None) -> CommitLogScan:
    root = ctx.require_store_dir()
    scan = CommitLogScan(root, check_crc=True, start=start, end=end, dirs=ctx.commitlog_dirs)
    if start is not None and scan.files and start >= scan.files[-1].end:
        raise CliError(
            f"offset {start} is beyond the end of the CommitLog (its files end at "
            f"{scan.files[-1].end})"
        )
    return scan


def _warn_issues(scan: CommitLogScan) -> None:
    for issue in scan.issues:
        click.echo(
            f"rocketstore: warning: {issue.path}: offset {issue.offset}: {issue.reason}", err=True
        )


def _records(scan: CommitLogScan, label: str, topics: tuple[str, ...]) -> Iterator[ScannedRecord]:
    """Records in range, with a progress bar over the bytes to scan."""
    total = sum(
        f.size
        for f in scan.files
        if (scan.start is None or f.end > scan.start) and (scan.end is None or f.start < scan.end)
    )
    seen: set[str] = set()
    with progress(total, label, streams_stdout=True) as bar:
        scan.on_bytes = bar.advance
        for record in scan.records():
            if not topics or record.view.topic in topics:
                seen.add(record.view.topic)
                yield record
    # An empty result for a misspelt topic would look like a topic with no messages.
    for topic in sorted(set(topics) - seen):
        where = "" if scan.start is None and scan.end is None else " in the range read"
        click.echo(f"rocketstore: warning: no record of topic {topic!r}{where}", err=True)


def _range_options(command: Callable[..., None]) -> Callable[..., None]:
    """--from/--to (CommitLog offsets) and -t (topics), shared by dump and export."""
    options = (
        click.option(
            "--from",
            "start",
            type=java_long(0),
            default=None,
            help="First CommitLog offset (the first record at or after it). Example: --from 0",
        ),
        click.option(
            "--to",
            "end",
            type=java_long(0),
            default=None,
            help="Stop before this CommitLog offset. Example: --to 1048576",
        ),
        click.option(
            "-t",
            "--topic",
            "topics",
            multiple=True,
            help="Only this topic (repeatable). Example: -t OrderEvents -t Payments",
        ),
    )
    for option in reversed(options):
        command = option(command)
    return command


@click.command("dump", short_help="CommitLog records as JSON lines (bodies base64).")
@_range_options
@click.pass_obj
def dump(ctx: CliContext, start: int | None, end: int | None, topics: tuple[str, ...]) -> None:
    """Every CommitLog record as one JSON line: its offset, crcOk, every header field,
    properties, and the body in base64. Unreadable data is reported on stderr.

    \b
    Example:
      rocketstore --store ./store dump --from 0 --to 65536 | jq .topic
    """
    if start is not None and end is not None and end <= start:
        raise click.BadParameter(f"--to {end} must be after --from {start}", param_hint="--to")
    scan = scan_range(ctx, start, end)
    for record in _records(scan, "dump", topics):
        click.echo(json_line(record_json(record)))
    _warn_issues(scan)


@click.command("export", short_help="Write records to a jsonl or parquet file.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "parquet"]),
    required=True,
    help="jsonl: dump's JSON lines; parquet: one row per record (needs pyarrow). "
    "Example: --format parquet",
)
@click.option(
    "--engine",
    type=click.Choice(["single", "spark"]),
    default="single",
    show_default=True,
    help="single: one file, read here; spark: a Parquet dataset partitioned by topic and "
    "date, written by Spark through the rocketstore data source. Example: --engine spark",
)
@click.option(
    "--master",
    default=None,
    help="Spark master for --engine spark (default local[*]). Example: --master local[2]",
)
@spark_conf_option
@click.argument("out", type=click.Path(allow_dash=True))
@_range_options
@click.pass_obj
def export(
    ctx: CliContext,
    fmt: str,
    engine: str,
    master: str | None,
    spark_conf: dict[str, str],
    out: str,
    topics: tuple[str, ...],
    start: int | None,
    end: int | None,
) -> None:
    """Write every record (or those of some topics) to OUT as JSON lines or Parquet
    (OUT '-' is stdout, jsonl only). The file appears only once complete.

    With --engine spark, OUT is a directory: a Parquet dataset partitioned by topic and
    date (UTC) holding the data source's default topics (or those of -t).

    \b
    Example:
      rocketstore --store ./store export --format jsonl messages.jsonl
      rocketstore --store ./store export --format parquet -t OrderEvents orders.parquet
      rocketstore --store ./store export --engine spark --format parquet ./dataset
      rocketstore --store ./store export --engine spark --conf spark.driver.memory=4g \\
          --format parquet ./dataset
    """
    if engine == "spark":
        _export_spark(ctx, fmt, master, spark_conf, out, topics, start, end)
        return
    if master is not None:
        raise click.BadParameter("--master needs --engine spark", param_hint="--master")
    check_spark_conf(spark_conf, engine)
    if os.path.isdir(out):
        raise click.BadParameter(f"{out} is a directory", param_hint="OUT")
    if out != "-" and (os.path.islink(out) or (os.path.exists(out) and not os.path.isfile(out))):
        # The file is written beside OUT and renamed over it: a link, FIFO or device
        # would be replaced by a plain file (as root, /dev/null too).
        raise click.BadParameter(
            f"{out} exists and is not a regular file (a link, FIFO or device): give a "
            "file's path, or - for stdout (jsonl)",
            param_hint="OUT",
        )
    if start is not None and end is not None and end <= start:
        raise click.BadParameter(f"--to {end} must be after --from {start}", param_hint="--to")
    if fmt == "parquet" and out == "-":
        raise click.BadParameter("parquet cannot go to stdout", param_hint="OUT")
    writer = _parquet_writer_class() if fmt == "parquet" else None
    scan = scan_range(ctx, start, end)
    records = _records(scan, "export", topics)
    if out == "-":
        count = _write_jsonl(records, sys.stdout)
        _warn_issues(scan)
        return
    partial = out + ".partial"
    try:
        if writer is None:
            with open(partial, "w", encoding="utf-8") as f:
                count = _write_jsonl(records, f)
        else:
            count = writer(partial).write(records)
        os.replace(partial, out)
    except BaseException:
        if os.path.exists(partial):
            os.remove(partial)
        raise
    _warn_issues(scan)
    size = os.path.getsize(out)
    if ctx.as_json:
        ctx.emit({"type": "summary", "format": fmt, "out": out, "records": count, "bytes": size})
    else:
        click.echo(f"exported {count} records to {out} ({fmt}, {size} bytes)")


def _export_spark(
    ctx: CliContext,
    fmt: str,
    master: str | None,
    spark_conf: dict[str, str],
    out: str,
    topics: tuple[str, ...],
    start: int | None,
    end: int | None,
) -> None:
    if fmt != "parquet":
        raise click.BadParameter("--engine spark writes --format parquet", param_hint="--format")
    if start is not None or end is not None:
        raise click.BadParameter("--from/--to are not supported with --engine spark")
    if out == "-" or os.path.exists(out):
        raise click.BadParameter(f"{out} must be a new directory", param_hint="OUT")
    root = ctx.require_store_dir()
    spark_rebuild = spark_rebuild_module()
    with spark_rebuild.spark_session(master, "rocketstore export", spark_conf) as spark:
        count = spark_rebuild.export_parquet(
            spark, root, out, topics, commit_log_options=commit_log_options(ctx.config, root)
        )
    if ctx.as_json:
        ctx.emit(
            {"type": "summary", "format": fmt, "engine": "spark", "out": out, "records": count}
        )
    else:
        click.echo(f"exported {count} records to {out} (parquet dataset by topic and date)")


def commit_log_options(config: StoreConfig, root: str) -> dict[str, str]:
    """The data source options naming the CommitLog directories of ``config`` (none for
    ``<store>/commitlog``), as absolute paths: Spark's tasks may run elsewhere. A DLedger
    log's data directories are named whenever there is one (``root`` tells which)."""
    options = {
        "storePathCommitLog": config.store_path_commit_log,
        "readOnlyCommitLogStorePaths": config.read_only_commit_log_store_paths,
        "storePathDLedgerCommitLog": MULTI_PATH_SPLITTER.join(config.commit_log_dirs(root).dledger),
    }
    return {
        name: MULTI_PATH_SPLITTER.join(os.path.abspath(p) for p in split_paths(value))
        + (MULTI_PATH_SPLITTER if MULTI_PATH_SPLITTER in value else "")
        for name, value in options.items()
        if value.strip()
    }


def _write_jsonl(records: Iterator[ScannedRecord], stream: IO[str]) -> int:
    count = 0
    for record in records:
        stream.write(json_line(record_json(record)))
        stream.write("\n")
        count += 1
    return count


def _parquet_writer_class() -> type[ParquetExport]:
    try:
        import pyarrow  # noqa: F401, PLC0415 - optional dependency
    except ImportError as e:
        raise CliError(
            "parquet export needs pyarrow, which is not installed: pip install pyarrow "
            "(or install rocketstore with its spark extra)"
        ) from e
    return ParquetExport


class ParquetExport:
    """Rows in batches of PARQUET_BATCH_ROWS through a pyarrow ParquetWriter."""

    COLUMNS = (
        "offset",
        "size",
        "topic",
        "queue_id",
        "queue_offset",
        "msg_id",
        "uniq_key",
        "tags",
        "keys",
        "flag",
        "sys_flag",
        "body_crc",
        "crc_ok",
        "born_timestamp",
        "born_host",
        "store_timestamp",
        "store_host",
        "reconsume_times",
        "prepared_transaction_offset",
        "properties",
        "body",
    )

    def __init__(self, path: str):
        import pyarrow as pa  # noqa: PLC0415 - optional dependency

        self.path = path
        utc_ms = pa.timestamp("ms", tz="UTC")
        self.schema = pa.schema(
            [
                ("offset", pa.int64()),
                ("size", pa.int32()),
                ("topic", pa.string()),
                ("queue_id", pa.int32()),
                ("queue_offset", pa.int64()),
                ("msg_id", pa.string()),
                ("uniq_key", pa.string()),
                ("tags", pa.string()),
                ("keys", pa.string()),
                ("flag", pa.int32()),
                ("sys_flag", pa.int32()),
                ("body_crc", pa.int32()),
                ("crc_ok", pa.bool_()),
                ("born_timestamp", utc_ms),
                ("born_host", pa.string()),
                ("store_timestamp", utc_ms),
                ("store_host", pa.string()),
                ("reconsume_times", pa.int32()),
                ("prepared_transaction_offset", pa.int64()),
                ("properties", pa.map_(pa.string(), pa.string())),
                ("body", pa.binary()),
            ]
        )

    @staticmethod
    def row(record: ScannedRecord) -> tuple[Any, ...]:
        m: MessageExt = rec.to_message_ext(record.buf, record.view)
        return (
            record.offset,
            m.size,
            m.topic,
            m.queue_id,
            m.queue_offset,
            m.msg_id,
            m.uniq_key,
            m.tags,
            m.keys,
            m.flag,
            m.sys_flag,
            m.body_crc,
            record.crc_ok,
            m.born_timestamp,
            m.born_host,
            m.store_timestamp,
            m.store_host,
            m.reconsume_times,
            m.prepared_transaction_offset,
            list(m.properties.items()),
            m.body,
        )

    def write(self, records: Iterator[ScannedRecord]) -> int:
        import pyarrow as pa  # noqa: PLC0415 - optional dependency
        import pyarrow.parquet as pq  # noqa: PLC0415

        count = 0
        with pq.ParquetWriter(self.path, self.schema) as writer:
            batch: list[tuple[Any, ...]] = []
            for record in records:
                batch.append(self.row(record))
                if len(batch) >= PARQUET_BATCH_ROWS:
                    writer.write_table(self._table(pa, batch))
                    count += len(batch)
                    batch = []
            if batch or count == 0:
                writer.write_table(self._table(pa, batch))
                count += len(batch)
        return count

    def _table(self, pa: Any, rows: list[tuple[Any, ...]]) -> Any:
        columns: list[tuple[Any, ...]] = (
            list(zip(*rows, strict=True)) if rows else [() for _ in self.COLUMNS]
        )
        arrays = [
            pa.array(list(values), type=self.schema.field(i).type)
            for i, values in enumerate(columns)
        ]
        return pa.Table.from_arrays(arrays, schema=self.schema)


def register(group: click.Group) -> None:
    group.add_command(dump)
    group.add_command(export)
