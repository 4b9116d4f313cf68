"""Batch and streaming writers of the ``rocketstore`` data source (docs/spark.md, Writing).

Layer: spark (top). Tasks stage their rows (:mod:`.staging`); the driver's commit appends
them through the store (:mod:`.commit`); abort removes what the tasks staged. A batch job
gets its own staging directory, named on the driver when Spark asks for the writer (Spark
hands that same writer to the tasks and to the commit); a streaming sink uses one
directory per sink id (see :func:`.staging.sink_job_id`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from rocketstore.format.message_id import month_start_ms
from rocketstore.spark.commit import commit_staged
from rocketstore.spark.sink_log import checkpoint_query_id
from rocketstore.spark.sink_uniq_keys import task_scope
from rocketstore.spark.staging import new_job_id, remove_job, sink_job_id, stage
from rocketstore.spark.write_options import WriteColumns, WriteOptions

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StagedFile(WriterCommitMessage):
    path: str | None  # None: the task had no rows
    rows: int


def _month_ms() -> int:
    """Now, in ms since the month's start (driver's local time): the time field of the
    UNIQ_KEYs this job's (or query run's) tasks derive (:mod:`.sink_uniq_keys`)."""
    now = time.time_ns() // 1_000_000
    return now - month_start_ms(now)


def _files(messages: Sequence[WriterCommitMessage | None]) -> list[str]:
    return [m.path for m in messages if isinstance(m, StagedFile) and m.path is not None]


class RocketStoreWriter(DataSourceArrowWriter):
    """``df.write.format("rocketstore").mode("append").save(path)``."""

    def __init__(self, options: WriteOptions, columns: WriteColumns) -> None:
        self.options = options
        self.columns = columns
        self.job_id = new_job_id()
        self.month_ms = _month_ms()

    def write(self, iterator: Iterator[Any]) -> StagedFile:
        scope = task_scope(self.job_id, self.month_ms, streaming=False)
        path, rows = stage(iterator, self.columns, self.options, self.job_id, scope)
        return StagedFile(path, rows)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        try:
            commit_staged(self.options.path, _files(messages), self.options.queue_nums)
        finally:
            remove_job(self.options.path, self.job_id)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        log.warning("write job %s aborted: its staged rows are discarded", self.job_id)
        remove_job(self.options.path, self.job_id)


class RocketStoreStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("rocketstore")``: each micro-batch is one commit; a batch id
    the sink committed before (a replay after restart) appends nothing."""

    def __init__(self, options: WriteOptions, columns: WriteColumns) -> None:
        self.options = options
        self.columns = columns
        assert options.sink_id is not None  # parse_write_options requires it
        self.job_id = sink_job_id(options.sink_id)
        self.month_ms = _month_ms()

    def write(self, iterator: Iterator[Any]) -> StagedFile:
        scope = task_scope(self.options.sink_id or self.job_id, self.month_ms, streaming=True)
        path, rows = stage(iterator, self.columns, self.options, self.job_id, scope)
        return StagedFile(path, rows)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        assert self.options.sink_id is not None  # parse_write_options requires it
        try:
            commit_staged(
                self.options.path,
                _files(messages),
                self.options.queue_nums,
                sink=(self.options.sink_id, batchId),
                query_id=(
                    checkpoint_query_id(self.options.checkpoint)
                    if self.options.checkpoint
                    else None
                ),
            )
        finally:
            remove_job(self.options.path, self.job_id)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        log.warning("micro-batch %d aborted: its staged rows are discarded", batchId)
        remove_job(self.options.path, self.job_id)
