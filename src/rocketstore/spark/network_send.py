"""Sending a write task's rows to a running cluster, as a RocketMQ 4.9.8 producer does
(option ``namesrv``; docs/spark.md, "Writing to a running cluster").

Layer: spark (top). No pyspark: the cluster is a :class:`SendView` (the real one is
:class:`.network_cluster.Cluster`), so routing, grouping and retries are tested with an
in-memory cluster, without Spark or sockets. Rows are checked and given their UNIQ_KEY by
the file-mode sink's own code (:func:`.staging.normalize`, :mod:`.sink_uniq_keys`).

- **Queues.** A topic's write queues are listed as a Java producer lists them
  (TopicPublishInfo): brokers by name, then queue ids 0..writeQueueNums-1 of each. A
  ``queueId`` column picks the queue at that place in the list (MessageQueueSelector
  style: with brokers a and b of 4 queues each, 5 is b's queue 1); else rows with keys go
  to ``abs(hashCode(KEYS)) % n`` (SelectMessageQueueByHash, as the file mode's
  :mod:`.routing`); else round robin from the task's partition id.
- **Requests.** The rows of one queue go in SEND_BATCH_MESSAGE requests of at most
  :data:`CHUNK_MESSAGES` messages / :data:`CHUNK_BODY_BYTES` body bytes, in row order;
  a lone message (and one a batch cannot carry: a DELAY level, a %RETRY% topic) goes in
  SEND_MESSAGE_V2.
- **Retries.** A request that fails (no answer, or one of the codes a producer retries
  on) goes to the next broker of the topic, up to :data:`RETRIES` times
  (retryTimesWhenSendFailed), to that broker's queue ``queue id % its write queues``;
  then the task fails naming every broker and address tried. A retry after a lost answer
  may store the messages twice: the write is at-least-once, and the UNIQ_KEY tells the
  copies apart.
- **Unknown topics.** As a producer: the route of ``TBW102`` (registered by brokers whose
  autoCreateTopicEnable is on) is used, each broker creating the topic with
  min(``queueNums``, TBW102's write queues) queues on the first send; with no such broker
  the write fails naming the topic.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from rocketstore.errors import ConfigError
from rocketstore.format import properties as props
from rocketstore.format.javahash import java_hashmap_ordered
from rocketstore.paths import RETRY_PREFIX
from rocketstore.remoting.blocking import RemotingClientError, request
from rocketstore.remoting.codec import RemotingCommand
from rocketstore.remoting.codes import RequestCode, ResponseCode
from rocketstore.remoting.send import (
    AUTO_CREATE_TOPIC,
    OutgoingMessage,
    encode_message_batch,
    send_header_v2,
)
from rocketstore.spark.network_cluster import (
    AccessDeniedError,
    BrokerRoute,
    ClusterError,
    is_acl_refusal,
)
from rocketstore.spark.routing import hash_queue
from rocketstore.spark.sink_uniq_keys import KeyScope
from rocketstore.spark.staging import normalize, staged_rows
from rocketstore.spark.write_options import WriteColumns, WriteOptions

log = logging.getLogger(__name__)

PRODUCER_GROUP = "rocketstore_spark_writer"
RETRIES = 2  # a producer's retryTimesWhenSendFailed
CHUNK_MESSAGES = 256
CHUNK_BODY_BYTES = 1024 * 1024  # well under a broker's maxMessageSize for a batch (4 MiB)
# Answers a producer sends again elsewhere (DefaultMQProducer.retryResponseCodes, plus
# SYSTEM_BUSY: a broker shedding load).
RETRY_CODES = frozenset(
    (
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.SYSTEM_BUSY,
        ResponseCode.SERVICE_NOT_AVAILABLE,
        ResponseCode.NO_PERMISSION,
        ResponseCode.TOPIC_NOT_EXIST,
    )
)
# Stored (the flush or the slave was late: SendStatus says so, the messages are there).
STORED_CODES = frozenset(
    (
        ResponseCode.SUCCESS,
        ResponseCode.FLUSH_DISK_TIMEOUT,
        ResponseCode.FLUSH_SLAVE_TIMEOUT,
        ResponseCode.SLAVE_NOT_AVAILABLE,
    )
)


class SendView(Protocol):
    """What sending asks a cluster."""

    def route(self, topic: str) -> list[BrokerRoute]: ...

    def invoke(self, address: str, cmd: RemotingCommand) -> RemotingCommand: ...


@dataclass(frozen=True)
class WriteRoute:
    """The brokers a topic's messages go to (writable masters, by name)."""

    topic: str
    brokers: tuple[BrokerRoute, ...]
    auto_create: bool  # from TBW102's route: the brokers create the topic on send
    queue_nums: int  # defaultTopicQueueNums of the requests

    def queues(self) -> list[tuple[int, int]]:
        """(index in ``brokers``, queue id) in a Java producer's order."""
        return [(i, q) for i, b in enumerate(self.brokers) for q in range(b.write_queue_nums)]


