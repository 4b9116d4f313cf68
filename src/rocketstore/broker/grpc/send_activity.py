"""The gRPC endpoint's sending RPCs, as the proxy's SendMessageActivity,
RecallMessageActivity and EndTransactionActivity answer them: a gRPC send is put exactly
as a remoting send is (``BrokerContext.put``).

Layer: broker.grpc.
"""

from __future__ import annotations

import base64
import binascii
import logging
from typing import Any

from rocketstore.broker.grpc import convert
from rocketstore.broker.grpc.convert import RequestError, status
from rocketstore.broker.grpc.protocol import rocketmq_v2_service_pb2 as spb
from rocketstore.broker.grpc.protocol import rocketmq_v2_types_pb2 as pb
from rocketstore.broker.grpc.queue_choice import group_queue
from rocketstore.broker.grpc.service_core import (
    ServiceCore,
    now_ms,
    peer_address,
)
from rocketstore.broker.processors.send import (
    asks_for_timer,
    put_failure_remark,
    stored_properties,
    timer_stored,
)
from rocketstore.broker.topic_config import (
    MULTI_TAG,
    TopicConfig,
)
from rocketstore.broker.transaction import (
    COMMIT,
    ROLLBACK,
    half_message,
    half_message_properties,
)
from rocketstore.broker.transaction_service import EndCode, EndRequest
from rocketstore.format import properties as props
from rocketstore.format import sysflag
from rocketstore.format.message import Message
from rocketstore.paths import RETRY_PREFIX, TRANS_HALF_TOPIC
from rocketstore.put_path import PutResult, is_delayed
from rocketstore.status import PutStatus
from rocketstore.store.timer import TIMER_TOPIC, TimerRefusal, timer_message_to_store

log = logging.getLogger(__name__)

# SendMessageActivity.convertToSendMessageResponse: a send stored but short of its flush
# or replication wait gets these codes and no ids (a client retries it: stored again).
_STORED_SHORT = {
    PutStatus.FLUSH_DISK_TIMEOUT: pb.Code.MASTER_PERSISTENCE_TIMEOUT,
    PutStatus.FLUSH_SLAVE_TIMEOUT: pb.Code.SLAVE_PERSISTENCE_TIMEOUT,
    PutStatus.SLAVE_NOT_AVAILABLE: pb.Code.HA_NOT_AVAILABLE,
}
# RecallMessageProcessor's tag of the delete unit it stores.
RECALL_MESSAGE_TAG = "_RECALL_TAG_"


