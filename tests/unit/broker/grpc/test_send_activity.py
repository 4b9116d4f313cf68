"""SendMessage's answer for each put status, through grpcio on loopback against brokers
that really produce them (a SYNC_FLUSH broker whose flush outlasts its timeout, a
SYNC_MASTER without a slave or with one that never acknowledges, a slave), compared field
by field with what RocketMQ 5.3.3's proxy answers (SendMessageActivity.
convertToSendMessageResponse, ResponseBuilder), and the put statistics each counts."""

from __future__ import annotations

import contextlib
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("grpc")

import grpc

from rocketstore.broker.app import BackgroundServer, BrokerOptions
from rocketstore.broker.broker_config import BrokerConfig
from rocketstore.broker.grpc.protocol import rocketmq_v2_service_pb2 as spb
from rocketstore.broker.grpc.protocol import rocketmq_v2_service_pb2_grpc as spb_grpc
from rocketstore.broker.grpc.protocol import rocketmq_v2_types_pb2 as pb
from rocketstore.broker.perm_name import PERM_READ
from rocketstore.broker.topic_config import TopicConfig
from rocketstore.config import StoreConfig
from rocketstore.format import ha

TOPIC = pb.Resource(name="T")
# SendMessageProcessor's remark for SERVICE_NOT_AVAILABLE (its diskUtil's figures), and why.
SLAVE_WORDS = re.escape(
    "service not available now. It may be caused by one of the following reasons: "
    "the broker's disk is full [CL: "
) + (
    r"[ -]\d\.\d\d CQ: [ -]\d\.\d\d INDEX: [ -]\d\.\d\d\]"  # (-1.00: no such directory yet)
    + re.escape(
        ", messages are put to the slave, message store has been shut down, etc. "
        "(the broker role is slave)"
    )
)
FAQ = "\nFor more information, please visit the url, https://rocketmq.apache.org/docs/bestPractice/06FAQ"


@contextlib.contextmanager
def _serving(root: Path, store: StoreConfig, broker: BrokerConfig) -> Iterator[tuple[Any, Any]]:
    options = BrokerOptions(
        str(root),
        listen="127.0.0.1:0",
        store_config=store,
        broker=broker,
        grpc_listen="127.0.0.1:0",
        schedule_enable=False,
    )
    with BackgroundServer(options) as server:
        ctx = server.broker.ctx
        grpc_server = server.broker.grpc_server
        assert ctx is not None and grpc_server is not None
        ctx.topics.update(TopicConfig("T", read_queue_nums=1, write_queue_nums=1))
        with grpc.insecure_channel(grpc_server.address) as channel:
            yield server, spb_grpc.MessagingServiceStub(channel)


def _store(**settings: Any) -> StoreConfig:
    return StoreConfig(mapped_file_size_commit_log=16 * 1024 * 1024, **settings)


def _message(message_id: str, body: bytes = b"x", **system: Any) -> pb.Message:
    return pb.Message(
        topic=TOPIC,
        body=body,
        system_properties=pb.SystemProperties(message_id=message_id, tag="t", **system),
    )


def _send(stub: Any, *messages: pb.Message) -> spb.SendMessageResponse:
    answer: spb.SendMessageResponse = stub.SendMessage(
        spb.SendMessageRequest(messages=list(messages)), timeout=20
    )
    return answer


def _counted(server: Any) -> tuple[int, int, int, int]:
    """putMessageTimesTotal's count, T's stored messages and bytes, the CommitLog's end."""
    ctx = server.broker.ctx
    traffic = ctx.stats.topic_traffic().get("T")
    messages, size = (traffic.messages, traffic.bytes) if traffic else (0, 0)
    return ctx.stats.put.total, messages, size, ctx.store.max_commit_log_offset()


def _assert_stored_short(
    server: Any, answer: spb.SendMessageResponse, code: Any, send_status: str, before: Any
) -> None:
    """A send stored short of its wait: the proxy's entry holds the status alone (no id,
    transaction id, offset or recall handle), the response's status the code's name; the
    message is in the CommitLog and counted as a stored send (sendOK in the broker)."""
    assert answer.status == pb.Status(code=code, message=pb.Code.Name(code))
    (entry,) = answer.entries
    expected = spb.SendResultEntry(
        status=pb.Status(code=code, message=f"send message failed, sendStatus={send_status}")
    )
    assert entry == expected
    puts, messages, size, end = before
    record_bytes = server.broker.ctx.store.max_commit_log_offset() - end
    assert record_bytes > 0  # stored all the same
    assert _counted(server) == (puts + 1, messages + 1, size + record_bytes, end + record_bytes)


def _assert_ok(answer: spb.SendMessageResponse, message_id: str, offset: int) -> None:
    ok = pb.Status(code=pb.Code.OK, message="OK")
    assert answer.status == ok
    (entry,) = answer.entries
    assert entry == spb.SendResultEntry(
        status=ok, message_id=message_id, transaction_id=message_id, offset=offset
    )


