"""The common send answered from its frame's bytes (issue #37): SEND_MESSAGE(_V2) or
SEND_BATCH_MESSAGE of a Java producer to an existing topic, no transaction, delay, timer,
multi-dispatch or retry topic, on an ASYNC_FLUSH master without ACL or RPC metrics.

Layer: broker processors. The server hands each whole frame to :class:`FastSend` before
decoding it; the C extension's ``send_frame`` reads the header and builds the stored
properties, the store's one-call C put appends the record, and ``send_answer`` writes the
answer's frame: no RemotingCommand, no task, no router. A batch likewise: ``batch_frame``
reads the header and decodes the entries into columns, ``put_columns`` appends them and
``batch_answer`` writes the answer (every record's msgId). Anything else (None from any
step before the put) goes the general way, :func:`send.send_message` or
:func:`send.send_batch`, which stay the definition: the twins below are that path's own
steps, and tests/unit/broker hold both to the same bytes (the answers and the records).
"""

from __future__ import annotations

import logging

from rocketstore.broker.codes import RequestCode, ResponseCode
from rocketstore.broker.context import INLINE_PUT_MAX_BYTES, BrokerContext
from rocketstore.broker.perm_name import is_writeable
from rocketstore.broker.processors.message_batch import (
    BatchColumns,
    decode_batch_columns_python,
)
from rocketstore.broker.processors.send import (
    SendHeader,
    _columns_response,
    _one_columns_batch,
    asks_for_timer,
    batch_properties_text,
    put_response,
    stored_answer_fields,
    stored_properties,
)
from rocketstore.broker.topic_config import MULTI_TAG, TopicConfig, topic_name_problem
from rocketstore.broker.transaction import is_transactional
from rocketstore.errors import ConfigError
from rocketstore.format import native, sysflag
from rocketstore.format import properties as props
from rocketstore.format.message import Message
from rocketstore.format.message_id import joined_offset_msg_ids
from rocketstore.format.multi_dispatch import is_multi_dispatch
from rocketstore.paths import NOT_ALLOWED_SEND_TOPICS, RETRY_PREFIX
from rocketstore.put_path import is_delayed
from rocketstore.remoting.codec import (
    SERIALIZE_JSON,
    ProtocolError,
    RemotingCommand,
    decode_command,
    encode_command,
)
from rocketstore.remoting.peer import Peer
from rocketstore.status import PutStatus

log = logging.getLogger(__name__)

# send_frame's answer: opaque, version, topic, queue id, sys flag, born timestamp, flag,
# reconsume times, the stored properties, the request's UNIQ_KEY, the body.
SendFields = tuple[int, int, str, int, int, int, int, int, dict[str, str], str | None, bytes]

# batch_frame's answer: opaque, version, topic, queue id, sys flag, born timestamp,
# reconsume times, the batch's own stored properties text, the request body's length,
# the entries as columns (bodies, flags, stored properties texts, the bodies' length).
BatchFields = tuple[
    int, int, str, int, int, int, int, str, int, tuple[list[bytes], list[int], list[str], int]
]

_SEND_CODES = (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2)
# How a Java producer's SEND_BATCH_MESSAGE header begins (its frame without the length).
_JAVA_BATCH_PREFIX = b'{"code":320,'
# Legal topic names remembered (a name's legality never changes), at most this many.
_KNOWN_TOPICS_MAX = 4096


def _special(properties: dict[str, str], topic: str, sys_flag: int) -> bool:
    """Whether a send's properties send it elsewhere (a transaction, a delay or timer, a
    multi-dispatch wrap): the general path's then."""
    return (
        is_transactional(properties)
        or asks_for_timer(properties, topic)
        or is_delayed(properties, sys_flag)
        or is_multi_dispatch(properties)
    )


def send_frame_python(frame: bytes, cluster: str) -> SendFields | None:
    """What the general path makes of a send frame (without its length prefix) that is a
    plain send: its fields and stored properties as ``send_message`` puts them; None for
    any other frame. The C ``send_frame`` answers None for more frames than this (it reads
    only a Java producer's V2 header) and the same for the rest."""
    try:
        cmd = decode_command(frame)
        if cmd.code not in _SEND_CODES or cmd.flag != 0 or cmd.serialize_type != SERIALIZE_JSON:
            return None
        header = SendHeader.parse(cmd.ext_fields)
    except ProtocolError:
        return None
    properties = props.decode_properties_str(header.properties)
    if _special(properties, header.topic, header.sys_flag):
        return None
    return (
        cmd.opaque,
        cmd.version,
        header.topic,
        header.queue_id,
        header.sys_flag,
        header.born_timestamp,
        header.flag,
        header.reconsume_times,
        stored_properties(properties, cluster),
        properties.get(props.UNIQ_KEY),
        cmd.body,
    )


