"""The common SEND_BATCH_MESSAGE answered from its frame (processors.send_fast): the C
reader and answer writer against their Python twins, and whole batches against the
general path (send.send_batch), byte for byte: the answers, the stored records, the put
statistics and the queue offsets."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketstore.broker.codes import RequestCode
from rocketstore.broker.processors.message_batch import BatchEntry, encode_batch
from rocketstore.broker.processors.send_fast import (
    FastSend,
    batch_answer_python,
    batch_frame_python,
)
from rocketstore.broker.remoting import RemotingCommand
from rocketstore.broker.topic_config import MULTI_TAG, TopicConfig
from rocketstore.format import native
from rocketstore.remoting.codec import encode_command
from tests.unit.broker.broker_helpers import FakeConnection, call, make_context, send_v2
from tests.unit.broker.test_send_fast import _ints, _names, _values

needs_c = pytest.mark.skipif(native.batch_frame is None, reason="C extension not built")
CLUSTER = "DefaultCluster"
NOW_MS = 1_700_000_000_123


def batch_frame_of(ext: dict[str, Any], body: bytes, opaque: int = 77) -> bytes:
    """A batch frame as the server hands it to the hook: without its length prefix."""
    fields = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in ext.items()}
    cmd = RemotingCommand(RequestCode.SEND_BATCH_MESSAGE, opaque, ext_fields=fields, body=body)
    return encode_command(cmd)[4:]


def entry_text(pairs: list[tuple[str, str]]) -> str:
    """An entry's properties as RocketMQ's MessageDecoder writes them: name, 0x01, value,
    0x02 after each (a repeated name written again, as a client's map never holds it but
    a hand-made string may)."""
    return "".join(f"{name}\x01{value}\x02" for name, value in pairs)


def java_batch(topic: str, count: int, *, queue_id: int = 0, header_props: str = "") -> bytes:
    entries = [
        BatchEntry(
            0,
            f"m{i}".encode(),
            {},
            entry_text([("KEYS", f"k{i}"), ("TAGS", "t"), ("UNIQ_KEY", f"U{i:04d}")]),
        )
        for i in range(count)
    ]
    return batch_frame_of(
        send_v2(topic, queue_id=queue_id, properties=header_props), encode_batch(entries)
    )


@needs_c
def test_a_java_producers_batch_is_read_as_the_general_path_reads_it() -> None:
    frame = java_batch("T", 4, queue_id=1, header_props="WAIT\x01true\x02UNIQ_KEY\x01BATCH")
    fields = native.batch_frame(frame, CLUSTER)  # type: ignore[misc]
    assert fields is not None
    assert fields == batch_frame_python(frame, CLUSTER)
    batch_text = fields[7]
    assert "UNIQ_KEY" not in batch_text and f"CLUSTER\x01{CLUSTER}" in batch_text
    assert fields[9][2][0].startswith("KEYS\x01k0\x02TAGS\x01t\x02UNIQ_KEY\x01U0000\x02")


@needs_c
@pytest.mark.parametrize(
    "header_props",
    ["TRAN_MSG\x01true", "DELAY\x013", "TIMER_DELIVER_MS\x0199", "INNER_MULTI_DISPATCH\x01a"],
)
def test_batches_the_python_path_handles_otherwise_are_declined(header_props: str) -> None:
    frame = java_batch("T", 2, header_props=header_props)
    assert native.batch_frame(frame, CLUSTER) is None  # type: ignore[misc]
    assert batch_frame_python(frame, CLUSTER) is None


@needs_c
def test_empty_cut_and_single_sends_are_declined() -> None:
    assert native.batch_frame(batch_frame_of(send_v2("T"), b""), CLUSTER) is None  # type: ignore[misc]
    cut = java_batch("T", 2)[:-3]
    assert native.batch_frame(cut, CLUSTER) is None  # type: ignore[misc]
    assert batch_frame_python(cut, CLUSTER) is None
    single = RemotingCommand(
        RequestCode.SEND_MESSAGE_V2, 1, ext_fields={k: str(v) for k, v in send_v2("T").items()}
    )
    assert native.batch_frame(encode_command(single)[4:], CLUSTER) is None  # type: ignore[misc]


_pairs = st.lists(st.tuples(_names, _values), max_size=12)


@st.composite
def batch_bodies(draw: st.DrawFn) -> bytes:
    entries = [
        BatchEntry(
            draw(st.integers(-(2**31), 2**31 - 1)),
            draw(st.binary(max_size=20)),
            {},
            draw(
                st.one_of(
                    _pairs.map(entry_text),
                    _pairs.map(lambda ps: entry_text(ps)[:-1]),  # (no trailing separator)
                    st.just(""),
                )
            ),
        )
        for _ in range(draw(st.integers(0, 6)))
    ]
    body = encode_batch(entries)
    if draw(st.integers(0, 9)) == 0 and body:
        cut = draw(st.integers(0, len(body) - 1))
        body = body[:cut] + draw(st.binary(max_size=4))
    return body


@st.composite
def batch_frames(draw: st.DrawFn) -> bytes:
    ext: dict[str, Any] = {
        "a": "PG",
        "b": draw(st.sampled_from(["T", "%RETRY%G", "t\u00e9"])),
        "c": "TBW102",
    }
    for letter in "defgh":
        ext[letter] = draw(st.one_of(st.integers(-5, 40).map(str), _ints))
    for letter in "ijklmn":
        if draw(st.booleans()):
            ext[letter] = draw(st.one_of(_ints, st.sampled_from(["true", "false"]), _values))
    if draw(st.booleans()):
        ext["i"] = entry_text(draw(_pairs))
    ext = {k: ext[k] for k in draw(st.permutations(list(ext)))}
    header: dict[str, Any] = {
        "code": draw(st.sampled_from([320, 320, 320, 310, "320"])),
        "extFields": ext,
        "flag": draw(st.sampled_from([0, 0, 0, 1])),
        "language": "JAVA",
        "opaque": draw(st.integers(-(2**31), 2**31 - 1)),
        "serializeTypeCurrentRPC": "JSON",
        "version": draw(st.integers(0, 500)),
    }
    text = json.dumps(header, ensure_ascii=draw(st.booleans()), separators=(",", ":"))
    raw = text.encode("utf-8")
    return struct.pack(">i", len(raw)) + raw + draw(batch_bodies())


@needs_c
@settings(max_examples=500, deadline=None)
@given(batch_frames(), st.sampled_from([CLUSTER, "c\u00e9"]))
def test_the_c_reader_says_what_the_python_path_says_or_declines(
    frame: bytes, cluster: str
) -> None:
    fields = native.batch_frame(frame, cluster)  # type: ignore[misc]
    if fields is not None:
        assert fields == batch_frame_python(frame, cluster)


@needs_c
@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_are_declined_or_read_alike(data: bytes) -> None:
    fields = native.batch_frame(data, CLUSTER)  # type: ignore[misc]
    if fields is not None:
        assert fields == batch_frame_python(data, CLUSTER)


@needs_c
@settings(max_examples=200, deadline=None)
@given(
    st.integers(-(2**31), 2**31 - 1),
    st.integers(0, 2**31 - 1),
    st.sampled_from([bytes(8), b"\x7f\x00\x00\x01\x00\x00\x27\x1b", bytes(range(20))]),
    st.lists(st.integers(0, 2**63 - 1), min_size=1, max_size=80),
    st.integers(0, 2**31 - 1),
    st.integers(0, 2**62),
)
def test_the_c_batch_answer_is_the_python_answer(
    opaque: int, version: int, host: bytes, offsets: list[int], queue_id: int, offset: int
) -> None:
    column = np.array(offsets, dtype=np.int64)
    frame = native.batch_answer(opaque, version, host, column, queue_id, offset)  # type: ignore[misc]
    assert frame == batch_answer_python(opaque, version, host, offsets, queue_id, offset)


# --- whole batches, both ways --------------------------------------------------------------


def _records(root: Path) -> bytes:
    files = sorted((root / "commitlog").iterdir())
    data = files[0].read_bytes()
    return data[: data.find(b"\0" * 64)]


@st.composite
def batch_sends(draw: st.DrawFn) -> tuple[dict[str, Any], bytes]:
    """A batch send as a Java (4.x or 5.x) producer makes it, now and then one the general
    path must take (a retry topic, an unknown topic, a queue out of range, a delay)."""
    topic = draw(st.sampled_from(["T", "T", "T", "M", "NEW", "%RETRY%G"]))
    queue_id = draw(st.sampled_from([0, 1, 3, 9]))
    header = draw(
        st.sampled_from(
            ["", "WAIT\x01true", "WAIT\x01true\x02UNIQ_KEY\x01BATCHID", "DELAY\x012", "a\x01b"]
        )
    )
    count = draw(st.integers(1, 12))
    entries = []
    for i in range(count):
        pairs = [("KEYS", draw(st.sampled_from(["k1", "k1 k2", ""]))), ("TAGS", "tag")]
        pairs.append(("UNIQ_KEY", f"7F00000100002A9F0000{i:012d}"))
        pairs += draw(st.lists(st.tuples(_names, _values), max_size=3))
        body = draw(st.binary(min_size=0, max_size=64))
        entries.append(BatchEntry(draw(st.integers(0, 3)), body, {}, entry_text(pairs)))
    return send_v2(topic, queue_id=queue_id, properties=header), encode_batch(entries)


@needs_c
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(batch_sends(), min_size=1, max_size=6))
def test_batches_answered_inline_are_the_general_paths_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sends: list[tuple[dict[str, Any], bytes]]
) -> None:
    for where in ("rocketstore.put_path.now_ms", "rocketstore.commitlog.now_ms"):
        monkeypatch.setattr(where, lambda: NOW_MS)
    roots = [tmp_path / "fast", tmp_path / "general"]
    for root in roots:
        shutil.rmtree(root, ignore_errors=True)
    contexts = [make_context(root) for root in roots]
    for ctx in contexts:
        ctx.topics.update(TopicConfig("T"))
        ctx.topics.update(TopicConfig("M", topic_filter_type=MULTI_TAG))
    fast, general = contexts
    hook = FastSend(fast)
    conn = FakeConnection()
    taken = 0
    try:
        for ext, body in sends:
            frame = batch_frame_of(ext, body)
            answer = hook(frame, conn)  # type: ignore[arg-type]
            expected = encode_command(
                call(general, RequestCode.SEND_BATCH_MESSAGE, ext, body, conn)
            )
            if answer is None:
                # The server decodes it then: the general path, in the fast store too.
                answer = encode_command(call(fast, RequestCode.SEND_BATCH_MESSAGE, ext, body, conn))
            else:
                taken += 1
            assert answer == expected
        for ctx in contexts:
            ctx.store.flush()
        assert _records(roots[0]) == _records(roots[1])
        assert fast.stats.put.total == general.stats.put.total
        for topic in ("T", "M", "NEW"):
            for queue_id in range(4):
                assert fast.store.max_offset(topic, queue_id) == (
                    general.store.max_offset(topic, queue_id)
                )
        plain = [
            ext
            for ext, body in sends
            if ext["b"] in ("T", "M")
            and int(ext["e"]) < 4
            and "DELAY" not in ext.get("i", "")
            and b"DELAY\x01" not in body  # (a delayed entry: put_batch refuses the batch)
            and b"TRAN_MSG\x01" not in body
        ]
        # Every plain batch to a configured topic took the short way (a topic the general
        # path created on a first send takes it from then on).
        assert taken >= len(plain)
    finally:
        for ctx in contexts:
            ctx.store.close()
        for root in roots:
            shutil.rmtree(root, ignore_errors=True)


@needs_c
def test_sync_flush_keeps_the_general_path(tmp_path: Path) -> None:
    ctx = make_context(tmp_path / "s", flush_disk_type="SYNC_FLUSH")
    try:
        ctx.topics.update(TopicConfig("T"))
        assert FastSend(ctx)(java_batch("T", 3), FakeConnection()) is None  # type: ignore[arg-type]
    finally:
        ctx.store.close()
