"""The common pull answered from its frame's bytes (issue #37): a PULL_MESSAGE (or
LITE_PULL_MESSAGE) whose answer is there now -- found, or nothing new without asking to
be held -- from a store whose records count as in memory, on a broker without ACL or RPC
metrics.

Layer: broker processors. The server hands each whole frame to the broker's fast hook
before decoding it; the C extension's ``pull_frame`` reads the header, the general
path's own steps (:mod:`processors.pull`: the checks, the subscription, the store's C
record copy) answer it, and ``pull_answer`` writes the answer's frame: no
RemotingCommand, no JSON, no task, no router. Anything else (None from any step before
the answer: a refusal, a pull to hold, records not in memory, a read that failed; the
one change before it, the carried commit offset, is stored again as a no-op) goes the
general way, :func:`pull.pull_message`, which stays the definition;
tests/unit/broker hold both to the same answers, stats and committed offsets.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from rocketstore.broker.codes import RequestCode, ResponseCode
from rocketstore.broker.context import BrokerContext
from rocketstore.broker.processors.pull import (
    FLAG_SUSPEND,
    PullHeader,
    Refusal,
    _build,
    _in_memory,
    _read,
    answer_fields,
    check_pull,
    commit_carried_offset,
    record_found,
    response_code,
)
from rocketstore.format import native
from rocketstore.remoting.codec import (
    SERIALIZE_JSON,
    ProtocolError,
    RemotingCommand,
    decode_command,
    encode_command,
)
from rocketstore.remoting.peer import Peer

# pull_frame's answer: opaque, version, then PullHeader's fields in their order.
PullFields = tuple[int, int, str, str, int, int, int, int, int, int, str | None, str, int]

_PULL_CODES = (RequestCode.PULL_MESSAGE, RequestCode.LITE_PULL_MESSAGE)


def pull_frame_python(frame: bytes) -> PullFields | None:
    """What the general path reads of a pull frame (without its length prefix): its
    opaque, version and header; None for any other frame or a header it refuses. The C
    ``pull_frame`` answers None for more frames than this (it reads only ASCII JSON
    headers of plain numbers and strings) and the same for the rest."""
    try:
        cmd = decode_command(frame)
        if cmd.code not in _PULL_CODES or cmd.flag != 0 or cmd.serialize_type != SERIALIZE_JSON:
            return None
        h = PullHeader.parse(cmd.ext_fields)
    except ProtocolError:
        return None
    return (
        cmd.opaque,
        cmd.version,
        h.group,
        h.topic,
        h.queue_id,
        h.queue_offset,
        h.max_msg_nums,
        h.sys_flag,
        h.commit_offset,
        h.suspend_timeout_ms,
        h.subscription,
        h.expression_type,
        h.sub_version,
    )


def pull_answer_python(
    opaque: int,
    version: int,
    code: int,
    remark: str | None,
    next_begin_offset: int,
    min_offset: int,
    max_offset: int,
    suggest_broker_id: int,
    body: bytes,
) -> bytes:
    """The frame ``pull_message`` answers with (its extFields, remark and body)."""
    request = RemotingCommand(code=RequestCode.PULL_MESSAGE, opaque=opaque, version=version)
    ext = {
        "nextBeginOffset": next_begin_offset,
        "minOffset": min_offset,
        "maxOffset": max_offset,
        "suggestWhichBrokerId": suggest_broker_id,
    }
    return encode_command(request.response(code, remark, ext, body))


class FastPull:
    """The pull half of the server's fast hook of one broker: a pull's answer frame, or
    None to leave the frame to the general path (nothing changed then)."""

    def __init__(self, ctx: BrokerContext):
        self.ctx = ctx

    def enabled(self) -> bool:
        """Whether this broker answers pulls the short way now (read per frame: ACL and
        the metrics endpoint can change while it runs)."""
        ctx = self.ctx
        return ctx.acl is None and ctx.stats.rpc_latency is None

    def __call__(self, frame: bytes, conn: Peer) -> bytes | None:
        read, answer = native.pull_frame, native.pull_answer
        if read is None or answer is None or not self.enabled():
            return None
        begin_ns = time.monotonic_ns()
        fields = read(frame)
        if fields is None:
            return None
        opaque, version = fields[0], fields[1]
        header = PullHeader(*fields[2:])
        ctx = self.ctx
        group_config = check_pull(ctx, header, conn.peer)
        if isinstance(group_config, Refusal):
            return None
        if header.sys_flag & FLAG_SUSPEND and header.queue_offset == ctx.store.max_offset(
            header.topic, header.queue_id
        ):
            return None  # at the queue's end: to be held (a consumer that caught up)
        # pull_message's steps in its order. Storing the carried offset again is a no-op,
        # so each None below leaves the general path the same state to start from.
        try:
            commit_carried_offset(ctx, header)
        except Exception:
            return None  # refused: the general path answers it
        subscription = _build(ctx, header, None)
        if isinstance(subscription, Refusal) or not _in_memory(ctx):
            return None
        try:
            result = _read(ctx, header, subscription)
        except Exception:
            return None  # the general path reads again and answers (or logs) the error
        code = response_code(result, header.queue_offset)
        if code == ResponseCode.PULL_NOT_FOUND and header.sys_flag & FLAG_SUSPEND:
            return None  # to be held: the general path's
        ext = answer_fields(ctx, group_config, result)
        suggest = ext["suggestWhichBrokerId"]
        assert isinstance(suggest, int)
        if code != ResponseCode.SUCCESS:
            ctx.stats.missed.add(1)
            remark, body = result.status.value, b""
        else:
            record_found(ctx, header, result, begin_ns)
            remark, body = "FOUND", result.body
        answer_args = (opaque, version, code, remark, result.next_begin_offset, result.min_offset,
                  result.max_offset, suggest, body)  # fmt: skip
        out = answer(*answer_args)
        if out is None:  # (a remark C does not write: never for these)
            out = pull_answer_python(*answer_args)
        return out


# How a Java client's header begins (RemotingSerializable writes its keys sorted), and
# a pull's: a pull is offered to FastPull alone, another code of that shape never.
_JAVA_PREFIX = b'{"code":'
_JAVA_PULL_PREFIXES = (b'{"code":11,', b'{"code":361,')


class FastFrames:
    """The server's ``fast_frames`` hook of one broker: a common send's or pull's answer
    frame, or None to decode the frame and take the general path."""

    def __init__(self, send: Callable[[bytes, Peer], bytes | None], pull: FastPull):
        self.send = send
        self.pull = pull

    def __call__(self, frame: bytes, conn: Peer) -> bytes | None:
        if frame.startswith(_JAVA_PULL_PREFIXES, 4):
            return self.pull(frame, conn)
        answer = self.send(frame, conn)
        if answer is not None or frame.startswith(_JAVA_PREFIX, 4):
            return answer
        return self.pull(frame, conn)  # (a header of another shape: C reads it or not)
