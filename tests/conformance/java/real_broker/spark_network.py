"""The Spark source's network mode (option ``namesrv``, issue #35) against a REAL RocketMQ
4.9.8 name server and broker (``run_namesrv.sh`` / ``run_broker.sh``), checked with the real
4.9.8 client (``../run.sh``, JavaClientProbe) and mqadmin (``../mqadmin.sh``).

Run by ``spark_network.sh``, which starts and stops the Java processes; by hand:

    spark_network.py plain   # batch reads, key lookups, writes, a stream with option group
    spark_network.py acl     # the broker restarted with aclEnable=true (spark_network.sh)
    spark_network.py down    # brokerDownWaitMs: the broker SIGKILLed and restarted mid-read

Settings from the environment, as common.sh sets them: NS, BR (addresses), STORE_DIR (the
Java broker's store, read again in file mode), JC_OUT, MQA_OUT, HARNESS (this folder),
WORK_DIR. Prints one line per check and ``N passed, N failed``; exit 1 when one failed.
Not collected by pytest (needs the Java builds).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

NS = os.environ["NS"]
BR = os.environ["BR"]
HARNESS = Path(os.environ["HARNESS"])
JAVA = HARNESS.parent
WORK = Path(os.environ["WORK_DIR"])
TOPIC = "SparkT"  # 4 queues, made with mqadmin updateTopic, filled by the Java producer
WRITE_TOPIC = "SparkW"  # made by the first send (TBW102, autoCreateTopicEnable)
DENIED_TOPIC = "SparkDeny"  # DENY in plain_acl.yml
RESULTS: list[tuple[str, bool, str]] = []


def check(name: str) -> Callable[[Callable[[Any], None]], Callable[[Any], None]]:
    def wrap(fn: Callable[[Any], None]) -> Callable[[Any], None]:
        def run(spark: Any) -> None:
            started = time.monotonic()
            try:
                fn(spark)
                RESULTS.append((name, True, ""))
            except Exception as e:
                traceback.print_exc()
                RESULTS.append((name, False, f"{type(e).__name__}: {e}"[:400]))
            ok = "PASS" if RESULTS[-1][1] else "FAIL"
            print(f"{ok} {name} ({time.monotonic() - started:.1f} s) {RESULTS[-1][2]}", flush=True)

        return run

    return wrap


def probe(*args: str, env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """JavaClientProbe's JSON lines."""
    logs = WORK / "logs"
    extra = {"PROBE_LOG_ROOT": str(logs / "probe"), "PROBE_OFFSET_DIR": str(logs / "probe-off")}
    out = subprocess.run(
        [str(JAVA / "run.sh"), os.environ["JC_OUT"], *args],
        check=False, capture_output=True, text=True, timeout=300,
        env={**os.environ, **extra, **(env or {})},
    )  # fmt: skip
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def mqadmin(*args: str) -> str:
    out = subprocess.run(
        [str(JAVA / "mqadmin.sh"), os.environ["MQA_OUT"], *args],
        check=False, capture_output=True, text=True, timeout=300,
        env={**os.environ, "MQADMIN_LOG_DIR": str(WORK / "logs" / "mqadmin")},
    )  # fmt: skip
    return out.stdout + out.stderr


def read(spark: Any, **options: str) -> list[dict[str, Any]]:
    reader = spark.read.format("rocketstore").option("namesrv", NS)
    for name, value in options.items():
        reader = reader.option(name, value)
    rows = [r.asDict(recursive=True) for r in reader.load().collect()]
    return sorted(rows, key=lambda r: (r["topic"], r["partition"], r["offset"]))


def sent_by_java(path: Path) -> list[dict[str, Any]]:
    return [e for e in map(json.loads, path.read_text().splitlines()) if e["event"] == "sent"]


# --- plain broker ----------------------------------------------------------------------


@check("batch read = what the Java producer sent (ids, queues, offsets, keys, tags, bodies)")
def batch_read(spark: Any) -> None:
    sent = {e["msgId"]: e for e in sent_by_java(WORK / "spark-produce.jsonl")}
    rows = read(spark, topics=TOPIC)
    # (a send the client gave up on under load is not in the topic: compare with the sent)
    assert len(rows) == len(sent) >= 36, (len(rows), len(sent))
    for row in rows:
        e = sent[row["uniqKey"]]
        i = e["i"]
        assert (row["broker"], row["partition"], row["offset"]) == (
            e["brokerName"],
            e["queueId"],
            e["queueOffset"],
        ), (row, e)
        assert row["msgId"] == e["offsetMsgId"], (row["msgId"], e["offsetMsgId"])
        assert (row["key"], row["tags"], row["value"]) == (f"k{i}", f"tag{i % 3}", b"body-%d" % i)
        assert row["headers"] == {"custom": f"v{i}"}, row["headers"]
        assert row["storeHost"] == BR, row["storeHost"]


@check("network rows = file-mode rows of the Java broker's store directory")
def same_as_file_mode(spark: Any) -> None:
    network = read(spark, topics=TOPIC)
    df = spark.read.format("rocketstore").option("topics", TOPIC).load(os.environ["STORE_DIR"])
    files = sorted(
        ({**r.asDict(recursive=True), "broker": "broker-a"} for r in df.collect()),
        key=lambda r: (r["topic"], r["partition"], r["offset"]),
    )
    assert network == files


