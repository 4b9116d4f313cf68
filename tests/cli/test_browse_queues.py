"""printMsg, printMsgByQueue, topicList, topicStatus and queryCq through the console script."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path

from rocketstore import Message, MessageStore
from rocketstore.format.javahash import java_hash_set_order, message_queue_hash, tags_code
from tests.cli.cli_helpers import BASE_MS, CONFIG, COUNT, TAGS, Run, body_of, topic_of, uniq_of

Cli = Callable[..., Run]


def indexes(topic: str, queue_id: int | None = None) -> list[int]:
    """Message numbers of a topic (and queue), in queue order."""
    return [
        i for i in range(COUNT) if topic_of(i) == topic and (queue_id is None or i % 4 == queue_id)
    ]


def mqadmin_order(topic: str, broker: str = "localStore", count: int = 4) -> list[int]:
    """The order mqadmin walks a topic's queues in: its HashSet of MessageQueue's."""
    hashes = [message_queue_hash(topic, broker, q) for q in range(count)]
    return java_hash_set_order(hashes)


def test_print_msg_every_message_of_a_topic(store: Path, cli: Cli) -> None:
    run = cli("--store", store, "printMsg", "-t", "Payments")
    assert run.code == 0, run.err
    lines = run.out.splitlines()
    headers = [line for line in lines if line.startswith("minOffset=")]
    order = mqadmin_order("Payments")
    assert order != [0, 1, 2, 3]  # (so the test tells the two apart)
    assert headers == [
        f"minOffset=0, maxOffset={len(indexes('Payments', q))}, MessageQueue [topic=Payments, "
        f"brokerName=localStore, queueId={q}]"
        for q in order
    ]
    messages = [line for line in lines if line.startswith("MSGID: ")]
    assert len(messages) == len(indexes("Payments"))
    (first,) = [line for line in messages if line.startswith(f"MSGID: {uniq_of(0)} ")]
    assert first.startswith(f"MSGID: {uniq_of(0)} MessageExt [brokerName=localStore, queueId=0, ")
    assert first.endswith(f"BODY: {body_of(0).decode()}")
    # RocketMQ's Message.toString: properties as the HashMap the client decodes them into,
    # with the MIN_OFFSET and MAX_OFFSET its pull adds (buckets of a 16-slot table:
    # MIN_OFFSET 0, MAX_OFFSET 6, KEYS 7, UNIQ_KEY 12, TAGS 14), the body as
    # Arrays.toString.
    assert (
        "toString()=Message{topic='Payments', flag=0, properties={MIN_OFFSET=0, "
        f"MAX_OFFSET={len(indexes('Payments', 0))}, KEYS=order-0 cust-0, "
        f"UNIQ_KEY={uniq_of(0)}, TAGS=created}}, body=[123, 34, 111, 114, 100, 101, 114, 34, "
        "58, 32, 48, 125], transactionId='null'}] BODY: "
    ) in first
    # Each queue ends with mqadmin's separator line.
    assert lines.count("-" * 56) == 4 and lines[-1] == "-" * 56


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
    # No offsets line (mqadmin's printMsgByQueue prints none), only the counts; the tie
    # in HashMap order ("shipped" in bucket 3 of 16, "paid" in 8).
    assert counts == {"paid": 75, "shipped": 75}
    assert run.out.splitlines() == [
        f"Tag: {'shipped':<30} Count: 75",
        f"Tag: {'paid':<30} Count: 75",
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
        {"topic": "OrderEvents", "queueIds": [0, 1, 2, 3], "configured": False},
        {"topic": "Payments", "queueIds": [0, 1, 2, 3], "configured": False},
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
    text = cli("--store", store, "queryCq", "-t", "OrderEvents", "-q", "2", "-i", "5", "-c", "2")
    # mqadmin's layout: the bounds, then "idx: N" and the unit, each closed by a rule.
    rule = "=" * 38
    size = f"physicSize={rows[0]['physicSize']}, tagsCode={rows[0]['tagsCode']}"
    assert text.out.splitlines() == [
        "Queue data: ",
        f"max: {len(numbers)}, min: 0",
        rule,
        "idx: 5",
        f"ConsumeQueueData{{physicOffset={rows[0]['physicOffset']}, {size}, "
        "extendDataJson='null', bitMap='null', eval=false, msg='null'}",
        rule,
        "idx: 6",
        f"ConsumeQueueData{{physicOffset={rows[1]['physicOffset']}, "
        f"physicSize={rows[1]['physicSize']}, tagsCode={rows[1]['tagsCode']}, "
        "extendDataJson='null', bitMap='null', eval=false, msg='null'}",
        rule,
    ]
    # -g: the broker has no connection of the group offline, and says so first; -b is
    # mqadmin's broker address.
    grouped = cli(
        "--store", store, "queryCq", "-t", "OrderEvents", "-q", "2", "-i", "5", "-c", "2",
        "-g", "G1", "-b", "127.0.0.1:10911",
    )  # fmt: skip
    assert grouped.out.splitlines()[:3] == [
        "Filter data: ",
        "G1@OrderEvents is not online!",
        rule,
    ]
    assert grouped.out.splitlines()[3:] == text.out.splitlines()
    bad = cli("--store", store, "queryCq", "-t", "OrderEvents", "-q", "2", "-i", "100000")
    assert bad.code == 1
    assert "out of range" in bad.err


def test_consume_message_takes_the_oldest_of_each_queue_in_turn(store: Path, cli: Cli) -> None:
    """mqadmin's consumeMessage without a queue: -c messages, the oldest of the first
    queue in mqadmin's order first, a pull (at most 32) at a time, each announced by
    "Consume ok"."""
    order = mqadmin_order("Payments")
    first = indexes("Payments", order[0])
    run = cli("--store", store, "consumeMessage", "-t", "Payments", "-c", "40")
    assert run.code == 0, run.err
    lines = run.out.splitlines()
    assert lines[0] == f"The older 40 message of the {order[0]} queue will be provided"
    assert lines.count("Consume ok") == 2  # 32 + 8
    ids = [line.split()[1] for line in lines if line.startswith("MSGID: ")]
    assert ids == [uniq_of(i) for i in first[:40]]
    everything = cli("--store", store, "consumeMessage", "-t", "Payments", "-c", str(COUNT))
    finished = [line for line in everything.out.splitlines() if "print msg finished" in line]
    assert finished == [
        f"MessageQueue [topic=Payments, brokerName=localStore, queueId={q}] print msg finished. "
        f"status=NO_NEW_MSG, offset={len(indexes('Payments', q))}"
        for q in order
    ]
    assert everything.out.count("MSGID: ") == len(indexes("Payments"))


def test_consume_message_of_one_queue_from_an_offset(store: Path, cli: Cli) -> None:
    q1 = indexes("OrderEvents", 1)
    run = cli(
        "--store", store, "--json", "consumeMessage", "-t", "OrderEvents", "-b", "broker-a",
        "-i", "1", "-o", "5", "-c", "3",
    )  # fmt: skip
    assert run.code == 0, run.err
    assert [o["uniqKey"] for o in run.json_lines()] == [uniq_of(i) for i in q1[5:8]]
    text = cli(
        "--store", store, "consumeMessage", "-t", "OrderEvents", "-b", "b", "-i", "1",
        "-o", "5", "-c", "3",
    )  # fmt: skip
    assert text.out.splitlines()[0] == "The oldler 3 message will be provided"  # sic
    past = cli(
        "--store", store, "consumeMessage", "-t", "OrderEvents", "-b", "b", "-i", "1",
        "-o", str(len(q1) + 1),
    )  # fmt: skip
    assert past.out == (
        "MessageQueue [topic=OrderEvents, brokerName=localStore, queueId=1] no matched msg, "
        f"offset={len(q1) + 1}\n"
    )


def test_consume_message_refuses_what_mqadmin_refuses(store: Path, cli: Cli) -> None:
    cases = {
        ("-i", "1"): "Please set the brokerName before queueId!",
        ("-b", "b", "-o", "3"): "Please set queueId before offset!",
        ("-c", "0"): "Please input a positive messageNumber!",
        ("-s", "now", "-e", str(BASE_MS)): "Please make sure that the beginTimestamp is less",
        ("-e", "4102444800000"): "Please set the endTimestamp before now!",
    }
    for args, message in cases.items():
        run = cli("--store", store, "consumeMessage", "-t", "Payments", *args)
        assert run.code == 1, args
        assert run.err.startswith(f"rocketstore: error: {message}"), run.err
    unknown = cli("--store", store, "consumeMessage", "-t", "Nope")
    assert unknown.code == 1 and "topic 'Nope' not found" in unknown.err


def test_print_msg_with_a_sql92_selector(store: Path, cli: Cli) -> None:
    selector = "TAGS IN ('paid', 'shipped') AND KEYS ENDSWITH 'cust-3'"
    run = cli("--store", store, "--json", "printMsg", "-t", "OrderEvents", "--sql92", selector)
    assert run.code == 0, run.err
    got = sorted(int(o["uniqKey"][8:], 16) for o in run.json_lines())
    assert got == [i for i in indexes("OrderEvents") if i % 3 in (1, 2) and i % 7 == 3]
    assert got
    by_queue = cli(
        "--store", store, "printMsgByQueue", "-t", "OrderEvents", "-i", "1", "-f", "true",
        "--sql92", "TAGS = 'paid'",
    )  # fmt: skip
    assert by_queue.code == 0, by_queue.err
    paid = sum(1 for i in indexes("OrderEvents", 1) if i % 3 == 1)
    assert by_queue.out.splitlines() == [f"Tag: {'paid':<30} Count: {paid}"]


def test_print_msg_refuses_a_bad_selector_or_two_kinds_of_subscription(
    store: Path, cli: Cli
) -> None:
    bad = cli("--store", store, "printMsg", "-t", "OrderEvents", "--sql92", "TAGS >")
    assert bad.code == 2 and "--sql92" in bad.err and "expected a literal" in bad.err
    both = cli(
        "--store", store, "printMsg", "-t", "OrderEvents", "-s", "paid", "--sql92", "a IS NULL"
    )
    assert both.code == 2 and "give one" in both.err


def test_print_msg_reports_each_pull_as_mqadmin(store: Path, cli: Cli) -> None:
    """A pull of 32 that finds no message with the tag prints mqadmin's "no matched msg"
    line with the offset it moved to; a filtered pull scans to the end of the queue file
    (100 units here) at most, as the broker's does."""
    run = cli("--store", store, "printMsg", "-t", "OrderEvents", "-s", "created")
    assert run.code == 0, run.err
    lines = run.out.splitlines()
    size = len(indexes("OrderEvents", 1))
    mq = "MessageQueue [topic=OrderEvents, brokerName=localStore, queueId=1]"
    at = lines.index(f"minOffset=0, maxOffset={size}, {mq}")
    assert lines[at + 1 : at + 4] == [
        f"{mq} no matched msg. status=NO_MATCHED_MSG, offset=100",
        f"{mq} no matched msg. status=NO_MATCHED_MSG, offset={size}",
        "-" * 56,
    ]
    # printMsgByQueue ends the queue at the first such pull.
    by_queue = cli(
        "--store", store, "printMsgByQueue", "-t", "OrderEvents", "-i", "1", "-s", "created",
        "-p", "true", "-f", "true",
    )  # fmt: skip
    assert by_queue.code == 0 and by_queue.out == ""


