"""The console's few writing actions, on a running broker only (``serve --http-listen
... --console-actions``): resend a dead-lettered message to its group's retry topic,
move a group's offsets to a time, create a topic.

Layer: console. Each runs on the broker's event loop, through the same calls the broker's
own request handlers make (BrokerContext.put, the topic and offset managers), so the
console never races the broker's threads. The offline console has no actions: it opens
the store read-only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from rocketstore.broker.processors.monitoring import reset_offsets
from rocketstore.broker.topic_config import TopicConfig
from rocketstore.console.source import LiveSource, Source
from rocketstore.errors import ConfigError
from rocketstore.format import properties as props
from rocketstore.format.message import Message, MessageExt
from rocketstore.format.sysflag import COMPRESSED_FLAG, COMPRESSION_TYPE_MASK, MULTI_TAGS_FLAG
from rocketstore.paths import DLQ_PREFIX, RETRY_PREFIX

if TYPE_CHECKING:
    from rocketstore.broker.context import BrokerContext

T = TypeVar("T")
ACTION_TIMEOUT_S = 30.0
# The sysFlag bits a resent record keeps: how its body is stored (not its transaction
# state nor its hosts' address kinds, which the broker sets).
KEPT_SYS_FLAGS = COMPRESSED_FLAG | MULTI_TAGS_FLAG | COMPRESSION_TYPE_MASK


class ActionError(Exception):
    """An action refused, in words for the page."""


class Actions:
    def __init__(self, source: Source) -> None:
        self.source = source
        # The broker's loop (set when the console starts inside ``serve``).
        self.loop: asyncio.AbstractEventLoop | None = None

    def _context(self) -> BrokerContext:
        if not isinstance(self.source, LiveSource) or self.loop is None:
            raise ActionError(
                "the offline console is read-only: actions need a running broker "
                "(serve --http-listen ... --console-actions)"
            )
        return self.source.context

    def _on_loop(self, work: Callable[[], T]) -> T:
        """Runs ``work`` on the broker's event loop and waits for it."""
        assert self.loop is not None

        async def call() -> T:
            return work()

        return asyncio.run_coroutine_threadsafe(call(), self.loop).result(ACTION_TIMEOUT_S)

    def online_groups(self) -> set[str]:
        if isinstance(self.source, LiveSource):
            return set(self.source.context.clients.consumer_groups())
        return set()

    def subscribed_groups(self, topic: str) -> frozenset[str]:
        """Live: the groups with a client subscribed to ``topic``."""
        if isinstance(self.source, LiveSource):
            return frozenset(self.source.context.clients.groups_subscribed_to(topic))
        return frozenset()

    def create_topic(self, topic: str, read_queues: int, write_queues: int) -> None:
        ctx = self._context()
        try:
            config = TopicConfig(topic, read_queues, write_queues).validate()
        except ConfigError as e:
            raise ActionError(str(e)) from e
        if ctx.topics.get(topic) is not None:
            raise ActionError(f"topic {topic} exists")

        def create() -> None:
            ctx.topics.update(config)
            ctx.topics_changed()

        self._on_loop(create)

    def reset_offset(self, group: str, topic: str, timestamp_ms: int) -> dict[int, int]:
        """Each queue's committed offset moved to the first message stored at or after
        ``timestamp_ms`` (0: the queue's start). Refused while a client of the group is
        connected: it would commit its own position over it (mqadmin resetOffsetByTime
        tells the clients instead)."""
        ctx = self._context()
        if group in self.online_groups():
            raise ActionError(
                f"group {group} has consumers connected: stop them first, or use "
                "mqadmin resetOffsetByTime, which tells them"
            )

        def reset() -> dict[int, int]:
            table = reset_offsets(ctx, topic, group, timestamp_ms, True)
            if isinstance(table, str):
                raise ActionError(table)
            moved = {}
            for key, offset in table.items():
                ctx.offsets.commit(group, topic, key.queue_id, offset)
                moved[key.queue_id] = offset
            return moved

        return self._on_loop(reset)

    def resend_destination(self, message: MessageExt) -> str:
        """A DLQ message goes to its group's retry topic, which the group's consumers
        subscribe to: the group gets it once more."""
        if not message.topic.startswith(DLQ_PREFIX):
            raise ActionError("only messages of a %DLQ% topic are resent")
        return RETRY_PREFIX + message.topic[len(DLQ_PREFIX) :]

    def resend(self, message: MessageExt, destination: str) -> int:
        """Puts a copy to ``destination``; its CommitLog offset."""
        ctx = self._context()
        properties = dict(message.properties)
        properties.pop(props.DELAY, None)
        properties.setdefault(props.RETRY_TOPIC, message.topic)
        properties.setdefault(props.ORIGIN_MESSAGE_ID, message.msg_id)
        body = message.body or b""
        copy = Message(
            destination,
            body,
            queue_id=0,
            flag=message.flag,
            sys_flag=message.sys_flag & KEPT_SYS_FLAGS,
            properties=properties,
            born_timestamp=message.born_timestamp,
            born_host=message.born_host,
            reconsume_times=0,
        )
        group = message.topic[len(DLQ_PREFIX) :]

        def prepare() -> None:
            ctx.topics.create_retry_topic(group)

        self._on_loop(prepare)
        future = asyncio.run_coroutine_threadsafe(ctx.put(copy, len(body)), self.loop)  # type: ignore[arg-type]
        result = future.result(ACTION_TIMEOUT_S)
        if not result.ok:
            raise ActionError(f"resend refused: {result.status.name} {result.reason}".strip())
        return result.commit_log_offset
