"""light_rows: the rows a multi-dispatch record has in the other queues it names."""

from __future__ import annotations

import pyarrow as pa

from rocketstore.format.message import MessageExt
from rocketstore.spark import light_rows

NAMES, OFFSETS = "INNER_MULTI_DISPATCH", "INNER_MULTI_QUEUE_OFFSET"


def test_targets_name_each_unit_once_and_none_for_unpaired_properties():
    both = {NAMES: "%LMQ%a,Plain,%LMQ%a", OFFSETS: "4,9,4"}
    assert light_rows.targets(both, 3) == [("%LMQ%a", 0, 4), ("Plain", 3, 9)]
    assert light_rows.targets({NAMES: "%LMQ%a,%LMQ%b", OFFSETS: "4"}, 3) == []
    assert light_rows.targets({NAMES: "%LMQ%a", OFFSETS: "x"}, 3) == []
    assert light_rows.targets({NAMES: "%LMQ%a"}, 3) == []
    assert light_rows.targets({NAMES: "%LMQ%a,%LMQ%b", OFFSETS: "-1,2"}, 1) == [("%LMQ%b", 0, 2)]


def test_message_copies_are_the_message_in_the_other_queues():
    properties = {NAMES: "%LMQ%a,Plain", OFFSETS: "4,9", "KEYS": "k"}
    message = MessageExt(
        topic="Orders",
        queue_id=2,
        queue_offset=7,
        commit_log_offset=4096,
        size=300,
        body=b"x",
        properties=properties,
        msg_id="7F0000010000000000001000",
        sys_flag=0,
        flag=0,
        body_crc=1,
        born_timestamp=1_700_000_000_000,
        born_host="10.1.2.3:45678",
        store_timestamp=1_700_000_000_005,
        store_host="127.0.0.1:10911",
        reconsume_times=0,
        prepared_transaction_offset=0,
    )
    copies = light_rows.message_copies(message)
    assert [(m.topic, m.queue_id, offset) for m, offset in copies] == [
        ("%LMQ%a", 0, 4),
        ("Plain", 2, 9),
    ]
    assert all(m.body == b"x" and m.keys == "k" for m, _ in copies)


def _batch(properties):
    return pa.RecordBatch.from_pydict(
        {
            "topic": pa.array(["T"] * len(properties), pa.string()),
            "partition": pa.array(range(len(properties)), pa.int32()),
            "offset": pa.array(range(100, 100 + len(properties)), pa.int64()),
            "properties": pa.array(properties, pa.map_(pa.string(), pa.string())),
        }
    )


def test_batch_copies_find_the_rows_with_offsets_even_in_a_slice():
    properties = [
        [(NAMES, "%LMQ%z"), (OFFSETS, "1")],
        [("KEYS", "k")],
        [],
        [(NAMES, "%LMQ%a,Plain"), (OFFSETS, "4,9")],
        [(NAMES, "%LMQ%a,Plain"), (OFFSETS, "4")],  # unpaired: no units
    ]
    batch = _batch(properties)
    copies = light_rows.batch_copies(batch.slice(1))
    assert copies is not None
    assert copies.column("topic").to_pylist() == ["%LMQ%a", "Plain"]
    assert copies.column("partition").to_pylist() == [0, 3]
    assert copies.column("offset").to_pylist() == [4, 9]
    assert copies.schema == batch.schema
    assert light_rows.batch_copies(batch.slice(1, 2)) is None
    assert light_rows.batch_copies(_batch([[("KEYS", "k")]])) is None
