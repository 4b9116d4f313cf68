"""The common pull answered from its frame (processors.pull_fast): the C header reader and
answer writer against their Python twins, and whole pulls against the general path, byte
for byte (the answers, the committed offsets, the stats)."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketstore.broker.acl import AclConfig
from rocketstore.broker.codes import RequestCode
from rocketstore.broker.context import BrokerContext
from rocketstore.broker.processors.pull_fast import (
    FastFrames,
    FastPull,
    pull_answer_python,
    pull_frame_python,
)
from rocketstore.broker.remoting import RemotingCommand
from rocketstore.broker.stats import LatencyHistogram
from rocketstore.broker.topic_config import TopicConfig
from rocketstore.format import native
from rocketstore.format.message import Message
from rocketstore.remoting.codec import encode_command
from tests.unit.broker.broker_helpers import FakeConnection, call, heartbeat, make_context

needs_c = pytest.mark.skipif(native.pull_frame is None, reason="C extension not built")

NAMES = [
    "consumerGroup",
    "topic",
    "queueId",
    "queueOffset",
    "maxMsgNums",
    "sysFlag",
    "commitOffset",
    "suspendTimeoutMillis",
    "subscription",
    "expressionType",
    "subVersion",
]


def frame_of(code: int, ext: dict[str, Any], opaque: int = 77, version: int = 0) -> bytes:
    """A frame as the server hands it to the hook: without its length prefix."""
    fields = {k: str(v) for k, v in ext.items()}
    return encode_command(RemotingCommand(code, opaque, ext_fields=fields, version=version))[4:]


def pull_ext(topic: str = "T", **extra: object) -> dict[str, Any]:
    """A Java push consumer's pull (sysFlag: commit offset, suspend, subscription)."""
    return {
        "consumerGroup": "G",
        "topic": topic,
        "queueId": 0,
        "queueOffset": 0,
        "maxMsgNums": 32,
        "sysFlag": 0,
        "commitOffset": 0,
        "suspendTimeoutMillis": 15000,
        "subscription": "*",
        "subVersion": 0,
        "expressionType": "TAG",
        **extra,
    }


@needs_c
def test_a_java_consumers_pull_is_read_as_the_general_path_reads_it() -> None:
    frame = frame_of(RequestCode.PULL_MESSAGE, pull_ext(queueId=3, queueOffset=1234), version=395)
    fields = native.pull_frame(frame)  # type: ignore[misc]
    assert fields is not None
    assert fields == pull_frame_python(frame)
    assert fields[2:6] == ("G", "T", 3, 1234)


@needs_c
@pytest.mark.parametrize(
    "header",
    [
        b'{"code":11,"extFields":{},"flag":0}',  # fields missing
        b'{"code":011,"extFields":{},"flag":0}',
        b'{"code":11,"code":11,"extFields":{},"flag":0}',
        b'{"code":"11","extFields":{"consumerGroup":"G","topic":"T","queueId":"0",'
        b'"queueOffset":"0"}}',
        b'{"code":11,"extFields":{"consumerGroup":"G","topic":"T","queueId":"0",'
        b'"queueOffset":"0","queueId":"1"}}',
        b'{"code":11,"extFields":{"consumerGroup":"G","topic":"T","queueId":0,"queueOffset":"0"}}',
        b'{"code":310,"extFields":{"consumerGroup":"G","topic":"T","queueId":"0",'
        b'"queueOffset":"0"}}',
        b"[]",
        b"",
    ],
)
def test_odd_headers_are_declined(header: bytes) -> None:
    frame = struct.pack(">i", len(header)) + header
    assert native.pull_frame(frame) is None  # type: ignore[misc]


_ints = st.one_of(
    st.integers(-(2**63), 2**63 - 1).map(str),
    st.integers(-3, 40).map(str),
    st.sampled_from(["", "007", "+1", " 1", "1_0", "x", "1.0", "9223372036854775808"]),
)
_texts = st.one_of(
    st.sampled_from(["G", "T", "*", "TAG", "SQL92", "", "a || b", "%RETRY%G"]),
    st.text(st.characters(codec="utf-8", blacklist_categories=["Cs"]), max_size=6),
)


