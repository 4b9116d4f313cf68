"""Kill -9 of the broker process during a produce/consume run with the Python client, then
a restart on the same ports: no acknowledged message is lost (SYNC_FLUSH), no committed
consumer offset goes back, and the clients carry on."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

from rocketstore.store import MessageStore
from tests.conformance.broker_process import free_port, serve_process

TOPIC = "KillTopic"
GROUP = "KillGroup"
TOTAL = 300


def _offsets(store: Path) -> dict[int, int]:
    path = store / "config" / "consumerOffset.json"
    if not path.exists():
        return {}
    table = json.loads(path.read_text())["offsetTable"].get(f"{TOPIC}@{GROUP}", {})
    return {int(k): int(v) for k, v in table.items()}


def _max_offsets(store: Path) -> dict[int, int]:
    with MessageStore.open(store, read_only=True) as live:  # takes no lock: safe while served
        return {queue_id: live.max_offset(TOPIC, queue_id) for queue_id in live.topics()[TOPIC]}


def _all_committed(store: Path) -> bool:
    committed = _offsets(store)
    return all(committed.get(q, -1) >= end for q, end in _max_offsets(store).items())


def _wait(condition: Any, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


def test_kill_9_loses_no_acknowledged_message(py_client: Any, tmp_path: Path) -> None:
    store = tmp_path / "store"
    broker_port, namesrv_port = free_port(), free_port()
    namesrv = f"127.0.0.1:{namesrv_port}"
    server = serve_process(store, broker_port, namesrv_port)
    stop = tmp_path / "stop"
    producer = consumer = None
    try:
        producer = py_client("produce", namesrv, TOPIC, TOTAL, "--pause-ms", 30, "--attempts", 60)
        # The consumer starts once the topic exists (its route lookup would otherwise
        # wait for the client's next 30 s name server poll).
        assert _wait(lambda: producer.events("sent"), 30), producer.stderr[-5:]
        consumer = py_client(
            "consume",
            namesrv,
            TOPIC,
            GROUP,
            "--expect",
            10**6,
            "--seconds",
            80,
            "--stop-file",
            stop,
        )
        assert _wait(lambda: len(producer.events("sent")) >= 80 and _offsets(store), 40), (
            producer.stderr[-5:]
        )
        before = _offsets(store)
        acked_before_kill = len(producer.events("sent"))
        server.send_signal(signal.SIGKILL)
        server.wait(10)
        assert (store / "abort").exists()  # it really died without shutting down
        time.sleep(1)
        server = serve_process(store, broker_port, namesrv_port)
        producer.finish(80)
        sent = producer.events("sent")
        assert len(sent) > acked_before_kill and sent[-1]["i"] == TOTAL - 1, producer.stderr[-5:]
        acked = {s["msg_id"] for s in sent}
        assert _wait(lambda: acked <= {r["id"] for r in consumer.events("recv")}, 40)
        # The client commits what it consumed every 5 s: stop it once the broker holds
        # every queue's end as committed, not at a moment that races the client's rebalance
        # after the restart (a queue it dropped and took back again is re-pulled from the
        # committed offset, and a shutdown in between commits nothing for it).
        assert _wait(lambda: _all_committed(store), 60), (_offsets(store), _max_offsets(store))
        stop.write_text("stop")
        consumer.finish(40)
    finally:
        stop.write_text("stop")
        for run in (producer, consumer):
            if run is not None and run.process.poll() is None:
                run.process.kill()
        server.send_signal(signal.SIGTERM)
        server.wait(30)
    assert not (store / "abort").exists()
    after = _offsets(store)
    assert all(after.get(q, -1) >= offset for q, offset in before.items()), (before, after)
    with MessageStore.open(store, read_only=True) as reopened:
        stored: set[str | None] = set()
        for queue_id in reopened.topics()[TOPIC]:
            offset = 0
            while offset < reopened.max_offset(TOPIC, queue_id):
                result = reopened.get_messages("check", TOPIC, queue_id, offset, 32)
                stored.update(message.uniq_key for message in result.messages)
                offset = result.next_begin_offset
            assert after[queue_id] == reopened.max_offset(TOPIC, queue_id)  # all consumed
    assert acked <= stored