def write_route(cluster: SendView, topic: str, queue_nums: int, namesrv: str = "") -> WriteRoute:
    """``topic``'s route, or TBW102's when the topic has none and a broker auto-creates
    topics; ConfigError naming the topic when neither exists."""
    try:
        brokers = [b for b in cluster.route(topic) if b.writable]
        auto = False
    except ConfigError as unknown:
        try:
            default = cluster.route(AUTO_CREATE_TOPIC)
        except ConfigError:
            raise ConfigError(
                f"topic {topic!r} is unknown to the name servers {namesrv} and no broker "
                "creates topics on send (autoCreateTopicEnable=false): create it first "
                "(mqadmin updateTopic)"
            ) from unknown
        brokers = [
            dataclasses.replace(b, write_queue_nums=min(queue_nums, b.write_queue_nums))
            for b in default
            if b.writable
        ]
        auto = True
    if not brokers:
        raise ClusterError(
            f"topic {topic!r}: no broker of its route takes writes (write permission, write "
            "queues and a registered master)"
        )
    return WriteRoute(topic, tuple(sorted(brokers, key=lambda b: b.name)), auto, queue_nums)


@dataclass
class _Pending:
    """Rows of one queue waiting to be sent, in row order."""

    messages: list[OutgoingMessage] = dataclasses.field(default_factory=list)