def test_print_msg_end_time_is_exclusive_as_search_offset(store: Path, cli: Cli) -> None:
    """-b and -e become offsets through searchOffset: the first message stored at or
    after each. mqadmin's loop stops before the -e offset but prints the whole pull of
    32 that crossed it; --json holds to the range."""
    q0 = indexes("Payments", 0)
    begin, end = BASE_MS + q0[2] * 1000, BASE_MS + q0[5] * 1000
    run = cli("--store", store, "printMsg", "-t", "Payments", "-b", begin, "-e", end)
    assert run.code == 0, run.err
    mq = "MessageQueue [topic=Payments, brokerName=localStore, queueId=0]"
    lines = run.out.splitlines()
    at = lines.index(f"minOffset=2, maxOffset=5, {mq}")
    assert [line.split()[1] for line in lines[at + 1 : at + 33]] == [uniq_of(i) for i in q0[2:34]]
    assert lines[at + 33] == "-" * 56
    as_json = cli(
        "--store", store, "--json", "printMsg", "-t", "Payments", "-b", begin, "-e", end
    )  # fmt: skip
    assert as_json.code == 0, as_json.err
    rows = [json.loads(line) for line in as_json.out.splitlines()]
    assert [row["queueOffset"] for row in rows if row["queueId"] == 0] == [2, 3, 4]
    # A time between two messages: the next one starts (or ends) the range.
    between = cli("--store", store, "printMsg", "-t", "Payments", "-b", begin + 1, "-e", end - 1)
    assert f"minOffset=3, maxOffset=5, {mq}" in between.out.splitlines()


