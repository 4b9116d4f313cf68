"""The C extension against the pure-Python paths that define its behaviour: the same
CommitLog bytes and PutResults for the same puts (including every case it hands back to
Python), the same walk, decode and CRC verdicts over valid, torn and corrupted files."""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import gc
import importlib
import os
import pickle
import re
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketstore import Message, MessageStore, PutResult, PutStatus, StoreConfig
from rocketstore import index as index_module
from rocketstore import put_path as put_path_module
from rocketstore import read_path as read_path_module
from rocketstore.format import commitlog_walk, record_scan
from rocketstore.format import javahash as javahash_module
from rocketstore.format import message_id as message_id_module
from rocketstore.format import native as native_module
from rocketstore.format import properties as properties_module
from rocketstore.format import record as record_module
from rocketstore.format.crc import masked_crc32
from rocketstore.format.message import MessageExt
from rocketstore.format.record_scan import Records, TopicTable, decode_run
from rocketstore.paths import commitlog_dir

native = native_module.native
pytestmark = pytest.mark.skipif(native is None, reason="the C extension is not built")

FILE_SIZE = 64 * 1024
STAMP = 1_700_000_000_000


def _python_paths() -> contextlib.AbstractContextManager[None]:
    """Every entry point of the registry unbound: the pure-Python twins run."""
    return native_module.python_only()


def _config() -> StoreConfig:
    return StoreConfig(mapped_file_size_commit_log=FILE_SIZE, message_index_enable=False)


def _commitlog_bytes(root: Path) -> bytes:
    directory = commitlog_dir(str(root))
    if not os.path.isdir(directory):
        return b""  # nothing was ever appended
    return b"".join((Path(directory) / name).read_bytes() for name in sorted(os.listdir(directory)))


def _run(root: Path, calls: list[list[Message]], *, python: bool) -> list[object]:
    store = MessageStore.open(str(root), _config())
    outcomes: list[object] = []
    try:
        with _python_paths() if python else contextlib.nullcontext():
            for call in calls:
                if len(call) == 1:
                    outcomes.append(store.put(call[0], store_timestamp=STAMP))
                else:
                    outcomes.append(store.put_batch(call, store_timestamp=STAMP))
    finally:
        store.close()
    return outcomes


def _same_both_ways(tmp_path: Path, calls: list[list[Message]]) -> list[object]:
    fast = _run(tmp_path / "native", calls, python=False)
    slow = _run(tmp_path / "python", calls, python=True)
    assert fast == slow
    assert _commitlog_bytes(tmp_path / "native") == _commitlog_bytes(tmp_path / "python")
    return fast


_topics = st.sampled_from(["TopicA", "Topic_B-1", "%RETRY%group", "a" * 127, "Töpic"])
_values = st.text(alphabet=st.characters(codec="utf-8"), max_size=30)  # no surrogates
_properties = st.dictionaries(
    st.sampled_from(["KEYS", "TAGS", "UNIQ_KEY", "WAIT", "custom", "ключ"]), _values, max_size=5
)
_hosts = st.sampled_from(["127.0.0.1:50000", "10.1.2.3:10911", "[::1]:9876", "[fe80::1]:1"])


@st.composite
def messages(draw: st.DrawFn) -> Message:
    return Message(
        draw(_topics),
        draw(st.binary(max_size=300)),
        queue_id=draw(st.integers(0, 7)),
        flag=draw(st.integers(-(2**31), 2**31 - 1)),
        sys_flag=draw(st.sampled_from([0, 0, 0x1, 0x2, 0x30])),
        properties=draw(_properties),
        born_timestamp=draw(st.integers(0, 2**62)),
        born_host=draw(_hosts),
        reconsume_times=draw(st.integers(0, 16)),
        prepared_transaction_offset=draw(st.integers(-(2**63), 2**63 - 1)),
    )


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.lists(messages(), min_size=1, max_size=12), min_size=1, max_size=6))
def test_puts_write_the_same_bytes_and_results(
    tmp_path_factory: pytest.TempPathFactory, calls: list[list[Message]]
) -> None:
    _same_both_ways(tmp_path_factory.mktemp("puts"), calls)


def test_batches_roll_files_the_same_way(tmp_path: Path) -> None:
    # Each batch of 40 x ~1.2 KB does not fit in what a 64 KiB file has left at some point.
    calls = [
        [Message("T", bytes([i]) * 1100, i % 3, properties={"KEYS": "k"}, born_timestamp=1)] * 40
        for i in range(5)
    ]
    outcomes = _same_both_ways(tmp_path, calls)
    offsets = [r.commit_log_offset for batch in outcomes for r in batch]  # type: ignore[attr-defined]
    assert any(o % FILE_SIZE == 0 for o in offsets[1:])  # a roll happened


def test_single_puts_roll_files_the_same_way(tmp_path: Path) -> None:
    # put_one declines a message that does not fit what the last file has left: the
    # general path writes the END_OF_FILE blank and rolls, then put_one takes over again.
    calls = [
        [Message("T", bytes([i % 256]) * (700 + i), i % 3, properties={"KEYS": f"k{i}"})]
        for i in range(200)
    ]
    for (message,) in calls:
        message.born_timestamp = STAMP  # compared byte for byte: no "now"
    outcomes = _same_both_ways(tmp_path, calls)
    offsets = [r.commit_log_offset for r in outcomes]  # type: ignore[attr-defined]
    assert sum(1 for o in offsets if o % FILE_SIZE == 0) >= 3  # rolls happened


