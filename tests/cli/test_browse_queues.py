"""printMsg, printMsgByQueue, topicList, topicStatus and queryCq through the console script."""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path

from cli_helpers import BASE_MS, COUNT, TAGS, Run, body_of, topic_of, uniq_of

from rocketstore.format.javahash import tags_code

Cli = Callable[..., Run]


def indexes(topic: str, queue_id: int | None = None) -> list[int]:
    """Message numbers of a topic (and queue), in queue order."""
    return [
        i for i in range(COUNT) if topic_of(i) == topic and (queue_id is None or i % 4 == queue_id)
    ]


def test_print_msg_every_message_of_a_topic(store: Path, cli: Cli) -> None:
    run = cli("--store", store, "printMsg", "-t", "Payments")
    assert run.code == 0, run.err
    lines = run.out.splitlines()
    headers = [line for line in lines if line.startswith("minOffset=")]
    assert headers == [
        f"minOffset=0, maxOffset={len(indexes('Payments', q))}, MessageQueue [topic=Payments, "
        f"brokerName=localStore, queueId={q}]"
        for q in range(4)
    ]
    messages = [line for line in lines if line.startswith("MSGID: ")]
    assert len(messages) == len(indexes("Payments"))
    first = messages[0]
    assert first.startswith(f"MSGID: {uniq_of(0)} MessageExt [brokerName=localStore, queueId=0, ")
    assert first.endswith(f"BODY: {body_of(0).decode()}")
    assert "toString()=Message{topic='Payments', flag=0, properties={TAGS=created" in first


def test_print_msg_json_tags_time_and_no_body(store: Path, cli: Cli) -> None:
    run = cli(
        "--store", store, "--json", "printMsg", "-t", "OrderEvents", "-s", "paid || shipped",
        "-b", "2023-11-14#22:13:30:000", "-e", str(BASE_MS + 60_000), "-d", "false",
    )  # fmt: skip
    assert run.code == 0, run.err
    got = sorted(int(o["uniqKey"][8:], 16) for o in run.json_lines())
    assert got == [i for i in range(10, 61) if i % 3 in (1, 2)]
    assert all(o["body"] is None for o in run.json_lines())
    created_only = cli("--store", store, "printMsg", "-t", "OrderEvents", "-s", "created")
    assert "MSGID" not in created_only.out  # OrderEvents never has tag 'created'
    text = cli(
        "--store", store, "printMsg", "-t", "Payments", "-e", str(BASE_MS - 1), "-d", "false"
    )
    assert "MSGID" not in text.out
    assert "minOffset=0, maxOffset=0," in text.out


def test_print_msg_by_queue_counts_tags(store: Path, cli: Cli) -> None:
    run = cli("--store", store, "printMsgByQueue", "-t", "OrderEvents", "-i", "1", "-f", "true")
    assert run.code == 0, run.err
    numbers = indexes("OrderEvents", 1)
    counts = {tag: sum(1 for i in numbers if TAGS[i % 3] == tag) for tag in ("paid", "shipped")}
    assert run.out.splitlines() == [
        f"minOffset=0, maxOffset={len(numbers)}, MessageQueue [topic=OrderEvents, "
        "brokerName=localStore, queueId=1]",
        *(
            f"Tag: {tag:<30} Count: {count}"
            for tag, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        ),
    ]
    as_json = cli(
        "--store", store, "--json", "printMsgByQueue", "-t", "OrderEvents", "-i", "1",
        "-p", "true", "-d", "true", "-f", "true", "-s", "paid",
    )  # fmt: skip
    objs = as_json.json_lines()
    messages = [o for o in objs if "msgId" in o]
    assert [o["uniqKey"] for o in messages] == [
        uniq_of(i) for i in numbers if TAGS[i % 3] == "paid"
    ]
    assert base64.b64decode(messages[0]["body"]) == body_of(int(messages[0]["uniqKey"][8:], 16))
    assert objs[-1] == {"tag": "paid", "count": counts["paid"]}


def test_topic_list_and_status(store: Path, cli: Cli) -> None:
    assert cli("--store", store, "topicList").out == "OrderEvents\nPayments\n"
    listed = cli("--store", store, "--json", "topicList").json_lines()
    assert listed == [
        {"topic": "OrderEvents", "queueIds": [0, 1, 2, 3]},
        {"topic": "Payments", "queueIds": [0, 1, 2, 3]},
    ]
    status = cli("--store", store, "--json", "topicStatus", "-t", "Payments").json_lines()
    for queue_id, row in enumerate(status):
        numbers = indexes("Payments", queue_id)
        assert row == {
            "brokerName": "localStore",
            "topic": "Payments",
            "queueId": queue_id,
            "minOffset": 0,
            "maxOffset": len(numbers),
            "lastUpdateTimestamp": BASE_MS + numbers[-1] * 1000,
        }
    table = cli("--store", store, "topicStatus", "-t", "Payments").out.splitlines()
    assert table[0].split() == [
        "#Broker",
        "Name",
        "#QID",
        "#Min",
        "Offset",
        "#Max",
        "Offset",
        "#Last",
        "Updated",
    ]
    last = BASE_MS + indexes("Payments", 0)[-1] * 1000
    assert table[1].split()[:3] == ["localStore", "0", "0"]
    assert table[1].endswith(
        f"2023-11-14 22:{(last // 60000) % 60:02d}:{(last // 1000) % 60:02d},000"
    )


def test_query_cq(store: Path, cli: Cli) -> None:
    run = cli(
        "--store", store, "--json", "queryCq", "-t", "OrderEvents", "-q", "2", "-i", "5", "-c", "3"
    )
    assert run.code == 0, run.err
    rows = run.json_lines()
    numbers = indexes("OrderEvents", 2)
    assert [r["queueOffset"] for r in rows] == [5, 6, 7]
    for row, i in zip(rows, numbers[5:8], strict=True):
        assert row["tagsCode"] == tags_code(TAGS[i % 3])
        assert row["tags"] == TAGS[i % 3]
        assert row["msgId"] is not None
    text = cli("--store", store, "queryCq", "-t", "OrderEvents", "-q", "2", "-c", "2")
    lines = text.out.splitlines()
    assert lines[:2] == ["Queue data: ", f"max: {len(numbers)}, min: 0"]
    assert lines[2].startswith("ConsumeQueueData{queueOffset=0, physicOffset=")
    assert len(lines) == 4
    bad = cli("--store", store, "queryCq", "-t", "OrderEvents", "-q", "2", "-i", "100000")
    assert bad.code == 1
    assert "out of range" in bad.err