def test_sync_master_without_a_slave_answers_ha_not_available(tmp_path: Path) -> None:
    broker = BrokerConfig(broker_role="SYNC_MASTER", slave_timeout_ms=300)
    with _serving(tmp_path / "store", _store(), broker) as (server, stub):
        before = _counted(server)
        answer = _send(stub, _message("01HA0"))
        _assert_stored_short(
            server, answer, pb.Code.HA_NOT_AVAILABLE, "SLAVE_NOT_AVAILABLE", before
        )
        # A batch alike: one entry (one SEND_BATCH_MESSAGE), both messages stored.
        puts, messages, _size, _end = _counted(server)
        answer = _send(stub, _message("01HA1"), _message("01HA2"))
        assert answer.status.code == pb.Code.HA_NOT_AVAILABLE
        assert [e.status.code for e in answer.entries] == [pb.Code.HA_NOT_AVAILABLE]
        assert answer.entries[0].message_id == ""
        assert _counted(server)[:2] == (puts + 2, messages + 2)
        store = server.broker.ctx.store
        store.wait_dispatched()  # (the queue is built behind the put, on its own thread)
        assert store.max_offset("T", 0) == 3


def test_sync_master_whose_slave_never_acknowledges_answers_slave_persistence_timeout(
    tmp_path: Path,
) -> None:
    broker = BrokerConfig(broker_role="SYNC_MASTER", slave_timeout_ms=300)
    with _serving(tmp_path / "store", _store(), broker) as (server, stub):
        replication = server.broker.replication_master
        assert replication is not None
        host, port = replication.address.rsplit(":", 1)
        # A "slave" that reports where it is once and never acknowledges anything after.
        with socket.create_connection((host, int(port)), timeout=10) as fake:
            fake.sendall(ha.encode_report(server.broker.ctx.store.max_commit_log_offset()))
            deadline = time.monotonic() + 10
            while not replication.connections and time.monotonic() < deadline:
                time.sleep(0.01)
            assert replication.connections
            before = _counted(server)
            answer = _send(stub, _message("01SLAVE"))
            _assert_stored_short(
                server, answer, pb.Code.SLAVE_PERSISTENCE_TIMEOUT, "FLUSH_SLAVE_TIMEOUT", before
            )


