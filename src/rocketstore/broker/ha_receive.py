"""A slave's receive with the C extension: two threads, one receiving, one taking.

Layer: broker (``ha_slave``'s helper). The receiving thread runs rounds of
``_native.receive_round`` (receive, read the transfer headers, pwrite the bodies into the
CommitLog file past its data, the GIL let go) back to back; a taker thread checks and
takes each round's bytes (``MessageStore.take_replicated``) and reports the end to the
master. Taken on the receiving thread, the check of a round (0.5-2 ms for 3 MiB: the
pages mapped on first read, the GIL got back from the dispatcher) stopped the receive for
a third of its time. The rounds' bytes are handed over in order; the receiver writes past
what is not taken yet within one file, and waits for the taker at a file's end (the
store makes the next file) and before anything it does itself.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import socket
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from rocketstore.errors import CorruptDataError
from rocketstore.format import ha, native
from rocketstore.format.native import bind
from rocketstore.store import ReplicaWindow

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from rocketstore.broker.ha_slave import ReplicationSlave
    from rocketstore.format import _native as _c
else:
    _c = native.native if native.native is not None else native._Unbuilt()

receive_round = bind(
    _c.receive_round,
    "receive_round",
    "rocketstore.broker.ha_slave:ReplicationSlave._receive_python",
    module=__name__,
)

# The most one round writes before it hands its bytes to the taker (the round's GIL
# hand-offs and the store's Python are paid per round).
ROUND_BYTES = 4 * 1024 * 1024


class MasterBehindError(Exception):
    """A master's heartbeat at an offset below this slave's end: where the master ends."""

    def __init__(self, master_end: int, slave_end: int):
        super().__init__(f"master ends at {master_end}, this slave's CommitLog at {slave_end}")
        self.master_end = master_end


class MasterLink:
    """The connection to the master: a blocking socket its own thread reads
    (``ReplicationSlave._exchange``), as HAClient's thread does. On the event loop the
    receive paused while a worker thread appended (a read and an append never
    overlapped) and paid a loop turn and a thread hop per read: 0.35-0.45 of a raw
    copy's rate. ``close`` may come from any thread: the blocked receive then returns."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.closed = False

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def close(self) -> None:
        self.closed = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)


@dataclass
class Received:
    """A slave's receive buffer: what arrived and is not taken yet is ``buf[start:filled]``
    (a transfer still arriving, moved to the front when the tail has less than a read's
    room)."""

    buf: bytearray
    start: int = 0
    filled: int = 0


class Round:
    """Why a ``receive_round`` ended, past :class:`~rocketstore.format.ha.TransferStop`'s
    1-3 (0 never ends one)."""

    FILE_FULL = 4  # the next transfer does not fit the window's room
    CLOSED = 5
    WOULD_BLOCK = 6  # nothing more has arrived, or the heartbeat interval passed
    BUDGET = 7  # ROUND_BYTES written
    RECEIVE_FAILED = 8
    WRITE_FAILED = 9


class _Item(NamedTuple):
    offset: int  # -1: a heartbeat is due
    size: int
    drained: bool  # nothing more was waiting on the socket after it


class Taker:
    """The taker thread: each round's bytes checked and taken in order, the end reported
    once nothing more was waiting or REPORT_EVERY_S after the last report; a heartbeat
    item reports the end as it is. A failed take closes the link (the receiver's receive
    then returns) and is raised by ``finish``."""

    def __init__(self, slave: ReplicationSlave, link: MasterLink, report_every_s: float):
        self.slave = slave
        self.link = link
        self.report_every_s = report_every_s
        self._items: collections.deque[_Item] = collections.deque()
        self._cond = threading.Condition()
        self._busy = False
        self._done = False
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="rocketstore-ha-taker", daemon=True)
        self._thread.start()

    def put(self, offset: int, size: int, drained: bool) -> None:
        with self._cond:
            self._items.append(_Item(offset, size, drained))
            self._cond.notify()

    def heartbeat(self) -> None:
        self.put(-1, 0, True)

    def idle(self) -> bool:
        """Everything handed over is taken (only the receiver hands over: it stays so
        until the receiver's next ``put``)."""
        with self._cond:
            return not self._items and not self._busy

    def wait_idle(self) -> None:
        """Until everything handed over is taken (or a take failed)."""
        with self._cond:
            while (self._items or self._busy) and self.error is None:
                self._cond.wait()

    def finish(self) -> None:
        """Take what was handed over, stop the thread; raise a take's error."""
        with self._cond:
            self._done = True
            self._cond.notify_all()
        self._thread.join()
        if self.error is not None:
            raise self.error

    def _run(self) -> None:
        slave = self.slave
        last_report = time.monotonic()
        while True:
            with self._cond:
                while not self._items and not self._done:
                    self._cond.wait()
                if not self._items:
                    return
                item = self._items.popleft()
                self._busy = True
            try:
                if item.offset < 0:
                    last_report = slave._report(self.link, slave.store.max_commit_log_offset())
                    continue
                end = slave.store.take_replicated(
                    item.offset, item.size, check_crc=slave.config.ha_check_body_crc
                )
                due = item.drained or time.monotonic() - last_report >= self.report_every_s
                if end > slave.reported_offset and due:
                    last_report = slave._report(self.link, end)
            except BaseException as e:  # raised by finish, on the receiver's thread
                with self._cond:
                    self.error = e
                    self._items.clear()
                self.link.close()
                return
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()


