"""queryMsgTraceById on trace messages as RocketMQ clients' trace hooks write them."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from pathlib import Path

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.cli.trace_data import encode_pub, encode_sub_after
from tests.cli.cli_helpers import BASE_MS, Run

Cli = Callable[..., Run]
TRACED = "7F0000010C2418B4AAC2773F5E1B0000"
OTHER = "7F0000010C2418B4AAC2773F5E1B0001"


def _pub(msg_id: str, at: int, success: bool = True) -> str:
    return encode_pub(
        timestamp=at, region_id="DefaultRegion", group_name="ProducerG", topic="Orders",
        msg_id=msg_id, tags="paid", keys="order-1", store_host="10.0.0.1:10911",
        body_length=42, cost_time=3, msg_type=0, offset_msg_id="0A00000100002A9F0000000000000000",
        success=success,
    )  # fmt: skip


def _sub(msg_id: str, group: str | None, at: int | None, cost: int, success: bool = True) -> str:
    return encode_sub_after(
        request_id="req", msg_id=msg_id, cost_time=cost, success=success, keys="order-1",
        context_code=0, timestamp=at, group_name=group,
    )  # fmt: skip


def _trace_store(root: Path) -> None:
    """Trace messages keyed by the traced id (and its keys), as TraceDataEncoder's
    transKey set makes them; one body may carry entries of other messages too."""
    bodies = [
        ("10.1.1.1:50001", _pub(TRACED, BASE_MS) + _pub(OTHER, BASE_MS)),
        ("10.2.2.2:50002", _sub(TRACED, "ConsumerB", BASE_MS + 5_000, 12)),
        ("[::1]:50003", _sub(TRACED, "ConsumerA", BASE_MS + 6_000, 7, success=False)),
        ("10.2.2.2:50002", _sub(TRACED, "ConsumerB", BASE_MS + 9_000, 4)),
    ]
    with MessageStore.open(root, StoreConfig(mapped_file_size_commit_log=1 << 20)) as store:
        for born_host, body in bodies:
            message = Message(
                "RMQ_SYS_TRACE_TOPIC",
                body.encode(),
                properties={"KEYS": f"{TRACED} order-1"},
                born_host=born_host,
            )
            assert store.put(message).ok
        store.wait_dispatched()


def test_the_trace_of_a_message_as_mqadmin_prints_it(tmp_path: Path, cli: Cli) -> None:
    root = tmp_path / "store"
    _trace_store(root)
    run = cli("--store", root, "queryMsgTraceById", "-i", TRACED)
    assert run.code == 0, run.err
    row = "{:<10} {:<20} {:<20} {:<20} {:<10} {:<10}".format
    # Times in local time (the runner sets TZ=UTC): BASE_MS is 2023-11-14 22:13:20 UTC.
    assert run.out.splitlines() == [
        row("#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes", "#Status"),
        row("Pub", "ProducerG", "10.1.1.1", "2023-11-14 22:13:20", "3ms", "success"),
        "",
        # Groups in HashMap order (ConsumerA's bucket comes first), entries in store order.
        row("#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime", "#CostTimes", "#Status"),
        row("Sub", "ConsumerA", "0:0:0:0:0:0:0:1", "2023-11-14 22:13:26", "7ms", "failed"),
        "",
        row("#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime", "#CostTimes", "#Status"),
        row("Sub", "ConsumerB", "10.2.2.2", "2023-11-14 22:13:25", "12ms", "success"),
        row("Sub", "ConsumerB", "10.2.2.2", "2023-11-14 22:13:29", "4ms", "success"),
        "",
    ]
    as_json = cli("--store", root, "--json", "QueryMsgTraceById", "-i", TRACED).json_lines()
    assert [(o["type"], o["group"], o["costTime"]) for o in as_json] == [
        ("Pub", "ProducerG", 3), ("SubAfter", "ConsumerB", 12), ("SubAfter", "ConsumerA", 7),
        ("SubAfter", "ConsumerB", 4),
    ]  # fmt: skip
    assert cli("--store", root, "queryMsgTraceById", "-i", "nope").out == ""
    window = cli("--store", root, "--json", "queryMsgTraceById", "-i", TRACED, "-e", "1")
    assert window.out == ""


def test_a_store_without_the_trace_topic(store: Path, cli: Cli) -> None:
    run = cli("--store", store, "queryMsgTraceById", "-i", TRACED)
    assert run.code == 1
    assert "topic 'RMQ_SYS_TRACE_TOPIC' not found" in run.err


def test_compressed_trace_bodies_and_a_group_without_a_name(tmp_path: Path, cli: Cli) -> None:
    """The trace producer zlib-compresses bodies of 4 KiB and more (sysFlag bit 0); the
    admin's decode inflates them. SubAfter entries of the CLOUD channel carry no group:
    mqadmin's HashMap keeps the null key in bucket 0 with G7, before G1 (bucket 10)."""
    entries = [_sub(TRACED, "G7", BASE_MS, 1), _sub(TRACED, None, None, 2)]
    entries += [_sub(TRACED, "G1", BASE_MS, 3)] + [_pub(OTHER, BASE_MS)] * 40  # > 4 KiB
    body = "".join(entries).encode()
    assert len(body) > 4096
    root = tmp_path / "store"
    with MessageStore.open(root, StoreConfig(mapped_file_size_commit_log=1 << 20)) as store:
        message = Message(
            "RMQ_SYS_TRACE_TOPIC",
            zlib.compress(body),
            sys_flag=0x1,
            properties={"KEYS": TRACED},
            born_host="10.2.2.2:50002",
        )
        assert store.put(message).ok
        store.wait_dispatched()
    run = cli("--store", root, "queryMsgTraceById", "-i", TRACED)
    assert run.code == 0, run.err
    groups = [line.split()[1] for line in run.out.splitlines() if line.startswith("Sub ")]
    assert groups == ["G7", "null", "G1"]
    assert "1970-01-01 00:00:00" in run.out  # no timestamp either: 0, as Java prints it
    too_big = cli("--store", root, "queryMsgTraceById", "-i", TRACED, "-b", "9" * 20)
    assert too_big.code == 2 and "-b" in too_big.err
