"""A slave's side of replication (RocketMQ 4.9's HAService.HAClient).

Layer: broker. Connects to the master's haListenPort (haMasterAddress, or the haServerAddr
the name servers answer the slave's registration with), reports its CommitLog max offset
(:func:`~rocketstore.format.ha.encode_report`) on connect, after each transfer it appended
and every haSendHeartbeatInterval, and appends each transfer's bytes at exactly the offset
the master gives (:meth:`MessageStore.append_replicated`: the files stay byte-identical to
the master's; the dispatcher builds queues and index from them).

A transfer whose offset is not the slave's end closes the connection and it connects again
(a slave with an empty store takes whatever file boundary the master starts at); so do a
corrupt frame (logged, nothing appended), a master silent for haHousekeepingInterval and
any I/O error, after a pause.

A slave whose CommitLog has more than its master's (it followed an old master further than
the new one got) is cut back to the master's end before it follows (RocketMQ 5's
AutoSwitchHAClient truncates; 4.9.8's HAClient would wait until the master passes its
offset and then append the master's later bytes, silently divergent). The master's end
comes from its GET_BROKER_RUNTIME_INFO (commitLogMaxOffset, on the remoting address the
name servers give) before each connection, or from a rocketstore master's heartbeat at its
own end, which it sends a slave reporting more. The cut
(:meth:`MessageStore.truncate_commitlog`) keeps the cut bytes in ``truncated-<time>/``
under the store and is logged; it is refused, loudly, when the master ends below this
slave's first CommitLog offset (an empty or new master disk would erase the whole copy)
unless haAllowFullTruncate, or when no record starts at the master's end here (the copies
differ earlier): the slave then follows nobody and keeps serving reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import time
from typing import cast

from rocketstore.broker.broker_config import BrokerConfig, signed
from rocketstore.broker.client import RemotingClient, RemotingClientError, request
from rocketstore.broker.codes import RequestCode, ResponseCode
from rocketstore.broker.timeouts import BackgroundLoop
from rocketstore.config import parse_host
from rocketstore.errors import ConfigError, CorruptDataError, StoreError
from rocketstore.format import ha
from rocketstore.store import MessageStore, TruncateStatus

log = logging.getLogger(__name__)

# The pause before connecting again (HAClient waits 5 s; tests shorten it).
RECONNECT_PAUSE_S = 1.0
CONNECT_TIMEOUT_S = 3.0
# The receive buffer (HAClient reads into 4 MiB): twice the largest transfer, so a
# transfer cut by the end of one read always fits behind what arrived before.
RECEIVE_BYTES = 8 * 1024 * 1024
# The most one receive takes: what arrived is appended while its bytes are still in the
# CPU's cache (copied into the page cache from an 8 MiB backlog, they came from memory:
# 1.2-1.4x the slave's CPU per byte and half its rate, measured side by side on 256 MiB).
READ_BYTES = 1024 * 1024
# What arrived is appended on the event loop up to this size (a few milliseconds of
# checking and copying at most), and on a worker thread past it or with SYNC_FLUSH (a
# sync would hold the loop): each hop to a thread and back waits for the scheduler, on a
# loaded machine longer than the append itself, while the master's bytes pile up.
INLINE_APPEND_BYTES = 4 * 1024 * 1024
# How long the master's GET_BROKER_RUNTIME_INFO answer is waited for.
RUNTIME_INFO_TIMEOUT_S = 3.0


class MasterBehindError(Exception):
    """A master's heartbeat at an offset below this slave's end: where the master ends."""

    def __init__(self, master_end: int, slave_end: int):
        super().__init__(f"master ends at {master_end}, this slave's CommitLog at {slave_end}")
        self.master_end = master_end


class MasterStream(asyncio.BufferedProtocol):
    """The connection to the master, received straight into one buffer of
    RECEIVE_BYTES, at most READ_BYTES at a time (asyncio's StreamReader copies every
    chunk into a growing buffer and out again: a third of a slave's CPU at 100+ MiB/s,
    and large fresh allocations fault their pages in each time). What is not taken yet
    (a transfer still arriving) stays where it is until the buffer's tail has no room
    for a whole read; then it moves to the front. Reading pauses while a worker thread
    reads the buffer (``pause``), and when it is full; the kernel's socket buffer holds
    what comes meanwhile."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._buf = bytearray(RECEIVE_BYTES)
        self._start = 0  # the first byte not taken yet
        self._filled = 0  # the end of what arrived
        self._paused = False
        self._arrived = asyncio.Event()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # (uvloop's transports have a Transport's methods but are not its subclasses: an
        # isinstance check here stopped every slave on the broker's default loop.)
        self.transport = cast(asyncio.Transport, transport)

    def get_buffer(self, sizehint: int) -> memoryview:
        return memoryview(self._buf)[self._filled : self._filled + READ_BYTES]

    def buffer_updated(self, nbytes: int) -> None:
        self._filled += nbytes
        self._arrived.set()
        if len(self._buf) - self._filled < READ_BYTES and not self._paused:
            self._compact()  # (not while paused: a worker thread may be reading)
            if len(self._buf) - self._filled < READ_BYTES:
                self.pause()  # full: until some of it is taken

    def eof_received(self) -> bool:
        self.closed = True
        self._arrived.set()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._arrived.set()

    def pause(self) -> None:
        """Stop reading until ``consumed`` (a worker thread is about to read the buffer,
        which a receive meanwhile could move)."""
        if not self._paused and self.transport is not None:
            self.transport.pause_reading()
            self._paused = True

    def _compact(self) -> None:
        left = self._filled - self._start
        if self._start and left:
            self._buf[:left] = self._buf[self._start : self._filled]
        self._start, self._filled = 0, left

    async def read(self, timeout_s: float) -> memoryview | None:
        """What arrived and is not taken yet, waiting up to ``timeout_s`` for new bytes;
        None when none came (``closed`` says whether the master closed the connection).
        The view is valid until ``consumed``, on the loop (or with ``pause``)."""
        if not self._arrived.is_set() and not self.closed:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), timeout_s)
        if not self._arrived.is_set() or self._filled == self._start:
            return None
        self._arrived.clear()
        return memoryview(self._buf)[self._start : self._filled]

    def consumed(self, used: int) -> None:
        """The first ``used`` bytes of the last ``read`` were taken (its view released);
        reading goes on."""
        self._start += used
        if self._start == self._filled:
            self._start = self._filled = 0
        elif len(self._buf) - self._filled < READ_BYTES:
            self._compact()
        if self._paused and self.transport is not None and not self.closed:
            self._paused = False
            self.transport.resume_reading()

    def write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class ReplicationSlave(BackgroundLoop):
    def __init__(
        self,
        store: MessageStore,
        config: BrokerConfig,
        *,
        reconnect_pause_s: float | None = None,
    ):
        self.store = store
        self.config = config
        self.master_address = config.ha_master_address or ""
        self.reconnect_pause_s = reconnect_pause_s
        # The master's remoting address (the name servers' masterAddr), asked for its
        # CommitLog end before each connection; "" when unknown.
        self.master_remoting_address = ""
        self.connected = asyncio.Event()
        self.reported_offset = 0
        self.transfers = 0
        self.truncations = 0  # cuts back to a master's end
        # Why this slave follows no master now ("" when it does): a refused cut.
        self.refusal = ""
        self._logged: set[tuple[str, ...]] = set()
        self._writer: MasterStream | None = None

    def update_master_address(self, address: str, remoting_address: str = "") -> None:
        """A new master (from the name servers' registration answer): the connection to
        the old one, if any, is dropped and the next one goes to this address.
        ``remoting_address`` (the answer's masterAddr) is where its CommitLog end is
        asked."""
        if remoting_address:
            self.master_remoting_address = remoting_address
        if address and address != self.master_address:
            log.info("replication: master address %r -> %r", self.master_address, address)
            self.master_address = address
            if self._writer is not None:
                self._writer.close()

    def _log_once(self, level: int, key: tuple[str, ...], message: str, *args: object) -> None:
        """Log ``message`` at ``level`` the first time for ``key``, at DEBUG after (a slave
        retries every reconnect pause)."""
        if key in self._logged:
            log.debug(message, *args)
        else:
            self._logged.add(key)
            log.log(level, message, *args)

    def runtime_info(self) -> dict[str, str]:
        """A slave's figures for brokerStatus (rocketstore's names: RocketMQ 4.9.8 reports
        no replication figures there)."""
        return {
            "haMasterAddress": self.master_address,
            "haConnectedToMaster": "true" if self.connected.is_set() else "false",
            "haReportedOffset": str(self.reported_offset),
            "haTruncations": str(self.truncations),
            "haRefusal": self.refusal,
        }

    async def _run(self) -> None:
        while True:
            address = self.master_address
            if address:
                try:
                    if await self._agree_with_master(address, await self._master_end()):
                        await self._follow(address)
                except MasterBehindError as e:
                    await self._agree_with_master(address, e.master_end)
                except (OSError, TimeoutError) as e:
                    log.info("replication: master %s: %s", address, e)
                except (CorruptDataError, ConfigError, StoreError) as e:
                    log.error("replication: master %s: %s; connecting again", address, e)
                finally:
                    self.connected.clear()
                    self._writer = None
            pause = self.reconnect_pause_s
            await asyncio.sleep(RECONNECT_PAUSE_S if pause is None else pause)

    async def _master_end(self) -> int | None:
        """The master's CommitLog max offset from its GET_BROKER_RUNTIME_INFO, or None when
        its remoting address is unknown or it does not answer (logged once)."""
        address = self.master_remoting_address
        if not address:
            return None
        client = RemotingClient(address)
        try:
            answer = await client.invoke(
                signed(request(RequestCode.GET_BROKER_RUNTIME_INFO), self.config),
                RUNTIME_INFO_TIMEOUT_S,
            )
            if answer.code != ResponseCode.SUCCESS:
                raise ValueError(f"answered {answer.code}: {answer.remark}")
            table = json.loads(answer.body.decode("utf-8"))["table"]
            end = int(table["commitLogMaxOffset"])
        except (OSError, TimeoutError, RemotingClientError, ValueError, KeyError, TypeError) as e:
            self._log_once(
                logging.WARNING,
                ("no end", address),
                "replication: master %s's CommitLog end not learned (%s); only a rocketstore "
                "master's heartbeat tells this slave it has more than the master",
                address,
                e,
            )
            return None
        finally:
            await client.close()
        return end

    async def _agree_with_master(self, address: str, master_end: int | None) -> bool:
        """Cut this slave's CommitLog back to ``master_end`` when it holds more; False when
        the cut is refused (logged loudly; the slave then follows nobody)."""
        store = self.store
        end = store.max_commit_log_offset()
        if master_end is None:
            return True  # unknown: a rocketstore master's heartbeat may still tell
        if end <= master_end:
            self.refusal = ""
            return True
        low = max(store.min_commit_log_offset(), 0)
        note = (
            f"master {address} (HA) ends at {master_end}; this slave's CommitLog held "
            f"[{low}, {end})"
        )
        report = await asyncio.to_thread(
            store.truncate_commitlog,
            master_end,
            allow_empty=self.config.ha_allow_full_truncate,
            note=note,
        )
        key = (address, str(master_end), str(end), report.status.value)
        if report.status is TruncateStatus.TRUNCATED:
            self.truncations += 1
            self.refusal = ""
            log.warning(
                "replication: this slave had %d bytes more than its master %s (CommitLog "
                "[%d, %d), the master's ends at %d): cut back to %d, %d files deleted, file "
                "%s cut, %d queue units and %d index entries dropped; the cut bytes are kept "
                "in %s",
                report.bytes_cut,
                address,
                low,
                end,
                master_end,
                report.offset,
                len(report.files_deleted),
                report.file_cut or "-",
                report.queue_units_dropped,
                report.index_entries_dropped,
                report.kept_dir,
            )
            return True
        if report.status is TruncateStatus.NOTHING_TO_CUT:
            return True
        if report.status is TruncateStatus.BELOW_MIN_OFFSET:
            self.refusal = (
                f"master {address} ends at {master_end}, at or below this slave's first "
                f"CommitLog offset {low}: following it would erase this slave's whole copy "
                f"[{low}, {end})"
            )
            self._log_once(
                logging.ERROR,
                key,
                "replication: REFUSED: %s (an empty or new master disk?). This slave keeps "
                "its data and serves reads but follows no master; set haAllowFullTruncate="
                "true to let it cut everything (kept aside in truncated-*/ under the store)",
                self.refusal,
            )
            return False
        self.refusal = (
            f"master {address} ends at {master_end}, where no record starts in this "
            f"slave's CommitLog [{low}, {end}): the two copies differ before it"
        )
        self._log_once(
            logging.ERROR,
            key,
            "replication: REFUSED: %s. This slave keeps its data and serves reads but "
            "follows no master; compare the stores (rocketstore compare) and decide",
            self.refusal,
        )
        return False

    async def _follow(self, address: str) -> None:
        host, port = parse_host(address, what="master HA address")
        loop = asyncio.get_running_loop()
        transport, stream = await asyncio.wait_for(
            loop.create_connection(MasterStream, host, port), CONNECT_TIMEOUT_S
        )
        self._writer = stream
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            log.info("replication: following master %s", address)
            await self._exchange(stream)
        finally:
            stream.close()

    def _report(self, stream: MasterStream, offset: int) -> float:
        stream.write(ha.encode_report(offset))
        self.reported_offset = offset
        return time.monotonic()

    async def _exchange(self, stream: MasterStream) -> None:
        config = self.config
        heartbeat_s = config.ha_send_heartbeat_interval_ms / 1000
        housekeeping_s = config.ha_housekeeping_interval_ms / 1000
        last_report = self._report(stream, self.store.max_commit_log_offset())
        self.connected.set()
        last_read = time.monotonic()
        while True:
            wait = max(0.0, heartbeat_s - (time.monotonic() - last_report))
            view = await stream.read(wait or 0.001)
            now = time.monotonic()
            if view is None:
                if stream.closed:
                    log.info("replication: master closed the connection")
                    return
                if now - last_read > housekeeping_s:
                    log.warning("replication: master silent for %.0f s; closing", housekeeping_s)
                    return
                last_report = self._report(stream, self.store.max_commit_log_offset())
                continue
            last_read = now
            try:
                syncs = self.store.config.flush_disk_type == "SYNC_FLUSH"
                if len(view) <= INLINE_APPEND_BYTES and not syncs:
                    used, end = self._append_transfers(view)
                else:
                    stream.pause()
                    used, end = await asyncio.to_thread(self._append_transfers, view)
            finally:
                view.release()
            stream.consumed(used)
            self.refusal = ""  # the master's bytes follow this slave's
            if end > self.reported_offset or now - last_report >= heartbeat_s:
                last_report = self._report(stream, end)

    def _append_transfers(self, buf: memoryview) -> tuple[int, int]:
        """Append every whole transfer in ``buf`` (on the loop, or a worker thread's
        call: ``_exchange``); how many bytes
        of ``buf`` they took and the store's end after them. Transfers that follow one
        another are appended as one (a slave's per-call cost is paid per read, not per
        haTransferBatchSize); their frames are read in one call (``ha.transfer_run``).
        A bad header appends nothing of the receive; a transfer that does not follow
        appends those before it."""
        store_end = self.store.max_commit_log_offset()
        run = ha.transfer_run(buf, store_end)
        bodies = run.bodies
        try:
            self.transfers += len(bodies)
            if run.stop == ha.TransferStop.BAD_HEADER:
                ha.decode_transfer(buf, run.position)  # raises CorruptDataError, named
                raise CorruptDataError("bad HA transfer header", position=run.position)
            self._append_run(run.first_offset, bodies)
            if run.stop == ha.TransferStop.BEHIND:
                # A rocketstore master tells a slave reporting more where it ends.
                raise MasterBehindError(run.at, run.end)
            if run.stop == ha.TransferStop.NOT_FOLLOWING:
                raise CorruptDataError(
                    f"master sent offset {run.at}, this slave's CommitLog ends at {run.end}"
                )
            return run.position, self.store.max_commit_log_offset()
        finally:
            bodies.clear()

    def _append_run(self, offset: int, bodies: list[memoryview]) -> None:
        """Append transfers that follow one another as one, straight from the receive
        buffer (one pwritev: no join)."""
        if bodies:
            try:
                self.store.append_replicated_parts(
                    offset, bodies, check_crc=self.config.ha_check_body_crc
                )
            finally:
                bodies.clear()