@st.composite
def pull_frames(draw: st.DrawFn) -> bytes:
    ext: dict[str, Any] = {}
    for name in NAMES:
        if draw(st.integers(0, 5)) == 0:
            continue
        if name in ("consumerGroup", "topic", "subscription", "expressionType"):
            ext[name] = draw(_texts)
        else:
            ext[name] = draw(_ints)
    if draw(st.integers(0, 5)) == 0:
        ext[draw(st.sampled_from(["lite", "zz", "bname"]))] = draw(
            st.one_of(_texts, st.integers(0, 3))
        )
    ext = {k: ext[k] for k in draw(st.permutations(list(ext)))}
    header: dict[str, Any] = {
        "code": draw(st.sampled_from([11, 11, 361, 310, "11"])),
        "extFields": ext,
        "flag": draw(st.sampled_from([0, 0, 0, 1, 2])),
        "language": draw(st.sampled_from(["JAVA", None, 3])),
        "opaque": draw(st.integers(-(2**31), 2**31 - 1)),
        "serializeTypeCurrentRPC": "JSON",
        "version": draw(st.integers(0, 500)),
    }
    if draw(st.booleans()):
        header["remark"] = draw(st.sampled_from([None, "r", {"x": 1}]))
    if draw(st.booleans()):
        header = {k: header[k] for k in draw(st.permutations(list(header)))}
    text = json.dumps(header, ensure_ascii=draw(st.booleans()), separators=(",", ":"))
    raw = text.encode("utf-8")
    return struct.pack(">i", len(raw)) + raw + draw(st.binary(max_size=8))


@needs_c
@settings(max_examples=600, deadline=None)
@given(pull_frames())
def test_the_c_reader_says_what_the_python_path_says_or_declines(frame: bytes) -> None:
    fields = native.pull_frame(frame)  # type: ignore[misc]
    if fields is not None:
        assert fields == pull_frame_python(frame)


@needs_c
def test_a_plain_java_pull_is_never_declined() -> None:
    for extra in ({}, {"queueOffset": -1, "subscription": "a || b"}, {"expressionType": ""}):
        frame = frame_of(RequestCode.PULL_MESSAGE, pull_ext(**extra))
        assert native.pull_frame(frame) is not None  # type: ignore[misc]


@needs_c
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_are_declined_or_read_alike(data: bytes) -> None:
    fields = native.pull_frame(data)  # type: ignore[misc]
    if fields is not None:
        assert fields == pull_frame_python(data)


@needs_c
@settings(max_examples=300, deadline=None)
@given(
    st.integers(-(2**31), 2**31 - 1),
    st.integers(0, 2**31 - 1),
    st.sampled_from([0, 1, 19, 20, 21, 24]),
    st.one_of(
        st.none(),
        st.sampled_from(["FOUND", "OFFSET_OVERFLOW_ONE", "NO_MATCHED_MESSAGE"]),
        st.text(st.characters(blacklist_categories=["Cs"]), max_size=30),
    ),
    st.tuples(*[st.integers(-(2**63), 2**63 - 1)] * 4),
    st.binary(max_size=300),
)
def test_the_c_answer_is_the_python_answer(
    opaque: int,
    version: int,
    code: int,
    remark: str | None,
    numbers: tuple[int, int, int, int],
    body: bytes,
) -> None:
    frame = native.pull_answer(opaque, version, code, remark, *numbers, body)  # type: ignore[misc]
    if remark is None or remark.isascii():
        assert frame is not None
    if frame is not None:
        assert frame == pull_answer_python(opaque, version, code, remark, *numbers, body)


# --- whole pulls, both ways ---------------------------------------------------------------

TAGS = ["a", "b", "c", None]


def _fill(ctx: BrokerContext) -> None:
    """Topics T (4 queues), M (tags), E (empty), the group's retry topic; a varied store."""
    ctx.topics.update(TopicConfig("T", read_queue_nums=4, write_queue_nums=4))
    ctx.topics.update(TopicConfig("E"))
    ctx.topics.update(TopicConfig("%RETRY%G", read_queue_nums=1, write_queue_nums=1))
    for i in range(90):
        tag = TAGS[i % 4]
        properties = {"UNIQ_KEY": f"K{i:04d}"}
        if tag is not None:
            properties["TAGS"] = tag
        topic = "%RETRY%G" if i % 9 == 0 else "T"
        queue_id = 0 if topic != "T" else i % 3
        message = Message(
            topic=topic,
            body=bytes([i]) * (10 + i),
            queue_id=queue_id,
            properties=properties,
            born_timestamp=1_700_000_000_000 + i,
        )
        ctx.store.put(message)
    ctx.store.wait_dispatched()


