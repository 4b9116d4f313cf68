"""Everything a request processor needs: the store, the broker's state and its clients.

Layer: broker. Wiring only; :mod:`rocketstore.broker.app` builds one per broker and the
processors (``broker.processors``) read and change the state through it.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

from rocketstore.broker.acl import AclConfig
from rocketstore.broker.broker_config import BrokerConfig
from rocketstore.broker.client_registry import ClientRegistry
from rocketstore.broker.codes import RequestCode
from rocketstore.broker.consumer_offsets import ConsumerOffsets
from rocketstore.broker.ha_master import ReplicationMaster
from rocketstore.broker.ha_slave import ReplicationSlave
from rocketstore.broker.long_polling import PullWaiters
from rocketstore.broker.queue_locks import QueueLocks
from rocketstore.broker.remoting import FLAG_ONEWAY, RemotingCommand
from rocketstore.broker.schedule import ScheduleService
from rocketstore.broker.stats import BrokerStats
from rocketstore.broker.subscription_groups import SubscriptionGroupManager
from rocketstore.broker.topic_config import DataVersion, TopicConfigManager
from rocketstore.broker.transaction_service import CheckRequest, TransactionService
from rocketstore.config import parse_host
from rocketstore.format.message import Message
from rocketstore.put_columns import ColumnsResult
from rocketstore.put_path import PutResult
from rocketstore.status import PutStatus
from rocketstore.store import MessageStore
from rocketstore.store.timer import TimerMessageStore

log = logging.getLogger(__name__)

T = TypeVar("T")
M = TypeVar("M")

# PullMessageProcessor's hold limits: a held pull waits at most its suspend time, capped here
# so a client asking for hours cannot pin a task forever.
MAX_SUSPEND_MS = 60_000
# Why a slave's store refuses every put with SERVICE_NOT_AVAILABLE ("broke role is slave,
# so putMessage is forbidden"); a send's remark wraps it in SendMessageProcessor's words
# (processors.send.put_failure_remark).
SLAVE_REASON = "the broker role is slave"
# Those words without the disk figures the remark now gives, around SLAVE_REASON.
SLAVE_REFUSAL = (
    "service not available now. It may be caused by one of the following reasons: the "
    f"broker's disk is full, messages are put to the slave, message store has been shut "
    f"down, etc. ({SLAVE_REASON})"
)
# Bodies above this many bytes are put from a worker thread: their copy (about a
# millisecond for 4 MiB) would hold up every other connection.
INLINE_PUT_MAX_BYTES = 256 * 1024


@runtime_checkable
class CommandSink(Protocol):
    """Where the broker can push a command to a client (a server Connection)."""

    def send(self, cmd: RemotingCommand) -> None: ...


@dataclass(frozen=True)
class ClientAnswer:
    """A client's answer to a request the broker passed on to it (code, remark, body)."""

    code: int
    remark: str
    body: bytes = b""


@dataclass(frozen=True)
class OtherConsumer:
    """A consumer connected over another protocol (a 5.x client over gRPC), as the
    admin's consumer connection list shows it."""

    client_id: str
    address: str
    language: str
    version: int
    consume_type: str  # CONSUME_ACTIVELY (SimpleConsumer) or CONSUME_PASSIVELY
    subscriptions: dict[str, dict[str, Any]]  # SubscriptionData beans by topic


# What relays an admin's request to a client the remoting side does not know: (request
# code, consumer group, client id, the request's fields, its body) -> the answer to await,
# or None when that client is not online there either.
ClientCallFallback = Callable[
    [int, str, str, dict[str, str], bytes], Awaitable[ClientAnswer] | None
]


