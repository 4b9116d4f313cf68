"""dispatch_facts (numpy over a run of records) against the dispatcher's rules applied to
each record's decoded properties: tagsCodes (TAGS, and the delivery time of delayed
records), index keys in put order, ROLLBACK records unindexed; and the body fields recovery
CRC-checks. Also encode_units against encode_unit."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore.format import record as rec
from rocketstore.format import sysflag
from rocketstore.format.commitlog_walk import scan_range
from rocketstore.format.crc import masked_crc32
from rocketstore.format.dispatch_facts import dispatch_facts
from rocketstore.format.javahash import index_key_hash, tags_code
from rocketstore.format.properties import decode_properties, split_keys
from rocketstore.format.queue_unit import encode_unit, encode_units
from rocketstore.format.record_scan import TopicTable
from rocketstore.paths import SCHEDULE_TOPIC

FILE = 64 * 1024
BASE = 5 * FILE
LEVELS_MS = (1000, 5000, 10000)

_text = st.text(alphabet="TAGSKEYUNIQ_DELAY0123 \x01\x02ab#é", max_size=30)
_props = st.one_of(
    _text,
    st.lists(
        st.tuples(st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "DELAY", "X", ""]), _text),
        max_size=6,
    ).map(lambda pairs: "\x02".join(f"{k}\x01{v}" for k, v in pairs)),
)
_flags = st.sampled_from(
    [
        sysflag.TRANSACTION_NOT_TYPE,
        sysflag.TRANSACTION_PREPARED_TYPE,
        sysflag.TRANSACTION_COMMIT_TYPE,
        sysflag.TRANSACTION_ROLLBACK_TYPE,
    ]
)
_record_args = st.tuples(
    st.sampled_from(["T", "Töpic", SCHEDULE_TOPIC]),
    _props,
    _flags,
    st.booleans(),  # IPv6 born host
    st.binary(max_size=40),
)


def _expected(topic: str, text: str, flag: int, stored: int) -> tuple[int, list[int]]:
    """The dispatcher's rules on the decoded properties dict."""
    found = decode_properties(text.encode("utf-8"))
    code = None
    if topic == SCHEDULE_TOPIC and "DELAY" in found:
        try:
            level = min(int(found["DELAY"]), len(LEVELS_MS))
        except ValueError:
            level = 0
        if level > 0:
            code = stored + LEVELS_MS[level - 1]
    if code is None:
        code = tags_code(found.get("TAGS"))
    if not sysflag.gets_index_entry(flag):
        return code, []
    keys = [f"{topic}#{found['UNIQ_KEY']}"] if found.get("UNIQ_KEY") else []
    keys += [f"{topic}#{k}" for k in split_keys(found.get("KEYS"))]
    return code, [index_key_hash(k) for k in keys]


def _run_of(shapes: list[tuple[str, str, int, bool, bytes]]) -> bytes:
    """A CommitLog file (at BASE) holding a record of each shape, then a blank."""
    data = bytearray()
    for number, (topic, text, flag, v6, body) in enumerate(shapes):
        data += rec.encode_record(
            topic=topic.encode(),
            body=body,
            properties=text.encode("utf-8"),
            queue_id=number % 3,
            flag=0,
            queue_offset=number,
            physical_offset=BASE + len(data),
            sys_flag=flag,
            born_timestamp=1,
            born_host=bytes(20) if v6 else bytes(8),
            store_timestamp=1_700_000_000_000 + number,
            store_host=bytes(8),
            reconsume_times=0,
            prepared_transaction_offset=0,
            body_crc=masked_crc32(body),
        )
    return bytes(data) + rec.encode_blank(FILE - len(data)) + bytes(FILE - len(data) - 8)


