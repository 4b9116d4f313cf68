"""queryMsgByKey, queryMsgById, queryMsgByUniqueKey, queryMsgByOffset, decodeMessageId and
sendMessage through the real console script."""

from __future__ import annotations

import base64
import json
import re
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lz4.frame
import pytest
import zstandard

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.broker.broker_config import BrokerConfig
from rocketstore.broker.topic_config import TopicConfig, TopicConfigManager
from rocketstore.cli.context import CliError
from rocketstore.cli.send import producer_queue_choice
from rocketstore.format.javahash import java_hashmap_order
from rocketstore.format.message_id import offset_msg_id
from rocketstore.uniq_keys import local_ip
from tests.cli.cli_helpers import (
    BASE_MS,
    BORN_MS,
    CONFIG,
    TAGS,
    Run,
    body_of,
    message_of,
    topic_of,
    uniq_of,
)

Cli = Callable[..., Run]


# The length of this host's UNIQ_KEYs (IPv4 or IPv6 address, whichever Java would pick).
KEY_LENGTH = 56 if ":" in local_ip() else 32


def expected_fields(i: int, offset: int) -> dict[str, Any]:
    """What the JSON object of message ``i`` must say, field by field."""
    return {
        "msgId": offset_msg_id("127.0.0.1:10911", offset),
        "topic": topic_of(i),
        "tags": TAGS[i % 3],
        "keys": f"order-{i} cust-{i % 7}",
        "uniqKey": uniq_of(i),
        "queueId": i % 4,
        "commitLogOffset": offset,
        "reconsumeTimes": 0,
        "bornTimestamp": BORN_MS + i,
        "storeTimestamp": BASE_MS + i * 1000,
        "bornHost": "10.1.2.3:40000",
        "storeHost": "127.0.0.1:10911",
        "sysFlag": 0,
        "flag": 0,
        "preparedTransactionOffset": 0,
        "properties": {
            "TAGS": TAGS[i % 3],
            "KEYS": f"order-{i} cust-{i % 7}",
            "UNIQ_KEY": uniq_of(i),
        },
        "body": base64.b64encode(body_of(i)).decode(),
    }


def offset_of(store: Path, i: int) -> tuple[int, int]:
    """(CommitLog offset, queue offset) of message ``i``, via the library."""
    with MessageStore.open(store, read_only=True) as s:
        (found,) = s.query_by_unique_key(topic_of(i), uniq_of(i))
        return found.commit_log_offset, found.queue_offset


def test_query_by_key_table_and_json(store: Path, cli: Cli) -> None:
    table = cli("--store", store, "queryMsgByKey", "-t", "OrderEvents", "-k", "order-5")
    assert table.code == 0, table.err
    lines = table.out.splitlines()
    assert lines[0].split() == ["#Message", "ID", "#QID", "#Offset"]
    offset, queue_offset = offset_of(store, 5)
    # mqadmin's #Message ID is the client's msgId (UNIQ_KEY), which queryMsgByUniqueKey takes.
    assert lines[1].split() == [uniq_of(5), "1", str(queue_offset)]

    as_json = cli("--store", store, "--json", "queryMsgByKey", "-t", "OrderEvents", "-k", "order-5")
    (obj,) = as_json.json_lines()
    for name, value in expected_fields(5, offset).items():
        assert obj[name] == value, name
    assert obj["queueOffset"] == queue_offset


def test_query_by_key_time_window_and_max(store: Path, cli: Cli) -> None:
    # cust-3 is on messages 3, 10, 17, ...; OrderEvents only (i % 3 != 0).
    everything = cli(
        "--store", store, "--json", "queryMsgByKey", "-t", "OrderEvents", "-k", "cust-3"
    )
    all_ids = [o["uniqKey"] for o in everything.json_lines()]
    assert len(all_ids) == 64  # mqadmin's default maxNum
    window = cli(
        "--store", store, "--json", "queryMsgByKey", "-t", "OrderEvents", "-k", "cust-3",
        "-b", str(BASE_MS + 10_000), "-e", "2023-11-14#22:13:50:000", "-m", "10",
    )  # fmt: skip
    got = sorted(int(o["uniqKey"][8:], 16) for o in window.json_lines())
    # stored at BASE + i s: i in [10, 30], i % 7 == 3 and i % 3 != 0
    assert got == [i for i in range(10, 31) if i % 7 == 3 and i % 3 != 0]
    few = cli(
        "--store", store, "--json", "queryMsgByKey", "-t", "OrderEvents", "-k", "cust-3", "-m", "2"
    )
    assert len(few.json_lines()) == 2


