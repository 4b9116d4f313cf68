"""One remoting connection's protocol state, without I/O (h11's shape): bytes in, events
out; commands in, bytes out.

Layer: remoting. No sockets, no asyncio, no clock, no threads: the asyncio server and
client (rocketstore.broker.server, rocketstore.broker.client) and the blocking client
(:mod:`.blocking`) are drivers that move bytes between a socket and a
:class:`RemotingConnection` and act on its events, so framing, limits and matching are
decided once, here, and tested byte by byte without a socket.

What the connection decides:

- framing: a frame may arrive cut anywhere, and several may arrive in one read;
  :meth:`RemotingConnection.receive_data` returns the frames completed so far and keeps the
  rest;
- the frame limit: a length prefix below 4 or above ``max_frame_bytes`` is refused as soon
  as its 4 bytes are in, so a hostile peer cannot make the driver hold more than the limit;
- matching: a response is matched to the request this side sent with its opaque
  (:meth:`RemotingConnection.send_request`), or reported unmatched (the answer to a
  one-way request, or one the driver stopped waiting for: :meth:`RemotingConnection.forget`).

A protocol error (a bad length, header length, header JSON or serialize type) ends the
incoming stream, as a Java broker closes the channel: the driver gets one
:class:`ProtocolViolation` naming the reason, and later bytes are ignored. What a peer may
cost across connections (the server's serverPartialFramesMaxBytes, write-buffer water
marks, idle close) is the driver's business; :attr:`RemotingConnection.partial_frame_bytes`
and :attr:`RemotingConnection.incoming_frame_bytes` tell it what an unfinished frame holds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rocketstore.remoting.codec import (
    DEFAULT_MAX_FRAME_BYTES,
    ProtocolError,
    RemotingCommand,
    decode_command,
    encode_command,
    frame_length,
)

_PREFIX_BYTES = 4
# How many bytes of a frame whose length is refused its error shows.
_SHOWN_BYTES = 16


@dataclass(frozen=True)
class RequestReceived:
    """A whole request (or one-way request) from the peer."""

    command: RemotingCommand


@dataclass(frozen=True)
class ResponseReceived:
    """A whole response from the peer; ``request`` is the request of ours it answers, None
    when it answers nothing this side waits for (a one-way request, a forgotten one)."""

    command: RemotingCommand
    request: RemotingCommand | None


@dataclass(frozen=True)
class ProtocolViolation:
    """The peer broke the protocol (or closed inside a frame); nothing more is read."""

    error: ProtocolError

    @property
    def reason(self) -> str:
        return str(self.error)


@dataclass(frozen=True)
class AnsweredInline:
    """A request the connection's ``fast`` hook took and answered from its bytes alone
    (no command decoded): ``frame`` is the whole answer, to be written."""

    frame: bytes


Event = RequestReceived | ResponseReceived | ProtocolViolation | AnsweredInline

# A frame (without its length prefix) -> the whole answer frame, or None to decode it.
FastFrames = Callable[[bytes], bytes | None]


class RemotingConnection:
    """The protocol state of one connection, either side (a server and a client frame
    alike; only who sends requests differs)."""

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buffer = bytearray()  # bytes received and not yet returned as events
        self._pending: dict[int, RemotingCommand] = {}  # our requests awaiting answers
        self._violation: ProtocolViolation | None = None
        self._eof = False
        # The driver's hook for requests answered from their bytes (the broker's common
        # sends): tried on each whole frame first; None means the frame is decoded.
        self.fast: FastFrames | None = None

    # --- state ------------------------------------------------------------------------

    @property
    def broken(self) -> bool:
        """True once a protocol error (or end of stream) ended the incoming side."""
        return self._violation is not None or self._eof

    @property
    def partial_frame_bytes(self) -> int:
        """Bytes of a frame not yet whole that this connection holds (its length prefix
        included); 0 between frames."""
        return len(self._buffer)

    @property
    def incoming_frame_bytes(self) -> int | None:
        """The length the unfinished frame announced (what follows its prefix), None
        between frames or while the prefix itself is incomplete."""
        if len(self._buffer) < _PREFIX_BYTES:
            return None
        return frame_length(self._buffer, self.max_frame_bytes)

    @property
    def pending_opaques(self) -> frozenset[int]:
        """The opaques of our requests that await an answer."""
        return frozenset(self._pending)

    # --- incoming ---------------------------------------------------------------------

    def receive_data(self, data: bytes | bytearray | memoryview) -> list[Event]:
        """The events the bytes ``data`` complete, in order; bytes of an unfinished frame
        are kept for the next call. Never raises for what the peer sent: a protocol error
        is the last event, and later calls return nothing."""
        if self.broken:
            return []
        self._buffer += data
        events: list[Event] = []
        position = 0
        buffer = self._buffer
        while len(buffer) - position >= _PREFIX_BYTES:
            start = position + _PREFIX_BYTES
            try:
                try:
                    length = frame_length(buffer[position:start], self.max_frame_bytes)
                except ProtocolError as e:
                    # The bytes themselves say who sent them (4 zero bytes then an offset:
                    # an HA stream, not a remoting peer).
                    seen = bytes(buffer[position : position + _SHOWN_BYTES]).hex(" ")
                    raise ProtocolError(f"{e} (the frame starts {seen})") from e
                assert length is not None
                if len(buffer) < start + length:
                    break
                with memoryview(buffer) as view:
                    frame = bytes(view[start : start + length])
                if self.fast is not None:
                    answer = self.fast(frame)
                    if answer is not None:
                        position = start + length
                        events.append(AnsweredInline(answer))
                        continue
                command = decode_command(frame)
            except ProtocolError as e:
                self._violation = ProtocolViolation(e)
                events.append(self._violation)
                self._buffer = bytearray()
                return events
            position = start + length
            events.append(self._event(command))
        if position:
            del buffer[:position]
        return events

    def receive_eof(self) -> list[ProtocolViolation]:
        """The peer closed its side: a ProtocolViolation if it left a frame unfinished."""
        if self.broken:
            return []
        self._eof = True
        if not self._buffer:
            return []
        held = len(self._buffer)
        if held < _PREFIX_BYTES:
            reason = f"connection closed inside a frame prefix ({held} of 4 bytes)"
        else:
            reason = (
                f"connection closed inside a frame ({held - _PREFIX_BYTES} of "
                f"{self.incoming_frame_bytes} bytes)"
            )
        self._buffer = bytearray()
        self._violation = ProtocolViolation(ProtocolError(reason))
        return [self._violation]

    def _event(self, command: RemotingCommand) -> Event:
        if not command.is_response:
            return RequestReceived(command)
        return ResponseReceived(command, self._pending.pop(command.opaque, None))

    # --- outgoing ---------------------------------------------------------------------

    def send_request(self, cmd: RemotingCommand) -> bytes:
        """The frame of a request of ours; unless it is one-way, its opaque is remembered
        so the peer's answer comes back as a ResponseReceived naming it (a second request
        with the same opaque takes the first's place)."""
        if cmd.is_response:
            raise ValueError(f"send_request got a response (code {cmd.code})")
        data = encode_command(cmd)
        if not cmd.is_oneway:
            self._pending[cmd.opaque] = cmd
        return data

    def send_response(self, cmd: RemotingCommand) -> bytes:
        """The frame of an answer to one of the peer's requests."""
        if not cmd.is_response:
            raise ValueError(f"send_response got a request (code {cmd.code})")
        return encode_command(cmd)

    def forget(self, opaque: int) -> RemotingCommand | None:
        """Stop waiting for the answer to our request ``opaque`` (a timeout, a failed
        write): a late answer is then reported unmatched. The request, if it waited."""
        return self._pending.pop(opaque, None)

    def forget_all(self) -> list[RemotingCommand]:
        """Every request still awaiting an answer, forgotten (the connection closed)."""
        pending, self._pending = list(self._pending.values()), {}
        return pending