def test_single_put_in_one_call_is_taken_and_seen_by_readers(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path, _config()) as store:
        store.put(Message("T", b"first"))  # the general path learns the topic and host
        assert native is not None
        result = store.preparer.put_one(store.commitlog, Message("T", b"second"), None)
        assert result is not None and result.ok and result.queue_offset == 1
        assert store.commitlog.max_offset() == result.commit_log_offset + result.size
        store.wait_dispatched()
        got = store.get_messages("g", "T", 0, 0, 32).messages
        assert [m.body for m in got] == [b"first", b"second"]
        assert got[1].msg_id == result.msg_id


def test_put_one_checks_its_arguments_before_writing(tmp_path: Path) -> None:
    """put_one checks once what encode_batch, append_encoded and put_results would parse:
    a wrong argument is a TypeError naming it, and nothing is written."""
    assert native is not None
    with MessageStore.open(tmp_path, _config()) as store:
        store.put(Message("T", b"first"))
        preparer, commitlog = store.preparer, store.commitlog
        mapped = commitlog.files.last
        assert mapped is not None
        position = mapped.wrote_position
        before = bytes(mapped.mm[position : position + 64])
        good = [
            Message("T", b"x"), Message, preparer._topics, preparer._hosts,
            preparer._queue_keys, preparer._hosts[store.config.store_host],
            store.config.max_message_size, preparer._max_record,
            store.config.mapped_file_size_commit_log, 1, mapped.mm, position,
            mapped.file_from_offset, commitlog.topic_queue_table, 1,
            put_path_module.PutResult, PutStatus.PUT_OK, True,
        ]  # fmt: skip
        cases: list[tuple[int, object, str]] = [
            (2, [], "must be dicts"),
            (13, None, "must be dicts"),
            (5, "127.0.0.1:10911", "store host must be bytes"),
            (15, "PutResult", "result_type a type"),
        ]
        for at, wrong, says in cases:
            args = list(good)
            args[at] = wrong
            with pytest.raises(TypeError, match=says):
                native.put_one(*args)
        with pytest.raises(TypeError, match="18 arguments"):
            native.put_one(*good[:17])
        assert bytes(mapped.mm[position : position + 64]) == before
        assert mapped.wrote_position == position


@pytest.mark.parametrize(
    "odd",
    [
        Message("T", b"x", properties={"DELAY": "3"}),  # the 4.9 delay rewrite
        Message("T", b"x", properties={"DELAY": "abc"}),  # MESSAGE_ILLEGAL
        Message("bad topic!", b"x"),  # illegal topic name
        Message("T", bytearray(b"x")),  # type: ignore[arg-type]  # a body that is not bytes
        Message("T", b"x", flag=2**31),  # out of the int32 range
        Message("T", b"x", queue_id=-1),
        Message("T", b"x", born_host="not a host"),
        Message("T", b"x", properties={"KEYS": None}),  # type: ignore[dict-item]
        Message("T", b"x", properties={"K": "v" * 40_000}),  # PROPERTIES_SIZE_EXCEEDED
        Message("T", b"x" * 5_000_000),  # larger than max_message_size
        Message("T", b"x", sys_flag=0x4),  # a PREPARED transaction record
    ],
)
def test_uncommon_messages_get_the_python_outcome(tmp_path: Path, odd: Message) -> None:
    odd.born_timestamp = STAMP  # compared byte for byte: no "now"
    plain = Message("T", b"plain", properties={"KEYS": "k"}, born_timestamp=STAMP)
    calls = [[plain], [odd], [plain, odd], [plain, plain]]
    _same_both_ways(tmp_path, calls)


def test_records_larger_than_the_blob_guess_encode_the_same(tmp_path: Path) -> None:
    """The C encoder sizes a batch's blob from its bodies and a usual record overhead, then
    grows it: properties far past that overhead (and empty bodies) still give Python's
    bytes."""
    calls = [
        [
            Message("T", b"", i % 4, properties={"KEYS": f"k{i}-" + "x" * (300 * i), "TAGS": "t"})
            for i in range(12)
        ],
        [Message("T", b"y" * 10, properties={"custom": "ü" * 3000})],
        [Message("T", b"z" * 2000, properties={"KEYS": "k"})] * 3,
    ]
    for call in calls:
        for message in call:
            message.born_timestamp = STAMP  # compared byte for byte: no "now"
    _same_both_ways(tmp_path, calls)


def _encode_columns(
    bodies: list[object], out: bytearray, position: int, room: int, stamp: object
) -> object:
    """``encode_columns`` of ``bodies`` with KEYS "k" and UNIQ_KEY per row, queues 0-2."""
    assert native is not None
    uniq = [f"u{i}" for i in range(len(bodies))]
    host = bytes([127, 0, 0, 1, 0, 0, 0x27, 0x10])
    return native.encode_columns(
        "T", b"T", bodies, [i % 3 for i in range(len(bodies))], ("KEYS", "UNIQ_KEY"),
        ("k", uniq), None, host, host, STAMP, {}, 4 << 20, 5 << 20, FILE_SIZE, 4 << 20,
        FILE_SIZE // 2, 0, out, position, room, stamp,
    )  # fmt: skip


def _outputs(rows: int) -> tuple[np.ndarray, ...]:
    return tuple(np.zeros(rows, dtype=t) for t in (np.int64, np.int64, np.int32, np.int64))