def test_query_by_key_without_a_match_fails_as_mqadmin(store: Path, cli: Cli) -> None:
    """mqadmin's client fails a query that finds nothing ("... but no message.") and
    prints no table; here an error with exit status 1, in either output mode."""
    for mode in ([], ["--json"]):
        run = cli("--store", store, *mode, "queryMsgByKey", "-t", "OrderEvents", "-k", "nope")
        assert (run.code, run.out) == (1, "")
        assert run.err == (
            "rocketstore: error: query message by key finished, but no message. (no message "
            f"of OrderEvents with key nope stored in [0, {2**63 - 1}])\n"
        )
    # A key of another topic's messages is not a match either.
    other = cli("--store", store, "queryMsgByKey", "-t", "Payments", "-k", "order-5")
    assert other.code == 1 and "but no message" in other.err


def test_query_by_id_block_shows_every_field(store: Path, cli: Cli, tmp_path: Path) -> None:
    offset, queue_offset = offset_of(store, 7)
    msg_id = offset_msg_id("127.0.0.1:10911", offset)
    bodies = tmp_path / "bodies"
    run = cli("--store", store, "queryMsgById", "-i", msg_id, "--body-dir", bodies)
    assert run.code == 0, run.err
    # mqadmin's layout: the fields, the body's file (named by the client's msgId, the
    # UNIQ_KEY), two line breaks, the consumers (no line break after them).
    lines = run.out.splitlines()
    assert lines[-4:] == [
        f"{'Message Body Path:':<20} {bodies / uniq_of(7)}",
        "",
        "",
        "WARN: No Consumer",
    ]
    assert (bodies / uniq_of(7)).read_bytes() == body_of(7)
    printed = cli(
        "--store", store, "queryMsgById", "-i", msg_id, "-f", "UTF-8", "--body-dir", bodies
    )
    block = dict(
        (line[:20].strip(), line[21:]) for line in printed.out.splitlines() if line[:1].isupper()
    )
    assert block == {
        "OffsetID:": msg_id,
        "Topic:": "OrderEvents",
        "Tags:": "[paid]",
        "Keys:": "[order-7 cust-0]",
        "Queue ID:": "3",
        "Queue Offset:": str(queue_offset),
        "CommitLog Offset:": str(offset),
        "Reconsume Times:": "0",
        "Born Timestamp:": "2023-11-14 22:13:19,007",
        "Store Timestamp:": "2023-11-14 22:13:27,000",
        "Born Host:": "10.1.2.3:40000",
        "Store Host:": "127.0.0.1:10911",
        "System Flag:": "0",
        # The HashMap RocketMQ decodes them into, in its order (buckets 7, 12, 14).
        "Properties:": f"{{KEYS=order-7 cust-0, UNIQ_KEY={uniq_of(7)}, TAGS=paid}}",
        "Message Body Path:": str(bodies / uniq_of(7)),
        "Message Body:": body_of(7).decode(),
        "WARN: No Consumer": "",
    }


def test_query_by_id_list_json_and_body_dir(store: Path, cli: Cli, tmp_path: Path) -> None:
    ids = [offset_msg_id("127.0.0.1:10911", offset_of(store, i)[0]) for i in (1, 2, 3)]
    bodies = tmp_path / "bodies"
    run = cli("--store", store, "--json", "queryMsgById", "-i", ",".join(ids), "--body-dir", bodies)
    assert run.code == 0, run.err
    objs = run.json_lines()
    assert [o["msgId"] for o in objs] == ids
    for i, obj in zip((1, 2, 3), objs, strict=True):
        assert obj["uniqKey"] == uniq_of(i)
        assert Path(obj["bodyPath"]).read_bytes() == body_of(i)
    text = cli("--store", store, "queryMsgById", "-i", ids[0], "--body-dir", bodies)
    assert f"Message Body Path:   {bodies / uniq_of(1)}" in text.out  # mqadmin's name


