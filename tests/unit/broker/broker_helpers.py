"""Shared helpers of the broker processor and server tests: a broker context over a
temporary store, a fake connection, request builders and a decoder for pull bodies."""

from __future__ import annotations

import asyncio
import json
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from rocketstore.broker.broker_config import BrokerConfig
from rocketstore.broker.codes import RequestCode
from rocketstore.broker.consumer_offsets import ConsumerOffsets
from rocketstore.broker.context import BrokerContext
from rocketstore.broker.remoting import RemotingCommand
from rocketstore.broker.router import BrokerRouter
from rocketstore.broker.subscription_groups import SubscriptionGroupManager
from rocketstore.broker.topic_config import TopicConfigManager
from rocketstore.config import StoreConfig
from rocketstore.format import record as rec
from rocketstore.format.message import MessageExt
from rocketstore.store import MessageStore

BROKER_ADDR = "127.0.0.1:10911"
# Small CommitLog files: the default 1 GiB file is preallocated on disk, per test store.
SMALL_FILES = {"mapped_file_size_commit_log": 8 * 1024 * 1024}
CLIENT_ADDR = "10.1.2.3:45678"
T = TypeVar("T")


@dataclass
class FakeConnection:
    peer: str = CLIENT_ADDR
    local: str = BROKER_ADDR
    closed: bool = False
    sent: list[RemotingCommand] = field(default_factory=list)

    def send(self, cmd: RemotingCommand) -> None:
        self.sent.append(cmd)


def small_store() -> StoreConfig:
    return StoreConfig(**SMALL_FILES)  # type: ignore[arg-type]


def make_context(root: Path, *, auto_create: bool = True, **store: Any) -> BrokerContext:
    config = StoreConfig(store_host=BROKER_ADDR, **{**SMALL_FILES, **store})
    message_store = MessageStore.open(root, config)
    broker = BrokerConfig(auto_create_topic_enable=auto_create)
    return BrokerContext(
        store=message_store,
        topics=TopicConfigManager(root, auto_create_topic_enable=auto_create),
        offsets=ConsumerOffsets(root),
        groups=SubscriptionGroupManager(root),
        config=broker,
        broker_addr=BROKER_ADDR,
    )


def run(ctx: BrokerContext, make: Callable[[], Awaitable[T]]) -> T:
    """Run ``make()`` in a fresh loop with the context's pull waiters bound to it."""

    async def main() -> T:
        ctx.waiters.bind(asyncio.get_running_loop())
        ctx.waiters.watch(ctx.store)
        return await make()

    return asyncio.run(main())


def call(
    ctx: BrokerContext,
    code: int,
    ext: dict[str, Any] | None = None,
    body: bytes = b"",
    conn: FakeConnection | None = None,
) -> RemotingCommand:
    request = RemotingCommand(
        code, opaque=77, ext_fields={k: str(v) for k, v in (ext or {}).items()}, body=body
    )

    async def go() -> RemotingCommand:
        answer = await BrokerRouter(ctx).handle(request, conn or FakeConnection())  # type: ignore[arg-type]
        assert answer is not None
        return answer

    answer = run(ctx, go)
    assert answer.opaque == 77 and answer.is_response
    return answer


def send_v2(
    topic: str,
    *,
    queue_id: int = 0,
    properties: str = "",
    sys_flag: int = 0,
    reconsume_times: int = 0,
    max_reconsume_times: int | None = None,
    born: int = 1_700_000_000_000,
) -> dict[str, Any]:
    ext: dict[str, Any] = {
        "a": "PG",
        "b": topic,
        "c": "TBW102",
        "d": 4,
        "e": queue_id,
        "f": sys_flag,
        "g": born,
        "h": 0,
        "i": properties,
        "j": reconsume_times,
        "k": False,
    }
    if max_reconsume_times is not None:
        ext["l"] = max_reconsume_times
    return ext


def pull(
    ctx: BrokerContext, topic: str, queue_id: int = 0, offset: int = 0, **extra: object
) -> RemotingCommand:
    """PULL_MESSAGE as a pull consumer of group G sends it (its subscription "*" in it:
    sysFlag FLAG_SUBSCRIPTION; no hold), each field overridable by ``extra`` (a push
    consumer's pull, sysFlag 0, is served only after the group's heartbeat)."""
    ext = {
        "consumerGroup": "G",
        "topic": topic,
        "queueId": queue_id,
        "queueOffset": offset,
        "maxMsgNums": 32,
        "sysFlag": 4,
        "commitOffset": 0,
        "suspendTimeoutMillis": 0,
        "subscription": "*",
        "subVersion": 0,
        **extra,
    }
    return call(ctx, RequestCode.PULL_MESSAGE, ext)


def decode_records(body: bytes) -> list[MessageExt]:
    """A pull/query body as the clients decode it: records back to back."""
    messages = []
    position = 0
    while position < len(body):
        view = rec.read_record(body, position, check_crc=True)
        assert isinstance(view, rec.RecordView)
        messages.append(rec.to_message_ext(body, view))
        position += view.size
    return messages


def inflate(message: MessageExt) -> bytes:
    assert message.body is not None
    return zlib.decompress(message.body) if message.sys_flag & 1 else message.body


def heartbeat(
    ctx: BrokerContext, *subscriptions: dict[str, object], group: str = "G", client_id: str = "c1"
) -> None:
    """A push consumer's HEART_BEAT for ``group`` with these subscriptions."""
    body = json.dumps(
        {
            "clientID": client_id,
            "consumerDataSet": [
                {
                    "groupName": group,
                    "consumeType": "CONSUME_PASSIVELY",
                    "messageModel": "CLUSTERING",
                    "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
                    "subscriptionDataSet": list(subscriptions),
                    "unitMode": False,
                }
            ],
            "producerDataSet": [],
        }
    ).encode()
    assert call(ctx, RequestCode.HEART_BEAT, body=body, conn=FakeConnection()).code == 0


async def until(check: Callable[[], bool], what: str, timeout_s: float = 10) -> None:
    """Poll ``check`` on the running loop until it holds; AssertionError naming ``what``
    after ``timeout_s``."""

    async def poll() -> None:
        while not check():
            await asyncio.sleep(0.01)

    try:
        await asyncio.wait_for(poll(), timeout_s)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None