def test_sync_flush_past_its_timeout_answers_master_persistence_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (a timeout a loaded machine's real flush stays well within)
    store = _store(flush_disk_type="SYNC_FLUSH", sync_flush_timeout=1000)
    with _serving(tmp_path / "store", store, BrokerConfig()) as (server, stub):
        files = server.broker.ctx.store.flusher.commitlog.files
        flush = files.flush

        def slow_flush(*args: Any, **kwargs: Any) -> Any:
            time.sleep(1.2)  # (a disk slower than syncFlushTimeout)
            return flush(*args, **kwargs)

        monkeypatch.setattr(files, "flush", slow_flush)
        before = _counted(server)
        answer = _send(stub, _message("01FLUSH"))
        _assert_stored_short(
            server, answer, pb.Code.MASTER_PERSISTENCE_TIMEOUT, "FLUSH_DISK_TIMEOUT", before
        )
        monkeypatch.setattr(files, "flush", flush)
        before = _counted(server)
        _assert_ok(_send(stub, _message("01FLUSHED")), "01FLUSHED", offset=1)
        puts, messages, size, end = before
        grown = server.broker.ctx.store.max_commit_log_offset() - end
        assert _counted(server) == (puts + 1, messages + 1, size + grown, end + grown)


def test_a_stored_send_and_a_batch_get_one_entry_with_their_ids(tmp_path: Path) -> None:
    with _serving(tmp_path / "store", _store(), BrokerConfig()) as (server, stub):
        _assert_ok(_send(stub, _message("01ONE")), "01ONE", offset=0)
        answer = _send(stub, _message("01B0"), _message("01B1"), _message("01B2"))
        # MQClientAPIImpl.processSendResponse: a batch's ids joined; the transaction id
        # the first's (the request header carries the first message's properties).
        ok = pb.Status(code=pb.Code.OK, message="OK")
        assert answer.status == ok
        assert list(answer.entries) == [
            spb.SendResultEntry(
                status=ok, message_id="01B0,01B1,01B2", transaction_id="01B0", offset=1
            )
        ]
        assert _counted(server)[:2] == (4, 4)


def test_a_timer_message_gets_its_recall_handle(tmp_path: Path) -> None:
    with _serving(tmp_path / "store", _store(), BrokerConfig()) as (_server, stub):
        message = _message("01TIMER", message_type=pb.MessageType.DELAY)
        message.system_properties.delivery_timestamp.FromMilliseconds(
            int(time.time() * 1000) + 60_000
        )
        answer = _send(stub, message)
        assert answer.status.code == pb.Code.OK
        (entry,) = answer.entries
        assert entry.message_id == entry.transaction_id == "01TIMER"
        assert entry.recall_handle  # (its contents: test_service's recall test)


def test_a_slave_refuses_with_the_brokers_words_and_no_entry(tmp_path: Path) -> None:
    """The broker's SERVICE_NOT_AVAILABLE reaches the proxy as an MQBrokerException:
    INTERNAL_SERVER_ERROR with the broker's remark, and no entries (a batch too)."""
    with _serving(tmp_path / "store", _store(), BrokerConfig()) as (server, stub):
        server.broker.ctx.config.broker_role = "SLAVE"
        try:
            for messages in ([_message("01S0")], [_message("01S1"), _message("01S2")]):
                answer = _send(stub, *messages)
                assert answer.status.code == pb.Code.INTERNAL_SERVER_ERROR
                assert not answer.entries
                assert re.fullmatch(SLAVE_WORDS, answer.status.message), answer.status.message
        finally:
            server.broker.ctx.config.broker_role = "ASYNC_MASTER"
        assert _counted(server)[:3] == (0, 0, 0)


def test_too_large_messages_bad_topics_and_unwritable_ones(tmp_path: Path) -> None:
    store = _store(max_message_size=1024)
    with _serving(tmp_path / "store", store, BrokerConfig()) as (server, stub):
        # The proxy's own check of the body (validateMessageBodySize).
        answer = _send(stub, _message("01BIG", b"x" * 1025))
        assert answer == spb.SendMessageResponse(
            status=pb.Status(
                code=pb.Code.MESSAGE_BODY_TOO_LARGE,
                message="message body cannot exceed the max 1024",
            )
        )
        # At the limit: stored (the store, as RocketMQ 5's encoder, limits the body alone).
        assert _send(stub, _message("01EDGE", b"x" * 1024)).status.code == pb.Code.OK
        # GrpcValidator.validateTopic (Validators.checkTopic's words) and the route's.
        for name, code, words in (
            ("", pb.Code.ILLEGAL_TOPIC, "The specified topic is blank"),
            (
                "a b",
                pb.Code.ILLEGAL_TOPIC,
                "The specified topic[a b] contains illegal characters, "
                "allowing only ^[%|a-zA-Z0-9_-]+$",
            ),
            (
                "t" * 128,
                pb.Code.ILLEGAL_TOPIC,
                "The specified topic is longer than topic max length 127.",
            ),
            (
                "Nope",
                pb.Code.TOPIC_NOT_FOUND,
                "CODE: 17  DESC: No topic route info in name server for the topic: Nope" + FAQ,
            ),
        ):
            message = _message("01TOPIC")
            message.topic.name = name
            answer = _send(stub, message)
            assert answer == spb.SendMessageResponse(status=pb.Status(code=code, message=words))
        # A topic without write permission: its route has no writable queue.
        server.broker.ctx.topics.update(TopicConfig("T", 1, 1, perm=PERM_READ))
        answer = _send(stub, _message("01RO"))
        assert answer == spb.SendMessageResponse(
            status=pb.Status(code=pb.Code.FORBIDDEN, message="no writable queue")
        )
        assert _counted(server)[:2] == (1, 1)


def test_a_timer_message_past_the_brokers_max_delay_is_refused_in_its_words(
    tmp_path: Path,
) -> None:
    """Within the proxy's one day but past timerMaxDelaySec: the broker's MESSAGE_ILLEGAL
    (HookUtils' WHEEL_TIMER_MSG_ILLEGAL) as INTERNAL_SERVER_ERROR with its remark."""
    store = _store(timer_max_delay_sec=60)
    with _serving(tmp_path / "store", store, BrokerConfig()) as (server, stub):
        message = _message("01FAR", message_type=pb.MessageType.DELAY)
        message.system_properties.delivery_timestamp.FromMilliseconds(
            int(time.time() * 1000) + 3_600_000
        )
        answer = _send(stub, message)
        words = (
            "timer message illegal, the delay time should not be bigger than the max delay "
            "60000ms; or if set del msg, the delay time should be bigger than the current time"
        )
        assert answer == spb.SendMessageResponse(
            status=pb.Status(code=pb.Code.INTERNAL_SERVER_ERROR, message=words)
        )
        assert _counted(server)[:3] == (0, 0, 0)


def test_a_transactional_send_to_a_broker_rejecting_them(tmp_path: Path) -> None:
    """rejectTransactionMessage: the broker's NO_PERMISSION and remark, which the proxy
    passes on as INTERNAL_SERVER_ERROR."""
    broker = BrokerConfig(reject_transaction_message=True)
    with _serving(tmp_path / "store", _store(), broker) as (server, stub):
        answer = _send(stub, _message("01TX", message_type=pb.MessageType.TRANSACTION))
        host = server.broker.ctx.broker_host
        words = f"the broker[{host}] sending transaction message is forbidden"
        assert answer == spb.SendMessageResponse(
            status=pb.Status(code=pb.Code.INTERNAL_SERVER_ERROR, message=words)
        )