def test_query_by_id_not_found_and_malformed(store: Path, cli: Cli) -> None:
    offset, _ = offset_of(store, 1)
    good = offset_msg_id("127.0.0.1:10911", offset)
    missing = offset_msg_id("127.0.0.1:10911", offset + 1)
    run = cli("--store", store, "queryMsgById", "-i", f"{good},{missing}")
    assert run.code == 1
    assert "OffsetID:" in run.out  # the one found is still printed
    assert run.err.startswith(f"rocketstore: error: Message not found: {missing}")
    assert len(run.err.strip().splitlines()) == 1
    bad = cli("--store", store, "queryMsgById", "-i", "XYZ")
    assert bad.code == 1
    assert bad.err.startswith("rocketstore: error: malformed offsetMsgId")
    assert "Traceback" not in bad.err
    # An offsetMsgId of another broker (its address and an offset that happens to start a
    # record here) names that broker's record, not this store's.
    elsewhere = offset_msg_id("10.9.9.9:10911", offset)
    other = cli("--store", store, "queryMsgById", "-i", elsewhere.lower())
    assert (other.code, other.out) == (1, "\nMessage not found!\n")
    assert other.err.splitlines() == [
        f"rocketstore: note: {elsewhere.lower()}: the record at CommitLog offset {offset} was "
        f"stored by 127.0.0.1:10911 (offsetMsgId {good}), not by the broker the id names",
        f"rocketstore: error: Message not found: {elsewhere.lower()} (a client msgId/UNIQ_KEY "
        "needs -t TOPIC or queryMsgByUniqueKey)",
    ]
    assert cli("--store", store, "queryMsgById", "-i", good.lower()).code == 0


def test_query_by_id_falls_back_to_unique_key_with_topic(store: Path, cli: Cli) -> None:
    run = cli("--store", store, "--json", "queryMsgById", "-i", uniq_of(8), "-t", "OrderEvents")
    assert run.code == 0, run.err
    assert run.json_lines()[0]["uniqKey"] == uniq_of(8)


def test_query_by_unique_key(store: Path, cli: Cli) -> None:
    run = cli("--store", store, "--json", "queryMsgByUniqueKey", "-t", "Payments", "-i", uniq_of(9))
    assert run.code == 0, run.err
    (obj,) = run.json_lines()
    assert obj["topic"] == "Payments"
    assert obj["storeTimestamp"] == BASE_MS + 9000
    text = cli("--store", store, "queryMsgByUniqueKey", "-t", "Payments", "-i", uniq_of(9), "-a")
    assert "Topic:               Payments" in text.out
    wrong_topic = cli(
        "--store", store, "queryMsgByUniqueKey", "-t", "OrderEvents", "-i", uniq_of(9)
    )
    assert wrong_topic.code == 1
    assert "Message not found" in wrong_topic.err


def test_query_by_offset(store: Path, cli: Cli) -> None:
    run = cli(
        "--store", store, "--json", "queryMsgByOffset", "-t", "Payments", "-i", "0", "-o", "2"
    )
    assert run.code == 0, run.err
    (obj,) = run.json_lines()
    # Payments queue 0 holds i % 3 == 0 and i % 4 == 0: 0, 12, 24, ...
    assert (obj["queueId"], obj["queueOffset"], obj["uniqKey"]) == (0, 2, uniq_of(24))
    out_of_range = cli(
        "--store", store, "queryMsgByOffset", "-t", "Payments", "-i", "0", "-o", "999"
    )
    assert out_of_range.code == 1
    assert out_of_range.err == (
        "rocketstore: error: queue offset 999 is out of range for Payments-0 "
        "(valid offsets are 0..74)\n"
    )
    no_queue = cli("--store", store, "queryMsgByOffset", "-t", "Payments", "-i", "7", "-o", "0")
    assert (
        no_queue.err == "rocketstore: error: topic 'Payments' has no queue 7 (queues: 0, 1, 2, 3)\n"
    )


