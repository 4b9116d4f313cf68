"""A real RocketMQ client for the broker kill tests (run as a script, never collected by
pytest): the Python ``rocketmq`` 0.4.4 package, which bundles the C++ client.

    broker_client.py produce NAMESRV TOPIC ACK_FILE STOP_FILE
    broker_client.py consume NAMESRV TOPIC GROUP RECV_FILE STOP_FILE

``produce`` sends ``body-<i>`` (i = 0, 1, ...) with send_sync as fast as it can, through
broker kills (a failed send is logged to stderr and the next one tried at once), and
appends ``<i> <msgId> <status>`` to ACK_FILE for every send answered SEND_OK, flushed
line by line, so the file holds each acknowledgement before the next send starts.
``consume`` runs a push consumer (clustering) and appends every body it is handed to
RECV_FILE, line by line, before returning CONSUME_SUCCESS. Both stop once STOP_FILE
exists (the consumer commits its offsets when it shuts down) and exit on their own past a
hard limit, so a broken broker can never hang the tests.
"""

from __future__ import annotations

import os
import sys
import threading
import time

from rocketmq.client import Message, Producer, PushConsumer, SendStatus

HARD_LIMIT_S = 120


def produce(namesrv: str, topic: str, ack_file: str, stop_file: str) -> None:
    producer = Producer("crash_producer")
    producer.set_namesrv_addr(namesrv)
    producer.set_timeout(2000)
    producer.start()
    failures = 0
    with open(ack_file, "a", buffering=1) as acks:
        i = 0
        while not os.path.exists(stop_file):
            msg = Message(topic)
            msg.set_keys(f"k-{i}")
            msg.set_tags("crash")
            msg.set_body(f"body-{i}".encode())
            try:
                result = producer.send_sync(msg)
            except Exception as e:  # the broker is down: go on with the next message
                failures += 1
                if failures % 50 == 1:
                    print(f"send {i} failed: {str(e)[:160]}", file=sys.stderr, flush=True)
                time.sleep(0.01)
            else:
                if result.status == SendStatus.OK:
                    acks.write(f"{i} {result.msg_id} {int(result.status)}\n")
                    acks.flush()
            i += 1
    producer.shutdown()


def consume(namesrv: str, topic: str, group: str, recv_file: str, stop_file: str) -> None:
    lock = threading.Lock()
    with open(recv_file, "a", buffering=1) as out:

        def on_message(msg: object) -> None:
            body = (msg.body or b"").decode()  # type: ignore[attr-defined]
            where = f"{msg.queue_id} {msg.queue_offset}"  # type: ignore[attr-defined]
            with lock:
                out.write(f"{body} {where}\n")
                out.flush()

        consumer = PushConsumer(group)
        consumer.set_namesrv_addr(namesrv)
        consumer.set_thread_count(2)
        consumer.subscribe(topic, on_message, "*")
        consumer.start()
        while not os.path.exists(stop_file):
            time.sleep(0.05)
        consumer.shutdown()  # commits the consumed offsets to the broker


def main() -> None:
    timer = threading.Timer(HARD_LIMIT_S, lambda: os._exit(3))
    timer.daemon = True
    timer.start()
    command, *args = sys.argv[1:]
    if command == "produce":
        produce(*args)
    else:
        consume(*args)
    sys.stdout.flush()
    os._exit(0)  # the C++ client's threads sometimes keep a normal exit waiting


if __name__ == "__main__":
    main()