def test_columns_encoded_in_place_are_the_blob_appended() -> None:
    """encode_columns in place (into the mapped file, stamped as it goes, sizes last)
    writes what the blob path and append_encoded write, and leaves the same queue table
    and per-row values."""
    assert native is not None
    bodies: list[object] = [bytes([i]) * (i * 7) for i in range(40)]
    table = {"T-1": 5}
    offsets, queues, sizes, stamps = _outputs(40)
    mapping = bytearray(FILE_SIZE)
    stamp = (table, 1_000_000 + 96, STAMP + 1, offsets, queues, sizes, stamps, 0)
    encoded = _encode_columns(bodies, mapping, 96, FILE_SIZE - 96, stamp)
    assert isinstance(encoded, tuple)
    length, meta, keys, _body_bytes, end = encoded
    assert end == 40

    blob = bytearray()
    copied = _encode_columns(bodies, blob, 0, -1, None)
    assert isinstance(copied, tuple) and copied[0] == length
    file = bytearray(FILE_SIZE)
    their_table = {"T-1": 5}
    queue_bytes = native.append_encoded(
        file, 96, memoryview(blob)[:length], meta, keys, their_table, 1_000_000 + 96, STAMP + 1
    )
    assert mapping == file and table == their_table
    assert queues.tobytes() == queue_bytes
    assert list(sizes) == list(np.frombuffer(meta, dtype=np.int32)[0::2])
    assert offsets[0] == 1_000_000 + 96 and list(np.diff(offsets)) == list(sizes[:-1])
    assert set(stamps) == {STAMP + 1}


@pytest.mark.parametrize("case", ["no room", "a row for Python"])
def test_columns_not_taken_in_place_leave_the_room_as_it_was(case: str) -> None:
    """A batch that does not fit the room (False: the caller rolls the file) or that has a
    row the C encoder leaves to Python (None) after rows it wrote: the room is zeros
    again and the queue table untouched."""
    bodies: list[object] = [b"x" * 50] * 10
    room = FILE_SIZE - 96
    if case == "no room":
        room = 1500  # (records of 160 bytes: the tenth does not fit)
    else:
        bodies[7] = bytearray(b"handed back")
    table = {"T-0": 3}
    mapping = bytearray(FILE_SIZE)
    stamp = (table, 96, STAMP, *_outputs(10), 0)
    encoded = _encode_columns(bodies, mapping, 96, room, stamp)
    assert encoded is (False if case == "no room" else None)
    assert mapping == bytearray(FILE_SIZE) and table == {"T-0": 3}


def test_born_timestamp_none_means_now(tmp_path: Path) -> None:
    store = MessageStore.open(str(tmp_path), _config())
    try:
        before = time.time_ns() // 1_000_000
        result = store.put(Message("T", b"x"))
        after = time.time_ns() // 1_000_000
        found = store.look_message(result.commit_log_offset)
    finally:
        store.close()
    assert found is not None and before <= found.born_timestamp <= after


def test_text_that_cannot_be_encoded_is_refused_both_ways(tmp_path: Path) -> None:
    odd = Message("T", b"x", properties={"bad": "\ud800"}, born_timestamp=STAMP)
    fine = Message("T", b"y", born_timestamp=STAMP)
    # Alone, and second in a batch: nothing of the batch is written.
    outcomes = _same_both_ways(tmp_path, [[odd], [fine, odd]])
    assert outcomes == [
        PutResult(
            PutStatus.MESSAGE_ILLEGAL,
            reason="properties hold '\\ud800', which UTF-8 cannot encode",
        ),
        [
            PutResult(
                PutStatus.MESSAGE_ILLEGAL,
                reason="message 1 of the batch: properties hold '\\ud800', which UTF-8 "
                "cannot encode",
            )
        ]
        * 2,
    ]
    assert _commitlog_bytes(tmp_path / "native") == b""


@pytest.mark.parametrize(
    ("properties", "reason"),
    [
        ({"c": ""}, "property 'c' is empty (a record cannot keep an empty value)"),
        ({"": "v"}, "a property has an empty name"),
        (
            {"a\x01b": "y"},
            "property 'a\\x01b': 'a\\x01b' holds a separator (\\x01 or \\x02) of the "
            "properties string",
        ),
        (
            {"b": "x\x02z"},
            "property 'b': 'x\\x02z' holds a separator (\\x01 or \\x02) of the properties string",
        ),
    ],
)
def test_properties_a_record_cannot_give_back_are_refused_both_ways(
    tmp_path: Path, properties: dict[str, str], reason: str
) -> None:
    # Written, {"a\x01b": "y", "b": "x\x02z"} would read back as {"a": "b\x01y", "b": "x"}.
    odd = Message("T", b"x", properties=properties, born_timestamp=STAMP)
    outcomes = _same_both_ways(tmp_path, [[odd]])
    assert outcomes == [PutResult(PutStatus.MESSAGE_ILLEGAL, reason=reason)]


def test_a_property_of_none_is_left_out_both_ways(tmp_path: Path) -> None:
    # Java's messageProperties2String skips null values; a put is not refused for one.
    message = Message("T", b"x", properties={"a": None, "b": "v"}, born_timestamp=STAMP)  # type: ignore[dict-item]
    (outcome,) = _same_both_ways(tmp_path, [[message]])
    assert isinstance(outcome, PutResult) and outcome.ok


def test_encode_batch_hands_back_what_it_does_not_know() -> None:
    assert native is not None
    args: tuple[Any, ...] = ({}, {}, {}, bytes(8), 4 << 20, (4 << 20) + 65536, 1 << 30, True, 0)
    message = Message("T", b"x")
    assert native.encode_batch([message], Message, *args) is None  # unknown topic
    known: tuple[Any, ...] = ({"T": b"T"}, {"127.0.0.1:50000": bytes(8)}, {}, *args[3:])
    blob, _meta, keys, body_bytes = native.encode_batch([message], Message, *known)
    assert keys == ["T-0"] and body_bytes == 1 and len(blob) == 91 + 1 + 1
    # In a batch, transaction records go to Python (which refuses them there).
    assert native.encode_batch([Message("T", b"x", sys_flag=0x8)], Message, *known) is None


