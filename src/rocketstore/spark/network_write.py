"""Batch and streaming writers through name servers (option ``namesrv``): every task sends
its rows to the brokers itself (:mod:`.network_send`); there is nothing to commit.

Layer: spark (top). The writer is made on the driver, which asks the route of option
``topic`` there, so an unknown topic fails the job before any task runs, and hands it to
every task (a stream: to every micro-batch of the query run; restart the query to use
brokers that joined since). Topics of a ``topic`` column are routed by each task.

At-least-once: rows a task sent stay sent when the job or the micro-batch fails later,
and a task Spark runs again sends its rows again, with the same UNIQ_KEYs
(:mod:`.sink_uniq_keys`), by which readers drop the copies (docs/spark.md).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from rocketstore.remoting.blocking import RemotingClientError, request
from rocketstore.remoting.codes import RequestCode
from rocketstore.spark.network_cluster import Cluster, is_acl_refusal, refusal
from rocketstore.spark.network_send import Sender, WriteRoute, write_route
from rocketstore.spark.sink_uniq_keys import task_scope
from rocketstore.spark.staging import new_job_id
from rocketstore.spark.write import _month_ms
from rocketstore.spark.write_options import WriteColumns, WriteOptions

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SentRows(WriterCommitMessage):
    rows: int
    by_broker: dict[str, int] = field(default_factory=dict)


def _totals(messages: list[WriterCommitMessage | None]) -> tuple[int, dict[str, int]]:
    rows, by_broker = 0, dict[str, int]()
    for message in messages:
        if isinstance(message, SentRows):
            rows += message.rows
            for broker, count in message.by_broker.items():
                by_broker[broker] = by_broker.get(broker, 0) + count
    return rows, by_broker


def check_access(cluster: Cluster, route: WriteRoute) -> None:
    """On the driver, before any task runs: one signed GET_MAX_OFFSET to each broker of
    the route, so a broker whose ACL refuses the keys (or wants keys none were given for)
    fails the job naming it. Any other answer passes; a broker that does not answer is
    left to the tasks, which send to the next broker (as a producer does)."""
    for broker in route.brokers:
        address = broker.master
        if address is None:
            continue
        ext = {"topic": route.topic, "queueId": "0"}
        try:
            answer = cluster.invoke(address, request(RequestCode.GET_MAX_OFFSET, ext))
        except RemotingClientError as e:
            log.warning(
                "broker %s (%s) did not answer before the write: %s", broker.name, address, e
            )
            continue
        if is_acl_refusal(answer):
            where = f"broker {broker.name} ({address})"
            raise refusal(f"write to topic {route.topic!r}", where, answer, cluster.signed)


class _Sending:
    def __init__(self, options: WriteOptions, columns: WriteColumns) -> None:
        self.options = options
        self.columns = columns
        self.job_id = new_job_id()
        self.month_ms = _month_ms()
        # Option topic's route, asked here (an unknown topic fails the job before any task
        # runs) and used by every task: one job spreads over the same brokers even while
        # the brokers are creating the topic (the route of a topic sent to one broker so
        # far names that broker only).
        self.routes: dict[str, WriteRoute] = {}
        if options.topic is not None:
            with Cluster(options.namesrv, credentials=options.credentials) as cluster:
                route = write_route(cluster, options.topic, options.queue_nums, options.namesrv)
                check_access(cluster, route)
                self.routes[options.topic] = route

    def _send(self, iterator: Iterator[Any], streaming: bool) -> SentRows:
        scope = task_scope(self.job_id, self.month_ms, streaming=streaming)
        with Cluster(self.options.namesrv, credentials=self.options.credentials) as cluster:
            sender = Sender(cluster, self.options, first_turn=scope.partition, routes=self.routes)
            rows = sender.send_batches(iterator, self.columns, scope)
        return SentRows(rows, dict(sender.sent))


class NetworkWriter(_Sending, DataSourceArrowWriter):
    """``df.write.format("rocketstore").option("namesrv", ...).save()``."""

    def write(self, iterator: Iterator[Any]) -> SentRows:
        return self._send(iterator, streaming=False)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        rows, by_broker = _totals(messages)
        log.info("write job %s sent %d rows: %s", self.job_id, rows, by_broker)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        rows, by_broker = _totals(messages)
        log.warning(
            "write job %s failed; rows its finished tasks sent stay sent (%d: %s): the write "
            "is at-least-once",
            self.job_id, rows, by_broker,
        )  # fmt: skip


class NetworkStreamWriter(_Sending, DataSourceStreamArrowWriter):
    """``df.writeStream.format("rocketstore").option("namesrv", ...)``: each micro-batch's
    tasks send; a batch Spark runs again after a restart is sent again (same UNIQ_KEYs)."""

    def write(self, iterator: Iterator[Any]) -> SentRows:
        return self._send(iterator, streaming=True)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        rows, by_broker = _totals(messages)
        log.info("micro-batch %d sent %d rows: %s", batchId, rows, by_broker)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        rows, _ = _totals(messages)
        log.warning(
            "micro-batch %d failed; %d rows its finished tasks sent stay sent (at-least-once)",
            batchId, rows,
        )  # fmt: skip