_pulls = st.fixed_dictionaries(
    {
        "consumerGroup": st.sampled_from(["G", "G", "G", "H"]),
        "topic": st.sampled_from(["T", "T", "T", "E", "%RETRY%G", "NONE"]),
        "queueId": st.integers(-1, 4),
        "queueOffset": st.one_of(st.integers(0, 40), st.sampled_from([-1, 1000])),
        "maxMsgNums": st.sampled_from([1, 3, 32, 0]),
        "sysFlag": st.sampled_from([0, 1, 2, 3, 4, 5, 6, 7]),
        "commitOffset": st.integers(-1, 30),
        "suspendTimeoutMillis": st.just(0),
        "subscription": st.sampled_from(["*", "a", "a || b", "c||zz", "", "a = 1"]),
        "subVersion": st.sampled_from([0, 1, 2**40]),
        "expressionType": st.sampled_from(["TAG", "TAG", "", "SQL92"]),
    }
)


@needs_c
def test_pulls_answered_inline_are_the_general_paths_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for where in ("rocketstore.put_path.now_ms", "rocketstore.commitlog.now_ms"):
        monkeypatch.setattr(where, lambda: 1_700_000_000_123)
    contexts = [make_context(tmp_path / name) for name in ("fast", "general")]
    for ctx in contexts:
        _fill(ctx)
        # Group G's push consumer subscribed T, the retry topic and E with tags.
        heartbeat(
            ctx,
            {"topic": "T", "subString": "a || b", "expressionType": "TAG", "subVersion": 1},
            {"topic": "%RETRY%G", "subString": "*", "expressionType": "TAG", "subVersion": 1},
            {"topic": "E", "subString": "*", "expressionType": "TAG", "subVersion": 1},
        )
    fast, general = contexts
    hook = FastPull(fast)
    conn = FakeConnection()
    taken: list[str] = []

    @settings(
        max_examples=250,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(_pulls, st.integers(-(2**31), 2**31 - 1))
    def check(ext: dict[str, Any], opaque: int) -> None:
        frame = frame_of(RequestCode.PULL_MESSAGE, ext, opaque=opaque)
        answer = hook(frame, conn)  # type: ignore[arg-type]
        request = {k: str(v) for k, v in ext.items()}
        expected = encode_command(_with_opaque(call(general, 11, request, conn=conn), opaque))
        if answer is None:
            # The server decodes it then: the general path, in the fast broker too.
            answer = encode_command(_with_opaque(call(fast, 11, request, conn=conn), opaque))
        else:
            taken.append(json.dumps(ext))
        assert answer == expected, ext
        assert fast.offsets.table() == general.offsets.table()
        assert _stats(fast) == _stats(general)

    try:
        check()
        assert len(taken) > 20  # most pulls here are answered inline
    finally:
        for ctx in contexts:
            ctx.store.close()


def _with_opaque(cmd: RemotingCommand, opaque: int) -> RemotingCommand:
    cmd.opaque = opaque
    return cmd


def _stats(ctx: BrokerContext) -> tuple[int, int, int]:
    stats = ctx.stats
    return stats.get.total, stats.found.total, stats.missed.total


@needs_c
def test_held_pulls_and_acl_keep_the_general_path(tmp_path: Path) -> None:
    ctx = make_context(tmp_path / "s")
    try:
        _fill(ctx)
        hook = FastPull(ctx)
        end = ctx.store.max_offset("T", 0)
        held = frame_of(11, pull_ext(queueOffset=end, sysFlag=6, commitOffset=5))
        assert hook(held, FakeConnection()) is None  # type: ignore[arg-type]
        not_held = frame_of(11, pull_ext(queueOffset=end, sysFlag=4))
        assert hook(not_held, FakeConnection()) is not None  # type: ignore[arg-type]
        found = frame_of(11, pull_ext(sysFlag=4))
        ctx.stats.rpc_latency = LatencyHistogram()
        assert hook(found, FakeConnection()) is None  # type: ignore[arg-type]
        ctx.stats.rpc_latency = None
        ctx.acl = AclConfig()
        assert hook(found, FakeConnection()) is None  # type: ignore[arg-type]
        ctx.acl = None
        offered: list[bytes] = []

        def send_half(frame: bytes, conn: object) -> None:
            offered.append(frame)

        both = FastFrames(send_half, hook)
        assert both(found, FakeConnection()) is not None  # type: ignore[arg-type]
        assert offered == []  # a Java pull goes to the pull half alone
        other_shape = found.replace(b'{"code":11,', b'{ "code":11,', 1)
        other_shape = struct.pack(">i", len(other_shape) - 4) + other_shape[4:]  # (no body)
        assert both(other_shape, FakeConnection()) is not None  # type: ignore[arg-type]
        assert offered == [other_shape]  # (tried as a send first)
        send = frame_of(RequestCode.SEND_MESSAGE_V2, {"a": "x"})
        assert both(send, FakeConnection()) is None  # type: ignore[arg-type]
        assert offered[-1] == send
    finally:
        ctx.store.close()
