"""Which queue a gRPC send goes to, as a RocketMQ 5 proxy picks it.

Layer: broker.grpc. Pure. A message group (FIFO) always lands on the same write queue:
Guava's ``Hashing.consistentHash`` of the group's ``String.hashCode()``
(SendMessageActivity.SendMessageQueueSelector); other sends take the write queues in turn.
"""

from __future__ import annotations

import itertools

from rocketstore.format.javahash import java_string_hash

_MASK64 = (1 << 64) - 1


def consistent_hash(value: int, buckets: int) -> int:
    """Guava's ``Hashing.consistentHash(long, int)`` (its linear congruential generator)."""
    if buckets <= 0:
        raise ValueError(f"buckets must be positive, got {buckets}")
    state = value & _MASK64
    candidate = 0
    while True:
        state = (2862933555777941757 * state + 1) & _MASK64
        # ((int) (state >>> 33) + 1) / 2^31: in (0, 1], the shifted value fits an int
        next_double = ((state >> 33) + 1) / float(1 << 31)
        following = int((candidate + 1) / next_double)
        if 0 <= following < buckets:
            candidate = following
        else:
            return candidate


def group_queue(message_group: str, write_queue_nums: int) -> int:
    return consistent_hash(java_string_hash(message_group), write_queue_nums)


class RoundRobin:
    """The write queues in turn (the proxy's selectOneByPipeline)."""

    def __init__(self) -> None:
        self._turn = itertools.count()

    def pick(self, write_queue_nums: int) -> int:
        return next(self._turn) % write_queue_nums
