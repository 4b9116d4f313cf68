"""A master's side of replication (RocketMQ 4.9's HAService and HAConnection).

Layer: broker. Listens on haListenPort; for each slave that connects, reads its reports
(:func:`~rocketstore.format.ha.last_report`: the first says where to start, later ones
acknowledge) and streams the CommitLog to it from there in transfers of at most
haTransferBatchSize bytes, one file at a time, with a heartbeat (an empty transfer) when
idle. A slave that reports 0 (an empty store) gets the master's first file that still
exists (RocketMQ starts it at the newest file; the issue asks for all that is kept).
A slave that reports more than this master has (it followed an old master further) gets
heartbeats at this master's end, which a rocketstore slave takes as the point to cut back
to and a 4.9.8 Java slave refuses (it logs the offsets and connects again) instead of
appending this master's later bytes after its own; logged once per connection.

SYNC_MASTER puts wait until some slave has acknowledged their end offset (RocketMQ's
GroupTransferService: every waiting put is answered by the same acknowledgement),
FLUSH_SLAVE_TIMEOUT after slaveTimeout, and SLAVE_NOT_AVAILABLE at once when no slave is
connected or the best one is haSlaveFallbehindMax or more behind (HAService.isSlaveOK).
One verdict, :meth:`ReplicationMaster._judge`, for both ways a put waits: a send's
:meth:`~ReplicationMaster.settle` on the loop, and a store submit's replication gate
(:meth:`~ReplicationMaster.request`, from any thread).

Runs in the broker's event loop; CommitLog reads are small copies out of the mapping.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import heapq
import itertools
import logging
import socket
import threading
import time
from collections.abc import Callable, Sequence

from rocketstore.broker.broker_config import BrokerConfig
from rocketstore.errors import CorruptDataError, StoreError
from rocketstore.format import ha
from rocketstore.put_path import PutResult
from rocketstore.status import PutStatus
from rocketstore.store import MessageStore

log = logging.getLogger(__name__)

# A connection's writer waits at most this long for new CommitLog data before it looks
# again (HAConnection's 100 ms; a put wakes it sooner).
IDLE_POLL_S = 0.1
WRITE_BUFFER_BYTES = 4 * 1024 * 1024
# The most CommitLog bytes a connection's writer sends (as haTransferBatchSize transfers)
# per look at the CommitLog: its per-look costs paid once per MiB, not once per 32 KiB.
SEND_RUN_BYTES = 1024 * 1024


class _Wait:
    """One put waiting for the verdict on its end offset."""

    __slots__ = ("done", "end_offset", "timer")

    def __init__(self, end_offset: int, done: Callable[[PutStatus], None]):
        self.end_offset = end_offset
        self.done = done
        self.timer: asyncio.TimerHandle | None = None


class ReplicationMaster:
    def __init__(self, store: MessageStore, config: BrokerConfig):
        self.store = store
        self.config = config
        self.server: asyncio.Server | None = None
        self.address = ""  # host:port slaves connect to (the registration's haServerAddr)
        self.connections: set[SlaveConnection] = set()
        # The highest offset any slave has acknowledged (push2SlaveMaxOffset).
        self.acked_offset = 0
        # Puts waiting for an acknowledgement, by end offset; every put's wait is in
        # _pending until answered (once: acknowledged, timed out or stopped).
        self._waiters: list[tuple[int, int, _Wait]] = []
        self._order = itertools.count()
        self._pending: set[_Wait] = set()
        self._lock = threading.Lock()  # _pending and _stopped: requests come from any thread
        self._stopped = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._data = asyncio.Event()

    async def start(self, sock: socket.socket, advertised_host: str) -> None:
        self._loop = asyncio.get_running_loop()
        self.server = await asyncio.start_server(self._accept, sock=sock)
        self.address = f"{advertised_host}:{sock.getsockname()[1]}"
        log.info("replication: master listening for slaves at %s", self.address)
        if self.config.broker_role == "SYNC_MASTER":
            # The store's submits wait for a slave too (an ASYNC_MASTER's do not).
            self.store.set_replication_gate(self)

    async def stop(self) -> None:
        if self.config.broker_role == "SYNC_MASTER":
            self.store.set_replication_gate(None)
        if self.server is not None:
            self.server.close()
        for connection in list(self.connections):
            connection.close()
        for connection in list(self.connections):
            with contextlib.suppress(Exception):
                await connection.done.wait()
        if self.server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.wait_closed(), 5)
        # Puts still waiting are answered (not acknowledged in time); later ones
        # SLAVE_NOT_AVAILABLE at once.
        with self._lock:
            self._stopped = True
            pending = list(self._pending)
        for wait in pending:
            self._answer(wait, PutStatus.FLUSH_SLAVE_TIMEOUT)
        self._waiters = []

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # Transfers queue up to this much before the writer waits for the slave (asyncio's
        # 64 KiB would wake it for every other 32 KiB transfer).
        writer.transport.set_write_buffer_limits(high=WRITE_BUFFER_BYTES)
        connection = SlaveConnection(self, reader, writer)
        self.connections.add(connection)
        log.info("replication: slave %s connected", connection.peer)
        try:
            await connection.run()
        finally:
            self.connections.discard(connection)
            log.info("replication: slave %s gone", connection.peer)

    # --- acknowledgements -------------------------------------------------------------

    def notify_append(self) -> None:
        """New CommitLog data: wake the connections' writers."""
        self._data.set()

    async def wait_data(self, timeout_s: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._data.wait(), timeout_s)
        self._data.clear()

    def acknowledged(self, offset: int) -> None:
        if offset <= self.acked_offset:
            return
        self.acked_offset = offset
        waiters = self._waiters
        while waiters and waiters[0][0] <= offset:
            _, _, wait = heapq.heappop(waiters)
            self._answer(wait, PutStatus.PUT_OK)

    def slave_ok(self, end_offset: int) -> bool:
        """HAService.isSlaveOK: a slave is connected and not too far behind."""
        return bool(self.connections) and (
            end_offset - self.acked_offset < self.config.ha_slave_fallbehind_max
        )

    def request(self, end_offset: int, done: Callable[[PutStatus], None]) -> None:
        """The store's replication gate (``MessageStore.set_replication_gate``, installed
        for a SYNC_MASTER): ``done`` gets this master's verdict on ``end_offset`` (see
        ``_judge``), called on the event loop; from any thread. Once stopped, or before
        started, SLAVE_NOT_AVAILABLE at once."""
        wait = self._new_wait(end_offset, done)
        if wait is None:
            done(PutStatus.SLAVE_NOT_AVAILABLE)
            return
        assert self._loop is not None
        try:
            self._loop.call_soon_threadsafe(self._judge, wait)
        except RuntimeError:  # the loop closed meanwhile
            self._answer(wait, PutStatus.SLAVE_NOT_AVAILABLE)

    async def replicated(self, end_offset: int) -> PutStatus:
        """PUT_OK once a slave has acknowledged ``end_offset``; FLUSH_SLAVE_TIMEOUT after
        slaveTimeout; SLAVE_NOT_AVAILABLE at once without a usable slave (``request``'s
        verdict, awaited on the loop)."""
        if end_offset <= self.acked_offset:
            return PutStatus.PUT_OK
        future: asyncio.Future[PutStatus] = asyncio.get_running_loop().create_future()

        def done(status: PutStatus) -> None:
            if not future.done():  # (the send's task may have been cancelled)
                future.set_result(status)

        wait = self._new_wait(end_offset, done)
        if wait is None:
            return PutStatus.SLAVE_NOT_AVAILABLE
        self._judge(wait)
        return await future

    def _new_wait(self, end_offset: int, done: Callable[[PutStatus], None]) -> _Wait | None:
        with self._lock:
            if self._loop is None or self._stopped:
                return None
            wait = _Wait(end_offset, done)
            self._pending.add(wait)
        return wait

    def _judge(self, wait: _Wait) -> None:
        """On the loop: the one verdict every SYNC_MASTER put gets (a send's ``settle``,
        a store submit's gate), as GroupTransferService and HAService.isSlaveOK give it:
        PUT_OK once some slave has acknowledged the end offset (every waiting put is
        answered by the same acknowledgement), SLAVE_NOT_AVAILABLE at once when no slave
        is connected or the best one is haSlaveFallbehindMax or more behind, and
        FLUSH_SLAVE_TIMEOUT after slaveTimeout."""
        self.notify_append()
        if wait.end_offset <= self.acked_offset:
            self._answer(wait, PutStatus.PUT_OK)
        elif not self.slave_ok(wait.end_offset):
            self._answer(wait, PutStatus.SLAVE_NOT_AVAILABLE)
        elif wait in self._pending:
            heapq.heappush(self._waiters, (wait.end_offset, next(self._order), wait))
            assert self._loop is not None
            wait.timer = self._loop.call_later(
                self.config.slave_timeout_ms / 1000,
                self._answer,
                wait,
                PutStatus.FLUSH_SLAVE_TIMEOUT,
            )

    def _answer(self, wait: _Wait, status: PutStatus) -> None:
        with self._lock:
            if wait not in self._pending:
                return  # answered already (acknowledged, then its timer; or stopped)
            self._pending.discard(wait)
        if wait.timer is not None:
            wait.timer.cancel()
        try:
            wait.done(status)
        except Exception:
            log.exception("replication: a put's completion failed")

    async def settle(self, results: Sequence[PutResult]) -> list[PutResult]:
        """The send's results as a SYNC_MASTER answers them: stored ones wait for the
        verdict (``replicated``) and take its status; an ASYNC_MASTER only wakes the
        writers. (Results a gated submit answered were judged already: acknowledged ones
        pass at once, failed ones are not stored-ok.)"""
        self.notify_append()
        stored = [r for r in results if r.ok]
        if not stored or self.config.broker_role != "SYNC_MASTER":
            return list(results)
        end = max(r.commit_log_offset + r.size for r in stored)
        status = await self.replicated(end)
        if status is PutStatus.PUT_OK:
            return list(results)
        return [dataclasses.replace(r, status=status) if r.ok else r for r in results]

    def runtime_info(self) -> dict[str, str]:
        """A master's figures for brokerStatus. RocketMQ 4.9.8 reports none there (its
        GET_BROKER_RUNTIME_INFO has no HA keys; HAService keeps ``push2SlaveMaxOffset`` and
        ``slaveFallBehindMuch()`` for its log): the names are rocketstore's, after those."""
        max_offset = self.store.max_commit_log_offset()
        return {
            "haConnections": str(len(self.connections)),
            "haPush2SlaveMaxOffset": str(self.acked_offset),
            "haSlaveFallBehindBytes": str(max(0, max_offset - self.acked_offset))
            if self.connections
            else "0",
        }


