"""The broker's request router: request code -> processor, with the ACL check in front.

Layer: broker. Codes without a processor get REQUEST_CODE_NOT_SUPPORTED, as RocketMQ
answers them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from rocketstore.broker.acl import authorize
from rocketstore.broker.acl_addresses import client_ip
from rocketstore.broker.codes import RequestCode, ResponseCode
from rocketstore.broker.context import BrokerContext
from rocketstore.broker.processors import (
    acl_admin,
    admin,
    assignment,
    client_calls,
    clients,
    end_transaction,
    locks,
    monitoring,
    offsets,
    pull,
    query,
    queue_admin,
    send,
    send_back,
)
from rocketstore.broker.remoting import ProtocolError, RemotingCommand
from rocketstore.broker.server import Connection
from rocketstore.errors import ConfigError

log = logging.getLogger(__name__)

Processor = Callable[
    [BrokerContext, RemotingCommand, Connection], Awaitable[RemotingCommand | None]
]

PROCESSORS: dict[int, Processor] = {
    RequestCode.SEND_MESSAGE: send.send_message,
    RequestCode.SEND_MESSAGE_V2: send.send_message,
    RequestCode.SEND_BATCH_MESSAGE: send.send_batch,
    RequestCode.PULL_MESSAGE: pull.pull_message,
    RequestCode.LITE_PULL_MESSAGE: pull.pull_message,  # as RocketMQ 5.x routes it
    RequestCode.QUERY_ASSIGNMENT: assignment.query_assignment,
    RequestCode.QUERY_CONSUMER_OFFSET: offsets.query_consumer_offset,
    RequestCode.UPDATE_CONSUMER_OFFSET: offsets.update_consumer_offset,
    RequestCode.GET_MAX_OFFSET: offsets.get_max_offset,
    RequestCode.GET_MIN_OFFSET: offsets.get_min_offset,
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: offsets.search_offset_by_timestamp,
    RequestCode.GET_EARLIEST_MSG_STORETIME: offsets.get_earliest_msg_store_time,
    RequestCode.HEART_BEAT: clients.heart_beat,
    RequestCode.UNREGISTER_CLIENT: clients.unregister_client,
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: clients.get_consumer_list,
    RequestCode.CHECK_CLIENT_CONFIG: clients.check_client_config,
    RequestCode.CONSUMER_SEND_MSG_BACK: send_back.consumer_send_back,
    RequestCode.END_TRANSACTION: end_transaction.end_transaction,
    RequestCode.QUERY_MESSAGE: query.query_message,
    RequestCode.VIEW_MESSAGE_BY_ID: query.view_message_by_id,
    RequestCode.LOCK_BATCH_MQ: locks.lock_batch,
    RequestCode.UNLOCK_BATCH_MQ: locks.unlock_batch,
    RequestCode.UPDATE_AND_CREATE_TOPIC: admin.update_and_create_topic,
    RequestCode.DELETE_TOPIC_IN_BROKER: admin.delete_topic,
    RequestCode.CLEAN_UNUSED_TOPIC: admin.clean_unused_topic,
    RequestCode.GET_ALL_TOPIC_CONFIG: admin.get_all_topic_config,
    RequestCode.GET_BROKER_CONFIG: admin.get_broker_config,
    RequestCode.UPDATE_BROKER_CONFIG: admin.update_broker_config,
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: admin.update_and_create_subscription_group,
    RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: admin.get_all_subscription_group_config,
    RequestCode.GET_ALL_CONSUMER_OFFSET: admin.get_all_consumer_offset,
    RequestCode.GET_ALL_DELAY_OFFSET: admin.get_all_delay_offset,
    RequestCode.DELETE_SUBSCRIPTIONGROUP: admin.delete_subscription_group,
    RequestCode.GET_TOPIC_STATS_INFO: monitoring.get_topic_stats_info,
    RequestCode.GET_CONSUME_STATS: monitoring.get_consume_stats,
    RequestCode.GET_CONSUMER_CONNECTION_LIST: monitoring.get_consumer_connection_list,
    RequestCode.GET_PRODUCER_CONNECTION_LIST: monitoring.get_producer_connection_list,
    RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: monitoring.query_topic_consume_by_who,
    RequestCode.GET_BROKER_RUNTIME_INFO: monitoring.get_broker_runtime_info,
    RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: monitoring.invoke_broker_to_reset_offset,
    RequestCode.VIEW_BROKER_STATS_DATA: monitoring.view_broker_stats_data,
    RequestCode.QUERY_CONSUME_TIME_SPAN: monitoring.query_consume_time_span,
    RequestCode.GET_TOPIC_CONFIG: monitoring.get_topic_config,
    RequestCode.GET_BROKER_CONSUME_STATS: monitoring.get_broker_consume_stats,
    RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: monitoring.get_system_topic_list_from_broker,
    RequestCode.GET_ALL_PRODUCER_INFO: monitoring.get_all_producer_info,
    RequestCode.DELETE_EXPIRED_COMMITLOG: queue_admin.delete_expired_commit_log,
    RequestCode.GET_CONSUMER_RUNNING_INFO: client_calls.get_consumer_running_info,
    RequestCode.CONSUME_MESSAGE_DIRECTLY: client_calls.consume_message_directly,
    RequestCode.QUERY_CONSUME_QUEUE: queue_admin.query_consume_queue,
    RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE: queue_admin.clean_expired_consume_queue,
    RequestCode.UPDATE_AND_CREATE_ACL_CONFIG: acl_admin.update_acl_config,
    RequestCode.DELETE_ACL_CONFIG: acl_admin.delete_acl_config,
    RequestCode.GET_BROKER_CLUSTER_ACL_INFO: acl_admin.get_acl_info,
    RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: acl_admin.update_global_white_addrs,
}


class BrokerRouter:
    def __init__(self, ctx: BrokerContext):
        self.ctx = ctx

    async def handle(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand | None:
        # The ACL first, as RocketMQ's RPC hook runs before any processor: an unknown
        # client learns nothing, not even which codes are served.
        acl = self.ctx.acl
        if acl is not None:
            verdict = authorize(cmd.code, cmd.ext_fields, cmd.body, client_ip(conn.peer), acl)
            if not verdict.ok:
                log.warning(
                    "request code %d from %s refused by ACL: %s: %s",
                    cmd.code,
                    conn.peer,
                    verdict.check.value,
                    verdict.message,
                )
                return cmd.response(
                    ResponseCode.NO_PERMISSION,
                    f"ACL check failed: {verdict.check.value}: {verdict.message}",
                )
        processor = PROCESSORS.get(cmd.code)
        if processor is None:
            # RocketMQ logs each one too: the operator sees which client wants what.
            log.warning("request code %d from %s is not supported", cmd.code, conn.peer)
            # (RocketMQ's remark, its leading space included)
            return cmd.response(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {cmd.code} not supported"
            )
        try:
            return await processor(self.ctx, cmd, conn)
        except ProtocolError as e:
            # A missing or mistyped field, or a malformed body: this request fails, the
            # connection stays usable (RocketMQ answers RemotingCommandException so).
            return cmd.response(ResponseCode.SYSTEM_ERROR, str(e))
        except ConfigError as e:
            # An argument the store refuses (a value no check above caught): this request
            # fails with the store's reason; the broker and the connection go on.
            log.warning("request code %d from %s refused: %s", cmd.code, conn.peer, e)
            return cmd.response(ResponseCode.SYSTEM_ERROR, str(e))

    async def timed_handle(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand | None:
        """``handle``, its time from read to answer recorded in the stats' rpc latency
        histogram (what the servers call while the metrics endpoint is on)."""
        started = time.perf_counter()
        response = await self.handle(cmd, conn)
        latency = self.ctx.stats.rpc_latency
        if latency is not None and response is not None:
            latency.record(cmd.code, response.code, (time.perf_counter() - started) * 1000)
        return response