@settings(max_examples=200, deadline=None)
@given(st.lists(_record_args, min_size=1, max_size=12))
def test_dispatch_facts_follow_the_dispatcher_rules(shapes) -> None:
    buf = _run_of(shapes)
    topics = TopicTable()
    scan = scan_range(memoryview(buf), BASE, 0, FILE, FILE, skip_corrupt=False, topics=topics)
    records = scan.records
    assert len(records) == len(shapes)
    facts = dispatch_facts(buf, records, topics, LEVELS_MS, index=True)
    entries = facts.entries
    for i, (topic, text, flag, _v6, body) in enumerate(shapes):
        code, hashes = _expected(topic, text, flag, 1_700_000_000_000 + i)
        assert facts.tags_codes[i] == code
        mine = entries[entries["record"] == i]
        assert mine["key_hash"].tolist() == hashes
        assert set(mine["offset"].tolist()) <= {int(records.position[i])}
        position = int(records.body_position[i])
        assert buf[position : position + int(records.body_length[i])] == body
        assert records.body_crc[i] == masked_crc32(body)
    assert entries["record"].tolist() == sorted(entries["record"].tolist())
    without = dispatch_facts(buf, records, topics, LEVELS_MS, index=False)
    assert without.tags_codes.tolist() == facts.tags_codes.tolist()
    assert not len(without.entries)


def test_a_delivery_time_past_a_java_long_wraps_as_in_java() -> None:
    """computeDeliverTimestamp adds in Java longs. A store time no put gives (the CRC does
    not cover it: one flipped bit) must wrap there too, not stop the dispatcher."""
    stored = 2**63 - 2000
    record = rec.encode_record(
        topic=SCHEDULE_TOPIC.encode(),
        body=b"x",
        properties=b"DELAY\x013",
        queue_id=2,
        flag=0,
        queue_offset=0,
        physical_offset=BASE,
        sys_flag=0,
        born_timestamp=1,
        born_host=bytes(8),
        store_timestamp=stored,
        store_host=bytes(8),
        reconsume_times=0,
        prepared_transaction_offset=0,
        body_crc=masked_crc32(b"x"),
    )
    buf = record + rec.encode_blank(FILE - len(record)) + bytes(FILE - len(record) - 8)
    topics = TopicTable()
    scan = scan_range(memoryview(buf), BASE, 0, FILE, FILE, skip_corrupt=False, topics=topics)
    facts = dispatch_facts(buf, scan.records, topics, LEVELS_MS, index=False)
    assert facts.tags_codes.tolist() == [stored + LEVELS_MS[2] - 2**64]


def test_more_keys_than_the_first_guess_all_get_entries() -> None:
    """Room is made for two entries a record at first; a run with more is done again with
    room for all of them, none lost or duplicated."""
    keys = " ".join(f"k{i}" for i in range(9))
    shapes = [("T", f"UNIQ_KEY\x01u\x02KEYS\x01{keys}", sysflag.TRANSACTION_NOT_TYPE, False, b"")]
    shapes.append(("T", "KEYS\x01single", sysflag.TRANSACTION_NOT_TYPE, False, b"x"))
    buf = _run_of(shapes)
    topics = TopicTable()
    records = scan_range(memoryview(buf), BASE, 0, FILE, FILE, skip_corrupt=False, topics=topics)
    facts = dispatch_facts(buf, records.records, topics, LEVELS_MS, index=True)
    want = [index_key_hash("T#u")] + [index_key_hash(f"T#k{i}") for i in range(9)]
    want.append(index_key_hash("T#single"))
    assert facts.entries["key_hash"].tolist() == want
    assert facts.entries["record"].tolist() == [0] * 10 + [1]
    facts.entries["offset"] += 1  # the caller's own array: rebuild shifts offsets in place


@given(
    st.lists(
        st.tuples(
            st.integers(0, 2**63 - 1),
            st.integers(-(2**31), 2**31 - 1),
            st.integers(-(2**63), 2**63 - 1),
        ),
        max_size=20,
    )
)
def test_encode_units_is_encode_unit_of_each(units) -> None:
    columns = [np.array([u[k] for u in units], dtype=np.int64) for k in range(3)]
    assert encode_units(*columns) == b"".join(encode_unit(*u) for u in units)