def test_decode_message_id_both_ways(cli: Cli, tmp_path: Path) -> None:
    # No store needed. 0A010203 = 10.1.2.3, pid 0x1F9A, then the class-loader hash,
    # then ms since the month start (0x05265C00 = 86,400,000: one day) and the counter.
    uniq = "0A0102031F9A00000000" + "05265C00" + "0001"
    run = cli("--store", tmp_path / "none", "--json", "decodeMessageId", "-i", uniq)
    assert run.code == 0, run.err
    (obj,) = run.json_lines()
    assert obj["uniqKey"]["ip"] == "10.1.2.3"
    assert obj["uniqKey"]["pid"] == 0x1F9A
    assert obj["uniqKey"]["timestamp"] % 86_400_000 == 0
    assert obj["offsetMsgId"] == {
        "storeHost": "10.1.2.3:530186240",
        "commitLogOffset": 0x05265C000001,
    }
    text = cli("decodeMessageId", "-i", uniq)
    # mqadmin's ip= and date= (yyyy-MM-dd#HH:mm:ss:SSS) first, then the rest.
    lines = text.out.splitlines()
    assert lines[0] == "ip=10.1.2.3"
    assert re.fullmatch(r"date=\d{4}-\d\d-\d\d#\d\d:\d\d:\d\d:000", lines[1])
    assert lines[2] == "pid=8090"
    assert f"commitLogOffset={0x05265C000001}" in text.out
    bad = cli("decodeMessageId", "-i", "1234")
    assert bad.code == 1
    assert bad.err.startswith("rocketstore: error: malformed message id")
    # An odd number of hex digits is a wrong length, not "not hexadecimal".
    odd = cli("decodeMessageId", "-i", uniq[:-1])
    assert odd.code == 1
    assert "32 (IPv4) or 56 (IPv6) hex digits, this has 31" in odd.err
    assert "not hexadecimal" not in odd.err


def test_send_message_then_find_it(store: Path, cli: Cli) -> None:
    run = cli(
        "--store", store, "--json", "sendMessage", "-t", "NewTopic", "-p", "hello",
        "-k", "k1 k2", "-c", "tagA", "-i", "2",
    )  # fmt: skip
    assert run.code == 0, run.err
    (sent,) = run.json_lines()
    assert (sent["sendStatus"], sent["queueId"], sent["queueOffset"]) == ("SEND_OK", 2, 0)
    # A client msgId: this host's address as a Java client picks it (IPv4: 32 digits).
    assert len(sent["msgId"]) == KEY_LENGTH
    found = cli(
        "--store", store, "--json", "queryMsgByUniqueKey", "-t", "NewTopic", "-i", sent["msgId"]
    )
    (obj,) = found.json_lines()
    assert base64.b64decode(obj["body"]) == b"hello"
    assert (obj["tags"], obj["keys"], obj["msgId"]) == ("tagA", "k1 k2", sent["offsetMsgId"])
    # As the broker stores the client's properties: CLUSTER added, WAIT left out, in the
    # iteration order of the HashMap they were in (buckets of 16: KEYS 7, UNIQ_KEY 12, then
    # CLUSTER, put later into bucket 12 too, TAGS 14).
    assert list(obj["properties"].items()) == [
        ("KEYS", "k1 k2"), ("UNIQ_KEY", sent["msgId"]), ("CLUSTER", "DefaultCluster"),
        ("TAGS", "tagA"),
    ]  # fmt: skip
    by_key = cli("--store", store, "--json", "queryMsgByKey", "-t", "NewTopic", "-k", "k2")
    assert [o["uniqKey"] for o in by_key.json_lines()] == [sent["msgId"]]
    table = cli("--store", store, "sendMessage", "-t", "NewTopic", "-p", "again")
    header, row = table.out.splitlines()
    assert header == f"{'#Broker Name':<32}  {'#QID':<4}  {'#Send Result':<20}    #MsgId"
    # Without -i the producer's pick: one of the new topic's 4 queues.
    broker, queue, status, msg_id = row.split()
    assert (broker, status, len(msg_id)) == ("localStore", "SEND_OK", KEY_LENGTH)
    assert row.startswith(f"{'localStore':<32}  {queue:<4}  {'SEND_OK':<20}    ")
    assert queue in {"0", "1", "2", "3"}


def test_send_message_without_a_queue_picks_a_write_queue_at_random(tmp_path: Path) -> None:
    """mqadmin without -i calls producer.send(msg): the route's write queues, the first
    pick random. A topic with 2 write queues of 4 gets only queues 0 and 1, both seen."""
    root = tmp_path / "store"
    with MessageStore.open(root, CONFIG) as store:
        TopicConfigManager(root).update(TopicConfig("Two", read_queue_nums=4, write_queue_nums=2))
        picks = {producer_queue_choice(store, "Two", BrokerConfig()) for _ in range(64)}
        assert picks == {0, 1}
        fresh = {producer_queue_choice(store, "Fresh", BrokerConfig()) for _ in range(200)}
        assert fresh == {0, 1, 2, 3}
        TopicConfigManager(root).update(TopicConfig("None", read_queue_nums=4, write_queue_nums=0))
        with pytest.raises(CliError, match="topic None has no write queues"):
            producer_queue_choice(store, "None", BrokerConfig())