def send_answer_python(
    opaque: int,
    version: int,
    msg_id: str,
    queue_id: int,
    queue_offset: int,
    transaction_id: str | None,
) -> bytes:
    """The frame ``put_response`` answers a stored send with (SUCCESS)."""
    request = RemotingCommand(code=RequestCode.SEND_MESSAGE_V2, opaque=opaque, version=version)
    ext = stored_answer_fields(msg_id, queue_id, queue_offset, transaction_id)
    return encode_command(request.response(ResponseCode.SUCCESS, None, ext))


def batch_frame_python(frame: bytes, cluster: str) -> BatchFields | None:
    """What the general path makes of a SEND_BATCH_MESSAGE frame (without its length
    prefix) whose own properties send nothing elsewhere and whose entries are whole (one
    at least): its fields, the batch's stored properties text and its entries as columns
    as ``send_batch`` puts them; None for any other frame. The C ``batch_frame`` answers
    None for more frames (it reads only a Java producer's V2 header) and the same for the
    rest."""
    try:
        cmd = decode_command(frame)
        if (
            cmd.code != RequestCode.SEND_BATCH_MESSAGE
            or cmd.flag != 0
            or cmd.serialize_type != SERIALIZE_JSON
        ):
            return None
        header = SendHeader.parse(cmd.ext_fields)
        if _special(props.decode_properties_str(header.properties), header.topic, 0):
            return None
        batch_text = batch_properties_text(header.properties, cluster)
        columns = decode_batch_columns_python(cmd.body, batch_text)
    except ProtocolError:
        return None
    if not columns:
        return None
    return (
        cmd.opaque,
        cmd.version,
        header.topic,
        header.queue_id,
        header.sys_flag,
        header.born_timestamp,
        header.reconsume_times,
        batch_text,
        len(cmd.body),
        (columns.bodies, columns.flags, columns.texts, columns.body_bytes),
    )


def batch_answer_python(
    opaque: int,
    version: int,
    store_host: bytes,
    commit_log_offsets: list[int],
    queue_id: int,
    queue_offset: int,
) -> bytes:
    """The frame ``send_batch`` answers a stored batch with (SUCCESS): every record's
    offsetMsgId, the first one's queue offset."""
    request = RemotingCommand(code=RequestCode.SEND_BATCH_MESSAGE, opaque=opaque, version=version)
    msg_ids = joined_offset_msg_ids(store_host, commit_log_offsets)
    ext = stored_answer_fields(msg_ids, queue_id, queue_offset, None)
    return encode_command(request.response(ResponseCode.SUCCESS, None, ext))


def _put_failed(request: RemotingCommand, conn: Peer, e: Exception) -> bytes:
    """A put that raised, answered as the router and the server answer it."""
    if isinstance(e, ConfigError):
        log.warning("request code %d from %s refused: %s", request.code, conn.peer, e)
        return encode_command(request.response(ResponseCode.SYSTEM_ERROR, str(e)))
    log.exception("broker: request code %d from %s failed", request.code, conn.peer)
    error = f"{type(e).__name__}: {e}"
    return encode_command(request.response(ResponseCode.SYSTEM_ERROR, error))


