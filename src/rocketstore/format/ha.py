"""The master/slave replication wire codec of RocketMQ 4.9 (HAService / HAConnection), pure.

Layer: format (bytes <-> values; no sockets, no clock, no store). The broker's
:mod:`rocketstore.broker.ha_master` and :mod:`rocketstore.broker.ha_slave` move these bytes.

The protocol has no framing beyond the two shapes below, no magic and no version: both
sides must agree on it by configuration (brokerRole, haListenPort, haMasterAddress).

Slave to master, a *report* (HAClient.reportSlaveMaxOffset), sent on connect, after each
transfer it appended and every haSendHeartbeatInterval::

    0   8  MAX OFFSET   the slave's CommitLog max offset (big-endian signed long)

The master reads whatever reports have arrived and keeps only the last whole one
(HAConnection.ReadSocketService: ``position - position % 8``): the first one it reads is
where the slave asks the transfer to start, each later one an acknowledgement.

Master to slave, a *transfer* (HAConnection.WriteSocketService)::

    0   8  OFFSET       CommitLog offset of the body's first byte (big-endian signed long)
    8   4  BODY SIZE    bytes that follow (big-endian signed int); 0 is a heartbeat
    12  n  BODY         CommitLog bytes, exactly as the master's files hold them: record
                        boundaries are not respected (haTransferBatchSize cuts anywhere)

A transfer's body never crosses a CommitLog file (the master reads one file's written part
at a time). A Java slave reads transfers into a 4 MiB buffer, so a body larger than
``MAX_TRANSFER_BODY`` could never be taken whole by it: the decoder calls such a size
corrupt.

Decoders tell apart *incomplete* (:class:`~rocketstore.errors.IncompleteDataError`: wait
for more bytes) from *corrupt* (:class:`~rocketstore.errors.CorruptDataError` with the
position: close the connection).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from rocketstore.errors import ConfigError, CorruptDataError, IncompleteDataError
from rocketstore.format import native

REPORT_SIZE = 8
TRANSFER_HEADER_SIZE = 8 + 4
# HAService.HAClient.READ_MAX_BUFFER_SIZE: a Java slave's read buffer.
SLAVE_READ_BUFFER_BYTES = 4 * 1024 * 1024
MAX_TRANSFER_BODY = SLAVE_READ_BUFFER_BYTES - TRANSFER_HEADER_SIZE
# MessageStoreConfig.haTransferBatchSize's default: the most body bytes of one transfer.
DEFAULT_TRANSFER_BATCH_BYTES = 32 * 1024

_REPORT = struct.Struct(">q")
_HEADER = struct.Struct(">qi")


class Transfer(NamedTuple):
    """One decoded transfer: its CommitLog offset, its body (a view of the input) and the
    position just past it in the input."""

    offset: int
    body: memoryview
    end: int

    @property
    def is_heartbeat(self) -> bool:
        return len(self.body) == 0


def encode_report(max_offset: int) -> bytes:
    """The slave's 8-byte report of its CommitLog max offset."""
    if max_offset < 0:
        raise ConfigError(f"a reported offset must be >= 0, got {max_offset}")
    return _REPORT.pack(max_offset)  # 0  8  MAX OFFSET


def last_report(buf: bytes | bytearray | memoryview, position: int = 0) -> tuple[int | None, int]:
    """The last whole report in ``buf[position:]`` and the position past it (``None`` and
    ``position`` when fewer than 8 bytes are there). Earlier reports are superseded, as
    the Java master reads them; bytes of a report still arriving stay unconsumed.

    A negative offset is corrupt (a slave never has one)."""
    whole = (len(buf) - position) // REPORT_SIZE
    if whole <= 0:
        return None, position
    at = position + (whole - 1) * REPORT_SIZE
    (offset,) = _REPORT.unpack_from(buf, at)
    if offset < 0:
        raise CorruptDataError(f"slave reported a negative offset {offset}", position=at)
    return offset, at + REPORT_SIZE


