"""kill -9 of ``rocketstore serve --grpc-listen`` while the official 5.x Python client's
SimpleConsumer is acknowledging a stream of messages: after a restart every message
whose send was acknowledged is delivered (the ones in flight at the kill after their
invisible time, as second deliveries), and nothing acknowledged is delivered again
(config/grpcPopState.json and its journal).
And through grpcio's own stub, with no snapshot between the receive and the kill: the
delivery attempts handed out and the acks answered survive it (the POP journal)."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.cli.cli_helpers import CLI
from tests.conformance.broker_process import free_port, serve_process

pytest.importorskip("grpc", reason="the grpc extra is not installed")

import grpc as grpcio

from rocketstore.broker.grpc.protocol import rocketmq_v2_service_pb2 as spb
from rocketstore.broker.grpc.protocol import rocketmq_v2_service_pb2_grpc as spb_grpc
from rocketstore.broker.grpc.protocol import rocketmq_v2_types_pb2 as pb

TOPIC = "TopicKill5"
GROUP = "GroupKill5"
TOTAL = 200


def test_kill_9_mid_stream_loses_nothing_acknowledged(py5_client: Any, tmp_path: Path) -> None:
    store = tmp_path / "store"
    subprocess.run(
        [*CLI, "--store", str(store), "updateTopic", "-t", TOPIC, "-r", "2", "-w", "2"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    ports = (free_port(), free_port(), free_port())
    endpoint = f"127.0.0.1:{ports[2]}"
    grpc = ["--grpc-listen", endpoint]
    server = serve_process(store, ports[0], ports[1], extra=grpc)
    consumer = None
    try:
        run = py5_client("send", endpoint, TOPIC, TOTAL)
        sent = {e["id"] for e in run.finish(120) if e["event"] == "sent"}
        assert len(sent) == TOTAL, run.stderr[-10:]
        consumer = py5_client(
            "receive", endpoint, GROUP, TOPIC, TOTAL, 10, "ack",
            "--batch", 8, "--pause-ms", 30, "--wait-s", 60,
        )  # fmt: skip
        consumer.wait_for("acked", 60, 60)
        server.send_signal(signal.SIGKILL)  # mid-stream: a batch in flight, more to come
        server.wait(timeout=30)
        consumer.process.kill()
        before = consumer.finish(30)
        acked = {e["id"] for e in before if e["event"] == "acked"}
        held = {e["id"] for e in before if e["event"] == "received"} - acked
        assert (store / "config" / "grpcPopState.json").exists()
        server = serve_process(store, ports[0], ports[1], extra=grpc)
        left = TOTAL - len(acked)
        drain = py5_client("receive", endpoint, GROUP, TOPIC, left, 10, "ack", "--wait-s", 60)
        after = drain.finish(100)
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
            server.communicate(timeout=60)
    received_after = [e for e in after if e["event"] == "received"]
    again = {e["id"] for e in received_after} & acked
    # The client acks one message at a time right after printing it: the last one it
    # received may have been acknowledged by the broker (journaled before the answer)
    # without the client living to print "acked". Only that one may not come again.
    last = [e["id"] for e in before if e["event"] == "received"][-1:]
    in_ack = set(last) - acked
    # Nothing lost: every message whose send was acknowledged came, before or after.
    missing = sent - acked - {e["id"] for e in received_after}
    assert missing <= in_ack, (missing, in_ack)
    # In flight at the kill: delivered again.
    assert held - in_ack <= {e["id"] for e in received_after} | acked
    redelivered = [e["attempt"] for e in received_after if e["id"] in held]
    # An ack answered is in the POP journal, a receive answered too: nothing acknowledged
    # comes again, and what was in flight comes as a second delivery at least.
    assert not again, (len(again), len(acked))
    assert all(attempt >= 2 for attempt in redelivered), redelivered
    print(
        f"kill -9 mid-stream: {len(acked)} acknowledged before, {len(held)} in flight, "
        f"{len(received_after)} received after the restart, {len(again)} of them again; "
        f"attempts of those in flight: {sorted(redelivered)}"
    )


def _receive(stub: Any, topic: str, group: str, invisible_ms: int, polling_s: int) -> list[Any]:
    request = spb.ReceiveMessageRequest(
        group=pb.Resource(name=group),
        message_queue=pb.MessageQueue(topic=pb.Resource(name=topic), id=0),
        filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"),
        batch_size=16,
    )
    request.invisible_duration.FromMilliseconds(invisible_ms)
    request.long_polling_timeout.FromSeconds(polling_s)
    answers = list(stub.ReceiveMessage(request, timeout=polling_s + 10))
    return [a.message for a in answers if a.WhichOneof("content") == "message"]


def test_kill_9_keeps_delivery_attempts_and_acks_answered_since_the_last_snapshot(
    tmp_path: Path,
) -> None:
    topic, group = "TopicKillAttempt", "GroupKillAttempt"
    store = tmp_path / "store"
    subprocess.run(
        [*CLI, "--store", str(store), "updateTopic", "-t", topic, "-r", "1", "-w", "1"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    ports = (free_port(), free_port(), free_port())
    endpoint = f"127.0.0.1:{ports[2]}"
    # No POP snapshot nor consumer offsets written between the receive and the kill: only
    # the journal can tell the restarted broker what happened.
    extra = ["--grpc-listen", endpoint, "--offset-persist-ms", "600000"]
    server = serve_process(store, ports[0], ports[1], extra=extra)
    try:
        with grpcio.insecure_channel(endpoint) as channel:
            stub = spb_grpc.MessagingServiceStub(channel)
            for i in range(4):
                message = pb.Message(
                    topic=pb.Resource(name=topic),
                    body=f"m{i}".encode(),
                    system_properties=pb.SystemProperties(message_id=f"01KILL{i}", tag="t"),
                )
                sent = stub.SendMessage(spb.SendMessageRequest(messages=[message]), timeout=10)
                assert sent.status.code == pb.Code.OK, sent.status
            taken: list[Any] = []
            deadline = time.monotonic() + 30
            while len(taken) < 4 and time.monotonic() < deadline:
                taken += _receive(stub, topic, group, 10_000, 5)
            assert [m.system_properties.message_id for m in taken] == [
                f"01KILL{i}" for i in range(4)
            ]
            acks = spb.AckMessageRequest(
                group=pb.Resource(name=group),
                topic=pb.Resource(name=topic),
                entries=[
                    spb.AckMessageEntry(
                        message_id=m.system_properties.message_id,
                        receipt_handle=m.system_properties.receipt_handle,
                    )
                    for m in (taken[0], taken[2])
                ],
            )
            assert stub.AckMessage(acks, timeout=10).status.code == pb.Code.OK
        server.send_signal(signal.SIGKILL)
        server.wait(timeout=30)
        server = serve_process(store, ports[0], ports[1], extra=extra)
        with grpcio.insecure_channel(endpoint) as channel:
            stub = spb_grpc.MessagingServiceStub(channel)
            again: list[Any] = []
            deadline = time.monotonic() + 40
            while len(again) < 2 and time.monotonic() < deadline:
                again += _receive(stub, topic, group, 10_000, 20)
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
            server.communicate(timeout=60)
    # The two not acknowledged come once their invisible time is over, as second
    # deliveries; the two acknowledged never (before the journal: all four, attempt 1).
    assert sorted(
        (m.system_properties.message_id, m.system_properties.delivery_attempt) for m in again
    ) == [("01KILL1", 2), ("01KILL3", 2)]


def _forward_to_dlq(stub: Any, topic: str, group: str, message: Any) -> Any:
    request = spb.ForwardMessageToDeadLetterQueueRequest(
        group=pb.Resource(name=group),
        topic=pb.Resource(name=topic),
        receipt_handle=message.system_properties.receipt_handle,
        message_id=message.system_properties.message_id,
        delivery_attempt=message.system_properties.delivery_attempt,
        max_delivery_attempts=16,
    )
    return stub.ForwardMessageToDeadLetterQueue(request, timeout=10)


def test_a_crash_between_a_dlq_put_and_its_journal_line_stores_it_in_the_dlq_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The broker dies (crash point: os._exit, as a kill -9) after a message forwarded
    to %DLQ% is stored there and before its drop is journaled. After the restart the
    move journaled as begun is found done: the message is not delivered again, so
    nothing forwards it a second time (without the check it came back with attempt 2,
    and a second forward stored a second copy)."""
    from rocketstore import crashpoints

    topic, group = "TopicKillDlq", "GroupKillDlq"
    store = tmp_path / "store"
    subprocess.run(
        [*CLI, "--store", str(store), "updateTopic", "-t", topic, "-r", "1", "-w", "1"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    ports = (free_port(), free_port(), free_port())
    endpoint = f"127.0.0.1:{ports[2]}"
    extra = ["--grpc-listen", endpoint, "--offset-persist-ms", "600000"]
    monkeypatch.setenv(crashpoints.ENV_VAR, crashpoints.AFTER_DLQ_PUT_BEFORE_JOURNAL)
    server = serve_process(store, ports[0], ports[1], extra=extra)
    monkeypatch.delenv(crashpoints.ENV_VAR)
    try:
        with grpcio.insecure_channel(endpoint) as channel:
            stub = spb_grpc.MessagingServiceStub(channel)
            message = pb.Message(
                topic=pb.Resource(name=topic),
                body=b"to the dlq once",
                system_properties=pb.SystemProperties(message_id="01KILLDLQ", tag="t"),
            )
            sent = stub.SendMessage(spb.SendMessageRequest(messages=[message]), timeout=10)
            assert sent.status.code == pb.Code.OK, sent.status
            (taken,) = _receive(stub, topic, group, 10_000, 5)
            with pytest.raises(grpcio.RpcError):
                _forward_to_dlq(stub, topic, group, taken)
        assert server.wait(timeout=30) == 137  # the crash point, not an answer
        server = serve_process(store, ports[0], ports[1], extra=extra)
        with grpcio.insecure_channel(endpoint) as channel:
            stub = spb_grpc.MessagingServiceStub(channel)
            # Past the 10 s invisible time: anything still in flight would come again.
            again: list[Any] = []
            deadline = time.monotonic() + 16
            while time.monotonic() < deadline:
                for m in _receive(stub, topic, group, 10_000, 5):
                    again.append(m)
                    assert _forward_to_dlq(stub, topic, group, m).status.code == pb.Code.OK
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
            server.communicate(timeout=60)
    query = ["queryMsgByUniqueKey", "-t", f"%DLQ%{group}", "-i", "01KILLDLQ", "-a"]
    printed = subprocess.run(
        [*CLI, "--store", str(store), "--json", *query],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    copies = [line for line in printed.stdout.splitlines() if line.startswith("{")]
    assert len(copies) == 1, copies
    assert again == []