def test_encode_batch_keys_of_interleaved_queues_topics_and_hosts() -> None:
    """More queues than the encoder remembers per batch, topics equal in value but not the
    same object, hosts that alternate: every key and born host is the message's own."""
    assert native is not None
    hosts = {"127.0.0.1:50000": bytes([127, 0, 0, 1, 0, 0, 0xC3, 0x50]),
             "10.0.0.2:7": bytes([10, 0, 0, 2, 0, 0, 0, 7])}  # fmt: skip
    topics = {"A": b"A", "Topic": b"Topic"}
    other = "".join(["Top", "ic"])  # equal to "Topic", another object
    messages = [
        Message(
            ("A", "Topic", other)[i % 3],
            b"x",
            queue_id=i % 20,
            born_host=list(hosts)[i // 7 % 2],
            born_timestamp=STAMP,
        )
        for i in range(120)
    ]
    args: tuple[Any, ...] = (
        topics,
        hosts,
        {},
        bytes(8),
        4 << 20,
        (4 << 20) + 65536,
        1 << 30,
        True,
        0,
    )
    blob, meta, keys, _ = native.encode_batch(messages, Message, *args)
    assert keys == [f"{m.topic}-{m.queue_id}" for m in messages]
    lengths = memoryview(meta).cast("i")[0::2]
    at = 0
    for message, length in zip(messages, lengths, strict=True):
        assert blob[at + 48 : at + 56] == hosts[message.born_host]  # BORNHOST
        topic_at = at + 88 + 1 + 1  # the header, the 1-byte body, TOPICLEN
        assert blob[topic_at : topic_at + len(message.topic)] == message.topic.encode()
        at += length


def test_encode_batch_reads_slots_and_leaves_other_message_types_to_python() -> None:
    """Fields are read from Message's slots (no per-message __dict__ is made); a message
    type whose fields are not plain slots goes to the Python path."""
    assert native is not None
    known: tuple[Any, ...] = ({"T": b"T"}, {"127.0.0.1:50000": bytes(8)}, {}, bytes(8))
    limits = (4 << 20, (4 << 20) + 65536, 1 << 30, True, 0)
    message = Message("T", b"xy", queue_id=3)
    assert not hasattr(message, "__dict__")
    encoded = native.encode_batch([message], Message, *known, *limits)
    assert encoded is not None and encoded[2] == ["T-3"]

    class Loose:  # same field names, kept in an instance dict
        def __init__(self) -> None:
            self.__dict__.update(
                topic="T", body=b"xy", queue_id=3, flag=0, sys_flag=0, properties={},
                born_timestamp=None, born_host="127.0.0.1:50000", reconsume_times=0,
                prepared_transaction_offset=0,
            )  # fmt: skip

    assert native.encode_batch([Loose()], Loose, *known, *limits) is None
    assert native.encode_batch([message], Message, *known, *limits) is not None


def test_the_first_batch_of_a_topic_or_host_is_encoded_in_c() -> None:
    """The C encoder knows only checked names; the preparer checks a batch's new ones
    and retries, so the first batch does not fall to the per-message Python path."""
    preparer = put_path_module.MessagePreparer(StoreConfig().validate())
    encoded = preparer.encode(
        [Message("Fresh", b"x", born_host="10.0.0.1:1")] * 3, None, in_batch=True
    )
    assert encoded is not None and len(encoded) == 3
    # Names that fail the checks are not learned: prepare() decides (MESSAGE_ILLEGAL).
    assert preparer.encode([Message("bad topic!", b"x")], None, in_batch=True) is None
    assert preparer.encode([Message("T", b"x", born_host="nowhere")], None, in_batch=True) is None
    assert "bad topic!" not in preparer._topics and "nowhere" not in preparer._hosts


def test_put_results_and_decoded_messages_set_every_slot(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path, StoreConfig(mapped_file_size_commit_log=FILE_SIZE)) as store:
        results = store.put_batch([Message("T", b"a", properties={"KEYS": "k"})] * 3)
        assert [(r.ok, r.queue_offset, r.reason) for r in results] == [
            (True, 0, ""),
            (True, 1, ""),
            (True, 2, ""),
        ]
        store.wait_dispatched()
        got = store.get_messages("g", "T", 0, 0, 32).messages
        assert [(m.queue_offset, m.body, m.keys, m.magic_code) for m in got] == [
            (i, b"a", "k", record_module.MESSAGE_MAGIC_V1) for i in range(3)
        ]


def test_put_results_are_left_out_of_the_cycle_collector(tmp_path: Path) -> None:
    """A result holds only atomic values, so the C code leaves it untracked (as CPython
    does tuples of atomic values): batches of results alive across a collection no longer
    bring on full collections of the application's heap. They behave as ever."""
    with MessageStore.open(tmp_path, StoreConfig(mapped_file_size_commit_log=FILE_SIZE)) as store:
        store.put_batch([Message("T", b"learn")] * 2)  # the first put teaches the encoder
        results = store.put_batch([Message("T", b"a")] * 3)
        single = store.put(Message("T", b"b"))
        for result in [*results, single]:
            assert result.ok and not gc.is_tracked(result)
            assert result == dataclasses.replace(result)
            assert pickle.loads(pickle.dumps(result)) == result
            assert hash(result) == hash(dataclasses.replace(result))
        assert [r.queue_offset for r in results] == [2, 3, 4]
        gc.collect()  # nothing to find, nothing freed early
        assert results[2].msg_id and single.queue_offset == 5


_UNIT = st.tuples(
    st.integers(0, 1 << 42), st.integers(-2, 70_000), st.integers(-(1 << 63), (1 << 63) - 1)
)


@settings(max_examples=400, deadline=None)
@given(
    units=st.lists(_UNIT, max_size=50),
    max_count=st.integers(1, 40),
    behind=st.integers(0, 1 << 43),
    ratio=st.integers(0, 100),
    limits=st.tuples(
        st.integers(1, 300_000), st.integers(1, 40), st.integers(1, 100_000), st.integers(1, 40)
    ),
)
def test_select_units_keeps_the_python_batch_rules(
    units: list[tuple[int, int, int]],
    max_count: int,
    behind: int,
    ratio: int,
    limits: tuple[int, int, int, int],
) -> None:
    config = StoreConfig(
        access_message_in_memory_max_ratio=ratio,
        max_transfer_bytes_on_message_in_memory=limits[0],
        max_transfer_count_on_message_in_memory=limits[1],
        max_transfer_bytes_on_message_in_disk=limits[2],
        max_transfer_count_on_message_in_disk=limits[3],
    )
    reader = read_path_module.MessageReader(None, config)  # type: ignore[arg-type]
    raw = b"".join(struct.pack(">qiq", *unit) for unit in units)
    commit_max = max((u[0] for u in units), default=0) + behind
    got = reader._select(raw, max_count, commit_max)
    with _python_paths():
        want = reader._select(raw, max_count, commit_max)
    assert got == want


def test_crc_matches_zlib() -> None:
    assert native is not None
    for data in (b"", b"a", bytes(range(256)) * 33, os.urandom(100_001)):
        assert native.masked_crc32(data) == masked_crc32(data)
        assert masked_crc32(data) == (zlib.crc32(data) & 0x7FFFFFFF if data else 0)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=3000), st.integers(0, 15))
