"""``_native.receive_round``, a slave's receive, header check and write in one call
without the GIL: over a socket pair and a file, it writes exactly the bodies
``transfer_run`` reads from the same bytes, keeps the rest in the buffer, and stops
where ``transfer_run`` stops (or at the file's room, the budget, the end of what came)."""

from __future__ import annotations

import os
import socket
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketstore.broker import ha_receive
from rocketstore.broker.ha_receive import Round as _Round
from rocketstore.format import ha

pytestmark = pytest.mark.skipif(
    ha_receive.receive_round is None, reason="the C extension is not built"
)

MAX_BODY = 64
END = 1000


def _frame(offset: int, size: int, body: bytes) -> bytes:
    return struct.pack(">qi", offset, size) + body


@st.composite
def _wires(draw: st.DrawFn) -> bytes:
    """Transfers from END on, mostly following one another; some heartbeats, and now
    and then one that stops a run (behind, not following, a bad header)."""
    out = b""
    at = END
    for _ in range(draw(st.integers(min_value=0, max_value=12))):
        kind = draw(st.sampled_from(["data"] * 6 + ["beat", "behind", "jump", "bad"]))
        if kind == "data":
            body = draw(st.binary(min_size=1, max_size=MAX_BODY))
            out += _frame(at, len(body), body)
            at += len(body)
        elif kind == "beat":
            out += _frame(at, 0, b"")
        elif kind == "behind":
            out += _frame(at - 1, 0, b"")
        elif kind == "jump":
            out += _frame(at + 3, 2, b"zz")
        else:  # (bad in any buffer: transfer_run_python's largest body is 4 MiB)
            out += _frame(at, -1, b"") if draw(st.booleans()) else _frame(-5, 1, b"q")
    return out


def _round(
    tmp_path: Path,
    wire: bytes,
    held: int,
    room: int,
    read_bytes: int,
    close: bool,
    budget: int = 1 << 30,
) -> tuple[tuple[int, ...], bytearray, bytes]:
    """``wire[:held]`` already in the buffer, the rest sent through a socket pair (then
    closed, or not); what the round answers, the buffer and what the file holds."""
    buf = bytearray(12 + MAX_BODY + read_bytes + 7)
    buf[:held] = wire[:held]
    a, b = socket.socketpair()
    path = tmp_path / "file"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("@ll", 0, 20_000))
        b.sendall(wire[held:])
        if close:
            b.close()
        assert ha_receive.receive_round is not None
        answer = ha_receive.receive_round(
            a.fileno(), buf, 0, held, END, MAX_BODY, fd, 5, room, budget, read_bytes, True
        )
        written = os.pread(fd, 1 << 20, 5)
    finally:
        os.close(fd)
        a.close()
        b.close()
    return answer, buf, written


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    wire=_wires(),
    held_share=st.floats(min_value=0, max_value=1),
    room=st.integers(min_value=0, max_value=400),
    read_bytes=st.integers(min_value=1, max_value=200),
    close=st.booleans(),
)
def test_a_round_writes_what_transfer_run_reads(
    tmp_path, wire, held_share, room, read_bytes, close
):
    held = min(int(len(wire) * held_share), 12 + MAX_BODY + read_bytes + 7)
    (start, filled, end, appended, received, stop, at, error), buf, written = _round(
        tmp_path, wire, held, room, read_bytes, close
    )
    assert error == 0
    got = wire[: held + received]  # (a stop may leave the rest in the socket)
    rest = bytes(buf[start:filled])
    assert got.endswith(rest)
    consumed = len(got) - len(rest)
    # What was taken from the buffer is whole transfers, their bodies written in order.
    taken = ha.transfer_run_python(got[:consumed], END)
    assert taken.position == consumed and taken.stop == ha.TransferStop.INCOMPLETE
    bodies = b"".join(bytes(b) for b in taken.bodies)
    assert written == bodies and appended == len(bodies) <= room
    assert end == END + appended
    # Where it stopped is where transfer_run stops on what follows, but for the room.
    after = ha.transfer_run_python(got[consumed:], end)
    if stop in (1, 2, 3):
        assert (stop, at) == (after.stop, after.at) and after.position == 0
    elif stop == _Round.FILE_FULL:
        nxt = after.bodies[0] if after.bodies else None
        assert appended == room or (nxt is not None and appended + len(nxt) > room)
    else:
        assert received == len(wire) - held
        assert after.bodies == [] and after.stop == ha.TransferStop.INCOMPLETE
        assert stop == (_Round.CLOSED if close else _Round.WOULD_BLOCK)


def test_a_round_stops_at_its_budget_and_the_next_goes_on(tmp_path: Path) -> None:
    bodies = [bytes([i]) * 50 for i in range(10)]
    wire = b""
    at = END
    for body in bodies:
        wire += _frame(at, len(body), body)
        at += len(body)
    answer, _, written = _round(tmp_path, wire, 0, 10_000, 62, close=True, budget=120)
    _start, _filled, end, appended, _, stop, _, _ = answer
    assert stop == _Round.BUDGET and 120 <= appended < 500
    assert written == b"".join(bodies)[:appended] and end == END + appended


def test_a_body_over_max_body_is_a_bad_header(tmp_path: Path) -> None:
    wire = _frame(END, 2, b"ok") + _frame(END + 2, MAX_BODY + 1, b"")
    answer, _, written = _round(tmp_path, wire, 0, 1000, 100, close=False)
    start, filled, end, appended, _, stop, _, _ = answer
    assert (stop, start, filled, end, appended) == (3, 14, len(wire), END + 2, 2)
    assert written == b"ok"


def test_bad_arguments_are_refused(tmp_path: Path) -> None:
    assert ha_receive.receive_round is not None
    a, b = socket.socketpair()
    with a, b:
        with pytest.raises(ValueError, match="bad arguments"):
            # A buffer too small for the largest transfer and a read behind it.
            ha_receive.receive_round(
                a.fileno(), bytearray(10), 0, 0, END, MAX_BODY, 0, 0, 10, 10, 4, False
            )
        with pytest.raises(ValueError, match="bad arguments"):
            ha_receive.receive_round(
                a.fileno(), bytearray(500), 5, 2, END, MAX_BODY, 0, 0, 10, 10, 4, False
            )


def test_a_failed_write_is_named_and_not_counted(tmp_path: Path) -> None:
    wire = _frame(END, 3, b"abc")
    a, b = socket.socketpair()
    with a, b:
        b.sendall(wire)
        buf = bytearray(1000)
        assert ha_receive.receive_round is not None
        fd = os.open(tmp_path / "ro", os.O_RDONLY | os.O_CREAT, 0o644)
        try:
            start, filled, end, appended, _, stop, _, error = ha_receive.receive_round(
                a.fileno(), buf, 0, 0, END, MAX_BODY, fd, 0, 100, 100, 500, False
            )
        finally:
            os.close(fd)
    assert stop == _Round.WRITE_FAILED and error == 9  # EBADF: not open for writing
    assert (start, filled, end, appended) == (0, len(wire), END, 0)