@check("keys and uniqKeys lookups (QUERY_MESSAGE against the Java broker's index)")
def key_lookups(spark: Any) -> None:
    sent = sent_by_java(WORK / "spark-produce.jsonl")
    keys = sorted(f"k{sent[n]['i']}" for n in (5, 17))
    rows = read(spark, topics=TOPIC, keys=json.dumps([*keys, "no-such-key"]))
    assert sorted(r["key"] for r in rows) == keys, rows
    want = [sent[3]["msgId"], sent[30]["msgId"]]
    rows = read(spark, topics=TOPIC, uniqKeys=json.dumps(want))
    assert sorted(r["uniqKey"] for r in rows) == sorted(want), rows
    assert {r["key"] for r in rows} == {f"k{sent[n]['i']}" for n in (3, 30)}


@check("write (SEND_BATCH_MESSAGE) to a new topic: the Java consumer gets every row")
def write_then_java_consumes(spark: Any) -> None:
    df = spark.range(300).selectExpr(
        "concat('w-', id) as key",
        "cast(concat('body ', id) as binary) as value",
        "concat('t', id % 3) as tags",
        "map('color', if(id % 2 = 0, 'red', 'blue')) as headers",
    )
    df.write.format("rocketstore").option("namesrv", NS).option("topic", WRITE_TOPIC).mode(
        "append"
    ).save()
    got = [e for e in probe("consume", NS, WRITE_TOPIC, "spark_w_check", "300", "90")
           if e["event"] == "recv"]  # fmt: skip
    by_key = {e["keys"]: e for e in got}
    assert len(got) == 300 and len(by_key) == 300, len(got)
    for i in (0, 7, 299):
        e = by_key[f"w-{i}"]
        assert e["body"] == f"body {i}" and e["tags"] == f"t{i % 3}", e
        assert e["props"]["color"] == ("red" if i % 2 == 0 else "blue"), e
        assert e["props"]["UNIQ_KEY"] == e["msgId"], e
    # Same keys, same queue: SelectMessageQueueByHash's choice (abs(hashCode) % 4).
    assert len({e["queueId"] for e in got}) == 4
    found = mqadmin("queryMsgByKey", "-n", NS, "-t", WRITE_TOPIC, "-k", "w-7")
    assert by_key["w-7"]["msgId"] in found, found
    assert len(read(spark, topics=WRITE_TOPIC)) == 300


@check("stream: AvailableNow twice from one checkpoint, option group in consumerProgress")
def stream_with_group(spark: Any) -> None:
    root = Path(tempfile.mkdtemp(dir=WORK, prefix="stream-"))
    out, ckpt = root / "out", root / "ckpt"

    def run_once() -> None:
        query = (
            spark.readStream.format("rocketstore").option("namesrv", NS)
            .option("topics", TOPIC).option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "12").option("group", "spark_stream_grp").load()
            .writeStream.format("parquet").option("path", str(out))
            .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start()
        )  # fmt: skip
        query.awaitTermination()
        assert query.exception() is None, query.exception()

    run_once()
    first = spark.read.parquet(str(out)).count()
    assert first == len(sent_by_java(WORK / "spark-produce.jsonl")), first
    more = [e for e in probe("produce", NS, TOPIC, "20", "spark_more") if e["event"] == "sent"]
    (WORK / "spark-produce-2.jsonl").write_text("".join(json.dumps(e) + "\n" for e in more))
    run_once()
    rows = spark.read.parquet(str(out)).collect()
    total = first + len(more)
    assert len(rows) == total and len({(r.partition, r.offset) for r in rows}) == total
    progress = mqadmin("consumerProgress", "-n", NS, "-g", "spark_stream_grp")
    lines = [line.split() for line in progress.splitlines() if line.startswith(TOPIC)]
    assert len(lines) == 4, progress
    # Topic, broker, queue, broker offset, consumer offset, (client IP), diff, last time
    for fields in lines:
        assert fields[3] == fields[4] and "0" in fields[5:7], fields


@check("a topic the name server does not know fails at planning, naming it")
def unknown_topic(spark: Any) -> None:
    try:
        read(spark, topics="NoSuchTopicAnywhere")
    except Exception as e:
        assert "NoSuchTopicAnywhere" in str(e), e
    else:
        raise AssertionError("read of an unknown topic did not fail")


# --- broker with aclEnable=true --------------------------------------------------------

KEYS = {"accessKey": "sparkuser", "secretKey": "sparksecret1"}


@check("ACL: signed read and key lookup")
def acl_read(spark: Any) -> None:
    sent = [
        *sent_by_java(WORK / "spark-produce.jsonl"),
        *sent_by_java(WORK / "spark-produce-2.jsonl"),
    ]
    rows = read(spark, topics=TOPIC, **KEYS)
    assert len(rows) >= len(sent), (len(rows), len(sent))
    # k9: one of the first 40 and one of the 20 the stream part sent
    nines = ["k9"] * sum(e["i"] == 9 for e in sent)
    assert [r["key"] for r in read(spark, topics=TOPIC, keys="k9", **KEYS)] == nines


