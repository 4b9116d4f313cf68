"""Pulling one broker queue's offset range with several pulls in flight (runs on the
executors).

Layer: spark (top). A broker answers a PULL_MESSAGE with at most 32 messages when they
are in memory (4.9.8's maxTransferCountOnMessageInMemory; 8 from disk) and the answers'
sizes are the broker's to choose, so a read of a long range is thousands of round trips.
:class:`PullPipeline` keeps up to ``window`` pulls in flight on the broker's connection, at
offsets o, o + stride, o + 2 stride, ... ahead of the one the reader needs, and hands the
answers out in offset order: :meth:`PullPipeline.pull` gives the answer of a pull at
exactly the asked offset, as one blocking pull would, so the reader's handling of every
answer code stays as it was. An answer with fewer messages than asked (8 from disk, the
end of a consume queue file, the broker's byte limit) leaves a gap before the next pull
in flight, which is pulled as soon as the window has room: no pull asks for what another
pull in flight covers. Answers at offsets the reader stepped past (an OFFSET_MOVED jump)
are dropped.

Pulls go to the master; when a broker answers with ``suggestWhichBrokerId`` naming a
slave it has registered (the master says so when the data has left its page cache), the
next pulls go there, and back to the master if the slave fails. A connection that fails
loses its pulls in flight; the needed one is then sent alone through
:meth:`.network_cluster.Cluster.pull`, which waits for a broker that is down as option
``brokerDownWaitMs`` says and names the queue when it gives up.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Protocol

from rocketstore.remoting.blocking import RemotingClientError
from rocketstore.remoting.codes import ResponseCode
from rocketstore.spark.network_cluster import MASTER_ID, PullRequest, PullResult
from rocketstore.spark.network_plan import Addresses

log = logging.getLogger(__name__)

# Pulls in flight per queue read (answers held for the reader included): enough that the
# broker answers the next ones while the reader decodes a batch (pyspark sends it on);
# 128 answers of 32 messages of 100 B are ~1 MiB.
PULLS_IN_FLIGHT = 128
# ... and fewer when the answers are big: about this many bytes of answers in flight (a
# broker holds what the reader has not read yet: rocketstore's drops a connection past
# serverChannelMaxUnsentBytes, 64 MiB).
PULL_BYTES_IN_FLIGHT = 8 * 1024 * 1024
# Messages asked per pull: what a 4.9.8 broker gives from memory
# (maxTransferCountOnMessageInMemory).
PULL_STRIDE = 32


class PullClient(Protocol):
    """What pulling asks a cluster (the real one is :class:`.network_cluster.Cluster`)."""

    def pull(
        self, address: str, topic: str, queue_id: int, offset: int, max_nums: int
    ) -> PullResult: ...

    def send_pulls(self, address: str, pulls: list[PullRequest]) -> list[int]: ...

    def receive_pull(self, address: str) -> tuple[int, PullResult]: ...


class Puller:
    """Pulls of one broker's queues, one at a time: master first, the slave the broker
    suggests next, the master again when that slave fails."""

    def __init__(self, cluster: PullClient, broker: str, addresses: Addresses) -> None:
        self.cluster = cluster
        self.broker = broker
        self.addresses = dict(addresses)
        self.broker_id = MASTER_ID if MASTER_ID in self.addresses else min(self.addresses)

    @property
    def address(self) -> str:
        return self.addresses[self.broker_id]

    def pull(self, topic: str, queue_id: int, offset: int, count: int) -> PullResult:
        address = self.address
        try:
            result = self.cluster.pull(address, topic, queue_id, offset, count)
        except RemotingClientError as e:
            if not self.fail_over(e):
                raise RemotingClientError(
                    f"pull of {topic} queue {self.broker}:{queue_id} at {offset} from broker "
                    f"{self.broker} ({address}): {e}"
                ) from e
            return self.pull(topic, queue_id, offset, count)
        self.follow(result)
        return result

    def follow(self, result: PullResult) -> None:
        """Pull next from the broker id an answer suggests, when it is registered."""
        suggested = result.suggest_broker_id
        if suggested != self.broker_id and suggested in self.addresses:
            self.broker_id = suggested

    def fail_over(self, error: Exception) -> bool:
        """After a failed pull: whether pulls go on at the master (yes when they went to
        a slave and the master is known)."""
        if self.broker_id == MASTER_ID or MASTER_ID not in self.addresses:
            return False
        log.warning(
            "slave %s of %s failed (%s): back to the master", self.address, self.broker, error
        )
        self.broker_id = MASTER_ID
        return True


@dataclass(frozen=True)
class _Sent:
    address: str
    offset: int
    count: int


class PullPipeline:
    """The answers of pulls of ``[start, end)`` of one queue, in offset order, with up to
    ``window`` pulls in flight (1: one pull at a time, as a plain consumer)."""

    def __init__(
        self,
        puller: Puller,
        topic: str,
        queue_id: int,
        start: int,
        end: int,
        window: int = PULLS_IN_FLIGHT,
        stride: int = PULL_STRIDE,
    ) -> None:
        self.puller = puller
        self.topic = topic
        self.queue_id = queue_id
        self.end = end
        self.window = max(1, window)
        self.stride = max(1, stride)
        self._sent: dict[int, _Sent] = {}  # ticket -> pull in flight
        self._at: dict[int, int] = {}  # offset -> ticket of the pull in flight there
        self._answers: dict[int, tuple[_Sent, PullResult]] = {}  # offset -> answer held
        self.pulls_sent = 0
        self._answered = 0
        self._answered_bytes = 0

    def pull(self, offset: int) -> PullResult:
        """The answer of a pull at ``offset`` (of at most ``stride`` messages)."""
        self._forget_below(offset)
        try:
            self._top_up(offset)
            while offset not in self._answers:
                self._receive(self._sent[self._at[offset]].address)
                self._top_up(offset)
        except RemotingClientError as e:
            return self._alone(offset, e)
        return self._answers.pop(offset)[1]

    def _window(self) -> int:
        """The window, less when the answers so far average more than
        PULL_BYTES_IN_FLIGHT / window bytes."""
        if not self._answered_bytes:
            return self.window
        average = self._answered_bytes / self._answered
        return max(1, min(self.window, int(PULL_BYTES_IN_FLIGHT / average)))

    def _spans(self, frontier: int) -> list[tuple[int, int]]:
        """[first, end) of the offsets each pull sent or answered at or past ``frontier``
        is expected to bring (an answer: up to where it says the next pull starts)."""
        spans = [(s.offset, s.offset + s.count) for s in self._sent.values()]
        for offset, (sent, result) in self._answers.items():
            moved = result.code == ResponseCode.SUCCESS and result.next_begin_offset > offset
            spans.append((offset, result.next_begin_offset if moved else offset + sent.count))
        return sorted(span for span in spans if span[0] >= frontier)

    def _top_up(self, frontier: int) -> None:
        """Pulls for what no pull covers from ``frontier`` on (a pull at ``frontier``
        itself first), in strides, while the window has room."""
        room = self._window() - len(self._sent) - len(self._answers)
        if frontier not in self._at and frontier not in self._answers:
            room = max(room, 1)  # the frontier's own pull goes out whatever is held
        elif room < (self._window() + 1) // 2:
            return  # sent in groups: fewer writes and wake-ups on both sides
        pulls: list[tuple[int, int]] = []
        cursor = frontier
        for first, end in [*self._spans(frontier), (self.end, self.end)]:
            while cursor < min(first, self.end) and len(pulls) < room:
                count = min(self.stride, first - cursor)
                pulls.append((cursor, count))
                cursor += count
            cursor = max(cursor, end)
            if len(pulls) >= room or cursor >= self.end:
                break
        if pulls:
            self._send_all(pulls)

    def _send_all(self, pulls: list[tuple[int, int]]) -> None:
        address = self.puller.address
        requests = [(self.topic, self.queue_id, offset, count) for offset, count in pulls]
        try:
            tickets = self.puller.cluster.send_pulls(address, requests)
        except RemotingClientError:
            self._lose(address, None)
            raise
        for ticket, (offset, count) in zip(tickets, pulls, strict=True):
            self._sent[ticket] = _Sent(address, offset, count)
            self._at[offset] = ticket
        self.pulls_sent += len(pulls)

    def _receive(self, address: str) -> None:
        try:
            ticket, result = self.puller.cluster.receive_pull(address)
        except RemotingClientError:
            self._lose(address, None)
            raise
        sent = self._sent.pop(ticket, None)
        if sent is None:
            return  # a pull dropped earlier (stepped past, or a connection that failed)
        if self._at.get(sent.offset) == ticket:
            del self._at[sent.offset]
            if result.next_begin_offset < 0:
                result = dataclasses.replace(result, next_begin_offset=sent.offset)
            self._answers[sent.offset] = (sent, result)
            self._answered += 1
            self._answered_bytes += len(result.body)
            self.puller.follow(result)  # the next pulls go where the broker says

    def _forget_below(self, offset: int) -> None:
        for old in [o for o in self._answers if o < offset]:
            del self._answers[old]
        for old in [o for o in self._at if o < offset]:
            self._sent.pop(self._at.pop(old), None)

    def _lose(self, address: str, error: Exception | None) -> None:
        """Pulls in flight at ``address`` are lost (its connection closed); what they
        covered is pulled again by the next top-up."""
        for ticket in [t for t, s in self._sent.items() if s.address == address]:
            sent = self._sent.pop(ticket)
            if self._at.get(sent.offset) == ticket:
                del self._at[sent.offset]
        if error is not None:
            log.warning("pulls in flight at %s were lost (%s)", address, error)

    def _alone(self, offset: int, error: RemotingClientError) -> PullResult:
        """The pull at ``offset`` sent alone after the pipelined one failed: the blocking
        path waits for the broker (brokerDownWaitMs), fails over from a slave, and names
        the queue when it gives up."""
        log.info("pipelined pull of %s queue %s:%d at %d failed (%s): pulling alone",
                 self.topic, self.puller.broker, self.queue_id, offset, error)  # fmt: skip
        count = min(self.stride, self.end - offset)
        return self.puller.pull(self.topic, self.queue_id, offset, count)