def test_print_msg_by_queue_ranks_ties_as_mqadmin_hash_map(tmp_path: Path, cli: Cli) -> None:
    """Equal counts keep the order of mqadmin's HashMap of tags: "BB" and "Aa" share a
    hash code, so the tag seen first comes first; blank tags are not counted."""
    root = tmp_path / "store"
    tags = ["BB", "Aa", "   ", "zz", "BB", "Aa", None, "zz", "zz"]
    with MessageStore.open(root, CONFIG) as store:
        for tag in tags:
            properties = {} if tag is None else {"TAGS": tag}
            assert store.put(Message("T", b"x", queue_id=0, properties=properties)).status.ok
        store.wait_dispatched()
    run = cli("--store", root, "printMsgByQueue", "-t", "T", "-i", "0", "-f", "true")
    assert run.code == 0, run.err
    assert run.out.splitlines() == [
        f"Tag: {'zz':<30} Count: 3",
        f"Tag: {'BB':<30} Count: 2",
        f"Tag: {'Aa':<30} Count: 2",
    ]


def test_the_topic_config_gives_the_queues_as_a_broker_routes_them(store: Path, cli: Cli) -> None:
    """With a config the queues are the broker's: topicStatus its write queues (sorted,
    as mqadmin sorts them), printMsg its read queues in mqadmin's set order; a queue
    without a consume queue is empty (0 and 0, no time)."""
    from rocketstore.broker.topic_config import TopicConfig, TopicConfigManager

    configs = TopicConfigManager(store)
    configs.update(TopicConfig("Payments", read_queue_nums=6, write_queue_nums=5))
    status = cli("--store", store, "topicStatus", "-t", "Payments")
    assert status.code == 0, status.err
    rows = status.out.splitlines()[1:]
    assert [int(row.split()[1]) for row in rows] == [0, 1, 2, 3, 4]
    assert rows[4] == f"{'localStore':<32}  {4:<4}  {0:<20}  {0:<20}    "
    printed = cli("--store", store, "printMsg", "-t", "Payments", "-d", "false")
    heads = [line for line in printed.out.splitlines() if line.startswith("minOffset=")]
    assert [int(head.rsplit("=", 1)[1].rstrip("]")) for head in heads] == mqadmin_order(
        "Payments", count=6
    )
    assert (
        "minOffset=0, maxOffset=0, MessageQueue [topic=Payments, brokerName=localStore, "
        "queueId=5]" in heads
    )
    configs.update(TopicConfig("Payments", read_queue_nums=4, write_queue_nums=4, perm=2))
    unreadable = cli("--store", store, "printMsg", "-t", "Payments")
    assert unreadable.code == 1
    assert "Can not find Message Queue for this topic, Payments Namesrv return empty" in (
        unreadable.err
    )