class SlaveConnection:
    """One slave: a reader task for its reports, a writer task for the transfers
    (HAConnection's ReadSocketService and WriteSocketService)."""

    def __init__(
        self, master: ReplicationMaster, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ):
        self.master = master
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.request_offset: int | None = None  # the slave's first report
        self.ack_offset = -1
        self.reported_beyond = False  # logged once: the slave reported more than we have
        self._requested = asyncio.Event()
        self.last_read = time.monotonic()
        self.done = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        self.writer.close()

    async def run(self) -> None:
        self._tasks = [
            asyncio.create_task(self._read_reports()),
            asyncio.create_task(self._transfer()),
        ]
        try:
            await asyncio.wait(self._tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.close()
            for task in self._tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            self.done.set()

    async def _read_reports(self) -> None:
        buf = bytearray()
        config = self.master.config
        while True:
            timeout = config.ha_housekeeping_interval_ms / 1000
            try:
                chunk = await asyncio.wait_for(self.reader.read(65536), timeout)
            except TimeoutError:
                log.warning("replication: slave %s silent for %.0f s; closing", self.peer, timeout)
                return
            except OSError as e:
                log.info("replication: reading from slave %s failed: %s", self.peer, e)
                return
            if not chunk:
                return
            self.last_read = time.monotonic()
            buf += chunk
            try:
                offset, used = ha.last_report(buf)
            except CorruptDataError as e:
                log.error("replication: slave %s: %s; closing", self.peer, e)
                return
            del buf[:used]
            if offset is None:
                continue
            self.ack_offset = offset
            end = self.master.store.max_commit_log_offset()
            if offset > end:
                # Data this master never had: it is no acknowledgement of anything here.
                self._beyond(offset, end)
                if self.request_offset is None:
                    self.request_offset = offset
                    self._requested.set()
                continue
            if self.request_offset is None:
                self.request_offset = offset
                self._requested.set()
                log.info("replication: slave %s asks for data from %d", self.peer, offset)
            self.master.acknowledged(offset)

    def _beyond(self, offset: int, end: int) -> None:
        if self.reported_beyond:
            return
        self.reported_beyond = True
        log.warning(
            "replication: slave %s reports CommitLog offset %d, %d bytes past this master's "
            "end %d: it holds data this master never had; sending it heartbeats at %d (a "
            "rocketstore slave cuts back to there, a 4.9.8 slave connects again)",
            self.peer,
            offset,
            offset - end,
            end,
            end,
        )

    def _start_offset(self) -> int:
        assert self.request_offset is not None
        if self.request_offset != 0:
            return self.request_offset
        return max(self.master.store.min_commit_log_offset(), 0)

    async def _transfer(self) -> None:
        await self._requested.wait()
        master = self.master
        config = master.config
        next_offset = self._start_offset()
        log.info("replication: sending slave %s the CommitLog from %d", self.peer, next_offset)
        last_write = time.monotonic()
        told_end = False
        while True:
            end = master.store.max_commit_log_offset()
            if next_offset > end:
                # The slave has more than this master: tell it where this master ends.
                heartbeat_s = config.ha_send_heartbeat_interval_ms / 1000
                if told_end and time.monotonic() - last_write < heartbeat_s:
                    await master.wait_data(min(IDLE_POLL_S, heartbeat_s))
                    continue
                self.writer.write(ha.encode_transfer_header(end, 0))
                told_end = True
                last_write = time.monotonic()
                try:
                    await self.writer.drain()
                except OSError as e:
                    log.info("replication: writing to slave %s failed: %s", self.peer, e)
                    return
                continue
            try:
                sent = self._send_from(next_offset)
            except StoreError as e:
                log.error("replication: reading the CommitLog at %d failed: %s", next_offset, e)
                return
            if sent is None:
                log.error(
                    "replication: slave %s needs %d, which this master no longer has; closing",
                    self.peer,
                    next_offset,
                )
                return
            now = time.monotonic()
            if sent:
                next_offset += sent
            elif now - last_write >= config.ha_send_heartbeat_interval_ms / 1000:
                self.writer.write(ha.encode_transfer_header(next_offset, 0))
            else:
                await master.wait_data(
                    min(IDLE_POLL_S, config.ha_send_heartbeat_interval_ms / 1000)
                )
                continue
            last_write = now
            try:
                await self.writer.drain()
            except OSError as e:
                log.info("replication: writing to slave %s failed: %s", self.peer, e)
                return

    def _send_from(self, offset: int) -> int | None:
        """Write transfers of what the CommitLog holds from ``offset`` (to its file's end,
        at most SEND_RUN_BYTES), each at most haTransferBatchSize; the bytes sent, or None
        when ``offset`` is below the first file. Straight from the mapping, the run's
        headers and bodies in one ``writelines``: uvloop sends them with one writev and
        holds views of what the socket does not take at once (asyncio joins them first);
        a header and a body written one by one went out as two sends a transfer with
        TCP_NODELAY, 64 a MiB of 32 KiB transfers once the slave kept up (the master's CPU
        a GiB 0.33-0.36 s against 0.36-0.49, alternating runs at load 1-2)."""
        batch = self.master.config.ha_transfer_batch_size
        with self.master.store.commitlog_data_view(offset, max(batch, SEND_RUN_BYTES)) as view:
            if view is None:
                return None
            size = len(view)
            frames: list[bytes | memoryview] = []
            for start in range(0, size, batch):
                piece = view[start : start + batch]
                frames.append(ha.encode_transfer_header(offset + start, len(piece)))
                frames.append(piece)
            self.writer.writelines(frames)
            for frame in frames:
                if isinstance(frame, memoryview):
                    frame.release()
            return size