def receive_piped(
    slave: ReplicationSlave,
    link: MasterLink,
    held: Received,
    read_bytes: int,
    heartbeat_s: float,
    housekeeping_s: float,
    report_every_s: float,
) -> None:
    """``ReplicationSlave._exchange`` with the C extension: rounds of ``receive_round`` on
    this thread, their bytes taken by a :class:`Taker`. Returns when the master closes or
    stays silent for ``housekeeping_s``, or the link is closed; raises what the master
    sent that cannot be appended (after the bytes before it are taken) or a take's error."""
    assert receive_round is not None
    store = slave.store
    taker = Taker(slave, link, report_every_s)
    sock = link.sock.fileno()
    try:
        window: ReplicaWindow | None = None
        last_read = last_beat = time.monotonic()
        while not link.closed:
            if window is None or window.room == 0:
                taker.wait_idle()  # (the store's end is the receiver's again)
                if taker.error is not None:
                    return
                window = store.replica_window()
                if window is None:  # an empty CommitLog: its first file comes with it
                    got, _ = slave._receive_python(link, held, True)
                    now = time.monotonic()
                    if got == 0:
                        log_closed(link)
                        return
                    if got > 0:
                        last_read = now
                        taker.heartbeat()  # (reports the new end)
                    elif now - last_read > housekeeping_s:
                        log_silent(housekeeping_s)
                        return
                    continue
            start, filled, _, appended, received, stop, at, error = receive_round(
                sock,
                held.buf,
                held.start,
                held.filled,
                window.offset,
                ha.MAX_TRANSFER_BODY,
                window.fd,
                window.position,
                window.room,
                ROUND_BYTES,
                read_bytes,
                True,
            )
            held.start, held.filled = start, filled
            now = time.monotonic()
            if appended:
                if stop == Round.WOULD_BLOCK and taker.idle():
                    # Nothing more waiting and nothing handed over: taken and reported
                    # here, without waking the taker (a send under SYNC_MASTER waits).
                    end = store.take_replicated(
                        window.offset, appended, check_crc=slave.config.ha_check_body_crc
                    )
                    slave._report(link, end)
                else:
                    taker.put(window.offset, appended, stop == Round.WOULD_BLOCK)
                window = window._replace(
                    offset=window.offset + appended,
                    position=window.position + appended,
                    room=window.room - appended,
                )
            if received or appended:
                last_read = now
                slave.refusal = ""  # the master's bytes follow this slave's
            elif stop == Round.WOULD_BLOCK and now - last_read > housekeeping_s:
                log_silent(housekeeping_s)
                return
            if now - last_beat >= heartbeat_s:
                taker.heartbeat()
                last_beat = now
            if stop in (Round.WOULD_BLOCK, Round.BUDGET):
                continue
            if stop == Round.FILE_FULL:
                if window.room:  # a transfer crossing its file's end (a master never
                    taker.wait_idle()  # sends one): the general append cuts it
                    slave._take_held(held)
                window = None
                continue
            if stop == Round.CLOSED:
                log_closed(link)
                return
            taker.wait_idle()  # the bytes before what stopped the round go in first
            if stop in (Round.RECEIVE_FAILED, Round.WRITE_FAILED):
                what = "receiving from the master" if stop == Round.RECEIVE_FAILED else "writing"
                raise OSError(error, f"{what}: {os.strerror(error)}")
            end = store.max_commit_log_offset()
            if stop == ha.TransferStop.BAD_HEADER:
                ha.decode_transfer(held.buf, start)  # raises CorruptDataError, named
                raise CorruptDataError("bad HA transfer header", position=start)
            if stop == ha.TransferStop.BEHIND:
                raise MasterBehindError(at, end)
            raise CorruptDataError(f"master sent offset {at}, this slave's CommitLog ends at {end}")
    finally:
        taker.finish()


def log_closed(link: MasterLink) -> None:
    """The master closed the connection (not this slave: nothing to say then)."""
    if not link.closed:
        log.info("replication: master closed the connection")


def log_silent(housekeeping_s: float) -> None:
    log.warning("replication: master silent for %.0f s; closing", housekeeping_s)