def test_send_message_as_mqadmin_sends_it(store: Path, cli: Cli) -> None:
    """mqadmin trims every value; its producer zlib-compresses a body of 4 KiB or more
    (level 5, sysFlag COMPRESSED | ZLIB), which readers show inflated; the broker's
    cluster name comes from the settings file."""
    run = cli(
        "--store", store, "--json", "sendMessage", "-t", " Trimmed ", "-p", "  body \t",
        "-k", " k1 ", "-c", " tag ",
    )  # fmt: skip
    assert run.code == 0, run.err
    (obj,) = cli("--store", store, "--json", "printMsg", "-t", "Trimmed").json_lines()
    assert base64.b64decode(obj["body"]) == b"body"
    assert (obj["keys"], obj["tags"], obj["sysFlag"]) == ("k1", "tag", 0)
    # Born beside the broker: its host (127.0.0.1 here), IPv4 whatever the UNIQ_KEY holds.
    assert obj["bornHost"] == "127.0.0.1:0"
    big = "x" * 4096
    conf = store.parent / "broker.conf"
    conf.write_text("brokerClusterName=Prod\n")
    assert cli("-c", conf, "--store", store, "sendMessage", "-t", "Big", "-p", big).code == 0
    (stored,) = cli("--store", store, "--json", "printMsg", "-t", "Big").json_lines()
    assert stored["sysFlag"] == 0x301
    assert base64.b64decode(stored["body"]) == zlib.compress(big.encode(), 5)
    assert stored["properties"]["CLUSTER"] == "Prod"
    shown = cli("--store", store, "printMsg", "-t", "Big").out
    assert shown.splitlines()[1].endswith(f"BODY: {big}")
    just_under = cli("--store", store, "--json", "sendMessage", "-t", "Big", "-p", big[1:])
    assert just_under.code == 0
    (sent,) = just_under.json_lines()
    rows = cli("--store", store, "--json", "printMsg", "-t", "Big").json_lines()
    (last,) = [row for row in rows if row["msgId"] == sent["offsetMsgId"]]
    assert (last["sysFlag"], base64.b64decode(last["body"])) == (0, big[1:].encode())


def test_send_message_with_trace_writes_its_pub_entry(store: Path, cli: Cli) -> None:
    """-m true: the send's trace, a Pub entry in RMQ_SYS_TRACE_TOPIC keyed by the msgId
    and the keys, which queryMsgTraceById shows."""
    run = cli(
        "--store", store, "--json", "sendMessage", "-t", "Traced", "-p", "hi", "-k", "a b",
        "-m", "true",
    )  # fmt: skip
    assert run.code == 0, run.err
    (sent,) = run.json_lines()
    (trace,) = cli("--store", store, "--json", "printMsg", "-t", "RMQ_SYS_TRACE_TOPIC").json_lines()
    fields = base64.b64decode(trace["body"]).decode().rstrip("\x02").split("\x01")
    assert fields[0] == "Pub" and fields[2] == "DefaultRegion"
    assert fields[4:8] == ["Traced", sent["msgId"], "null", "a b"]
    assert fields[8:10] == ["127.0.0.1:10911", "2"]
    assert (fields[11], fields[12], fields[13]) == ("0", sent["offsetMsgId"], "true")
    assert sorted(trace["keys"].split(" ")) == sorted([sent["msgId"], "a", "b"])
    assert "WAIT" not in trace["properties"] and trace["uniqKey"] != sent["msgId"]
    shown = cli("--store", store, "--json", "queryMsgTraceById", "-i", sent["msgId"]).json_lines()
    assert [(o["type"], o["status"]) for o in shown] == [("Pub", "success")]
    off = cli("--store", store, "sendMessage", "-t", "Traced", "-p", "x", "-m", "false")
    assert off.code == 0
    assert (
        len(cli("--store", store, "--json", "printMsg", "-t", "RMQ_SYS_TRACE_TOPIC").json_lines())
        == 1
    )


