"""The remoting frame codec: golden bytes built field by field, round trips, a fuzzed
decoder (only "incomplete" or ProtocolError may come out)."""

from __future__ import annotations

import contextlib
import json
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore.broker.remoting import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    SERIALIZE_ROCKETMQ,
    ProtocolError,
    RemotingCommand,
    RequestFieldError,
    coerce_ext_fields,
    decode_frame,
    encode_command,
    encode_header_json,
    ext_bool,
    ext_int,
    ext_str,
)


def test_encode_golden_bytes_field_by_field() -> None:
    cmd = RemotingCommand(code=0, opaque=7, flag=FLAG_RESPONSE, ext_fields={"offset": "12"})
    cmd.body = b"BODY"
    header = (
        b'{"code":0,"extFields":{"offset":"12"},"flag":1,"language":"JAVA","opaque":7,'
        b'"serializeTypeCurrentRPC":"JSON","version":0}'
    )
    expected = (
        struct.pack(">i", 4 + len(header) + 4)  # length of all that follows
        + struct.pack(">i", (0 << 24) | len(header))  # JSON, header length
        + header
        + b"BODY"
    )
    assert encode_command(cmd) == expected


def test_decode_json_request_with_loose_types() -> None:
    header = json.dumps(
        {
            "code": 310,
            "language": "CPP",
            "version": 431,
            "opaque": 99,
            "flag": 0,
            "extFields": {"b": "T", "e": 3, "k": False, "x": None, "d": 4.0},
        }
    ).encode()
    frame = struct.pack(">ii", 4 + len(header) + 2, len(header)) + header + b"hi"
    decoded = decode_frame(frame + b"extra")
    assert decoded is not None
    cmd, used = decoded
    assert used == len(frame)
    assert (cmd.code, cmd.opaque, cmd.flag, cmd.language, cmd.version) == (310, 99, 0, "CPP", 431)
    assert cmd.ext_fields == {"b": "T", "e": "3", "k": "false", "d": "4.0"}
    assert cmd.body == b"hi"
    assert ext_int(cmd.ext_fields, "d") == 4
    assert not ext_bool(cmd.ext_fields, "k")


def test_decode_binary_rocketmq_header_field_by_field() -> None:
    ext = struct.pack(">h", 5) + b"topic" + struct.pack(">i", 2) + b"TA"
    remark = b"hello"
    header = (
        struct.pack(">h", 11)  # code
        + struct.pack(">b", 0)  # language JAVA
        + struct.pack(">h", 433)  # version
        + struct.pack(">i", 5)  # opaque
        + struct.pack(">i", FLAG_ONEWAY)  # flag
        + struct.pack(">i", len(remark))
        + remark
        + struct.pack(">i", len(ext))
        + ext
    )
    frame = struct.pack(">ii", 4 + len(header), (SERIALIZE_ROCKETMQ << 24) | len(header)) + header
    decoded = decode_frame(frame)
    assert decoded is not None
    cmd = decoded[0]
    assert (cmd.code, cmd.language, cmd.version, cmd.opaque) == (11, "JAVA", 433, 5)
    assert cmd.is_oneway and not cmd.is_response
    assert cmd.remark == "hello"
    assert cmd.ext_fields == {"topic": "TA"}


def test_incomplete_frames_return_none() -> None:
    frame = encode_command(RemotingCommand(code=34, body=b"x" * 10))
    for cut in range(len(frame)):
        assert decode_frame(frame[:cut]) is None


@pytest.mark.parametrize(
    ("frame", "reason"),
    [
        (struct.pack(">i", 2) + b"\0\0", "below the minimum"),
        (struct.pack(">i", 1 << 30), "exceeds the limit"),
        (struct.pack(">ii", 8, 100) + b"{}{}", "header length 100"),
        (struct.pack(">ii", 6, 2) + b"[]", "must be a JSON object"),
        (struct.pack(">ii", 6, 2) + b"{]", "not UTF-8 JSON"),
        (struct.pack(">ii", 6, (9 << 24) | 2) + b"{}", "unknown serialize type 9"),
        (struct.pack(">ii", 16, 12) + b'{"code":"x"}', "'code' must be an integer"),
    ],
)
def test_malformed_frames_name_the_problem(frame: bytes, reason: str) -> None:
    with pytest.raises(ProtocolError, match=reason):
        decode_frame(frame)


