"""Streaming offsets of the ``rocketstore`` source: their JSON form, admission control and
data-loss checks (pure Python, tested without Spark).

Layer: spark (top). No pyspark, no store, no I/O: the stream reader hands in the queue
offsets it read from the store and gets back offsets and ranges.

An offset is, per topic and queue, the *next* queue offset to read; a micro-batch reads
[start, end) of every queue. Spark keeps offsets as JSON (``{"Orders":{"0":12,"1":30}}``,
queue ids as strings) in its checkpoint and compares them as text, so :func:`to_json`
always sorts topics and queues.

Two rules make a restarted query see every message exactly once:

- a queue missing from the start offset (a queue created after the query began) starts at
  queue offset 0, not at "whatever is earliest now": planning the same (start, end) again
  after a restart gives the same ranges;
- a queue the store no longer has keeps its last offset (it never comes back as new).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from rocketstore.errors import ConfigError, DataLossError

log = logging.getLogger(__name__)

QueueKey = tuple[str, int]  # (topic, queue id)
Offsets = dict[QueueKey, int]
# Admission control works on any queue key: a store's (topic, queue id), or a cluster's
# (topic, broker name, queue id) (:mod:`.network_stream`).
Key = TypeVar("Key", bound=tuple[Any, ...])


def to_json(offsets: Mapping[QueueKey, int]) -> dict[str, dict[str, int]]:
    """The checkpoint form: topics and queue ids sorted (queue ids numerically)."""
    result: dict[str, dict[str, int]] = {}
    for topic, qid in sorted(offsets):
        result.setdefault(topic, {})[str(qid)] = offsets[(topic, qid)]
    return result


def from_json(value: object) -> Offsets:
    """Parse an offset Spark hands back; a malformed one (an edited checkpoint) names itself."""
    if not isinstance(value, dict):
        raise ConfigError(f"streaming offset {value!r} is not a JSON object of topics")
    offsets: Offsets = {}
    for topic, queues in value.items():
        if not isinstance(topic, str) or not isinstance(queues, dict):
            raise ConfigError(f"streaming offset {value!r}: topic {topic!r} has no queue map")
        for qid, offset in queues.items():
            try:
                queue_id = int(qid)
            except (TypeError, ValueError) as e:
                raise ConfigError(
                    f"streaming offset {value!r}: queue id {qid!r} is not an int"
                ) from e
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
                raise ConfigError(
                    f"streaming offset {value!r}: {topic}/{qid} offset {offset!r} is not >= 0"
                )
            offsets[(topic, queue_id)] = offset
    return offsets


@dataclass(frozen=True)
class Loss:
    """Queue offsets [first, end) a query needed that the store no longer has."""

    topic: str
    queue_id: int
    first: int
    end: int
    why: str

    def describe(self) -> str:
        return (
            f"topic {self.topic!r} queue {self.queue_id}: offsets [{self.first}, {self.end}) "
            f"are gone ({self.why})"
        )


def report_losses(losses: Iterable[Loss], fail_on_data_loss: bool) -> None:
    """Raise :class:`DataLossError` naming every loss, or (``failOnDataLoss=false``) log them."""
    found = list(losses)
    if not found:
        return
    text = "; ".join(loss.describe() for loss in found)
    if fail_on_data_loss:
        raise DataLossError(
            f"the streaming query lost messages: {text}. Restart it with "
            "failOnDataLoss=false to skip them, or from a new checkpoint"
        )
    log.warning("failOnDataLoss=false: skipping lost messages: %s", text)


def latest_ends(
    start: Mapping[QueueKey, int],
    store_max: Mapping[QueueKey, int],
    fail_on_data_loss: bool,
) -> Offsets:
    """The end offset of every queue when all available data is read: the store's max
    offset for the queues it has now, the start for queues it no longer has.

    A queue whose max offset fell below the start was truncated or re-created (a store
    swapped under the query): that is data loss; skipping it keeps the start offset
    so the queue is read again only from its old position on."""
    ends: Offsets = dict(start)
    losses = []
    for key, high in store_max.items():
        begin = start.get(key, 0)
        if high < begin:
            losses.append(Loss(key[0], key[1], high, begin, "the queue went back to " + str(high)))
            ends[key] = begin
        else:
            ends[key] = high
    report_losses(losses, fail_on_data_loss)
    return ends


def cap(ends: Mapping[Key, int], target: Mapping[Key, int]) -> dict[Key, int]:
    """``Trigger.AvailableNow``: never past the target recorded when the run began (queues
    created after that are not read in this run)."""
    return {key: min(end, target[key]) for key, end in ends.items() if key in target}


def admit(
    start: Mapping[Key, int], ends: Mapping[Key, int], max_rows: int | None
) -> dict[Key, int]:
    """Admission control: advance the queues by at most ``max_rows`` messages in total.

    Deterministic and fair: each queue with a backlog gets at least one message (if
    ``max_rows`` allows), the rest is shared in proportion to the backlogs by largest
    remainder (ties by topic and queue id). When there are more backlogged queues than
    ``max_rows``, the queues served rotate: the window starts at (sum of start offsets)
    mod (number of backlogged queues), which moves by ``max_rows`` every batch, so no
    queue waits more than a few batches however large the others' backlogs are.
    """
    result: dict[Key, int] = {key: max(start.get(key, 0), end) for key, end in ends.items()}
    for key, offset in start.items():
        result.setdefault(key, offset)
    backlog = {
        key: end - start.get(key, 0) for key, end in sorted(ends.items()) if end > start.get(key, 0)
    }
    total = sum(backlog.values())
    if max_rows is None or total <= max_rows:
        return result
    if max_rows <= 0:
        raise ConfigError(f"maxOffsetsPerTrigger={max_rows} must be positive")
    keys = list(backlog)
    grant = dict.fromkeys(keys, 0)
    if max_rows < len(keys):
        first = sum(start.get(key, 0) for key in keys) % len(keys)
        for i in range(max_rows):
            grant[keys[(first + i) % len(keys)]] = 1
    else:
        # Largest remainder over the backlogs (integer arithmetic: no float ties) ...
        for key in keys:
            grant[key] = max_rows * backlog[key] // total
        left = max_rows - sum(grant.values())
        by_remainder = sorted(keys, key=lambda k: (-(max_rows * backlog[k] % total), k))
        for key in by_remainder[:left]:
            grant[key] += 1
        # ... then every backlogged queue gets one, taken from the largest grants.
        for key in keys:
            if grant[key] == 0:
                donor = max(keys, key=lambda k: (grant[k], k))
                grant[donor] -= 1
                grant[key] = 1
    for key in keys:
        result[key] = start.get(key, 0) + min(grant[key], backlog[key])
    return result


def plan_ranges(
    start: Mapping[QueueKey, int],
    end: Mapping[QueueKey, int],
    store_min: Mapping[QueueKey, int],
    fail_on_data_loss: bool,
) -> list[tuple[str, int, int, int]]:
    """The non-empty [first, end) per queue of a micro-batch, sorted.

    A start below the queue's min offset means retention removed messages the query still
    needed: :func:`report_losses` raises or (``failOnDataLoss=false``) the range starts at
    the min offset. A queue missing from ``start`` starts at 0 (see the module docstring).
    """
    ranges = []
    losses = []
    for key in sorted(end):
        topic, qid = key
        first, last = start.get(key, 0), end[key]
        if last <= first:
            continue
        low = store_min.get(key, first)
        if low > first:
            losses.append(Loss(topic, qid, first, min(low, last), "removed by retention"))
            first = low
        if last > first:
            ranges.append((topic, qid, first, last))
    report_losses(losses, fail_on_data_loss)
    return ranges


def new_offsets(start: Mapping[Key, int], ends: Mapping[Key, int]) -> int:
    """How many queue entries lie between ``start`` and ``ends`` (a queue missing from
    ``start`` counts from 0, as :func:`plan_ranges` reads it)."""
    return sum(max(0, end - start.get(key, 0)) for key, end in ends.items())


@dataclass
class TriggerGate:
    """``minOffsetsPerTrigger`` with ``maxTriggerDelay``, as Kafka's source applies them:
    a micro-batch is held back (the latest offset stays at the start) while fewer than
    ``min_offsets`` new entries are available, until ``max_delay_ms`` have passed since the
    previous batch. The first batch of a run has no previous one and is not held back
    (Kafka's source starts its clock at 0 so).

    The time is passed in (:meth:`admits`), so the rule is tested without waiting. Unlike
    Kafka's source, a trigger that finds nothing new does not restart the clock: the wait
    is measured from the last batch that read something, as the option's name says."""

    min_offsets: int
    max_delay_ms: int
    last_batch_ms: float | None = None

    def admits(self, new: int, now_ms: float) -> bool:
        if new <= 0:
            return False
        waited = self.last_batch_ms is None or now_ms - self.last_batch_ms >= self.max_delay_ms
        if waited or new >= self.min_offsets:
            self.last_batch_ms = now_ms
            return True
        return False


def lag_metrics(consumed: Mapping[Key, int], latest: Mapping[Key, int]) -> dict[str, str]:
    """Kafka's source metrics (``KafkaMicroBatchStream.metrics``): per queue, the latest
    offset minus the offset consumed up to (a queue not consumed yet counts from 0); their
    min, max and mean over the queues, as text. Empty when no queue is known."""
    behind = [high - consumed.get(key, 0) for key, high in latest.items()]
    if not behind:
        return {}
    return {
        "minOffsetsBehindLatest": str(min(behind)),
        "maxOffsetsBehindLatest": str(max(behind)),
        "avgOffsetsBehindLatest": str(sum(behind) / len(behind)),
    }