def test_send_message_creates_a_store_but_refuses_other_directories(
    cli: Cli, tmp_path: Path
) -> None:
    fresh = tmp_path / "fresh"
    assert cli("--store", fresh, "sendMessage", "-t", "T", "-p", "x").code == 0
    assert cli("--store", fresh, "topicList").out == "T\n"
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("x")
    refused = cli("--store", other, "sendMessage", "-t", "T", "-p", "x")
    assert refused.code == 1
    assert "is not a store directory" in refused.err
    illegal = cli("--store", fresh, "sendMessage", "-t", "bad topic!", "-p", "x")
    assert illegal.code == 1
    assert illegal.err.startswith("rocketstore: error: illegal topic")


def test_a_store_of_another_index_geometry_works_as_it_is(tmp_path: Path, cli: Cli) -> None:
    """A broker configured with maxHashSlotNum 16 and maxIndexNum 32 (two entries a slot,
    a size no 1:4 geometry fits): every command reads its index files as they are."""
    root = tmp_path / "odd"
    config = CONFIG.replace(max_hash_slot_num=16, max_index_num=32)
    with MessageStore.open(root, config) as writer:
        for i in range(200):
            assert writer.put(message_of(i), store_timestamp=BASE_MS + i * 1000).ok
    table = cli("--store", root, "queryMsgByKey", "-t", "OrderEvents", "-k", "order-100")
    assert table.code == 0, table.err
    _offset, queue_offset = offset_of(root, 100)
    assert table.out.splitlines()[1].split() == [
        uniq_of(100),
        "0",
        str(queue_offset),
    ]
    stats = cli("--store", root, "--json", "stats")
    assert stats.code == 0, stats.err
    (summary,) = stats.json_lines()
    assert (summary["index"]["hashSlots"], summary["index"]["entriesPerFile"]) == (16, 32)
    check = cli("--store", root, "check")
    assert check.code == 0, check.out + check.err
    assert "OK" in check.out


def test_message_tracks_come_from_the_committed_offsets(
    store: Path, cli: Cli, tmp_path: Path
) -> None:
    """mqadmin lists, after the block, each group the broker says consumes the topic (from
    config/consumerOffset.json), back to back; none is online offline, so each is the
    broker's CONSUMER_NOT_ONLINE answer. --json says whether each consumed the message."""
    offset, queue_offset = offset_of(store, 7)  # OrderEvents queue 3
    (store / "config").mkdir(exist_ok=True)
    table = {"OrderEvents@ahead": {3: queue_offset + 1}, "OrderEvents@behind": {3: queue_offset}}
    text = json.dumps({"offsetTable": table}).replace('"3"', "3")  # fastjson's int keys
    (store / "config" / "consumerOffset.json").write_text(text)
    msg_id = offset_msg_id("127.0.0.1:10911", offset)
    other = offset_msg_id("127.0.0.1:10911", offset_of(store, 8)[0])  # OrderEvents too
    run = cli("--store", store, "queryMsgById", "-i", f"{msg_id},{other}", "--body-dir", tmp_path)
    tracks = "".join(
        f"MessageTrack [consumerGroup={group}, trackType=NOT_ONLINE, "
        f"exceptionDesc=CODE:206 DESC:the consumer group[{group}] not online]"
        for group in java_hashmap_order(["ahead", "behind"])
    )
    # The second block starts right after the first one's tracks, as mqadmin prints it.
    assert run.out.splitlines()[-1] == tracks
    assert f"\n{tracks}OffsetID:            {other}\n" in run.out
    (obj,) = cli(
        "--store", store, "--json", "queryMsgById", "-i", msg_id, "--body-dir", tmp_path
    ).json_lines()
    assert sorted(obj["consumerTracks"], key=lambda t: t["consumerGroup"]) == [
        {"consumerGroup": "ahead", "committedOffset": queue_offset + 1, "consumed": True},
        {"consumerGroup": "behind", "committedOffset": queue_offset, "consumed": False},
    ]
    by_uniq = cli(
        "--store", store, "queryMsgByUniqueKey", "-t", "OrderEvents", "-i", uniq_of(7),
        "--body-dir", tmp_path,
    )  # fmt: skip
    assert by_uniq.out.startswith("Topic:")  # mqadmin's block there has no OffsetID line
    assert f"Message Body Path:   {tmp_path / uniq_of(7)}" in by_uniq.out
    pulled = cli(
        "--store", store, "queryMsgByOffset", "-t", "OrderEvents", "-i", "3",
        "-o", str(queue_offset), "--body-dir", tmp_path,
    )  # fmt: skip
    # A pulled message: the client adds the queue's bounds to its properties.
    assert "MIN_OFFSET=0" in pulled.out and "MAX_OFFSET=" in pulled.out


