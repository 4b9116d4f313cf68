"""Produce or consume through the Python ``rocketmq`` 0.4.4 client (C++ client inside),
timing only the messaging (not process or client start-up). Prints JSON lines:
``{"event": "start"}`` where the measured region begins, then the result (the last line).

    python rocketmq_py.py produce NAMESRV TOPIC COUNT BODY_BYTES [START_AT]
    python rocketmq_py.py consume NAMESRV TOPIC GROUP COUNT TIMEOUT_S
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

from rocketmq.client import Message, Producer, PushConsumer


def produce(
    namesrv: str, topic: str, count: int, body_bytes: int, start_at: float | None = None
) -> dict[str, float]:
    """``start_at`` (epoch seconds): begin then, so that several producers started one
    after another send at the same time."""
    producer = Producer("bench_producer")
    producer.set_namesrv_addr(namesrv)
    producer.start()
    body = b"x" * body_bytes
    warm = Message(topic)
    warm.set_body(body)
    producer.send_sync(warm)  # route lookup and connection, outside the timing
    if start_at is not None:
        time.sleep(max(0.0, start_at - time.time()))
    _start_line()
    latencies = []
    started = time.perf_counter()
    for i in range(count):
        msg = Message(topic)
        msg.set_keys(f"k{i}")
        msg.set_tags("bench")
        msg.set_body(body)
        began = time.perf_counter()
        producer.send_sync(msg)
        latencies.append((time.perf_counter() - began) * 1e6)
    seconds = time.perf_counter() - started
    producer.shutdown()
    latencies.sort()
    p50, p99 = (latencies[min(count - 1, int(q * count))] for q in (0.50, 0.99))
    return {"messages": count, "seconds": seconds, "p50_us": p50, "p99_us": p99}


def _start_line() -> None:
    sys.stdout.write(json.dumps({"event": "start"}) + "\n")
    sys.stdout.flush()


def consume(namesrv: str, topic: str, group: str, count: int, timeout_s: float) -> dict[str, float]:
    received = 0
    first: list[float] = []
    done = threading.Event()
    lock = threading.Lock()

    def on_message(_msg: object) -> None:
        nonlocal received
        with lock:
            if not first:
                first.append(time.perf_counter())
            received += 1
            if received >= count:
                done.set()

    consumer = PushConsumer(group)
    consumer.set_namesrv_addr(namesrv)
    consumer.set_thread_count(2)
    consumer.subscribe(topic, on_message)
    _start_line()  # the consumer's start-up is in the broker's CPU
    consumer.start()
    done.wait(timeout_s)
    ended = time.perf_counter()
    consumer.shutdown()
    seconds = ended - first[0] if first else float("nan")
    return {"messages": received, "seconds": seconds}


def main() -> None:
    timer = threading.Timer(600, lambda: os._exit(3))  # a hard limit whatever happens
    timer.daemon = True
    timer.start()
    mode, namesrv, topic, *rest = sys.argv[1:]
    if mode == "produce":
        start_at = float(rest[2]) if len(rest) > 2 else None
        result = produce(namesrv, topic, int(rest[0]), int(rest[1]), start_at)
    else:
        result = consume(namesrv, topic, rest[0], int(rest[1]), float(rest[2]))
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
