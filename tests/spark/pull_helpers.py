"""Pipelined pulls for the network reader's test clusters: ``send_pulls`` and
``receive_pull`` (what :class:`rocketstore.spark.network_pull.PullPipeline` uses) on top of
the test cluster's own ``pull``, each pull answered as it is sent and the answers given
back in the order sent, as one connection to a broker would."""

from __future__ import annotations

import itertools
from collections import deque

from rocketstore.spark.network_cluster import PullRequest, PullResult

_tickets = itertools.count(1)


class PipelinedPulls:
    """A test cluster's pulls, several in flight."""

    _in_flight: dict[str, deque[tuple[int, PullResult]]]

    def pull(
        self, address: str, topic: str, queue_id: int, offset: int, max_nums: int
    ) -> PullResult:
        raise NotImplementedError

    def send_pulls(self, address: str, pulls: list[PullRequest]) -> list[int]:
        if not hasattr(self, "_in_flight"):
            self._in_flight = {}
        queue = self._in_flight.setdefault(address, deque())
        tickets = []
        for topic, queue_id, offset, count in pulls:
            ticket = next(_tickets)
            queue.append((ticket, self.pull(address, topic, queue_id, offset, count)))
            tickets.append(ticket)
        return tickets

    def receive_pull(self, address: str) -> tuple[int, PullResult]:
        return self._in_flight[address].popleft()
