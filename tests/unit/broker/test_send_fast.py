"""The common send answered from its frame (processors.send_fast): the C reader and answer
writer against their Python twins, and whole sends against the general path, byte for
byte (the answers and the records)."""

from __future__ import annotations

import json
import random
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore.broker.acl import AclConfig
from rocketstore.broker.codes import RequestCode
from rocketstore.broker.processors.send_fast import (
    FastSend,
    send_answer_python,
    send_frame_python,
)
from rocketstore.broker.remoting import RemotingCommand
from rocketstore.broker.stats import LatencyHistogram
from rocketstore.broker.topic_config import MULTI_TAG, TopicConfig
from rocketstore.format import native
from rocketstore.remoting.codec import encode_command
from rocketstore.remoting.connection import AnsweredInline, RemotingConnection
from tests.unit.broker.broker_helpers import FakeConnection, call, make_context, send_v2

needs_c = pytest.mark.skipif(native.send_frame is None, reason="C extension not built")
CLUSTER = "DefaultCluster"


def frame_of(cmd: RemotingCommand) -> bytes:
    """A frame as the server hands it to the hook: without its length prefix."""
    return encode_command(cmd)[4:]


def v2(ext: dict[str, Any], body: bytes = b"hello", opaque: int = 77) -> bytes:
    fields = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in ext.items()}
    return frame_of(
        RemotingCommand(RequestCode.SEND_MESSAGE_V2, opaque, ext_fields=fields, body=body)
    )


COMMON = "UNIQ_KEY\x017F0000011234\x02WAIT\x01true\x02TAGS\x01tagA\x02KEYS\x01k1 k2"


@needs_c
def test_a_java_producers_send_is_read_as_the_general_path_reads_it() -> None:
    frame = v2(send_v2("T", queue_id=2, properties=COMMON))
    fields = native.send_frame(frame, CLUSTER)  # type: ignore[misc]
    assert fields is not None
    assert fields == send_frame_python(frame, CLUSTER)
    properties = fields[8]
    assert "WAIT" not in properties and properties["CLUSTER"] == CLUSTER
    assert fields[9] == "7F0000011234"


@needs_c
@pytest.mark.parametrize(
    "properties",
    [
        "TRAN_MSG\x01true",
        "DELAY\x013",
        "TIMER_DELIVER_MS\x0199",
        "INNER_MULTI_DISPATCH\x01a,b",
        "TAGS\x01\u00e9t\u00e9",  # non-ASCII: the Python path's
    ],
)
def test_sends_the_python_path_handles_otherwise_are_declined(properties: str) -> None:
    frame = v2(send_v2("T", properties=properties))
    assert native.send_frame(frame, CLUSTER) is None  # type: ignore[misc]


@needs_c
@pytest.mark.parametrize(
    "header",
    [
        b'{"code":310,"extFields":{},"flag":0}',  # fields missing
        b'{"code":0310,"extFields":{},"flag":0}',  # json.loads refuses leading zeros
        b'{"code":310,"code":310,"extFields":{},"flag":0}',
        b'{"code":310.0,"extFields":{},"flag":0}',
        b"[]",
        b"",
    ],
)
def test_odd_headers_are_declined(header: bytes) -> None:
    frame = struct.pack(">i", len(header)) + header
    assert native.send_frame(frame, CLUSTER) is None  # type: ignore[misc]


_names = st.sampled_from(
    ["UNIQ_KEY", "WAIT", "TAGS", "KEYS", "CLUSTER", "DELAY", "TRAN_MSG", "a", "é", "x\x03"]
    + [f"user{i}" for i in range(20)]
)
_values = st.text(st.characters(codec="utf-8", blacklist_categories=["Cs"]), max_size=6)
_segments = st.lists(
    st.one_of(
        st.tuples(_names, _values).map(lambda kv: f"{kv[0]}\x01{kv[1]}"),
        st.text(max_size=4).filter(lambda s: all(ord(c) < 0xD800 or ord(c) > 0xDFFF for c in s)),
    ),
    max_size=16,
)
_ints = st.one_of(
    st.integers(-(2**63), 2**63 - 1).map(str),
    st.sampled_from(["", "007", "+1", " 1", "1_0", "x", "2147483648", "-2147483649"]),
)