@check("ACL: signed write, then a signed read finds the rows")
def acl_write(spark: Any) -> None:
    df = spark.range(50).selectExpr(
        "concat('acl-', id) as key", "cast(cast(id as string) as binary) as value"
    )
    df.write.format("rocketstore").option("namesrv", NS).option("topic", TOPIC).options(
        **KEYS
    ).mode("append").save()
    rows = read(spark, topics=TOPIC, keys='["acl-0", "acl-49"]', **KEYS)
    assert {r["key"] for r in rows} == {"acl-0", "acl-49"}, rows


@check("ACL: wrong secret, unknown key, no keys, a DENY topic's write are AccessDeniedError")
def acl_refusals(spark: Any) -> None:
    cases = {
        "wrong secret": {"topics": TOPIC, "accessKey": "sparkuser", "secretKey": "wrong-one"},
        "unknown key": {"topics": TOPIC, "accessKey": "nobody", "secretKey": "sparksecret1"},
        "no keys": {"topics": TOPIC},
    }
    for case, options in cases.items():
        try:
            read(spark, **options)
        except Exception as e:
            assert "AccessDeniedError" in str(e), (case, e)
            print(f"  {case}: {_acl_line(str(e))}", flush=True)
        else:
            raise AssertionError(f"{case}: the read was not refused")
    # A Java broker checks a topic's permission on sends and pulls only (not on the offset
    # requests): a write to the DENY topic fails in its task, after the producer's retries.
    df = spark.range(1).selectExpr("cast('x' as binary) as value")
    try:
        df.write.format("rocketstore").option("namesrv", NS).option("topic", DENIED_TOPIC).options(
            **KEYS
        ).mode("append").save()
    except Exception as e:
        assert "AccessDeniedError" in str(e), e
        print(f"  DENY topic write: {_acl_line(str(e))}", flush=True)
    else:
        raise AssertionError("the write to the DENY topic was not refused")


def _acl_line(text: str) -> str:
    """The AccessDeniedError's line of a Spark error."""
    lines = [line for line in text.splitlines() if "AccessDeniedError:" in line]
    return (lines or [text])[0].strip()[:400]


# --- broker down -------------------------------------------------------------------------


@check("brokerDownWaitMs: the Java broker SIGKILLed and restarted while executors pull")
def broker_down(spark: Any) -> None:
    reader = (
        spark.read.format("rocketstore").option("namesrv", NS).option("topics", TOPIC)
        .option("maxRecordsPerPartition", "1").option("brokerDownWaitMs", "120000").load()
    )  # fmt: skip
    expected = len(read(spark, topics=TOPIC))
    tracker = spark.sparkContext.statusTracker()
    events: list[str] = []

    def bounce() -> None:
        # Once the job has tasks done, kill -9 the broker, wait, start it on its store again.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            stages = [tracker.getStageInfo(s) for s in tracker.getActiveStageIds()]
            if any(s is not None and s.numCompletedTasks >= 3 for s in stages):
                break
            time.sleep(0.05)
        pid = int((WORK / "broker.pid").read_text())
        os.kill(pid, 9)
        events.append(f"killed broker pid {pid}")
        time.sleep(3)
        subprocess.run([str(HARNESS / "run_broker.sh")], check=True, capture_output=True)
        events.append("restarted")

    thread = threading.Thread(target=bounce)
    thread.start()
    started = time.monotonic()
    rows = reader.collect()
    thread.join()
    print(f"  {events}, read took {time.monotonic() - started:.1f} s", flush=True)
    assert len(events) == 2, events
    identities = [(r.partition, r.offset) for r in rows]
    assert len(rows) == expected and len(set(identities)) == expected, (len(rows), expected)


PARTS: dict[str, list[Callable[[Any], None]]] = {
    "plain": [
        batch_read,
        same_as_file_mode,
        key_lookups,
        write_then_java_consumes,
        stream_with_group,
        unknown_topic,
    ],
    "acl": [acl_read, acl_write, acl_refusals],
    "down": [broker_down],
}


def main() -> int:
    from pyspark.sql import SparkSession

    from rocketstore.spark import register

    part = sys.argv[1]
    spark = (
        SparkSession.builder.master("local[2]").appName(f"java-interop-{part}")
        .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2").getOrCreate()
    )  # fmt: skip
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    if part == "plain" and not (WORK / "spark-produce.jsonl").exists():
        for topic in (TOPIC, DENIED_TOPIC):
            print(mqadmin("updateTopic", "-n", NS, "-b", BR, "-t", topic, "-r", "4", "-w", "4"))
        events = probe("produce", NS, TOPIC, "40", "spark_prod")
        (WORK / "spark-produce.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    for test in PARTS[part]:
        test(spark)
    spark.stop()
    passed = sum(ok for _, ok, _ in RESULTS)
    print(f"{passed} passed, {len(RESULTS) - passed} failed")
    return 0 if passed == len(RESULTS) else 1


if __name__ == "__main__":
    sys.exit(main())
