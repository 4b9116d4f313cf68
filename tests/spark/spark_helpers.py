"""Helpers for the Spark data source tests: a small store built with MessageStore, the rows
the store's own API gives for it, and calling the reader without a SparkSession."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from rocketstore import GetStatus, Message, MessageStore, StoreConfig
from rocketstore.format import sysflag
from rocketstore.spark.options import is_default_topic

BASE_MS = 1_700_000_000_000
STEP_MS = 10
TAGS = ("TagA", "TagB", "TagC")
# topic -> queue count; the system topic is not read by default (the retry topic is).
LAYOUT = {"Orders": 4, "Payments": 2, "%RETRY%groupA": 1, "RMQ_SYS_TRACE_TOPIC": 1}
ROUNDS = 30  # messages per queue
DEFAULT_QUEUES = 7  # the queues a read without topics goes through


def small_config() -> StoreConfig:
    return StoreConfig(
        mapped_file_size_commit_log=8 * 1024,  # ~40 records a file: many files
        mapped_file_size_consume_queue=8 * 20,  # 8 units a file
        max_hash_slot_num=64,
        max_index_num=256,  # several index files
    )


def message(topic: str, qid: int, i: int) -> Message:
    properties = {
        "TAGS": TAGS[i % 3],
        "KEYS": f"{topic}-{qid}-{i}" + (" shared" if i % 5 == 0 else ""),
        "UNIQ_KEY": f"U{topic}{qid:02d}{i:04d}",
    }
    if i % 7 == 3:
        properties["color"] = "red"
    return Message(
        topic=topic,
        body=f"body {topic} {qid} {i}".encode() * (1 + i % 3),
        queue_id=qid,
        flag=i % 4,
        properties=properties,
        born_timestamp=BASE_MS - 5_000 + i,
        born_host="10.0.0.7:4321",
    )


def build_store(root: Path) -> None:
    """Messages round-robin over every queue with rising store times; one PREPARED
    transaction record (no queue entry) in the middle."""
    with MessageStore.open(root, small_config()) as store:
        n = 0
        for i in range(ROUNDS):
            for topic, count in LAYOUT.items():
                for qid in range(count):
                    result = store.put(message(topic, qid, i), BASE_MS + STEP_MS * n)
                    assert result.ok, result
                    n += 1
            if i == ROUNDS // 2:
                prepared = message("Orders", 0, 999)
                prepared.sys_flag = sysflag.TRANSACTION_PREPARED_TYPE
                assert store.put(prepared, BASE_MS + STEP_MS * n).ok
        store.wait_dispatched()


def store_rows(root: Path, queues: list[tuple[str, int]] | None = None) -> list[dict[str, Any]]:
    """What ``get_messages`` returns for every default queue (or ``queues``), as rows."""
    rows = []
    with MessageStore.open(root, read_only=True) as store:
        topics = store.topics()
        if queues is None:
            queues = [(t, q) for t, qs in topics.items() if is_default_topic(t) for q in qs]
        for topic, qid in queues:
            offset = store.min_offset(topic, qid)
            while True:
                got = store.get_messages("g", topic, qid, offset, 32)
                if got.status is not GetStatus.FOUND:
                    break
                for m in got.messages:
                    rows.append(
                        {
                            "topic": m.topic,
                            "partition": m.queue_id,
                            "offset": m.queue_offset,
                            "commitLogOffset": m.commit_log_offset,
                            "key": m.keys,
                            "tags": m.tags,
                            "uniqKey": m.uniq_key,
                            "value": m.body,
                            "ts_ms": m.store_timestamp,
                            "color": m.properties.get("color"),
                        }
                    )
                offset = got.next_begin_offset
    return rows


def ident(row: Mapping[str, Any]) -> tuple[str, int, int]:
    return (row["topic"], row["partition"], row["offset"])


def read_all(options: Mapping[str, str], filters: list[Any] | None = None) -> list[dict[str, Any]]:
    """Plan and read like Spark would, without Spark: reader(), pushFilters(), partitions(),
    read() each partition; rows as dicts."""
    from rocketstore.spark.source import RocketStoreDataSource

    source = RocketStoreDataSource(dict(options))
    reader = source.reader(source.schema())
    if filters is not None:
        rest = list(reader.pushFilters(filters))
        assert all(any(r is f for f in filters) for r in rest)
    rows = []
    for partition in reader.partitions():
        for batch in record_batches(reader, partition):
            rows.extend(batch.to_pylist())
    return rows


P = TypeVar("P")


def partitions_as(kind: type[P], parts: Sequence[object]) -> list[P]:
    """``parts`` (a reader's planned partitions), each checked to be a ``kind``."""
    assert all(isinstance(p, kind) for p in parts), parts
    return [p for p in parts if isinstance(p, kind)]


def record_batches(reader: Any, partition: object) -> list[Any]:
    """What ``reader.read(partition)`` yields, each checked to be an Arrow record batch."""
    import pyarrow as pa

    batches = list(reader.read(partition))
    assert all(isinstance(b, pa.RecordBatch) for b in batches), batches
    return batches