@st.composite
def send_frames(draw: st.DrawFn) -> bytes:
    ext: dict[str, Any] = {
        "a": "PG",
        "b": draw(st.sampled_from(["T", "%RETRY%G", "t\u00e9", "T\n"])),
        "c": "TBW102",
    }
    for letter in "defgh":
        ext[letter] = draw(st.one_of(st.integers(-5, 40).map(str), _ints))
    for letter in "ijklmn":
        if draw(st.booleans()):
            ext[letter] = draw(
                st.one_of(_ints, st.sampled_from(["true", "false", "TRUE"]), _values)
            )
    if draw(st.booleans()):
        ext["i"] = "\x02".join(draw(_segments))
    if draw(st.integers(0, 9)) == 0:
        ext[draw(st.sampled_from(["topic", "zz", "o"]))] = "x"
    ext = {k: ext[k] for k in draw(st.permutations(list(ext)))}
    header: dict[str, Any] = {
        "code": draw(st.sampled_from([310, 310, 310, 10, 320, "310"])),
        "extFields": ext,
        "flag": draw(st.sampled_from([0, 0, 0, 1, 2])),
        "language": draw(st.sampled_from(["JAVA", None, 3])),
        "opaque": draw(st.integers(-(2**31), 2**31 - 1)),
        "serializeTypeCurrentRPC": "JSON",
        "version": draw(st.integers(0, 500)),
    }
    if draw(st.booleans()):
        header["remark"] = draw(st.sampled_from([None, "r", {"x": 1}]))
    text = json.dumps(header, ensure_ascii=draw(st.booleans()), separators=(",", ":"))
    raw = text.encode("utf-8")
    return struct.pack(">i", len(raw)) + raw + draw(st.binary(max_size=8))


@needs_c
@settings(max_examples=600, deadline=None)
@given(send_frames(), st.sampled_from([CLUSTER, "c\u00e9", "C\x01"]))
def test_the_c_reader_says_what_the_python_path_says_or_declines(
    frame: bytes, cluster: str
) -> None:
    fields = native.send_frame(frame, cluster)  # type: ignore[misc]
    if fields is not None:
        assert fields == send_frame_python(frame, cluster)


@needs_c
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_are_declined_or_read_alike(data: bytes) -> None:
    fields = native.send_frame(data, CLUSTER)  # type: ignore[misc]
    if fields is not None:
        assert fields == send_frame_python(data, CLUSTER)


@needs_c
@settings(max_examples=300, deadline=None)
@given(
    st.integers(-(2**31), 2**31 - 1),
    st.integers(0, 2**31 - 1),
    st.text(max_size=40),
    st.integers(0, 2**31 - 1),
    st.integers(0, 2**62),
    st.one_of(st.none(), st.text(st.characters(blacklist_categories=["Cs"]), max_size=40)),
)
def test_the_c_answer_is_the_python_answer(
    opaque: int, version: int, msg_id: str, queue_id: int, offset: int, tx: str | None
) -> None:
    msg_id = msg_id.encode("utf-8", "replace").decode("utf-8")
    frame = native.send_answer(opaque, version, msg_id, queue_id, offset, tx)  # type: ignore[misc]
    if frame is not None:
        assert frame == send_answer_python(opaque, version, msg_id, queue_id, offset, tx)


def test_the_connection_answers_inline_what_its_hook_takes() -> None:
    protocol = RemotingConnection()
    protocol.fast = lambda frame: b"answer" if frame.endswith(b"!") else None
    fast = encode_command(RemotingCommand(310, 1, body=b"!"))
    slow = encode_command(RemotingCommand(310, 2, body=b"?"))
    events = protocol.receive_data(fast + slow)
    assert events[0] == AnsweredInline(b"answer")
    assert [e.command.opaque for e in events[1:]] == [2]  # type: ignore[union-attr]