def test_crc_matches_zlib_at_any_length_and_alignment(data: bytes, skip: int) -> None:
    """The folding CRC (multiples of 16 bytes from 64 on) and the tail after it."""
    assert native is not None
    view = memoryview(data)[min(skip, len(data)) :]
    want = zlib.crc32(view) & 0x7FFFFFFF if len(view) else 0
    assert native.masked_crc32(view) == want


_CRC_CHECK = """
import os, random, zlib
from rocketstore.format.native import native
rnd = random.Random(7)
for _ in range(3000):
    data = os.urandom(rnd.choice([rnd.randrange(0, 200), rnd.randrange(0, 20000)]))
    assert native.masked_crc32(data) == (zlib.crc32(data) & 0x7FFFFFFF if data else 0)
print(native.crc_backend())
"""


@pytest.mark.parametrize(
    ("switch", "backend"), [("ROCKETSTORE_NO_CLMUL", "zlib"), ("ROCKETSTORE_CRC_TABLE", "table")]
)
def test_every_crc_backend_matches_zlib(switch: str, backend: str) -> None:
    env = {**os.environ, switch: "1"}
    done = subprocess.run(
        [sys.executable, "-c", _CRC_CHECK], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == backend


# --- scans ----------------------------------------------------------------------------


def _file_of_records(tmp_path: Path, count: int) -> bytes:
    store = MessageStore.open(str(tmp_path / "scan"), _config())
    try:
        for i in range(count):
            host = "[::1]:1" if i % 7 == 3 else "127.0.0.1:50000"
            store.put(
                Message(f"T{i % 3}", os.urandom(i % 50), queue_id=i % 2, born_host=host),
                store_timestamp=STAMP,
            )
    finally:
        store.close()
    return _commitlog_bytes(tmp_path / "scan")[:FILE_SIZE]


def _scan_both_ways(data: bytes, base: int) -> None:
    buf = memoryview(data)
    fast = record_scan.walk_start_array(buf, 0, len(data), len(data))
    with _python_paths():
        slow = record_scan.walk_start_array(buf, 0, len(data), len(data))
    assert fast[0].tolist() == slow[0].tolist() and fast[1:] == slow[1:]
    raw = np.frombuffer(data, dtype=np.uint8)
    fast_topics, slow_topics = TopicTable(), TopicTable()
    got, valid = decode_run(buf, raw, base, fast[0], len(data), fast_topics)
    with _python_paths():
        want, want_valid = decode_run(buf, raw, base, slow[0], len(data), slow_topics)
    assert valid == want_valid
    for name in Records.__dataclass_fields__:
        if name == "topic_id":
            names_got = [fast_topics.names[i] for i in got.topic_id[:valid]]
            names_want = [slow_topics.names[i] for i in want.topic_id[:valid]]
            assert names_got == names_want
        else:
            assert getattr(got, name)[:valid].tolist() == getattr(want, name)[:valid].tolist()
    crc_args = (got.body_position[:valid], got.body_length[:valid], got.body_crc[:valid])
    fast_crc = commitlog_walk.first_crc_mismatch(buf, got.take(valid))
    with _python_paths():
        slow_crc = commitlog_walk.first_crc_mismatch(buf, got.take(valid))
    assert fast_crc == slow_crc, crc_args


def test_scans_agree_on_a_written_file(tmp_path: Path) -> None:
    _scan_both_ways(_file_of_records(tmp_path, 200), 0)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.data())
def test_scans_agree_on_damaged_files(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    clean = _CLEAN.get("file")
    if clean is None:
        clean = _CLEAN["file"] = _file_of_records(tmp_path_factory.mktemp("clean"), 120)
    damaged = bytearray(clean)
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, 12_000))
        damaged[at] = data.draw(st.integers(0, 255))
    _scan_both_ways(bytes(damaged), data.draw(st.sampled_from([0, FILE_SIZE])))


_CLEAN: dict[str, bytes] = {}


def test_walk_resumes_where_a_full_output_stopped(tmp_path: Path) -> None:
    assert native is not None
    data = _file_of_records(tmp_path, 3)
    first_size = int.from_bytes(data[:4], "big")
    out = np.empty(1, dtype=np.int64)
    assert native.walk_starts(data, 0, len(data), len(data), out) == (1, first_size, 0)
    assert native.walk_starts(bytes(200), 0, 200, 200, out) == (0, 0, 2)  # zeros: no data


