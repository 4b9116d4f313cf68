"""Admin requests the broker relays to a 5.x client over its telemetry stream, answered
as RocketMQ 5.3.3's proxy answers them: GET_CONSUMER_RUNNING_INFO with jstack becomes a
PrintThreadStackTraceCommand, CONSUME_MESSAGE_DIRECTLY a VerifyMessageCommand, each with
a nonce; the client's ThreadStackTrace / VerifyMessageResult carrying that nonce is the
answer (GrpcClientChannel, ClientActivity.reportThreadStackTrace and
reportVerifyMessageResult, GrpcChannelManager's nonce table).

Layer: broker.grpc. The answers' bodies are the beans the proxy fills, in fastjson's form.
"""

from __future__ import annotations

import asyncio
import itertools

from rocketstore.broker.codes import ResponseCode
from rocketstore.broker.context import ClientAnswer
from rocketstore.broker.fastjson_body import dumps
from rocketstore.broker.grpc.protocol import rocketmq_v2_types_pb2 as pb

# The proxy's grpcProxyRelayRequestTimeoutInSeconds: an unanswered relay is answered
# SYSTEM_BUSY "call remote timeout" (its scan runs each second; this timer is exact).
RELAY_TIMEOUT_S = 5.0

# ClientActivity.buildConsumeMessageDirectlyResult: the client's status -> CMResult.
_CONSUME_RESULTS: dict[int, str] = {
    pb.Code.OK: "CR_SUCCESS",
    pb.Code.FAILED_TO_CONSUME_MESSAGE: "CR_LATER",
    pb.Code.MESSAGE_CORRUPTED: "CR_RETURN_NULL",
}


def thread_stack_answer(status_code: int, stack: str) -> ClientAnswer:
    """A client's ThreadStackTrace as the admin's answer: a ConsumerRunningInfo that holds
    only the stack; any status but OK is a failure (the proxy's words, "verify" and all)."""
    if status_code == pb.Code.OK:
        info = {
            "jstack": stack,
            "mqPopTable": {},
            "mqTable": {},
            "properties": {},
            "statusTable": {},
            "subscriptionSet": [],
            "userConsumerInfo": {},
        }
        return ClientAnswer(ResponseCode.SUCCESS, "", dumps(info).encode())
    if status_code == pb.Code.VERIFY_FIFO_MESSAGE_UNSUPPORTED:
        return ClientAnswer(ResponseCode.NO_PERMISSION, "forbidden to verify message")
    return ClientAnswer(ResponseCode.SYSTEM_ERROR, "verify message failed")


def verify_answer(status_code: int) -> ClientAnswer:
    """A client's VerifyMessageResult as the admin's answer: always SUCCESS, with a
    ConsumeMessageDirectlyResult whose consumeResult says how the client fared (none for
    a status the proxy does not map, NOT_IMPLEMENTED among them)."""
    result = {
        "autoCommit": True,
        "consumeResult": _CONSUME_RESULTS.get(status_code),
        "order": False,
        "remark": "from gRPC client",
        "spentTimeMills": 0,
    }
    return ClientAnswer(ResponseCode.SUCCESS, "", dumps(result).encode())


class Relays:
    """Relayed requests waiting for their client's answer, by nonce."""

    def __init__(self) -> None:
        self.timeout_s = RELAY_TIMEOUT_S  # tests lower it
        self._waiting: dict[str, asyncio.Future[ClientAnswer]] = {}
        self._nonces = itertools.count()

    def __len__(self) -> int:
        return len(self._waiting)

    def add(self) -> tuple[str, asyncio.Future[ClientAnswer]]:
        """A new nonce and the future its answer completes (or the timeout does)."""
        loop = asyncio.get_running_loop()
        nonce = str(next(self._nonces))
        answer: asyncio.Future[ClientAnswer] = loop.create_future()
        self._waiting[nonce] = answer
        loop.call_later(self.timeout_s, self._expire, nonce)
        return nonce, answer

    def resolve(self, nonce: str, answer: ClientAnswer) -> bool:
        """Complete the request ``nonce`` names; False for a nonce not (or no longer)
        waiting, which the proxy ignores too."""
        waiting = self._waiting.pop(nonce, None)
        if waiting is None or waiting.done():
            return False
        waiting.set_result(answer)
        return True

    def _expire(self, nonce: str) -> None:
        self.resolve(nonce, ClientAnswer(ResponseCode.SYSTEM_BUSY, "call remote timeout"))