def test_a_missing_id_prints_mqadmins_words(store: Path, cli: Cli) -> None:
    run = cli("--store", store, "queryMsgById", "-i", offset_msg_id("127.0.0.1:10911", 1))
    assert run.code == 1
    assert run.out.strip() == "Message not found!"
    assert "Message not found: 7F00000100002A9F0000000000000001" in run.err


def test_mqadmins_namesrv_and_cluster_flags_are_taken_and_ignored(store: Path, cli: Cli) -> None:
    plain = cli("--store", store, "queryMsgByKey", "-t", "OrderEvents", "-k", "order-5")
    with_flags = cli(
        "--store", store, "queryMsgByKey", "-t", "OrderEvents", "-k", "order-5",
        "-n", "127.0.0.1:9876", "-c", "DefaultCluster",
    )  # fmt: skip
    assert with_flags.code == 0 and with_flags.out == plain.out
    status = cli("--store", store, "topicStatus", "-t", "OrderEvents", "-n", "ns:9876", "-c", "C")
    assert status.code == 0, status.err
    # printMsg's own -c (the charset) keeps its meaning.
    bad = cli("--store", store, "printMsg", "-t", "OrderEvents", "-c", "DefaultCluster")
    assert bad.code == 2 and "charset" in bad.err.lower()


def test_bodies_compressed_with_lz4_or_zstd_are_shown_inflated(tmp_path: Path, cli: Cli) -> None:
    """A 4.9.4+ producer may compress with LZ4 or ZSTD (sysFlag bits 8-10): the message
    lines and the body file hold the body it was given; --json keeps the stored bytes."""
    plain = b'{"order": 1, "note": "compressed"}' * 200
    packed = {
        0x101: bytes(lz4.frame.compress(plain)),
        0x201: zstandard.ZstdCompressor(write_content_size=False).compress(plain),
    }
    root = tmp_path / "store"
    with MessageStore.open(root) as s:
        for sys_flag, body in packed.items():
            assert s.put(Message("Z", body, sys_flag=sys_flag)).ok
        s.wait_dispatched()
    lines = cli("--store", root, "printMsg", "-t", "Z").out.splitlines()
    shown = [line for line in lines if line.startswith("MSGID: ")]
    assert len(shown) == 2
    assert all(line.endswith(f"BODY: {plain.decode()}") for line in shown)
    as_json = cli("--store", root, "--json", "printMsg", "-t", "Z").json_lines()
    assert [base64.b64decode(o["body"]) for o in as_json] == list(packed.values())
    body_dir = tmp_path / "bodies"
    msg_id = as_json[0]["msgId"]
    run = cli("--store", root, "queryMsgById", "-i", msg_id, "--body-dir", body_dir)
    assert run.code == 0, run.err
    assert (body_dir / msg_id).read_bytes() == plain


def test_ipv6_hosts_are_printed_as_java_prints_them(tmp_path: Path, cli: Cli) -> None:
    """InetSocketAddress.toString (JDK 14+): the IPv6 address in full, in brackets."""
    root = tmp_path / "store"
    config = StoreConfig(store_host="[fd00::a:1]:10911")
    with MessageStore.open(root, config) as s:
        assert s.put(Message("V6", b"x", born_host="[::1]:50003")).ok
        s.wait_dispatched()
    line = cli("--store", root, "printMsg", "-t", "V6").out.splitlines()[1]
    assert "bornHost=/[0:0:0:0:0:0:0:1]:50003, " in line
    assert "storeHost=/[fd00:0:0:0:0:0:a:1]:10911, " in line
    (obj,) = cli("--store", root, "--json", "printMsg", "-t", "V6").json_lines()
    block = cli("--store", root, "queryMsgById", "-i", obj["msgId"], "--body-dir", tmp_path)
    assert f"{'Born Host:':<20} [0:0:0:0:0:0:0:1]:50003" in block.out.splitlines()
    assert f"{'Store Host:':<20} [fd00:0:0:0:0:0:a:1]:10911" in block.out.splitlines()