# --- reads ----------------------------------------------------------------------------


def _everything_read(store: MessageStore) -> list[object]:
    """Every pull, look-up and key query of the test store, as plain values."""
    seen: list[object] = []
    for queue_id in range(3):
        for tags in (None, "A", "A || B"):
            offset = 0
            while True:
                got = store.get_messages("g", "T", queue_id, offset, max_count=7, tags=tags)
                seen.append((got.status, got.next_begin_offset, got.messages))
                if not got.messages:
                    break
                offset = got.next_begin_offset
    for number in range(0, 60, 7):
        seen.append(store.query_messages("T", f"k{number}"))
    return seen


def _read_both_ways(store: MessageStore) -> tuple[list[object], list[object]]:
    """``_everything_read`` by the C paths, then by the Python ones."""
    fast = _everything_read(store)
    with _python_paths():
        return fast, _everything_read(store)


def test_reads_agree_both_ways(tmp_path: Path) -> None:
    store = MessageStore.open(str(tmp_path), _config().replace(message_index_enable=True))
    try:
        for number in range(60):
            properties = {"KEYS": f"k{number} shared", "TAGS": "AB"[number % 2]}
            if number % 5 == 0:
                properties["note"] = "ünïcode"  # non-ASCII properties: decoded by Python
            if number % 9 == 0:
                properties["odd"] = "a\x01b"  # a value holding the name/value separator
            host = "[::1]:7" if number % 4 == 0 else "10.0.0.1:7"
            message = Message(
                "T", bytes([number]) * number, number % 3, properties=properties, born_host=host
            )
            store.put(message, store_timestamp=STAMP)
        store.wait_dispatched()
        fast, slow = _read_both_ways(store)
    finally:
        store.close()
    assert fast == slow
    pulls = [run for run in fast[:3] if isinstance(run, tuple)]
    assert any(messages for _status, _next, messages in pulls)


def _ext(properties: object, msg_id: object = "ID", commit_log_offset: object = 0) -> MessageExt:
    return MessageExt(
        "T",
        0,
        0,
        commit_log_offset,  # type: ignore[arg-type]
        100,
        b"",
        properties,  # type: ignore[arg-type]
        msg_id,  # type: ignore[arg-type]
        0,
        0,
        0,
        0,
        "h:1",
        0,
        "h:1",
        0,
        0,
    )


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.binary(max_size=200),
        st.lists(st.tuples(st.text(max_size=8), st.text(max_size=12)), max_size=6).map(
            lambda pairs: "\x02".join(f"{k}\x01{v}" for k, v in pairs).encode()
        ),
    )
)
def test_lazy_properties_parse_raw_bytes_as_the_python_decoder(raw: bytes) -> None:
    """The C reads leave a record's properties as bytes in the slot; the first read of
    ``properties`` parses them (ASCII in C, other text by decode_properties) and keeps
    the dict. Any bytes, well-formed or not, give what the Python decoder gives."""
    message = _ext(raw)
    first = message.properties
    assert first == properties_module.decode_properties(raw)
    assert message.properties is first  # parsed once, then kept
    assert message == _ext(properties_module.decode_properties(raw))


def test_lazy_properties_keep_what_is_set_and_refuse_other_objects() -> None:
    given_dict = {"KEYS": "a b"}
    message = _ext(given_dict)
    assert message.properties is given_dict  # a dict is kept as given
    assert message.keys == "a b" and message.key_list == ["a", "b"]
    assert pickle.loads(pickle.dumps(_ext(b"TAGS\x01x"))).tags == "x"
    assert dataclasses.replace(_ext(b"TAGS\x01x"), topic="U").properties == {"TAGS": "x"}
    descriptor = vars(MessageExt)["properties"]
    with pytest.raises(TypeError, match="doesn't apply"):
        descriptor.__get__(object())
    assert native is not None
    with pytest.raises(TypeError, match="slots"):
        native.LazyProperties(property(lambda self: 0), properties_module.decode_properties)
    with pytest.raises(dataclasses.FrozenInstanceError):
        message.properties = {}  # type: ignore[misc]


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from([4, 16]).flatmap(lambda ip: st.binary(min_size=ip + 4, max_size=ip + 4)),
    st.integers(0, 2**63 - 1),
)
def test_lazy_msg_id_is_made_from_the_store_host_bytes_as_in_python(
    host: bytes, offset: int
) -> None:
    """The C reads leave a record's raw store host (IPv4 or IPv6, and port) in the msg_id
    slot; the first read makes the offsetMsgId from it and commit_log_offset, as the
    Python codec does, and keeps it."""
    message = _ext({}, host, offset)
    first = message.msg_id
    assert first == message_id_module.offset_msg_id_from_bytes(host, offset)
    assert message.msg_id is first  # made once, then kept
    assert message == _ext({}, first, offset)