class Sender:
    """Sends one task's rows (one per task: the cluster's connections are not shared)."""

    def __init__(
        self,
        cluster: SendView,
        options: WriteOptions,
        first_turn: int = 0,
        clock_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
        routes: Mapping[str, WriteRoute] | None = None,
    ) -> None:
        self.cluster = cluster
        self.options = options
        self.first_turn = first_turn
        self.clock_ms = clock_ms
        # Routes known beforehand (the driver's), else asked once per topic.
        self.routes: dict[str, WriteRoute] = dict(routes or {})
        self._turns: dict[str, int] = {}
        self.sent: dict[str, int] = {}  # broker name -> messages stored there

    def route(self, topic: str) -> WriteRoute:
        found = self.routes.get(topic)
        if found is None:
            found = write_route(self.cluster, topic, self.options.queue_nums, self.options.namesrv)
            self.routes[topic] = found
        return found

    def choose(self, topic: str, queue_id: int | None, keys: str | None) -> int:
        """The index in ``route(topic).queues()`` a row goes to (module docstring)."""
        queues = self.route(topic).queues()
        if queue_id is not None:
            if queue_id >= len(queues):
                raise ConfigError(
                    f"column queueId is {queue_id} for topic {topic!r}, whose brokers have "
                    f"{len(queues)} write queues ({self._describe(topic)}): queueId numbers "
                    "them 0..n-1 across the brokers, by broker name"
                )
            return queue_id
        if keys:
            return hash_queue(keys, len(queues))
        turn = self._turns.get(topic, self.first_turn)
        self._turns[topic] = turn + 1
        return turn % len(queues)

    def _describe(self, topic: str) -> str:
        return ", ".join(f"{b.name}: {b.write_queue_nums}" for b in self.route(topic).brokers)

    def send_batches(
        self, batches: Iterator[object], columns: WriteColumns, scope: KeyScope
    ) -> int:
        """Check, key and send every input Arrow batch; the rows sent."""
        rows = 0
        for batch in batches:
            count = int(batch.num_rows)  # type: ignore[attr-defined]
            if count == 0:
                continue
            self.send_normalized(normalize(batch, columns, self.options, rows, scope))
            rows += count
        return rows

    def send_normalized(self, staged: Any) -> None:
        """One batch in the staging schema (:func:`.staging.normalize`): grouped per
        queue, in row order within each, and sent."""
        groups: dict[tuple[str, int], _Pending] = {}
        lone: list[tuple[str, int, OutgoingMessage]] = []
        for topic, queue_id, keys, mapping, body in staged_rows(staged):
            mapping[props.WAIT] = "true"  # as a Java Message has it
            index = self.choose(topic, queue_id, keys)
            message = OutgoingMessage(
                body, props.encode_properties_str(java_hashmap_ordered(mapping))
            )
            if props.DELAY in mapping or topic.startswith(RETRY_PREFIX):
                lone.append((topic, index, message))
            else:
                groups.setdefault((topic, index), _Pending()).messages.append(message)
        for (topic, index), pending in groups.items():
            for chunk in chunks(pending.messages):
                self.send(topic, index, chunk)
        for topic, index, message in lone:
            self.send(topic, index, [message])

    def send(self, topic: str, index: int, messages: list[OutgoingMessage]) -> str:
        """Send ``messages`` to queue ``index`` of the topic, retrying on the next brokers;
        the name of the broker that stored them."""
        route = self.route(topic)
        broker_index, queue_id = route.queues()[index]
        failures = []
        denied = False
        for attempt in range(1 + RETRIES):
            broker = route.brokers[(broker_index + attempt) % len(route.brokers)]
            qid = queue_id % broker.write_queue_nums
            address = broker.master or ""
            try:
                answer = self.cluster.invoke(address, self._request(route, qid, messages))
            except RemotingClientError as e:
                failures.append(f"{broker.name} ({address}): {e}")
                continue
            if answer.code in STORED_CODES:
                if answer.code != ResponseCode.SUCCESS:
                    log.warning(
                        "%s (%s) stored %d message(s) of %s but answered code %d: %s",
                        broker.name, address, len(messages), topic, answer.code, answer.remark,
                    )  # fmt: skip
                self.sent[broker.name] = self.sent.get(broker.name, 0) + len(messages)
                return broker.name
            refusal = f"{broker.name} ({address}): code {answer.code}, {answer.remark}"
            if answer.code not in RETRY_CODES:
                raise ClusterError(
                    f"sending {len(messages)} message(s) of topic {topic!r} refused by {refusal}"
                )
            failures.append(refusal)
            denied = denied or is_acl_refusal(answer)
        message = (
            f"sending {len(messages)} message(s) of topic {topic!r} failed {1 + RETRIES} "
            f"times (retries go to the next broker): {'; '.join(failures)}"
        )
        if denied:
            raise AccessDeniedError(
                f"{message}. Code {ResponseCode.NO_PERMISSION} (a Java broker's "
                "AclException) is the brokers' ACL refusing the request: check options "
                "accessKey and secretKey"
            )
        raise ClusterError(message)

    def _request(
        self, route: WriteRoute, queue_id: int, messages: list[OutgoingMessage]
    ) -> RemotingCommand:
        batch = len(messages) > 1
        header = send_header_v2(
            producer_group=PRODUCER_GROUP,
            topic=route.topic,
            queue_id=queue_id,
            born_timestamp_ms=self.clock_ms(),
            # A batch's own properties: WAIT, as MessageBatch.generateFromList sets them.
            properties=f"{props.WAIT}{props.NAME_VALUE_SEPARATOR}true"
            if batch
            else messages[0].properties,
            flag=0 if batch else messages[0].flag,
            default_topic_queue_nums=route.queue_nums,
            batch=batch,
        )
        if batch:
            body = encode_message_batch(messages)
            return request(RequestCode.SEND_BATCH_MESSAGE, header, body)
        return request(RequestCode.SEND_MESSAGE_V2, header, messages[0].body)


def chunks(messages: list[OutgoingMessage]) -> Iterator[list[OutgoingMessage]]:
    """Consecutive runs of at most CHUNK_MESSAGES messages and CHUNK_BODY_BYTES body bytes
    (a message larger than that alone)."""
    chunk: list[OutgoingMessage] = []
    size = 0
    for message in messages:
        if chunk and (len(chunk) >= CHUNK_MESSAGES or size + len(message.body) > CHUNK_BODY_BYTES):
            yield chunk
            chunk, size = [], 0
        chunk.append(message)
        size += len(message.body)
    if chunk:
        yield chunk
