"""The official RocketMQ 5.x Python client (rocketmq-python-client) against a gRPC
endpoint, one action per run, each result a JSON line on stdout.

Runs in its own venv (the conformance conftest's ``py5_client``): its import name
``rocketmq`` is also the 0.4.4 C++ client's, which the main venv has.

    client5.py send ENDPOINT TOPIC COUNT [--group G] [--delay-ms MS] [--recall N]
        (--recall N: the producer recalls its first N sends, each right after it)
    client5.py receive ENDPOINT GROUP TOPIC COUNT INVISIBLE_S ack|noack|renew [--wait-s S]
        [--batch N] [--pause-ms MS]
    client5.py push ENDPOINT GROUP TOPIC COUNT [--wait-s S]   (a PushConsumer)
    client5.py transact ENDPOINT TOPIC commit|rollback|none
    client5.py checker ENDPOINT TOPIC SECONDS   (a producer whose checker commits)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any


def emit(**fields: object) -> None:
    print(json.dumps(fields), flush=True)


def _config(endpoint: str) -> object:
    from rocketmq import ClientConfiguration, Credentials

    # An ACL account (the broker's plain_acl.yml), from the environment.
    credentials = Credentials(
        os.environ.get("RMQ5_ACCESS_KEY", ""), os.environ.get("RMQ5_SECRET_KEY", "")
    )
    return ClientConfiguration(endpoint, credentials, request_timeout=5)


def _tls() -> bool:
    """RMQ5_TLS=1: the client's tls_enable (it verifies the server's certificate against
    grpc's roots: GRPC_DEFAULT_SSL_ROOTS_FILE_PATH names the test's CA)."""
    return os.environ.get("RMQ5_TLS") == "1"


def send(args: argparse.Namespace) -> int:
    from rocketmq import Message, Producer

    producer = Producer(_config(args.endpoint), (args.topic,), tls_enable=_tls())
    producer.startup()
    try:
        for i in range(args.count):
            message = Message()
            message.topic = args.topic
            message.body = f"body-{i}".encode()
            message.tag = "TagA"
            message.keys = f"key-{i}"  # (a setter that adds one key a call)
            message.keys = f"other-{i}"
            message.add_property("color", "red")
            message.add_property("index", str(i))
            if args.group:
                message.message_group = args.group
            deliver_ms = 0
            if args.delay_ms:
                # 5.1.2 puts the value into the Timestamp's seconds field, whatever its
                # docstring says (ms): seconds are what reaches the wire right.
                deliver_s = -(-(int(time.time() * 1000) + args.delay_ms) // 1000)
                message.delivery_timestamp = deliver_s
                deliver_ms = deliver_s * 1000
            try:
                receipt = producer.send(message)
            except Exception as e:  # the client's ClientException and its kin
                emit(event="error", index=i, code=getattr(e, "code", None), text=str(e))
                return 0
            emit(
                event="sent",
                index=i,
                id=receipt.message_id,
                offset=getattr(receipt, "offset", None),
                deliver_ms=deliver_ms,
            )
            if i < args.recall:
                try:
                    recalled = producer.recall_message(args.topic, receipt.recall_handle)
                except Exception as e:  # the client's ClientException and its kin
                    emit(event="recall_error", index=i, code=getattr(e, "code", None), text=str(e))
                else:
                    emit(event="recalled", index=i, id=recalled)
    finally:
        producer.shutdown()
    return 0


def receive(args: argparse.Namespace) -> int:
    from rocketmq import FilterExpression, SimpleConsumer

    consumer = SimpleConsumer(
        _config(args.endpoint),
        args.group,
        {args.topic: FilterExpression("*")},
        await_duration=5,
        tls_enable=_tls(),
    )
    consumer.startup()
    got = 0
    deadline = time.monotonic() + args.wait_s
    try:
        while got < args.count and time.monotonic() < deadline:
            try:
                messages = consumer.receive(args.batch, args.invisible_s)
            except Exception as e:
                emit(event="error", code=getattr(e, "code", None), text=str(e))
                return 0
            for message in messages or []:
                got += 1
                emit(
                    event="received",
                    id=message.message_id,
                    body=message.body.decode(),
                    tag=message.tag,
                    keys=sorted(message.keys),
                    properties=dict(message.properties),
                    attempt=message.delivery_attempt,
                    group=message.message_group,
                    corrupted=message.corrupted,
                    received_ms=int(time.time() * 1000),
                )
                if args.pause_ms:
                    time.sleep(args.pause_ms / 1000)
                if args.mode == "ack":
                    consumer.ack(message)
                    emit(event="acked", id=message.message_id)
                elif args.mode == "renew":
                    consumer.change_invisible_duration(message, args.invisible_s)
                    emit(event="renewed", id=message.message_id)
    finally:
        consumer.shutdown()
    emit(event="done", received=got)
    return 0


def push(args: argparse.Namespace) -> int:
    import threading

    from rocketmq import ConsumeResult, FilterExpression, MessageListener, PushConsumer

    got: list[tuple[str, str]] = []
    lock = threading.Lock()
    enough = threading.Event()

    class Listener(MessageListener):  # type: ignore[misc]
        # Called on the consumer's pool threads: lines printed from there could interleave.
        def consume(self, message: Any) -> object:
            with lock:
                got.append((message.message_id, message.body.decode()))
                if len(got) >= args.count:
                    enough.set()
            return ConsumeResult.SUCCESS

    consumer = PushConsumer(
        _config(args.endpoint), args.group, Listener(), {args.topic: FilterExpression("*")}
    )
    consumer.startup()
    try:
        enough.wait(args.wait_s)
        time.sleep(1.0)  # the last acks (sent after consume returns)
    finally:
        consumer.shutdown()
    with lock:
        for message_id, body in got:
            emit(event="received", id=message_id, body=body)
        emit(event="done", received=len(got))
    return 0


def transact(args: argparse.Namespace) -> int:
    from rocketmq import Message, Producer, TransactionChecker, TransactionResolution

    class Checker(TransactionChecker):  # type: ignore[misc]
        def check(self, message: object) -> object:
            return TransactionResolution.ROLLBACK

    producer = Producer(_config(args.endpoint), (args.topic,), Checker(), tls_enable=_tls())
    producer.startup()
    try:
        transaction = producer.begin_transaction()
        message = Message()
        message.topic = args.topic
        message.body = f"tx-{args.resolution}".encode()
        message.tag = "Tx"
        receipt = producer.send(message, transaction)
        emit(event="sent", id=receipt.message_id)
        if args.resolution == "commit":
            transaction.commit()
        elif args.resolution == "rollback":
            transaction.rollback()
        # none: left open, for the broker's transaction check to settle
        emit(event="ended", id=receipt.message_id, resolution=args.resolution)
    except Exception as e:
        emit(event="error", code=getattr(e, "code", None), text=str(e))
    finally:
        producer.shutdown()
    return 0


def checker(args: argparse.Namespace) -> int:
    from rocketmq import Producer, TransactionChecker, TransactionResolution

    class Committer(TransactionChecker):  # type: ignore[misc]
        def check(self, message: Any) -> object:
            emit(event="checked", id=message.message_id)
            return TransactionResolution.COMMIT

    producer = Producer(_config(args.endpoint), (args.topic,), Committer(), tls_enable=_tls())
    producer.startup()
    emit(event="started")
    try:
        time.sleep(args.seconds)
    finally:
        producer.shutdown()
    return 0


def idle(args: argparse.Namespace) -> int:
    """A PushConsumer that stays connected for a while, its client id printed: the test
    asks the broker about it as mqadmin would."""
    from rocketmq import ConsumeResult, FilterExpression, MessageListener, PushConsumer

    class Listener(MessageListener):  # type: ignore[misc]
        def consume(self, message: Any) -> object:
            return ConsumeResult.SUCCESS

    consumer = PushConsumer(
        _config(args.endpoint), args.group, Listener(), {args.topic: FilterExpression("*")}
    )
    consumer.startup()
    try:
        emit(event="started", client_id=consumer.client_id)
        time.sleep(args.seconds)
    finally:
        consumer.shutdown()
    emit(event="done")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="action", required=True)
    s = sub.add_parser("send")
    s.add_argument("endpoint")
    s.add_argument("topic")
    s.add_argument("count", type=int)
    s.add_argument("--group", default="")
    s.add_argument("--delay-ms", type=int, default=0)
    s.add_argument("--recall", type=int, default=0)
    r = sub.add_parser("receive")
    r.add_argument("endpoint")
    r.add_argument("group")
    r.add_argument("topic")
    r.add_argument("count", type=int)
    r.add_argument("invisible_s", type=int)
    r.add_argument("mode", choices=("ack", "noack", "renew"))
    r.add_argument("--wait-s", type=float, default=30.0)
    r.add_argument("--batch", type=int, default=32)
    r.add_argument("--pause-ms", type=int, default=0)
    p = sub.add_parser("push")
    p.add_argument("endpoint")
    p.add_argument("group")
    p.add_argument("topic")
    p.add_argument("count", type=int)
    p.add_argument("--wait-s", type=float, default=30.0)
    t = sub.add_parser("transact")
    t.add_argument("endpoint")
    t.add_argument("topic")
    t.add_argument("resolution", choices=("commit", "rollback", "none"))
    c = sub.add_parser("checker")
    c.add_argument("endpoint")
    c.add_argument("topic")
    c.add_argument("seconds", type=float)
    i = sub.add_parser("idle")
    i.add_argument("endpoint")
    i.add_argument("group")
    i.add_argument("topic")
    i.add_argument("seconds", type=float)
    args = parser.parse_args()
    actions = {
        "idle": idle,
        "send": send,
        "receive": receive,
        "push": push,
        "transact": transact,
        "checker": checker,
    }
    return actions[args.action](args)


if __name__ == "__main__":
    sys.exit(main())