def test_a_header_without_code_is_request_type_0() -> None:
    # As fastjson reads it into a Java RemotingCommand: code and opaque 0.
    header = b'{"opaque":7}'
    decoded = decode_frame(struct.pack(">ii", 4 + len(header), len(header)) + header)
    assert decoded is not None
    cmd, _rest = decoded
    assert (cmd.code, cmd.opaque, cmd.flag) == (0, 7, 0)


def test_response_echoes_opaque_and_stringifies_ext() -> None:
    request = RemotingCommand(code=14, opaque=42, version=400)
    response = request.response(0, None, {"offset": 17, "ok": True})
    assert response.opaque == 42 and response.is_response
    assert response.ext_fields == {"offset": "17", "ok": "true"}
    header = encode_command(response)[8:]
    assert json.loads(header)["extFields"] == {"offset": "17", "ok": "true"}


def test_ext_helpers_name_missing_or_bad_fields() -> None:
    with pytest.raises(RequestFieldError, match="'topic'"):
        ext_str({}, "topic")
    with pytest.raises(RequestFieldError, match="'queueId' must be an integer"):
        ext_int({"queueId": "x"}, "queueId")
    with pytest.raises(RequestFieldError, match="boolean"):
        ext_bool({"order": "maybe"}, "order")
    assert ext_bool({"order": "1"}, "order")
    assert ext_int({}, "queueId", 3) == 3
    with pytest.raises(ProtocolError):
        coerce_ext_fields([1, 2])


_text = st.text(max_size=20)
_commands = st.builds(
    RemotingCommand,
    code=st.integers(-(2**15), 2**15 - 1),
    opaque=st.integers(-(2**31), 2**31 - 1),
    flag=st.integers(0, 3),
    remark=st.none() | _text,
    ext_fields=st.dictionaries(_text, _text, max_size=5),
    body=st.binary(max_size=64),
    language=st.sampled_from(["JAVA", "CPP", "PYTHON"]),
    version=st.integers(0, 1000),
)


@given(_commands)
def test_encode_decode_round_trip(cmd: RemotingCommand) -> None:
    frame = encode_command(cmd)
    decoded = decode_frame(frame)
    assert decoded is not None
    assert decoded == (cmd, len(frame))


def _json_dumps_header(cmd: RemotingCommand) -> bytes:
    """The header as it was written before encode_header_json put it together itself."""
    header: dict[str, object] = {
        "code": cmd.code,
        "extFields": {k: str(v) for k, v in cmd.ext_fields.items()},
        "flag": cmd.flag,
        "language": cmd.language,
        "opaque": cmd.opaque,
        "serializeTypeCurrentRPC": "JSON",
        "version": cmd.version,
    }
    if cmd.remark is not None:
        header["remark"] = cmd.remark
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8", "replace")


# Any text: quotes, backslashes, control characters, non-ASCII, lone surrogates.
_any_text = st.text(st.characters(codec=None), max_size=12)


@settings(max_examples=300)
@given(
    _commands,
    st.dictionaries(_any_text, _any_text | st.integers(), max_size=4),
    st.none() | _any_text,
    _any_text,
)
def test_header_bytes_are_json_dumps_bytes(
    cmd: RemotingCommand, ext: dict[str, object], remark: str | None, language: str
) -> None:
    cmd.ext_fields = ext  # type: ignore[assignment]  # str() of other values, as before
    cmd.remark = remark
    cmd.language = language
    assert encode_header_json(cmd) == _json_dumps_header(cmd)


@settings(max_examples=500)
@given(st.binary(max_size=200))
def test_decoder_fuzz_only_incomplete_or_protocol_error(data: bytes) -> None:
    try:
        result = decode_frame(data, max_frame_bytes=1024)
    except ProtocolError:
        return
    if result is not None:
        assert 0 < result[1] <= len(data)


@settings(max_examples=300)
@given(st.binary(max_size=120), st.sampled_from([0, 1]))
def test_decoder_fuzz_well_framed_garbage_headers(header: bytes, serialize: int) -> None:
    frame = struct.pack(">ii", 4 + len(header), (serialize << 24) | len(header)) + header
    with contextlib.suppress(ProtocolError):
        decode_frame(frame)
