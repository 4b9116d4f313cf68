"""Send or receive through the official RocketMQ 5.x Python client (rocketmq-python-client,
gRPC), timing only the messaging. JSON lines on stdout: ``{"event": "start"}`` where the
measured region begins (the parent reads the broker's CPU time there), then one result.

Runs with .venv-rmq5's interpreter: its import name ``rocketmq`` is also the 0.4.4 C++
client's, which the main venv has (rocketmq_py.py drives that one).

    python rocketmq5_py.py send ENDPOINT TOPIC COUNT BODY_BYTES IN_FLIGHT
        (IN_FLIGHT 1: send() one at a time; more: send_async() with that many in flight)
    python rocketmq5_py.py simple ENDPOINT GROUP TOPIC COUNT BATCH
        (SimpleConsumer: receive(BATCH), then ack() each message)
    python rocketmq5_py.py push ENDPOINT GROUP TOPIC COUNT
        (PushConsumer, a listener that returns SUCCESS)
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any

from rocketmq import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    Message,
    MessageListener,
    Producer,
    PushConsumer,
    SimpleConsumer,
)

INVISIBLE_S = 60
TIMEOUT_S = 300


def emit(**fields: object) -> None:
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def _config(endpoint: str) -> Any:
    return ClientConfiguration(endpoint, Credentials(), request_timeout=10)


def _percentiles(latencies_us: list[float]) -> dict[str, float]:
    if not latencies_us:
        return {"p50_us": -1.0, "p99_us": -1.0}
    ordered = sorted(latencies_us)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return {"p50_us": at(0.50), "p99_us": at(0.99)}


def _message(topic: str, body: bytes, i: int) -> Any:
    message = Message()
    message.topic = topic
    message.body = body
    message.tag = "bench"
    message.keys = f"k{i}"
    return message


def send(endpoint: str, topic: str, count: int, body_bytes: int, in_flight: int) -> None:
    producer = Producer(_config(endpoint), (topic,))
    producer.startup()
    body = b"x" * body_bytes
    producer.send(_message(topic, body, -1))  # route and connection, outside the timing
    latencies: list[float] = []
    failures = 0
    emit(event="start")
    started = time.perf_counter()
    if in_flight <= 1:
        for i in range(count):
            began = time.perf_counter()
            try:
                producer.send(_message(topic, body, i))
            except Exception:  # the client's ClientException and its kin
                failures += 1
            latencies.append((time.perf_counter() - began) * 1e6)
    else:
        slots = threading.Semaphore(in_flight)
        lock = threading.Lock()
        finished = threading.Event()
        done = 0

        def on_done(future: Any, began: float) -> None:
            nonlocal done, failures
            elapsed = (time.perf_counter() - began) * 1e6
            with lock:
                latencies.append(elapsed)
                if future.exception() is not None:
                    failures += 1
                done += 1
                if done == count:
                    finished.set()
            slots.release()

        for i in range(count):
            slots.acquire()
            began = time.perf_counter()
            future = producer.send_async(_message(topic, body, i))
            future.add_done_callback(lambda f, b=began: on_done(f, b))
        finished.wait(TIMEOUT_S)
    seconds = time.perf_counter() - started
    producer.shutdown()
    emit(
        event="done",
        messages=count,
        seconds=seconds,
        failures=failures,
        **_percentiles(latencies),
    )


def simple(endpoint: str, group: str, topic: str, count: int, batch: int) -> None:
    consumer = SimpleConsumer(
        _config(endpoint), group, {topic: FilterExpression("*")}, await_duration=5
    )
    consumer.startup()
    latencies: list[float] = []
    got = failures = 0
    emit(event="start")
    started = time.perf_counter()
    deadline = time.monotonic() + TIMEOUT_S
    while got < count and time.monotonic() < deadline:
        began = time.perf_counter()
        messages = consumer.receive(batch, INVISIBLE_S) or []
        latencies.append((time.perf_counter() - began) * 1e6)
        # One ack() at a time: 5.1.2's ack_async returns None (its return is missing).
        for message in messages:
            try:
                consumer.ack(message)
            except Exception:
                failures += 1
        got += len(messages)
    seconds = time.perf_counter() - started
    consumer.shutdown()
    emit(event="done", messages=got, seconds=seconds, failures=failures, **_percentiles(latencies))


def push(endpoint: str, group: str, topic: str, count: int) -> None:
    received = 0
    first: list[float] = []
    finished = threading.Event()
    lock = threading.Lock()

    class Counter(MessageListener):  # type: ignore[misc]
        def consume(self, message: Any) -> Any:
            nonlocal received
            with lock:
                if not first:
                    first.append(time.perf_counter())
                received += 1
                if received >= count:
                    finished.set()
            return ConsumeResult.SUCCESS

    emit(event="start")  # the consumer's start-up is in the broker's CPU, as for 4.x
    consumer = PushConsumer(_config(endpoint), group, Counter(), {topic: FilterExpression("*")})
    consumer.startup()
    finished.wait(TIMEOUT_S)
    ended = time.perf_counter()
    seconds = ended - first[0] if first else float("nan")
    emit(event="done", messages=received, seconds=seconds, failures=0, p50_us=-1, p99_us=-1)
    consumer.shutdown()


def main() -> None:
    timer = threading.Timer(600, lambda: os._exit(3))  # a hard limit whatever happens
    timer.daemon = True
    timer.start()
    mode, endpoint, *rest = sys.argv[1:]
    if mode == "send":
        send(endpoint, rest[0], int(rest[1]), int(rest[2]), int(rest[3]))
    elif mode == "simple":
        simple(endpoint, rest[0], rest[1], int(rest[2]), int(rest[3]))
    else:
        push(endpoint, rest[0], rest[1], int(rest[2]))
    os._exit(0)  # the client's threads (telemetry, schedulers) need not wind down


if __name__ == "__main__":
    main()