# --- whole sends, both ways ---------------------------------------------------------------

CASES: list[tuple[str, dict[str, Any], bool]] = [
    ("plain", send_v2("T", queue_id=1, properties=COMMON), True),
    ("no properties", send_v2("T"), True),
    ("cluster given", send_v2("T", properties="CLUSTER\x01x\x02UNIQ_KEY\x01u"), True),
    (
        "many names (a 32-slot map)",
        send_v2("T", properties="\x02".join(f"user{i}\x01v{i}" for i in range(14))),
        True,
    ),
    ("multi-tag topic", send_v2("M", properties="TAGS\x01a||b"), True),
    ("unknown topic (created)", send_v2("NEW", properties=COMMON), False),
    ("delay", send_v2("T", properties="DELAY\x012"), False),
    ("retry", send_v2("%RETRY%G", properties=COMMON), False),
    ("queue out of range", send_v2("T", queue_id=9), False),
    ("random queue", send_v2("T", queue_id=-1), False),
]


def _records(root: Path) -> bytes:
    files = sorted((root / "commitlog").iterdir())
    data = files[0].read_bytes()
    return data[: data.find(b"\0" * 64)]


@needs_c
def test_sends_answered_inline_are_the_general_paths_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for where in ("rocketstore.put_path.now_ms", "rocketstore.commitlog.now_ms"):
        monkeypatch.setattr(where, lambda: 1_700_000_000_123)
    contexts = [make_context(tmp_path / name) for name in ("fast", "general")]
    for ctx in contexts:
        ctx.topics.update(TopicConfig("T"))
        ctx.topics.update(TopicConfig("M", topic_filter_type=MULTI_TAG))
    fast, general = contexts
    hook = FastSend(fast)
    conn = FakeConnection()
    try:
        for label, ext, taken in CASES:
            frame = v2(ext, body=label.encode())
            answer = hook(frame, conn)  # type: ignore[arg-type]
            assert (answer is not None) == taken, label
            random.seed(label)  # (a negative queue id: the same random queue both ways)
            expected = encode_command(
                call(general, RequestCode.SEND_MESSAGE_V2, ext, label.encode(), conn)
            )
            if answer is None:
                # The server decodes it then: the general path, in the fast store too.
                random.seed(label)
                answer = encode_command(
                    call(fast, RequestCode.SEND_MESSAGE_V2, ext, label.encode(), conn)
                )
            assert answer == expected, label
        for ctx in contexts:
            ctx.store.flush()
        assert _records(tmp_path / "fast") == _records(tmp_path / "general")
        assert fast.stats.put.total == general.stats.put.total > 0
    finally:
        for ctx in contexts:
            ctx.store.close()


@needs_c
def test_acl_metrics_and_sync_flush_keep_the_general_path(tmp_path: Path) -> None:
    frame = v2(send_v2("T"))
    ctx = make_context(tmp_path / "s", flush_disk_type="SYNC_FLUSH")
    try:
        ctx.topics.update(TopicConfig("T"))
        assert FastSend(ctx)(frame, FakeConnection()) is None  # type: ignore[arg-type]
    finally:
        ctx.store.close()
    ctx = make_context(tmp_path / "a")
    try:
        ctx.topics.update(TopicConfig("T"))
        hook = FastSend(ctx)
        ctx.stats.rpc_latency = LatencyHistogram()
        assert hook(frame, FakeConnection()) is None  # type: ignore[arg-type]
        ctx.stats.rpc_latency = None
        ctx.acl = AclConfig()
        assert hook(frame, FakeConnection()) is None  # type: ignore[arg-type]
        ctx.acl = None
        assert hook(frame, FakeConnection()) is not None  # type: ignore[arg-type]
    finally:
        ctx.store.close()
