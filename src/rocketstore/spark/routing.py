"""Which queue a written message goes to when the row names none (pure Python).

Layer: spark (top). No I/O.

- A row with a ``queueId`` goes to that queue (it may be a new queue of the topic),
  unless the broker's topic table has the topic and the id is not below both its
  ``writeQueueNums`` and ``readQueueNums``: a broker refuses such a send (its consumers
  never read that queue), and so does the job, naming the topic and the id.
- A row with keys goes to ``abs(hashCode(KEYS) % n)``, Java's ``String.hashCode`` of the
  KEYS text as stored and Java's remainder (sign of the dividend), which is what RocketMQ's
  ``SelectMessageQueueByHash`` producers compute: messages with the same KEYS land in the
  same queue whether Spark or a Java producer wrote them.
- A row without keys goes round robin, starting where the topic's message count points
  (sum of its queues' max offsets mod n), so repeated small jobs do not all fill queue 0.

``n`` is the topic's ``writeQueueNums`` when the store's ``config/topics.json`` (a
broker's topic table) has the topic; else the larger of option ``queueNums`` and the
topic's highest queue id + 1 (a topic written with 4 queues whose queue 3 is still empty
keeps 4 queues, so the same keys keep going to the same queues).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from rocketstore.errors import ConfigError
from rocketstore.format.javahash import java_string_hash

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


def queue_count(existing: Sequence[int] | None, queue_nums: int, configured: int | None) -> int:
    """Write queues of a topic (see the module docstring)."""
    if configured:
        return configured
    return max(max(existing) + 1, queue_nums) if existing else queue_nums


def hash_queue(keys: str, count: int) -> int:
    # Java's % keeps the dividend's sign and RocketMQ takes abs() of the remainder: the same
    # as abs(h) % count for every h, Integer.MIN_VALUE included (Python ints do not wrap).
    return abs(java_string_hash(keys)) % count


class QueueChooser:
    """Chooses queues for one job's messages, topic by topic."""

    def __init__(
        self,
        store_topics: Mapping[str, Sequence[int]],
        message_counts: Mapping[str, int],
        queue_nums: int,
        configured: Mapping[str, int] | None = None,
        queue_limits: Mapping[str, int] | None = None,
    ) -> None:
        self._topics = store_topics
        self._counts = message_counts
        self._queue_nums = queue_nums
        self._configured = configured or {}
        self._limits = queue_limits or {}
        self._next: dict[str, int] = {}

    def count(self, topic: str) -> int:
        return queue_count(self._topics.get(topic), self._queue_nums, self._configured.get(topic))

    def choose(self, topic: str, queue_id: int | None, keys: str | None) -> int:
        if queue_id is not None:
            limit = self._limits.get(topic)
            if limit is not None and queue_id >= limit:
                raise ConfigError(
                    f"column queueId is {queue_id} for topic {topic!r}, which the store's "
                    f"topic table (config/topics.json) gives queues 0..{limit - 1}: a "
                    "broker refuses that queue id and its consumers never read it"
                )
            return queue_id
        count = self.count(topic)
        if keys:
            return hash_queue(keys, count)
        turn = self._next.get(topic)
        if turn is None:
            turn = self._counts.get(topic, 0)
        self._next[topic] = turn + 1
        return turn % count

    def choose_rows(
        self,
        topic: str,
        queue_ids: npt.NDArray[np.int64],
        named: npt.NDArray[np.bool_],
        keys: Sequence[str | None] | None,
    ) -> npt.NDArray[np.int64]:
        """``choose`` for consecutive rows of one topic at once, in their order: row i
        names queue ``queue_ids[i]`` where ``named[i]``, else goes by ``keys[i]`` (None:
        no row has keys) or round robin."""
        import numpy as np  # noqa: PLC0415

        chosen = np.where(named, queue_ids, 0).astype(np.int64)
        limit = self._limits.get(topic)
        if limit is not None and named.any():
            over = np.flatnonzero(named & (chosen >= limit))
            if len(over):
                self.choose(topic, int(chosen[over[0]]), None)  # (raises, naming it)
        free = ~named
        if keys is not None:
            count = self.count(topic)
            for row in np.flatnonzero(free).tolist():
                text = keys[row]
                if text:
                    chosen[row] = hash_queue(text, count)
                    free[row] = False
        turns = int(free.sum())
        if turns:
            count = self.count(topic)
            turn = self._next.get(topic, self._counts.get(topic, 0))
            self._next[topic] = turn + turns
            chosen[free] = (turn + np.arange(turns, dtype=np.int64)) % count
        return chosen