class FastSend:
    """The server's ``fast_frames`` hook of one broker: a common send's answer frame, or
    None to leave the frame to the general path (nothing stored then)."""

    def __init__(self, ctx: BrokerContext):
        self.ctx = ctx
        self._legal_topics: set[str] = set()

    def enabled(self) -> bool:
        """Whether this broker takes sends the short way now (read per frame: ACL, the
        broker's permission and role can change while it runs)."""
        ctx = self.ctx
        config = ctx.config
        return (
            ctx.acl is None
            and ctx.stats.rpc_latency is None
            and not config.is_slave
            and is_writeable(config.broker_permission)
            and ctx.store.config.flush_disk_type == "ASYNC_FLUSH"
            and (ctx.replication is None or config.broker_role == "ASYNC_MASTER")
        )

    def _config(self, topic: str, queue_id: int) -> TopicConfig | None:
        """check_topic's tests for a topic that exists and takes this send as it is: its
        config, or None (a refusal, a creation, a random queue or a retry is the general
        path's)."""
        if queue_id < 0 or topic.startswith(RETRY_PREFIX):
            return None
        config = self.ctx.topics.peek(topic)
        if (
            config is None
            or not config.writeable
            or queue_id >= max(config.read_queue_nums, config.write_queue_nums)
        ):
            return None
        if topic not in self._legal_topics:
            if topic_name_problem(topic) is not None or topic in NOT_ALLOWED_SEND_TOPICS:
                return None
            if len(self._legal_topics) < _KNOWN_TOPICS_MAX:
                self._legal_topics.add(topic)
        return config

    def __call__(self, frame: bytes, conn: Peer) -> bytes | None:
        if frame.startswith(_JAVA_BATCH_PREFIX, 4):
            return self.batch(frame, conn)
        decode, answer = native.send_frame, native.send_answer
        if decode is None or answer is None or not self.enabled():
            return None
        ctx = self.ctx
        fields = decode(frame, ctx.cluster_name)
        if fields is None:
            return None
        opaque, version, topic, queue_id, sys_flag, born, flag, reconsume, stored, uniq, body = (
            fields
        )
        if len(body) > INLINE_PUT_MAX_BYTES:
            return None
        config = self._config(topic, queue_id)
        if config is None:
            return None
        if config.topic_filter_type == MULTI_TAG:
            sys_flag |= sysflag.MULTI_TAGS_FLAG
        message = Message(
            topic=topic,
            body=body,
            queue_id=queue_id,
            flag=flag,
            sys_flag=sys_flag,
            properties=stored,
            born_timestamp=born,
            born_host=conn.peer,
            reconsume_times=reconsume,
        )
        # BrokerContext.put's steps for a small ASYNC_FLUSH send (settle: an ASYNC_MASTER
        # only wakes the replication writers).
        request = RemotingCommand(code=RequestCode.SEND_MESSAGE_V2, opaque=opaque, version=version)
        try:
            result = ctx.store.put(message, None, ctx.broker_addr)
        except Exception as e:
            return _put_failed(request, conn, e)
        if ctx.replication is not None:
            ctx.replication.notify_append()
        if result.status is PutStatus.PUT_OK:
            frame_out = answer(opaque, version, result.msg_id, queue_id, result.queue_offset, uniq)
            if frame_out is not None:
                ctx.stats.stored(topic, 1, result.size)
                return frame_out
        return encode_command(put_response(request, [result], queue_id, ctx, topic, uniq))

    def batch(self, frame: bytes, conn: Peer) -> bytes | None:
        """A common SEND_BATCH_MESSAGE's answer frame (send_batch's steps for a batch that
        ``put_columns`` stores whole on the event loop), or None for the general path."""
        decode, answer = native.batch_frame, native.batch_answer
        if decode is None or answer is None or not self.enabled():
            return None
        ctx = self.ctx
        fields = decode(frame, ctx.cluster_name)
        if fields is None:
            return None
        opaque, version, topic, queue_id, sys_flag, born, reconsume, batch_text, length, found = (
            fields
        )
        columns = BatchColumns(*found)
        if columns.body_bytes > INLINE_PUT_MAX_BYTES:
            return None  # (the general path copies it on a worker thread)
        config = self._config(topic, queue_id)
        if config is None or not _one_columns_batch(ctx, length, columns, topic, batch_text):
            return None
        if config.topic_filter_type == MULTI_TAG:
            sys_flag |= sysflag.MULTI_TAGS_FLAG
        request = RemotingCommand(
            code=RequestCode.SEND_BATCH_MESSAGE, opaque=opaque, version=version
        )
        try:
            result = ctx.store.put_columns(
                topic,
                columns.bodies,
                queue_ids=queue_id,
                flags=columns.flags,
                sys_flag=sys_flag,
                reconsume_times=reconsume,
                property_texts=columns.texts,
                born_timestamp=born,
                born_host=conn.peer,
                store_host=ctx.broker_addr,
            )
        except Exception as e:
            return _put_failed(request, conn, e)
        if not result.stored:
            return None  # (nothing stored: put_batch finds and words what failed)
        if ctx.replication is not None:
            ctx.replication.notify_append()
        status = result.status
        if result.stored != len(columns):  # (cannot be: one batch is stored whole or not)
            log.error("a batch send stored %d of %d rows", result.stored, len(columns))
            status = PutStatus.UNKNOWN_ERROR
        elif status is PutStatus.PUT_OK and len(result.store_host) in (8, 20):
            last = result.stored - 1
            stored_bytes = result.commit_log_offsets[last] + result.sizes[last]
            ctx.stats.stored(topic, result.stored, int(stored_bytes - result.commit_log_offsets[0]))
            return answer(
                opaque,
                version,
                result.store_host,
                result.commit_log_offsets,
                queue_id,
                int(result.queue_offsets[0]),
            )
        response = _columns_response(request, result, status, queue_id, ctx, topic)
        return encode_command(response)