class SendActivity(ServiceCore):
    """SendMessage, RecallMessage and EndTransaction."""

    # --- sending ------------------------------------------------------------------------

    async def SendMessage(
        self, request: spb.SendMessageRequest, context: Any
    ) -> spb.SendMessageResponse:
        try:
            return await self._send(request, self.peer_of(peer_address(context.peer())))
        except RequestError as e:
            return spb.SendMessageResponse(status=status(e.code, e.message))

    def _send_queue(self, request: spb.SendMessageRequest, config: TopicConfig) -> int:
        if config.write_queue_nums <= 0:
            raise RequestError(pb.Code.FORBIDDEN, "no writable queue")
        group = request.messages[0].system_properties.message_group
        if len(request.messages) == 1 and group:
            return group_queue(group, config.write_queue_nums)
        return self._round_robin.pick(config.write_queue_nums)

    def _record(
        self, message: pb.Message, born_host: str, queue_id: int, config: TopicConfig
    ) -> Message:
        now = now_ms()
        fields = convert.send_fields(
            message,
            born_host.rsplit(":", 1)[0],
            max_body_bytes=self.ctx.store.config.max_message_size,
            delay_levels_ms=self._delay_levels_ms,
            now_ms=now,
            timer_wheel=self.ctx.store.config.timer_wheel_enable,
        )
        sys_flag = fields.sys_flag
        if config.topic_filter_type == MULTI_TAG:
            sys_flag |= sysflag.MULTI_TAGS_FLAG
        if fields.transactional:
            if self.ctx.config.reject_transaction_message:
                # The broker's NO_PERMISSION, which the proxy's ResponseBuilder does not map.
                raise RequestError(
                    pb.Code.INTERNAL_SERVER_ERROR,
                    f"the broker[{self.ctx.broker_host}] sending transaction message is forbidden",
                )
            # Stored as a half message until EndTransaction, as a remoting send's.
            return half_message(
                body=message.body,
                flag=0,
                sys_flag=sys_flag,
                properties=half_message_properties(
                    fields.properties, self.ctx.cluster_name, config.topic_name, queue_id
                ),
                born_timestamp=fields.born_timestamp,
                born_host=born_host,
                reconsume_times=0,
            )
        timer = asks_for_timer(fields.properties, config.topic_name)
        record = Message(
            topic=config.topic_name,
            body=message.body,
            queue_id=queue_id,
            flag=0,
            sys_flag=sys_flag,
            properties=stored_properties(
                fields.properties,
                self.ctx.cluster_name,
                keep_wait=timer or is_delayed(fields.properties, sys_flag),
            ),
            born_timestamp=fields.born_timestamp,
            born_host=born_host,
            reconsume_times=0,
        )
        if not timer:
            return record
        stored = timer_stored(self.ctx, record)
        if isinstance(stored, TimerRefusal):
            # The broker's MESSAGE_ILLEGAL (or SYSTEM_ERROR) through the proxy's mapping.
            raise RequestError(pb.Code.INTERNAL_SERVER_ERROR, stored.remark)
        return stored

    def _recall_handle(self, record: Message) -> str:
        """SendMessageProcessor.attachRecallHandle: a timer message sent alone (not in a
        batch) gets RecallMessageHandle.HandleV1, base64url of "v1 <real topic> <broker>
        <TIMER_OUT_MS + 1> <UNIQ_KEY>"; "" for any other."""
        properties = record.properties
        out_ms, real = properties.get(props.TIMER_OUT_MS), properties.get(props.REAL_TOPIC)
        uniq = properties.get(props.UNIQ_KEY)
        if record.topic != TIMER_TOPIC or not out_ms or not real or not uniq:
            return ""
        if real.startswith(RETRY_PREFIX):
            return ""
        raw = f"v1 {real} {self.ctx.broker_name} {int(out_ms) + 1} {uniq}"
        return base64.urlsafe_b64encode(raw.encode()).decode()

    async def _send(
        self, request: spb.SendMessageRequest, born_host: str
    ) -> spb.SendMessageResponse:
        if not request.messages:
            raise RequestError(pb.Code.MESSAGE_CORRUPTED, "no message to send")
        topic = request.messages[0].topic
        for message in request.messages:
            if message.topic != topic:
                raise RequestError(pb.Code.MESSAGE_CORRUPTED, "topic in message is not same")
        config = self._topic(topic, write=True)
        if not config.writeable:
            # The proxy's route of such a topic has no writable queue (ProducerProcessor).
            raise RequestError(pb.Code.FORBIDDEN, "no writable queue")
        queue_id = self._send_queue(request, config)
        records = [self._record(m, born_host, queue_id, config) for m in request.messages]
        body_bytes = sum(len(r.body) for r in records)
        results: list[PutResult]
        if len(records) == 1:
            results = [await self.ctx.put(records[0], body_bytes)]
        else:
            # One batch whatever its kinds: the store writes each record to its own topic
            # (a timer one into rmq_sys_wheel_timer, a half message into the half topic),
            # all in one append. (RocketMQ 5.3.3's broker skips its timer hook for a batch
            # and would deliver a timer entry at once.)
            results = await self.ctx.put_batch(records, body_bytes)
            if len(results) != len(records):  # one refusal of the whole batch (a slave's)
                results = [results[0]] * len(records)
        return self._send_answer(request, config, records, results)

    def _send_answer(
        self,
        request: spb.SendMessageRequest,
        config: TopicConfig,
        records: list[Message],
        results: list[PutResult],
    ) -> spb.SendMessageResponse:
        """What RocketMQ 5.3.3's proxy answers for the broker's answer to this send: one
        SendResult per request (a batch is one SEND_BATCH_MESSAGE), so one entry."""
        first = results[0]  # (a batch is one append: one status for all its messages)
        if not first.status.stored:
            # The broker's refusal reaches the proxy as an MQBrokerException: the status
            # alone, its code mapped by ResponseBuilder (SYSTEM_BUSY only), its remark.
            busy = first.status is PutStatus.OS_PAGECACHE_BUSY
            code = pb.Code.TOO_MANY_REQUESTS if busy else pb.Code.INTERNAL_SERVER_ERROR
            raise RequestError(code, put_failure_remark(first, self.ctx))
        # Counted as SendMessageProcessor counts every sendOK status, PUT_OK or short of
        # its wait; under the half topic for a transactional send, as the remoting path.
        topic = records[0].topic if records[0].topic == TRANS_HALF_TOPIC else config.topic_name
        self.ctx.stats.stored(topic, len(results), sum(r.size for r in results))
        short = _STORED_SHORT.get(first.status)
        if short is not None:
            why = f"send message failed, sendStatus={first.status.value}"
            entry = spb.SendResultEntry(status=status(short, why))
        else:
            messages = request.messages
            for message, result in zip(messages, results, strict=True):
                if message.system_properties.message_type == pb.MessageType.TRANSACTION:
                    key = (config.topic_name, message.system_properties.message_id)
                    self._transactions[key] = (result.commit_log_offset, result.queue_offset)
            message_id = messages[0].system_properties.message_id
            entry = spb.SendResultEntry(
                status=status(pb.Code.OK),
                # A batch's: its messages' ids joined (MQClientAPIImpl.processSendResponse);
                # its transaction id the first's (the request header carries its properties).
                message_id=",".join(m.system_properties.message_id for m in messages),
                transaction_id=message_id,
                offset=first.queue_offset,
                # (none for a batch: attachRecallHandle answers SEND_MESSAGE(_V2) only)
                recall_handle=self._recall_handle(records[0]) if len(records) == 1 else "",
            )
        return spb.SendMessageResponse(status=status(entry.status.code), entries=[entry])

    # --- recalling a timer message ----------------------------------------------------------

    async def RecallMessage(
        self, request: spb.RecallMessageRequest, context: Any
    ) -> spb.RecallMessageResponse:
        """Cancel a timer message before its time (RIP-43's recall): a delete unit for it
        into the timer wheel, as RocketMQ 5.3.3's RecallMessageProcessor stores one. Its
        refusals come through the proxy as INTERNAL_SERVER_ERROR with the broker's words
        (ResponseBuilder maps none of its codes)."""
        try:
            config = self._topic(request.topic)
            try:
                text = base64.urlsafe_b64decode(request.recall_handle.encode()).decode()
            except (binascii.Error, UnicodeDecodeError, ValueError):
                text = ""
            items = text.split(" ")
            if not request.recall_handle or items[0] != "v1" or len(items) < 5:
                raise RequestError(pb.Code.INTERNAL_SERVER_ERROR, "recall handle is invalid")
            topic, broker_name, timestamp, message_id = items[1:5]
            failed = pb.Code.INTERNAL_SERVER_ERROR
            if not self.ctx.config.recall_message_enable:
                raise RequestError(failed, "recall failed, operation is forbidden")
            if self.ctx.config.is_slave:
                raise RequestError(failed, "recall failed, broker service not available")
            if topic != config.topic_name:
                raise RequestError(failed, "recall failed, topic not match")
            if broker_name != self.ctx.broker_name:
                raise RequestError(failed, "recall failed, broker service not available")
            store_config = self.ctx.store.config
            try:
                left_ms = int(timestamp) - now_ms()
            except ValueError:
                left_ms = -1
            if left_ms <= 0 or left_ms >= store_config.timer_max_delay_sec * 1000:
                raise RequestError(failed, "recall failed, timestamp invalid")
            born = now_ms()
            delete = Message(
                topic=topic,
                body=b"0",
                queue_id=0,
                flag=0,
                sys_flag=0,
                properties={
                    props.TAGS: RECALL_MESSAGE_TAG,
                    props.TIMER_DEL_UNIQKEY: f"{topic}+{message_id}",
                    props.UNIQ_KEY: message_id,
                    props.TIMER_DELIVER_MS: timestamp,
                    props.BORN_TIMESTAMP: str(born),
                    # (its empty TRACE_CONTEXT left out: a record keeps no empty value)
                },
                born_timestamp=born,
                born_host=peer_address(context.peer()),
                reconsume_times=0,
            )
            stored = timer_message_to_store(store_config, delete)
            if isinstance(stored, TimerRefusal):
                raise RequestError(failed, "recall failed, execute error")
            result = await self.ctx.put(stored, len(stored.body))
            if not result.status.stored:
                why = result.reason or result.status.value
                log.warning("recall of %s: its delete unit was not stored: %s", message_id, why)
                raise RequestError(failed, "recall failed, execute error")
        except RequestError as e:
            return spb.RecallMessageResponse(status=status(e.code, e.message))
        return spb.RecallMessageResponse(status=status(pb.Code.OK, "OK"), message_id=message_id)

    async def EndTransaction(
        self, request: spb.EndTransactionRequest, context: Any
    ) -> spb.EndTransactionResponse:
        """Commit or roll back a half message this endpoint stored (the transaction
        service's end, as END_TRANSACTION does it)."""
        try:
            config = self._topic(request.topic)
            key = (config.topic_name, request.transaction_id)
            found = self._transactions.get(key)
            if found is None:
                raise RequestError(
                    pb.Code.INVALID_TRANSACTION_ID,
                    f"transaction id {request.transaction_id!r} names no open transaction "
                    f"of topic {config.topic_name}",
                )
            if request.resolution == pb.TransactionResolution.COMMIT:
                kind = COMMIT
            elif request.resolution == pb.TransactionResolution.ROLLBACK:
                kind = ROLLBACK
            else:  # unknown: left for the transaction check, as RocketMQ does
                return spb.EndTransactionResponse(status=status(pb.Code.OK))
            service = self.ctx.transactions
            if service is None:
                raise RequestError(
                    pb.Code.INTERNAL_SERVER_ERROR, "this broker has no transaction service running"
                )
            commit_log_offset, queue_offset = found
            end = EndRequest(
                producer_group=config.topic_name,  # the proxy's producer group
                tran_state_table_offset=queue_offset,
                commit_log_offset=commit_log_offset,
                commit_or_rollback=kind,
                from_transaction_check=request.source == pb.TransactionSource.SOURCE_SERVER_CHECK,
                msg_id=request.message_id,
                transaction_id=request.transaction_id,
            )
            outcome = await self.ctx.run(service.end, end)
            if outcome is not None and outcome.code is not EndCode.SUCCESS:
                raise RequestError(
                    pb.Code.INTERNAL_SERVER_ERROR, outcome.remark or outcome.code.name
                )
            self._transactions.pop(key, None)
        except RequestError as e:
            return spb.EndTransactionResponse(status=status(e.code, e.message))
        return spb.EndTransactionResponse(status=status(pb.Code.OK))
