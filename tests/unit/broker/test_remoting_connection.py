"""The sans-IO remoting connection, without sockets: frames cut anywhere give the same
events, arbitrary bytes give only events or one protocol error (never an exception),
answers are matched to requests by opaque, and the frame limit holds from the prefix on."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore.remoting.codec import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    SERIALIZE_ROCKETMQ,
    RemotingCommand,
    encode_command,
)
from rocketstore.remoting.connection import (
    Event,
    ProtocolViolation,
    RemotingConnection,
    RequestReceived,
    ResponseReceived,
)

_text = st.text(st.characters(codec="utf-8"), max_size=12)
_commands = st.builds(
    RemotingCommand,
    code=st.integers(-(2**15), 2**15 - 1),
    opaque=st.integers(0, 20),  # few opaques: repeated ones and unmatched answers occur
    flag=st.integers(0, 3),
    remark=st.none() | _text,
    ext_fields=st.dictionaries(_text, _text, max_size=3),
    body=st.binary(max_size=40),
    language=st.sampled_from(["JAVA", "PYTHON"]),
    version=st.integers(0, 500),
)


def _feed(conn: RemotingConnection, stream: bytes, cuts: list[int]) -> list[Event]:
    events: list[Event] = []
    start = 0
    for cut in [*sorted(set(cuts)), len(stream)]:
        events += conn.receive_data(stream[start:cut])
        start = cut
    return events


def _asking(requests: list[RemotingCommand], max_frame_bytes: int = 1 << 20) -> RemotingConnection:
    """A connection that sent ``requests`` (so answers to them are matched)."""
    conn = RemotingConnection(max_frame_bytes)
    for cmd in requests:
        if not cmd.is_response:
            conn.send_request(cmd)
    return conn


@settings(max_examples=200, deadline=None)
@given(st.lists(_commands, max_size=6), st.lists(_commands, max_size=6), st.data())
def test_frames_cut_anywhere_give_the_same_events(
    ours: list[RemotingCommand], theirs: list[RemotingCommand], data: st.DataObject
) -> None:
    stream = b"".join(encode_command(cmd) for cmd in theirs)
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=12))
    whole = _asking(ours).receive_data(stream)
    assert _feed(_asking(ours), stream, cuts) == whole
    assert [e.command for e in whole if isinstance(e, RequestReceived | ResponseReceived)] == theirs
    for event, cmd in zip(whole, theirs, strict=True):
        assert isinstance(event, ResponseReceived if cmd.is_response else RequestReceived)


@settings(max_examples=50, deadline=None)
@given(st.lists(_commands, min_size=1, max_size=4))
def test_frames_fed_byte_by_byte_give_the_same_events(theirs: list[RemotingCommand]) -> None:
    stream = b"".join(encode_command(cmd) for cmd in theirs)
    conn = RemotingConnection()
    events: list[Event] = []
    for i in range(len(stream)):
        events += conn.receive_data(stream[i : i + 1])
        assert conn.partial_frame_bytes == len(stream[: i + 1]) - sum(
            len(encode_command(e.command))
            for e in events
            if isinstance(e, RequestReceived | ResponseReceived)
        )
    assert events == RemotingConnection().receive_data(stream)
    assert conn.partial_frame_bytes == 0
    assert conn.receive_eof() == []


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=300), st.data())
def test_arbitrary_bytes_give_only_events_or_one_protocol_error(
    garbage: bytes, data: st.DataObject
) -> None:
    conn = RemotingConnection(max_frame_bytes=256)
    cuts = data.draw(st.lists(st.integers(0, len(garbage)), max_size=8))
    events = _feed(conn, garbage, cuts) + conn.receive_eof()
    violations = [i for i, e in enumerate(events) if isinstance(e, ProtocolViolation)]
    assert violations in ([], [len(events) - 1])
    if violations:
        assert conn.broken and conn.receive_data(b"\0" * 8) == []
    assert conn.receive_eof() == []


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=120), st.sampled_from([0, 1, 2, 0x7F]), st.data())
def test_well_framed_garbage_headers_give_a_command_or_a_protocol_error(
    header: bytes, serialize: int, data: st.DataObject
) -> None:
    frame = struct.pack(">ii", 4 + len(header), (serialize << 24) | len(header)) + header
    cuts = data.draw(st.lists(st.integers(0, len(frame)), max_size=4))
    (event,) = _feed(RemotingConnection(), frame, cuts)
    assert isinstance(event, RequestReceived | ResponseReceived | ProtocolViolation)


def test_answers_are_matched_to_requests_by_opaque() -> None:
    conn = RemotingConnection()
    asked = RemotingCommand(code=10, opaque=7)
    told = RemotingCommand(code=11, opaque=8, flag=FLAG_ONEWAY)
    assert conn.send_request(asked) == encode_command(asked)  # bytes unchanged
    assert conn.send_request(told) == encode_command(told)
    assert conn.pending_opaques == {7}  # a one-way request awaits nothing
    answer = RemotingCommand(code=0, opaque=7, flag=FLAG_RESPONSE, remark="ok")
    late = RemotingCommand(code=0, opaque=7, flag=FLAG_RESPONSE, remark="again")
    stray = RemotingCommand(code=0, opaque=8, flag=FLAG_RESPONSE)
    events = conn.receive_data(encode_command(answer) + encode_command(late))
    assert events == [ResponseReceived(answer, asked), ResponseReceived(late, None)]
    assert conn.receive_data(encode_command(stray)) == [ResponseReceived(stray, None)]
    assert conn.pending_opaques == frozenset()


def test_a_forgotten_request_is_answered_unmatched() -> None:
    conn = RemotingConnection()
    asked = RemotingCommand(code=10, opaque=3)
    conn.send_request(asked)
    assert conn.forget(3) is asked
    assert conn.forget(3) is None
    answer = RemotingCommand(code=0, opaque=3, flag=FLAG_RESPONSE)
    assert conn.receive_data(encode_command(answer)) == [ResponseReceived(answer, None)]
    conn.send_request(RemotingCommand(code=10, opaque=4))
    assert [c.opaque for c in conn.forget_all()] == [4]
    assert conn.pending_opaques == frozenset()


def test_requests_and_responses_go_out_by_their_own_call() -> None:
    conn = RemotingConnection()
    request = RemotingCommand(code=10, opaque=1)
    with pytest.raises(ValueError, match="got a request"):
        conn.send_response(request)
    with pytest.raises(ValueError, match="got a response"):
        conn.send_request(request.response(0))
    assert conn.send_response(request.response(0)) == encode_command(request.response(0))


def test_an_oversized_frame_is_refused_from_its_prefix() -> None:
    """The limit holds before the body arrives: nothing past the prefix is buffered."""
    conn = RemotingConnection(max_frame_bytes=1024)
    assert conn.receive_data(struct.pack(">i", 1025)[:3]) == []
    assert conn.partial_frame_bytes == 3 and conn.incoming_frame_bytes is None
    (event,) = conn.receive_data(struct.pack(">i", 1025)[3:])
    assert isinstance(event, ProtocolViolation)
    assert event.reason == (
        "frame length 1025 exceeds the limit of 1024 (the frame starts 00 00 04 01)"
    )
    assert conn.partial_frame_bytes == 0
    assert conn.receive_data(b"x" * 2000) == []


@pytest.mark.parametrize(
    ("frame", "reason"),
    [
        (struct.pack(">i", 3), "frame length 3 is below the minimum of 4"),
        (struct.pack(">ii", 5, 0) + b"x", "header is not UTF-8 JSON"),
        (struct.pack(">ii", 6, 2) + b"[]", "header must be a JSON object"),
        (struct.pack(">ii", 4, 9), "header length 9 exceeds the frame's 0 bytes"),
        (struct.pack(">ii", 4, 2 << 24), "unknown serialize type 2"),
        (struct.pack(">ii", 6, (SERIALIZE_ROCKETMQ << 24) | 2) + b"\0\0", "binary header"),
    ],
)
def test_protocol_errors_name_the_reason_and_end_the_stream(frame: bytes, reason: str) -> None:
    good = encode_command(RemotingCommand(code=10, opaque=1))
    conn = RemotingConnection()
    events = conn.receive_data(good + frame + good)
    assert isinstance(events[0], RequestReceived)  # what came before is still delivered
    assert isinstance(events[1], ProtocolViolation) and reason in events[1].reason
    assert len(events) == 2 and conn.broken
    assert conn.receive_data(good) == [] and conn.receive_eof() == []


def test_a_refused_length_shows_the_bytes_that_came() -> None:
    """A replication stream read as remoting frames (an HA heartbeat: 8-byte offset,
    4-byte size 0) is refused with its first 16 bytes in the reason, so the sender can
    be told from them."""
    heartbeat = struct.pack(">qi", 0x12345678, 0)
    (event,) = RemotingConnection().receive_data(heartbeat + b"\xff" * 20)
    assert isinstance(event, ProtocolViolation)
    assert event.reason == (
        "frame length 0 is below the minimum of 4 (the frame starts "
        "00 00 00 00 12 34 56 78 00 00 00 00 ff ff ff ff)"
    )


def test_an_unfinished_frame_tells_what_it_holds() -> None:
    big = encode_command(RemotingCommand(code=10, opaque=1, body=b"b" * 100_000))
    small = encode_command(RemotingCommand(code=10, opaque=2))
    conn = RemotingConnection()
    assert conn.incoming_frame_bytes is None and conn.partial_frame_bytes == 0
    events = conn.receive_data(small + big[:50_000])
    assert [type(e) for e in events] == [RequestReceived]
    assert conn.partial_frame_bytes == 50_000
    assert conn.incoming_frame_bytes == len(big) - 4
    assert len(conn.receive_data(big[50_000:] + small[:2])) == 1
    assert conn.partial_frame_bytes == 2 and conn.incoming_frame_bytes is None


@pytest.mark.parametrize(
    ("held", "reason"),
    [
        (2, "connection closed inside a frame prefix (2 of 4 bytes)"),
        (10, "connection closed inside a frame (6 of "),
    ],
)
def test_a_close_inside_a_frame_is_a_protocol_error(held: int, reason: str) -> None:
    conn = RemotingConnection()
    conn.receive_data(encode_command(RemotingCommand(code=10))[:held])
    (event,) = conn.receive_eof()
    assert event.reason.startswith(reason)
    assert conn.broken and conn.partial_frame_bytes == 0