def test_lazy_msg_id_keeps_what_is_set_and_refuses_other_objects() -> None:
    host = bytes([10, 0, 0, 1, 0, 0, 0x2A, 0x9E])
    assert _ext({}, "GIVEN", 5).msg_id == "GIVEN"
    want = message_id_module.offset_msg_id_from_bytes(host, 5)
    assert pickle.loads(pickle.dumps(_ext({}, host, 5))).msg_id == want
    assert dataclasses.replace(_ext({}, host, 5), commit_log_offset=6).msg_id == want
    assert want in repr(_ext({}, host, 5))
    with pytest.raises(TypeError, match="int commit_log_offset"):
        _ext({}, host, "5").msg_id  # noqa: B018 (the read is the test)
    descriptor = vars(MessageExt)["msg_id"]
    with pytest.raises(TypeError, match="doesn't apply"):
        descriptor.__get__(object())
    offset_slot = vars(MessageExt)["commit_log_offset"]
    assert native is not None
    with pytest.raises(TypeError, match="slots"):
        native.LazyMsgId(property(lambda self: 0), offset_slot)
    with pytest.raises(TypeError, match="slots"):
        native.LazyMsgId(vars(MessageExt)["topic"], property(lambda self: 0))

    @dataclasses.dataclass(slots=True)
    class Other:
        offset: int

    with pytest.raises(TypeError, match="one class"):
        native.LazyMsgId(vars(MessageExt)["topic"], vars(Other)["offset"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        _ext({}, host, 5).msg_id = "X"  # type: ignore[misc]


def test_messages_read_in_c_parse_properties_only_when_asked(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path, _config()) as store:
        put = store.put(Message("T", b"x", properties={"KEYS": "k", "note": "ünï"}))
        store.wait_dispatched()
        store.get_messages("g", "T", 0, 0, 1)  # teaches the C decoder the topic and host
        (message,) = store.get_messages("g", "T", 0, 0, 1).messages
        assert message.properties == {"KEYS": "k", "note": "ünï"}
        assert message.msg_id == put.msg_id


def test_pulls_across_files_agree_both_ways(tmp_path: Path) -> None:
    # Bodies of up to 4 KiB in 64 KiB files: pulls of 7 reach across file ends, where the
    # one-call pull (pull_messages) leaves the batch to the Python path.
    store = MessageStore.open(str(tmp_path), _config())
    try:
        for number in range(120):
            body = bytes([number]) * (number * 37 % 4096)
            properties = {"KEYS": f"k{number}", "TAGS": "AB"[number % 2]}
            store.put(Message("T", body, number % 3, properties=properties))
        store.wait_dispatched()
        assert len(store.commitlog.files.files) > 3
        fast, slow = _read_both_ways(store)
    finally:
        store.close()
    assert fast == slow


def test_java_hash_matches_python() -> None:
    assert native is not None
    texts = ["", "a", "TopicA#key-1", "Töpic#ü", "😀 astral", "\ud800 lone", "x" * 1000]
    for text in texts:
        with _python_paths():
            want = javahash_module.java_string_hash(text)
        assert native.java_hash(text) == want


# --- index ----------------------------------------------------------------------------


def _index_bytes(path: Path, calls: list[list[int]], garbage: int) -> bytes:
    index_file = index_module.IndexFile(str(path), 7, 400, writable=True, create=True)
    try:
        # Leftover bytes in a slot (a number past the file's entries) must be ignored.
        index_file._file.mm[40 + 4 * 3 : 40 + 4 * 4] = garbage.to_bytes(4, "big")
        done = 0
        for hashes in calls:
            key_hashes = np.array(hashes, dtype=np.int64)
            offsets = np.arange(done, done + len(hashes), dtype=np.int64) * 10
            stamps = STAMP + np.arange(done, done + len(hashes), dtype=np.int64) * 1500
            index_file.put_keys_bulk(key_hashes, offsets, stamps)
            done += len(hashes)
        return bytes(index_file._file.mm)
    finally:
        index_file.close()


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=60), max_size=6),
    st.sampled_from([0, 5, 10_000]),
)
def test_index_puts_agree_both_ways(
    tmp_path_factory: pytest.TempPathFactory, calls: list[list[int]], garbage: int
) -> None:
    directory = tmp_path_factory.mktemp("index")
    fast = _index_bytes(directory / "20000000000000000000", calls, garbage)
    with _python_paths():
        slow = _index_bytes(directory / "20000000000000000001", calls, garbage)
    assert fast == slow


_verbatim_texts = st.lists(
    st.tuples(st.sampled_from(["KEYS", "TAGS", "WAIT", "CLUSTER", "ключ"]), _values), max_size=5
).map(lambda pairs: "".join(f"{k}\x01{v}\x02" for k, v in pairs))


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.tuples(_verbatim_texts, st.booleans()), min_size=1, max_size=8))
def test_verbatim_properties_write_the_same_bytes_both_ways(
    tmp_path_factory: pytest.TempPathFactory, texts: list[tuple[str, bool]]
) -> None:
    """A broker batch's VerbatimProperties (a trailing separator, repeated names) take the
    C encoder, which writes their text as the Python path does."""
    batch = [
        Message(
            "T",
            b"x",
            properties=properties_module.VerbatimProperties(text[:-1] if cut else text),
            born_timestamp=STAMP,
        )
        for text, cut in texts
    ]
    _same_both_ways(tmp_path_factory.mktemp("verbatim"), [batch, batch[:1]])


def test_verbatim_properties_are_encoded_in_c_and_other_dict_types_are_not() -> None:
    assert native is not None
    known: tuple[Any, ...] = (
        {"T": b"T"},
        {"127.0.0.1:50000": bytes(8)},
        {},
        bytes(8),
        4 << 20,
        1 << 23,
        1 << 30,
    )
    args = (*known, True, 0)
    text = "KEYS\x01k\x02KEYS\x01k2\x02"
    verbatim = Message("T", b"x", properties=properties_module.VerbatimProperties(text))
    blob, _meta, _keys, _bytes = native.encode_batch([verbatim], Message, *args)
    assert bytes(blob).endswith(len(text).to_bytes(2, "big") + text.encode())

    class WithText(dict[str, str]):
        text = "not the properties"

    other = Message("T", b"x", properties=WithText(KEYS="k"))
    assert native.encode_batch([other], Message, *args) is None  # the Python path's
    delayed = properties_module.VerbatimProperties("DELAY\x013")
    assert native.encode_batch([Message("T", b"x", properties=delayed)], Message, *args) is None


# --- the registry: each C entry point against the stub and its pure-Python twin --------