def encode_transfer_header(offset: int, body_size: int) -> bytes:
    """A transfer's 12-byte header (a heartbeat is a header with size 0)."""
    if offset < 0:
        raise ConfigError(f"a transfer offset must be >= 0, got {offset}")
    if not 0 <= body_size <= MAX_TRANSFER_BODY:
        raise ConfigError(f"a transfer body must be 0..{MAX_TRANSFER_BODY} bytes, got {body_size}")
    # 0  8  OFFSET; 8  4  BODY SIZE
    return _HEADER.pack(offset, body_size)


def encode_transfer(offset: int, body: bytes | bytearray | memoryview) -> bytes:
    """A whole transfer: header and body."""
    return encode_transfer_header(offset, len(body)) + bytes(body)


def decode_transfer(buf: bytes | bytearray | memoryview, position: int = 0) -> Transfer:
    """The transfer starting at ``position``.

    IncompleteDataError when its header or body has not all arrived; CorruptDataError
    (with the position) for a negative offset or a body size outside
    0..``MAX_TRANSFER_BODY``."""
    available = len(buf) - position
    if available < TRANSFER_HEADER_SIZE:
        raise IncompleteDataError(TRANSFER_HEADER_SIZE, max(available, 0), "HA transfer header")
    offset, size = _HEADER.unpack_from(buf, position)
    if offset < 0:
        raise CorruptDataError(f"HA transfer with negative offset {offset}", position=position)
    if not 0 <= size <= MAX_TRANSFER_BODY:
        raise CorruptDataError(
            f"HA transfer body size {size} outside 0..{MAX_TRANSFER_BODY}", position=position
        )
    end = position + TRANSFER_HEADER_SIZE + size
    if len(buf) < end:
        raise IncompleteDataError(TRANSFER_HEADER_SIZE + size, available, "HA transfer")
    body = memoryview(buf)[position + TRANSFER_HEADER_SIZE : end]
    return Transfer(offset, body, end)


class TransferStop:
    """Why :func:`transfer_run` stopped."""

    INCOMPLETE = 0  # the next transfer has not all arrived (or none is left)
    BEHIND = 1  # a heartbeat below the CommitLog's end: the master is behind this slave
    NOT_FOLLOWING = 2  # a transfer that does not start where the CommitLog ends
    BAD_HEADER = 3  # a header no transfer can have (decode_transfer names it)


class TransferRun(NamedTuple):
    """What :func:`transfer_run` read: the data transfers' bodies that follow one another
    (views of the input), the first one's offset (-1 when none), the CommitLog's end after
    them, where the walk stopped in the input, why (:class:`TransferStop`) and, for BEHIND
    and NOT_FOLLOWING, the offending transfer's offset (else 0)."""

    bodies: list[memoryview]
    first_offset: int
    end: int
    position: int
    stop: int
    at: int


def transfer_run(buf: bytes | bytearray | memoryview, end: int) -> TransferRun:
    """The transfers at the start of ``buf`` for a CommitLog ending at ``end`` (0: an empty
    store, which takes any offset), read as a slave appends them: each, heartbeats too,
    must start where the one before ended. One C call for a whole receive when the
    extension is built (the twin below ran about 2 us of Python per transfer)."""
    if native.transfer_run is not None:
        return TransferRun(*native.transfer_run(buf, end, MAX_TRANSFER_BODY))
    return transfer_run_python(buf, end)


def transfer_run_python(buf: bytes | bytearray | memoryview, end: int) -> TransferRun:
    """:func:`transfer_run` in Python (the C ``transfer_run``'s twin)."""
    bodies: list[memoryview] = []
    first = -1
    position = 0
    while True:
        try:
            transfer = decode_transfer(buf, position)
        except IncompleteDataError:
            return TransferRun(bodies, first, end, position, TransferStop.INCOMPLETE, 0)
        except CorruptDataError:
            return TransferRun(bodies, first, end, position, TransferStop.BAD_HEADER, 0)
        offset = transfer.offset
        if transfer.is_heartbeat and offset < end:
            return TransferRun(bodies, first, end, position, TransferStop.BEHIND, offset)
        if end not in (0, offset):
            return TransferRun(bodies, first, end, position, TransferStop.NOT_FOLLOWING, offset)
        position = transfer.end
        if not transfer.is_heartbeat:
            bodies.append(transfer.body)
            if first < 0:
                first = offset
            end = offset + len(transfer.body)
