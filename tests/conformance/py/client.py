"""A bounded RocketMQ client run by the conformance tests: the Python ``rocketmq`` 0.4.4
package (it bundles the C++ client). Prints one JSON object per line on stdout.

    client.py produce NAMESRV TOPIC COUNT [--big I] [--delay-level L] [--keys PREFIX]
    client.py consume NAMESRV TOPIC GROUP --expect N --seconds S [--fail-key K]

Every run ends within its hard limit (a timer exits the process), so a broken broker can
never hang the test suite.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import threading
import time

from rocketmq.client import Message, Producer, PushConsumer

HARD_LIMIT_S = 90


def emit(**fields: object) -> None:
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def produce(args: argparse.Namespace) -> None:
    producer = Producer(args.group)
    producer.set_namesrv_addr(args.namesrv)
    if args.access_key:
        producer.set_session_credentials(args.access_key, args.secret_key, "")
    producer.start()
    for i in range(args.count):
        msg = Message(args.topic)
        msg.set_tags(f"tag{i % 3}")
        msg.set_keys(f"{args.keys}{i} shared-key")
        body = f"body-{i}".encode()
        if i == args.big:
            # Above the client's 4 KiB compression threshold: sent zlib-compressed. (No NUL
            # bytes: this client passes bodies as C strings.)
            body = (f"big-{i}-".encode() + bytes(range(1, 256)) * 2) * 20
        msg.set_body(body)
        msg.set_property("custom", f"v{i}")
        if args.delay_level:
            msg.set_delay_time_level(args.delay_level)
        sent_at = int(time.time() * 1000)
        deliver_ms = sent_at + args.timer_delay_ms if args.timer_delay_ms else args.timer_at_ms
        if deliver_ms:  # a RocketMQ 5 timer message, as a 5.x Java producer sets it
            msg.set_property("TIMER_DELIVER_MS", str(deliver_ms))
        for attempt in range(args.attempts):
            try:
                if args.orderly:  # one sharding key: every message to the same queue
                    result = producer.send_orderly(msg, 7)
                else:
                    result = producer.send_sync(msg)
            except Exception as e:  # the broker may be down for a while (crash test)
                emit(event="error", i=i, attempt=attempt, error=str(e)[:200])
                time.sleep(0.5)
                continue
            emit(
                event="sent",
                i=i,
                status=int(result.status),
                msg_id=result.msg_id,
                offset=result.offset,
                body_b64=base64.b64encode(body).decode(),
                sent_at=sent_at,
                deliver_ms=deliver_ms,
            )
            break
        if args.pause_ms:
            time.sleep(args.pause_ms / 1000)
    producer.shutdown()


def consume(args: argparse.Namespace) -> None:
    received = 0
    failed: set[str] = set()
    done = threading.Event()
    lock = threading.Lock()

    def on_message(msg: object) -> None:
        nonlocal received
        keys = (msg.keys or b"").decode()  # type: ignore[attr-defined]
        fail = bool(args.fail_key) and args.fail_key in keys.split() and msg.id not in failed  # type: ignore[attr-defined]
        emit(
            event="recv",
            pid=os.getpid(),
            id=msg.id,  # type: ignore[attr-defined]
            topic=msg.topic,  # type: ignore[attr-defined]
            tags=(msg.tags or b"").decode(),  # type: ignore[attr-defined]
            keys=keys,
            body_b64=base64.b64encode(msg.body or b"").decode(),  # type: ignore[attr-defined]
            queue_id=msg.queue_id,  # type: ignore[attr-defined]
            queue_offset=msg.queue_offset,  # type: ignore[attr-defined]
            commit_log_offset=msg.commit_log_offset,  # type: ignore[attr-defined]
            reconsume_times=msg.reconsume_times,  # type: ignore[attr-defined]
            born_timestamp=msg.born_timestamp,  # type: ignore[attr-defined]
            store_timestamp=msg.store_timestamp,  # type: ignore[attr-defined]
            store_size=msg.store_size,  # type: ignore[attr-defined]
            custom=(msg.get_property("custom") or b"").decode(),  # type: ignore[attr-defined]
            retry_topic=(msg.get_property("RETRY_TOPIC") or b"").decode(),  # type: ignore[attr-defined]
            origin_id=(msg.get_property("ORIGIN_MESSAGE_ID") or b"").decode(),  # type: ignore[attr-defined]
            failing=fail,
            at=int(time.time() * 1000),
        )
        if args.sleep_ms:
            time.sleep(args.sleep_ms / 1000)
        if fail:
            failed.add(msg.id)  # type: ignore[attr-defined]
            raise RuntimeError("asked to fail this message once")
        with lock:
            received += 1
            if received >= args.expect:
                done.set()

    consumer = PushConsumer(args.group, orderly=args.orderly)
    consumer.set_namesrv_addr(args.namesrv)
    if args.access_key:
        consumer.set_session_credentials(args.access_key, args.secret_key, "")
    consumer.set_thread_count(2)
    consumer.subscribe(args.topic, on_message, args.expression)
    consumer.start()
    emit(event="started", pid=os.getpid())
    deadline = time.monotonic() + args.seconds
    while not done.is_set() and time.monotonic() < deadline:
        if args.stop_file and os.path.exists(args.stop_file):
            break
        done.wait(0.1)
    if args.linger_s:
        time.sleep(args.linger_s)
    consumer.shutdown()  # commits the consumed offsets to the broker
    emit(event="done", received=received)


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("produce")
    p.add_argument("namesrv")
    p.add_argument("topic")
    p.add_argument("count", type=int)
    p.add_argument("--group", default="conformance_producer")
    p.add_argument("--big", type=int, default=-1)
    p.add_argument("--delay-level", type=int, default=0)
    p.add_argument("--timer-delay-ms", type=int, default=0)
    p.add_argument("--timer-at-ms", type=int, default=0)
    p.add_argument("--keys", default="key-")
    p.add_argument("--attempts", type=int, default=1)
    p.add_argument("--pause-ms", type=int, default=0)
    c = sub.add_parser("consume")
    c.add_argument("namesrv")
    c.add_argument("topic")
    c.add_argument("group")
    c.add_argument("--expect", type=int, required=True)
    c.add_argument("--seconds", type=float, required=True)
    c.add_argument("--expression", default="*")
    c.add_argument("--fail-key", default="")
    c.add_argument("--sleep-ms", type=int, default=0)
    c.add_argument("--stop-file", default="")
    c.add_argument("--linger-s", type=float, default=0)
    for command in (p, c):
        command.add_argument("--orderly", action="store_true")
        command.add_argument("--access-key", default="")
        command.add_argument("--secret-key", default="")
    args = parser.parse_args()
    timer = threading.Timer(HARD_LIMIT_S, lambda: os._exit(3))
    timer.daemon = True
    timer.start()
    if args.command == "produce":
        produce(args)
    else:
        consume(args)
    sys.stdout.flush()
    os._exit(0)  # the C++ client's threads sometimes keep a normal exit waiting


if __name__ == "__main__":
    main()