@dataclass
class BrokerContext:
    store: MessageStore
    topics: TopicConfigManager
    offsets: ConsumerOffsets
    config: BrokerConfig
    broker_addr: str  # "ip:port" clients reach us at; also the STOREHOST of every record
    groups: SubscriptionGroupManager  # consumer groups' settings
    clients: ClientRegistry = field(default_factory=ClientRegistry)
    locks: QueueLocks = field(default_factory=QueueLocks)
    waiters: PullWaiters = field(default_factory=PullWaiters)
    acl: AclConfig | None = None
    transactions: TransactionService | None = None
    stats: BrokerStats = field(default_factory=BrokerStats)
    schedule: ScheduleService | None = None
    # RocketMQ 5's timer wheel (rocketstore.store.timer), on a master with it enabled.
    timer: TimerMessageStore | None = None
    long_polling_enable: bool = True
    short_polling_ms: int = 1000
    # The broker.conf it was started with (-c): updateBrokerConfig writes changes there.
    settings_path: str | None = None
    # Bumped by each updateBrokerConfig (getBrokerConfig's ``version``).
    config_version: DataVersion = field(default_factory=DataVersion)
    # Called when the topic table changed, so the name servers learn it at once.
    on_topics_changed: Callable[[], None] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # A master's replication (broker.ha_master): SYNC_MASTER sends wait in its settle().
    replication: ReplicationMaster | None = None
    # A slave's replication client (broker.ha_slave), for brokerStatus's figures.
    replication_slave: ReplicationSlave | None = None
    _producer_turn: itertools.count[int] = field(default_factory=itertools.count)
    # Where a transaction check goes when no remoting producer of its group is connected:
    # the gRPC endpoint's producers (broker.grpc); True when it was sent there.
    transaction_check_fallback: Callable[[CheckRequest], bool] | None = None
    # Where GET_CONSUMER_RUNNING_INFO / CONSUME_MESSAGE_DIRECTLY go for a client id no
    # remoting consumer has: the gRPC endpoint's consumers (broker.grpc).
    client_call_fallback: ClientCallFallback | None = None
    # The consumers of a group connected over gRPC (broker.grpc), which mqadmin's
    # consumerConnection and consumerStatus list beside the remoting ones.
    other_consumers: Callable[[str], list[OtherConsumer]] | None = None

    @property
    def broker_name(self) -> str:
        return self.config.broker_name

    @property
    def cluster_name(self) -> str:
        return self.config.broker_cluster_name

    @property
    def broker_host(self) -> str:
        """The IP part of ``broker_addr`` (RocketMQ's brokerIP1)."""
        return parse_host(self.broker_addr)[0]

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run blocking store work (disk reads, a SYNC_FLUSH put) off the event loop."""
        return await asyncio.to_thread(fn, *args)

    async def put(self, message: Message, body_bytes: int) -> PutResult:
        """``MessageStore.put`` as from this broker, without blocking the loop long (see
        ``_put``); a slave refuses it, a SYNC_MASTER answers once a slave has it."""
        if self.config.is_slave:
            return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, reason=SLAVE_REASON)
        result = await self._put(self.store.put, self.store.submit, message, body_bytes)
        if self.replication is not None:
            (result,) = await self.replication.settle([result])
        return result

    async def put_batch(self, messages: Sequence[Message], body_bytes: int) -> list[PutResult]:
        """``MessageStore.put_batch`` as ``put``."""
        if self.config.is_slave:
            return [PutResult(PutStatus.SERVICE_NOT_AVAILABLE, reason=SLAVE_REASON)]
        results = await self._put(
            self.store.put_batch, self.store.submit_batch, messages, body_bytes
        )
        if self.replication is not None:
            results = await self.replication.settle(results)
        return results

    async def put_batch_columns(
        self,
        topic: str,
        bodies: list[bytes],
        *,
        flags: list[int],
        property_texts: list[str],
        queue_id: int,
        sys_flag: int,
        born_timestamp: int,
        born_host: str,
        reconsume_times: int,
        body_bytes: int,
    ) -> tuple[ColumnsResult, PutStatus] | None:
        """A batch send given as columns (``MessageStore.put_columns``, without a Message
        per entry) and the status to answer it with (a SYNC_MASTER's wait for a slave);
        None when this broker does not take that path (a slave, SYNC_FLUSH, whose sends
        the group commit shares, or a failed put, which nothing of stored): the caller
        then puts Messages with ``put_batch``, whose outcome and words define the send.
        The caller keeps a batch to what ``put_batch`` takes whole (one ``put_columns``
        batch: bodies within max_message_size, records within half a file)."""
        if self.config.is_slave or self.store.config.flush_disk_type == "SYNC_FLUSH":
            return None
        put = functools.partial(
            self.store.put_columns,
            topic,
            bodies,
            queue_ids=queue_id,
            flags=flags,
            sys_flag=sys_flag,
            reconsume_times=reconsume_times,
            property_texts=property_texts,
            born_timestamp=born_timestamp,
            born_host=born_host,
            store_host=self.broker_addr,
        )
        if body_bytes > INLINE_PUT_MAX_BYTES:
            result = await self.run(put)
        else:
            result = put()
        if not result.stored:
            return None
        if result.stored != len(bodies):  # (cannot be: one batch is stored whole or not)
            log.error("a batch send stored %d of %d rows", result.stored, len(bodies))
            return result, PutStatus.UNKNOWN_ERROR
        status = result.status
        if self.replication is not None:
            last = result.result(result.stored - 1)
            (settled,) = await self.replication.settle([last])
            status = settled.status
        return result, status

    async def _put(
        self,
        put: Callable[[M, None, str], T],
        submit: Callable[[M, None, str], Future[T]],
        messages: M,
        body_bytes: int,
    ) -> T:
        """Small sends are appended on the event loop; big bodies, whose copy (about a
        millisecond for 4 MiB) would hold up every other connection, on a worker thread.

        With ASYNC_FLUSH a put copies into memory and returns, and the hop to a worker
        thread and back cost several times the put itself (a send_sync client's round
        trip: 760 us through a thread, 540 us on the loop). A SYNC_FLUSH send is
        submitted: appended here, answered once the group commit thread's sync covers
        it, while the loop reads the next sends (which then share that thread's next
        sync, as RocketMQ's GroupCommitService batches them)."""
        if body_bytes > INLINE_PUT_MAX_BYTES:
            return await self.run(put, messages, None, self.broker_addr)
        if self.store.config.flush_disk_type == "SYNC_FLUSH":
            return await asyncio.wrap_future(submit(messages, None, self.broker_addr))
        return put(messages, None, self.broker_addr)

    def topics_changed(self) -> None:
        if self.on_topics_changed is not None:
            self.on_topics_changed()

    def notify_consumers_changed(self, group: str) -> None:
        """NOTIFY_CONSUMER_IDS_CHANGED to every client of ``group`` (one-way), so they
        rebalance now rather than at their next 20 s rebalance."""
        for connection in self.clients.consumer_connections(group):
            if isinstance(connection, CommandSink):
                connection.send(
                    RemotingCommand(
                        code=RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
                        flag=FLAG_ONEWAY,
                        ext_fields={"consumerGroup": group},
                    )
                )

    def send_transaction_check(self, request: CheckRequest) -> bool:
        """CHECK_TRANSACTION_STATE (one-way) to one producer of the request's group, taken
        in turn as RocketMQ's ProducerManager.getAvailableChannel does; False when the
        group has no producer connected (the half message is checked again later)."""
        connections = [
            channel.connection
            for channel in self.clients.producer_channels(request.producer_group)
            if isinstance(channel.connection, CommandSink)
        ]
        if not connections:
            fallback = self.transaction_check_fallback
            if fallback is not None and fallback(request):
                return True
            log.warning(
                "transaction check for group %s not sent: no producer of it is connected",
                request.producer_group,
            )
            return False
        connection = connections[next(self._producer_turn) % len(connections)]
        connection.send(
            RemotingCommand(
                code=RequestCode.CHECK_TRANSACTION_STATE,
                flag=FLAG_ONEWAY,
                ext_fields=dict(request.fields),
                body=request.body,
            )
        )
        return True
