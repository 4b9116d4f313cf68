"""One pull as mqadmin's tools consumer makes it, offline: what printMsg, printMsgByQueue
and consumeMessage print is shaped by each pull's client status and batch, so they pull
as the tool does, through the store's getMessage.

Layer: cli. The broker answers a getMessage status with a response code
(``broker.processors.pull.response_code``) and the client turns that code into its
PullStatus; this module composes the two, so the statuses printed are the ones mqadmin
prints for the same store.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from rocketstore.broker.codes import ResponseCode
from rocketstore.broker.processors.pull import response_code
from rocketstore.cli.context import CLI_GROUP
from rocketstore.cli.render import QueueSpan
from rocketstore.format.message import MessageExt
from rocketstore.format.subscription import Subscription
from rocketstore.store import MessageStore

# The messages mqadmin's commands ask one pull for (the broker's in-memory cap too).
TOOLS_PULL_MAX = 32


class PullStatus(enum.Enum):
    """The client's PullStatus."""

    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


# MQClientAPIImpl.processPullResponse: the response code as a PullStatus.
_CLIENT_STATUS: dict[int, PullStatus] = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


@dataclass(frozen=True)
class PullStep:
    """A pull's outcome as the tool sees it. ``messages``: what the client keeps after
    its own tag check; ``span``: the queue's (min, max) offsets the pull was answered
    with (the client adds them to each message's properties)."""

    status: PullStatus
    messages: list[MessageExt]
    next_offset: int
    span: QueueSpan


def tools_pull(
    store: MessageStore,
    topic: str,
    queue_id: int,
    offset: int,
    subscription: Subscription,
    max_nums: int = TOOLS_PULL_MAX,
) -> PullStep:
    """``DefaultMQPullConsumer.pull(mq, subExpression, offset, max_nums)`` on the store."""
    got = store.get_matching_messages(CLI_GROUP, topic, queue_id, offset, max_nums, subscription)
    status = _CLIENT_STATUS[response_code(got, offset)]
    messages = got.messages if status is PullStatus.FOUND else []
    if subscription.tags:
        # PullAPIWrapper keeps only messages whose TAGS is one of the subscribed tags (the
        # broker matched tag hash codes).
        messages = [m for m in messages if subscription.match_tags(m.tags)]
    return PullStep(status, messages, got.next_begin_offset, (got.min_offset, got.max_offset))


def empty_pull_line(mq: str, status: PullStatus, offset: int) -> str:
    """mqadmin's line for a pull that brought nothing to print: ``no matched msg`` when
    the tool goes on, ``print msg finished`` when it stops at the queue."""
    what = "no matched msg" if status is PullStatus.NO_MATCHED_MSG else "print msg finished"
    return f"{mq} {what}. status={status.value}, offset={offset}"
