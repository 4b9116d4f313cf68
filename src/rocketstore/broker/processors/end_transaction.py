"""END_TRANSACTION (37): a producer commits or rolls back a transactional message, after
sending it or when the broker asked (CHECK_TRANSACTION_STATE).

Layer: broker processors. The work is :meth:`TransactionService.end`; clients send this
request one-way, so the answer only reaches clients that ask for one.
"""

from __future__ import annotations

from rocketstore.broker.codes import ResponseCode
from rocketstore.broker.context import BrokerContext
from rocketstore.broker.remoting import RemotingCommand, ext_bool, ext_int, ext_str
from rocketstore.broker.transaction_service import EndRequest
from rocketstore.remoting.peer import Peer


def parse_end_request(ext: dict[str, str]) -> EndRequest:
    """EndTransactionRequestHeader; its @CFNotNull fields missing is a RequestFieldError."""
    return EndRequest(
        producer_group=ext_str(ext, "producerGroup"),
        tran_state_table_offset=ext_int(ext, "tranStateTableOffset"),
        commit_log_offset=ext_int(ext, "commitLogOffset"),
        commit_or_rollback=ext_int(ext, "commitOrRollback"),
        from_transaction_check=ext_bool(ext, "fromTransactionCheck"),
        msg_id=ext_str(ext, "msgId"),
        transaction_id=ext.get("transactionId"),
    )


async def end_transaction(
    ctx: BrokerContext, cmd: RemotingCommand, conn: Peer
) -> RemotingCommand | None:
    request = parse_end_request(cmd.ext_fields)
    service = ctx.transactions
    if service is None:
        return cmd.response(
            ResponseCode.SYSTEM_ERROR, "this broker has no transaction service running"
        )
    outcome = await ctx.run(service.end, request)
    if outcome is None:
        return None  # "unknown": left for the check, and RocketMQ answers nothing
    return cmd.response(int(outcome.code), outcome.remark)