_STUB = Path(native_module.__file__).with_name("_native.pyi")


def _stub_signatures() -> dict[str, tuple[int, int] | None]:
    """Each function of the stub with its (required, total) positional parameters (the
    widest of its overloads), each class with None."""
    found: dict[str, tuple[int, int] | None] = {}
    for node in ast.parse(_STUB.read_text()).body:
        if isinstance(node, ast.FunctionDef):
            params = node.args.posonlyargs + node.args.args
            required = len(params) - len(node.args.defaults)
            known = found.get(node.name) or (required, len(params))
            found[node.name] = (min(known[0], required), max(known[1], len(params)))
        elif isinstance(node, ast.ClassDef):
            found[node.name] = None
    return found


def _method_table() -> set[str]:
    return {n for n in dir(native) if not n.startswith("_") and callable(getattr(native, n))}


_COUNT = re.compile(r"takes (?:exactly |at least |at most )?(\d+|one|no) argument")


def _arity_in_message(call: object, count: int) -> int:
    with pytest.raises(TypeError) as caught:
        call(*[None] * count)  # type: ignore[operator]
    match = _COUNT.search(str(caught.value))
    assert match is not None, str(caught.value)
    words = {"one": 1, "no": 0}
    return words[match.group(1)] if match.group(1) in words else int(match.group(1))


def test_the_stub_is_the_method_table() -> None:
    stub = _stub_signatures()
    assert set(stub) == _method_table()
    for name, arity in stub.items():
        if arity is None:
            continue
        required, total = arity
        function = getattr(native, name)
        if required > 0:
            assert _arity_in_message(function, 0) == required, name
        assert _arity_in_message(function, total + 1) == total, name


def test_every_entry_point_is_bound_once_with_its_twin() -> None:
    from rocketstore.files import native_io  # binds the file I/O entry points

    assert native is not None
    assert native_io.write_batch is native.write_batch
    assert set(native_module.REGISTRY) == _method_table()
    for name, entry in native_module.REGISTRY.items():
        assert getattr(importlib.import_module(entry.module), name) is getattr(native, name)
        if entry.twin.startswith("none: "):
            continue
        module_name, _, qualname = entry.twin.partition(":")
        twin: object = importlib.import_module(module_name)
        for part in qualname.split("."):
            twin = getattr(twin, part)
        assert callable(twin), entry


def _store_files(root: Path) -> list[bytes]:
    """The CommitLog, consume queue and index files, in path order (index files by their
    order: their names are the clock's)."""
    found: list[bytes] = []
    for part in ("commitlog", "consumequeue", "index"):
        paths = sorted(p for p in (root / part).rglob("*") if p.is_file())
        found += [p.read_bytes() for p in paths]
    return found


def _store_workload(root: Path) -> tuple[list[object], list[bytes]]:
    """Puts of every kind, dispatch, reads, key queries and time searches, then an
    abnormal recovery and the reads again: what each entry point is on the path of."""
    config = _config().replace(message_index_enable=True)
    seen: list[object] = []
    with MessageStore.open(str(root), config) as store:
        for number in range(70):  # about 3 files
            properties = {"KEYS": f"k{number} shared", "TAGS": "AB"[number % 2]}
            if number % 5 == 0:
                properties["note"] = "ünïcode"
            host = "[::1]:7" if number % 4 == 0 else "10.0.0.1:7"
            message = Message(
                "T",
                bytes([number]) * (number * 97 % 3000),
                number % 3,
                properties=properties,
                born_host=host,
                born_timestamp=number,
            )
            seen.append(store.put(message, store_timestamp=STAMP + number))
        batch = [Message("T", b"b" * i, 1, properties={"KEYS": f"b{i}"}) for i in range(20)]
        for message in batch:
            message.born_timestamp = 5
        seen.append(store.put_batch(batch, store_timestamp=STAMP + 50))
        columns = store.put_columns(
            "T",
            [bytes([i]) * 200 for i in range(30)],
            queue_ids=[i % 3 for i in range(30)],
            keys=[f"c{i}" for i in range(30)],
            tags="C",
            born_timestamp=7,
            store_timestamp=STAMP + 60,
        )
        for field in dataclasses.fields(columns):  # (arrays, as lists to compare)
            value = getattr(columns, field.name)
            seen.append(value.tolist() if isinstance(value, np.ndarray) else value)
        store.wait_dispatched()
        seen += _everything_read(store)
        seen += [store.query_messages("T", f"{k}{n}") for k in "bc" for n in range(0, 30, 4)]
        seen += [
            store.offset_by_time("T", queue_id, STAMP + delta, boundary)
            for queue_id in range(3)
            for delta in (-1, 0, 13, 50, 61)
            for boundary in ("lower", "upper")
        ]
    (root / "abort").touch()  # the next open recovers abnormally: CRC checks, queue rebuild
    with MessageStore.open(str(root), config) as store:
        store.wait_dispatched()
        seen += _everything_read(store)
    return seen, _store_files(root)


@pytest.fixture(scope="module")
def all_in_c(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[object], list[bytes]]:
    return _store_workload(tmp_path_factory.mktemp("all_in_c"))


@pytest.mark.parametrize("name", sorted(native_module.REGISTRY))
def test_each_twin_does_what_its_entry_point_does(
    tmp_path: Path, all_in_c: tuple[list[object], list[bytes]], name: str
) -> None:
    with native_module.python_only(name):
        outcome = _store_workload(tmp_path)
    assert outcome[0] == all_in_c[0]
    assert outcome[1] == all_in_c[1]


def test_all_twins_together_do_what_the_extension_does(
    tmp_path: Path, all_in_c: tuple[list[object], list[bytes]]
) -> None:
    with native_module.python_only():
        assert _store_workload(tmp_path) == all_in_c
